/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Event records shared by bpf/pressured_events.bpf.c and the C++ consumer
 * (userspace/bpf). Fixed-width types only; the C++ side static_asserts sizes. */
#ifndef PRESSURED_EVENTS_H
#define PRESSURED_EVENTS_H

#ifndef __VMLINUX_H__
#include <linux/types.h> /* userspace: __u32, __u64, __s64 */
#endif

/* Event types: the same numbers as pressured::EventType. */
enum pressured_ev_type {
	PRESSURED_EV_THRESHOLD_UP = 1,
	PRESSURED_EV_THRESHOLD_DOWN = 2,
	PRESSURED_EV_MEMCG_RECLAIM_BEGIN = 3,
	PRESSURED_EV_MEMCG_RECLAIM_END = 4,
	PRESSURED_EV_DIRECT_RECLAIM_BEGIN = 5,
	PRESSURED_EV_DIRECT_RECLAIM_END = 6,
	PRESSURED_EV_KSWAPD_WAKEUP = 7,
	PRESSURED_EV_OOM_VICTIM = 8, /* value 0: cgroup is the victim's memcg; 1: the allocating task's (PID_ONLY) */
	PRESSURED_EV_CGROUP_MKDIR = 9,
	PRESSURED_EV_CGROUP_RMDIR = 10,
	PRESSURED_EV_CGROUP_POPULATED = 11,
	PRESSURED_EV_PID_UP = 12,   /* node task count rose to the PID alarm (value: tasks) */
	PRESSURED_EV_PID_DOWN = 13, /* ... fell back below its re-arm level */
	PRESSURED_EV_MEMSTALL = 14, /* one memstall (psi_memstall_enter..leave) longer than
				     * memstall_emit_ns; value: its duration in ns */
};

/* One ring buffer record: 40 bytes. */
struct pressured_event {
	__u64 ts_ns;     /* bpf_ktime_get_ns() */
	__u64 cgroup_id; /* kernfs id of the memory cgroup (or of the cgroup for lifecycle events) */
	__s64 value;     /* type-specific; threshold events: usage in bytes */
	__u32 pid;
	__u32 cpu;
	__u32 type;      /* enum pressured_ev_type */
	__u32 flags;     /* PRESSURED_F_* */
};

#define PRESSURED_F_WOKE 1u        /* the producer asked for a wakeup */
#define PRESSURED_F_PID_ONLY 2u    /* mark_victim(pid) prototype: cgroup is the current task's */

/* Watch map: memory cgroup id -> alarm. */
struct pressured_watch {
	__u64 alarm_pages;   /* alarm level in pages */
	__u64 rearm_pages;   /* usage must fall below this to re-arm (hysteresis) */
	__u64 watch_id;      /* userspace handle, echoed as value's companion */
	__u32 above;         /* 0: below (armed for an up edge), 1: above */
	__u32 pad;
	__u64 seen_pages;    /* page counter at the last sampled charge that walked past it */
	__u64 seen_ns;       /* bpf_ktime_get_ns() of that sample; 0: never */
};

/* Tracked memory cgroups: cgroup id -> reclaim and stall activity, summed
 * over the cgroup and all its descendants since the entry was created. */
struct pressured_memcg_activity {
	__u64 pgscan;          /* pages scanned by reclaim (kswapd, direct, khugepaged, proactive) */
	__u64 pgsteal;         /* pages reclaimed */
	__u64 refaults;        /* workingset refaults, anon + file */
	__u64 memstall_ns;     /* time tasks of the cgroup spent in memstalls */
	__u64 memstall_count;  /* memstalls (outermost psi_memstall_enter..leave) */
};

/* Per-task memstall in progress (key: tid). */
struct pressured_memstall {
	__u64 start_ns;
	__u32 depth;           /* nested enter calls */
	__u32 pad;
};

/* Batched page-counter read (the page_counters cgroup iterator): one record
 * per memory cgroup of the walked subtree, down to the depth userspace asks
 * for (kubepods -> QoS tier -> pod: 2; a tier -> pod: 1). */
struct pressured_page_counter {
	__u64 cgroup_id;     /* kernfs id (the directory's inode number) */
	__u64 pages;         /* memory page counter: memory.usage_in_bytes / memory.current >> page_shift */
	__u64 max_pages;     /* its limit: memory.limit_in_bytes / memory.max >> page_shift (PAGE_COUNTER_MAX: none) */
};

/* The iterator's whole seq output, written once at the end of the walk. */
struct pressured_page_counter_walk {
	__u32 count;         /* records written to the page_counters map */
	__u32 truncated;     /* 1: more cgroups than the map holds; the batch is unusable */
};

/* Node-wide task count (the /proc/loadavg total userspace reads for
 * pid.available): count = pid_base + pid_delta, where the fork/free hooks move
 * pid_delta and userspace re-seeds pid_base from /proc on every safety-net tick.
 * pid_alarm == 0: no alarm. */

/* Per-CPU counters (array map index). */
enum pressured_counter {
	PRESSURED_CNT_DROPS = 0,      /* failed bpf_ringbuf_reserve */
	PRESSURED_CNT_CHARGE_SEEN = 1,
	PRESSURED_CNT_CHARGE_SAMPLED = 2,
	PRESSURED_CNT_EDGES = 3,
	PRESSURED_CNT_MEMSTALL_LOST = 4, /* memstalls not timed: the per-task map was full */
	PRESSURED_CNT_MAX = 5,
};

#define PRESSURED_MAX_DEPTH 8      /* ancestors walked from the charged memcg */

#endif /* PRESSURED_EVENTS_H */
