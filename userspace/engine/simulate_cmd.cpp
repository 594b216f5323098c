// `pressured simulate --config FILE [flags] [--engine-only] [--input timeline.jsonl]`:
// replay a JSON Lines timeline through the eviction engine and policy (the
// daemon's own objects) and print what they do as JSON Lines (format:
// docs/engine.md). Exit 0 when the whole timeline was
// processed, 1 on a configuration or input error (with the line number).
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "commands.hpp"
#include "config/load.hpp"
#include "engine/simulator.hpp"

namespace pressured::cli {

Command add_simulate(CLI::App& app) {
  Command c;
  c.sub = app.add_subcommand("simulate", "Replay a JSON Lines timeline through the eviction engine");
  auto opts = add_config_flags(c.sub);
  auto input = std::make_shared<std::string>("-");
  c.sub->add_option("--input", *input, "Timeline file (JSON Lines); - or absent: stdin")->type_name("FILE");
  auto engine_only = std::make_shared<bool>(false);
  c.sub->add_flag("--engine-only", *engine_only,
                  "Replay the engine alone: every decision is an eviction, nothing waits for a release");
  c.run = [opts, input, engine_only] {
    std::vector<std::string> warnings;
    auto cfg = load_config(*opts, &warnings);
    for (const auto& w : warnings) std::fprintf(stderr, "pressured simulate: warning: %s\n", w.c_str());
    if (!cfg) {
      std::fprintf(stderr, "pressured simulate: error: %s\n", cfg.error().message.c_str());
      return 1;
    }
    std::ifstream file;
    std::istream* in = &std::cin;
    std::string label = "stdin";
    if (*input != "-") {
      file.open(*input);
      if (!file) {
        std::fprintf(stderr, "pressured simulate: error: cannot read %s: %s\n", input->c_str(), std::strerror(errno));
        return 1;
      }
      in = &file;
      label = *input;
    }
    std::optional<PolicyConfig> policy;
    if (!*engine_only) {
      policy = policy_config(cfg->daemon, /*api=*/false);  // simulate talks to no API
    }
    auto r = simulate_stream(*in, std::cout, cfg->eviction, policy);
    std::cout.flush();
    if (!r) {
      std::fprintf(stderr, "pressured simulate: error: %s: %s\n", label.c_str(), r.error().message.c_str());
      return 1;
    }
    return 0;
  };
  return c;
}

}  // namespace pressured::cli
