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
#include <string_view>

#include "pressured/result.hpp"

namespace pressured {

/// Configures the default spdlog logger: level (trace..off) and format
/// ("text" or "json"). Logs go to stderr (journald/kubectl logs pick them up).
Result<void> setup_logging(const std::string& level, const std::string& format);

/// Text from outside (an HTTP error body, a file) made safe for a log line:
/// control characters and bytes >= 0x7f become \xNN (so a remote peer cannot
/// forge log lines or terminal escapes), cut after `max_bytes` of input with
/// a note of how much was left out.
std::string printable_excerpt(std::string_view text, std::size_t max_bytes = 200);

}  // namespace pressured
