"""--gtest: one of the project's GoogleTest binaries, run inside the guest."""
import datetime
import json
import os
import re
import subprocess
import sys
import time

from . import common
from .common import GTEST_BUILD, OUT, ROOT, arch, arch_dir, log, run
from .image import build_initramfs, build_scratch_disk, build_workloads, copy_with_libs, repack_initramfs
from .qemu import boot, choose_accel, markers, qemu_cmd
from .scenarios import BUDGET_S, SCENARIO_ORDER, bpf_flavours, collect_results, console_logger
from .report import fmt, print_flavours, print_table


# --gtest: test binaries that can run in the guest, and the helpers each needs there.
GTEST_HELPERS = {"test_events": ["events_alloc"], "test_bpf": ["events_alloc"], "test_relief": [], "test_evict": []}
GTEST_DEFAULT_FILTER = {
    # v2 event paths; memstall timing (fentry on 6.1); the node-scope watch on the v2 root
    "test_events": "*V2Events*:HostActivity.MemstallsOfAPodAtItsLimit:HostEvents.BpfWatchOnTheHierarchyRootSeesChargesBelowIt",
    # relief: memory.reclaim on a v2 pod cgroup holding page cache (needs the scratch disk: ext4 page cache)
    "test_relief": "*V2Relief*",
    # the spike frontier's v2 mechanics (cgroup.freeze, cgroup.kill, memory.events), a reduced sweep
    "test_evict": "*V2Frontier*",
}
# Test binaries whose guest tests need the scratch disk (/scratch, ext4): page cache
# on tmpfs/ramfs is not reclaimable file cache.
GTEST_NEEDS_DISK = {"test_relief"}


def build_gtest(target, extra=()):
    """Builds `target` (and its guest helpers, and `extra` targets such as pressured)
    without sanitizers, with the same vmlinux.h as pressured. Returns {name: path}."""
    shared = common.shared_build_dir()
    build_dir = shared or arch_dir(GTEST_BUILD)
    logf = os.path.join(OUT, f"{os.path.basename(arch_dir(GTEST_BUILD))}.log")
    vmlinux_h = os.path.join(OUT, "vmlinux.h")
    # Another architecture: cross-built against its sysroot; its vmlinux.h is
    # the arm64 kernel's (cmake/bpf.cmake, scripts/vmlinux-btf), never this machine's.
    cross = arch()["toolchain"]
    if not cross and not os.path.exists(vmlinux_h) and os.path.exists("/sys/kernel/btf/vmlinux"):
        with open(vmlinux_h + ".tmp", "w") as f:
            run(["bpftool", "btf", "dump", "file", "/sys/kernel/btf/vmlinux", "format", "c"], stdout=f)
        os.rename(vmlinux_h + ".tmp", vmlinux_h)
    targets = [target] + GTEST_HELPERS.get(target, []) + list(extra)
    kind = "the given tree" if shared else "RelWithDebInfo, no sanitizers" + (", cross " + common.ARCH if cross else "")
    log(f"building {' '.join(targets)} ({kind}) "
        f"in {build_dir} (log: {logf})")
    cfg = ["cmake", "-S", ROOT, "-B", build_dir, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
           "-DPRESSURED_SANITIZE=OFF", "-DPRESSURED_STATIC=OFF", "-DPRESSURED_BUILD_TESTS=ON",
           "-DPRESSURED_BUILD_BENCH=OFF"]
    if cross:
        cfg.append(f"--toolchain={cross}")
    elif os.path.exists(vmlinux_h):
        cfg.append(f"-DPRESSURED_VMLINUX_H={vmlinux_h}")
    if shared:
        log("  (PRESSURED_VM_BUILD_DIR: already configured; its vmlinux.h is this machine's BTF too)")
    with open(logf, "w") as lf:
        ok = (shared or subprocess.run(cfg, stdout=lf, stderr=subprocess.STDOUT).returncode == 0) and subprocess.run(
            ["ninja", "-C", build_dir, "-j2"] + targets, stdout=lf, stderr=subprocess.STDOUT).returncode == 0
    out = {}
    for t in targets:
        hits = [p for p in (os.path.join(build_dir, "tests", t), os.path.join(build_dir, t)) if os.access(p, os.X_OK)]
        if ok and hits:
            out[t] = hits[0]
    if not ok or len(out) != len(targets):
        tail = ""
        with open(logf, errors="replace") as f:
            tail = "".join(f.readlines()[-15:])
        raise RuntimeError(f"{' '.join(targets)} did not build (see {logf}):\n{tail}")
    return out


def parse_gtest(lines):
    """Per-test verdicts from gtest's console output; a skipped test keeps what its
    GTEST_SKIP() said (the lines between "<file>:<line>: Skipped" and "[  SKIPPED ]")."""
    tests = {}
    current, reason = None, None
    for line in lines:
        m = re.match(r"\[ RUN +\] (\S+)$", line)
        if m:
            current, reason = m.group(1), None
            continue
        if current and reason is None and re.search(r": Skipped$", line):
            reason = []
            continue
        m = re.match(r"\[\s*(OK|FAILED|SKIPPED)\s*\] (\S+?)(?:,| \((\d+) ms\)|$)", line)
        if m and "." in m.group(2):
            name = m.group(2)
            if name in tests and name != current:
                continue  # gtest's closing list of the skipped or failed tests: already known
            tests[name] = {"verdict": m.group(1), "ms": int(m.group(3)) if m.group(3) else None}
            if m.group(1) == "SKIPPED":
                tests[name]["reason"] = " ".join(x.strip() for x in reason or [] if x.strip())
            current, reason = None, None
            continue
        if reason is not None:
            reason.append(line)
    return tests


def gtest_verdict(tests):
    """The run's failures and skips from parse_gtest's verdicts: a test that failed fails
    the run; a test that skipped saying why (a kernel without what it checks, e.g. 6.12's
    multi-gen LRU keeping read() cache inactive) is reported as a skip with its reason,
    as GTEST_SKIP() means it; a skip that says nothing fails, and so does a run in which
    every test skipped (nothing was checked). The guest sets PRESSURED_REQUIRE_PRIVILEGED=1,
    so a missing privilege fails inside the test and never reaches here as a skip.
    Returns (failures, {name: reason} of the skips)."""
    failures = []
    bad = sorted(n for n, t in tests.items() if t["verdict"] not in ("OK", "SKIPPED"))
    if bad:
        failures.append("not OK: " + ", ".join(f"{n} ({tests[n]['verdict']})" for n in bad))
    skipped = {n: t.get("reason", "") for n, t in tests.items() if t["verdict"] == "SKIPPED"}
    silent = sorted(n for n, why in skipped.items() if not why)
    if silent:
        failures.append("skipped without saying why: " + ", ".join(silent))
    if tests and len(skipped) == len(tests):
        failures.append("every test skipped: nothing was checked")
    return failures, skipped


def run_gtest(args, vmlinuz, mods, version):
    target = args.gtest
    flt = args.gtest_filter or GTEST_DEFAULT_FILTER.get(target, "*")
    t0 = time.monotonic()
    scenarios = [s for s in SCENARIO_ORDER if s in (args.scenario or [])]
    try:
        # With scenarios, pressured comes from the same build (one build, not two).
        exes = build_gtest(target, ["pressured"] if scenarios and not args.pressured else [])
    except (RuntimeError, subprocess.CalledProcessError) as e:
        log(f"FAILED: {e}")
        return 1
    binaries = {"workloads": [], "files": {}}
    conf = {"VMT_MODE": "gtest", "VMT_NO_DISK": "1", "VMT_GTEST": f"/usr/bin/{target}", "VMT_GTEST_FILTER": flt,
            "VMT_GTEST_TIMEOUT": str(args.gtest_timeout)}
    if target in GTEST_NEEDS_DISK:
        conf.pop("VMT_NO_DISK")
    # --scenario with --gtest: the same boot then runs those scenarios against
    # pressured (one guest per kernel for both: the boot is most of the cost).
    if scenarios:
        exe = args.pressured or exes["pressured"]
        binaries = {"workloads": build_workloads(), "files": {}, "pressured": exe}
        conf.pop("VMT_NO_DISK")
        conf.update({"VMT_SCENARIOS": " ".join(scenarios), "VMT_CONTENDER": "pressured"})
    build_s = time.monotonic() - t0
    initrd = build_initramfs(mods, conf, binaries, tag="gtest-" + target)
    # The test binary and its helpers, with their ldd libraries (as pressured goes in).
    stage = initrd[:-len(".cpio.gz")]
    copy_with_libs(stage, exes[target], f"/usr/bin/{target}")
    for h in GTEST_HELPERS.get(target, []):
        copy_with_libs(stage, exes[h], f"/vmt/bin/{h}")
        # Also at its build path: tests that use the compiled-in path (the host
        # tests' PRESSURED_EVENTS_ALLOC) find it there.
        copy_with_libs(stage, exes[h], os.path.abspath(exes[h]))
    initrd = repack_initramfs(stage, initrd)
    accel = choose_accel(args.accel, vmlinuz, build_initramfs(mods, {"VMT_MODE": "probe"}, {"workloads": []},
                                                              tag="probe"))
    # An emulated arm64 guest boots and runs each scenario about twice as slowly as an amd64 one under TCG.
    slow = 1 if common.ARCH == "amd64" else 2
    timeout = args.timeout or (60 * slow + args.gtest_timeout + slow * sum(BUDGET_S[x] for x in scenarios))
    logp = os.path.join(OUT, f"console-gtest-{target}{common.KTAG}.log")
    log(f"{target}: booting {version} ({accel}, hard timeout {timeout}s, console {logp}); filter {flt}")

    t1 = time.monotonic()
    disk = build_scratch_disk() if scenarios or target in GTEST_NEEDS_DISK else None
    lines, status = boot(qemu_cmd(vmlinuz, initrd, disk, accel, smp=args.smp), logp, timeout, on_line=console_logger(gtest=True))
    vm_s = time.monotonic() - t1
    out = [text for kind, text in markers(lines) if kind == "GT"]
    rc = next((text for kind, text in markers(lines) if kind == "GTEST-RC"), None)
    left = next((text for kind, text in markers(lines) if kind == "GTEST-LEFT"), "").strip()
    rc_num = int(rc.split()[0]) if rc and rc.split()[0].lstrip("-").isdigit() else None
    elapsed_ms = int(rc.split("elapsed_ms=")[1]) if rc and "elapsed_ms=" in rc else None
    tests = parse_gtest(out)
    measured = [line[len("[ measured ] "):] for line in out if line.startswith("[ measured ] ")]
    failures = []
    if status != "done":
        failures.append(f"boot {status}")
    if rc_num is None:
        failures.append("no exit status from the guest")
    elif rc_num == 137:
        failures.append(f"killed after {args.gtest_timeout}s (--gtest-timeout)")
    elif rc_num != 0:
        failures.append(f"exit status {rc_num}")
    if not tests:
        failures.append(f"no test matched --gtest-filter {flt}")
    verdict_failures, skipped = gtest_verdict(tests)
    failures += verdict_failures
    if left:
        failures.append(f"sandbox cgroups left behind: {left}")
    scen_results = collect_results(lines, scenarios, "pressured", status, logp) if scenarios else []
    for r in scen_results:
        if not r["passed"]:
            failures.append(f"scenario {r['scenario']}: {'; '.join(r['failures'])}")
    flavours = bpf_flavours(lines)
    print()
    for n, t in tests.items():
        print(f"  {t['verdict']:8} {n} ({fmt(t['ms'], ' ms')})" + (f": {t['reason']}" if t.get("reason") else ""))
    for m in measured:
        print(f"  measured: {m}")
    if scen_results:
        print_table(scen_results)
    if flavours["programs"]:
        print_flavours(flavours)
    ok = sum(1 for t in tests.values() if t["verdict"] == "OK")
    print(f"  {target} in the guest: {len(tests)} tests, {ok} OK, {len(skipped)} skipped; gtest {fmt(elapsed_ms, ' ms')}, "
          f"VM boot to power-off {vm_s:.0f} s, build {build_s:.0f} s")
    doc = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "command": " ".join([os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:]), "kernel": version,
           "arch": common.ARCH, "accel": accel, "vm": {"memory_mib": 1024, "cpus": args.smp}, "gtest": target, "filter": flt,
           "tests": tests, "skipped": skipped, "measured": measured, "gtest_ms": elapsed_ms, "vm_s": round(vm_s), "build_s": round(build_s),
           "status": status, "rc": rc_num, "scenarios": scen_results, "bpf": flavours,
           "failures": failures, "passed": not failures, "console_log": logp}
    results = args.results if args.results_given else os.path.join(OUT, f"gtest-{target}{common.KTAG}-results.json")
    with open(results, "w") as f:
        json.dump(doc, f, indent=1)
    log(f"results: {results}")
    if failures:
        print("---- gtest output (guest) ----")
        print("\n".join(out) if out else "(none)")
        print("---- end ----")
        log("FAILED: " + "; ".join(failures) + f" (console log {logp})")
        return 1
    for n, why in skipped.items():
        log(f"SKIPPED {n}: {why}")
    log(f"PASSED ({len(tests)} tests" + (f", {len(skipped)} skipped, each saying why" if skipped else "") + ")")
    return 0
