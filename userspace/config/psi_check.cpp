#include "config/psi_check.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "pressured/signals.hpp"

namespace pressured {

PsiCheck check_psi(const Config& config) {
  const std::string file = config.observe.psi_dir() + "/memory";
  if (::access(file.c_str(), F_OK) == 0) return {};
  const int err = errno;
  std::string lost;
  for (const auto& t : config.eviction.thresholds) {
    if (!info(t.signal).is_psi) continue;
    lost += (lost.empty() ? "" : ", ") + std::string(name(t.signal)) +
            (t.kind == ThresholdKind::Hard ? " (hard)" : " (soft)");
  }
  PsiCheck c;
  c.available = false;
  c.message = "PSI: " + file + ": " + std::strerror(err) +
              ": this kernel has no PSI (booted with psi=0, or built without CONFIG_PSI; psi=1 on the kernel command "
              "line turns it on). Running without it: memory.pressure.* and io.pressure.* are not observed, no PSI "
              "trigger wakes pressured (BPF, memcg notifications and the safety-net poll still do)" +
              (lost.empty() ? std::string() : "; these thresholds cannot fire: " + lost) + ".";
  return c;
}

}  // namespace pressured
