#!/usr/bin/env python3
"""PRESSURED_VM_BUILD_DIR (common.shared_build_dir): the VM entries build the guest's
binaries in the tree it names (scripts/test's Release tree) instead of a tree of their
own, and refuse, naming the variable, a tree that cannot run in the guest."""
import os
import re
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "vmtests"))
from harness import common  # noqa: E402
from harness import gtest  # noqa: E402


def tree(parent, cache_lines):
    d = tempfile.mkdtemp(dir=parent)
    if cache_lines is not None:
        with open(os.path.join(d, "CMakeCache.txt"), "w") as f:
            f.write("\n".join(["CMAKE_BUILD_TYPE:STRING=Release"] + cache_lines) + "\n")
    return d


class SharedBuildDir(unittest.TestCase):
    def setUp(self):
        self.saved = (os.environ.get("PRESSURED_VM_BUILD_DIR"), common.ARCH)
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        env, common.ARCH = self.saved
        if env is None:
            os.environ.pop("PRESSURED_VM_BUILD_DIR", None)
        else:
            os.environ["PRESSURED_VM_BUILD_DIR"] = env
        self.tmp.cleanup()

    def use(self, d):
        os.environ["PRESSURED_VM_BUILD_DIR"] = d

    def test_unset_means_the_harness_builds_its_own_tree(self):
        os.environ.pop("PRESSURED_VM_BUILD_DIR", None)
        self.assertIsNone(common.shared_build_dir())

    def test_a_release_tree_with_tests_is_used_by_its_absolute_path(self):
        d = tree(self.tmp.name, ["PRESSURED_SANITIZE:BOOL=OFF", "PRESSURED_BUILD_TESTS:BOOL=ON"])
        self.use(os.path.relpath(d))
        self.assertEqual(common.shared_build_dir(), d)

    def test_trees_that_cannot_run_in_the_guest_are_refused_by_name(self):
        cases = {"sanitizers": ["PRESSURED_SANITIZE:BOOL=ON", "PRESSURED_BUILD_TESTS:BOOL=ON"],
                 "tests are off": ["PRESSURED_SANITIZE:BOOL=OFF", "PRESSURED_BUILD_TESTS:BOOL=OFF"],
                 "cross build": ["CMAKE_TOOLCHAIN_FILE:FILEPATH=/x/toolchain-aarch64.cmake"],
                 "CMakeCache.txt": None}
        for why, lines in cases.items():
            with self.subTest(why=why):
                self.use(tree(self.tmp.name, lines))
                with self.assertRaises(EnvironmentError) as e:
                    common.shared_build_dir()
                self.assertIn("PRESSURED_VM_BUILD_DIR", str(e.exception))
                self.assertIn(why, str(e.exception))

    def test_another_architecture_never_uses_this_machines_tree(self):
        self.use(tree(self.tmp.name, ["PRESSURED_SANITIZE:BOOL=OFF", "PRESSURED_BUILD_TESTS:BOOL=ON"]))
        common.ARCH = "arm64"
        self.assertIsNone(common.shared_build_dir())


class GuestBinariesTarget(unittest.TestCase):
    """scripts/test builds vm_guest_binaries in its Release step and nothing else of the tests there:
    a guest test binary a VM entry runs but the target lacks would be compiled during the serial VM
    entries (or, with a stale binary, run stale)."""

    def test_it_covers_pressured_and_every_guest_test_binary_the_entries_run(self):
        with open(os.path.join(ROOT, "tests", "CMakeLists.txt")) as f:
            text = f.read()
        m = re.search(r"add_dependencies\(vm_guest_binaries ([^)]*)\)", text)
        self.assertIsNotNone(m, "tests/CMakeLists.txt has no add_dependencies(vm_guest_binaries ...)")
        covered = set(m.group(1).split())
        ran = set(re.findall(r"vmtests/run [^)]*?--gtest (\w+)", text))
        self.assertTrue(ran, "no VM entry runs --gtest: the pattern no longer matches tests/CMakeLists.txt")
        needed = {"pressured"} | ran | {h for t in ran for h in gtest.GTEST_HELPERS.get(t, [])}
        self.assertEqual(needed - covered, set(), "add these to vm_guest_binaries")


if __name__ == "__main__":
    unittest.main()
