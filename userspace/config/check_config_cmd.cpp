// Scaffold: replaced by the real command.
#include <cstdio>

#include "commands.hpp"

namespace pressured::cli {

Command add_check_config(CLI::App& app) {
  Command c;
  c.sub = app.add_subcommand("check-config", "Validate a configuration and print the effective settings");
  c.run = [] {
    std::fprintf(stderr, "pressured check-config: not implemented yet\n");
    return 70;
  };
  return c;
}

}  // namespace pressured::cli
