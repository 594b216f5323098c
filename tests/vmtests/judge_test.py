#!/usr/bin/env python3
"""The harness's verdict on one guest result (judge in vmtests/harness/scenarios.py): the order of the victims is the
order the contender acted in, whether the guest saw it first as the API recording the
eviction or as the pod's memory being released."""
import json
import os
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "vmtests"))
from harness import scenarios  # noqa: E402
from harness.scenarios import judge, record_outcome, scenarios_for  # noqa: E402

START_MS = 1_000_000


def pod(name, workload, api_evicted_ms=-1, evicted_by=None, record=None):
    p = {"name": name, "qos": "BestEffort", "workload": workload, "oom_kills": 0,
         "api_evicted_ms": api_evicted_ms, "api_gone_ms": api_evicted_ms,
         "restarts": 0, "evicted_by": evicted_by or {}}
    if record is not None:
        p["record"] = record
    return p


def result(contender, pods, released):
    return {"scenario": "min-reclaim-200Mi", "contender": contender, "contender_started": True,
            "contender_alive_at_end": True, "pods": pods, "extra": {},
            "sampler": {"signal": "memory", "start_mono_ns": START_MS * 1_000_000, "crossed_ms": 100,
                        "min_available": 100 << 20, "oom_kill_start": 0, "oom_kill_end": 0,
                        "pods": {n: {"released_ms": ms, "peak_procs": 1} for n, ms in released.items()}}}


class Judge(unittest.TestCase):
    def test_a_local_kill_orders_before_an_api_eviction_seconds_later(self):
        # pressured killed large then small at 1.2 s; the API recorded large's
        # eviction at 10 s and small's not at all.
        r = result("pressured+kubelet",
                   [pod("besteffort-large", "deleted", START_MS + 10_000, {"pressured": 1}),
                    pod("besteffort-small", "killed-Error")],
                   {"besteffort-large": 1_200, "besteffort-small": 1_240})
        judge(r)
        self.assertEqual(r["metrics"]["victims"], ["besteffort-large", "besteffort-small"])
        self.assertEqual(r["metrics"]["wrong_victims"], 0)
        self.assertTrue(r["passed"], r["failures"])

    def test_the_api_order_counts_when_it_comes_before_the_release(self):
        # The kubelet marks small Failed first but stops large's processes sooner.
        r = result("kubelet",
                   [pod("besteffort-large", "evicted", START_MS + 3_000, {"kubelet": 1}),
                    pod("besteffort-small", "evicted", START_MS + 2_000, {"kubelet": 1})],
                   {"besteffort-large": 3_100, "besteffort-small": 4_000})
        judge(r)
        self.assertEqual(r["metrics"]["victims"], ["besteffort-small", "besteffort-large"])
        self.assertEqual(r["metrics"]["wrong_victims"], 2)
        self.assertFalse(r["passed"])

    def test_a_pod_evicted_twice_fails(self):
        r = result("pressured+kubelet",
                   [pod("besteffort-large", "evicted", START_MS + 2_000, {"pressured": 1, "kubelet": 1}),
                    pod("besteffort-small", "evicted", START_MS + 3_000, {"pressured": 1})],
                   {"besteffort-large": 1_000, "besteffort-small": 1_100})
        judge(r)
        self.assertIn("besteffort-large evicted 2 times ({'pressured': 1, 'kubelet': 1})", r["failures"])


MESSAGE = ("The node was low on resource: memory. Threshold quantity: 200Mi, available: 180Mi. Pod besteffort-large "
           "was using 300Mi, request is 0, has larger consumption of memory. Evicted by pressured (eviction 1a-1) for "
           "memory.available (hard threshold)")


def status(**kw):
    """One pod status as vmtests/guest/node.sh's record has it: pressured's eviction record."""
    return dict({"phase": "Failed", "deleting": False, "restarts": 0, "reason": "Evicted",
                 "disruption_target": "True/TerminationByKubelet", "message": MESSAGE,
                 "disruption_target_message": MESSAGE}, **kw)


def record(kubelet="v1.20.2", evicted=None, synced=None, **synced_kw):
    """A victim's record: as the API first showed it Failed, and after the kubelet's status sync."""
    return {"kubelet": kubelet, "evicted": evicted if evicted is not None else dict(status(), at_ms=START_MS + 2_000),
            "writes_after": 1, "synced_at_ms": START_MS + 9_000, "waited_ms": 4_000,
            "synced": synced if synced is not None else dict(status(), **dict({"exists": True,
                                                                                "kubectl_status": "Evicted"},
                                                                               **synced_kw))}


class JudgeRecord(unittest.TestCase):
    """The eviction record pressured leaves beside the real kubelet (judge_record)."""

    def run_judge(self, rec, contender="pressured+kubelet", **result_kw):
        r = result(contender, [pod("besteffort-large", "evicted", START_MS + 2_000, {"pressured": 1}, rec),
                               pod("besteffort-small", "running")],
                   {"besteffort-large": 1_000})
        r["scenario"] = "min-reclaim"
        r.update(result_kw)
        return judge(r)

    def test_the_undone_records_pressured_counted_must_be_the_pods_ended(self):
        ended = record(synced={"exists": False})
        self.assertEqual(self.run_judge(record(), records_undone=0)["failures"], [])
        self.assertEqual(self.run_judge(ended, records_undone=1)["failures"], [])
        for what, (rec, counted, why) in {
                "an eviction for a kept record": (ended, 0, "counted 0 eviction record(s) undone by the kubelet, "
                                                            "but 1 pod(s) were ended after their record "
                                                            "(besteffort-large)"),
                "a count without an end": (record(), 1, "counted 1 eviction record(s) undone by the kubelet, "
                                                         "but 0 pod(s) were ended after their record (none)"),
                "no /metrics": (record(), None, "/metrics could not be read")}.items():
            with self.subTest(what):
                r = self.run_judge(rec, records_undone=counted)
                self.assertFalse(r["passed"])
                self.assertTrue(any(why in f for f in r["failures"]), r["failures"])

    def test_a_kept_record_passes_and_is_in_the_metrics(self):
        r = self.run_judge(record())
        self.assertEqual(r["failures"], [])
        rec = r["metrics"]["eviction_records"]["besteffort-large"]
        self.assertEqual(rec["synced"]["kubectl_status"], "Evicted")

    def test_each_broken_fact_fails(self):
        cases = {
            "no Failed record": (record(evicted={}), "never showed it Failed"),
            "deleted at once": (record(evicted=status(phase="Running", deleting=True, reason="", message="",
                                                      disruption_target="")), "not Failed/Evicted"),
            "another message": (record(evicted=status(message="The node was low on resource: memory.")),
                                "not pressured's"),
            "no condition": (record(evicted=status(disruption_target="")), "DisruptionTarget is 'missing'"),
            "never read again": (dict(record(), synced=None), "no record read after"),
            "phase back": (record(phase="Running"), "Running after the kubelet's status sync, not Failed, and the "
                                                    "pod was not ended through the API either"),
            "condition gone": (record(disruption_target=""), "DisruptionTarget condition is 'gone'"),
            "restarted": (record(restarts=1), "restarted its containers after the eviction record (0 -> 1"),
            # What kubelet 1.20 did to pressured's record before pressured ended such pods (docs/kubernetes.md,
            # "What the kubelet does with the record", run 1): its status sync wrote its own status back over
            # it, it started the container again, and the pod stayed.
            "measured on 1.20": (record(phase="Running", reason="", message="", restarts=1, kubectl_status="Error"),
                                 "Running after the kubelet's status sync, not Failed, and the pod was not ended "
                                 "through the API either (kubelet v1.20.2; kubectl get pods shows 'Error')"),
        }
        for what, (rec, why) in cases.items():
            with self.subTest(what):
                r = self.run_judge(rec)
                self.assertFalse(r["passed"])
                self.assertTrue(any(why in f for f in r["failures"]), r["failures"])

    def test_a_record_the_kubelet_undid_passes_once_the_pod_was_ended_through_the_api(self):
        # Run 1's race, with the fix: the phase back to Running and a restart, then pressured's Eviction.
        for what, synced in {"object gone": {"exists": False},
                             "terminating": dict(status(phase="Running", reason="", message="", restarts=1,
                                                        deleting=True), exists=True, kubectl_status="Terminating")
                             }.items():
            with self.subTest(what):
                r = self.run_judge(record(synced=synced))
                self.assertEqual(r["failures"], [])
                self.assertEqual(record_outcome(r["metrics"]["eviction_records"]["besteffort-large"]), "ended")

    def test_a_held_record_passes_without_its_reason_and_message(self):
        # Run 2: the kubelet kept the phase, wrote reason and message away, restarted nothing.
        for what, rec in {"reason dropped": record(reason="", message="", kubectl_status="Error"),
                          "message replaced": record(message="The node was low on resource: memory.")}.items():
            with self.subTest(what):
                r = self.run_judge(rec)
                self.assertEqual(r["failures"], [])
                self.assertEqual(record_outcome(r["metrics"]["eviction_records"]["besteffort-large"]), "kept")

    def test_the_status_column_is_reported_not_judged(self):
        # A container pressured killed shows as terminated "Error", which kubectl prints over the pod's reason.
        r = self.run_judge(record(kubectl_status="Error"))
        self.assertEqual(r["failures"], [])
        self.assertEqual(r["metrics"]["eviction_records"]["besteffort-large"]["synced"]["kubectl_status"], "Error")

    def test_the_kubelet_contender_is_not_held_to_pressured_s_record(self):
        r = self.run_judge(record(evicted=status(message="The node was low on resource: memory.")), "kubelet")
        self.assertFalse(any("besteffort-large:" in f for f in r["failures"]), r["failures"])
        self.assertIn("besteffort-large", r["metrics"]["eviction_records"])

    def test_a_pod_evicted_by_the_kubelet_beside_pressured_is_not_pressured_s_record(self):
        r = result("pressured+kubelet", [pod("besteffort-large", "evicted", START_MS + 2_000, {"kubelet": 1},
                                            record(evicted=status(message="The node was low on resource: memory.")))],
                   {"besteffort-large": 1_000})
        r["scenario"] = "min-reclaim"
        judge(r)
        self.assertFalse(any("not pressured's" in f for f in r["failures"]), r["failures"])


# What the guest reports for a good DaemonSet deployment (vmtests/guest/node.sh, vmt_ds_apply/vmt_ds_delete).
GOOD_DEPLOY = {"applied": True, "ready": True, "ready_ms": 90_000, "pod": "pressured-x7k2p", "node": "vm",
               "pid": 812, "seccomp": 2, "owner": "DaemonSet", "token_secret": "pressured-token-5xq9d",
               "created_by": "daemonset-controller", "scheduled_by": "default-scheduler", "bpf_attached": 4,
               "cgroups_line": "cgroups: v1 memory at /sys/fs/cgroup/memory, pods root /kubepods, driver cgroupfs",
               "pods_listed": 1, "links_running": "4", "restarts": 0, "audit_seccomp": 0, "deleted": True,
               "left_processes": 0, "left_links": "0", "left_taints": "",
               "files_after_delete": "/var/lib/pressured/state.json /var/lib/kubelet/seccomp/profiles/pressured.json",
               "uninstalled": True, "left_files": ""}


class JudgeDaemonSet(unittest.TestCase):
    def spike(self, **deploy):
        r = result("daemonset", [pod("besteffort-large", "evicted", START_MS + 2_000, {"pressured": 1}),
                                 pod("besteffort-small", "evicted", START_MS + 3_000, {"pressured": 1})],
                   {"besteffort-large": 1_000, "besteffort-small": 1_100})
        r["deploy"] = dict(GOOD_DEPLOY, **deploy)
        return judge(r)

    def test_a_good_deployment_passes(self):
        r = self.spike()
        self.assertEqual(r["failures"], [])
        self.assertEqual(r["metrics"]["deploy"]["seccomp"], 2)

    def test_each_missing_fact_fails(self):
        cases = {"seccomp": (0, "Seccomp: 0"), "scheduled_by": ("", "not the scheduler"),
                 "created_by": ("", "not the DaemonSet controller"), "owner": ("ReplicaSet", "not a DaemonSet"),
                 "token_secret": ("", "no ServiceAccount token"), "bpf_attached": (0, "no BPF program attached"),
                 "cgroups_line": ("", "no cgroup layout"), "pods_listed": (-1, "pods listed from the API server"),
                 "restarts": (3, "restarted 3 time(s)"), "deleted": (False, "still there"),
                 "left_processes": (1, "process(es) left"), "left_links": ("2", "2 BPF link(s) left"),
                 "left_taints": ("pressured.io/memory-pressure", "taint(s) left"),
                 "audit_seccomp": (1, "seccomp audit record"),
                 "uninstalled": (False, "did not roll out"),
                 "left_files": ("/var/lib/pressured/state.json", "left on the node after the uninstall"),
                 "files_after_delete": ("", "the uninstall's check cannot tell")}
        for key, (value, why) in cases.items():
            with self.subTest(key=key):
                r = self.spike(**{key: value})
                self.assertFalse(r["passed"])
                self.assertTrue(any(why in f for f in r["failures"]), r["failures"])

    def test_a_leftover_check_that_cannot_see_links_fails(self):
        r = self.spike(links_running="0")
        self.assertFalse(r["passed"])
        r = self.spike(left_links="-", links_running="-")
        self.assertTrue(any("bpftool missing" in f for f in r["failures"]), r["failures"])

    def test_no_ready_pod_or_no_facts_fails(self):
        self.assertIn("the DaemonSet's pod was not Running and Ready", self.spike(ready=False)["failures"])
        r = result("daemonset", [], {})
        self.assertIn("no deployment facts from the guest", judge(r)["failures"])

    def test_the_daemon_dying_fails(self):
        r = result("daemonset", [], {})
        r["deploy"] = dict(GOOD_DEPLOY)
        r["contender_alive_at_end"] = False
        self.assertTrue(any(f.startswith("contender died") for f in judge(r)["failures"]))


MIB = 1 << 20


def phase(start_ms, min_mib, oom=0, soft=(-1, -1, 0), hard=(-1, -1, 0)):
    """One sampler phase: soft and hard as (crossed_ms, recovered_ms, crossings)."""
    def th(mib, t):
        return {"threshold": mib * MIB, "crossed_ms": t[0], "recovered_ms": t[1], "crossings": t[2],
                "below_ms": 0, "below_at_start": False, "below_at_end": False}
    return {"start_ms": start_ms, "min_available": min_mib * MIB, "oom_kills": oom,
            "thresholds": [th(350, soft), th(200, hard)]}


APC_PODS = ["guaranteed-steady", "burstable-reader-1", "burstable-reader-2", "burstable-grower"]
MIXED_PODS = ["guaranteed-steady", "burstable-steady", "burstable-mixed"]


def apc(contender, dead, released, phases, scenario="active-page-cache"):
    """An active-page-cache (or cache-and-growth) result: `dead` pods killed, released at `released` (ms)."""
    names = APC_PODS if scenario == "active-page-cache" else MIXED_PODS
    pods = [{"name": n, "qos": "Burstable", "workload": "137" if n in dead else "running", "oom_kills": 0}
            for n in names]
    return {"scenario": scenario, "contender": contender, "contender_started": True,
            "contender_alive_at_end": True, "pods": pods, "extra": {},
            "sampler": {"signal": "memory", "start_mono_ns": START_MS * 1_000_000, "crossed_ms": phases[0]["thresholds"][0]["crossed_ms"],
                        "min_available": min(p["min_available"] for p in phases),
                        "oom_kill_start": 0, "oom_kill_end": sum(p["oom_kills"] for p in phases),
                        "pods": {n: {"released_ms": released.get(n, -1), "peak_procs": 1} for n in names},
                        "phases": phases}}


FALSE_PRESSURE = phase(0, 120, soft=(12_000, 14_000, 3), hard=(20_000, 20_900, 2))


class JudgePhases(unittest.TestCase):
    def test_relief_on_evicts_nobody_in_phase_1_and_the_grower_in_phase_2(self):
        r = judge(apc("pressured-relief", {"burstable-grower"}, {"burstable-grower": 71_000},
                      [FALSE_PRESSURE, phase(60_000, 150, soft=(64_000, -1, 1), hard=(69_000, -1, 1))]))
        self.assertTrue(r["passed"], r["failures"])
        m = r["metrics"]
        self.assertEqual(m["phase1_victims"], [])
        self.assertEqual(m["phase2_victims"], ["burstable-grower"])
        self.assertEqual(m["phase1_hard_crossed_to_recovered_ms"], 900)
        self.assertEqual(m["phase1_soft_crossed_to_recovered_ms"], 2_000)
        self.assertEqual(m["phase2_hard_crossed_to_eviction_ms"], 2_000)
        self.assertEqual(m["phase1_min_available_mib"], 120)

    def test_relief_on_evicting_a_reader_in_phase_1_fails(self):
        r = judge(apc("pressured-relief", {"burstable-reader-1", "burstable-grower"},
                      {"burstable-reader-1": 21_000, "burstable-grower": 71_000},
                      [FALSE_PRESSURE, phase(60_000, 150, hard=(69_000, -1, 1))]))
        self.assertFalse(r["passed"])
        self.assertIn("phase 1: evicted burstable-reader-1, expected nobody", r["failures"])
        self.assertEqual(r["metrics"]["phase1_hard_crossed_to_eviction_ms"], 1_000)

    def test_a_kernel_oom_kill_fails_relief_on(self):
        r = judge(apc("pressured-relief", {"burstable-grower"}, {"burstable-grower": 71_000},
                      [FALSE_PRESSURE, phase(60_000, 10, oom=1, hard=(69_000, -1, 1))]))
        self.assertIn("1 kernel OOM kill(s)", r["failures"])
        self.assertEqual(r["metrics"]["phase2_oom_kills"], 1)

    def test_relief_off_must_evict_in_phase_1(self):
        ok = judge(apc("pressured-relief-off", {"burstable-reader-1", "burstable-reader-2", "burstable-grower"},
                       {"burstable-reader-1": 22_000, "burstable-reader-2": 30_000, "burstable-grower": 40_000},
                       [FALSE_PRESSURE, phase(60_000, 120)]))
        self.assertTrue(ok["passed"], ok["failures"])
        self.assertEqual(ok["metrics"]["phase1_victims"],
                         ["burstable-reader-1", "burstable-reader-2", "burstable-grower"])
        none = judge(apc("pressured-relief-off", set(), {}, [FALSE_PRESSURE, phase(60_000, 120)]))
        self.assertFalse(none["passed"])
        self.assertTrue(any(f.startswith("phase 1: nobody evicted") for f in none["failures"]), none["failures"])

    def test_relief_on_may_keep_phase_1_from_the_hard_threshold(self):
        r = judge(apc("pressured-relief", {"burstable-grower"}, {"burstable-grower": 71_000},
                      [phase(0, 300, soft=(12_000, 12_400, 84)), phase(60_000, 150, hard=(69_000, -1, 1))]))
        self.assertTrue(r["passed"], r["failures"])
        self.assertEqual(r["metrics"]["phase1_hard_crossings"], 0)

    def test_a_phase_1_without_pressure_is_no_evidence(self):
        r = judge(apc("pressured-relief", {"burstable-grower"}, {"burstable-grower": 71_000},
                      [phase(0, 400), phase(60_000, 150, hard=(69_000, -1, 1))]))
        self.assertIn("phase 1 never crossed the soft threshold: no false pressure to relieve", r["failures"])
        off = judge(apc("pressured-relief-off", {"burstable-reader-1"}, {"burstable-reader-1": 22_000},
                        [phase(0, 300, soft=(12_000, -1, 1)), phase(60_000, 150)]))
        self.assertIn("phase 1 never crossed the hard threshold without the reclaim stage: the scenario made too "
                      "little pressure", off["failures"])

    def test_cache_and_growth_relief_on_must_evict_the_pod_that_held_the_cache(self):
        soft_only = phase(0, 290, soft=(12_000, 12_500, 40))
        ok = judge(apc("pressured-relief", {"burstable-mixed"}, {"burstable-mixed": 71_000},
                       [soft_only, phase(60_000, 150, hard=(69_000, -1, 1))], "cache-and-growth"))
        self.assertTrue(ok["passed"], ok["failures"])
        self.assertEqual(ok["metrics"]["phase2_victims"], ["burstable-mixed"])
        # Its cache reclaimed and then spared because it held cache: a kernel OOM kill instead.
        spared = judge(apc("pressured-relief", {"burstable-mixed"}, {"burstable-mixed": 71_000},
                           [soft_only, phase(60_000, 5, oom=1, hard=(69_000, -1, 1))], "cache-and-growth"))
        self.assertIn("1 kernel OOM kill(s)", spared["failures"])
        early = judge(apc("pressured-relief", {"burstable-mixed"}, {"burstable-mixed": 22_000},
                          [soft_only, phase(60_000, 150)], "cache-and-growth"))
        self.assertIn("phase 1: evicted burstable-mixed, expected nobody", early["failures"])
        self.assertIn("phase 2: evicted nobody, expected burstable-mixed", early["failures"])
        # Without the stage the soft threshold alone evicts in phase 1 (no hard crossing asked).
        off = judge(apc("pressured-relief-off", {"burstable-mixed"}, {"burstable-mixed": 22_000},
                        [phase(0, 290, soft=(12_000, -1, 1)), phase(60_000, 300)], "cache-and-growth"))
        self.assertTrue(off["passed"], off["failures"])

    def test_only_the_relief_pair_runs_active_page_cache(self):
        both = ["fast-spike", "active-page-cache"]
        self.assertEqual(scenarios_for("pressured", both), ["fast-spike"])
        self.assertEqual(scenarios_for("pressured", both, named=True), ["fast-spike"])
        # In a run of every contender the pair runs only its own scenario; named, all it is given.
        self.assertEqual(scenarios_for("pressured-relief-off", both), ["active-page-cache"])
        self.assertEqual(scenarios_for("pressured-relief", both), ["active-page-cache"])
        self.assertEqual(scenarios_for("pressured-relief-off", both, named=True), both)


class ConsoleLogger(unittest.TestCase):
    """What each boot prints on the host's log as the guest's console comes (one logger for the
    scenario, gtest and container boots)."""

    def setUp(self):
        self.lines, self.saved = [], scenarios.log
        scenarios.log = self.lines.append

    def tearDown(self):
        scenarios.log = self.saved

    def feed(self, on_line, *console):
        for line in console:
            on_line(line)
        return self.lines

    def test_markers_and_a_judged_result_carry_the_prefix(self):
        r = result("pressured+kubelet",
                   [pod("besteffort-large", "deleted", START_MS + 10_000, {"pressured": 1}),
                    pod("besteffort-small", "killed-Error")],
                   {"besteffort-large": 1_200, "besteffort-small": 1_240})
        got = self.feed(scenarios.console_logger("[pressured+kubelet] ", node=True),
                        "@@VMT STEP pods ready", "@@VMT GT [ RUN      ] A.B", "@@VMT RESULT " + json.dumps(r))
        self.assertEqual(got[0], "  [pressured+kubelet] step: pods ready")
        self.assertEqual(len(got), 2, got)  # no gtest line unless asked for
        self.assertEqual(got[1], "  [pressured+kubelet] result min-reclaim-200Mi/pressured+kubelet: PASS "
                                 "victims=['besteffort-large', 'besteffort-small'] oom=0 latency=1100ms cpu=- "
                                 "evicted_by={'pressured': 1} api=9900ms ")

    def test_a_real_node_result_is_followed_by_each_eviction_record(self):
        r = result("pressured+kubelet", [pod("besteffort-large", "evicted", START_MS + 2_000, {"pressured": 1},
                                             record(phase="Failed", reason="", message=""))],
                   {"besteffort-large": 1_000})
        text = "@@VMT RESULT " + json.dumps(r)
        got = self.feed(scenarios.console_logger("[pressured+kubelet] ", node=True), text)
        self.assertEqual(len(got), 2, got)
        self.assertTrue(got[1].startswith("  [pressured+kubelet]   record besteffort-large: recorded Failed/Evicted"),
                        got[1])
        self.assertIn("after the kubelet's sync Failed/-", got[1])
        # Not for the other contenders' boots.
        self.lines.clear()
        self.assertEqual(len(self.feed(scenarios.console_logger(), text)), 1)

    def test_gtest_boots_also_show_progress_and_exit_but_no_other_output(self):
        got = self.feed(scenarios.console_logger(gtest=True), "@@VMT GT [ RUN      ] A.B", "@@VMT GT some output",
                        "@@VMT GT [  FAILED  ] A.B (3 ms)", "@@VMT GTEST-RC 1 elapsed_ms=5")
        self.assertEqual(got, ["  [ RUN      ] A.B", "  [  FAILED  ] A.B (3 ms)", "  gtest-rc: 1 elapsed_ms=5"])

    def test_an_unparsable_result_is_said_not_raised(self):
        got = self.feed(scenarios.console_logger(), "@@VMT RESULT {not json")
        self.assertEqual(len(got), 1)
        self.assertIn("unparsable result", got[0])


if __name__ == "__main__":
    unittest.main()
