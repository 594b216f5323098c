#!/usr/bin/env python3
"""`pressured install-seccomp --dir DIR` (the DaemonSet's init container) on a fake kubelet seccomp
directory holding what someone planted there:

  - a fresh directory: profiles/pressured.json installed, mode 0644, profiles/ marked as made by
    pressured (what `pressured uninstall` needs to remove it again); a second run finds it up to date;
  - a symbolic link at the temporary name profiles/pressured.json.tmp pointing at a file outside:
    the outside file is neither written nor chmod'ed, and the profile is installed;
  - a FIFO at profiles/pressured.json: refused with exit 1, without waiting for a writer (the init
    container must not hang);
  - a symbolic link at profiles/ (a directory elsewhere): refused with exit 1, nothing written there;
  - a symbolic link at profiles/pressured.json: refused, its target untouched.
Needs the pressured binary (an argument)."""
import argparse
import os
import stat
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import log  # noqa: E402

MARKER = ".made-by-pressured"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pressured")
    a = ap.parse_args()
    failures = []

    def check(ok, what):
        if not ok:
            failures.append(what)
            log(f"FAIL: {what}")

    def install(d, timeout=30):
        try:
            return subprocess.run([a.pressured, "install-seccomp", "--dir", d], capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def outside_file(root):
        victim = os.path.join(root, "victim")
        with open(victim, "w") as f:
            f.write("not pressured's\n")
        os.chmod(victim, 0o600)
        return victim

    def untouched(victim):
        with open(victim) as f:
            text = f.read()
        return text == "not pressured's\n" and stat.S_IMODE(os.stat(victim).st_mode) == 0o600

    with tempfile.TemporaryDirectory(prefix="pressured-install-seccomp-") as root:
        # Fresh.
        d = os.path.join(root, "fresh")
        os.makedirs(d)
        r = install(d)
        prof = os.path.join(d, "profiles", "pressured.json")
        check(r is not None and r.returncode == 0 and os.path.isfile(prof), f"fresh install: {r and r.stderr}")
        check(os.path.isfile(prof) and stat.S_IMODE(os.stat(prof).st_mode) == 0o644, "the profile is not mode 0644")
        check(os.path.isfile(os.path.join(d, "profiles", MARKER)), "profiles/ made without pressured's marker")
        r = install(d)
        check(r is not None and r.returncode == 0 and "up to date" in r.stderr, f"second run: {r and r.stderr}")

        # A link at the temporary name.
        d = os.path.join(root, "tmp-link")
        os.makedirs(os.path.join(d, "profiles"))
        victim = outside_file(root)
        os.symlink(victim, os.path.join(d, "profiles", "pressured.json.tmp"))
        r = install(d)
        check(untouched(victim), "install-seccomp wrote or chmod'ed a file through a link at the temporary name")
        check(r is not None and r.returncode == 0 and os.path.isfile(os.path.join(d, "profiles", "pressured.json"))
              and not os.path.islink(os.path.join(d, "profiles", "pressured.json")),
              f"install with a link at the temporary name: {r and r.stderr}")

        # A FIFO at the target.
        d = os.path.join(root, "fifo")
        os.makedirs(os.path.join(d, "profiles"))
        os.mkfifo(os.path.join(d, "profiles", "pressured.json"))
        r = install(d, timeout=20)
        # (subprocess.run kills a child blocked in the FIFO's open at the timeout.)
        check(r is not None, "install-seccomp hung on a FIFO at profiles/pressured.json")
        if r is not None:
            check(r.returncode == 1 and "FIFO" in r.stderr, f"FIFO at the target: exit {r.returncode}: {r.stderr}")
            check(stat.S_ISFIFO(os.lstat(os.path.join(d, "profiles", "pressured.json")).st_mode),
                  "the FIFO was replaced")

        # A link at profiles/.
        d = os.path.join(root, "dir-link")
        os.makedirs(d)
        elsewhere = os.path.join(root, "elsewhere")
        os.makedirs(elsewhere)
        os.symlink(elsewhere, os.path.join(d, "profiles"))
        r = install(d)
        check(r is not None and r.returncode == 1 and "symbolic link" in r.stderr,
              f"link at profiles/: exit {r and r.returncode}: {r and r.stderr}")
        check(os.listdir(elsewhere) == [], f"install-seccomp wrote through the link at profiles/: {os.listdir(elsewhere)}")

        # A link at the target.
        d = os.path.join(root, "file-link")
        os.makedirs(os.path.join(d, "profiles"))
        victim2 = os.path.join(root, "victim2")
        with open(victim2, "w") as f:
            f.write("not pressured's\n")
        os.chmod(victim2, 0o600)
        os.symlink(victim2, os.path.join(d, "profiles", "pressured.json"))
        r = install(d)
        check(r is not None and r.returncode == 1, f"link at the target: exit {r and r.returncode}: {r and r.stderr}")
        check(untouched(victim2), "the link's target was written or chmod'ed")

    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    log("install-seccomp writes only its own file, never through what is planted beside it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
