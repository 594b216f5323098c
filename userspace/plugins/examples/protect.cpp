// pressured-plugin-protect: an example eviction plugin (docs/plugins.md).
//
// Protects pods from eviction by namespace or by label, and demotes others
// (evicted only after every other candidate), for every resource:
//
//   pressured-plugin-protect --socket /run/pressured/plugins/protect.sock
//       --protect kube-system --protect payments --demote-last batch
//       --protect-selector 'app=db,tier!=canary' --demote-selector batch
//
// `--protect ns/name-prefix` protects only the pods of `ns` whose name starts
// with the prefix. A selector is Kubernetes' equality-based label selector:
// requirements joined by commas, all of which must hold (`k=v`, `k==v`,
// `k!=v`, `k`: the label is set, `!k`: it is not). A pod whose labels
// pressured could not send whole (labels_incomplete) is protected by a
// selector whose outcome depends on a label it lacks, and never demoted by
// one. pressured decides what a protection may do: under a hard threshold
// the last candidate is evicted all the same.

#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "plugin_v1alpha1.grpc.pb.h"

namespace pb = ::pressured::plugin::v1alpha1;

namespace {

struct Rule {
  std::string ns;
  std::string name_prefix;  // empty: every pod of the namespace
  bool matches(const pb::Pod& p) const {
    return p.namespace_() == ns && p.name().compare(0, name_prefix.size(), name_prefix) == 0;
  }
  std::string text() const { return name_prefix.empty() ? "namespace " + ns : ns + "/" + name_prefix + "*"; }
};

Rule parse_rule(const std::string& s) {
  const auto slash = s.find('/');
  if (slash == std::string::npos) return Rule{s, ""};
  return Rule{s.substr(0, slash), s.substr(slash + 1)};
}

// An equality-based label selector: every requirement must hold.
struct Selector {
  struct Requirement {
    enum Op { Equals, NotEquals, Exists, NotExists } op = Exists;
    std::string key, value;
  };
  std::string text;
  std::vector<Requirement> requirements;

  enum class Match { No, Yes, Unknown };
  // Unknown: it depends on a label the pod lacks while its labels are
  // incomplete (pressured left some out).
  Match matches(const pb::Pod& p) const {
    bool unknown = false;
    for (const Requirement& r : requirements) {
      const auto it = p.labels().find(r.key);
      const bool has = it != p.labels().end();
      if (!has && p.labels_incomplete()) {
        unknown = true;
        continue;
      }
      bool holds = false;
      switch (r.op) {
        case Requirement::Equals: holds = has && it->second == r.value; break;
        case Requirement::NotEquals: holds = !has || it->second != r.value; break;
        case Requirement::Exists: holds = has; break;
        case Requirement::NotExists: holds = !has; break;
      }
      if (!holds) return Match::No;
    }
    return unknown ? Match::Unknown : Match::Yes;
  }
};

bool valid_key(const std::string& k) {
  if (k.empty() || k.size() > 253 + 1 + 63) return false;
  for (char c : k) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.' && c != '/') return false;
  }
  return true;
}

std::optional<Selector> parse_selector(const std::string& s, std::string& error) {
  Selector sel;
  sel.text = s;
  std::size_t start = 0;
  while (start <= s.size()) {
    const std::size_t comma = s.find(',', start);
    std::string part = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    part.erase(0, part.find_first_not_of(' '));
    part.erase(part.find_last_not_of(' ') + 1);
    Selector::Requirement r;
    std::size_t op;
    if ((op = part.find("!=")) != std::string::npos) {
      r.op = Selector::Requirement::NotEquals;
      r.key = part.substr(0, op);
      r.value = part.substr(op + 2);
    } else if ((op = part.find("==")) != std::string::npos) {
      r.op = Selector::Requirement::Equals;
      r.key = part.substr(0, op);
      r.value = part.substr(op + 2);
    } else if ((op = part.find('=')) != std::string::npos) {
      r.op = Selector::Requirement::Equals;
      r.key = part.substr(0, op);
      r.value = part.substr(op + 1);
    } else if (!part.empty() && part[0] == '!') {
      r.op = Selector::Requirement::NotExists;
      r.key = part.substr(1);
    } else {
      r.key = part;
    }
    r.key.erase(r.key.find_last_not_of(' ') + 1);
    r.value.erase(0, r.value.find_first_not_of(' '));
    if (!valid_key(r.key) || r.value.size() > 63 || r.value.find_first_of("=!,") != std::string::npos) {
      error = "selector \"" + s + "\": requirement \"" + part +
              "\" is not k=v, k==v, k!=v, k or !k with a label key and value";
      return std::nullopt;
    }
    sel.requirements.push_back(std::move(r));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return sel;
}

class Protect final : public pb::EvictionPlugin::Service {
 public:
  Protect(std::string name, std::vector<Rule> protect, std::vector<Rule> demote, std::vector<Selector> protect_sel,
          std::vector<Selector> demote_sel)
      : name_(std::move(name)),
        protect_(std::move(protect)),
        demote_(std::move(demote)),
        protect_sel_(std::move(protect_sel)),
        demote_sel_(std::move(demote_sel)) {}

  grpc::Status Identify(grpc::ServerContext*, const pb::IdentifyRequest* req, pb::IdentifyResponse* resp) override {
    if (req->api_version() != "v1alpha1") {
      std::fprintf(stderr, "protect: pressured speaks %s, this plugin v1alpha1\n", req->api_version().c_str());
    }
    const auto& f = req->features();
    if ((!protect_sel_.empty() || !demote_sel_.empty()) && std::find(f.begin(), f.end(), "pod-labels") == f.end()) {
      // An older pressured sends no labels: every selector would match nothing.
      std::fprintf(stderr, "protect: this pressured sends no pod labels: refusing to register with label selectors\n");
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "pressured sends no pod labels (feature pod-labels): label selectors cannot be honoured");
    }
    resp->set_name(name_);
    resp->set_version("1.0");
    resp->add_capabilities(pb::RANK);
    return grpc::Status::OK;
  }

  grpc::Status RankCandidates(grpc::ServerContext*, const pb::RankCandidatesRequest* req,
                              pb::RankCandidatesResponse* resp) override {
    for (const pb::Pod& p : req->candidates()) {
      if (auto protection = protected_by(p)) {
        add(resp, p, pb::PROTECT, "protected: " + *protection);
      } else if (auto demotion = demoted_by(p)) {
        add(resp, p, pb::DEMOTE, "evicted last: " + *demotion);
      }
    }
    return grpc::Status::OK;
  }

 private:
  std::optional<std::string> protected_by(const pb::Pod& p) const {
    for (const Rule& r : protect_) {
      if (r.matches(p)) return r.text();
    }
    for (const Selector& s : protect_sel_) {
      switch (s.matches(p)) {
        case Selector::Match::Yes: return "labels " + s.text;
        case Selector::Match::Unknown: return "labels " + s.text + " (labels incomplete)";
        case Selector::Match::No: break;
      }
    }
    return std::nullopt;
  }
  std::optional<std::string> demoted_by(const pb::Pod& p) const {
    for (const Rule& r : demote_) {
      if (r.matches(p)) return r.text();
    }
    for (const Selector& s : demote_sel_) {
      if (s.matches(p) == Selector::Match::Yes) return "labels " + s.text;
    }
    return std::nullopt;
  }
  static void add(pb::RankCandidatesResponse* resp, const pb::Pod& p, pb::Action action, const std::string& reason) {
    auto* a = resp->add_adjustments();
    a->set_uid(p.uid());
    a->set_action(action);
    a->set_reason(reason);
  }

  std::string name_;
  std::vector<Rule> protect_, demote_;
  std::vector<Selector> protect_sel_, demote_sel_;
};

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

int usage() {
  std::fprintf(stderr,
               "usage: pressured-plugin-protect --socket PATH [--name NAME] [--protect NS[/PREFIX]]... "
               "[--demote-last NS[/PREFIX]]... [--protect-selector SELECTOR]... [--demote-selector SELECTOR]...\n"
               "  SELECTOR: k=v, k==v, k!=v, k or !k, joined by commas (all must hold)\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string socket, name = "protect";
  std::vector<Rule> protect, demote;
  std::vector<Selector> protect_sel, demote_sel;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i], v;
    if (const auto eq = a.find('='); a.starts_with("--") && eq != std::string::npos) {  // --flag=value
      v = a.substr(eq + 1);
      a.resize(eq);
    } else if (i + 1 < argc) {
      v = argv[++i];
    } else {
      return usage();
    }
    if (a == "--protect-selector" || a == "--demote-selector") {
      std::string error;
      auto sel = parse_selector(v, error);
      if (!sel) {
        std::fprintf(stderr, "protect: %s\n", error.c_str());
        return 2;
      }
      (a == "--protect-selector" ? protect_sel : demote_sel).push_back(std::move(*sel));
    } else if (a == "--socket") {
      socket = v;
    } else if (a == "--name") {
      name = v;
    } else if (a == "--protect") {
      protect.push_back(parse_rule(v));
    } else if (a == "--demote-last") {
      demote.push_back(parse_rule(v));
    } else {
      return usage();
    }
  }
  if (socket.empty() || (protect.empty() && demote.empty() && protect_sel.empty() && demote_sel.empty())) {
    return usage();
  }
  // A socket left by an earlier run would refuse the bind.
  ::unlink(socket.c_str());
  Protect service(name, protect, demote, protect_sel, demote_sel);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + socket, grpc::InsecureServerCredentials());
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) {
    std::fprintf(stderr, "protect: cannot listen on %s\n", socket.c_str());
    return 1;
  }
  std::fprintf(stderr, "protect: %s serving on %s\n", name.c_str(), socket.c_str());
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  while (!g_stop) ::pause();
  server->Shutdown();
  ::unlink(socket.c_str());  // pressured drops the plugin when its socket goes
  return 0;
}
