#pragma once
// The real BPF feature prober, behind the BpfFeatures interface of
// pressured/events.hpp: main() builds it once and passes it down.

#include <memory>
#include <string>

#include "pressured/events.hpp"

namespace pressured {

/// The real prober (userspace/bpf/features.cpp). Results are cached.
/// `proc_root`: where kernel.perf_event_paranoid is read, to say why a
/// kprobe was refused.
std::unique_ptr<BpfFeatures> make_kernel_bpf_features(const std::string& proc_root = "/proc");

}  // namespace pressured
