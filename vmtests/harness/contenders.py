"""The contenders and their boots (again after a guest lockup); the real node's boots."""
import os
import shutil
import subprocess
import time

from . import common
from . import node
from .common import OUT, RUNNING_CONTROL_PLANES, log
from .kernel import GUEST_MODULES, NODE_MODULES
from .image import build_initramfs, build_scratch_disk
from .qemu import LOCKUP_RE, boot, markers, qemu_cmd
from .scenarios import BUDGET_S, RESULT_NAMES, bpf_flavours, console_logger, judged_results, missing_results, \
    unavailable


CONTENDERS = {
    "pressured": "pressured run, event-driven (BPF + PSI triggers + memory.events)",
    "pressured-poll10s": "pressured run --poll-interval 10s --bpf off (kubelet/cAdvisor-like baseline)",
    "pressured-poll1s": "pressured run --poll-interval 1s --bpf off",
    "pressured-relief": "pressured run with the reclaim stage before a memory eviction on (relief.enabled: true, "
                        "its other settings at their defaults)",
    "pressured-relief-off": "pressured run with the reclaim stage off (relief.enabled: false): the kubelet's "
                            "decision on the same numbers",
    "earlyoom": "earlyoom (Debian), -m at the same node threshold, kubelet oom_score_adj",
    "oomd": "oomd (Debian, v0.5), cgroup v2 ruleset on kubepods",
    "systemd-oomd": "systemd-oomd (needs systemd as PID 1 and D-Bus)",
    "kubelet": "the real kubelet 1.20.2 (containerd + runc, pods through the API), scenario thresholds",
    "pressured+kubelet": "pressured beside the real kubelet, --kubelet-config on the kubelet's own file with "
                         "--kubelet-threshold-offset memory.available=50Mi, evicting via the API",
    "daemonset": "pressured as deploy/'s DaemonSet pod (its OCI image, kubectl apply -k) on the real kubelet, "
                 "with controller-manager and scheduler",
}

# Contenders that boot the real node (harness/node.py, guest/node.sh).
NODE_CONTENDERS = {"kubelet", "pressured+kubelet", "daemonset"}

CONTENDER_ORDER = list(CONTENDERS)

# Contenders whose failed verdict fails the run: pressured, and pressured beside the real
# kubelet (its documented deployment). The others are the comparison (docs/comparison.md).
STRICT_CONTENDERS = {"pressured", "pressured+kubelet", "daemonset", "pressured-relief", "pressured-relief-off"}


def run_contender(contender, scenarios, kernel, accel, binaries, timeout_override, smp=2):
    """Boots the guest for one contender (again after a lockup) and returns its results."""
    vmlinuz, mods, version = kernel
    if contender in NODE_CONTENDERS:
        return run_node_contender(contender, scenarios, kernel, accel, binaries, timeout_override, smp)
    conf = {"VMT_MODE": "scenarios", "VMT_CONTENDER": contender, "VMT_SCENARIOS": " ".join(scenarios),
            "VMT_RELIEF_KEY": "1" if binaries.get("relief_key") else ""}
    initrd = build_initramfs(mods, conf, binaries, tag=contender)
    logp = os.path.join(OUT, f"console-{contender}{common.KTAG}.log")
    timeout = timeout_override or (60 + sum(BUDGET_S[s] for s in scenarios))
    log(f"{contender}: booting for {', '.join(scenarios)} (hard timeout {timeout}s, console {logp})")

    def boot_once(todo):
        conf_n = dict(conf, VMT_SCENARIOS=" ".join(todo))
        initrd_n = initrd if todo == scenarios else build_initramfs(mods, conf_n, binaries, tag=contender)
        return boot(qemu_cmd(vmlinuz, initrd_n, build_scratch_disk(), accel, smp=smp), logp, timeout,
                    on_line=console_logger(f"[{contender}] ", node=contender in NODE_CONTENDERS))

    t0 = time.monotonic()
    results, status, lines = boot_resuming(contender, scenarios, logp, boot_once)
    log(f"{contender}: boot {status} after {time.monotonic() - t0:.0f}s")
    return results, status, logp, bpf_flavours(lines)


# Boots per contender at most when guests lock up (boot_resuming).
MAX_BOOTS = 3


def runner_died_in(lines, names):
    """The scenario the guest was running when its scenario shell died (the RUNNER-DIED
    marker of the guest's init: busybox sh exits when it cannot fork), if it gave no
    result; else None."""
    current, died = None, False
    for kind, text in markers(lines):
        if kind == "SCENARIO":
            current = text.split()[0] if text.split() else None
        elif kind == "RUNNER-DIED":
            died = True
    if not died or current is None:
        return None
    return None if all(x in names for x in RESULT_NAMES.get(current, [current])) else current


def boot_resuming(contender, scenarios, logp, boot_once):
    """Boots (boot_once(scenarios) -> (lines, status)) and, when the guest locked up
    under TCG (docs/vmtests.md, "Known flake": seen about once in 30 boots, at a BPF
    trampoline's attach or detach), keeps that console as console-<c>-lockup<N>.log
    and boots again for the scenarios without a result, at most MAX_BOOTS boots.
    Results of a later boot say so ("retried"). A lockup after every result is in
    (at teardown) ends the run as "done", with the console kept and the fact said.
    Returns (judged results, a failed entry for each scenario without one; status;
    every boot's console lines)."""
    results, all_lines, notes, todo = [], [], [], list(scenarios)
    status = "not booted"
    for n in range(1, MAX_BOOTS + 1):
        lines, status = boot_once(todo)
        all_lines += lines
        got = judged_results(lines, contender)
        for r in got:
            if notes:
                r["retried"] = "; ".join(notes)
        results += got
        names = {r["scenario"] for r in results}
        died = runner_died_in(lines, names)
        if died:
            kept = f"{logp[:-len('.log')]}-runner-died{n}.log"
            shutil.copyfile(logp, kept)
            why = (": it could not fork (pid_max exhausted)" if any("can't fork" in l for l in lines)
                   else "")
            log(f"{contender}: WARNING: the guest's scenario shell died in {died}{why}; console kept: {kept}")
            results += [{"scenario": name, "contender": contender, "passed": False, "metrics": {},
                         "failures": [f"the guest's scenario shell died{why} (console log {kept})"]}
                        for name in RESULT_NAMES.get(died, [died]) if name not in names]
            names = {r["scenario"] for r in results}
        todo = [s for s in todo if not all(x in names for x in RESULT_NAMES.get(s, [s]))]
        if died and todo and n < MAX_BOOTS:
            note = f"boot {n}: the scenario shell died in {died}; booted again for {', '.join(todo)}"
            log(f"{contender}: {note}")
            notes.append(note)
            continue
        if not (status == "lockup" or (status == "timeout" and any(LOCKUP_RE.search(l) for l in lines))):
            break
        kept = f"{logp[:-len('.log')]}-lockup{n}.log"
        shutil.copyfile(logp, kept)
        if not todo:
            log(f"{contender}: WARNING: guest soft lockup after the last result (console kept: {kept})")
            status = f"done (guest soft lockup after the last result, console kept: {kept})"
            break
        note = f"boot {n}: guest soft lockup (console kept: {kept}); booted again for {', '.join(todo)}"
        if n == MAX_BOOTS:
            log(f"{contender}: boot {n}: guest soft lockup again (console kept: {kept}); {MAX_BOOTS} boots, giving up")
            break
        log(f"{contender}: WARNING: {note}")
        notes.append(note)
    return results + missing_results(results, todo, contender, status, logp), status, all_lines


def run_node_contender(contender, scenarios, kernel, accel, binaries, timeout_override, smp):
    """The real node: control plane on the host's 127.0.0.1, containerd + runc + kubelet
    1.20.2 in the guest, the scenarios' pods created through the API. One boot, or more
    after a guest lockup (boot_resuming), each with a fresh control plane: the apiserver
    would still hold the stuck boot's node and pods, which a new kubelet would run."""
    vmlinuz, mods, version = kernel
    logp = os.path.join(OUT, f"console-{contender}{common.KTAG}.log")
    daemonset = contender == "daemonset"
    try:
        node_disk = node.build_node_disk(binaries["workloads"],
                                         node.pressured_image_archive() if daemonset else None)
        exes, libs_of = node.initramfs_needs()
        if daemonset:
            # The guest lists the node's BPF links before and after `kubectl delete -k`.
            bpftool = shutil.which("bpftool") or "/usr/sbin/bpftool"
            if not os.access(bpftool, os.X_OK):
                raise EnvironmentError("bpftool is missing (Debian package bpftool; scripts/setup)")
            exes = dict(exes, **{"/usr/bin/bpftool": bpftool})
    except (EnvironmentError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
        log(f"{contender}: node not available: {e}")
        return unavailable(contender, scenarios, f"real node not available: {e}"), "unavailable", logp, {}
    boots = []

    def boot_once(todo):
        cp = node.ControlPlane(controllers=daemonset)
        RUNNING_CONTROL_PLANES.add(cp)
        try:
            try:
                cp.start()
            except (EnvironmentError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
                if not boots:
                    raise
                log(f"{contender}: control plane did not start for the next boot: {e}")
                return [], f"control plane failed: {e}"
            boots.append(todo)
            conf = {"VMT_MODE": "scenarios", "VMT_CONTENDER": contender, "VMT_SCENARIOS": " ".join(todo),
                    "VMT_CGROUP": common.NODE_CGROUP}
            files = dict(binaries.get("files", {}), **{"/etc/kubernetes/kubeconfig": cp.guest_kubeconfig()})
            if daemonset:
                files.update(node.deploy_files())
            b = dict(binaries, node_exes=exes, node_libs_of=libs_of, files=files)
            initrd = build_initramfs(mods, conf, b, tag=contender.replace("+", "-"),
                                     modules=GUEST_MODULES + NODE_MODULES)
            # Node start (containerd, image import), and per scenario a kubelet start (Ready: <= 180 s)
            # and the pods' creation (<= 600 s): under TCG on a loaded host both take minutes.
            # The daemonset contender adds per scenario the DaemonSet's pod becoming Ready (<= 600 s)
            # and `kubectl delete -k` (<= 300 s).
            timeout = timeout_override or (300 + sum(BUDGET_S[s] + 900 + (900 if daemonset else 0) for s in todo))
            log(f"{contender}: booting the real node (cgroup {common.NODE_CGROUP}, {common.NODE_MEM_MIB} MiB) for {', '.join(todo)} "
                f"(hard timeout {timeout}s, console {logp})")
            return boot(qemu_cmd(vmlinuz, initrd, build_scratch_disk(), accel, mem=common.NODE_MEM_MIB, smp=smp,
                                 extra_args=node.qemu_node_args(node_disk, cp.port)),
                        logp, timeout, on_line=console_logger(f"[{contender}] ", node=contender in NODE_CONTENDERS))
        finally:
            cp.stop()
            RUNNING_CONTROL_PLANES.discard(cp)

    t0 = time.monotonic()
    try:
        results, status, lines = boot_resuming(contender, scenarios, logp, boot_once)
    except (EnvironmentError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
        log(f"{contender}: node not available: {e}")
        return unavailable(contender, scenarios, f"real node not available: {e}"), "unavailable", logp, {}
    log(f"{contender}: boot {status} after {time.monotonic() - t0:.0f}s")
    return results, status, logp, bpf_flavours(lines)


SYSTEMD_OOMD_REASON = ("systemd-oomd cannot run without systemd as PID 1: it learns which cgroups to watch "
                       "(ManagedOOMMemoryPressure=) from PID 1 over varlink (io.systemd.ManagedOOM) and kills "
                       "through it; the initramfs guest has no systemd")
