// `pressured check-config --config FILE [flags]`: load, validate and print the
// effective configuration (YAML on stdout, warnings and errors on stderr).
// Exit 0 when valid, 1 with the error otherwise.
#include <cstdio>
#include <string>
#include <vector>

#include "commands.hpp"
#include "config/load.hpp"

namespace pressured::cli {

Command add_check_config(CLI::App& app) {
  Command c;
  c.sub = app.add_subcommand("check-config", "Validate a configuration and print the effective settings");
  auto opts = add_config_flags(c.sub);
  c.run = [opts] {
    std::vector<std::string> warnings;
    auto cfg = load_config(*opts, &warnings);
    for (const auto& w : warnings) std::fprintf(stderr, "pressured check-config: warning: %s\n", w.c_str());
    if (!cfg) {
      std::fprintf(stderr, "pressured check-config: error: %s\n", cfg.error().message.c_str());
      return 1;
    }
    std::fputs(dump_config(*cfg).c_str(), stdout);
    std::fputs(describe_sources(*cfg).c_str(), stdout);
    std::fprintf(stderr, "pressured check-config: %s: configuration is valid\n",
                 opts->config_path.empty() ? "(defaults and flags)" : opts->config_path.c_str());
    return 0;
  };
  return c;
}

}  // namespace pressured::cli
