// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* pressured's kernel side: memcg threshold crossings on the charge path,
 * reclaim begin/end, kswapd wakeups, OOM victims and cgroup lifecycle, streamed
 * into one ring buffer; per tracked memcg reclaim scan/steal, workingset
 * refault and memstall totals, accumulated in a map userspace reads.
 *
 * Every hook has several flavours (tp_btf / raw_tp, fentry / kprobe) as thin
 * wrappers over one __always_inline handler; userspace (userspace/bpf) keeps
 * the flavour its probe chose and disables autoload on the others. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "pressured_events.h"

char LICENSE[] SEC("license") = "GPL";

/* Set by userspace before load. */
const volatile __u32 sample_every = 64;        /* charge hook: look at 1 charge in N per CPU */
/* sample_every - 1 when sample_every is a power of two, else 0 (userspace sets
 * it with sample_every). The charge hook runs on every memcg stat update: a
 * mask there instead of a 64-bit division. Frozen rodata is a known constant
 * to the verifier, which drops the branch not taken (the division with it). */
const volatile __u64 sample_mask = 63;
const volatile __u32 sample_pow2 = 1;
const volatile __s32 target_hierarchy = -1;    /* cgroup lifecycle: hierarchy id to keep; -1 all */
const volatile __u32 victim_has_task = 1;      /* mark_victim(task, uid) (6.7+) vs mark_victim(pid) */
const volatile __u32 page_shift = 12;
const volatile __u64 wake_bytes = 64 * 1024;   /* non-edge records: wake when this much is pending */
const volatile __u64 min_wake_gap_ns = 5000000;/* ... or when this CPU has not woken for this long */
const volatile __u64 memstall_emit_ns = 10000000; /* a single memstall this long is also a ring record */

/* Written by userspace at runtime: skip the charge path when nothing is watched. */
__u32 nr_watches = 0;
/* ... and the activity accounting when no memcg is tracked. */
__u32 nr_tracked = 0;

/* Node task count and PID alarm (see pressured_events.h). */
__s64 pid_delta = 0;   /* forks - frees since load (atomic) */
__s64 pid_base = 0;    /* userspace: tasks read from /proc minus pid_delta at that moment */
__u64 pid_alarm = 0;   /* tasks; 0: off */
__u64 pid_rearm = 0;   /* count must fall below this for a down edge */
__u32 pid_above = 0;   /* 0: armed for an up edge */

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH); /* preallocated: no allocation on the charge path */
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, struct pressured_watch);
} watches SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH); /* preallocated: no allocation on the hot paths */
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, struct pressured_memcg_activity);
} tracked SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH); /* tid -> memstall in progress */
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, struct pressured_memstall);
} memstalls SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PRESSURED_CNT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} last_wake SEC(".maps");

/* The batched page-counter read: filled by the page_counters iterator, read
 * by userspace through its own mmap of the map (sized by userspace). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pressured_page_counter);
} page_counters SEC(".maps");

/* How many levels below the walk's root to record (userspace sets it before a
 * walk: 1 under a QoS tier, 2 under kubepods), so container cgroups cost no
 * record. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} page_counters_depth SEC(".maps");

/* Flips an edge flag from -> to; true for the one caller that flipped it.
 *
 * BPF_CMPXCHG and the fetching atomics arrived in 5.12 ("bpf: Add
 * instructions for atomic_[cmp]xchg", "bpf: Add BPF_FETCH field / create
 * atomic_fetch_add instruction"); older verifiers reject any BPF_STX with a
 * non-zero imm in a linear pass over the whole program ("BPF_STX uses reserved
 * fields"), dead code included. So the edge hooks come twice: with atomics, and
 * as "<name>_plain" programs compiled with atomics = false (no such
 * instruction in them), which userspace picks where the kernel lacks them.
 * There a plain read and write: two CPUs may both see the same edge and
 * userspace gets a duplicate (harmless: an edge only makes it re-read the
 * cgroup files), never a lost one. */
static __always_inline bool flip_edge(__u32 *flag, __u32 from, __u32 to, bool atomics)
{
	if (atomics)
		return __sync_val_compare_and_swap(flag, from, to) == from;
	if (*(volatile __u32 *)flag != from)
		return false;
	*(volatile __u32 *)flag = to;
	return true;
}

static __always_inline __u64 *counter(__u32 idx)
{
	return bpf_map_lookup_elem(&counters, &idx);
}

static __always_inline void count(__u32 idx)
{
	__u64 *c = counter(idx);
	if (c)
		(*c)++;
}

/* Wake userspace on real edges; otherwise only when enough has piled up or
 * this CPU has been quiet for min_wake_gap_ns, so nothing can starve. */
static __always_inline __u64 wake_flags(bool edge, __u64 now)
{
	__u32 zero = 0;
	__u64 *last = bpf_map_lookup_elem(&last_wake, &zero);
	if (!edge) {
		if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) < wake_bytes &&
		    last && now - *last < min_wake_gap_ns)
			return BPF_RB_NO_WAKEUP;
	}
	if (last)
		*last = now;
	return BPF_RB_FORCE_WAKEUP;
}

static __always_inline void emit(__u32 type, __u64 cgroup_id, __s64 value, __u32 pid, __u32 flags, bool edge)
{
	struct pressured_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(PRESSURED_CNT_DROPS);
		return;
	}
	__u64 now = bpf_ktime_get_ns();
	e->ts_ns = now;
	e->cgroup_id = cgroup_id;
	e->value = value;
	e->pid = pid ? pid : (__u32)(bpf_get_current_pid_tgid() >> 32);
	e->cpu = bpf_get_smp_processor_id();
	e->type = type;
	__u64 wf = wake_flags(edge, now);
	e->flags = flags | (wf == BPF_RB_FORCE_WAKEUP ? PRESSURED_F_WOKE : 0);
	bpf_ringbuf_submit(e, wf);
}

static __always_inline __u64 memcg_id(struct mem_cgroup *memcg)
{
	return BPF_CORE_READ(memcg, css.cgroup, kn, id);
}

/* The memory cgroup of the current task (v1 and v2 alike: the memory
 * controller's css, not the default hierarchy's cgroup). */
static __always_inline struct mem_cgroup *current_memcg(struct task_struct *task)
{
	int idx = bpf_core_enum_value(enum cgroup_subsys_id, memory_cgrp_id);
	struct css_set *cs = BPF_CORE_READ(task, cgroups);
	struct cgroup_subsys_state *css = NULL;

	if (!cs || idx < 0 || idx >= CGROUP_SUBSYS_COUNT)
		return NULL;
	bpf_core_read(&css, sizeof(css), &cs->subsys[idx]);
	return (struct mem_cgroup *)css; /* css is the first member of mem_cgroup */
}

/* The memcg walks (charge hook, refaults, reclaim batches) in tp_btf programs,
 * where the memcg argument is a BTF-typed pointer: plain loads, which the
 * verifier guards (a faulting one reads 0), instead of a bpf_probe_read_kernel
 * call per field. Only fields of the css (memcg's first member) are read this
 * way: from the second level on, the pointer is typed as the css's parent.
 * raw_tp, fentry on a container_of result and kprobe programs keep the helper. */
/* A tp_btf argument is a trusted pointer, and the verifier decides for every
 * load through a trusted pointer whether the field read keeps the trust: on
 * 6.x kernels it looks "<struct>__safe_trusted", "__safe_trusted_or_null",
 * "__safe_rcu" and "__safe_rcu_or_null" up by name in vmlinux BTF, a linear
 * search each (~0.3 ms), on every verifier path through the load. The walks
 * only read, so they start from the same pointer marked untrusted by
 * bpf_rdonly_cast (6.2+), a kfunc the verifier turns into a register move,
 * taken only past the early returns (sampling, item filter). The loads stay
 * the same guarded loads; verifying btf_memcg_lruvec and btf_memcg_events
 * drops from ~12 ms to ~1-3 ms each on 6.18
 * (docs/evidence/2026-11-28-startup-cpu.md). Their tracepoints are 6.14+,
 * so a kernel with them has the kfunc; where one does not, the weak extern
 * stays unresolved, the program is refused at load and the chain falls to
 * its raw_tp flavour. */
extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym __weak;

static __always_inline struct mem_cgroup *untrusted_memcg(struct mem_cgroup *memcg)
{
	return (struct mem_cgroup *)bpf_rdonly_cast(memcg, bpf_core_type_id_kernel(struct mem_cgroup));
}

static __always_inline __u64 walk_id(struct mem_cgroup *memcg, bool btf)
{
	if (btf)
		return memcg->css.cgroup->kn->id;
	return memcg_id(memcg);
}

static __always_inline struct mem_cgroup *walk_parent(struct mem_cgroup *memcg, bool btf)
{
	if (btf)
		return (struct mem_cgroup *)memcg->css.parent;
	return (struct mem_cgroup *)BPF_CORE_READ(memcg, css.parent);
}

static __always_inline __u64 current_memcg_id(void)
{
	struct mem_cgroup *m = current_memcg((struct task_struct *)bpf_get_current_task());
	return m ? memcg_id(m) : 0;
}

/* ---- per tracked memcg activity ------------------------------------------ */

enum activity { ACT_NONE, ACT_SCAN, ACT_STEAL, ACT_REFAULT, ACT_MEMSTALL };

/* Adds to the memcg and every tracked ancestor (bounded walk), so a pod's
 * totals include its containers'. Atomic: several CPUs reclaim at once. */
static __always_inline void account_tracked(struct mem_cgroup *memcg, __u32 what, __u64 val, bool btf)
{
	if (btf)
		memcg = untrusted_memcg(memcg);
	for (int i = 0; i < PRESSURED_MAX_DEPTH && memcg; i++) {
		__u64 id = walk_id(memcg, btf);
		struct pressured_memcg_activity *a = bpf_map_lookup_elem(&tracked, &id);
		if (a) {
			switch (what) {
			case ACT_SCAN:
				__sync_fetch_and_add(&a->pgscan, val);
				break;
			case ACT_STEAL:
				__sync_fetch_and_add(&a->pgsteal, val);
				break;
			case ACT_REFAULT:
				__sync_fetch_and_add(&a->refaults, val);
				break;
			case ACT_MEMSTALL:
				__sync_fetch_and_add(&a->memstall_ns, val);
				__sync_fetch_and_add(&a->memstall_count, 1);
				break;
			}
		}
		memcg = walk_parent(memcg, btf);
	}
}

/* The reclaim items of enum vm_event_item, by CO-RE (their numbers move
 * between kernels and configs). KHUGEPAGED arrived in 6.2, PROACTIVE later:
 * guarded by existence checks so the object loads where they are missing.
 * All are named through one local flavour of the enum (libbpf matches
 * "vm_event_item___pressured" and "X___p" to the kernel's vm_event_item and
 * X), so the object also compiles against the vmlinux.h of a kernel that
 * lacks the newer ones (the arm64 build's is 6.1's), and libbpf searches the
 * kernel's BTF for the enum once, not once per local type (~0.5 ms of a
 * start each). */
enum vm_event_item___pressured {
	PGSCAN_KSWAPD___p,
	PGSCAN_DIRECT___p,
	PGSTEAL_KSWAPD___p,
	PGSTEAL_DIRECT___p,
	PGSCAN_KHUGEPAGED___p,
	PGSTEAL_KHUGEPAGED___p,
	PGSCAN_PROACTIVE___p,
	PGSTEAL_PROACTIVE___p,
};

#define VM_EVENT(x) bpf_core_enum_value(enum vm_event_item___pressured, x##___p)
#define HAS_VM_EVENT(x) bpf_core_enum_value_exists(enum vm_event_item___pressured, x##___p)

static __always_inline __u32 reclaim_kind(int item)
{
	if (item == VM_EVENT(PGSCAN_KSWAPD) || item == VM_EVENT(PGSCAN_DIRECT))
		return ACT_SCAN;
	if (item == VM_EVENT(PGSTEAL_KSWAPD) || item == VM_EVENT(PGSTEAL_DIRECT))
		return ACT_STEAL;
	if (HAS_VM_EVENT(PGSCAN_KHUGEPAGED)) {
		if (item == VM_EVENT(PGSCAN_KHUGEPAGED))
			return ACT_SCAN;
		if (item == VM_EVENT(PGSTEAL_KHUGEPAGED))
			return ACT_STEAL;
	}
	if (HAS_VM_EVENT(PGSCAN_PROACTIVE)) {
		if (item == VM_EVENT(PGSCAN_PROACTIVE))
			return ACT_SCAN;
		if (item == VM_EVENT(PGSTEAL_PROACTIVE))
			return ACT_STEAL;
	}
	return ACT_NONE;
}

/* count_memcg_events fires for every memcg event (page faults too): filter on
 * the item first, walk only for reclaim batches. The item compares touch no
 * memory, so the other calls return without loading nr_tracked: its cache line
 * is mostly cold there (measured: ~84 -> ~67 ns/run, docs/events.md). */
static __always_inline void handle_memcg_events(struct mem_cgroup *memcg, int item, __u64 val, bool btf)
{
	__u32 what = reclaim_kind(item);
	if (what == ACT_NONE || !nr_tracked || !memcg)
		return;
	account_tracked(memcg, what, val, btf);
}

SEC("tp_btf/count_memcg_events")
int BPF_PROG(btf_memcg_events, struct mem_cgroup *memcg, int item, unsigned long val)
{
	handle_memcg_events(memcg, item, val, true);
	return 0;
}

SEC("raw_tp/count_memcg_events")
int BPF_PROG(raw_memcg_events, struct mem_cgroup *memcg, int item, unsigned long val)
{
	handle_memcg_events(memcg, item, val, false);
	return 0;
}

/* Before the 6.14 tracepoint: the out-of-line counter function (same arguments). */
SEC("fentry/__count_memcg_events")
int BPF_PROG(fentry_memcg_events, struct mem_cgroup *memcg, int item, unsigned long val)
{
	handle_memcg_events(memcg, item, val, false);
	return 0;
}

SEC("kprobe/__count_memcg_events")
int BPF_KPROBE(kprobe_memcg_events, struct mem_cgroup *memcg, int item, unsigned long val)
{
	handle_memcg_events(memcg, item, val, false);
	return 0;
}

/* Workingset refaults arrive as node_stat_item updates on the memcg stat
 * tracepoint the charge hook already uses: two register compares per call
 * first, then (refaults only) the tracked count and a walk. */
static __always_inline void handle_refault(struct mem_cgroup *memcg, int item, int val, bool btf)
{
	if (!bpf_core_enum_value_exists(enum node_stat_item, WORKINGSET_REFAULT_ANON))
		return;
	if (item != bpf_core_enum_value(enum node_stat_item, WORKINGSET_REFAULT_ANON) &&
	    item != bpf_core_enum_value(enum node_stat_item, WORKINGSET_REFAULT_FILE))
		return;
	if (!nr_tracked || val <= 0 || !memcg)
		return;
	account_tracked(memcg, ACT_REFAULT, (__u64)val, btf);
}

/* ---- memstalls (psi_memstall_enter / leave) ------------------------------- */

/* Timed per task; the kernel nests memstalls (enter while already in one is a
 * no-op there), so only the outermost enter..leave pair counts. */
static __always_inline void memstall_enter(void)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct pressured_memstall *s = bpf_map_lookup_elem(&memstalls, &tid);
	if (s) {
		s->depth++;
		return;
	}
	struct pressured_memstall n = { .start_ns = bpf_ktime_get_ns(), .depth = 1 };
	if (bpf_map_update_elem(&memstalls, &tid, &n, BPF_NOEXIST) != 0)
		count(PRESSURED_CNT_MEMSTALL_LOST);
}

static __always_inline void memstall_leave(void)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct pressured_memstall *s = bpf_map_lookup_elem(&memstalls, &tid);
	if (!s)
		return; /* entered before the program was attached */
	if (s->depth > 1) {
		s->depth--;
		return;
	}
	__u64 now = bpf_ktime_get_ns();
	__u64 dur = now - s->start_ns;
	bpf_map_delete_elem(&memstalls, &tid);
	struct mem_cgroup *m = current_memcg((struct task_struct *)bpf_get_current_task());
	if (!m)
		return;
	if (nr_tracked)
		account_tracked(m, ACT_MEMSTALL, dur, false);
	if (dur >= memstall_emit_ns)
		emit(PRESSURED_EV_MEMSTALL, memcg_id(m), (__s64)dur, 0, 0, false);
}

SEC("fentry/psi_memstall_enter")
int BPF_PROG(fentry_memstall_enter, unsigned long *flags)
{
	memstall_enter();
	return 0;
}

SEC("kprobe/psi_memstall_enter")
int BPF_KPROBE(kprobe_memstall_enter, unsigned long *flags)
{
	memstall_enter();
	return 0;
}

SEC("fentry/psi_memstall_leave")
int BPF_PROG(fentry_memstall_leave, unsigned long *flags)
{
	memstall_leave();
	return 0;
}

SEC("kprobe/psi_memstall_leave")
int BPF_KPROBE(kprobe_memstall_leave, unsigned long *flags)
{
	memstall_leave();
	return 0;
}

/* ---- memcg threshold crossing ------------------------------------------ */

static __always_inline void check_watch(struct mem_cgroup *memcg, __u64 id, struct pressured_watch *w,
					 bool atomics)
{
	__u64 usage = (__u64)BPF_CORE_READ(memcg, memory.usage.counter);

	/* Userspace levels a hierarchy root's alarm from this: its page counter
	 * is readable nowhere else (the v1 root's usage file is statistics based,
	 * the v2 root has none, and dying cgroups' charges are in no child's file).
	 * At most once a millisecond: the entry's cache line is shared by all CPUs. */
	__u64 now = bpf_ktime_get_ns();
	if (now - w->seen_ns > 1000000) {
		w->seen_pages = usage;
		w->seen_ns = now;
	}

	if (usage >= w->alarm_pages) {
		if (flip_edge(&w->above, 0, 1, atomics)) {
			count(PRESSURED_CNT_EDGES);
			emit(PRESSURED_EV_THRESHOLD_UP, id, (__s64)(usage << page_shift), 0, 0, true);
		}
	} else if (usage < w->rearm_pages) {
		if (flip_edge(&w->above, 1, 0, atomics)) {
			count(PRESSURED_CNT_EDGES);
			emit(PRESSURED_EV_THRESHOLD_DOWN, id, (__s64)(usage << page_shift), 0, 0, true);
		}
	}
}

static __always_inline void handle_charge(struct mem_cgroup *memcg, bool atomics, bool btf)
{
	if (!nr_watches || !memcg)
		return;
	__u64 *seen = counter(PRESSURED_CNT_CHARGE_SEEN);
	if (!seen)
		return;
	__u64 n = ++(*seen);
	if (sample_pow2) {
		if (n & sample_mask)
			return;
	} else if (sample_every > 1 && n % sample_every != 0) {
		return;
	}
	count(PRESSURED_CNT_CHARGE_SAMPLED);
	if (btf)
		memcg = untrusted_memcg(memcg);

	for (int i = 0; i < PRESSURED_MAX_DEPTH; i++) {
		__u64 id = walk_id(memcg, btf);
		struct pressured_watch *w = bpf_map_lookup_elem(&watches, &id);
		if (w)
			check_watch(memcg, id, w, atomics);
		struct mem_cgroup *parent = walk_parent(memcg, btf);
		if (!parent)
			break;
		memcg = parent;
	}
}

/* 6.14+: the memcg stat tracepoints fire on every charge-side stat update with
 * the memcg as first argument. */
SEC("tp_btf/mod_memcg_lruvec_state")
int BPF_PROG(btf_memcg_lruvec, struct mem_cgroup *memcg, int item, int val)
{
	handle_refault(memcg, item, val, true);
	handle_charge(memcg, true, true);
	return 0;
}

SEC("raw_tp/mod_memcg_lruvec_state")
int BPF_PROG(raw_memcg_lruvec, struct mem_cgroup *memcg, int item, int val)
{
	handle_refault(memcg, item, val, false);
	handle_charge(memcg, true, false);
	return 0;
}

SEC("raw_tp/count_memcg_events")
int BPF_PROG(raw_memcg_count_events, struct mem_cgroup *memcg, int item, unsigned long val)
{
	handle_charge(memcg, true, false);
	return 0;
}

/* Older kernels: the page counter charge itself. The counter may be memsw or
 * swap; container_of then yields an id that is not in the watch map. */
static __always_inline struct mem_cgroup *memcg_of_counter(struct page_counter *counter)
{
	return (struct mem_cgroup *)((void *)counter - bpf_core_field_offset(struct mem_cgroup, memory));
}

SEC("fentry/page_counter_try_charge")
int BPF_PROG(fentry_try_charge, struct page_counter *counter, unsigned long nr_pages)
{
	handle_charge(memcg_of_counter(counter), true, false);
	return 0;
}

SEC("kprobe/page_counter_try_charge")
int BPF_KPROBE(kprobe_try_charge, struct page_counter *counter, unsigned long nr_pages)
{
	handle_charge(memcg_of_counter(counter), true, false);
	return 0;
}

/* Before 5.12 (no BPF cmpxchg; see flip_edge). */
SEC("fentry/page_counter_try_charge")
int BPF_PROG(fentry_try_charge_plain, struct page_counter *counter, unsigned long nr_pages)
{
	handle_charge(memcg_of_counter(counter), false, false);
	return 0;
}

SEC("kprobe/page_counter_try_charge")
int BPF_KPROBE(kprobe_try_charge_plain, struct page_counter *counter, unsigned long nr_pages)
{
	handle_charge(memcg_of_counter(counter), false, false);
	return 0;
}

/* ---- reclaim ------------------------------------------------------------ */

#define DUAL_TP(tp, fn_btf, fn_raw, body_args, ...)                      \
	SEC("tp_btf/" #tp) int BPF_PROG(fn_btf, __VA_ARGS__) { body_args; return 0; } \
	SEC("raw_tp/" #tp) int BPF_PROG(fn_raw, __VA_ARGS__) { body_args; return 0; }

DUAL_TP(mm_vmscan_memcg_reclaim_begin, btf_memcg_reclaim_begin, raw_memcg_reclaim_begin,
	emit(PRESSURED_EV_MEMCG_RECLAIM_BEGIN, current_memcg_id(), gfp, 0, 0, false), int order, gfp_t gfp)
DUAL_TP(mm_vmscan_memcg_reclaim_end, btf_memcg_reclaim_end, raw_memcg_reclaim_end,
	emit(PRESSURED_EV_MEMCG_RECLAIM_END, current_memcg_id(), (__s64)nr, 0, 0, false), unsigned long nr)
DUAL_TP(mm_vmscan_direct_reclaim_begin, btf_direct_reclaim_begin, raw_direct_reclaim_begin,
	emit(PRESSURED_EV_DIRECT_RECLAIM_BEGIN, current_memcg_id(), gfp, 0, 0, false), int order, gfp_t gfp)
DUAL_TP(mm_vmscan_direct_reclaim_end, btf_direct_reclaim_end, raw_direct_reclaim_end,
	emit(PRESSURED_EV_DIRECT_RECLAIM_END, current_memcg_id(), (__s64)nr, 0, 0, false), unsigned long nr)
DUAL_TP(mm_vmscan_wakeup_kswapd, btf_kswapd_wakeup, raw_kswapd_wakeup,
	emit(PRESSURED_EV_KSWAPD_WAKEUP, 0, order, 0, 0, false), int nid, int zid, int order, gfp_t gfp)

/* ---- OOM victims ---------------------------------------------------------- */

static __always_inline void handle_victim(__u64 arg0)
{
	if (victim_has_task) {
		struct task_struct *t = (struct task_struct *)arg0;
		struct mem_cgroup *m = current_memcg(t);
		emit(PRESSURED_EV_OOM_VICTIM, m ? memcg_id(m) : 0, 0, BPF_CORE_READ(t, tgid), 0, true);
	} else {
		/* value 1: the memcg is the allocating task's, maybe not the victim's */
		emit(PRESSURED_EV_OOM_VICTIM, current_memcg_id(), 1, (__u32)arg0, PRESSURED_F_PID_ONLY, true);
	}
}

SEC("tp_btf/mark_victim")
int BPF_PROG(btf_mark_victim)
{
	handle_victim(ctx[0]);
	return 0;
}

SEC("raw_tp/mark_victim")
int BPF_PROG(raw_mark_victim)
{
	handle_victim(ctx[0]);
	return 0;
}

/* ---- cgroup lifecycle ----------------------------------------------------- */

static __always_inline void handle_cgroup(__u32 type, struct cgroup *cgrp, __s64 value)
{
	if (target_hierarchy >= 0 && BPF_CORE_READ(cgrp, root, hierarchy_id) != target_hierarchy)
		return;
	emit(type, BPF_CORE_READ(cgrp, kn, id), value, 0, 0, true);
}

DUAL_TP(cgroup_mkdir, btf_cgroup_mkdir, raw_cgroup_mkdir,
	handle_cgroup(PRESSURED_EV_CGROUP_MKDIR, cgrp, BPF_CORE_READ(cgrp, level)), struct cgroup *cgrp, const char *path)
DUAL_TP(cgroup_rmdir, btf_cgroup_rmdir, raw_cgroup_rmdir,
	handle_cgroup(PRESSURED_EV_CGROUP_RMDIR, cgrp, BPF_CORE_READ(cgrp, level)), struct cgroup *cgrp, const char *path)
DUAL_TP(cgroup_notify_populated, btf_cgroup_populated, raw_cgroup_populated,
	handle_cgroup(PRESSURED_EV_CGROUP_POPULATED, cgrp, val), struct cgroup *cgrp, const char *path, int val)

/* ---- node task count (PID pressure) --------------------------------------- */

/* The kernel's own count (what /proc/loadavg prints) where its address is
 * known: userspace stores the address of nr_threads here after the load,
 * asked of the kernel (bpf/kernel_symbol.bpf.c: 5.16+, CONFIG_KALLSYMS_ALL,
 * addresses visible to the daemon). Not a __ksym extern: libbpf would read
 * all of /proc/kallsyms at every load to resolve it. 0: the seeded fork/free
 * delta, which runs ahead of the kernel's count by the tasks reaped but not
 * yet freed (RCU). */
__u64 nr_threads_addr = 0;

static __always_inline void handle_tasks(__s64 step, bool atomics)
{
	__s64 delta;
	if (atomics) {
		delta = __sync_fetch_and_add(&pid_delta, step) + step;
	} else {
		__sync_fetch_and_add(&pid_delta, step); /* XADD: no fetch before 5.12 */
		delta = *(volatile __s64 *)&pid_delta;
	}
	__u64 alarm = pid_alarm;
	if (!alarm)
		return;
	__s64 tasks = pid_base + delta;
	__u64 addr = nr_threads_addr;
	if (addr) {
		int n = 0;
		if (bpf_probe_read_kernel(&n, sizeof(n), (const void *)addr) == 0)
			tasks = n;
	}
	if (tasks < 0)
		tasks = 0;
	if ((__u64)tasks >= alarm) {
		if (flip_edge(&pid_above, 0, 1, atomics)) {
			count(PRESSURED_CNT_EDGES);
			emit(PRESSURED_EV_PID_UP, 0, tasks, 0, 0, true);
		}
	} else if ((__u64)tasks < pid_rearm) {
		if (flip_edge(&pid_above, 1, 0, atomics)) {
			count(PRESSURED_CNT_EDGES);
			emit(PRESSURED_EV_PID_DOWN, 0, tasks, 0, 0, true);
		}
	}
}

/* Every clone (processes and threads, kernel threads too) passes
 * sched_process_fork; every task_struct freed passes sched_process_free. */
DUAL_TP(sched_process_fork, btf_task_fork, raw_task_fork,
	handle_tasks(1, true), struct task_struct *parent, struct task_struct *child)
DUAL_TP(sched_process_free, btf_task_free, raw_task_free,
	handle_tasks(-1, true), struct task_struct *p)
/* Before 5.12 (no BPF fetch/cmpxchg; see flip_edge). */
DUAL_TP(sched_process_fork, btf_task_fork_plain, raw_task_fork_plain,
	handle_tasks(1, false), struct task_struct *parent, struct task_struct *child)
DUAL_TP(sched_process_free, btf_task_free_plain, raw_task_free_plain,
	handle_tasks(-1, false), struct task_struct *p)

/* ---- batched page-counter reads (decisions under pressure) ------------- */

/* One walk at a time: userspace's single reader (the daemon's loop thread)
 * creates an iterator, reads it to the end, then reads the map. */
__u32 page_counters_n = 0;
__u32 page_counters_truncated = 0;

/* Each step visits a cgroup, and a full map ends the walk, so any list
 * that fits in the map ends far below the bound (the helper's own limit is
 * 1 << 23); one cut short says so (truncated). */
#define PRESSURED_WALK_STEPS (1 << 22)

/* The cgroup flags the walk reads (include/linux/cgroup-defs.h, an anonymous
 * enum CO-RE cannot name; unchanged since 4.x). */
#define PRESSURED_CSS_ONLINE (1 << 1)
#define PRESSURED_CSS_RELEASED (1 << 2)
/* One children list walked a node a step (a bpf_loop callback): the root's
 * children, and, when two levels are asked for, each child's children in a
 * loop of their own started from the child's step (pre-order). Two simple
 * loops, not one loop that tracks its depth: the verifier takes the depth's
 * branches as states of their own, which doubled the program's verification
 * time. */
struct page_list {
	__u64 head; /* the parent's children list */
	__u64 next; /* the node to visit next; head when the list is done */
	__u32 descend; /* walk each child's children too */
	__u32 failed; /* a read failed or the map is full: the batch is unusable */
};

static long page_child_step_btf(__u64 i, struct page_list *l);
static long page_child_step_probe(__u64 i, struct page_list *l);

/* One record: the cgroup's id and its memory page counter. False when the
 * map is full. */
static __always_inline bool page_record(__u64 cgroup_id, __u64 pages, __u64 max_pages)
{
	__u32 n = page_counters_n;
	struct pressured_page_counter *rec = bpf_map_lookup_elem(&page_counters, &n);
	if (!rec)
		return false;
	rec->cgroup_id = cgroup_id;
	rec->pages = pages;
	rec->max_pages = max_pages;
	page_counters_n = n + 1;
	return true;
}

/* One step of a list's walk. btf: the cgroup's fields are read with plain
 * loads through a bpf_rdonly_cast pointer (6.2+), which the verifier guards
 * (a faulting load reads 0); otherwise with one bpf_probe_read_kernel call a
 * field (6.1), about four times the walk's cost. */
static __always_inline long page_list_step(struct page_list *l, bool btf, bool may_descend)
{
	__u64 node = l->next;
	if (node == l->head)
		return 1;
	/* The list links each child's own css (cgroup->self) by its sibling
	 * field. The iterator holds cgroup_mutex for the whole walk, so no list
	 * changes under it. */
	__u64 addr = node - bpf_core_field_offset(struct cgroup_subsys_state, sibling) -
		     bpf_core_field_offset(struct cgroup, self);
	int idx = bpf_core_enum_value(enum cgroup_subsys_id, memory_cgrp_id);
	if (idx < 0 || idx >= CGROUP_SUBSYS_COUNT)
		return 1;
	__u64 after = 0, first = 0, id = 0, pages = 0, max_pages = 0;
	unsigned int flags = 0;
	struct cgroup_subsys_state *memory_css = NULL;
	struct cgroup *c = btf ? bpf_rdonly_cast((void *)addr, bpf_core_type_id_kernel(struct cgroup))
			       : (struct cgroup *)addr;
	/* Only a step that starts a loop of the children reads their list. */
	const bool descend = may_descend && l->descend;
	if (btf) {
		after = (__u64)c->self.sibling.next;
		flags = c->self.flags;
		memory_css = c->subsys[idx];
	} else {
		if (bpf_probe_read_kernel(&after, sizeof(after), &c->self.sibling.next) ||
		    bpf_probe_read_kernel(&flags, sizeof(flags), &c->self.flags) ||
		    bpf_probe_read_kernel(&memory_css, sizeof(memory_css), &c->subsys[idx]))
			after = 0;
	}
	if (!after) {
		l->failed = 1;
		return 1;
	}
	l->next = after;
	/* What css_next_child and the iterator's show skip: a released css, and
	 * a removed (offline) cgroup, whose children are removed too. NULL
	 * memory css: a v2 cgroup without the memory controller, and none below
	 * it has it (the controller is enabled top-down). */
	if ((flags & PRESSURED_CSS_RELEASED) || !(flags & PRESSURED_CSS_ONLINE) || !memory_css)
		return 0;
	if (btf) {
		/* css is the first member of mem_cgroup. */
		struct mem_cgroup *m = bpf_rdonly_cast(memory_css, bpf_core_type_id_kernel(struct mem_cgroup));
		id = c->kn->id;
		pages = (__u64)m->memory.usage.counter;
		max_pages = (__u64)m->memory.max;
		if (descend)
			first = (__u64)c->self.children.next;
	} else {
		id = BPF_CORE_READ(c, kn, id);
		pages = (__u64)BPF_CORE_READ((struct mem_cgroup *)memory_css, memory.usage.counter);
		max_pages = (__u64)BPF_CORE_READ((struct mem_cgroup *)memory_css, memory.max);
		if (descend)
			first = (__u64)BPF_CORE_READ(c, self.children.next);
	}
	if (!page_record(id, pages, max_pages)) {
		l->failed = 1;
		return 1;
	}
	if (descend) {
		struct page_list sub = {
			.head = addr + bpf_core_field_offset(struct cgroup, self.children),
			.next = first,
		};
		if (!first) {
			l->failed = 1;
			return 1;
		}
		if (btf)
			bpf_loop(PRESSURED_WALK_STEPS, page_child_step_btf, &sub, 0);
		else
			bpf_loop(PRESSURED_WALK_STEPS, page_child_step_probe, &sub, 0);
		if (sub.failed || sub.next != sub.head) {
			l->failed = 1;
			return 1;
		}
	}
	return 0;
}

static long page_child_step_btf(__u64 i, struct page_list *l)
{
	return page_list_step(l, true, false);
}

static long page_child_step_probe(__u64 i, struct page_list *l)
{
	return page_list_step(l, false, false);
}

static long page_top_step_btf(__u64 i, struct page_list *l)
{
	return page_list_step(l, true, true);
}

static long page_top_step_probe(__u64 i, struct page_list *l)
{
	return page_list_step(l, false, true);
}

/* cgroup iterator (6.1+), attached by userspace to a directory of the memory
 * hierarchy (kubepods or a QoS tier; a v1 one where the kernel accepts a v1
 * cgroup fd) in SELF_ONLY order: the program runs once, for the root, and
 * walks the root's children lists itself, down to page_counters_depth levels,
 * recording the page counter of each cgroup on the way (the value
 * memory.usage_in_bytes (v1, any non-root cgroup) and memory.current (v2)
 * print): one syscall for every pod instead of one per pod. Walking the lists
 * here, not with the iterator's pre-order, visits only the levels asked for
 * (the iterator would visit every container cgroup too) at a fraction of the
 * iterator's cost a cgroup. Records go to the page_counters map: a walk's seq
 * output is limited to one read session (a few pages), too small for
 * thousands of pods. The program runs once more with no cgroup at the end of
 * the walk and writes the record count there. A removed root is not shown
 * to the program at all: no record. */
/* The iterator's context, as the kernel lays it out (kernel/bpf/cgroup_iter.c
 * and bpf_iter_meta in include/linux/bpf.h: two pointers; a pointer and two
 * u64s; unchanged since they were added): plain structs, not vmlinux.h's,
 * whose preserve_access_index made libbpf search the kernel's BTF for each
 * of the two at every load (~1 ms of a start each) for offsets that are 0. */
struct pressured_iter_meta {
	struct seq_file *seq;
	__u64 session_id;
	__u64 seq_num;
};

struct pressured_iter_cgroup {
	struct pressured_iter_meta *meta;
	struct cgroup *cgroup;
};

static __always_inline int page_counters_walk_from(struct pressured_iter_cgroup *ctx, bool btf)
{
	struct seq_file *seq = ctx->meta->seq;
	struct cgroup *cgrp = ctx->cgroup;

	if (!cgrp) {
		struct pressured_page_counter_walk end = {
			.count = page_counters_n,
			.truncated = page_counters_truncated,
		};
		bpf_seq_write(seq, &end, sizeof(end));
		return 0;
	}
	page_counters_n = 0;
	page_counters_truncated = 0;
	__u32 zero = 0;
	__u32 *depth = bpf_map_lookup_elem(&page_counters_depth, &zero);
	int idx = bpf_core_enum_value(enum cgroup_subsys_id, memory_cgrp_id);
	if (idx < 0 || idx >= CGROUP_SUBSYS_COUNT)
		return 0;
	/* The root's fields too are read through an untrusted pointer where the
	 * kernel has the kfunc: a load through the iterator's trusted one makes
	 * the 6.x verifier search vmlinux BTF by name for each field (about
	 * 3 ms of start-up), for nothing a read-only walk needs. */
	if (btf)
		cgrp = bpf_rdonly_cast(cgrp, bpf_core_type_id_kernel(struct cgroup));
	/* NULL on a v2 cgroup without the memory controller: no record. */
	struct cgroup_subsys_state *css = cgrp->subsys[idx];
	if (!css)
		return 0;
	if (!page_record(cgrp->kn->id, (__u64)BPF_CORE_READ((struct mem_cgroup *)css, memory.usage.counter),
			 (__u64)BPF_CORE_READ((struct mem_cgroup *)css, memory.max))) {
		page_counters_truncated = 1;
		return 0;
	}
	__u32 levels = depth ? *depth : 2;
	if (levels == 0)
		return 0;
	if (levels > 2) { /* deeper walks are not asked for: not cut silently */
		page_counters_truncated = 1;
		return 0;
	}
	struct page_list top = {
		.head = (__u64)&cgrp->self.children,
		.next = (__u64)BPF_CORE_READ(cgrp, self.children.next),
		.descend = levels > 1,
	};
	if (btf)
		bpf_loop(PRESSURED_WALK_STEPS, page_top_step_btf, &top, 0);
	else
		bpf_loop(PRESSURED_WALK_STEPS, page_top_step_probe, &top, 0);
	if (top.failed || top.next != top.head)
		page_counters_truncated = 1;
	return 0;
}

/* 6.2+ (bpf_rdonly_cast); userspace loads the _probe flavour where the
 * kernel lacks the kfunc. */
SEC("iter/cgroup")
int page_counters_walk(struct pressured_iter_cgroup *ctx)
{
	return page_counters_walk_from(ctx, true);
}

SEC("iter/cgroup")
int page_counters_walk_probe(struct pressured_iter_cgroup *ctx)
{
	return page_counters_walk_from(ctx, false);
}
