// The configuration loader: YAML file + kubelet-style flags -> Config.
//
// Its parts, so that adding a field is one line (load_internal.hpp):
//   codecs.*          how one YAML scalar becomes one C++ field and back;
//   schema.cpp        the section tables: one line per field (key, member, codec);
//   flags.cpp         the flag table: one line per command-line flag (flag, YAML path);
//   eviction.cpp      the KubeletConfiguration-named top-level keys;
//   kubelet_import.cpp the node's KubeletConfiguration, when kubelet.configPath is set;
//   validate.cpp      validation across fields;
//   dump.cpp          the effective configuration back as YAML, and where each value came from.
// This file reads the text, runs the parts in that order and hands out the result.

#include "config/load.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include <spdlog/spdlog.h>
#include <yaml-cpp/yaml.h>

#include "config/load_internal.hpp"
#include "config/yaml_guard.hpp"
#include "kernel/file.hpp"

namespace pressured::config_detail {

bool no_content(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t eol = text.find('\n', i);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = text.substr(i, eol - i);
    auto first = line.find_first_not_of(" \t\r");
    if (first != std::string_view::npos && line[first] != '#') return false;
    i = eol + 1;
  }
  return true;
}

}  // namespace pressured::config_detail

namespace pressured {

using namespace config_detail;

namespace {

Result<Config> parse_tree(Node root, const std::string& source, const ConfigOptions& o,
                          std::vector<std::string>* warnings, const std::string* kubelet_text);

// Where the settings of the file and flags came from.
void record_sources(Config& cfg, const Node& root, const std::string& source, const Ctx& ctx) {
  const std::string file = source == "config" ? "configuration text" : "file " + source;
  auto origin = [&](const std::string& key) {
    auto it = ctx.origin.find(key);
    return it == ctx.origin.end() ? file : "flag " + it->second;
  };
  for (auto it = root.begin(); it != root.end(); ++it) {
    const std::string key = it->first.as<std::string>();
    if (is_eviction_key(key)) {
      cfg.sources[key] = origin(key);
      if ((key == "evictionHard" || key == "evictionSoft") && it->second.IsMap()) {
        for (auto s = it->second.begin(); s != it->second.end(); ++s) {
          cfg.sources[key + "." + s->first.as<std::string>()] = origin(key);
        }
      }
    } else if (it->second.IsMap()) {
      for (auto f = it->second.begin(); f != it->second.end(); ++f) {
        const std::string path = key + "." + f->first.as<std::string>();
        cfg.sources[path] = origin(path);
      }
    }
  }
}

Result<Config> parse_impl(const std::string& text, const std::string& source, const ConfigOptions& o,
                          std::vector<std::string>* warnings, const std::string* kubelet_text = nullptr) {
  // Bounded (depth, aliases) and strict: a key given twice is an error, not
  // a silent last-wins.
  if (auto g = check_yaml(text); !g) return Error{EINVAL, source + ": " + g.error().message};
  Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Error{EINVAL, source + ": line " + std::to_string(e.mark.line + 1) + ", column " +
                             std::to_string(e.mark.column + 1) + ": " + e.msg};
  }
  // Decoding only throws on shapes the checks above do not expect (a list
  // used as a key, ...): report it rather than crash.
  try {
    return parse_tree(root, source, o, warnings, kubelet_text);
  } catch (const YAML::Exception& e) {
    return Error{EINVAL, source + ": line " + std::to_string(e.mark.line + 1) + ": " + e.msg};
  }
}

Result<Config> parse_tree(Node root, const std::string& source, const ConfigOptions& o,
                          std::vector<std::string>* warnings, const std::string* kubelet_text) {
  if (!root || root.IsNull()) root = Node(YAML::NodeType::Map);
  if (!root.IsMap()) return Error{EINVAL, source + ": the top level must be a mapping of keys to values"};

  Ctx ctx;
  if (auto r = apply_flags(root, o, ctx); !r) return r.error();

  Config cfg;
  std::map<std::string, Node> eviction_keys;
  for (auto it = root.begin(); it != root.end(); ++it) {
    const std::string key = it->first.as<std::string>();
    if (is_eviction_key(key)) {
      eviction_keys[key] = it->second;
      continue;
    }
    const auto& secs = sections();
    auto sec = std::find_if(secs.begin(), secs.end(), [&](const Section& s) { return s.name == key; });
    if (sec == secs.end()) {
      std::string known;
      for (const char* k : kEvictionKeys) known += std::string(known.empty() ? "" : ", ") + k;
      for (const auto& s : secs) known += ", " + s.name;
      return Error{EINVAL, key + ": unknown key (known top-level keys: " + known + ")"};
    }
    if (it->second.IsNull()) continue;
    if (!it->second.IsMap()) return value_error(key, it->second, "is not a mapping");
    for (auto f = it->second.begin(); f != it->second.end(); ++f) {
      const std::string fkey = f->first.as<std::string>();
      const std::string path = key + "." + fkey;
      auto field = std::find_if(sec->fields.begin(), sec->fields.end(), [&](const auto& x) { return x.key == fkey; });
      if (field == sec->fields.end()) {
        std::string known;
        for (const auto& x : sec->fields) known += (known.empty() ? "" : ", ") + x.key;
        return Error{EINVAL, path + ": unknown key (known keys in " + key + ": " + known + ")"};
      }
      if (auto r = field->decode(f->second, cfg, ctx.where(path, path)); !r) return r.error();
    }
  }
  if (auto r = decode_eviction(eviction_keys, cfg.eviction, ctx); !r) return r.error();
  record_sources(cfg, root, source, ctx);
  if (!cfg.kubelet.config_path.empty()) {
    std::optional<std::string> text;
    if (kubelet_text != nullptr) {
      text = *kubelet_text;
    } else if (std::error_code ec; cfg.kubelet.if_missing != KubeletConfigMissing::KubeletDefaults ||
                                   std::filesystem::exists(cfg.kubelet.config_path, ec) || ec) {
      auto t = read_kubelet_config_file(cfg.kubelet.config_path);
      if (!t) return Error{t.error().code, ctx.where("kubelet.configPath", "kubelet.configPath") + ": " + t.error().message};
      text = std::move(*t);
    }
    if (auto r = apply_kubelet_config(cfg, eviction_keys, ctx, text); !r) return r.error();
  } else if (!cfg.kubelet.offsets.empty()) {
    return field_error(ctx.where("kubelet.thresholdOffset", "kubelet.thresholdOffset"),
                       "needs kubelet.configPath (--kubelet-config): it raises the kubelet's thresholds");
  }
  // pods.kind: apiserver talks to the same API server as the reporter.
  cfg.observe.pods.kubeconfig = cfg.kubernetes.kubeconfig;
  cfg.observe.pods.node_name = cfg.kubernetes.node_name;
  cfg.observe.pods.keep_labels = !cfg.plugins.directory.empty();
  if (auto r = validate_config(cfg); !r) return r.error();

  for (auto& w : ctx.warnings) {
    if (warnings) {
      warnings->push_back(w);
    } else {
      spdlog::warn("config: {}", w);
    }
  }
  return cfg;
}

Result<std::string> read_config_file(const std::string& path) {
  auto r = kernel::read_regular_file(path, kMaxConfigFileBytes);
  if (!r) return Error{r.error().code, "cannot read config file " + path + ": " + r.error().message};
  return std::move(r->text);
}

Result<Config> load_text(const std::string& text, const ConfigOptions& options, std::vector<std::string>* warnings) {
  std::string source = options.config_path.empty() ? "config" : options.config_path;
  if (!options.config_path.empty() && no_content(text)) {
    return Error{EINVAL, "config file " + options.config_path +
                             " is empty: an empty file is never taken as the defaults (write '{}' for them)"};
  }
  auto r = parse_impl(text, source, options, warnings);
  if (!r && !options.config_path.empty() && r.error().message.rfind(source, 0) != 0) {
    return Error{r.error().code, options.config_path + ": " + r.error().message};
  }
  return r;
}

}  // namespace

Result<Config> parse_config_yaml(const std::string& text, const ConfigOptions& overrides,
                                 std::vector<std::string>* warnings) {
  return parse_impl(text, "config", overrides, warnings);
}

Result<Config> parse_config_yaml_with_kubelet(const std::string& text, const std::string& kubelet_text,
                                              std::vector<std::string>* warnings) {
  return parse_impl(text, "config", {}, warnings, &kubelet_text);
}

bool ends_with_document_end(std::string_view text) {
  std::size_t end = text.find_last_not_of(" \t\r\n");
  if (end == std::string_view::npos) return false;
  std::size_t start = text.rfind('\n', end);
  start = start == std::string_view::npos ? 0 : start + 1;
  std::string_view last = text.substr(start, end + 1 - start);
  return last == "...";
}

Result<Config> load_config(const ConfigOptions& options, std::vector<std::string>* warnings) {
  std::string text;
  if (!options.config_path.empty()) {
    auto t = read_config_file(options.config_path);
    if (!t) return t.error();
    text = std::move(*t);
  }
  return load_text(text, options, warnings);
}

Result<Config> reload_config(const ConfigOptions& options, std::vector<std::string>* warnings) {
  if (options.config_path.empty()) return load_text("", options, warnings);  // flags only: nothing can be cut
  auto t = read_config_file(options.config_path);  // read once: check and parse the same bytes
  if (!t) return t.error();
  if (!no_content(*t) && !ends_with_document_end(*t)) {
    return Error{EINVAL, "config file " + options.config_path +
                             " does not end with the document end marker '...' on a line of its own: it may be "
                             "truncated (a write in progress), so it is not reloaded"};
  }
  return load_text(*t, options, warnings);
}

}  // namespace pressured
