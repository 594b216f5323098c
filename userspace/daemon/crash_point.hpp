#pragma once
// Named points in an eviction's life where the crash-consistency test makes
// the daemon die (tests/daemon/crash_consistency_test.cpp): with
// PRESSURED_CRASH_AT=<point> in its environment, the daemon raises SIGKILL on
// itself the first time it reaches that point. Always compiled in; without
// the variable (every real deployment) a call is one load and a compare.
//
// Points: decision (the policy chose, nothing written yet), checkpoint (the
// decision is on disk, nothing done yet), signal (a SIGTERM went out), kill
// (a SIGKILL went out), api-queued (the API eviction is in the reporter's
// queue), api-landed (the API accepted it, the daemon has not heard yet),
// grace (a soft eviction waits for its grace period's end).

#include <string_view>

namespace pressured {

/// Raises SIGKILL when PRESSURED_CRASH_AT names `point`.
void crash_point(std::string_view point);

}  // namespace pressured
