"""The guest's binaries, the initramfs (with every library they load, checked before a boot) and the scratch disk."""
import glob
import gzip
import os
import re
import shutil
import subprocess

from . import common
from .common import HarnessError, OUT, PRESSURED_BUILD, ROOT, VMT, arch, arch_dir, log, run
from .kernel import GUEST_MODULES, resolve_modules


def need_tools():
    tools = ("busybox", "cpio", "gcc", "mkfs.ext4", "dpkg-deb", "apt-get", "readelf", arch()["qemu"], arch()["cc"],
             arch()["strip"])
    missing = [t for t in dict.fromkeys(tools) if shutil.which(t) is None]
    if missing:
        setup = os.path.join(ROOT, "scripts", "setup")
        log(f"missing tools {missing}: running {setup}")
        subprocess.run([setup], check=False)
        missing = [t for t in missing if shutil.which(t) is None]
    if missing:
        raise EnvironmentError(f"required tools not found: {', '.join(missing)} (run scripts/setup)")
    if arch()["sysroot"]:
        ensure_sysroot()
    if not os.path.exists(guest_busybox()) or ldd_libs(guest_busybox()):
        raise EnvironmentError(f"{guest_busybox()} is missing or not static: install busybox-static"
                               f"{'' if common.ARCH == 'amd64' else ' (scripts/sysroot ' + common.ARCH + ')'}")


def guest_busybox():
    """The guest's shell: this machine's busybox-static, or the one in the guest architecture's sysroot."""
    return os.path.join(arch()["sysroot"], "bin", "busybox") if arch()["sysroot"] else "/usr/bin/busybox"


def ensure_sysroot():
    """Builds (or checks) the guest architecture's sysroot with scripts/sysroot."""
    r = subprocess.run([os.path.join(ROOT, "scripts", "sysroot"), common.ARCH], capture_output=True, text=True,
                       timeout=1800)
    if r.returncode != 0:
        raise EnvironmentError(f"scripts/sysroot {common.ARCH} failed: {(r.stderr.strip().splitlines() or ['?'])[-1]}")


def bin_dir():
    return arch_dir(common.BIN_DIR)

def build_workloads():
    out_dir = bin_dir()
    os.makedirs(out_dir, exist_ok=True)
    cc = [arch()["cc"]] + ([f"--sysroot={arch()['sysroot']}"] if arch()["sysroot"] else [])
    srcs = sorted(glob.glob(os.path.join(VMT, "workloads", "*.c")))
    hdrs = glob.glob(os.path.join(VMT, "workloads", "*.h"))
    newest_hdr = max([os.path.getmtime(h) for h in hdrs] or [0])
    for src in srcs:
        name = os.path.splitext(os.path.basename(src))[0]
        dst = os.path.join(out_dir, name)
        if os.path.exists(dst) and os.path.getmtime(dst) >= max(os.path.getmtime(src), newest_hdr):
            continue
        log(f"building workload {name} ({cc[0]} -static)")
        run(cc + ["-static", "-O2", "-Wall", "-Wextra", "-Werror", "-o", dst, src])
    return [os.path.join(out_dir, os.path.splitext(os.path.basename(s))[0]) for s in srcs]


def build_pressured(explicit):
    """Builds pressured for the guest. Returns (path, how) or raises."""
    if explicit:
        if not os.access(explicit, os.X_OK):
            raise EnvironmentError(f"--pressured {explicit}: not executable")
        return explicit, "given"
    logf = os.path.join(OUT, "pressured-build.log")
    shared = common.shared_build_dir()
    if shared and os.environ.get("PRESSURED_VM_STATIC") != "1":
        log(f"building pressured in {shared} (PRESSURED_VM_BUILD_DIR; log: {logf})")
        with open(logf, "w") as lf:
            ok = subprocess.run(["ninja", "-C", shared, "-j2", "pressured"], stdout=lf,
                                stderr=subprocess.STDOUT).returncode == 0
        exe = os.path.join(shared, "pressured")
        if not ok or not os.access(exe, os.X_OK):
            raise EnvironmentError(f"pressured did not build in {shared} (see {logf})")
        return exe, "dynamic+ldd"
    vmlinux_h = os.path.join(OUT, "vmlinux.h")
    if not os.path.exists(vmlinux_h) and os.path.exists("/sys/kernel/btf/vmlinux"):
        # The host's BTF: the programs are CO-RE, so libbpf relocates them for the
        # guest's 6.1 kernel at load time.
        with open(vmlinux_h + ".tmp", "w") as f:
            run(["bpftool", "btf", "dump", "file", "/sys/kernel/btf/vmlinux", "format", "c"], stdout=f)
        os.rename(vmlinux_h + ".tmp", vmlinux_h)
    static_failed = os.path.join(OUT, "pressured-static-failed")
    # Debian ships prometheus-cpp and GnuTLS's p11-kit as shared libraries only, so
    # a fully static pressured does not link there: build the dynamic binary
    # (copied with its ldd libraries) unless PRESSURED_VM_STATIC=1 asks to try.
    order = ("ON", "OFF") if os.environ.get("PRESSURED_VM_STATIC") == "1" else ("OFF",)
    if len(order) > 1 and os.path.exists(static_failed) and os.path.getmtime(static_failed) > os.path.getmtime(
            os.path.join(ROOT, "CMakeLists.txt")):
        log(f"static link of pressured failed before ({open(static_failed).read().strip()}); using the dynamic "
            f"build (delete {static_failed} to retry)")
        order = ("OFF",)
    with open(logf, "w") as lf:
        for static in order:
            bdir = PRESSURED_BUILD if static == "ON" else PRESSURED_BUILD + "-dynamic"
            log(f"building pressured ({'static' if static == 'ON' else 'dynamic'}) in {bdir} (log: {logf})")
            cfg = ["cmake", "-S", ROOT, "-B", bdir, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
                   f"-DPRESSURED_STATIC={static}", "-DPRESSURED_BUILD_TESTS=OFF", "-DPRESSURED_BUILD_BENCH=OFF"]
            if os.path.exists(vmlinux_h):
                cfg.append(f"-DPRESSURED_VMLINUX_H={vmlinux_h}")
            r1 = subprocess.run(cfg, stdout=lf, stderr=subprocess.STDOUT)
            r2 = r1.returncode == 0 and subprocess.run(["ninja", "-C", bdir, "-j2", "pressured"], stdout=lf,
                                                       stderr=subprocess.STDOUT).returncode == 0
            exe = os.path.join(bdir, "pressured")
            if r2 and os.path.exists(exe):
                return exe, "static" if static == "ON" else "dynamic+ldd"
            log(f"  {'static' if static == 'ON' else 'dynamic'} build failed (see {logf})")
            if static == "ON":
                lf.flush()
                reason = "see " + logf
                with open(logf) as rf:
                    for line in rf:
                        if "attempted static link" in line or "cannot find -l" in line:
                            reason = line.strip()
                with open(static_failed, "w") as f:
                    f.write(reason + "\n")
    raise EnvironmentError(f"pressured did not build (see {logf})")


def ldd_libs(exe):
    """Host paths of the shared libraries `exe` loads: ldd for this machine's binaries; for a
    cross-built binary, its NEEDED closure looked up in the sysroot (ldd cannot run it)."""
    if arch()["sysroot"]:
        return sysroot_libs(exe)
    r = subprocess.run(["ldd", exe], capture_output=True, text=True)
    out = r.stdout + r.stderr
    if "not a dynamic executable" in out or "statically linked" in out:
        return []
    libs = []
    for line in out.splitlines():
        m = re.search(r"=>\s*(/\S+)", line) or re.match(r"\s*(/\S+)\s+\(", line)
        if m:
            libs.append(m.group(1))
    return libs


def sysroot_libs(exe):
    """The interpreter and NEEDED closure of a cross-built ELF file, as paths in the sysroot (the guest
    path is the part after the sysroot). Raises HarnessError naming a library the sysroot lacks."""
    root = arch()["sysroot"]
    libs, todo, seen = [], [exe], set()
    while todo:
        path = todo.pop()
        interp, needed = elf_dynamic(path)
        names = ([interp] if interp else []) + needed
        for name in names:
            if name in seen:
                continue
            seen.add(name)
            if name.startswith("/"):
                found = root + name if os.path.exists(root + name) else None
            else:
                found = next((os.path.join(root, d, name) for d in guest_lib_dirs()
                              if os.path.exists(os.path.join(root, d, name))), None)
            if not found:
                raise HarnessError(f"{name} (needed by {path}) is not in the sysroot {root} "
                                   f"(scripts/sysroot {common.ARCH} --force?)")
            libs.append(found)
            todo.append(os.path.realpath(found))
    return libs


def guest_paths(lib):
    """Where a library (a host path from ldd_libs) goes in the guest: its path and its real path,
    both relative to the sysroot for a cross-built guest."""
    root = arch()["sysroot"]
    paths = {lib, os.path.realpath(lib)}
    if root:
        real_root = os.path.realpath(root)
        paths = {p[len(root):] if p.startswith(root + "/") else p[len(real_root):] for p in paths}
    return paths


# Where the code's dlopen() calls live: the sonames are read from there, so the
# list has one home and a new dlopen reaches the initramfs without a second copy.
DLOPEN_SOURCES = os.path.join(ROOT, "userspace")


def dlopened_sonames(src=DLOPEN_SOURCES):
    """Sonames pressured's code passes to dlopen() (ldd cannot see them: libcurl is
    opened at the first HTTP request). Every dlopen must name a literal soname; one
    that does not is refused, since its library would silently be missing in the guest."""
    names, bad = set(), []
    for d, _, files in os.walk(src):
        for f in sorted(files):
            if not f.endswith((".cpp", ".hpp", ".h", ".c")):
                continue
            path = os.path.join(d, f)
            with open(path, encoding="utf-8") as fh:
                # A call marked "initramfs: not carried" on its line or the line
                # before opens an optional module of pressured's own (the gRPC
                # plugin transport) that no guest test loads.
                text = re.sub(r"initramfs: not carried[^\n]*\n[^\n]*\bdlopen\s*\(", "", fh.read())
                for arg in re.findall(r"\bdlopen\s*\(([^,)]*)", text):
                    m = re.fullmatch(r'\s*"([^"]+\.so(?:\.\d+)*)"\s*', arg)
                    if m:
                        names.add(m.group(1))
                    else:
                        bad.append(f"{os.path.relpath(path, ROOT)}: dlopen({arg.strip()})")
    if bad:
        raise HarnessError("dlopen() without a literal soname, so the initramfs cannot know which library to "
                           "carry: " + "; ".join(bad))
    return sorted(names)


def resolve_soname(soname):
    """The host path of a soname as the dynamic loader finds it (ldconfig's cache), or None."""
    if arch()["sysroot"]:
        return next((os.path.join(arch()["sysroot"], d, soname) for d in guest_lib_dirs()
                     if os.path.exists(os.path.join(arch()["sysroot"], d, soname))), None)
    r = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True)
    for line in r.stdout.splitlines():
        m = re.match(r"\s*(\S+) \(([^)]*)\) => (\S+)", line)
        if m and m.group(1) == soname and arch()["ldconfig_tag"] in m.group(2):
            return m.group(3)
    return None


_DLOPEN_LIBS = {}


def dlopen_libs():
    """Host paths of the libraries pressured dlopens, each with its own ldd closure."""
    if common.ARCH not in _DLOPEN_LIBS:
        libs = []
        for soname in dlopened_sonames():
            path = resolve_soname(soname)
            if path is None:
                raise HarnessError(f"{soname} (pressured dlopens it; see {os.path.relpath(DLOPEN_SOURCES, ROOT)}) "
                                   f"is not installed on the host{'' if common.ARCH == 'amd64' else ' sysroot'}, "
                                   f"so the guest cannot get it (scripts/setup)")
            libs += [path] + [l for l in ldd_libs(path) if l not in libs]
        _DLOPEN_LIBS[common.ARCH] = libs
    return list(_DLOPEN_LIBS[common.ARCH])


def guest_lib_dirs():
    """Where the guest's dynamic loader looks (Debian's glibc, no ld.so.cache in the initramfs)."""
    t = arch()["triplet"]
    return (f"lib/{t}", f"usr/lib/{t}", "lib", "usr/lib")


def elf_dynamic(path):
    """(interpreter or None, [NEEDED sonames]) of an ELF file; (None, []) when it is static."""
    r = subprocess.run(["readelf", "-d", "-l", "-W", path], capture_output=True, text=True)
    interp = re.search(r"\[Requesting program interpreter: ([^\]]+)\]", r.stdout)
    return (interp.group(1) if interp else None,
            re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", r.stdout))


def check_initramfs(stage, needs_of=(), skip=()):
    """Before the boot: every dynamic ELF file in the stage (and each of `needs_of`, host
    executables whose libraries only go in) finds its interpreter and every NEEDED library
    in the stage's loader directories, and pressured, when it is there, every library it
    dlopens. `skip`: directories (relative to the stage) that are roots of their own, such
    as a container's rootfs, checked apart. Raises HarnessError naming what is missing."""
    missing = []
    skipped = {os.path.join(stage, s) for s in skip}

    def find(soname):
        return any(os.path.exists(os.path.join(stage, d, soname)) for d in guest_lib_dirs())

    def check(label, path):
        interp, needed = elf_dynamic(path)
        if interp and not os.path.exists(stage + interp):
            missing.append(f"{interp} (interpreter of {label})")
        for soname in needed:
            if not find(soname) and not (interp and os.path.basename(interp) == soname):
                missing.append(f"{soname} (needed by {label})")

    for d, dirs, files in os.walk(stage):
        dirs[:] = [x for x in dirs if os.path.join(d, x) not in skipped]
        for f in files:
            p = os.path.join(d, f)
            if f.endswith(".ko") or os.path.islink(p):
                continue
            with open(p, "rb") as fh:
                if fh.read(4) != b"\x7fELF":
                    continue
            check("/" + os.path.relpath(p, stage), p)
    for exe in needs_of:
        check(exe, exe)
    if os.path.exists(os.path.join(stage, "usr", "bin", "pressured")):
        missing += [f"{s} (dlopened by /usr/bin/pressured)" for s in dlopened_sonames() if not find(s)]
    if missing:
        raise HarnessError(f"the initramfs {stage} lacks {len(missing)} librar{'y' if len(missing) == 1 else 'ies'} "
                           f"the guest would need: " + ", ".join(sorted(set(missing))))


def pressured_run_ready(exe):
    """True when `pressured run` is implemented (not the scaffold)."""
    try:
        r = subprocess.run([exe, "run", "--help"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False, "pressured run --help did not run"
    text = r.stdout + r.stderr
    if r.returncode != 0 or "not implemented" in text:
        return False, "pressured run not available (scaffold or --help failed)"
    return True, text


def copy_with_libs(stage, exe, dest, extra=()):
    os.makedirs(os.path.dirname(stage + dest), exist_ok=True)
    # Debug info stays on the host: the initramfs lives in the guest's RAM.
    if subprocess.run([arch()["strip"], "--strip-debug", "-o", stage + dest, exe]).returncode != 0:
        shutil.copy2(exe, stage + dest)
    os.chmod(stage + dest, 0o755)
    for lib in ldd_libs(exe) + list(extra):
        real = os.path.realpath(lib)
        for path in guest_paths(lib):
            d = stage + path
            os.makedirs(os.path.dirname(d), exist_ok=True)
            if not os.path.exists(d):
                shutil.copy2(real, d)


def build_initramfs(mods_dir, conf, binaries, tag="guest", modules=None):
    tag += common.KTAG
    stage = os.path.join(OUT, "initramfs-" + tag)
    shutil.rmtree(stage, ignore_errors=True)
    for d in ("bin", "sbin", "etc", "proc", "sys", "dev", "tmp", "run", "vmt/bin", "lib/modules", "usr/bin",
              "scratch", "root", "var/lib", "etc/oomd"):
        os.makedirs(os.path.join(stage, d), exist_ok=True)
    shutil.copy2(guest_busybox(), os.path.join(stage, "bin", "busybox"))
    os.symlink("busybox", os.path.join(stage, "bin", "sh"))
    shutil.copy2(os.path.join(VMT, "guest", "init"), os.path.join(stage, "init"))
    os.chmod(os.path.join(stage, "init"), 0o755)
    for f in glob.glob(os.path.join(VMT, "guest", "*.sh")):
        shutil.copy2(f, os.path.join(stage, "vmt", os.path.basename(f)))
    if mods_dir:
        mods, _ = resolve_modules(mods_dir, modules or GUEST_MODULES)
        for name, elf, _rel in mods:
            with open(os.path.join(stage, "lib", "modules", name + ".ko"), "wb") as f:
                f.write(elf)
        conf = dict(conf, VMT_MODULES=" ".join(n for n, _e, _r in mods))
    for b in binaries.get("workloads", []):
        shutil.copy2(b, os.path.join(stage, "vmt", "bin", os.path.basename(b)))
    if binaries.get("pressured"):
        copy_with_libs(stage, binaries["pressured"], "/usr/bin/pressured", extra=dlopen_libs())
    for name in ("earlyoom", "oomd"):
        if binaries.get(name):
            copy_with_libs(stage, binaries[name], "/usr/bin/" + name)
    for dest, exe in binaries.get("node_exes", {}).items():
        copy_with_libs(stage, exe, dest)
    for exe in binaries.get("node_libs_of", []):
        for lib in ldd_libs(exe):
            for path in guest_paths(lib):
                d = stage + path
                os.makedirs(os.path.dirname(d), exist_ok=True)
                if not os.path.exists(d):
                    shutil.copy2(os.path.realpath(lib), d)
    for name, text in binaries.get("files", {}).items():
        p = os.path.join(stage, name.lstrip("/"))
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(text)
    with open(os.path.join(stage, "etc", "vmtests.conf"), "w") as f:
        for k, v in conf.items():
            f.write(f"{k}='{v}'\n")
    return repack_initramfs(stage, os.path.join(OUT, f"initramfs-{tag}.cpio.gz"),
                            needs_of=binaries.get("node_libs_of", []))


def build_scratch_disk():
    """An ext4 image with a large pre-written file for the page-cache scenario.
    The guest opens it with snapshot=on, so the image stays pristine."""
    img = os.path.join(OUT, "scratch.img")
    if os.path.exists(img):
        return img
    seed = os.path.join(OUT, "scratch-seed")
    shutil.rmtree(seed, ignore_errors=True)
    os.makedirs(seed)
    log("creating scratch disk (ext4, 2 GiB, with a 1.2 GiB data file)")
    with open(os.path.join(seed, "big.dat"), "wb") as f:
        block = os.urandom(1 << 20)
        for i in range(1200):
            f.write(block[i % 251:] + block[:i % 251])
    tmp = img + ".tmp"
    run(["truncate", "-s", "2G", tmp])
    run(["mkfs.ext4", "-q", "-F", "-L", "vmtscratch", "-d", seed, tmp])
    os.rename(tmp, img)
    shutil.rmtree(seed)
    return img


def pressured_args_ok(help_text):
    need = ["--poll-interval", "--bpf", "--pod-file", "--eviction-hard", "--cgroup-driver", "--kubelet-config",
            "--kubelet-threshold-offset"]
    return [n for n in need if n not in help_text]


def repack_initramfs(stage, img, needs_of=(), skip=()):
    """Packs the stage as a gzipped cpio, once check_initramfs found nothing missing."""
    check_initramfs(stage, needs_of, skip)
    files = subprocess.run("find . -print0 | sort -z", shell=True, cwd=stage, capture_output=True).stdout
    cpio = subprocess.run(["cpio", "--null", "-o", "-H", "newc", "--quiet", "-R", "0:0"], input=files, cwd=stage,
                          capture_output=True, check=True).stdout
    with open(img, "wb") as f:
        f.write(gzip.compress(cpio, compresslevel=1))
    return img
