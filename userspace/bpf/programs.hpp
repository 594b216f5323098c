#pragma once
// Private to userspace/bpf: which skeleton program implements which
// (BpfProgram, AttachKind, target), and libbpf logging control.

#include <string_view>

#include "pressured/events.hpp"

namespace pressured::bpf {

/// The skeleton program name for one candidate of a program's chain; empty if none.
std::string_view program_for(BpfProgram p, AttachKind kind, std::string_view target);

/// Pure: programs that only work as a pair (psi_memstall_enter/leave time a
/// stall between them): when one is off, the other is turned off too, with
/// a reason naming its partner's.
void pair_choices(AttachChoice& a, AttachChoice& b);

/// Routes libbpf's printing into spdlog (warn and info as debug: libbpf is chatty).
void route_libbpf_logs();

/// Mutes libbpf while alive (probing prints expected failures), then restores spdlog routing.
class MuteLibbpf {
 public:
  MuteLibbpf();
  ~MuteLibbpf();
  MuteLibbpf(const MuteLibbpf&) = delete;
  MuteLibbpf& operator=(const MuteLibbpf&) = delete;
};

}  // namespace pressured::bpf
