#pragma once
// Whether the kernel has PSI, and what a node without it loses, in words for
// the start-up log: a kernel booted with psi=0 (or built without CONFIG_PSI)
// has no system pressure files, and pressured runs on without PSI signals and
// triggers rather than refusing to start (docs/operations.md, "Platform
// preconditions").

#include <string>

#include "pressured/config.hpp"

namespace pressured {

struct PsiCheck {
  bool available = true;
  /// Empty when available; else one warn line naming the path, the cause,
  /// the remedy and the configured thresholds that cannot fire.
  std::string message;
};

/// Looks for `<config.observe.psi_dir()>/memory`.
PsiCheck check_psi(const Config& config);

}  // namespace pressured
