"""Debian cloud kernels (download, cache) and the kernel modules the initramfs loads."""
import glob
import gzip
import os
import re
import shutil
import subprocess

from . import common
from .common import ROOT, log, run


# Debian cloud kernels by series: the package names apt knows (the newest that
# downloads wins) and the suite that carries them (scripts/apt-extra has all).
KERNEL_SERIES = {
    "5.10": r"linux-image-5\.10\.0-(\d+)-cloud-amd64(-unsigned)?",          # bullseye(-security)
    "6.1": r"linux-image-6\.1\.0-(\d+)-cloud-amd64(-unsigned)?",            # bookworm(-security)
    "6.12": r"linux-image-6\.12\.(\d+)\+deb12(?:\.(\d+))?-cloud-amd64(-unsigned)?",  # bookworm-backports/-security
}
KERNEL_ORDER = list(KERNEL_SERIES)
DEFAULT_KERNEL = "6.1"

# arm64 guests (--arch arm64): what `linux-image-cloud-arm64` of bookworm
# depends on. Downloaded as PKG:arm64 (scripts/apt-extra knows arm64); the
# cache directory is the package name, which carries the architecture.
KERNEL_SERIES_BY_ARCH = {
    "amd64": KERNEL_SERIES,
    "arm64": {"6.1": r"linux-image-6\.1\.0-(\d+)-cloud-arm64(-unsigned)?"},           # bookworm(-security)
}


def series_patterns():
    """The kernel series of the guest's architecture (common.ARCH)."""
    return KERNEL_SERIES_BY_ARCH[common.ARCH]

# Extracted kernel packages outlive the clone (a fresh clone on the same machine
# does not download them again): PRESSURED_KERNEL_CACHE, else
# $XDG_CACHE_HOME/pressured/vmtests-kernels (~/.cache/...).
KERNEL_CACHE = os.environ.get("PRESSURED_KERNEL_CACHE") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "pressured",
    "vmtests-kernels")
APT_EXTRA = os.path.join(ROOT, "scripts", "apt-extra")


def kernel_version_key(name):
    """Newest first by the numbers in the name; the signed image before -unsigned (same kernel)."""
    return (tuple(int(x) for x in re.findall(r"\d+", name.replace("-unsigned", ""))), not name.endswith("-unsigned"))


def kernel_candidates(series):
    """Package names of a series that apt (scripts/apt-extra) knows, newest first."""
    pattern = series_patterns()[series]
    r = subprocess.run([APT_EXTRA, "cache", "search", "--names-only", "^" + pattern.split("(")[0]],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise EnvironmentError(f"scripts/apt-extra cache search failed: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
    names = {line.split(" ", 1)[0] for line in r.stdout.splitlines()}
    return sorted((n for n in names if re.fullmatch(pattern, n)), key=kernel_version_key, reverse=True)


def cached_kernel(pkg):
    """(vmlinuz, modules dir or None, version) of an extracted package in the cache, or None."""
    root = os.path.join(KERNEL_CACHE, pkg, "root")
    found = sorted(glob.glob(os.path.join(root, "boot", "vmlinuz-*")))
    if not found:
        return None
    version = os.path.basename(found[-1])[len("vmlinuz-"):]
    mods = os.path.join(root, "lib", "modules", version)
    return found[-1], mods if os.path.isdir(mods) else None, version


def fetch_kernel(pkg):
    """Downloads one package with scripts/apt-extra and extracts it into the cache (atomically: a
    concurrent run sees either nothing or the whole tree)."""
    os.makedirs(KERNEL_CACHE, exist_ok=True)
    tmp = os.path.join(KERNEL_CACHE, f".{pkg}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    try:
        log(f"downloading kernel package {pkg} (scripts/apt-extra; cache {KERNEL_CACHE})")
        qualified = pkg if common.ARCH == "amd64" else f"{pkg}:{common.ARCH}"
        r = subprocess.run([APT_EXTRA, "download", qualified], cwd=tmp, capture_output=True, text=True, timeout=900)
        debs = glob.glob(os.path.join(tmp, f"{pkg}_*.deb"))
        if r.returncode != 0 or not debs:
            err = (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]
            log(f"  {pkg}: not downloadable ({err})")
            return None
        run(["dpkg-deb", "-x", debs[0], os.path.join(tmp, "root")])
        with open(os.path.join(tmp, "package.txt"), "w") as f:
            f.write(os.path.basename(debs[0]) + "\n")
        os.unlink(debs[0])
        dest = os.path.join(KERNEL_CACHE, pkg)
        try:
            os.rename(tmp, dest)
        except OSError:
            if not cached_kernel(pkg):  # another run extracted it first: keep theirs
                raise
        return cached_kernel(pkg)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def find_series_kernel(series):
    """The newest package of a series: from the cache when apt offers nothing newer; the newest
    cached one (said) when apt cannot be asked (offline)."""
    try:
        cands = kernel_candidates(series)
    except (EnvironmentError, subprocess.TimeoutExpired) as e:
        cached = sorted((d for d in os.listdir(KERNEL_CACHE) if re.fullmatch(series_patterns()[series], d)),
                        key=kernel_version_key, reverse=True) if os.path.isdir(KERNEL_CACHE) else []
        for pkg in cached:
            k = cached_kernel(pkg)
            if k:
                log(f"apt not available ({e}); using the newest cached {series} kernel {pkg}")
                return k + (pkg,)
        raise
    if not cands:
        raise EnvironmentError(f"apt knows no {series} cloud kernel package matching {series_patterns()[series]} "
                               f"(scripts/apt-extra update?)")
    for pkg in cands:
        k = cached_kernel(pkg) or fetch_kernel(pkg)
        if k:
            return k + (pkg,)
    raise EnvironmentError(f"no {series} cloud kernel package could be downloaded (tried {', '.join(cands[:4])})")


def find_kernel(explicit):
    """Returns (vmlinuz, modules_dir or None, version, series or None). `explicit`: a series
    (5.10, 6.1, 6.12: the newest Debian cloud package of it), a vmlinuz path, or None (6.1)."""
    explicit = explicit or DEFAULT_KERNEL
    if explicit in series_patterns():
        vmlinuz, mods, version, pkg = find_series_kernel(explicit)
        return vmlinuz, mods, version, explicit
    if not os.path.isfile(explicit):
        raise EnvironmentError(f"--kernel {explicit}: neither a series of {common.ARCH} "
                               f"({', '.join(series_patterns())}) nor a file")
    mods = None
    m = re.search(r"vmlinuz-(.+)$", explicit)
    version = m.group(1) if m else "custom"
    if m:
        cand = os.path.join(os.path.dirname(os.path.dirname(explicit)), "lib", "modules", version)
        if os.path.isdir(cand):
            mods = cand
    return explicit, mods, version, None


# What the guest needs from modules: the virtio PCI transport and the block
# driver (the scratch disk). Each is either built in (modules.builtin) or a
# module, compressed or not; their dependencies come from the modules'
# own .modinfo "depends=" (the package ships no modules.dep: depmod makes it
# at install time).
GUEST_MODULES = ["virtio_pci", "virtio_blk"]

# The real node also needs its network (the apiserver's forwarding) and overlayfs (containerd).
NODE_MODULES = ["virtio_net", "overlay"]


def read_module(path):
    """A module's ELF bytes; .ko.xz and .ko.zst are decompressed here (busybox insmod cannot)."""
    if path.endswith(".xz"):
        import lzma
        with lzma.open(path) as f:
            return f.read()
    if path.endswith(".zst"):
        r = subprocess.run(["zstd", "-dc", path], capture_output=True)
        if r.returncode != 0:
            raise EnvironmentError(f"zstd -dc {path} failed (install zstd): {r.stderr.decode(errors='replace')}")
        return r.stdout
    if path.endswith(".gz"):
        with gzip.open(path) as f:
            return f.read()
    with open(path, "rb") as f:
        return f.read()


def module_depends(elf):
    m = re.search(rb"\x00depends=([^\x00]*)\x00", b"\x00" + elf)
    return [d.decode().replace("-", "_") for d in m.group(1).split(b",") if d] if m else []


def resolve_modules(mods_dir, wanted):
    """[(name, elf bytes)] in load order (dependencies first) for `wanted` and what they need,
    skipping built-ins. Raises EnvironmentError naming a module that is neither built in nor found."""
    builtin = set()
    bpath = os.path.join(mods_dir, "modules.builtin")
    if os.path.exists(bpath):
        with open(bpath) as f:
            builtin = {os.path.basename(l.strip()).split(".ko")[0].replace("-", "_") for l in f if l.strip()}
    files = {}
    for p in glob.glob(os.path.join(mods_dir, "kernel", "**", "*.ko*"), recursive=True):
        files.setdefault(os.path.basename(p).split(".ko")[0].replace("-", "_"), p)
    order, seen, builtin_used = [], set(), []

    def visit(name, chain):
        if name in seen:
            return
        seen.add(name)
        if name in builtin:
            builtin_used.append(name)
            return
        path = files.get(name)
        if not path:
            raise EnvironmentError(f"kernel module {name} (needed for {' <- '.join(chain)}) is neither built into "
                                   f"the kernel (modules.builtin) nor under {mods_dir} as .ko, .ko.xz or .ko.zst")
        elf = read_module(path)
        for dep in module_depends(elf):
            visit(dep, chain + [dep])
        order.append((name, elf, os.path.relpath(path, mods_dir)))

    for w in wanted:
        visit(w, [w])
    return order, builtin_used
