// Scaffold: replaced by the real command.
#include <cstdio>

#include "commands.hpp"

namespace pressured::cli {

Command add_demo(CLI::App& app) {
  Command c;
  c.sub = app.add_subcommand("demo", "Run the sandbox demo");
  c.run = [] {
    std::fprintf(stderr, "pressured demo: not implemented yet\n");
    return 70;
  };
  return c;
}

}  // namespace pressured::cli
