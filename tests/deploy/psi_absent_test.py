#!/usr/bin/env python3
"""A node without PSI: pressured starts, becomes ready, logs at warn what it lacks (the path, psi=0,
the thresholds that cannot fire) and exports pressured_psi_available 0; with PSI it exports 1.

The node is a sandbox memory cgroup this test creates (pressured-test-<pid>-psi/kubepods, 512 MiB
limit, no process in it) and removes, also on failure; `cgroup.psiPath` points at a directory that
does not exist (what /proc/pressure is on a kernel booted with psi=0). Dry run, no pod source,
metrics on 127.0.0.1. Needs root (cgroups): otherwise a loud skip (77), unless
PRESSURED_REQUIRE_PRIVILEGED=1.
usage: psi_absent_test.py PRESSURED
"""

import os
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import Deadline, check, free_port, http_get, log, memory_mount, skip_or_fail, wait_for  # noqa: E402

DEADLINE = Deadline(120)


def run(pressured, root, tmp, psi_path, failures, want):
    port = free_port()
    cfg = os.path.join(tmp, f"config-{want}.yaml")
    with open(cfg, "w") as f:
        f.write("evictionHard:\n  allocatableMemory.available: 64Mi\n  memory.pressure.full.avg10: 40\n"
                f"cgroup:\n  cgroupRoot: /{root}\n" + (f"  psiPath: {psi_path}\n" if psi_path else "") +
                "pods:\n  kind: none\n"
                f"metrics:\n  listen: 127.0.0.1:{port}\n"
                f"daemon:\n  dryRun: true\n  stateFile: {tmp}/state-{want}.json\n...\n")
    logf = os.path.join(tmp, f"log-{want}")
    with open(logf, "w") as out:
        p = subprocess.Popen([pressured, "run", "--config", cfg], stdout=out, stderr=subprocess.STDOUT)
    try:
        ready = wait_for("ready", lambda: http_get(f"http://127.0.0.1:{port}/readyz")[0] == 200, 60,
                         deadline=DEADLINE)
        check(failures, ready and p.poll() is None, f"psi={want}: pressured runs and is ready")
        _, body = http_get(f"http://127.0.0.1:{port}/metrics")
        line = next((l for l in body.splitlines() if l.startswith("pressured_psi_available")), "")
        check(failures, line.endswith(f" {want}"), f"psi={want}: {line or 'no pressured_psi_available'}")
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=10)
    with open(logf) as f:
        return f.read()


def main():
    pressured = os.path.abspath(sys.argv[1])
    mount, v2 = memory_mount()
    if os.geteuid() != 0 or mount is None:
        skip_or_fail("root and a memory cgroup controller (a sandbox kubepods cgroup)")
    root = f"pressured-test-{os.getpid()}-psi"
    base = os.path.join(mount, root)
    made = []
    failures = []
    try:
        for d in ("", "/kubepods", "/kubepods/besteffort", "/kubepods/burstable"):
            os.mkdir(base + d)
            made.append(base + d)
        with open(os.path.join(base, "kubepods", "memory.max" if v2 else "memory.limit_in_bytes"), "w") as f:
            f.write(str(512 << 20))
        with tempfile.TemporaryDirectory() as tmp:
            missing = os.path.join(tmp, "no-pressure")
            text = run(pressured, root, tmp, missing, failures, 0)
            warn = [l for l in text.splitlines() if "this kernel has no PSI" in l]
            check(failures, len(warn) == 1, "one warn line says the kernel has no PSI")
            w = warn[0] if warn else ""
            for part in (missing + "/memory", "psi=0", "memory.pressure.full.avg10 (hard)"):
                check(failures, part in w, f"it names {part}")
            raised = [l for l in text.splitlines() if "CAP_SYS_RESOURCE" in l]
            check(failures, not raised, "no word of a trigger window raised on a kernel with no PSI: " +
                  (raised[0] if raised else ""))
            if os.path.exists("/proc/pressure/memory"):
                run(pressured, root, tmp, None, failures, 1)
            else:
                log("this host has no PSI itself: the psi=1 case is not run")
    finally:
        for d in reversed(made):
            try:
                os.rmdir(d)
            except OSError as e:
                failures.append(f"cannot remove {d}: {e}")
    if failures:
        print("FAIL: " + "; ".join(failures))
        return 1
    print("OK: without PSI pressured starts, says what it lacks and exports pressured_psi_available 0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
