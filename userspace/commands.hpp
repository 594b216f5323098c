#pragma once
// The pressured subcommands. Each concern registers its own; main() only
// parses and dispatches. A command's `run` returns the process exit code.

#include <functional>

#include <CLI/CLI.hpp>

namespace pressured::cli {

struct Command {
  CLI::App* sub = nullptr;
  std::function<int()> run;
};

Command add_check_config(CLI::App& app);  // userspace/config
Command add_simulate(CLI::App& app);      // userspace/engine
Command add_top(CLI::App& app);           // userspace/node
Command add_run(CLI::App& app);           // userspace/daemon
Command add_demo(CLI::App& app);          // userspace/daemon
Command add_install_seccomp(CLI::App& app);  // userspace/daemon
Command add_uninstall(CLI::App& app);        // userspace/daemon

}  // namespace pressured::cli
