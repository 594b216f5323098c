// The configuration loader on arbitrary YAML: a Config or an error naming the
// problem; never a crash, a hang or unbounded memory.
#include <cstdint>
#include <string>

#include <spdlog/spdlog.h>

#include "config/load.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> warnings;
  auto c = pressured::parse_config_yaml(text, {}, &warnings);
  if (c) {
    // What loads must dump and load back.
    auto again = pressured::parse_config_yaml(pressured::dump_config(*c), {}, &warnings);
    if (!again) __builtin_trap();
  }
  return 0;
}
