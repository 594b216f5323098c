"""Paths, logging, and the state main() sets for the whole run."""
import os
import subprocess
import sys
import time


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VMT = os.path.join(ROOT, "vmtests")
OUT = os.path.join(ROOT, "build", "vmtests")
KERNEL_DIR = os.path.join(OUT, "kernel")
BIN_DIR = os.path.join(OUT, "bin")
PRESSURED_BUILD = os.path.join(OUT, "pressured-build")
GTEST_BUILD = os.path.join(OUT, "gtest-build")

# The real node's cgroup mode (--node-cgroup). v1 by default: kubelet 1.20's
# cAdvisor has no working set for the cgroup v2 root, so on a pure v2 guest its
# summary reports the node's working set as 0 and its memory.available never
# falls (measured 2026-11-23, docs/comparison.md); 1.20 supports v1 only.
NODE_CGROUP = "v1"

# The real node's RAM (--node-memory). containerd, the kubelet and the rest of
# the node take about 300 MiB: in 1 GiB a scenario has too little left to size
# its pressure between the thresholds pressured keeps above the kubelet's (the
# soft-then-spike node ended under pressured's soft threshold, 2026-11-23).
NODE_MEM_MIB = 1536


def log(msg):
    print(f"[vmtests {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def die(msg, code=1):
    print(f"vmtests: error: {msg}", file=sys.stderr, flush=True)
    sys.exit(code)


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


class HarnessError(RuntimeError):
    """Something the harness itself got wrong (an incomplete initramfs): fails the run
    before any boot, never a skip."""


# Appended to console logs and initramfs names when the kernel is not the
# default 6.1 series, so the logs of several kernels' boots are all kept.
KTAG = ""

RUNNING_QEMU = set()
RUNNING_CONTROL_PLANES = set()
