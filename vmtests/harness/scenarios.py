"""The scenarios, what each expects, and the verdict on one guest result."""
import json
import re

from .common import log
from .qemu import markers


# name -> what it exercises (expectations: EXPECT; time budgets: BUDGET_S)
SCENARIOS = {
    "fast-spike": "1. BestEffort pod grows fast; Guaranteed and Burstable hold",
    "slow-leak": "2. Burstable pod leaks slowly over its request (soft threshold)",
    "ranking": "3. several pods per class, neutral pressure: eviction order",
    "min-reclaim": "4. minimum reclaim: no over-eviction; with min-reclaim, continue",
    "oscillation": "5. pressure crosses the soft threshold back and forth: no flap",
    "page-cache": "6. reclaimable page cache must not cause an eviction",
    "pid-pressure": "7. fork growth until pid.available is below threshold",
    "restart": "8. daemon restart under pressure: state restored, no double eviction",
    "soft-then-spike": "9. soft-evicted pod ignores SIGTERM, a second pod spikes: hard must not wait",
    "active-page-cache": "10. re-read page cache under soft then hard (phase 1), then anonymous growth (phase 2): "
                         "the reclaim stage on and off",
    "cache-and-growth": "11. one pod re-reads page cache under soft (phase 1), then grows anonymous memory (phase 2): "
                        "the reclaim stage takes its cache, then still evicts it",
}
SCENARIO_ORDER = list(SCENARIOS)
SMOKE_SCENARIOS = ["fast-spike", "page-cache"]

# Per guest scenario result name: the victims expected, in eviction order
# (None: any order), and extra checks. Peers and baselines are judged by the
# same rules; only the failures of pressured and pressured+kubelet fail the run
# (STRICT_CONTENDERS; the others are the comparison, see docs/comparison.md).
EXPECT = {
    "fast-spike": {"victims": ["besteffort-spike"], "ordered": True},
    "slow-leak": {"victims": ["burstable-leak"], "ordered": True, "min_latency_ms": 5000 - 300},
    "ranking": {"victims": ["besteffort-large", "besteffort-small", "burstable-over-96", "burstable-over-32"],
                "ordered": True},
    "min-reclaim": {"victims": ["besteffort-large"], "ordered": True},
    "min-reclaim-200Mi": {"victims": ["besteffort-large", "besteffort-small"], "ordered": True},
    "oscillation": {"victims": [], "ordered": True, "max_condition_lines": 2},
    "page-cache": {"victims": [], "ordered": True},
    "pid-pressure": {"victims": ["besteffort-forker"], "ordered": True, "no_fork_failure": True},
    "restart": {"victims": ["burstable-leak"], "ordered": True, "pressured_restored": True},
    "soft-then-spike": {"victims": ["besteffort-stubborn"], "ordered": True},
}

RESULT_NAMES = {"min-reclaim": ["min-reclaim", "min-reclaim-200Mi"]}

# Scenarios that only some contenders run: active-page-cache compares pressured's
# reclaim stage on and off on the same numbers (the kubelet 1.20 cannot be the
# baseline there: on the pure cgroup v2 guest its memory.available never falls).
SCENARIO_CONTENDERS = {"active-page-cache": ("pressured-relief", "pressured-relief-off"),
                       "cache-and-growth": ("pressured-relief", "pressured-relief-off")}


# Contenders that run only some scenarios unless named with --contender: in a run of
# every contender the relief pair is the baseline pair of active-page-cache; elsewhere
# one of them is the `pressured` contender again (its default has the stage on).
CONTENDER_SCENARIOS = {"pressured-relief": ("active-page-cache", "cache-and-growth"),
                       "pressured-relief-off": ("active-page-cache", "cache-and-growth")}


def scenarios_for(contender, scenarios, named=False):
    """The scenarios of `scenarios` that `contender` runs (`named`: it was asked for by name)."""
    return [s for s in scenarios if contender in SCENARIO_CONTENDERS.get(s, (contender,))
            and (named or s in CONTENDER_SCENARIOS.get(contender, (s,)))]


# Per contender, what active-page-cache expects in each phase: the victims of phase 1
# (None: at least one, whoever; the kubelet's decision on active page cache) and of
# phase 2. The relief-off run also checks that the scenario did make false pressure.
PHASE_EXPECT = {
    "active-page-cache": {
        "pressured-relief": {"phase1": [], "phase2": ["burstable-grower"]},
        "pressured-relief-off": {"phase1": None, "phase2": None, "phase1_hard": True},
    },
    # One pod holds the cache and grows: with the stage on it keeps its cache in
    # phase 1 and is still the one evicted in phase 2. With it off, the soft
    # threshold evicts in phase 1 (the evicted pod's cache stays charged, as in
    # active-page-cache, so whoever follows it is the kubelet's decision too).
    "cache-and-growth": {
        "pressured-relief": {"phase1": [], "phase2": ["burstable-mixed"]},
        "pressured-relief-off": {"phase1": None, "phase2": None},
    },
}

# Guest seconds each scenario may take at most (TCG), for the boot timeout.
BUDGET_S = {"fast-spike": 90, "slow-leak": 150, "ranking": 150, "min-reclaim": 160, "oscillation": 90,
            "page-cache": 150, "pid-pressure": 100, "restart": 120, "soft-then-spike": 120,
            "active-page-cache": 420, "cache-and-growth": 300}


def judge(r):
    """Adds the metrics and the verdict to one guest result."""
    exp = EXPECT.get(r["scenario"], {"victims": [], "ordered": True})
    samp = r.get("sampler") or {}
    spods = samp.get("pods", {})

    def released(name):
        v = spods.get(name, {}).get("released_ms", -1)
        return v if v is not None and v >= 0 else None

    start_ms = samp.get("start_mono_ns", 0) / 1e6 if samp else 0

    def chosen_at(p):
        # The contender's order is when it acted on each pod, whichever the guest saw
        # first: the API recording the eviction (deletion requested, or phase Failed:
        # the kubelet's order, as its release also depends on how quickly it stops each
        # pod) or the memory being released (pressured kills locally and evicts through
        # the API after, seconds later on a TCG guest).
        times = []
        ev = p.get("api_evicted_ms", -1)
        if ev is not None and ev >= 0 and start_ms:
            times.append(ev - start_ms)
        if released(p["name"]) is not None:
            times.append(released(p["name"]))
        return (not times, min(times) if times else 0)

    killed = [p for p in r["pods"] if p["workload"] not in ("running", "0", "none")]
    killed.sort(key=chosen_at)
    victims = [p["name"] for p in killed]
    expected = exp["victims"]
    wrong = [v for v in victims if v not in expected]
    if exp.get("ordered") and not wrong:
        wrong += [v for i, v in enumerate(victims) if i < len(expected) and expected[i] != v]
    missing = [v for v in expected if v not in victims]
    oom = None
    if samp:
        oom = samp.get("oom_kill_end", 0) - samp.get("oom_kill_start", 0)
    crossed = samp.get("crossed_ms", -1) if samp else -1
    first_release = min([released(v) for v in victims if released(v) is not None] or [None], key=lambda x: x or 0)
    latency = first_release - crossed if (first_release is not None and crossed is not None and crossed >= 0) else None
    procs_killed = sum(spods.get(v, {}).get("peak_procs", 0) for v in victims)
    failures = []
    if not r.get("contender_started"):
        failures.append("contender did not start")
    elif pressured_like(r["contender"]) and not r.get("contender_alive_at_end"):
        failures.append(f"contender died (rc {r.get('contender_rc')})")
    if oom:
        failures.append(f"{oom} kernel OOM kill(s)")
    if wrong:
        failures.append("wrong victim(s): " + ", ".join(wrong))
    if missing:
        failures.append("not evicted: " + ", ".join(missing))
    if exp.get("min_latency_ms") and latency is not None and latency < exp["min_latency_ms"] and not wrong:
        failures.append(f"evicted {latency} ms after the soft threshold, before its grace period")
    extra = r.get("extra", {})
    if exp.get("max_condition_lines") is not None and pressured_like(r["contender"]):
        if extra.get("condition_log_lines", 0) > exp["max_condition_lines"]:
            failures.append(f"MemoryPressure logged {extra['condition_log_lines']} changes (flapping)")
    if (exp.get("pressured_restored") and pressured_like(r["contender"])
            and "checkpoint_restored_lines" in extra and extra["checkpoint_restored_lines"] < 1):
        failures.append("the restarted daemon did not restore its checkpoint")
    if exp.get("no_fork_failure") and extra.get("fork_failed"):
        failures.append("fork failed in a pod (pid exhaustion reached)")
    if not samp:
        failures.append("no sampler data")
    phase_facts = {}
    phase_exp = PHASE_EXPECT.get(r["scenario"], {}).get(r["contender"])
    if samp.get("phases") and r["scenario"] in PHASE_EXPECT:
        phase_facts = judge_phases(r, samp, victims, released, phase_exp, failures)
        # The phases' expectations replace the scenario's victim list.
        failures[:] = [f for f in failures if not f.startswith(("wrong victim", "not evicted"))]
        wrong, missing = [], []
    node_facts = judge_node(r, victims, start_ms, crossed, failures)
    if r["contender"] == "daemonset":
        judge_deploy(r.get("deploy"), failures)
    if r["contender"] in CONTAINER_CONTENDERS:
        judge_container(r.get("deploy"), failures)
    r["metrics"] = {"kernel_oom_kills": oom, "victims": victims, "wrong_victims": len(wrong) + len(missing),
                    "processes_killed": procs_killed, "crossed_ms": crossed, "latency_ms": latency,
                    "min_available_mib": (round(samp["min_available"] / 1048576) if samp.get("min_available")
                                          is not None and samp.get("signal") == "memory" else
                                          (round(samp["min_available"]) if samp.get("min_available") is not None
                                           else None)),
                    **node_facts,
                    **phase_facts,
                    **({"reclaim": r["reclaim"]} if r.get("reclaim") else {}),
                    **({"deploy": r.get("deploy")} if r["contender"] == "daemonset" or r["contender"] in
                       CONTAINER_CONTENDERS else {}),
                    "cpu_ms": r.get("cpu_ms"),
                    "cpu_after_start_ms": (r["cpu_ms"] - r["cpu_start_ms"]) if r.get("cpu_start_ms") is not None
                    and r.get("cpu_ms") is not None else None}
    r["failures"] = failures
    r["passed"] = not failures
    return r


def judge_phases(r, samp, victims, released, exp, failures):
    """A scenario of phases (active-page-cache): the victims of each phase (by when their
    memory was released, against the sampler's phase starts), each phase's kernel OOM kills
    and minimum memory.available, and per threshold the time from its first crossing to
    the node back over it (the reclaim stage's relief) or to the first victim's release."""
    phases = samp["phases"]
    starts = [p["start_ms"] for p in phases]

    def phase_of(v):
        t = released(v)
        if t is None:
            return len(phases)  # killed after the sampler stopped: the last phase
        return max(i + 1 for i, s in enumerate(starts) if s <= t)

    by_phase = {f"phase{i + 1}_victims": [v for v in victims if phase_of(v) == i + 1] for i in range(len(phases))}
    facts = dict(by_phase)
    for i, p in enumerate(phases):
        n = i + 1
        facts[f"phase{n}_oom_kills"] = p["oom_kills"]
        facts[f"phase{n}_min_available_mib"] = round(p["min_available"] / 1048576) if p["min_available"] >= 0 else None
        first_release = min([released(v) for v in by_phase[f"phase{n}_victims"] if released(v) is not None] or [None],
                            key=lambda x: x or 0)
        for t in p["thresholds"]:
            name = "soft" if t is p["thresholds"][0] and len(p["thresholds"]) > 1 else "hard"
            c, rec = t["crossed_ms"], t["recovered_ms"]
            facts[f"phase{n}_{name}_crossings"] = t["crossings"]
            facts[f"phase{n}_{name}_below_ms"] = t["below_ms"]
            facts[f"phase{n}_{name}_crossed_to_recovered_ms"] = rec - c if c >= 0 and rec >= 0 else None
            facts[f"phase{n}_{name}_crossed_to_eviction_ms"] = (first_release - c if c >= 0 and first_release
                                                                is not None and first_release >= c else None)
    if exp is None:
        return facts
    # The pressure itself: phase 1 must take the node under the soft threshold whoever
    # runs, and, without the reclaim stage, under the hard one too. With the stage on,
    # reclaim at the soft threshold may keep the node from ever reaching the hard one.
    p1 = phases[0]
    if p1["thresholds"][0]["crossed_ms"] < 0:
        failures.append("phase 1 never crossed the soft threshold: no false pressure to relieve")
    if exp.get("phase1_hard") and not any(t["crossed_ms"] >= 0 for t in p1["thresholds"][1:]):
        failures.append("phase 1 never crossed the hard threshold without the reclaim stage: the scenario made "
                        "too little pressure")
    for n in range(1, len(phases) + 1):
        want, got = exp.get(f"phase{n}"), by_phase[f"phase{n}_victims"]
        if want is None and n == 1 and not got:
            failures.append("phase 1: nobody evicted (the scenario made no pressure the kubelet would act on)")
        elif want is not None and got != want:
            failures.append(f"phase {n}: evicted {', '.join(got) or 'nobody'}, expected {', '.join(want) or 'nobody'}")
    if len(phases) < 2 and exp.get("phase2"):
        failures.append("no phase 2 (the grower was gone before it)")
    return facts


def pressured_like(contender):
    """pressured itself runs as this contender (a process, or deploy/'s DaemonSet pod)."""
    return contender.startswith("pressured") or contender == "daemonset"


def judge_deploy(d, failures):
    """The daemonset contender's deployment facts (vmtests/guest/node.sh, vmt_ds_apply and
    vmt_ds_delete): the pod made by the DaemonSet controller, bound by the scheduler, with a
    ServiceAccount token; Ready; under its seccomp profile; BPF attached, the cgroup layout
    detected, pods listed from the API server; not restarted; nothing of it running after
    `kubectl delete -k`, and none of its files after the uninstall (deploy/uninstall/)."""
    if not d:
        failures.append("no deployment facts from the guest")
        return
    if not d.get("applied"):
        failures.append("kubectl apply -k of the test overlay failed")
        return
    if not d.get("ready"):
        failures.append("the DaemonSet's pod was not Running and Ready")
        return
    want = [
        (d.get("owner") == "DaemonSet", f"pod owned by {d.get('owner')!r}, not a DaemonSet"),
        (d.get("created_by") == "daemonset-controller", f"pod created by {d.get('created_by')!r}, "
                                                          "not the DaemonSet controller"),
        (d.get("scheduled_by") == "default-scheduler", f"pod bound by {d.get('scheduled_by')!r}, not the scheduler"),
        (str(d.get("token_secret", "")).startswith("pressured-token-"),
         f"no ServiceAccount token Secret mounted ({d.get('token_secret')!r})"),
        (d.get("seccomp") == 2, f"Seccomp: {d.get('seccomp')} in the daemon's /proc/<pid>/status (want 2: filter)"),
        (d.get("audit_seccomp", 0) == 0, f"{d.get('audit_seccomp')} seccomp audit record(s) of pressured"),
        ((d.get("bpf_attached") or 0) >= 1, "no BPF program attached (its log)"),
        (bool(d.get("cgroups_line")), "no cgroup layout/driver line in its log"),
        ((d.get("pods_listed") or -1) >= 1, f"pods listed from the API server: {d.get('pods_listed')} "
                                             "(its own pod at least)"),
        (d.get("restarts", 0) == 0, f"the pressured container restarted {d.get('restarts')} time(s)"),
        (d.get("deleted") is True, "namespace or daemon still there 300 s after kubectl delete -k"),
        (d.get("left_processes", 0) == 0, f"{d.get('left_processes')} pressured process(es) left"),
        (d.get("left_links") in ("0", "-"), f"{d.get('left_links')} BPF link(s) left on the node"),
        (not d.get("left_taints"), f"taint(s) left on the node: {d.get('left_taints')}"),
        (d.get("uninstalled") is True, "the uninstall (deploy/uninstall/) did not roll out"),
        (not d.get("left_files"), f"file(s) left on the node after the uninstall: {d.get('left_files')}"),
        # The init container installed the profile, and `kubectl delete -k` leaves it: without it
        # there the uninstall had nothing to remove, and an empty left_files proves nothing.
        ("profiles/pressured.json" in str(d.get("files_after_delete") or ""),
         f"the seccomp profile was not on the node after kubectl delete -k ({d.get('files_after_delete')!r}): "
         "the uninstall's check cannot tell"),
    ]
    if d.get("left_links") == "-":
        failures.append("bpftool missing in the guest: BPF links after the delete not checked")
    elif d.get("links_running") in ("0", "-"):
        failures.append(f"bpftool saw {d.get('links_running')} BPF links while pressured ran: the leftover check "
                        "cannot tell")
    failures += [why for ok, why in want if not ok]


# pressured from its OCI image under runc (vmtests/run --pressured-image, harness/container.py):
# the profile as shipped, and the same allow list with SCMP_ACT_LOG as the default action.
CONTAINER_CONTENDERS = ("pressured-image", "pressured-image-log", "pressured-image-paranoid2")
# The container's cgroup (its spec's cgroupsPath), beside the scenario's contender cgroup.
CONTAINER_CGROUP = "/system.slice/pressured-image"
# Where scripts/image puts the binary, and the ELF machine of each architecture's.
IMAGE_BINARY = "/usr/local/bin/pressured"
ELF_MACHINE = {"amd64": "62", "arm64": "183"}


def judge_container(d, failures):
    """The facts of pressured run from its image (vmtests/guest/contenders.sh, vmt_ctr_*): the
    image's binary of the guest's architecture ran, under a seccomp filter, without new
    privileges, on a read-only root, in its cgroup; it attached BPF programs and served them on
    /metrics; it stopped with 0 on SIGTERM; no seccomp audit record (type=1326) appeared while
    it ran; the container was deleted. kprobes: with kernel.perf_event_paranoid above 2 (Debian's
    default, 3) perf_event_open wants CAP_SYS_ADMIN, which the DaemonSet does not grant, so a
    kprobe may be refused, but every such refusal must name the sysctl and its remedy in the log
    and in /metrics; at 2 or below CAP_PERFMON suffices and none may be refused."""
    if not d:
        failures.append("no container facts from the guest")
        return
    from . import common
    want = [
        (d.get("exe") == IMAGE_BINARY, f"the container ran {d.get('exe')!r}, not the image's {IMAGE_BINARY}"),
        (d.get("elf_machine") == ELF_MACHINE.get(common.ARCH),
         f"the binary's ELF machine is {d.get('elf_machine')!r}, not {common.ARCH}'s {ELF_MACHINE.get(common.ARCH)}"),
        (d.get("seccomp") == 2, f"Seccomp: {d.get('seccomp')} in the daemon's /proc/<pid>/status (want 2: filter)"),
        (d.get("no_new_privs") == "1", f"NoNewPrivs: {d.get('no_new_privs')!r} (want 1)"),
        (d.get("root_read_only") is True, "the container's root is not read-only"),
        (d.get("cgroup") == CONTAINER_CGROUP, f"the daemon's cgroup is {d.get('cgroup')!r}, not {CONTAINER_CGROUP}"),
        ((d.get("bpf_attached") or 0) >= 1, "no BPF program attached (its log)"),
        ((d.get("metrics_program_lines") or 0) >= 1,
         f"/metrics did not serve pressured_bpf_program_info (wget exit {d.get('metrics_wget_rc')}"
         f"{': ' + d['metrics_wget_error'].strip() if (d.get('metrics_wget_error') or '').strip() else ''})"),
        (d.get("rc") == 0 and d.get("stopped_cleanly") is True,
         f"pressured did not stop cleanly on SIGTERM (runc's exit status {d.get('rc')})"),
        (d.get("audit_seccomp") == 0, f"{d.get('audit_seccomp')} seccomp audit record(s) (type=1326) while it ran"),
        (d.get("containers_left") == 0, f"{d.get('containers_left')} container(s) left in runc's state"),
    ]
    paranoid = d.get("perf_event_paranoid")
    refused = d.get("kprobe_refused") or 0
    explained = d.get("kprobe_refused_explained") or 0
    in_metrics = d.get("metrics_paranoid_reasons") or 0
    if paranoid is None:
        want.append((False, "the guest did not read kernel.perf_event_paranoid"))
    elif paranoid > 2:
        want += [
            (explained == refused, f"{refused - explained} of {refused} kprobe(s) refused with "
                                   f"kernel.perf_event_paranoid={paranoid} without the sysctl and its remedy in the log"),
            (in_metrics == refused, f"{in_metrics} off program(s) in /metrics name kernel.perf_event_paranoid=2, "
                                    f"{refused} kprobe(s) were refused for it"),
        ]
    else:
        want += [
            (refused == 0, f"{refused} kprobe(s) refused for permission with kernel.perf_event_paranoid={paranoid} "
                           f"(CAP_PERFMON should do)"),
            (in_metrics == 0, f"{in_metrics} off program(s) in /metrics blame kernel.perf_event_paranoid at {paranoid}"),
        ]
    failures += [why for ok, why in want if not ok]


def judge_paranoid_remedy(results, failures):
    """Across one boot's container runs: the kprobes the shipped run had refused for
    kernel.perf_event_paranoid attach in the run with the sysctl at 2 (the documented remedy)."""
    by = {(r.get("scenario"), r.get("contender")): (r.get("deploy") or {}) for r in results}
    for (scen, c), d in by.items():
        if c != "pressured-image" or not d.get("kprobe_refused"):
            continue
        fixed = by.get((scen, "pressured-image-paranoid2"))
        if fixed is None:
            continue
        if (fixed.get("kprobe_attached") or 0) < d["kprobe_refused"]:
            failures.append(f"{scen}: {d['kprobe_refused']} kprobe(s) refused as shipped (perf_event_paranoid="
                            f"{d.get('perf_event_paranoid')}), but only {fixed.get('kprobe_attached')} attached with it at "
                            f"{fixed.get('perf_event_paranoid')}")


def judge_node(r, victims, start_ms, crossed, failures):
    """The real node's facts (contenders kubelet, pressured+kubelet), from the pods' API
    watch and Events: who evicted whom, evictions per pod, restarts of the victims, and
    the time from the threshold crossing to the API showing the first victim gone."""
    pods = [p for p in r.get("pods", []) if "evicted_by" in p]
    if not pods:
        return {}
    by = {}
    for p in pods:
        for comp, n in p["evicted_by"].items():
            by[comp] = by.get(comp, 0) + n
        total = sum(p["evicted_by"].values())
        if total > 1:
            failures.append(f"{p['name']} evicted {total} times ({p['evicted_by']})")
    restarts = {p["name"]: p.get("restarts", 0) for p in pods if p["name"] in victims}
    if r["contender"] in ("pressured+kubelet", "daemonset"):
        looped = [f"{n} ({k})" for n, k in restarts.items() if k > 0]
        if looped:
            failures.append("victim containers restarted by the kubelet: " + ", ".join(looped))
    api_ms = None
    gone = [p["api_gone_ms"] for p in pods if p["name"] in victims and p.get("api_gone_ms", -1) >= 0]
    if gone and start_ms and crossed is not None and crossed >= 0:
        api_ms = round(min(gone) - start_ms - crossed)
    records = {p["name"]: p["record"] for p in pods if p["name"] in victims and "record" in p}
    if r["contender"] in ("pressured+kubelet", "daemonset"):
        for p in pods:
            if p["name"] in records and p["evicted_by"].get("pressured"):
                failures += judge_record(p["name"], records[p["name"]])
    if r["contender"] == "pressured+kubelet" and "records_undone" in r:  # not in results of older guests
        failures += judge_undone(r["records_undone"], records)
    return {"evicted_by": by, "victim_restarts": restarts, "api_gone_latency_ms": api_ms,
            **({"eviction_records": records} if records else {})}


# The DisruptionTarget condition the kubelet writes for a node-pressure eviction, which
# pressured's status update copies (docs/kubernetes.md, "The eviction record").
DISRUPTION_TARGET = "True/TerminationByKubelet"

def judge_record(name, rec):
    """What an operator can rely on after pressured evicted `name` beside the real kubelet
    (vmtests/guest/node.sh, vmt_node_record_json). First the API showed the pod Failed with
    reason Evicted, pressured's message and the DisruptionTarget condition. Then, once the
    kubelet's status sync has run, one of two outcomes: the record held (the object still
    there, Failed, with its DisruptionTarget condition, and none of its containers started
    again), or the kubelet undid it and pressured ended the pod through the API (the object
    gone or terminating). Reason and message are reported, not judged: the kubelet's status
    sync drops them whatever pressured does (docs/kubernetes.md, "What the kubelet does with
    the record"). `kubectl get pods`' STATUS column is reported too: it shows a terminated
    container's reason ("Error") over the pod's, and pressured's hard eviction kills the
    container before it writes the record. Returns the failures."""
    ev, synced = rec.get("evicted"), rec.get("synced")
    if not ev:
        return [f"{name}: the API never showed it Failed (no eviction record: deleted instead?)"]
    out = []
    if ev.get("phase") != "Failed" or ev.get("reason") != "Evicted":
        out.append(f"{name}: recorded as {ev.get('phase')}/{ev.get('reason') or '-'}, not Failed/Evicted")
    if "Evicted by pressured" not in (ev.get("message") or ""):
        out.append(f"{name}: the record's message is not pressured's ({ev.get('message')!r})")
    if ev.get("disruption_target") != DISRUPTION_TARGET:
        out.append(f"{name}: the record's DisruptionTarget is {ev.get('disruption_target') or 'missing'!r}, "
                   f"not {DISRUPTION_TARGET}")
    if not synced:
        return out + [f"{name}: no record read after the kubelet's status sync"]
    if record_outcome(rec) == "ended":
        return out  # the kubelet undid the record and pressured ended the pod through the API
    held = []
    if synced.get("phase") != "Failed":
        held.append(f"{synced.get('phase')} after the kubelet's status sync, not Failed")
    if synced.get("disruption_target") != DISRUPTION_TARGET:
        held.append(f"the DisruptionTarget condition is {synced.get('disruption_target') or 'gone'!r} after the "
                    "kubelet's status sync")
    if synced.get("restarts", 0) > ev.get("restarts", 0):
        held.append(f"the kubelet restarted its containers after the eviction record "
                    f"({ev.get('restarts', 0)} -> {synced.get('restarts')} restarts)")
    return out + [f"{name}: {h}, and the pod was not ended through the API either (kubelet "
                  f"{rec.get('kubelet') or 'unknown'}; kubectl get pods shows {synced.get('kubectl_status')!r})"
                  for h in held]


def judge_undone(counted, records):
    """pressured ends a pod through the API exactly when it counted its record undone by the
    kubelet (pressured_kubernetes_eviction_records_undone_total, read from its /metrics before it
    stopped): as many counted as records ended. A count without an ended pod, or an ended pod
    without a count, is a failure either way: the record judged "ended" could otherwise hide an
    eviction pressured sent for a record the kubelet had kept."""
    if counted is None:
        return ["pressured's /metrics could not be read for the undone eviction records"]
    ended = sorted(n for n, rec in records.items() if record_outcome(rec) == "ended")
    if counted != len(ended):
        return [f"pressured counted {counted} eviction record(s) undone by the kubelet, but "
                f"{len(ended)} pod(s) were ended after their record ({', '.join(ended) or 'none'})"]
    return []


def record_outcome(rec):
    """"ended": after the record, the pod object is gone or terminating (pressured ended it
    through the API once the kubelet undid the record); "kept": still there, not terminating
    (judge_record tells whether the record held); None: not read after the sync."""
    synced = rec.get("synced")
    if not synced:
        return None
    return "ended" if not synced.get("exists") or synced.get("deleting") else "kept"


def record_cells(rec):
    """The cells of one victim's row in the eviction record table (report.markdown_report, and the console)."""
    def state(st):
        if not st:
            return "-"
        if st.get("exists") is False:
            return "object gone"
        return (f"{st.get('phase')}/{st.get('reason') or '-'}, DisruptionTarget {st.get('disruption_target') or 'none'}"
                + (", deleting" if st.get("deleting") else ""))
    ev, synced = rec.get("evicted") or {}, rec.get("synced") or {}
    kept = "-"
    if synced.get("exists"):
        kept = ("kept" if synced.get("message") and synced.get("message") == ev.get("message")
                else ("none" if not synced.get("message") else "another"))
    restarts = f"{ev.get('restarts', '-')} → {synced.get('restarts', '-')}"
    return [state(ev), state(synced), synced.get("kubectl_status") or "-", kept, restarts,
            str(rec.get("writes_after", "-")), rec.get("kubelet") or "-"]


def collect_results(lines, scenarios, contender, status, logp):
    """The judged RESULT markers of one boot, plus a failed entry for each scenario without one."""
    results = judged_results(lines, contender)
    return results + missing_results(results, scenarios, contender, status, logp)


def missing_results(results, scenarios, contender, status, logp):
    """A failed entry for each result the scenarios should have given and `results` lacks."""
    got = {r["scenario"] for r in results}
    return [{"scenario": name, "contender": contender, "passed": False, "metrics": {},
             "failures": [f"no result from the guest (boot {status}; console log {logp})"]}
            for s in scenarios for name in RESULT_NAMES.get(s, [s]) if name not in got]


def judged_results(lines, contender):
    """The judged RESULT markers of one boot."""
    results = []
    for kind, text in markers(lines):
        if kind == "RESULT":
            try:
                results.append(judge(json.loads(text)))
            except (ValueError, KeyError) as e:
                results.append({"scenario": "?", "contender": contender, "passed": False,
                                "failures": [f"unparsable result: {e}"], "metrics": {}})
    return results


# The guest's GoogleTest progress lines worth a line on the host's log.
GT_PROGRESS_RE = re.compile(r"\[\s*(RUN|OK|FAILED|SKIPPED|measured)\s*\]")


def ms(v):
    return "-" if v is None else f"{v}ms"


def result_line(text, node=False):
    """One RESULT marker, judged, as a line of the host's log; `node`: the real node's results also say
    who evicted and when the API saw it."""
    try:
        r = judge(json.loads(text))
        m = r["metrics"]
        by = f"evicted_by={m.get('evicted_by')} api={ms(m.get('api_gone_latency_ms'))} " if node else ""
        return (f"result {r['scenario']}/{r['contender']}: {'PASS' if r['passed'] else 'FAIL'} "
                f"victims={m['victims']} oom={m['kernel_oom_kills']} latency={ms(m.get('latency_ms'))} "
                f"cpu={ms(m.get('cpu_ms'))} {by}{'; '.join(r['failures'])}")
    except (ValueError, KeyError) as e:
        return f"unparsable result: {e}"


def record_lines(text):
    """The eviction records of one RESULT marker (the real node's), one line each for the host's log:
    the record as written and as it stood after the kubelet's status sync (record_cells)."""
    try:
        records = judge(json.loads(text))["metrics"].get("eviction_records", {})
    except (ValueError, KeyError):
        return []  # result_line says it is unparsable
    return [f"record {name}: recorded {c[0]}; after the kubelet's sync {c[1]}, kubectl {c[2]}, message {c[3]}, "
            f"restarts {c[4]}" for name, c in ((name, record_cells(rec)) for name, rec in records.items())]


def console_logger(prefix="", gtest=False, node=False):
    """A boot's on_line: the guest's markers and each judged result on the host's log as they come.
    `prefix` starts each line (e.g. the contender); `gtest`: also the guest's GoogleTest progress and
    exit; `node`: see result_line, and each eviction record after it (record_lines)."""
    kinds = ("SCENARIO", "STEP", "WARN", "ERROR") + (("GTEST-RC",) if gtest else ())

    def on_line(line):
        for kind, text in markers([line]):
            if gtest and kind == "GT" and GT_PROGRESS_RE.match(text):
                log(f"  {prefix}{text}")
            elif kind in kinds:
                log(f"  {prefix}{kind.lower()}: {text}")
            elif kind == "RESULT":
                log(f"  {prefix}{result_line(text, node)}")
                for rec in record_lines(text) if node else ():
                    log(f"  {prefix}  {rec}")
    return on_line


def bpf_flavours(lines):
    """pressured's BPF choices as the guest reported them (@@VMT BPF markers: the daemon's
    "bpf: ..." log lines of its first start): {program: {"mode", "reason"}}, and the load refusals."""
    programs, refusals = {}, []
    for kind, text in markers(lines):
        if kind != "BPF":
            continue
        m = re.search(r"bpf: (\w+) attached as (\S+)(?: (\S+))?(.*)$", text)
        if m:
            programs[m.group(1)] = {"mode": m.group(2), "target": (m.group(3) or "").rstrip(),
                                    "reason": text[text.index("attached as ") + len("attached as "):].strip()}
            continue
        m = re.search(r"bpf: (\w+) off: (.*)$", text)
        if m:
            programs[m.group(1)] = {"mode": "off", "target": "", "reason": m.group(2).strip()}
            continue
        m = re.search(r"bpf: (\w+): the kernel refused to load (\S+) (\S+): (.*)$", text)
        if m:
            refusals.append({"program": m.group(1), "mode": m.group(2), "target": m.group(3), "why": m.group(4)})
            continue
        if "BPF unavailable" in text or "running on PSI" in text or "no BPF program" in text:
            programs.setdefault("_status", {"mode": "none", "target": "", "reason": text.strip()})
    return {"programs": programs, "load_refusals": refusals}


def unavailable(contender, scenarios, reason):
    out = []
    for s in scenarios:
        for name in RESULT_NAMES.get(s, [s]):
            out.append({"scenario": name, "contender": contender, "passed": False, "unavailable": reason,
                        "metrics": {}, "failures": [reason]})
    return out
