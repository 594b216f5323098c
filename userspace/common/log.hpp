#pragma once
// Logging. Levels, used the same way everywhere:
//   error: pressured cannot do its job (an eviction failed, BPF and every
//          fallback failed, the config is invalid at startup).
//   warn:  degraded but working (a fallback attach, stale metadata, dropped
//          events, a refused reload); logged once per cause and counted.
//   info:  what an operator wants in the journal: startup, attach modes,
//          condition flips, every eviction (id, signal, observed, threshold).
//   debug: per-event detail for diagnosing.
//   trace: per-read detail; never in production.

#include <string>

#include "pressured/result.hpp"

namespace pressured {

/// Configures the default spdlog logger: level (trace..off) and format
/// ("text" or "json"). Logs go to stderr (journald/kubectl logs pick them up).
Result<void> setup_logging(const std::string& level, const std::string& format);

}  // namespace pressured
