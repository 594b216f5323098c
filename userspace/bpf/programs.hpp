#pragma once
// Private to userspace/bpf: which skeleton program implements which
// (BpfProgram, AttachKind, target), and libbpf logging control.

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "bpf/catalogue.hpp"
#include "pressured/events.hpp"

namespace pressured::bpf {

/// The skeleton program name for one candidate of a program's chain; empty if none.
std::string_view program_for(BpfProgram p, AttachKind kind, std::string_view target);

/// Pure: programs that only work as a pair (psi_memstall_enter/leave time a
/// stall between them): when one is off, the other is turned off too, with
/// a reason naming its partner's.
void pair_choices(AttachChoice& a, AttachChoice& b);

/// Whether one flavour of one program passes the verifier and its CO-RE
/// relocations on this kernel. The attach probes of BpfFeatures use a
/// two-instruction program, so they cannot see that a handler's real body is
/// refused (5.10 refuses fentry_try_charge with EINVAL); this asks about the
/// program itself.
class ProgramLoadProbe {
 public:
  virtual ~ProgramLoadProbe() = default;
  /// On false, `why` receives the kernel's answer (errno and the verifier's last words).
  virtual bool can_load(BpfProgram p, const AttachCandidate& c, std::string* why) const = 0;
};

/// One candidate the kernel refused to load, and why (for the log, the
/// metrics and the vmtests flavour table).
using LoadRefusal = EventStats::LoadRefusal;

/// One candidate whose real attach failed after it was chosen and loaded
/// (BpfEventSource), and the kernel's answer: the next selection skips it.
/// The tracepoint flavours are checked against BTF only, so the attach is
/// their probe.
struct AttachRefusal {
  BpfProgram program;
  AttachKind kind;
  std::string target;
  std::string why;
};

struct Selection {
  std::array<AttachChoice, kBpfProgramCount> choices;
  std::vector<LoadRefusal> load_refusals;  // in program order, then chain order
};

/// Pure: one flavour per program. Each chain is walked like choose_attach();
/// with `load` given, a candidate that can attach must also load, else it is
/// refused (recorded in load_refusals) and the next one is tried. A candidate
/// in `attach_refused` is refused with the attach's error, and the next one
/// is tried. The memstall pair is then made consistent (pair_choices).
Selection select_programs(const BpfFeatures& features, const ProgramLoadProbe* load,
                          const std::vector<AttachRefusal>& attach_refused = {});

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

/// Collects libbpf's printing while alive (the verifier log of a refused
/// program), then restores spdlog routing.
class CaptureLibbpf {
 public:
  CaptureLibbpf();
  ~CaptureLibbpf();
  CaptureLibbpf(const CaptureLibbpf&) = delete;
  CaptureLibbpf& operator=(const CaptureLibbpf&) = delete;
  const std::string& text() const { return text_; }
  /// The verifier's last words (the instruction it refused), or libbpf's
  /// last failure line when the kernel printed no log; empty if neither.
  std::string verifier_last_line() const;

 private:
  std::string text_;
};

/// Pure: the line of a libbpf load report that says why (see CaptureLibbpf).
std::string verifier_last_line(std::string_view libbpf_output);

}  // namespace pressured::bpf
