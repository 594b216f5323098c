// Scaffold: replaced by the real command.
#include <cstdio>

#include "commands.hpp"

namespace pressured::cli {

Command add_simulate(CLI::App& app) {
  Command c;
  c.sub = app.add_subcommand("simulate", "Replay a JSON Lines timeline through the eviction engine");
  c.run = [] {
    std::fprintf(stderr, "pressured simulate: not implemented yet\n");
    return 70;
  };
  return c;
}

}  // namespace pressured::cli
