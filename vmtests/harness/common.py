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

# The guest's architecture (--arch). amd64 guests run this machine's own
# builds; arm64 guests run cross-built binaries (cmake/toolchain-aarch64.cmake)
# whose libraries come from the arm64 sysroot (scripts/sysroot), under
# qemu-system-aarch64 (TCG only: there is no arm64 KVM on an x86 host).
ARCH = "amd64"
ARCHES = {
    "amd64": {"qemu": "qemu-system-x86_64", "machine": [], "console": "ttyS0", "triplet": "x86_64-linux-gnu",
              "cc": "gcc", "strip": "strip", "sysroot": None, "toolchain": None, "ldconfig_tag": "x86-64",
              "tcg_cpu": "max"},
    "arm64": {"qemu": "qemu-system-aarch64", "machine": ["-M", "virt"], "console": "ttyAMA0",
              "triplet": "aarch64-linux-gnu", "cc": "aarch64-linux-gnu-gcc", "strip": "aarch64-linux-gnu-strip",
              "sysroot": os.path.join(ROOT, "build", "sysroot-arm64"),
              "toolchain": os.path.join(ROOT, "cmake", "toolchain-aarch64.cmake"), "ldconfig_tag": None,
              # QEMU's own pointer-authentication algorithm: the architected one
              # (QARMA) costs TCG a large share of its time on every call and return.
              "tcg_cpu": "max,pauth-impdef=on"},
}


def arch():
    """The settings of the guest's architecture (ARCHES[ARCH])."""
    return ARCHES[ARCH]


def shared_build_dir():
    """The build tree named by PRESSURED_VM_BUILD_DIR, if any: scripts/test points it at its
    Release tree, which already built pressured and the test binaries for this machine, so the
    guest's binaries are not compiled a third time (the VM entries run one at a time at the end
    of the suite, so a build inside them is wall time nobody shares). Only for this machine's
    architecture. A tree that cannot serve (sanitizers on, tests off, cross toolchain, not
    configured) is an error naming the variable, never silently replaced by another build."""
    d = os.environ.get("PRESSURED_VM_BUILD_DIR")
    if not d or arch()["toolchain"]:
        return None
    d = os.path.abspath(d)
    cache = os.path.join(d, "CMakeCache.txt")
    if not os.path.exists(cache):
        raise EnvironmentError(f"PRESSURED_VM_BUILD_DIR={d}: not a configured CMake build tree (no CMakeCache.txt)")
    with open(cache) as f:
        text = f.read()
    wrong = [why for bad, why in (("PRESSURED_SANITIZE:BOOL=ON", "sanitizers are on (the guest has no ASan runtime)"),
                                  ("PRESSURED_BUILD_TESTS:BOOL=OFF", "the tests are off"),
                                  ("CMAKE_TOOLCHAIN_FILE:", "it is a cross build"))
             if bad in text]
    if wrong:
        raise EnvironmentError(f"PRESSURED_VM_BUILD_DIR={d} cannot build the guest's binaries: {'; '.join(wrong)}")
    return d


def arch_dir(path):
    """`path` for amd64, `path`-arm64 for another architecture (builds and binaries of two
    architectures never share a directory)."""
    return path if ARCH == "amd64" else f"{path}-{ARCH}"


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
