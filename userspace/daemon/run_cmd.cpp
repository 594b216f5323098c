// Scaffold: replaced by the real command.
#include <cstdio>

#include "commands.hpp"

namespace pressured::cli {

Command add_run(CLI::App& app) {
  Command c;
  c.sub = app.add_subcommand("run", "Run the daemon");
  c.run = [] {
    std::fprintf(stderr, "pressured run: not implemented yet\n");
    return 70;
  };
  return c;
}

}  // namespace pressured::cli
