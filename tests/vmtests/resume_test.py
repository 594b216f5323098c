#!/usr/bin/env python3
"""The harness's resumption after a guest lockup (boot_resuming), with fake boots:
no QEMU. A lockup stops a boot; the scenarios without a result boot again, at most
MAX_BOOTS times; a lockup after the last result ends the run as done."""
import os
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "vmtests"))
from harness import contenders, qemu  # noqa: E402

LOCKUP = "[  188.568786] watchdog: BUG: soft lockup - CPU#0 stuck for 95s! [containerd-shim:749]"


def result(name):
    return f'@@VMT RESULT {{"scenario":"{name}"}}'


class FakeBoots:
    """Each boot prints a result for the scenarios it is asked for until the planned
    lockup: plan = [(number of results before the lockup or None, status)]."""

    def __init__(self, plan):
        self.plan = list(plan)
        self.asked = []

    def __call__(self, todo):
        self.asked.append(list(todo))
        n, status = self.plan.pop(0)
        done = todo if n is None else todo[:n]
        lines = [result(s) for s in done]
        if status == "lockup":
            lines.append(LOCKUP)
        else:
            lines.append("@@VMT DONE")
        return lines, status


class Resume(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.logp = os.path.join(self.dir.name, "console-x.log")
        with open(self.logp, "w") as f:
            f.write("console\n")
        # Judging is tested by the scenarios; here a result is its scenario name.
        self.saved = contenders.judged_results
        contenders.judged_results = lambda lines, c: [
            {"scenario": t.split('"')[3], "contender": c, "passed": True, "failures": [], "metrics": {}}
            for k, t in qemu.markers(lines) if k == "RESULT"]
        contenders.log = lambda *a: None

    def tearDown(self):
        contenders.judged_results = self.saved
        self.dir.cleanup()

    def test_lockup_boots_again_for_the_scenarios_without_a_result(self):
        boots = FakeBoots([(1, "lockup"), (None, "done")])
        results, status, _ = contenders.boot_resuming("x", ["a", "b", "c"], self.logp, boots)
        self.assertEqual(boots.asked, [["a", "b", "c"], ["b", "c"]])
        self.assertEqual(status, "done")
        self.assertEqual([r["scenario"] for r in results], ["a", "b", "c"])
        self.assertNotIn("retried", results[0])
        self.assertIn("boot 1: guest soft lockup", results[1]["retried"])
        self.assertTrue(os.path.exists(self.logp[:-4] + "-lockup1.log"))

    def test_lockup_after_the_last_result_is_done_and_said(self):
        boots = FakeBoots([(None, "lockup")])
        results, status, _ = contenders.boot_resuming("x", ["a", "b"], self.logp, boots)
        self.assertEqual(len(boots.asked), 1)
        self.assertTrue(status.startswith("done (guest soft lockup after the last result"), status)
        self.assertTrue(all(r["passed"] for r in results))

    def test_gives_up_after_max_boots_and_fails_what_is_left(self):
        boots = FakeBoots([(0, "lockup")] * contenders.MAX_BOOTS)
        results, status, _ = contenders.boot_resuming("x", ["a", "b"], self.logp, boots)
        self.assertEqual(len(boots.asked), contenders.MAX_BOOTS)
        self.assertEqual(status, "lockup")
        self.assertEqual({r["scenario"] for r in results}, {"a", "b"})
        self.assertFalse(any(r["passed"] for r in results))
        self.assertIn("no result from the guest", results[0]["failures"][0])

    def test_a_timeout_without_lockup_is_not_retried(self):
        boots = FakeBoots([(1, "timeout")])
        results, status, _ = contenders.boot_resuming("x", ["a", "b"], self.logp, boots)
        self.assertEqual(len(boots.asked), 1)
        self.assertEqual(status, "timeout")
        self.assertEqual([r["passed"] for r in results], [True, False])

    def test_min_reclaim_needs_both_of_its_results(self):
        # A fake boot prints "min-reclaim" only, never "min-reclaim-200Mi": after the
        # lockup the scenario is not done and boots again.
        boots = FakeBoots([(None, "lockup"), (None, "done")])
        results, status, _ = contenders.boot_resuming("x", ["min-reclaim"], self.logp, boots)
        self.assertEqual(boots.asked, [["min-reclaim"], ["min-reclaim"]])
        self.assertIn("min-reclaim-200Mi", [r["scenario"] for r in results if not r["passed"]])

    def test_a_dead_scenario_shell_fails_its_scenario_and_boots_again_for_the_rest(self):
        # The guest's init reports RUNNER-DIED when the shell running the scenarios
        # could not fork (pid-pressure with a slow contender) and powers off.
        asked = []

        def boots(todo):
            asked.append(list(todo))
            if len(asked) == 1:
                return [result("a"), "@@VMT SCENARIO b contender=x", "/init: line 312: can't fork: Resource temporarily "
                        "unavailable", "@@VMT RUNNER-DIED rc=2"], "exited:0"
            return [result(s) for s in todo] + ["@@VMT DONE"], "done"
        results, status, _ = contenders.boot_resuming("x", ["a", "b", "c"], self.logp, boots)
        self.assertEqual(asked, [["a", "b", "c"], ["c"]])
        self.assertEqual(status, "done")
        self.assertEqual([(r["scenario"], r["passed"]) for r in results], [("a", True), ("b", False), ("c", True)])
        self.assertIn("could not fork", results[1]["failures"][0])
        self.assertIn("scenario shell died in b", results[2]["retried"])
        self.assertTrue(os.path.exists(self.logp[:-4] + "-runner-died1.log"))

    def test_boot_stops_at_a_long_lockup_not_at_its_timeout(self):
        # A "guest" that reports a lockup and then hangs: boot() returns "lockup" (at
        # its timeout it would return "timeout"); a short stall (22 s) does not stop it.
        cmd = ["sh", "-c", "echo '@@VMT BOOT x'; echo '" + LOCKUP.replace("95s", "22s") + "'; echo '" + LOCKUP +
               "'; sleep 60"]
        lines, status = qemu.boot(cmd, self.logp, 60)
        self.assertEqual(status, "lockup")
        self.assertEqual(len(lines), 3)


if __name__ == "__main__":
    sys.exit(unittest.main())
