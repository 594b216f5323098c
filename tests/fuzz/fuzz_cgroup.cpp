// The kernel-file parsers (memory.stat, memory.events, PSI, meminfo,
// loadavg, single values, flat-keyed files, /proc/cgroups, status) and
// mountinfo: a value or an error for any text.
#include <cstdint>
#include <string_view>

#include "kernel/parse.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pressured::kernel;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)parse_flat_keyed(text);
  (void)parse_memory_stat(text, true);
  (void)parse_memory_stat(text, false);
  (void)parse_memory_events(text);
  (void)parse_psi(text);
  (void)parse_single_value(text);
  (void)parse_meminfo(text);
  (void)parse_loadavg_tasks(text);
  (void)parse_proc_cgroups_hierarchy(text, "memory");
  (void)parse_status_cap_eff(text);
  std::size_t skipped = 0;
  for (const auto& m : parse_mountinfo(text, &skipped)) (void)m.has_option("memory");
  (void)count_lines(text);
  return 0;
}
