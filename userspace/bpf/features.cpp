// The real BpfFeatures: kernel BTF lookups and load+attach probes with tiny
// programs. A probe counts only when the attach succeeds (kprobe programs load
// even where kprobes are compiled out).
#include "bpf/features.hpp"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
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

#include "bpf/perf_paranoid.hpp"
#include "bpf/programs.hpp"
#include "kernel/fd.hpp"
#include "kernel/file.hpp"
#include "pressured/events.hpp"

namespace pressured {

namespace bpf {

namespace {

int libbpf_to_spdlog(enum libbpf_print_level level, const char* fmt, va_list args) {
  char buf[1024];
  int n = std::vsnprintf(buf, sizeof(buf), fmt, args);
  std::string_view msg(buf, n > 0 ? std::min<std::size_t>(static_cast<std::size_t>(n), sizeof(buf) - 1) : 0);
  while (!msg.empty() && msg.back() == '\n') msg.remove_suffix(1);
  switch (level) {
    case LIBBPF_WARN: spdlog::debug("libbpf: {}", msg); break;  // callers log the outcome at warn
    case LIBBPF_INFO: spdlog::debug("libbpf: {}", msg); break;
    case LIBBPF_DEBUG: spdlog::trace("libbpf: {}", msg); break;
  }
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
  ~KernelBpfFeatures() override { btf__free(btf_); }

  // libbpf parses the kernel's BTF again to load the object: ours goes first,
  // so the two copies (5+ MiB each) are never resident together.
  void release_kernel_btf() const override {
    std::lock_guard lock(btf_mu_);
    btf__free(btf_);
    btf_ = nullptr;
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
    const struct btf* btf = kernel_btf();
    if (!btf) return false;
    return btf__find_by_name(btf, std::string(name).c_str()) > 0;
  }

  int tracepoint_arity(std::string_view tp) const override {
    std::lock_guard lock(btf_mu_);
    const struct btf* btf = kernel_btf();
    if (!btf) return -1;
    int id = btf__find_by_name_kind(btf, ("btf_trace_" + std::string(tp)).c_str(), BTF_KIND_TYPEDEF);
    if (id <= 0) return -1;
    const struct btf_type* t = btf__type_by_id(btf, id);
    t = btf__type_by_id(btf, t->type);  // pointer
    if (!t || !btf_is_ptr(t)) return -1;
    t = btf__type_by_id(btf, t->type);  // func proto
    if (!t || !btf_is_func_proto(t)) return -1;
    return btf_vlen(t) - 1;
  }

  int function_arity(std::string_view fn) const override {
    std::lock_guard lock(btf_mu_);
    const struct btf* btf = kernel_btf();
    if (!btf) return -1;
    int id = btf__find_by_name_kind(btf, std::string(fn).c_str(), BTF_KIND_FUNC);
    if (id <= 0) return -1;
    const struct btf_type* t = btf__type_by_id(btf, btf__type_by_id(btf, id)->type);
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
  // Read on first use and again after release_kernel_btf(); null without
  // kernel BTF. Callers hold btf_mu_.
  const struct btf* kernel_btf() const {
    if (!btf_loaded_) {
      // Quiet, restoring whatever printed before: this runs inside the
      // probes' MuteLibbpf, whose end must stay theirs.
      libbpf_print_fn_t before = libbpf_set_print(nullptr);
      btf_ = load_mapped_vmlinux_btf();
      if (!btf_) btf_ = btf__load_vmlinux_btf();
      if (!btf_) btf_ = nullptr;
      libbpf_set_print(before);
      btf_loaded_ = true;
    }
    return btf_;
  }

  // Where the kernel lets /sys/kernel/btf/vmlinux be mapped (6.16+), one copy
  // from the mapping instead of libbpf's read() in page-sized pieces into a
  // buffer it then copies again; null elsewhere (the caller reads it).
  static struct btf* load_mapped_vmlinux_btf() {
    Fd fd(::open("/sys/kernel/btf/vmlinux", O_RDONLY | O_CLOEXEC));
    struct stat st {};
    if (!fd || ::fstat(fd.get(), &st) != 0 || st.st_size <= 0) return nullptr;
    const auto size = static_cast<std::size_t>(st.st_size);
    void* data = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd.get(), 0);
    if (data == MAP_FAILED) return nullptr;
    struct btf* btf = btf__new(data, static_cast<__u32>(size));
    ::munmap(data, size);
    return btf;
  }

  // The BTF id of a tp_btf or fentry target, <= 0 when absent; nullopt without kernel BTF.
  std::optional<int> attach_btf_id(bool tp, const std::string& target) const {
    std::lock_guard lock(btf_mu_);
    const struct btf* btf = kernel_btf();
    if (!btf) return std::nullopt;
    return tp ? btf__find_by_name_kind(btf, ("btf_trace_" + target).c_str(), BTF_KIND_TYPEDEF)
              : btf__find_by_name_kind(btf, target.c_str(), BTF_KIND_FUNC);
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
        LIBBPF_OPTS(bpf_prog_load_opts, opts, .expected_attach_type = tp ? BPF_TRACE_RAW_TP : BPF_TRACE_FENTRY,
                    .attach_btf_id = static_cast<__u32>(id));
        Fd prog(bpf_prog_load(BPF_PROG_TYPE_TRACING, nullptr, "GPL", kReturnZero, 2, &opts));
        if (prog.get() < 0) return (reason = errno_text("load", errno), false);
        if (!tp) {
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
        Fd link(bpf_raw_tracepoint_open(nullptr, prog.get()));
        if (link.get() < 0) return (reason = errno_text("attach", errno), false);
        return true;
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
  mutable struct btf* btf_ = nullptr;
  mutable bool btf_loaded_ = false;
  bool bpf_ok_ = false;
  std::string bpf_error_;
  mutable std::mutex mu_;
  mutable int atomics_ = -1;
  mutable std::map<std::pair<AttachKind, std::string>, std::pair<bool, std::string>> cache_;
};

}  // namespace

std::unique_ptr<BpfFeatures> make_kernel_bpf_features(const std::string& proc_root) {
  return std::make_unique<KernelBpfFeatures>(proc_root);
}

}  // namespace pressured
