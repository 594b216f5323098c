"""A TestCase whose class shares one control plane (etcd and kube-apiserver 1.20, plus the
controllers when `controllers` is set) on 127.0.0.1, started before its first test and
stopped after its last, also when the start fails half way (vmtests/harness/node.py)."""
import os
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "vmtests"))
from harness import node  # noqa: E402


class ControlPlaneCase(unittest.TestCase):
    controllers = False

    @classmethod
    def setUpClass(cls):
        cls.cp = node.ControlPlane(controllers=cls.controllers)
        try:
            cls.cp.start()
        except BaseException:
            cls.cp.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.cp.stop()


def main(check):
    """unittest.main() once `check()` passed. It raises EnvironmentError naming what is missing
    (a binary of scripts/build-control-plane, a package): then the run skips (77), loudly, or
    fails under PRESSURED_REQUIRE_PRIVILEGED=1."""
    try:
        check()
    except EnvironmentError as e:
        if os.environ.get("PRESSURED_REQUIRE_PRIVILEGED") == "1":
            raise
        print(f"SKIPPED, missing: {e}", flush=True)
        sys.exit(77)
    unittest.main()
