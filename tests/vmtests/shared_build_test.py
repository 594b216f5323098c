#!/usr/bin/env python3
"""PRESSURED_VM_BUILD_DIR (common.shared_build_dir): the VM entries build the guest's
binaries in the tree it names (scripts/test's Release tree) instead of a tree of their
own, and refuse, naming the variable, a tree that cannot run in the guest."""
import os
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "vmtests"))
from harness import common  # noqa: E402


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


if __name__ == "__main__":
    unittest.main()
