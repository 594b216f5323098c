#!/usr/bin/env python3
"""The harness's verdict on a GoogleTest binary run in the guest (parse_gtest and gtest_verdict in
vmtests/harness/gtest.py): a test that skips saying why is a skip with its reason, not a failure;
a silent skip, a failure, or a run in which every test skipped fails."""
import os
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "vmtests"))
from harness.gtest import gtest_verdict, parse_gtest  # noqa: E402

# gtest's console output of a run on the 6.12 guest, as the guest streams it (abridged).
ON_612 = """\
Note: Google Test filter = *V2Relief*
[==========] Running 2 tests from 1 test suite.
[ RUN      ] V2Relief.APodWhosePageCacheMeetsTheThresholdIsNotEvictedAndItsCacheShrinks
[ measured ] relief cache: read() cache stays inactive (240.0Mi inactive_file, 0.0Mi active); one-page reclaim ok
/src/tests/relief/relief_v2_test.cpp:179: Skipped
SKIPPED: this kernel keeps read() page cache inactive (multi-gen LRU): memory.available already counts it free,
so no threshold is met by it
[  SKIPPED ] V2Relief.APodWhosePageCacheMeetsTheThresholdIsNotEvictedAndItsCacheShrinks (5120 ms)
[ RUN      ] V2Relief.APodGrowingAnonymousMemoryIsEvictedWithinTheBudget
[       OK ] V2Relief.APodGrowingAnonymousMemoryIsEvictedWithinTheBudget (3001 ms)
[==========] 2 tests from 1 test suite ran. (8121 ms total)
[  PASSED  ] 1 test.
[  SKIPPED ] 1 test, listed below:
[  SKIPPED ] V2Relief.APodWhosePageCacheMeetsTheThresholdIsNotEvictedAndItsCacheShrinks
""".splitlines()

CACHE = "V2Relief.APodWhosePageCacheMeetsTheThresholdIsNotEvictedAndItsCacheShrinks"
ANON = "V2Relief.APodGrowingAnonymousMemoryIsEvictedWithinTheBudget"


class GtestVerdict(unittest.TestCase):
    def test_a_skip_that_says_why_is_a_skip_with_its_reason(self):
        tests = parse_gtest(ON_612)
        self.assertEqual(tests[CACHE]["verdict"], "SKIPPED")
        self.assertEqual(tests[CACHE]["ms"], 5120)  # the closing list does not overwrite it
        self.assertTrue(tests[CACHE]["reason"].startswith("SKIPPED: this kernel keeps read() page cache inactive"))
        self.assertIn("so no threshold is met by it", tests[CACHE]["reason"])
        self.assertNotIn("measured", tests[CACHE]["reason"])
        failures, skipped = gtest_verdict(tests)
        self.assertEqual(failures, [])
        self.assertEqual(list(skipped), [CACHE])

    def test_a_failure_beside_a_skip_fails(self):
        lines = [l.replace(f"[       OK ] {ANON}", f"[  FAILED  ] {ANON}") for l in ON_612]
        failures, _ = gtest_verdict(parse_gtest(lines))
        self.assertEqual(failures, [f"not OK: {ANON} (FAILED)"])

    def test_a_skip_that_says_nothing_fails(self):
        lines = [f"[ RUN      ] {CACHE}", "/src/x.cpp:1: Skipped", "", f"[  SKIPPED ] {CACHE} (3 ms)",
                 f"[ RUN      ] {ANON}", f"[       OK ] {ANON} (5 ms)"]
        failures, skipped = gtest_verdict(parse_gtest(lines))
        self.assertEqual(skipped, {CACHE: ""})
        self.assertEqual(failures, [f"skipped without saying why: {CACHE}"])

    def test_every_test_skipped_fails(self):
        lines = [l for l in ON_612 if ANON not in l]
        failures, skipped = gtest_verdict(parse_gtest(lines))
        self.assertEqual(list(skipped), [CACHE])
        self.assertEqual(failures, ["every test skipped: nothing was checked"])

    def test_all_ok_passes(self):
        lines = [f"[ RUN      ] {ANON}", f"[       OK ] {ANON} (5 ms)"]
        self.assertEqual(gtest_verdict(parse_gtest(lines)), ([], {}))


if __name__ == "__main__":
    unittest.main()
