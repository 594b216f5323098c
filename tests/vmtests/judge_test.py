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


if __name__ == "__main__":
    unittest.main()
