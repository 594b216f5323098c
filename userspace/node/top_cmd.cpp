// Scaffold: replaced by the real command.
#include <cstdio>

#include "commands.hpp"

namespace pressured::cli {

Command add_top(CLI::App& app) {
  Command c;
  c.sub = app.add_subcommand("top", "Show node signals and pods in eviction order");
  c.run = [] {
    std::fprintf(stderr, "pressured top: not implemented yet\n");
    return 70;
  };
  return c;
}

}  // namespace pressured::cli
