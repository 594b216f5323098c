"""A run of scenarios x contenders: builds, boots (in parallel), verdicts, results.json."""
import datetime
import json
import os
import shutil
import subprocess
import sys
import time

from . import common
from .common import ROOT, log
from .image import build_initramfs, build_pressured, build_workloads, dlopen_libs, pressured_args_ok, pressured_run_ready
from .qemu import choose_accel
from .scenarios import SCENARIO_ORDER, SMOKE_SCENARIOS, scenarios_for, unavailable
from .contenders import CONTENDER_ORDER, NODE_CONTENDERS, STRICT_CONTENDERS, SYSTEMD_OOMD_REASON, run_contender
from .report import print_flavours, print_table


def relief_probe(exe):
    """Whether this pressured has the reclaim stage (its configuration takes a `relief:`
    section), and the stage's effective settings when turned on (check-config's dump),
    for the results: (known, text or None)."""
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        f.write("relief:\n  enabled: true\n")
        f.flush()
        try:
            r = subprocess.run([exe, "check-config", "--config", f.name], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as e:
            log(f"pressured check-config did not run: {e}")
            return False, None
    if r.returncode != 0:
        log(f"this pressured has no reclaim stage: {r.stderr.strip().splitlines()[-1:] or r.returncode}")
        return False, None
    lines, inside = [], False
    for line in r.stdout.splitlines():
        if line.startswith("relief:"):
            inside = True
        elif inside and line and not line.startswith((" ", "-")):
            break
        if inside:
            lines.append(line)
    return True, "\n".join(lines) or None


def run_suite(args, vmlinuz, mods, version):
    scenarios = args.scenario or (SMOKE_SCENARIOS if args.smoke else SCENARIO_ORDER)
    contenders = args.contender or (["pressured"] if args.smoke else CONTENDER_ORDER)
    named = bool(args.contender)
    scenarios = [s for s in SCENARIO_ORDER if s in scenarios]
    for c in contenders:
        left_out = [s for s in scenarios if s not in scenarios_for(c, scenarios, named)]
        if left_out:
            log(f"{c}: not run on {', '.join(left_out)} (scenarios_for: a scenario or contender of its own)")
    binaries = {"workloads": build_workloads()}
    pressured_note = None
    pressured_reason = None
    relief_effective = None
    if any(c.startswith("pressured") for c in contenders):
        try:
            exe, how = build_pressured(args.pressured)
            ok, text = pressured_run_ready(exe)
            if not ok:
                pressured_reason = text
            else:
                missing = pressured_args_ok(text)
                if missing:
                    pressured_reason = f"pressured run not available: --help lacks {', '.join(missing)}"
                else:
                    binaries["pressured"] = exe
                    pressured_note = how
                    binaries["relief_key"], relief_effective = relief_probe(exe)
                    dlopen_libs()  # a library it dlopens missing on the host stops the run here, before a boot
        except (EnvironmentError, subprocess.CalledProcessError) as e:
            pressured_reason = f"pressured not available: {e}"
        if pressured_reason:
            log(pressured_reason)
    for peer in ("earlyoom", "oomd"):
        if peer in contenders and shutil.which(peer):
            binaries[peer] = shutil.which(peer)
    initrd0 = build_initramfs(mods, {"VMT_MODE": "probe"}, {"workloads": []}, tag="probe")
    accel = choose_accel(args.accel, vmlinuz, initrd0)
    log(f"accelerator: {accel}; scenarios: {' '.join(scenarios)}; contenders: {' '.join(contenders)}")
    results, boots = [], []
    t0 = time.monotonic()
    todo = []
    per_contender = {}
    for c in contenders:
        mine = scenarios_for(c, scenarios, named)
        if not mine:
            continue
        if c.startswith("pressured") and pressured_reason:
            per_contender[c] = unavailable(c, mine, pressured_reason)
        elif c == "pressured-relief" and not binaries.get("relief_key"):
            per_contender[c] = unavailable(c, mine, "this pressured has no reclaim stage (check-config rejects "
                                                    "`relief: {enabled: true}`)")
        elif c in ("earlyoom", "oomd") and not binaries.get(c):
            per_contender[c] = unavailable(c, scenarios, f"{c} is not installed (scripts/setup installs it)")
        elif c == "systemd-oomd":
            per_contender[c] = unavailable(c, scenarios, SYSTEMD_OOMD_REASON)
        else:
            todo.append(c)
    # Contenders boot in parallel QEMUs (--jobs), each its own guest: they never
    # share a node, so one cannot disturb the other's scenario.
    import concurrent.futures
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futs = {c: pool.submit(run_contender, c, scenarios_for(c, scenarios, named), (vmlinuz, mods, version), accel,
                               binaries, args.timeout, args.smp) for c in todo}
        flavours = None
        for c, fut in futs.items():
            res, status, logp, fl = fut.result()
            boots.append({"contender": c, "status": status, "console_log": logp})
            per_contender[c] = res
            if c == "pressured":
                flavours = fl
    for c in contenders:
        results += per_contender.get(c, [])
    elapsed = time.monotonic() - t0
    print()
    print_table(results)
    if flavours:
        print_flavours(flavours)
    strict_fail = [r for r in results if r["contender"] in STRICT_CONTENDERS and not r["passed"]]
    harness_fail = [b for b in boots if not b["status"].startswith("done")]
    # The real node also fails the run when it did not run the scenarios at all (a node that
    # did not come up, or a scenario without a result), for the kubelet alone too.
    node_fail = [r for r in results if r["contender"] in NODE_CONTENDERS and not r.get("unavailable")
                 and any(f.startswith("no result from the guest") for f in r.get("failures", []))]
    node_unavailable = [r for r in results if r["contender"] in NODE_CONTENDERS and r.get("unavailable")]
    # Under CTest a missing node (no kubelet build) skips; pressured not building fails.
    node_missing = [r for r in node_unavailable if r["unavailable"].startswith("real node not available")]
    if node_missing and args.ctest and os.environ.get("PRESSURED_REQUIRE_PRIVILEGED") != "1":
        print(f"vmtests: SKIPPED, missing: {node_missing[0]['unavailable']}", flush=True)
        sys.exit(77)
    strict_fail += node_fail + node_unavailable
    doc = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "command": " ".join([os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:]),
           "kernel": version, "accel": accel, "vm": {"memory_mib": 1024, "cpus": 2},
           "node_cgroup": common.NODE_CGROUP if any(c in NODE_CONTENDERS for c in contenders) else None,
           "node_memory_mib": common.NODE_MEM_MIB if any(c in NODE_CONTENDERS for c in contenders) else None,
           "pressured_binary": pressured_note, "elapsed_s": round(elapsed), "boots": boots,
           "relief": relief_effective,
           "bpf": flavours, "results": results, "passed": not strict_fail and not harness_fail}
    with open(args.results, "w") as f:
        json.dump(doc, f, indent=1)
    log(f"results: {args.results} ({elapsed:.0f}s)")
    keep = [b["console_log"] for b in boots]
    if strict_fail or harness_fail:
        log("FAILED: " + "; ".join([f"{r['scenario']}/{r['contender']}: {', '.join(r['failures'])}"
                                     for r in strict_fail] + [f"boot {b['contender']}: {b['status']}"
                                                              for b in harness_fail]))
        log("guest console logs kept: " + " ".join(keep))
        return 1
    return 0
