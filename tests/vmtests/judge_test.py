#!/usr/bin/env python3
"""The harness's verdict on one guest result (judge in vmtests/harness/scenarios.py): the order of the victims is the
order the contender acted in, whether the guest saw it first as the API recording the
eviction or as the pod's memory being released."""
import os
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "vmtests"))
from harness.scenarios import judge  # noqa: E402

START_MS = 1_000_000


def pod(name, workload, api_evicted_ms=-1, evicted_by=None):
    return {"name": name, "qos": "BestEffort", "workload": workload, "oom_kills": 0,
            "api_evicted_ms": api_evicted_ms, "api_gone_ms": api_evicted_ms,
            "restarts": 0, "evicted_by": evicted_by or {}}


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


# What the guest reports for a good DaemonSet deployment (vmtests/guest/node.sh, vmt_ds_apply/vmt_ds_delete).
GOOD_DEPLOY = {"applied": True, "ready": True, "ready_ms": 90_000, "pod": "pressured-x7k2p", "node": "vm",
               "pid": 812, "seccomp": 2, "owner": "DaemonSet", "token_secret": "pressured-token-5xq9d",
               "created_by": "daemonset-controller", "scheduled_by": "default-scheduler", "bpf_attached": 4,
               "cgroups_line": "cgroups: v1 memory at /sys/fs/cgroup/memory, pods root /kubepods, driver cgroupfs",
               "pods_listed": 1, "links_running": "4", "restarts": 0, "audit_seccomp": 0, "deleted": True,
               "left_processes": 0, "left_links": "0", "left_taints": "", "left_files": ""}


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
                 "audit_seccomp": (1, "seccomp audit record")}
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


if __name__ == "__main__":
    unittest.main()
