#pragma once
// A machine without BPF, for tests and benchmarks of the parts around it
// (the reactor with fake sources, the fallback paths): every probe says no.

#include <string>
#include <string_view>

#include "pressured/events.hpp"

namespace pressured::testing {

class NoBpf final : public BpfFeatures {
 public:
  bool bpf_available() const override { return false; }
  bool has_btf_type(std::string_view) const override { return false; }
  bool can_attach(AttachKind, std::string_view, std::string*) const override { return false; }
  int tracepoint_arity(std::string_view) const override { return -1; }
};

}  // namespace pressured::testing
