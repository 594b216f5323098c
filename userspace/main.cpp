// pressured: see README.md. main() parses the command line and dispatches;
// everything else lives in the concerns under userspace/.
#include <cstdio>
#include <exception>
#include <vector>

#include "commands.hpp"
#include "pressured/build_info.hpp"

int main(int argc, char** argv) {
  CLI::App app{"pressured: real-time node pressure detection and pod eviction"};
  app.set_version_flag("--version", pressured::build_info::kVersion);
  app.require_subcommand(1);

  std::vector<pressured::cli::Command> commands{
      pressured::cli::add_run(app),     pressured::cli::add_check_config(app),
      pressured::cli::add_simulate(app), pressured::cli::add_top(app),
      pressured::cli::add_demo(app),     pressured::cli::add_install_seccomp(app),
      pressured::cli::add_uninstall(app),
  };

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (auto& c : commands) {
    if (c.sub->parsed()) {
      try {
        return c.run();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "pressured %s: error: %s\n", c.sub->get_name().c_str(), e.what());
        return 1;
      }
    }
  }
  return 2;
}
