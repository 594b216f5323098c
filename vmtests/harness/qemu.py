"""QEMU: the command line, a bounded boot with its console, the accelerator, the console's markers."""
import os
import re
import signal
import subprocess
import time

from . import common
from .common import OUT, RUNNING_CONTROL_PLANES, RUNNING_QEMU, arch, log


def qemu_cmd(vmlinuz, initrd, disk, accel, mem=1024, smp=2, append_extra="", extra_args=()):
    # VMT_KERNEL_APPEND: extra kernel parameters for debugging (e.g. "loglevel=7").
    extra = " ".join(x for x in (append_extra, os.environ.get("VMT_KERNEL_APPEND", "")) if x)
    append = f"console={arch()['console']} panic=-1 quiet loglevel=1 rdinit=/init mitigations=off {extra}".strip()
    cmd = [arch()["qemu"], *arch()["machine"], "-accel", accel, "-m", str(mem), "-smp", str(smp), "-nographic",
           "-no-reboot", "-kernel", vmlinuz, "-initrd", initrd, "-append", append, "-nic", "none"]
    if accel == "tcg":
        cmd += ["-cpu", arch()["tcg_cpu"]]
    else:
        cmd += ["-cpu", "host"]
    if disk:
        cmd += ["-drive", f"file={disk},if=virtio,format=raw,snapshot=on"]
    if extra_args:
        # The node's network replaces "-nic none" (restricted, one forwarding rule).
        if "-nic" in extra_args:
            i = cmd.index("-nic")
            del cmd[i:i + 2]
        cmd += list(extra_args)
    return cmd


# A guest CPU stuck this long in the kernel does not come back under TCG
# (docs/vmtests.md, "Known flake"): the boot is stopped then ("lockup") instead
# of at its hard timeout, and the scenarios without a result boot again.
LOCKUP_ABORT_S = 90
LOCKUP_RE = re.compile(r"soft lockup - CPU#\d+ stuck for (\d+)s")


def boot(cmd, logpath, timeout, on_line=None, stop_marker="@@VMT DONE"):
    """Runs QEMU with a hard timeout; returns (lines, status) where status is
    'done', 'timeout', 'lockup' (a vCPU stuck LOCKUP_ABORT_S) or 'exited:<rc>'.
    The console goes to logpath."""
    lines = []
    status = None
    with open(logpath, "w") as lf:
        lf.write("# " + " ".join(cmd) + "\n")
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             start_new_session=True)
        RUNNING_QEMU.add(p)
        deadline = time.monotonic() + timeout
        os.set_blocking(p.stdout.fileno(), False)
        buf = b""
        try:
            while True:
                if time.monotonic() > deadline:
                    status = "timeout"
                    break
                chunk = None
                try:
                    chunk = p.stdout.read()
                except BlockingIOError:
                    pass
                if chunk:
                    buf += chunk
                    while b"\n" in buf:
                        raw, buf = buf.split(b"\n", 1)
                        line = raw.decode("utf-8", "replace").rstrip("\r")
                        lf.write(line + "\n")
                        lines.append(line)
                        if on_line:
                            on_line(line)
                        if line.startswith(stop_marker):
                            status = "done"
                        m = LOCKUP_RE.search(line)
                        if m and int(m.group(1)) >= LOCKUP_ABORT_S and status != "done":
                            status = "lockup"
                    lf.flush()
                    if status == "lockup":
                        break
                elif p.poll() is not None:
                    status = status or f"exited:{p.returncode}"
                    break
                else:
                    time.sleep(0.05)
                if status == "done" and p.poll() is not None:
                    break
                if status == "done":
                    # give poweroff a moment, then stop
                    try:
                        p.wait(timeout=10)
                    except subprocess.TimeoutExpired:
                        pass
                    break
        finally:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
            RUNNING_QEMU.discard(p)
            if buf:
                lf.write(buf.decode("utf-8", "replace"))
                lines.append(buf.decode("utf-8", "replace"))
    return lines, status


def choose_accel(requested, vmlinuz, initrd):
    if common.ARCH != "amd64":
        # Another architecture than this machine's: only QEMU's emulation runs it.
        if requested == "kvm":
            raise EnvironmentError(f"--accel kvm: a {common.ARCH} guest cannot use KVM on this machine")
        return "tcg"
    if requested in ("tcg", "kvm"):
        return requested
    probe_file = os.path.join(OUT, "kvm-probe.txt")
    if os.path.exists(probe_file):
        with open(probe_file) as f:
            return f.read().strip() or "tcg"
    accel = "tcg"
    if os.access("/dev/kvm", os.R_OK | os.W_OK):
        log("probing KVM with a bounded boot (30 s)")
        lines, status = boot(qemu_cmd(vmlinuz, initrd, None, "kvm", mem=256, smp=1),
                             os.path.join(OUT, "kvm-probe.log"), 30, stop_marker="@@VMT BOOT")
        if status == "done" or any(l.startswith("@@VMT BOOT") for l in lines):
            accel = "kvm"
        log(f"KVM probe: {status}; using {accel}")
    with open(probe_file, "w") as f:
        f.write(accel + "\n")
    return accel


def markers(lines):
    for line in lines:
        i = line.find("@@VMT ")
        if i < 0:
            continue
        rest = line[i + 6:]
        kind, _, text = rest.partition(" ")
        yield kind, text


def kill_all_qemu():
    for p in list(RUNNING_QEMU):
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for cp in list(RUNNING_CONTROL_PLANES):
        cp.stop()
