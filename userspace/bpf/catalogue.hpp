#pragma once
// The BPF program catalogue: for each BpfProgram, the attach flavours it can
// run as, best first, and the pure choice among them against a BpfFeatures
// prober (userspace/bpf/attach_select.cpp; tested with a fake prober).

#include <string>
#include <vector>

#include "pressured/events.hpp"

namespace pressured {

struct AttachCandidate {
  AttachKind kind;
  std::string target;  // tracepoint or kernel function
  int arity = -1;      // fentry/kprobe: the parameter count the handler expects (-1: any)
};

struct AttachChoice {
  AttachKind kind = AttachKind::Off;
  std::string target;
  std::string reason;  // why this one, and why the better ones were refused
};

/// The fallback chain of each program, best first (tp_btf -> raw_tp;
/// fentry -> kprobe -> nearby tracepoint).
std::vector<AttachCandidate> attach_chain(BpfProgram p);

/// Pure: picks the first candidate whose BTF entry exists and that can attach.
AttachChoice choose_attach(const std::vector<AttachCandidate>& chain, const BpfFeatures& features);

}  // namespace pressured
