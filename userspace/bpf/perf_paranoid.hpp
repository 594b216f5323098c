#pragma once
// Why perf_event_open refused a kprobe, in an operator's words. Debian and
// Ubuntu kernels (CONFIG_SECURITY_PERF_EVENTS_RESTRICT and its like) default
// kernel.perf_event_paranoid to 3, where perf_event_open asks for
// CAP_SYS_ADMIN whatever else the caller has: the DaemonSet's CAP_PERFMON is
// not enough there, and a kprobe program stays off.

#include <optional>
#include <string>

namespace pressured::bpf {

/// kernel.perf_event_paranoid as <proc_root>/sys/kernel/perf_event_paranoid
/// says; nullopt when it cannot be read or parsed (no perf events, a masked
/// /proc): then nothing is claimed about it.
std::optional<int> read_perf_event_paranoid(const std::string& proc_root = "/proc");

/// Pure: the reason for a refused kprobe perf_event_open (`err` its errno).
/// When the refusal is EACCES or EPERM and `paranoid` is above 2, the reason
/// names the sysctl, its value and the remedy (the node sysctl
/// kernel.perf_event_paranoid=2, or the program stays off and PSI and the
/// other hooks cover it); otherwise it is "<what>: <strerror>".
std::string perf_event_refusal(const char* what, int err, std::optional<int> paranoid);

/// Pure: an off program's reason, led by the sysctl and its remedy when a
/// refusal in it came from kernel.perf_event_paranoid (perf_event_refusal's
/// words), so that the first 128 characters, all that
/// pressured_bpf_program_info's reason label keeps, say what to do; any other
/// reason is returned as it is.
std::string lead_with_perf_paranoid(std::string reason);

}  // namespace pressured::bpf
