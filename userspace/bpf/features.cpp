// The real BpfFeatures: kernel BTF lookups and load+attach probes with tiny
// programs. A probe counts only when the attach succeeds (kprobe programs load
// even where kprobes are compiled out).
#include "bpf/features.hpp"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include <spdlog/spdlog.h>

#include "bpf/kernel_btf.hpp"
#include "bpf/perf_paranoid.hpp"
#include "bpf/programs.hpp"
#include "kernel/fd.hpp"
#include "kernel/file.hpp"
#include "pressured/events.hpp"

namespace pressured {

namespace bpf {

namespace {

int libbpf_to_spdlog(enum libbpf_print_level level, const char* fmt, va_list args) {
  // A load prints ~1500 debug lines (each CO-RE relocation): formatting them
  // for a logger that drops them cost more CPU than any other message.
  const auto to = level == LIBBPF_DEBUG ? spdlog::level::trace : spdlog::level::debug;
  if (!spdlog::should_log(to)) return 0;
  char buf[1024];
  int n = std::vsnprintf(buf, sizeof(buf), fmt, args);
  std::string_view msg(buf, n > 0 ? std::min<std::size_t>(static_cast<std::size_t>(n), sizeof(buf) - 1) : 0);
  while (!msg.empty() && msg.back() == '\n') msg.remove_suffix(1);
  // Warnings at debug too: callers log the outcome at warn.
  spdlog::log(to, "libbpf: {}", msg);
  return n;
}

int libbpf_silent(enum libbpf_print_level, const char*, va_list) { return 0; }

// libbpf's print hook is process-wide and takes no context.
std::string* capture_target = nullptr;
std::mutex capture_mu;

int libbpf_capture(enum libbpf_print_level, const char* fmt, va_list args) {
  char buf[4096];
  int n = std::vsnprintf(buf, sizeof(buf), fmt, args);
  std::lock_guard lock(capture_mu);
  if (capture_target && n > 0) capture_target->append(buf, std::min<std::size_t>(static_cast<std::size_t>(n), sizeof(buf) - 1));
  return n;
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

}  // namespace

void route_libbpf_logs() { libbpf_set_print(libbpf_to_spdlog); }
MuteLibbpf::MuteLibbpf() { libbpf_set_print(libbpf_silent); }
MuteLibbpf::~MuteLibbpf() { route_libbpf_logs(); }

CaptureLibbpf::CaptureLibbpf() {
  {
    std::lock_guard lock(capture_mu);
    capture_target = &text_;
  }
  libbpf_set_print(libbpf_capture);
}

CaptureLibbpf::~CaptureLibbpf() {
  route_libbpf_logs();
  std::lock_guard lock(capture_mu);
  capture_target = nullptr;
}

std::string CaptureLibbpf::verifier_last_line() const { return bpf::verifier_last_line(text_); }

std::string verifier_last_line(std::string_view out) {
  // libbpf prints the verifier log between these markers; its last lines are
  // statistics, the line before them the refusal.
  std::string_view in_log, failure;
  bool inside = false;
  std::size_t pos = 0;
  while (pos < out.size()) {
    std::size_t end = out.find('\n', pos);
    if (end == std::string_view::npos) end = out.size();
    std::string_view line = out.substr(pos, end - pos);
    pos = end + 1;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    if (line.find("-- BEGIN PROG LOAD LOG --") != std::string_view::npos) {
      inside = true;
      continue;
    }
    if (line.find("-- END PROG LOAD LOG --") != std::string_view::npos) {
      inside = false;
      continue;
    }
    if (line.empty()) continue;
    if (inside) {
      if (starts_with(line, "processed ") || starts_with(line, "verification time") ||
          starts_with(line, "stack depth") || starts_with(line, "mark_precise") || line == "libbpf: ")
        continue;
      in_log = line;
    } else if (line.find("failed") != std::string_view::npos || line.find("relo") != std::string_view::npos ||
               line.find("error") != std::string_view::npos) {
      failure = line;
    }
  }
  std::string_view pick = in_log.empty() ? failure : in_log;
  if (starts_with(pick, "libbpf: ")) pick.remove_prefix(8);
  return std::string(pick.substr(0, 200));
}

}  // namespace bpf

namespace {

// r0 = 0; exit
const struct bpf_insn kReturnZero[] = {
    {0xb7, 0, 0, 0, 0},
    {0x95, 0, 0, 0, 0},
};

using kernel::Fd;

std::string errno_text(const char* what, int err) { return std::string(what) + ": " + std::strerror(err); }

class KernelBpfFeatures final : public BpfFeatures {
 public:
  explicit KernelBpfFeatures(std::string proc_root) : proc_root_(std::move(proc_root)) {
    bpf::MuteLibbpf mute;
    // A ring buffer's size is a multiple of the page size: 4 KiB on x86-64,
    // up to 64 KiB on arm64 kernels built with larger pages.
    const auto page = static_cast<__u32>(::sysconf(_SC_PAGESIZE));
    Fd map(bpf_map_create(BPF_MAP_TYPE_RINGBUF, nullptr, 0, 0, page, nullptr));
    if (map) {
      bpf_ok_ = true;
    } else {
      bpf_error_ = errno_text("ringbuf map", errno);
    }
  }
  ~KernelBpfFeatures() override { btf__free(libbpf_btf_); }

  // libbpf parses the kernel's BTF again to load the object: ours goes first,
  // so the two copies are never resident together.
  void release_kernel_btf() const override {
    std::lock_guard lock(btf_mu_);
    btf_.reset();
    btf__free(libbpf_btf_);
    libbpf_btf_ = nullptr;
    btf_loaded_ = false;
  }

  bool bpf_available() const override { return bpf_ok_; }

  bool has_atomics() const override {
    std::lock_guard lock(mu_);
    if (atomics_ < 0) {
      // *(u64 *)(r10 - 8) = 0; r0 = 0; r2 = 1; r0 = cmpxchg(r10 - 8, r0, r2); r0 = 0; exit
      const struct bpf_insn insns[] = {
          {0x7a, 10, 0, -8, 0},
          {0xb7, 0, 0, 0, 0},
          {0xb7, 2, 0, 0, 1},
          {0xdb, 10, 2, -8, 0xf1},  // BPF_STX | BPF_DW | BPF_ATOMIC, imm BPF_CMPXCHG
          {0xb7, 0, 0, 0, 0},
          {0x95, 0, 0, 0, 0},
      };
      Fd prog(bpf_ok_ ? bpf_prog_load(BPF_PROG_TYPE_SOCKET_FILTER, nullptr, "GPL", insns, 6, nullptr) : -1);
      atomics_ = prog.get() >= 0 ? 1 : 0;
      spdlog::debug("bpf probe atomics (cmpxchg): {}", atomics_ ? "ok" : errno_text("load", errno));
    }
    return atomics_ == 1;
  }

  bool has_btf_type(std::string_view name) const override {
    std::lock_guard lock(btf_mu_);
    return find_type(name, -1) > 0;
  }

  int tracepoint_arity(std::string_view tp) const override {
    std::lock_guard lock(btf_mu_);
    int id = find_type("btf_trace_" + std::string(tp), BTF_KIND_TYPEDEF);
    if (id <= 0) return -1;
    const struct btf_type* t = type_by_id(static_cast<int>(type_by_id(id)->type));  // pointer
    if (!t || !btf_is_ptr(t)) return -1;
    t = type_by_id(static_cast<int>(t->type));  // func proto
    if (!t || !btf_is_func_proto(t)) return -1;
    return btf_vlen(t) - 1;
  }

  int function_arity(std::string_view fn) const override {
    std::lock_guard lock(btf_mu_);
    int id = find_type(fn, BTF_KIND_FUNC);
    if (id <= 0) return -1;
    const struct btf_type* t = type_by_id(static_cast<int>(type_by_id(id)->type));
    if (!t || !btf_is_func_proto(t)) return -1;
    return btf_vlen(t);
  }

  bool can_attach(AttachKind kind, std::string_view target, std::string* why) const override {
    std::lock_guard lock(mu_);
    auto key = std::make_pair(kind, std::string(target));
    auto it = cache_.find(key);
    if (it == cache_.end()) {
      std::string reason;
      bool ok = probe(kind, key.second, reason);
      if (ok) {
        spdlog::debug("bpf probe {} {}: ok", name(kind), target);
      } else {
        spdlog::debug("bpf probe {} {}: {}", name(kind), target, reason);
      }
      it = cache_.emplace(key, std::make_pair(ok, reason)).first;
    }
    if (!it->second.first && why) *why = it->second.second;
    return it->second.first;
  }

 private:
  // Read on first use and again after release_kernel_btf(). The kernel's
  // /sys/kernel/btf/vmlinux through KernelBtf (mapped on 6.16+: no copy, no
  // parse of every type, a name index instead of libbpf's linear searches);
  // where that file is missing or holds a kind KernelBtf does not know,
  // libbpf's search of the other places (vmlinux images) and its parse.
  // Callers hold btf_mu_.
  bool load_kernel_btf() const {
    if (btf_loaded_) return btf_ || libbpf_btf_;
    btf_loaded_ = true;
    auto mine = bpf::KernelBtf::open("/sys/kernel/btf/vmlinux");
    if (mine) {
      btf_ = std::move(*mine);
      return true;
    }
    spdlog::debug("bpf: kernel BTF through libbpf ({})", mine.error().message);
    // Quiet, restoring whatever printed before: this runs inside the
    // probes' MuteLibbpf, whose end must stay theirs.
    libbpf_print_fn_t before = libbpf_set_print(nullptr);
    libbpf_btf_ = btf__load_vmlinux_btf();
    if (!libbpf_btf_) libbpf_btf_ = nullptr;
    libbpf_set_print(before);
    return libbpf_btf_ != nullptr;
  }

  // The lowest id named `name` of `kind` (-1: any); <= 0 when absent or without kernel BTF.
  int find_type(std::string_view name, int kind) const {
    if (!load_kernel_btf()) return -1;
    if (btf_) return btf_->find(name, kind);
    const std::string n(name);
    return kind < 0 ? btf__find_by_name(libbpf_btf_, n.c_str())
                    : btf__find_by_name_kind(libbpf_btf_, n.c_str(), static_cast<__u32>(kind));
  }

  const struct btf_type* type_by_id(int id) const {
    if (btf_) return btf_->type(id);
    return libbpf_btf_ ? btf__type_by_id(libbpf_btf_, static_cast<__u32>(id)) : nullptr;
  }

  // The BTF id of a tp_btf or fentry target, <= 0 when absent; nullopt without kernel BTF.
  std::optional<int> attach_btf_id(bool tp, const std::string& target) const {
    std::lock_guard lock(btf_mu_);
    if (!load_kernel_btf()) return std::nullopt;
    return tp ? find_type("btf_trace_" + target, BTF_KIND_TYPEDEF) : find_type(target, BTF_KIND_FUNC);
  }

  bool probe(AttachKind kind, const std::string& target, std::string& reason) const {
    if (!bpf_ok_) {
      reason = bpf_error_;
      return false;
    }
    bpf::MuteLibbpf mute;
    switch (kind) {
      case AttachKind::RawTp: {
        Fd prog(bpf_prog_load(BPF_PROG_TYPE_RAW_TRACEPOINT, nullptr, "GPL", kReturnZero, 2, nullptr));
        if (prog.get() < 0) return (reason = errno_text("load", errno), false);
        // With kernel BTF the tracepoint's btf_trace_ typedef says it exists,
        // and the real attach is the probe (BpfEventSource falls back when it
        // fails): attaching and detaching here patched kernel text twice more.
        // Without kernel BTF, the attach probe.
        std::optional<int> found = attach_btf_id(true, target);
        if (found) return *found > 0 ? true : (reason = "not in BTF", false);
        Fd link(bpf_raw_tracepoint_open(target.c_str(), prog.get()));
        if (link.get() < 0) return (reason = errno_text("attach", errno), false);
        return true;
      }
      case AttachKind::TpBtf:
      case AttachKind::Fentry: {
        bool tp = kind == AttachKind::TpBtf;
        std::optional<int> found = attach_btf_id(tp, target);
        if (!found) return (reason = "no kernel BTF", false);
        const int id = *found;
        if (id <= 0) return (reason = "not in BTF", false);
        // tp_btf: the typedef says the tracepoint exists. Whether this kernel
        // loads tp_btf programs at all (a policy may refuse the tracing type)
        // is asked once, with the first target: the kernel checks each real
        // program at the load and its target at the attach, and
        // BpfEventSource takes the next flavour when either refuses. Loading
        // and attaching a probe per tracepoint cost ~0.5 ms of verifier name
        // searches and two kernel text patches each.
        if (tp && tp_btf_loads_ >= 0) return tp_btf_loads_ == 1 ? true : (reason = tp_btf_error_, false);
        LIBBPF_OPTS(bpf_prog_load_opts, opts, .expected_attach_type = tp ? BPF_TRACE_RAW_TP : BPF_TRACE_FENTRY,
                    .attach_btf_id = static_cast<__u32>(id));
        Fd prog(bpf_prog_load(BPF_PROG_TYPE_TRACING, nullptr, "GPL", kReturnZero, 2, &opts));
        if (tp) {
          tp_btf_loads_ = prog.get() >= 0 ? 1 : 0;
          if (!tp_btf_loads_) tp_btf_error_ = errno_text("load", errno);
          return tp_btf_loads_ == 1 ? true : (reason = tp_btf_error_, false);
        }
        if (prog.get() < 0) return (reason = errno_text("load", errno), false);
        {
#if defined(__aarch64__)
          // arm64 attaches fentry to a kernel function through ftrace direct calls, which arm64
          // kernels have from 6.4 on (DYNAMIC_FTRACE_WITH_DIRECT_CALLS): before, the program loads
          // and only the attach is refused. Attach here, so the chain falls to the kprobe instead
          // of leaving the program off; arm64 patches its text without x86's cross-CPU wait.
          Fd link(bpf_raw_tracepoint_open(nullptr, prog.get()));
          if (link.get() < 0) return (reason = errno_text("attach", errno), false);
#endif
          // On x86 an fentry probe stops at the load. Attaching and closing a trampoline patches
          // kernel text twice (text_poke_bp waits for an IPI on every CPU); under QEMU TCG that wait
          // has hung a guest CPU for minutes. The real attach reports its own failure (BpfEventSource).
          return true;
        }
      }
      case AttachKind::Kprobe: {
        Fd prog(bpf_prog_load(BPF_PROG_TYPE_KPROBE, nullptr, "GPL", kReturnZero, 2, nullptr));
        if (prog.get() < 0) return (reason = errno_text("load", errno), false);
        auto type = kernel::read_u64("/sys/bus/event_source/devices/kprobe/type");
        if (!type) return (reason = "no kprobe PMU (kprobes compiled out?)", false);
        struct perf_event_attr attr {};
        attr.size = sizeof(attr);
        attr.type = static_cast<__u32>(*type);
        attr.config1 = reinterpret_cast<__u64>(target.c_str());
        attr.config2 = 0;
        Fd pfd(static_cast<int>(::syscall(SYS_perf_event_open, &attr, -1, 0, -1, PERF_FLAG_FD_CLOEXEC)));
        if (pfd.get() < 0) {
          const int err = errno;
          reason = bpf::perf_event_refusal("perf_event_open kprobe", err, bpf::read_perf_event_paranoid(proc_root_));
          return false;
        }
        if (::ioctl(pfd.get(), PERF_EVENT_IOC_SET_BPF, prog.get()) < 0)
          return (reason = errno_text("PERF_EVENT_IOC_SET_BPF", errno), false);
        return true;
      }
      case AttachKind::Tracepoint:
        reason = "classic tracepoint programs not used (raw_tp covers the same tracepoints)";
        return false;
      case AttachKind::Off:
        reason = "off";
        return false;
    }
    return false;
  }

  const std::string proc_root_;  // where kernel.perf_event_paranoid is read
  mutable std::mutex btf_mu_;  // taken after mu_, never before it
  mutable std::unique_ptr<bpf::KernelBtf> btf_;
  mutable struct btf* libbpf_btf_ = nullptr;  // where KernelBtf cannot read it
  mutable bool btf_loaded_ = false;
  bool bpf_ok_ = false;
  std::string bpf_error_;
  mutable std::mutex mu_;
  mutable int atomics_ = -1;
  mutable int tp_btf_loads_ = -1;  // whether a tp_btf program loads here; -1 not asked yet
  mutable std::string tp_btf_error_;
  mutable std::map<std::pair<AttachKind, std::string>, std::pair<bool, std::string>> cache_;
};

}  // namespace

std::unique_ptr<BpfFeatures> make_kernel_bpf_features(const std::string& proc_root) {
  return std::make_unique<KernelBpfFeatures>(proc_root);
}

}  // namespace pressured
