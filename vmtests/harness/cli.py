"""vmtests/run: boot a real Linux kernel (Debian 5.10, 6.1 or 6.12 cloud) under QEMU with pure
cgroup v2, run node-pressure scenarios against pressured and its peers, and
report what happened: kernel OOM kills, victims, time from threshold crossing to
the victim's memory being released, and the daemon's CPU time.

  vmtests/run [--scenario NAME]... [--contender NAME]... [--kernel 5.10|6.1|6.12|PATH] [--kernels all] [--smoke]
              [--fixtures DIR] [--accel auto|tcg|kvm] [--keep-logs]
  vmtests/run --gtest test_events [--gtest-filter '*V2Events*'] [--scenario NAME]   (a gtest binary in the guest,
              then the scenarios against pressured in the same boot)
  vmtests/run --arch arm64 --pressured-image [--scenario NAME]   (pressured from its arm64 OCI image under
              Debian's arm64 runc in the guest, the DaemonSet's shape and seccomp profile; default fast-spike)

Everything it builds lives under build/vmtests/; kernel packages are cached in
PRESSURED_KERNEL_CACHE (default ~/.cache/pressured/vmtests-kernels). See docs/vmtests.md.
"""
import argparse
import os
import signal
import subprocess
import sys
import time

from . import common
from .common import HarnessError, OUT, ROOT, die, log
from .kernel import DEFAULT_KERNEL, GUEST_MODULES, KERNEL_ORDER, KERNEL_SERIES, find_kernel, resolve_modules
from .image import need_tools
from .qemu import kill_all_qemu
from .fixtures import capture_fixtures
from .scenarios import SCENARIO_ORDER
from .contenders import CONTENDER_ORDER
from .report import markdown_report
from .gtest import GTEST_HELPERS, run_gtest
from .suite import run_suite
from .container import run_image


def _terminate(signo, _frame):
    # SIGTERM/SIGHUP (e.g. a CTest timeout): no QEMU may outlive the harness,
    # whichever thread started it.
    kill_all_qemu()
    log(f"terminated by signal {signo}; QEMU stopped")
    os._exit(128 + signo)


def main():
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGHUP, _terminate)
    signal.signal(signal.SIGINT, _terminate)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenario", action="append", choices=SCENARIO_ORDER, help="scenario to run (repeatable)")
    ap.add_argument("--contender", action="append", choices=CONTENDER_ORDER, help="contender (repeatable)")
    ap.add_argument("--arch", choices=sorted(common.ARCHES), default="amd64",
                    help="the guest's architecture: amd64 (this machine's builds) or arm64 (cross-built against "
                         "scripts/sysroot, Debian's arm64 cloud kernel under qemu-system-aarch64, TCG; --gtest "
                         "only, with --scenario for the scenarios in the same boot)")
    ap.add_argument("--kernel", help="5.10, 6.1 or 6.12 (the newest Debian cloud kernel package of that series, "
                                     "via scripts/apt-extra, cached in PRESSURED_KERNEL_CACHE), or a vmlinuz path; "
                                     "default 6.1")
    ap.add_argument("--kernels", metavar="LIST",
                    help="'all' or a comma-separated list of series: run the same scenarios (or --gtest) on each, "
                         "one after the other; results per kernel in <results>-<series>.json")
    ap.add_argument("--pressured", help="pressured binary to use instead of building one")
    ap.add_argument("--smoke", action="store_true", help="scenarios 1 and 6 for pressured only")
    ap.add_argument("--fixtures", metavar="DIR", help="capture cgroup v2 fixture files into DIR and exit")
    ap.add_argument("--accel", default="auto", choices=["auto", "tcg", "kvm"])
    ap.add_argument("--jobs", type=int, default=2, help="contenders booted in parallel (default 2)")
    ap.add_argument("--smp", type=int, default=2, help="vCPUs per guest (default 2)")
    ap.add_argument("--timeout", type=int, default=0, help="per-boot hard timeout in seconds (default: computed)")
    ap.add_argument("--results", default=os.path.join(OUT, "results.json"))
    ap.add_argument("--ctest", action="store_true",
                    help="under CTest: exit 77 (skip) when QEMU or the kernel is unavailable, unless "
                         "PRESSURED_REQUIRE_PRIVILEGED=1 (then fail)")
    ap.add_argument("--report", metavar="RESULTS_JSON", help="print a results.json as a markdown table and exit")
    ap.add_argument("--gtest", choices=sorted(GTEST_HELPERS), metavar="TARGET",
                    help="build this GoogleTest binary (no sanitizers) and run it in the guest as root with "
                         "PRESSURED_REQUIRE_PRIVILEGED=1 and PRESSURED_REQUIRE_CGROUP_V2=1; e.g. test_events")
    ap.add_argument("--gtest-filter", help="--gtest_filter in the guest (default for test_events: GTEST_DEFAULT_FILTER)")
    ap.add_argument("--gtest-timeout", type=int, default=None,
                    help="seconds the gtest binary may run in the guest before it is killed (default 240; "
                         "480 for --arch arm64, whose guest is emulated instruction by instruction)")
    ap.add_argument("--pressured-image", action="store_true",
                    help="run pressured from the image scripts/image builds for --arch (arm64), under Debian's runc "
                         "of that architecture in the guest, shaped like deploy/base/daemonset.yaml, once with the seccomp "
                         "profile as shipped and once with SCMP_ACT_LOG as its default action (harness/container.py)")
    ap.add_argument("--node-cgroup", choices=["v1", "v2"], default="v1",
                    help="cgroup mode of the real-kubelet contenders' guest (default v1: kubelet 1.20's "
                         "eviction signals need it; the other contenders always run on v2)")
    ap.add_argument("--node-memory", type=int, default=common.NODE_MEM_MIB, metavar="MIB",
                    help=f"RAM of the real-kubelet contenders' guest (default {common.NODE_MEM_MIB}; the others get 1024)")
    args = ap.parse_args()
    common.ARCH = args.arch
    if args.gtest_timeout is None:
        args.gtest_timeout = 240 if args.arch == "amd64" else 480
    if args.pressured_image:
        if args.arch != "arm64" or args.gtest or args.contender or args.kernels or args.pressured or args.fixtures:
            die("--pressured-image runs with --arch arm64 and --scenario only (the amd64 image runs as deploy/'s "
                "DaemonSet: --contender daemonset)", 2)
    elif args.arch != "amd64":
        if not args.gtest:
            die(f"--arch {args.arch} runs --gtest (e.g. --gtest test_events --scenario fast-spike): the contender "
                f"suite, fixtures and the real node are amd64 only", 2)
        if args.kernels or args.pressured:
            die(f"--arch {args.arch}: --kernels and --pressured are amd64 only (one arm64 kernel: 6.1)", 2)
    common.NODE_CGROUP = args.node_cgroup
    if not 768 <= args.node_memory <= 8192:
        die(f"--node-memory: {args.node_memory} MiB is outside 768-8192", 2)
    common.NODE_MEM_MIB = args.node_memory
    args.results_given = any(a == "--results" or a.startswith("--results=") for a in sys.argv[1:])
    if args.report:
        markdown_report(args.report)
        return 0

    os.makedirs(OUT, exist_ok=True)
    if args.kernels:
        if args.kernel:
            die("--kernel and --kernels exclude each other", 2)
        kernels = KERNEL_ORDER if args.kernels == "all" else [k.strip() for k in args.kernels.split(",") if k.strip()]
        bad = [k for k in kernels if k not in KERNEL_SERIES]
        if bad or not kernels:
            die(f"--kernels: unknown series {', '.join(bad) or '(none)'}; known: all, {', '.join(KERNEL_ORDER)}", 2)
        if args.fixtures:
            die("--fixtures takes one --kernel", 2)
    else:
        kernels = [args.kernel or DEFAULT_KERNEL]
    base_results = args.results
    summary = []
    rc = 0
    for k in kernels:
        series = k if k in KERNEL_SERIES else None
        common.KTAG = ("" if series in (None, DEFAULT_KERNEL) else "-" + series) + (
            "" if args.arch == "amd64" else "-" + args.arch)
        if len(kernels) > 1:
            stem, ext = os.path.splitext(base_results)
            args.results = f"{stem}-{series}{ext or '.json'}"
            if args.gtest and not args.results_given:
                args.results = os.path.join(OUT, f"gtest-{args.gtest}{common.KTAG or '-' + series}-results.json")
                args.results_given = True
        try:
            need_tools()
            vmlinuz, mods, version, series = find_kernel(k)
            if mods:
                staged, builtin = resolve_modules(mods, GUEST_MODULES)
                log(f"kernel {version}: modules staged: {' '.join(n + ' (' + r + ')' for n, _e, r in staged) or 'none'}"
                    f"; built in: {' '.join(builtin) or 'none'}")
        except (EnvironmentError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
            if args.ctest and os.environ.get("PRESSURED_REQUIRE_PRIVILEGED") != "1":
                print(f"vmtests: SKIPPED, missing: {e} (set PRESSURED_REQUIRE_PRIVILEGED=1 to fail instead)",
                      flush=True)
                sys.exit(77)
            die(f"environment ({k}): {e}", 3)
        log(f"kernel {version}: {vmlinuz}")
        accel = "tcg" if args.accel == "auto" and args.fixtures else args.accel
        if args.fixtures:
            capture_fixtures(args, vmlinuz, mods, version, "tcg" if accel == "auto" else accel,
                             os.path.abspath(args.fixtures))
            return 0
        t0 = time.monotonic()
        try:
            if args.pressured_image:
                r = run_image(args, vmlinuz, mods, version)
            else:
                r = run_gtest(args, vmlinuz, mods, version) if args.gtest else run_suite(args, vmlinuz, mods, version)
        except HarnessError as e:
            die(str(e))
        summary.append((k, version, r, time.monotonic() - t0, args.results))
        rc = rc or r
    if len(kernels) > 1:
        print()
        for k, version, r, secs, res in summary:
            print(f"  {k:5} {version:32} {'PASSED' if r == 0 else 'FAILED'}  {secs:4.0f} s  {os.path.relpath(res, ROOT)}")
    return rc
