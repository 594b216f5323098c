#include "bpf/bpf_events.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <ctime>
#include <cstring>
#include <map>
#include <optional>

#include <spdlog/spdlog.h>

#include "bpf/kernel_symbol.hpp"
#include "bpf/page_counter_iter.hpp"
#include "bpf/programs.hpp"
#include "kernel/file.hpp"
#include "kernel/parse.hpp"
#include "pressured_events.skel.h"

namespace pressured::bpf {

PressureEvent to_event(const pressured_event& rec) {
  PressureEvent e;
  e.source = EventSource::Bpf;
  e.type = static_cast<EventType>(rec.type);
  e.cgroup_id = rec.cgroup_id;
  e.pid = rec.pid;
  e.cpu = rec.cpu;
  e.value = rec.value;
  e.kernel_ns = rec.ts_ns;
  return e;
}

uint64_t account_drops(uint64_t total_now, uint64_t& last_seen, EventStats& stats, std::vector<PressureEvent>& out,
                       TimePoint now) {
  if (total_now <= last_seen) return 0;
  uint64_t lost = total_now - last_seen;
  last_seen = total_now;
  stats.ringbuf_drops.fetch_add(lost, std::memory_order_relaxed);
  stats.resyncs.fetch_add(1, std::memory_order_relaxed);
  auto ns = static_cast<uint64_t>(now.time_since_epoch().count());
  PressureEvent overflow;
  overflow.source = EventSource::Bpf;
  overflow.type = EventType::RingBufferOverflow;
  overflow.value = static_cast<int64_t>(lost);
  overflow.kernel_ns = ns;
  out.push_back(overflow);
  PressureEvent resync;
  resync.source = EventSource::Resync;
  resync.type = EventType::Resync;
  resync.value = static_cast<int64_t>(lost);
  resync.kernel_ns = ns;
  out.push_back(resync);
  return lost;
}

int memory_hierarchy_id(const std::string& proc_root) {
  auto text = kernel::read_file(proc_root + "/cgroups");
  if (!text) return -1;
  auto id = kernel::parse_proc_cgroups_hierarchy(*text, "memory");
  return id ? *id : -1;
}

namespace {
struct SkelDeleter {
  void operator()(pressured_events* s) const { pressured_events__destroy(s); }
};
struct LinkDeleter {
  void operator()(bpf_link* l) const { bpf_link__destroy(l); }
};
struct RingDeleter {
  void operator()(ring_buffer* r) const { ring_buffer__free(r); }
};

uint32_t round_ring(uint32_t bytes) {
  uint32_t page = static_cast<uint32_t>(::sysconf(_SC_PAGESIZE));
  uint32_t v = page;
  while (v < bytes && v < (1u << 30)) v <<= 1;
  return v;
}
}  // namespace

struct BpfEventSource::Impl {
  std::unique_ptr<pressured_events, SkelDeleter> skel;
  std::vector<std::unique_ptr<bpf_link, LinkDeleter>> links;
  std::unique_ptr<ring_buffer, RingDeleter> ring;
  std::array<bool, kBpfProgramCount> attached{};
  std::array<bpf_program*, kBpfProgramCount> programs{};
  std::vector<PressureEvent>* sink = nullptr;
  uint64_t drops_seen = 0;
  uint32_t nr_watches = 0;
  uint32_t nr_tracked = 0;
  uint32_t page_counters = 0;  // capacity of the loaded page-counter iterator's map; 0: not loaded
  bpf_program* page_walk = nullptr;  // the loaded flavour of the page-counter iterator
  int ncpus = 1;
  EventStats* stats = nullptr;
  bool nr_threads_looked_up = false;  // the PID alarm's kernel count (use_kernel_task_count)

  static int on_sample(void* ctx, void* data, size_t size) {
    auto* self = static_cast<Impl*>(ctx);
    if (size < sizeof(pressured_event) || !self->sink) return 0;
    pressured_event rec;
    std::memcpy(&rec, data, sizeof(rec));
    self->sink->push_back(to_event(rec));
    return 0;
  }
};

BpfEventSource::BpfEventSource(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
BpfEventSource::~BpfEventSource() = default;

namespace {

using SkelPtr = std::unique_ptr<pressured_events, SkelDeleter>;

// The sampling period is set for the memcg stat tracepoints (6.14+), which
// fire per page-sized stat update. page_counter_try_charge runs once per
// charge batch instead (MEMCG_CHARGE_BATCH, 64 pages: the per-CPU stock
// absorbs the rest), so there the same N means N times coarser edges
// (16 MiB per CPU at N=64): divide by the batch.
uint32_t charge_sample_every(const BpfEventsOptions& options, const AttachChoice& charge) {
  uint32_t sample_every = options.sample_every == 0 ? 1 : options.sample_every;
  if (charge.kind != AttachKind::Off && charge.target == "page_counter_try_charge")
    sample_every = std::max<uint32_t>(1, sample_every / 64);
  return sample_every;
}

// rodata and map sizes: the same for the probes and the real load, so a probe
// verifies the program the daemon will run (map sizes do not change the
// verifier's view; the probes keep them small). `victim_arity`: mark_victim's
// tracepoint arity from the kernel's BTF (asked once by the caller).
void configure(pressured_events* skel, const BpfEventsOptions& options, int victim_arity, uint32_t sample_every,
               bool small_maps, uint32_t page_counters = 0) {
  uint32_t ring = round_ring(small_maps ? 4096 : options.ring_bytes);
  skel->rodata->sample_every = sample_every;
  // The hook masks instead of dividing when it can: the same calls sampled.
  const bool pow2 = sample_every != 0 && (sample_every & (sample_every - 1)) == 0;
  skel->rodata->sample_pow2 = pow2 ? 1 : 0;
  skel->rodata->sample_mask = pow2 ? sample_every - 1 : 0;
  skel->rodata->target_hierarchy = options.target_hierarchy;
  skel->rodata->victim_has_task = victim_arity == 1 ? 0 : 1;  // mark_victim(int pid) before 6.7; (task, uid) after
  skel->rodata->page_shift = static_cast<uint32_t>(__builtin_ctzl(static_cast<unsigned long>(::sysconf(_SC_PAGESIZE))));
  skel->rodata->wake_bytes = options.wake_bytes ? options.wake_bytes : round_ring(options.ring_bytes) / 4;
  skel->rodata->min_wake_gap_ns = options.min_wake_gap_ns;
  skel->rodata->memstall_emit_ns = options.memstall_emit_ns;
  bpf_map__set_max_entries(skel->maps.events, ring);
  bpf_map__set_max_entries(skel->maps.watches, small_maps ? 1 : options.max_watches);
  bpf_map__set_max_entries(skel->maps.tracked, small_maps || options.max_tracked == 0 ? 1 : options.max_tracked);
  if (small_maps) bpf_map__set_max_entries(skel->maps.memstalls, 1);
  bpf_map__set_max_entries(skel->maps.page_counters, page_counters ? page_counters : 1);
}

// The object's program for one flavour. Where the kernel lacks BPF
// cmpxchg/fetch (before 5.12) the edge hooks have "<name>_plain" twins
// compiled without them (bpf/pressured_events.bpf.c, flip_edge).
bpf_program* find_flavour(bpf_object* obj, const std::string& pname, bool atomics) {
  if (!atomics) {
    if (auto* plain = bpf_object__find_program_by_name(obj, (pname + "_plain").c_str())) return plain;
  }
  return bpf_object__find_program_by_name(obj, pname.c_str());
}

bool is_plain(const bpf_program* prog) {
  std::string_view n = prog ? bpf_program__name(prog) : "";
  return n.size() > 6 && n.substr(n.size() - 6) == "_plain";
}

// The page-counter iterator's flavours, best first: plain loads through
// bpf_rdonly_cast (6.2+), or one bpf_probe_read_kernel call a field (6.1).
enum class PageWalk { Off, Probe, Btf };

bpf_program* page_walk_program(pressured_events* skel, PageWalk walk) {
  return walk == PageWalk::Btf     ? skel->progs.page_counters_walk
         : walk == PageWalk::Probe ? skel->progs.page_counters_walk_probe
                                   : nullptr;
}

// Opens the skeleton with autoload on only for the chosen programs (and the
// page-counter iterator's flavour when asked).
Result<SkelPtr> open_with(const Selection& sel, bool atomics, std::array<bpf_program*, kBpfProgramCount>& chosen,
                          PageWalk page_walk) {
  SkelPtr skel(pressured_events__open());
  if (!skel) return Error::from_errno(errno, "open BPF skeleton");
  bpf_program* prog = nullptr;
  bpf_object__for_each_program(prog, skel->obj) { bpf_program__set_autoload(prog, false); }
  chosen.fill(nullptr);
  for (std::size_t i = 0; i < kBpfProgramCount; ++i) {
    const auto& c = sel.choices[i];
    if (c.kind == AttachKind::Off) continue;
    auto pname = program_for(static_cast<BpfProgram>(i), c.kind, c.target);
    chosen[i] = find_flavour(skel->obj, std::string(pname), atomics);
    if (chosen[i]) bpf_program__set_autoload(chosen[i], true);
  }
  if (bpf_program* walk = page_walk_program(skel.get(), page_walk)) bpf_program__set_autoload(walk, true);
  return skel;
}

// Loads each candidate alone in a skeleton of its own (small maps, same
// rodata) and keeps libbpf's report of a refusal. Used only after the real
// load failed: the kernels where every chosen program loads pay nothing.
class SkeletonLoadProbe final : public ProgramLoadProbe {
 public:
  SkeletonLoadProbe(const BpfEventsOptions& options, const BpfFeatures& features)
      : options_(options), features_(features) {}

  bool can_load(BpfProgram p, const AttachCandidate& c, std::string* why) const override {
    std::string pname(program_for(p, c.kind, c.target));
    auto it = cache_.find(pname);
    if (it == cache_.end()) it = cache_.emplace(pname, probe(p, c, pname)).first;
    if (!it->second.empty() && why) *why = it->second;
    return it->second.empty();
  }

 private:
  // Empty when it loaded; otherwise the reason.
  std::string probe(BpfProgram p, const AttachCandidate& c, const std::string& pname) const {
    if (pname.empty()) return "no program for this flavour";
    SkelPtr skel(pressured_events__open());
    if (!skel) return std::string("open: ") + std::strerror(errno);
    bpf_program* prog = nullptr;
    bpf_object__for_each_program(prog, skel->obj) { bpf_program__set_autoload(prog, false); }
    bpf_program* mine = find_flavour(skel->obj, pname, features_.has_atomics());
    if (!mine) return "no program " + pname + " in the object";
    bpf_program__set_autoload(mine, true);
    AttachChoice as_charge{c.kind, c.target, {}};
    configure(skel.get(), options_, features_.tracepoint_arity("mark_victim"),
              charge_sample_every(options_, p == BpfProgram::MemcgCharge ? as_charge : AttachChoice{}), true);
    CaptureLibbpf capture;
    int err = pressured_events__load(skel.get());
    if (err == 0) return {};
    std::string text = std::strerror(-err);
    std::string last = capture.verifier_last_line();
    if (!last.empty()) text += " (" + last + ")";
    spdlog::debug("bpf: load probe of {} failed: {}; libbpf said:\n{}", pname, text, capture.text());
    return text;
  }

  const BpfEventsOptions& options_;
  const BpfFeatures& features_;
  mutable std::map<std::string, std::string> cache_;
};

}  // namespace

Result<std::unique_ptr<BpfEventSource>> BpfEventSource::create(const BpfEventsOptions& options,
                                                               const BpfFeatures& features, EventStats& stats) {
  route_libbpf_logs();
  if (!features.bpf_available()) {
    for (std::size_t i = 0; i < kBpfProgramCount; ++i)
      stats.set_attach(static_cast<BpfProgram>(i), AttachKind::Off, "BPF unavailable");
    return Error{ENOTSUP, "BPF unavailable on this kernel (bpf() or ring buffer refused)"};
  }

  auto impl = std::make_unique<Impl>();
  impl->stats = &stats;
  impl->ncpus = libbpf_num_possible_cpus();
  if (impl->ncpus <= 0) impl->ncpus = 1;

  // Choose a flavour per program before opening: the losers get autoload off.
  // One program the kernel refuses must not take the others down: when the
  // load fails, every chosen flavour is loaded alone, the refused ones are
  // replaced by the next of their chain, and the object is loaded again. The
  // tracepoint flavours are not attached to probe them (each attach and
  // detach patches kernel text): their real attach is the probe, and when it
  // fails the next flavour of that chain is chosen and the object is loaded
  // again with it.
  std::vector<AttachRefusal> attach_refused;
  Selection sel = select_programs(features, nullptr);
  std::array<bpf_program*, kBpfProgramCount> chosen{};
  const auto charge = static_cast<std::size_t>(BpfProgram::MemcgCharge);
  // The page-counter iterator is an extra: where the kernel refuses it, the
  // object is loaded again without it before any program is probed.
  PageWalk page_walk = options.max_page_counters == 0 || !features.has_btf_type("bpf_iter_cgroup") ? PageWalk::Off
                       : features.has_btf_type("bpf_rdonly_cast") && !options.probe_page_walk    ? PageWalk::Btf
                                                                                                   : PageWalk::Probe;
  std::string page_iter_off = options.max_page_counters == 0  ? "turned off"
                              : page_walk != PageWalk::Off ? ""
                                                           : "the kernel has no cgroup iterator (6.1+)";
  // Asked before the loop: the BTF is released before each load, and a
  // reload without the iterator must not read it again.
  const int victim_arity = features.tracepoint_arity("mark_victim");
  std::optional<SkeletonLoadProbe> probe;
  std::array<std::string, kBpfProgramCount> attach_error;  // a failed attach's words, for the final reason
  for (;;) {
    int err = 0;
    for (;;) {
      auto skel = open_with(sel, features.has_atomics(), chosen, page_walk);
      if (!skel) return skel.error();
      impl->skel = std::move(*skel);
      configure(impl->skel.get(), options, victim_arity, charge_sample_every(options, sel.choices[charge]), false,
                page_walk != PageWalk::Off ? options.max_page_counters : 0);
      features.release_kernel_btf();  // libbpf reads its own copy; the fallback below reads ours again
      err = pressured_events__load(impl->skel.get());
      if (err == 0) break;
      if (page_walk != PageWalk::Off) {
        // The next flavour down, then none.
        page_walk = page_walk == PageWalk::Btf ? PageWalk::Probe : PageWalk::Off;
        page_iter_off = std::string("the object did not load with it (") + std::strerror(-err) + ")";
        impl->skel.reset();
        continue;
      }
      if (probe) break;
      spdlog::debug("bpf: loading the object failed ({}); probing each program alone", std::strerror(-err));
      impl->skel.reset();
      probe.emplace(options, features);
      sel = select_programs(features, &*probe, attach_refused);
      for (const auto& r : sel.load_refusals) {
        spdlog::warn("bpf: {}: the kernel refused to load {} {}: {}", name(r.program), name(r.kind), r.target, r.why);
        stats.add_load_refusal(r.program, r.kind, r.target, r.why);
      }
      if (sel.load_refusals.empty())
        spdlog::warn("bpf: the object did not load ({}), yet every program loads alone", std::strerror(-err));
    }
    if (err) {
      for (std::size_t i = 0; i < kBpfProgramCount; ++i)
        stats.set_attach(static_cast<BpfProgram>(i), AttachKind::Off, "BPF object load failed");
      return Error::from_errno(-err, "load BPF object (verifier or CO-RE relocation failed; see debug log)");
    }
    // Attach every chosen program; the shared refault program is settled below.
    std::vector<AttachRefusal> failed;
    for (std::size_t i = 0; i < kBpfProgramCount; ++i) {
      const auto p = static_cast<BpfProgram>(i);
      const auto& c = sel.choices[i];
      if (p == BpfProgram::WorkingsetRefault || c.kind == AttachKind::Off || !chosen[i]) continue;
      errno = 0;
      const bool refused_for_test = options.fail_attach.count(bpf_program__name(chosen[i])) > 0;
      bpf_link* link = refused_for_test ? (errno = EINVAL, nullptr) : bpf_program__attach(chosen[i]);
      if (!link) {
        const int e = errno ? errno : EINVAL;
        attach_error[i] =
            "attach of " + std::string(name(c.kind)) + " " + c.target + " failed after probe: " + std::strerror(e);
        failed.push_back({p, c.kind, c.target, std::strerror(e)});
        continue;
      }
      impl->links.emplace_back(link);
      impl->attached[i] = true;
      impl->programs[i] = chosen[i];
    }
    if (failed.empty()) break;
    attach_refused.insert(attach_refused.end(), failed.begin(), failed.end());
    Selection next = select_programs(features, probe ? &*probe : nullptr, attach_refused);
    bool another = false;
    for (const auto& f : failed) {
      const auto& n = next.choices[static_cast<std::size_t>(f.program)];
      spdlog::warn("bpf: {}: attaching {} {} failed ({}){}", name(f.program), name(f.kind), f.target, f.why,
                   n.kind == AttachKind::Off ? "" : "; trying " + std::string(name(n.kind)) + " " + n.target);
      another = another || n.kind != AttachKind::Off;
    }
    if (!another) break;  // nothing else to try: the failed ones stay off
    impl->links.clear();
    impl->attached.fill(false);
    impl->programs.fill(nullptr);
    impl->skel.reset();
    attach_error.fill({});
    sel = std::move(next);
  }
  auto* skel = impl->skel.get();
  if (page_walk != PageWalk::Off) {
    impl->page_counters = options.max_page_counters;
    impl->page_walk = page_walk_program(skel, page_walk);
    spdlog::info("bpf: page-counter iterator loaded ({} memory cgroups per batch, {} reads)", options.max_page_counters,
                 page_walk == PageWalk::Btf ? "plain" : "probe");
  } else {
    spdlog::warn("bpf: page-counter iterator off: {}; decisions under memory pressure read one usage file per "
                 "contending pod", page_iter_off);
  }
  const auto& choices = sel.choices;
  const bool plain_flips = !features.has_atomics();
  if (plain_flips)
    spdlog::warn("bpf: the kernel has no BPF cmpxchg/fetch atomics (5.12+): the threshold and PID edge hooks run "
                 "their _plain programs (a plain flip: a rare duplicate edge)");

  std::size_t n_attached = 0;
  for (std::size_t i = 0; i < kBpfProgramCount; ++i) {
    auto p = static_cast<BpfProgram>(i);
    AttachKind kind = choices[i].kind;
    std::string reason = choices[i].reason;
    if (p == BpfProgram::WorkingsetRefault && kind != AttachKind::Off) {
      // Shares the charge hook's program: attached iff that one is.
      const auto c = static_cast<std::size_t>(BpfProgram::MemcgCharge);
      if (impl->attached[c] && chosen[c] == chosen[i]) {
        impl->attached[i] = true;
        reason = std::string(name(kind)) + " " + choices[i].target + " (counted by memcg_charge's program)";
      } else {
        kind = AttachKind::Off;
        reason = "needs memcg_charge on mod_memcg_lruvec_state (6.14+); memcg_charge: " + choices[c].reason;
      }
    } else if (kind != AttachKind::Off && impl->attached[i]) {
      ++n_attached;
    } else if (kind != AttachKind::Off && !attach_error[i].empty()) {
      // The last flavour left, and its attach failed.
      reason = attach_error[i] + (choices[i].reason.find("fallback") != std::string::npos
                                      ? " (" + choices[i].reason + ")"
                                      : "");
      kind = AttachKind::Off;
    } else if (kind != AttachKind::Off) {
      reason = "no program for the chosen flavour";
      kind = AttachKind::Off;
    }
    if (kind != AttachKind::Off && is_plain(chosen[i])) reason += " [no BPF atomics: plain edge flips]";
    stats.set_attach(p, kind, reason);
    if (kind == AttachKind::Off) {
      spdlog::warn("bpf: {} off: {}", name(p), reason);
    } else if (reason.find("fallback") != std::string::npos || p == BpfProgram::WorkingsetRefault ||
               is_plain(chosen[i])) {
      spdlog::info("bpf: {} attached as {}", name(p), reason);
    } else {
      spdlog::info("bpf: {} attached as {} {}", name(p), name(kind), choices[i].target);
    }
  }
  if (n_attached == 0) return Error{ENOTSUP, "no BPF program could be attached"};

  impl->ring.reset(ring_buffer__new(bpf_map__fd(skel->maps.events), &Impl::on_sample, impl.get(), nullptr));
  if (!impl->ring) return Error::from_errno(errno, "ring_buffer__new");
  stats.bpf_active.store(true);
  return std::unique_ptr<BpfEventSource>(new BpfEventSource(std::move(impl)));
}

int BpfEventSource::fd() const { return bpf_map__fd(impl_->skel->maps.events); }
uint32_t BpfEventSource::epoll_events() const { return EPOLLIN; }

void BpfEventSource::drain(std::vector<PressureEvent>& out, TimePoint now) {
  impl_->sink = &out;
  ring_buffer__consume(impl_->ring.get());
  impl_->sink = nullptr;
  account_drops(counter(PRESSURED_CNT_DROPS), impl_->drops_seen, *impl_->stats, out, now);
}

std::vector<uint64_t> BpfEventSource::counter_per_cpu(uint32_t idx) const {
  std::vector<uint64_t> per_cpu(static_cast<std::size_t>(impl_->ncpus));
  if (bpf_map__lookup_elem(impl_->skel->maps.counters, &idx, sizeof(idx), per_cpu.data(),
                           per_cpu.size() * sizeof(uint64_t), 0) != 0)
    return {};
  return per_cpu;
}

uint64_t BpfEventSource::counter(uint32_t idx) const {
  uint64_t sum = 0;
  for (auto v : counter_per_cpu(idx)) sum += v;
  return sum;
}

std::vector<BpfEventSource::ProgramStats> BpfEventSource::program_stats() const {
  std::vector<ProgramStats> out;
  for (std::size_t i = 0; i < kBpfProgramCount; ++i) {
    if (!impl_->programs[i]) continue;
    bpf_prog_info info{};
    __u32 len = sizeof(info);
    ProgramStats ps{static_cast<BpfProgram>(i), bpf_program__name(impl_->programs[i]), 0, 0};
    if (bpf_obj_get_info_by_fd(bpf_program__fd(impl_->programs[i]), &info, &len) == 0) {
      ps.run_cnt = info.run_cnt;
      ps.run_time_ns = info.run_time_ns;
    }
    out.push_back(ps);
  }
  return out;
}

int BpfEventSource::program_fd(BpfProgram p) const {
  auto* prog = impl_->programs[static_cast<std::size_t>(p)];
  return prog ? bpf_program__fd(prog) : -1;
}

bool BpfEventSource::attached(BpfProgram p) const { return impl_->attached[static_cast<std::size_t>(p)]; }

std::shared_ptr<PageCounterReader> BpfEventSource::page_counter_reader() const {
  if (!impl_->page_counters) return nullptr;
  auto r = PageCounterIter::create(bpf_program__fd(impl_->page_walk),
                                   bpf_map__fd(impl_->skel->maps.page_counters),
                                   bpf_map__fd(impl_->skel->maps.page_counters_depth), impl_->page_counters,
                                   impl_->skel->rodata->page_shift);
  if (!r) {
    spdlog::warn("bpf: page-counter iterator unusable: {}", r.error().message);
    return nullptr;
  }
  return std::shared_ptr<PageCounterReader>(std::move(*r));
}

Result<void> BpfEventSource::set_watch(uint64_t cgroup_id, uint64_t alarm_bytes, uint64_t watch_id) {
  // A re-arm starts from the current entry: it keeps the armed side (so it
  // does not fake an edge) and the last page-counter sample. A new one starts
  // from zero: below, never sampled.
  pressured_watch w{};
  const bool existed =
      bpf_map__lookup_elem(impl_->skel->maps.watches, &cgroup_id, sizeof(cgroup_id), &w, sizeof(w), 0) == 0;
  if (!existed) w = pressured_watch{};
  uint32_t shift = impl_->skel->rodata->page_shift;
  w.alarm_pages = (alarm_bytes + (1ull << shift) - 1) >> shift;
  // Hysteresis: fall 1/64 (~1.6%) below the alarm before a down edge re-arms it.
  w.rearm_pages = w.alarm_pages - w.alarm_pages / 64;
  w.watch_id = watch_id;
  if (bpf_map__update_elem(impl_->skel->maps.watches, &cgroup_id, sizeof(cgroup_id), &w, sizeof(w), BPF_ANY) != 0)
    return Error::from_errno(errno, "update BPF watch map");
  if (!existed) impl_->skel->bss->nr_watches = ++impl_->nr_watches;
  return {};
}

std::optional<BpfEventSource::CounterSample> BpfEventSource::watched_counter(uint64_t cgroup_id) const {
  pressured_watch w{};
  if (bpf_map__lookup_elem(impl_->skel->maps.watches, &cgroup_id, sizeof(cgroup_id), &w, sizeof(w), 0) != 0)
    return std::nullopt;
  if (w.seen_ns == 0) return std::nullopt;
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);  // bpf_ktime_get_ns() is CLOCK_MONOTONIC
  const uint64_t now = static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
  CounterSample s;
  s.bytes = w.seen_pages << impl_->skel->rodata->page_shift;
  s.age = Duration(static_cast<int64_t>(now > w.seen_ns ? now - w.seen_ns : 0));
  return s;
}

Result<void> BpfEventSource::clear_watch(uint64_t cgroup_id) {
  if (bpf_map__delete_elem(impl_->skel->maps.watches, &cgroup_id, sizeof(cgroup_id), 0) != 0)
    return Error::from_errno(errno, "delete from BPF watch map");
  if (impl_->nr_watches > 0) impl_->skel->bss->nr_watches = --impl_->nr_watches;
  return {};
}

bool BpfEventSource::activity_active() const {
  return attached(BpfProgram::MemcgReclaimStats) || attached(BpfProgram::WorkingsetRefault) ||
         attached(BpfProgram::MemstallLeave);
}

Result<void> BpfEventSource::track_memcg(uint64_t cgroup_id) {
  if (!activity_active())
    return Error{ENOTSUP, "no memcg activity hook attached (count_memcg_events, mod_memcg_lruvec_state, "
                          "psi_memstall_*)"};
  pressured_memcg_activity a{};
  if (bpf_map__update_elem(impl_->skel->maps.tracked, &cgroup_id, sizeof(cgroup_id), &a, sizeof(a), BPF_NOEXIST) !=
      0) {
    if (errno == EEXIST) return {};  // already tracked: keep its counters
    int e = errno;
    return Error::from_errno(e == E2BIG ? ENOSPC : e, "add memcg " + std::to_string(cgroup_id) + " to the BPF tracked map");
  }
  impl_->skel->bss->nr_tracked = ++impl_->nr_tracked;
  return {};
}

Result<void> BpfEventSource::untrack_memcg(uint64_t cgroup_id) {
  if (bpf_map__delete_elem(impl_->skel->maps.tracked, &cgroup_id, sizeof(cgroup_id), 0) != 0)
    return Error::from_errno(errno, "remove memcg " + std::to_string(cgroup_id) + " from the BPF tracked map");
  if (impl_->nr_tracked > 0) impl_->skel->bss->nr_tracked = --impl_->nr_tracked;
  return {};
}

namespace {
MemcgActivity activity_of(const pressured_memcg_activity& a) {
  MemcgActivity out;
  out.pgscan = a.pgscan;
  out.pgsteal = a.pgsteal;
  out.workingset_refaults = a.refaults;
  out.memstall_ns = a.memstall_ns;
  out.memstall_count = a.memstall_count;
  return out;
}
}  // namespace

std::optional<MemcgActivity> BpfEventSource::memcg_activity(uint64_t cgroup_id) const {
  pressured_memcg_activity a{};
  if (bpf_map__lookup_elem(impl_->skel->maps.tracked, &cgroup_id, sizeof(cgroup_id), &a, sizeof(a), 0) != 0)
    return std::nullopt;
  return activity_of(a);
}

bool BpfEventSource::memcg_activities(std::vector<std::pair<uint64_t, MemcgActivity>>& out) const {
  out.clear();
  const int fd = bpf_map__fd(impl_->skel->maps.tracked);
  const uint32_t capacity = bpf_map__max_entries(impl_->skel->maps.tracked);
  std::vector<uint64_t> keys(capacity);
  std::vector<pressured_memcg_activity> values(capacity);
  // A hash map's batch walks buckets: the cursor is the kernel's, opaque.
  uint64_t cursor = 0;
  bool first = true;
  for (;;) {
    __u32 count = capacity;
    LIBBPF_OPTS(bpf_map_batch_opts, opts);
    const int r = bpf_map_lookup_batch(fd, first ? nullptr : &cursor, &cursor, keys.data(), values.data(), &count,
                                       &opts);
    const int err = r == 0 ? 0 : errno;
    if (r != 0 && err != ENOENT) {
      out.clear();
      return false;  // no batch ops (before 5.6) or refused: the caller reads per cgroup
    }
    for (__u32 i = 0; i < count; ++i) out.emplace_back(keys[i], activity_of(values[i]));
    if (err == ENOENT) break;  // the walk reached the end
    first = false;
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return true;
}

bool BpfEventSource::pid_count_active() const {
  return attached(BpfProgram::TaskFork) && attached(BpfProgram::TaskFree);
}

void BpfEventSource::seed_pid_count(uint64_t tasks_now) {
  auto* bss = impl_->skel->bss;
  int64_t delta = __atomic_load_n(&bss->pid_delta, __ATOMIC_RELAXED);
  __atomic_store_n(&bss->pid_base, static_cast<int64_t>(tasks_now) - delta, __ATOMIC_RELAXED);
}

int64_t BpfEventSource::pid_count() const {
  auto* bss = impl_->skel->bss;
  return __atomic_load_n(&bss->pid_base, __ATOMIC_RELAXED) + __atomic_load_n(&bss->pid_delta, __ATOMIC_RELAXED);
}

Result<void> BpfEventSource::set_pid_alarm(uint64_t alarm_tasks, uint64_t tasks_now) {
  if (!pid_count_active()) return Error{ENOTSUP, "task fork/free hooks not attached"};
  if (alarm_tasks != 0 && !impl_->nr_threads_looked_up) use_kernel_task_count();
  auto* bss = impl_->skel->bss;
  seed_pid_count(tasks_now);
  uint64_t old = __atomic_load_n(&bss->pid_alarm, __ATOMIC_RELAXED);
  if (alarm_tasks == 0) {
    __atomic_store_n(&bss->pid_alarm, uint64_t{0}, __ATOMIC_RELAXED);
    __atomic_store_n(&bss->pid_above, uint32_t{0}, __ATOMIC_RELAXED);
    return {};
  }
  uint64_t hyst = std::max<uint64_t>(16, alarm_tasks / 64);
  __atomic_store_n(&bss->pid_rearm, alarm_tasks > hyst ? alarm_tasks - hyst : 0, __ATOMIC_RELAXED);
  if (old == 0) __atomic_store_n(&bss->pid_above, uint32_t{0}, __ATOMIC_RELAXED);
  __atomic_store_n(&bss->pid_alarm, alarm_tasks, __ATOMIC_RELEASE);
  return {};
}

// Looked up when the first alarm is armed, not at load: neither the start nor
// a node without PID thresholds pays for it. Where the lookup fails the hooks
// keep the seeded delta (docs/events.md, "The PID alarm hook").
void BpfEventSource::use_kernel_task_count() {
  impl_->nr_threads_looked_up = true;
  auto addr = lookup_kernel_symbol("nr_threads");
  if (!addr) {
    spdlog::info("bpf: the PID alarm counts forks minus frees, re-seeded from /proc/loadavg on every safety-net "
                 "tick (the kernel's nr_threads: {})",
                 addr.error().message);
    return;
  }
  __atomic_store_n(&impl_->skel->bss->nr_threads_addr, static_cast<__u64>(*addr), __ATOMIC_RELAXED);
  spdlog::info("bpf: the PID alarm counts the kernel's nr_threads");
}

bool BpfEventSource::counts_kernel_tasks() const {
  return __atomic_load_n(&impl_->skel->bss->nr_threads_addr, __ATOMIC_RELAXED) != 0;
}

}  // namespace pressured::bpf
