#!/usr/bin/env python3
"""deploy/seccomp/pressured.json holds for every architecture the image is built for.

The profile is one allow list of syscall names for all nodes; a runtime resolves each
name for each architecture the profile lists (and for its own). The list was first made
on x86-64, where glibc still calls the legacy syscalls (open, stat, poll, epoll_wait,
pipe, dup2, fork...). arm64 has none of them (its table is the generic one of
include/uapi/asm-generic/unistd.h): there glibc makes the *at, 2, p and 64 variants
instead, and a name that does not exist on an architecture simply matches nothing there.
This test, with libseccomp's own syscall tables (the ones runc resolves names with):
  - every architecture scripts/image builds an image for is listed in the profile;
  - every name resolves on at least one listed architecture (no typo passes silently);
  - every allowed name that one image architecture lacks has, in the profile, the call
    glibc makes there instead (ON_GENERIC below), and that call exists there; an allowed
    legacy name without an entry there fails, so the next one added gets its decision.
That the list is complete for what pressured does on arm64 is shown by running it from
the arm64 image under this profile on an arm64 kernel (vmtests/run --arch arm64
--pressured-image; docs/kernels.md, "arm64"). Needs Debian's python3-seccomp.
"""
import argparse
import importlib.machinery
import importlib.util
import json
import os
import sys

# Debian's libseccomp binding is built for Debian's interpreter; another python3 first on
# PATH (a pyenv) does not see it.
try:
    import seccomp
except ImportError:
    if os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3") and os.access("/usr/bin/python3",
                                                                                               os.X_OK):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    print("FAIL: python3-seccomp (libseccomp's Python binding) is missing: run scripts/setup", flush=True)
    sys.exit(1)

# Debian architecture (scripts/image's ARCHES) -> the libseccomp architecture of its syscalls.
SECCOMP_ARCH = {"amd64": "SCMP_ARCH_X86_64", "arm64": "SCMP_ARCH_AARCH64"}

# Where an architecture has only the generic table (arm64), glibc 2.36 implements each
# legacy call with another one (sysdeps/unix/sysv/linux/<call>.c: "#ifdef __NR_<legacy>
# ... #else <generic>"). legacy name -> the generic calls glibc makes instead (all of
# them must be allowed).
ON_GENERIC = {
    "access": ["faccessat"],
    "alarm": ["setitimer"],
    "arch_prctl": [],  # x86 only (TLS setup); arm64 sets TPIDR_EL0 without a syscall
    "chmod": ["fchmodat"],
    "dup2": ["dup3"],
    "epoll_create": ["epoll_create1"],
    "epoll_wait": ["epoll_pwait"],
    "eventfd": ["eventfd2"],
    "getdents": ["getdents64"],
    "getpgrp": ["getpgid"],
    "inotify_init": ["inotify_init1"],
    "link": ["linkat"],
    "lstat": ["newfstatat"],
    "mkdir": ["mkdirat"],
    "open": ["openat"],
    "pause": ["rt_sigsuspend"],
    "pipe": ["pipe2"],
    "poll": ["ppoll"],
    "readlink": ["readlinkat"],
    "rename": ["renameat"],
    "rmdir": ["unlinkat"],
    "select": ["pselect6"],
    "signalfd": ["signalfd4"],
    "stat": ["newfstatat"],
    "symlink": ["symlinkat"],
    "unlink": ["unlinkat"],
    "vfork": ["clone"],
}


def load_image_arches(source_dir):
    """scripts/image's ARCHES (the architectures it builds images for), read from the script."""
    path = os.path.join(source_dir, "scripts", "image")
    loader = importlib.machinery.SourceFileLoader("pressured_image_script", path)
    spec = importlib.util.spec_from_loader(loader.name, loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return list(mod.ARCHES)


def resolves(arch, name):
    """True when `name` is a syscall of libseccomp architecture `arch` (SCMP_ARCH_...)."""
    try:
        return seccomp.resolve_syscall(getattr(seccomp.Arch, arch[len("SCMP_ARCH_"):]), name) >= 0
    except (ValueError, RuntimeError):
        return False


def check(profile, image_arches):
    """The failures (strings) of the profile against the image's architectures."""
    failures = []
    listed = profile.get("architectures", [])
    bad_arch = [a for a in listed if not a.startswith("SCMP_ARCH_") or not hasattr(seccomp.Arch, a[10:])]
    if bad_arch:
        failures.append(f"architectures libseccomp does not know: {bad_arch}")
    listed = [a for a in listed if a not in bad_arch]
    allowed = sorted({n for rule in profile.get("syscalls", []) if rule.get("action") == "SCMP_ACT_ALLOW"
                      for n in rule.get("names", [])})
    for deb in image_arches:
        want = SECCOMP_ARCH.get(deb)
        if want is None:
            failures.append(f"scripts/image builds {deb}, which this test cannot map to a libseccomp architecture "
                            f"(add it to SECCOMP_ARCH, and the profile's architectures)")
        elif want not in listed:
            failures.append(f"scripts/image builds {deb}, but the profile does not list {want} ({listed})")
    for name in allowed:
        if not any(resolves(a, name) for a in listed):
            failures.append(f"{name!r} is a syscall of none of the listed architectures {listed}")
    for deb in image_arches:
        arch = SECCOMP_ARCH.get(deb)
        if arch is None or arch not in listed:
            continue
        for name in allowed:
            if resolves(arch, name):
                continue
            if name not in ON_GENERIC:
                failures.append(f"{name!r} does not exist on {deb} ({arch}) and ON_GENERIC does not say which call "
                                f"glibc makes there instead")
                continue
            for instead in ON_GENERIC[name]:
                if instead not in allowed:
                    failures.append(f"{name!r} does not exist on {deb}: glibc calls {instead!r} there, which the "
                                    f"profile does not allow")
                elif not resolves(arch, instead):
                    failures.append(f"{instead!r} (glibc's {name!r} on {deb}) is not a syscall of {arch} either")
    return failures


def self_test():
    """The checks can fail: profiles with a known fault each give the failure they should."""
    base = {"architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_AARCH64"],
            "syscalls": [{"names": ["openat", "read", "open", "ppoll"], "action": "SCMP_ACT_ALLOW"}]}
    cases = [
        (base, ["amd64", "arm64"], None),
        (dict(base, architectures=["SCMP_ARCH_X86_64"]), ["amd64", "arm64"], "does not list SCMP_ARCH_AARCH64"),
        (dict(base, syscalls=[{"names": ["open", "read"], "action": "SCMP_ACT_ALLOW"}]), ["amd64", "arm64"],
         "glibc calls 'openat' there"),
        (dict(base, syscalls=[{"names": ["openat", "poll"], "action": "SCMP_ACT_ALLOW"}]), ["amd64", "arm64"],
         "glibc calls 'ppoll' there"),
        (dict(base, syscalls=[{"names": ["openat", "opne"], "action": "SCMP_ACT_ALLOW"}]), ["amd64"],
         "'opne' is a syscall of none"),
        (dict(base, syscalls=[{"names": ["openat", "fork"], "action": "SCMP_ACT_ALLOW"}]), ["amd64", "arm64"],
         "ON_GENERIC does not say"),
        (base, ["amd64", "riscv64"], "cannot map to a libseccomp architecture"),
    ]
    bad = []
    for profile, arches, want in cases:
        got = check(profile, arches)
        if (want is None and got) or (want is not None and not any(want in f for f in got)):
            bad.append(f"expected {want or 'no failure'!r}, got {got}")
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source-dir", default=os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
    args = ap.parse_args()
    failures = [f"self-test: {f}" for f in self_test()]
    with open(os.path.join(args.source_dir, "deploy", "seccomp", "pressured.json")) as f:
        profile = json.load(f)
    arches = load_image_arches(args.source_dir)
    failures += check(profile, arches)
    names = sorted({n for r in profile["syscalls"] for n in r["names"]})
    for deb in arches:
        arch = SECCOMP_ARCH.get(deb)
        if arch:
            print(f"{deb} ({arch}): {sum(resolves(arch, n) for n in names)} of the {len(names)} names exist there",
                  flush=True)
    for f in failures:
        print(f"FAIL: {f}", flush=True)
    if failures:
        return 1
    print(f"profile architectures {profile['architectures']} cover scripts/image's {arches}; every legacy name "
          f"has its generic call allowed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
