"""--pressured-image: pressured from its OCI image (scripts/image), run by Debian's runc in the guest.

The image of the guest's architecture is built by scripts/image into build/vmtests/image-<arch>
(its own output directory: build/image stays the amd64 image the daemonset contender imports),
unpacked with umoci into a runtime bundle whose config.json the host writes here in the shape of
deploy/base/daemonset.yaml's container, with deploy/seccomp/pressured.json converted to the OCI
runtime spec by tests/deploy/seccomp_runc.py (`oci` mode: its to_oci()). runc and libseccomp
are Debian's packages of the guest's architecture, downloaded through scripts/apt-extra and
unpacked, never installed. Three contenders, one boot:
  pressured-image      the profile as shipped (default SCMP_ACT_ERRNO): what the DaemonSet runs;
  pressured-image-log  the same allow list with SCMP_ACT_LOG as the default action: nothing is
                       refused, every call outside the list becomes an audit type=1326 record in
                       the kernel log. Debian's runc 1.1.5 has no SECCOMP_FILTER_FLAG_LOG
                       (runc 1.2 added it), which would log the refusals of the first run itself;
  pressured-image-paranoid2  as shipped, with the guest's kernel.perf_event_paranoid set to 2 before the
                       container starts (and put back after): the remedy for kprobes that Debian's
                       default of 3 refuses without CAP_SYS_ADMIN (docs/operations.md).
"""
import datetime
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time

import yaml

from . import common
from .common import OUT, ROOT, HarnessError, arch, log, run
from .image import build_initramfs, build_scratch_disk, build_workloads, dlopened_sonames, elf_dynamic, \
    guest_busybox, guest_lib_dirs, repack_initramfs
from .qemu import boot, choose_accel, markers, qemu_cmd
from .scenarios import BUDGET_S, CONTAINER_CGROUP, IMAGE_BINARY, SCENARIO_ORDER, bpf_flavours, judged_results, missing_results, \
    console_logger, judge_paranoid_remedy
from .report import print_flavours, print_table

CONTAINER_CONTENDERS = {"pressured-image": None, "pressured-image-log": "SCMP_ACT_LOG", "pressured-image-paranoid2": None}
RUNTIME_PACKAGES = ["runc", "libseccomp2"]
CACHE = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
                     "pressured", "vmtests-runc")
# Where the guest's scenarios write their pod file (vmtests/guest/scenario_lib.sh, PODS_JSON): the
# DaemonSet reads pods from the kubelet, this guest has none, so the container gets /run read-only.
POD_FILE_DIR = "/run"
# containerd's defaults for every container (as tests/deploy/seccomp_runc.py).
MASKED = ["/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
          "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware"]
READONLY = ["/proc/asound", "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"]


def build_image():
    """scripts/image for the guest's architecture into build/vmtests/image-<arch>; its image.json.
    PRESSURED_IMAGE_JSON names the image.json of an image already built for that architecture
    (e.g. to build it before waiting for the VM lock)."""
    given = os.environ.get("PRESSURED_IMAGE_JSON")
    if given:
        with open(given) as f:
            info = json.load(f)
        if info.get("architecture") != common.ARCH:
            raise EnvironmentError(f"PRESSURED_IMAGE_JSON={given} is a {info.get('architecture')} image, "
                                   f"not {common.ARCH}")
        log(f"the image of {given} (PRESSURED_IMAGE_JSON)")
        return info
    out = os.path.join(OUT, f"image-{common.ARCH}")
    logf = os.path.join(OUT, f"image-{common.ARCH}.log")
    log(f"building the {common.ARCH} image (scripts/image --arch {common.ARCH} --out {os.path.relpath(out, ROOT)}; "
        f"log {logf})")
    with open(logf, "w") as lf:
        r = subprocess.run([os.path.join(ROOT, "scripts", "image"), "--arch", common.ARCH, "--out", out],
                           stdout=lf, stderr=subprocess.STDOUT, timeout=5400)
    meta = os.path.join(out, "image.json")
    if r.returncode != 0 or not os.path.exists(meta):
        with open(logf, errors="replace") as f:
            tail = "".join(f.readlines()[-10:])
        raise EnvironmentError(f"scripts/image --arch {common.ARCH} failed (log {logf}):\n{tail}")
    with open(meta) as f:
        return json.load(f)


def unpack_image(info, bundle):
    """umoci unpack of the image's OCI layout into bundle/rootfs (owners kept: this runs as root)."""
    shutil.rmtree(bundle, ignore_errors=True)
    tag = info["reference"].split(":", 1)[1]
    run(["umoci", "unpack", "--image", f"{info['layout']}:{tag}", bundle], stdout=subprocess.DEVNULL)
    rootfs = os.path.join(bundle, "rootfs")
    # umoci's own config.json and metadata: the guest gets the DaemonSet's spec instead.
    for f in os.listdir(bundle):
        if f != "rootfs":
            p = os.path.join(bundle, f)
            shutil.rmtree(p) if os.path.isdir(p) else os.unlink(p)
    return rootfs


def runtime_root():
    """runc and libseccomp of the guest's architecture, unpacked from Debian's packages
    (scripts/apt-extra download PKG:<arch>, cached). Returns (root, [package files])."""
    root = os.path.join(CACHE, common.ARCH, "root")
    debs = os.path.join(CACHE, common.ARCH, "debs")
    stamp = os.path.join(CACHE, common.ARCH, ".complete")
    if not os.path.exists(stamp):
        os.makedirs(debs, exist_ok=True)
        for pkg in RUNTIME_PACKAGES:
            if glob.glob(os.path.join(debs, f"{pkg}_*_{common.ARCH}.deb")):
                continue
            log(f"downloading {pkg}:{common.ARCH} (scripts/apt-extra; cache {CACHE})")
            r = subprocess.run([os.path.join(ROOT, "scripts", "apt-extra"), "download", f"{pkg}:{common.ARCH}"],
                               cwd=debs, capture_output=True, text=True, timeout=600)
            if not glob.glob(os.path.join(debs, f"{pkg}_*_{common.ARCH}.deb")):
                raise EnvironmentError(f"cannot download {pkg}:{common.ARCH}: "
                                       f"{(r.stderr.strip().splitlines() or ['?'])[-1]}")
        shutil.rmtree(root, ignore_errors=True)
        for d in sorted(glob.glob(os.path.join(debs, f"*_{common.ARCH}.deb"))):
            run(["dpkg-deb", "-x", d, root])
        open(stamp, "w").close()
    return root, sorted(os.path.basename(d) for d in glob.glob(os.path.join(debs, "*.deb")))


def closure(exe, roots):
    """[(host path, guest path)] of the interpreter and NEEDED libraries of a foreign ELF
    file, each found in the first of `roots` (unpacked packages, the sysroot) that has it."""
    out, todo, seen = [], [exe], set()
    while todo:
        interp, needed = elf_dynamic(todo.pop())
        for name in ([interp] if interp else []) + needed:
            if name in seen:
                continue
            seen.add(name)
            cands = [name] if name.startswith("/") else ["/" + os.path.join(d, name) for d in guest_lib_dirs()]
            hit = next(((r + c, c) for r in roots for c in cands if os.path.exists(r + c)), None)
            if hit is None:
                raise HarnessError(f"{name} (needed by {exe}) is in none of {roots}")
            out.append(hit)
            todo.append(os.path.realpath(hit[0]))
    return out


def check_rootfs(rootfs):
    """The image's binary finds its interpreter, its NEEDED libraries and those it dlopens, with
    theirs, inside the image (the stage's own check looks in the initramfs, which is not its root)."""
    exe = rootfs + IMAGE_BINARY
    if not os.path.isfile(exe):
        raise HarnessError(f"the image has no {IMAGE_BINARY}")
    closure(exe, [rootfs])
    for soname in dlopened_sonames():
        lib = next((os.path.join(rootfs, d, soname) for d in guest_lib_dirs()
                    if os.path.exists(os.path.join(rootfs, d, soname))), None)
        if lib is None:
            raise HarnessError(f"{soname} (pressured dlopens it) is not in the image")
        closure(lib, [rootfs])


def daemonset_container():
    """The pressured container and the volumes of deploy/base/daemonset.yaml."""
    with open(os.path.join(ROOT, "deploy", "base", "daemonset.yaml")) as f:
        ds = yaml.safe_load(f)
    pod = ds["spec"]["template"]["spec"]
    c = next(c for c in pod["containers"] if c["name"] == "pressured")
    return pod, c, {v["name"]: v for v in pod.get("volumes", [])}


def quantity_bytes(q):
    m = re.fullmatch(r"(\d+)(Ki|Mi|Gi)?", str(q))
    if not m:
        raise HarnessError(f"deploy/base/daemonset.yaml: memory quantity {q!r} not understood")
    return int(m.group(1)) << {None: 0, "Ki": 10, "Mi": 20, "Gi": 30}[m.group(2)]


def container_spec(seccomp):
    """The OCI runtime spec of deploy/base/daemonset.yaml's pressured container, as a node's runtime
    makes it: hostPID and hostNetwork (no pid or network namespace), uid 0 with exactly its
    added capabilities, no new privileges, a read-only root, its hostPath volumes as bind
    mounts (readOnly, HostToContainer propagation as rslave), its memory limit; the config
    volume is left out (the scenario passes its thresholds as flags) and /run is added
    read-only (the scenario's pod file, in place of the kubelet's pod list)."""
    pod, c, volumes = daemonset_container()
    sc = c["securityContext"]
    if not (pod.get("hostPID") and pod.get("hostNetwork") and sc.get("readOnlyRootFilesystem")
            and sc.get("allowPrivilegeEscalation") is False and sc.get("runAsUser") == 0):
        raise HarnessError("deploy/base/daemonset.yaml no longer has the shape this spec mirrors "
                           "(hostPID, hostNetwork, read-only root, no privilege escalation, uid 0)")
    caps = ["CAP_" + x for x in sc["capabilities"]["add"]]
    mounts = [
        {"destination": "/proc", "type": "proc", "source": "proc", "options": ["nosuid", "noexec", "nodev"]},
        {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
         "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
        {"destination": "/dev/pts", "type": "devpts", "source": "devpts",
         "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"]},
        {"destination": "/dev/shm", "type": "tmpfs", "source": "shm",
         "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]},
        {"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue", "options": ["nosuid", "noexec", "nodev"]},
        {"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": ["nosuid", "noexec", "nodev", "ro"]},
    ]
    for vm in c.get("volumeMounts", []):
        v = volumes[vm["name"]]
        if "hostPath" not in v:
            continue  # the ConfigMap: see above
        opts = ["rbind", "ro" if vm.get("readOnly") else "rw"]
        if vm.get("mountPropagation") == "HostToContainer":
            opts.append("rslave")
        mounts.append({"destination": vm["mountPath"], "type": "bind", "source": v["hostPath"]["path"],
                       "options": opts})
    mounts.append({"destination": POD_FILE_DIR, "type": "bind", "source": POD_FILE_DIR, "options": ["rbind", "ro"]})
    return {
        "ociVersion": "1.0.2",
        "process": {
            "terminal": False,
            "user": {"uid": 0, "gid": 0},
            "args": ["@@VMT-ARGS@@"],
            "env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
            "cwd": "/",
            "capabilities": {k: caps for k in ("bounding", "effective", "permitted")},
            "noNewPrivileges": True,
        },
        "root": {"path": "rootfs", "readonly": True},
        "hostname": "pressured",
        "mounts": mounts,
        "linux": {
            "namespaces": [{"type": t} for t in ("mount", "uts", "ipc", "cgroup")],
            "cgroupsPath": CONTAINER_CGROUP,
            "resources": {"memory": {"limit": quantity_bytes(c["resources"]["limits"]["memory"])}},
            "maskedPaths": MASKED,
            "readonlyPaths": READONLY,
            "seccomp": seccomp,
        },
    }


# The positive control of the kernel log check (vmt_ctr_probe): sync() is outside the allow list.
PROBE_CALL = "sync"


def probe_spec(seccomp):
    """A container of the same runtime, capabilities and filter that runs the guest's static
    busybox `sync`, whose syscall the allow list lacks: under SCMP_ACT_LOG its audit record
    must reach the kernel log, or the check of the runs above could not fail."""
    spec = container_spec(seccomp)
    spec["process"]["args"] = ["/bin/busybox", PROBE_CALL]
    spec["mounts"] = [m for m in spec["mounts"] if m["type"] != "bind"]
    spec["linux"]["cgroupsPath"] = "/system.slice/seccomp-probe"
    spec["linux"].pop("resources")
    return spec


def oci_seccomp(default_action):
    """deploy/seccomp/pressured.json as linux.seccomp, by tests/deploy/seccomp_runc.py's to_oci()."""
    cmd = [sys.executable, os.path.join(ROOT, "tests", "deploy", "seccomp_runc.py"), "oci", "--source-dir", ROOT]
    if default_action:
        cmd += ["--default-action", default_action]
    return json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)


def git_head():
    r = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                           text=True).stdout.strip()
    return r.stdout.strip() + ("+changes" if dirty else "")


def run_image(args, vmlinuz, mods, version):
    scenarios = [s for s in SCENARIO_ORDER if s in (args.scenario or ["fast-spike"])]
    contenders = list(CONTAINER_CONTENDERS)
    t0 = time.monotonic()
    try:
        info = build_image()
        rt_root, rt_debs = runtime_root()
    except (EnvironmentError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
        log(f"FAILED: {e}")
        return 1
    log(f"image {info['reference']} ({info.get('architecture')}) {info['digest']}, commit {info.get('revision')}; "
        f"runtime {' '.join(rt_debs)}")
    build_s = time.monotonic() - t0
    conf = {"VMT_MODE": "image", "VMT_CONTENDERS": " ".join(contenders), "VMT_SCENARIOS": " ".join(scenarios)}
    initrd = build_initramfs(mods, conf, {"workloads": build_workloads(), "files": {}}, tag="image")
    stage = initrd[:-len(".cpio.gz")]
    bundle = os.path.join(stage, "vmt", "ctr")
    rootfs = unpack_image(info, bundle)
    check_rootfs(rootfs)
    for c, default in CONTAINER_CONTENDERS.items():
        with open(os.path.join(bundle, f"{c}.json.in"), "w") as f:
            json.dump(container_spec(oci_seccomp(default)), f, indent=1)
    if PROBE_CALL in {n for r in oci_seccomp(None)["syscalls"] for n in r["names"]}:
        raise HarnessError(f"the profile allows {PROBE_CALL}: pick another call for the seccomp probe")
    probe = os.path.join(stage, "vmt", "probe")
    os.makedirs(os.path.join(probe, "rootfs", "bin"))
    shutil.copy2(guest_busybox(), os.path.join(probe, "rootfs", "bin", "busybox"))
    with open(os.path.join(probe, "config.json"), "w") as f:
        json.dump(probe_spec(oci_seccomp("SCMP_ACT_LOG")), f, indent=1)
    runc = os.path.join(rt_root, "usr", "sbin", "runc")
    os.makedirs(os.path.join(stage, "usr", "bin"), exist_ok=True)
    shutil.copy2(runc, os.path.join(stage, "usr", "bin", "runc"))
    for host, guest in closure(runc, [rt_root, arch()["sysroot"] or ""]):
        d = stage + guest
        os.makedirs(os.path.dirname(d), exist_ok=True)
        if not os.path.exists(d):
            shutil.copy2(os.path.realpath(host), d)
    initrd = repack_initramfs(stage, initrd, skip=("vmt/ctr/rootfs",))
    accel = choose_accel(args.accel, vmlinuz, build_initramfs(mods, {"VMT_MODE": "probe"}, {"workloads": []},
                                                              tag="probe"))
    slow = 1 if common.ARCH == "amd64" else 2
    timeout = args.timeout or (60 * slow + slow * len(contenders) * sum(BUDGET_S[s] for s in scenarios))
    logp = os.path.join(OUT, f"console-image{common.KTAG}.log")
    log(f"booting {version} ({accel}, hard timeout {timeout}s, console {logp}): {', '.join(scenarios)} for "
        f"{', '.join(contenders)}")

    t1 = time.monotonic()
    lines, status = boot(qemu_cmd(vmlinuz, initrd, build_scratch_disk(), accel, smp=args.smp), logp, timeout,
                         on_line=console_logger())
    vm_s = time.monotonic() - t1
    got = judged_results(lines, "?")
    results = []
    for c in contenders:
        mine = [r for r in got if r.get("contender") == c]
        results += mine + missing_results(mine, scenarios, c, status, logp)
    flavours = bpf_flavours(lines)
    failures = [f"{r['scenario']}/{r['contender']}: {'; '.join(r['failures'])}" for r in results if not r["passed"]]
    judge_paranoid_remedy(results, failures)
    probe = next((text for kind, text in markers(lines) if kind == "SECCOMP-PROBE"), None)
    m = re.match(r"records=(\d+)", probe or "")
    if not m or int(m.group(1)) < 1:
        failures.append(f"the seccomp probe ({PROBE_CALL} under SCMP_ACT_LOG) left no audit record in the guest's "
                        f"kernel log ({probe!r}): the runs' check for records could not have failed")
    if status != "done":
        failures.append(f"boot {status}")
    if not flavours["programs"]:
        failures.append("no BPF program reported by pressured in the container")
    print()
    print_table(results)
    if flavours["programs"]:
        print_flavours(flavours)
    print(f"  {info['reference']} {common.ARCH} under runc: VM boot to power-off {vm_s:.0f} s, image and bundle "
          f"{build_s:.0f} s")
    doc = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "command": " ".join([os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:]), "commit": git_head(),
           "kernel": version, "arch": common.ARCH, "accel": accel, "vm": {"memory_mib": 1024, "cpus": args.smp},
           "image": {k: info.get(k) for k in ("reference", "digest", "revision", "architecture")},
           "runtime": rt_debs, "seccomp_probe": probe, "vm_s": round(vm_s), "build_s": round(build_s), "status": status,
           "results": results, "bpf": flavours, "failures": failures, "passed": not failures, "console_log": logp}
    out = args.results if args.results_given else os.path.join(OUT, f"image-{common.ARCH}-results.json")
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
    log(f"results: {out}")
    if failures:
        log("FAILED: " + "; ".join(failures) + f" (console log {logp})")
        return 1
    log("PASSED")
    return 0
