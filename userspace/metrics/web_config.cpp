// The metrics port's web configuration file (node_exporter's format: TLS,
// basic-auth users with bcrypt hashes), plus a bearer token file.

#include "metrics/web_config.hpp"

#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "config/yaml_guard.hpp"
#include "pressured/metrics.hpp"

namespace pressured {

namespace web {

Result<std::string> read_text_file(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error::from_errno(errno, what + " " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace web

namespace {

bool is_bcrypt(const std::string& h) {
  return h.size() == 60 && h[0] == '$' && h[1] == '2' && (h[2] == 'a' || h[2] == 'b' || h[2] == 'y') && h[3] == '$';
}

}  // namespace


Result<WebConfig> load_web_config(const std::string& path) {
  auto text = web::read_text_file(path, "web config");
  if (!text) return text.error();
  const auto bad = [&](const std::string& why) { return Error{EINVAL, "web config " + path + ": " + why}; };
  if (auto g = check_yaml(*text); !g) return bad(g.error().message);
  YAML::Node root;
  try {
    root = YAML::Load(*text);
  } catch (const YAML::Exception& e) {
    return bad(std::string("syntax error: ") + e.what());
  }
  WebConfig out;
  if (!root || root.IsNull()) return out;  // an empty file: plain HTTP, no auth (as node_exporter)
  if (!root.IsMap()) return bad("not a mapping");
  const std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
  const auto relative_to_file = [&](const std::string& p) { return p.empty() || p[0] == '/' ? p : dir + "/" + p; };
  try {
    for (const auto& kv : root) {
      const std::string key = kv.first.as<std::string>();
      const YAML::Node& v = kv.second;
      if (key == "tls_server_config") {
        if (v.IsNull()) continue;
        if (!v.IsMap()) return bad("tls_server_config is not a mapping");
        for (const auto& t : v) {
          const std::string k = t.first.as<std::string>();
          if (k == "cert_file") out.cert_file = relative_to_file(t.second.as<std::string>());
          else if (k == "key_file") out.key_file = relative_to_file(t.second.as<std::string>());
          else if (k == "min_version") {
            out.min_version = t.second.as<std::string>();
            if (out.min_version != "VersionTLS12" && out.min_version != "VersionTLS13") {
              return bad("tls_server_config.min_version: " + out.min_version +
                         " is not supported (VersionTLS12 or VersionTLS13)");
            }
          } else if (k == "cipher_suites" || k == "client_auth_type" || k == "client_ca_file") {
            return bad("tls_server_config." + k + " is not supported (TLS 1.2+, no client certificates)");
          } else {
            return bad("unknown key tls_server_config." + k);
          }
        }
        if (out.cert_file.empty() != out.key_file.empty()) return bad("tls_server_config needs both cert_file and key_file");
      } else if (key == "basic_auth_users") {
        if (v.IsNull()) continue;
        if (!v.IsMap()) return bad("basic_auth_users is not a mapping of user: bcrypt-hash");
        for (const auto& u : v) {
          std::string user = u.first.as<std::string>(), hash = u.second.as<std::string>();
          if (user.empty() || user.find(':') != std::string::npos) return bad("basic_auth_users: invalid user name '" + user + "'");
          if (!is_bcrypt(hash)) return bad("basic_auth_users." + user + ": not a bcrypt hash ($2y$... as htpasswd -B makes)");
          out.basic_auth_users.emplace_back(user, hash);
        }
      } else if (key == "bearer_token_file") {
        if (v.IsNull()) continue;
        auto tok = web::read_text_file(relative_to_file(v.as<std::string>()), "bearer_token_file");
        if (!tok) return bad(tok.error().message);
        std::string t = *tok;
        while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ')) t.pop_back();
        if (t.size() < 16) return bad("bearer_token_file holds fewer than 16 characters");
        out.bearer_token = t;
      } else if (key == "http_server_config") {
        return bad("http_server_config is not supported (HTTP/1.1 only)");
      } else {
        return bad("unknown key '" + key + "'");
      }
    }
  } catch (const YAML::Exception& e) {
    return bad(std::string("expected a string: ") + e.what());
  }
  if (out.tls()) {
    for (const auto& f : {out.cert_file, out.key_file}) {
      if (::access(f.c_str(), R_OK) != 0) return bad(Error::from_errno(errno, "cannot read " + f).message);
    }
  }
  return out;
}

}  // namespace pressured
