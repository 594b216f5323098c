#!/usr/bin/env python3
"""The OCI image scripts/image builds: reproducible, and exactly what the Release binary needs.

  1. Two builds of the same binary at the same commit give the same manifest digest
     (and the same SBOM); the oci-archive holds that manifest (skopeo).
  2. Contents: no shell and no executable but pressured; nothing of the build host
     (/etc/hostname, /etc/resolv.conf, apt state, /dev nodes); every file is owned by a
     Debian package of the image's dpkg status or is one scripts/image writes itself;
     /etc/passwd, /etc/group and a CA bundle are there.
  3. Every NEEDED library and every soname pressured dlopen()s (libcurl) resolves inside
     the rootfs with the rootfs's own loader (--inhibit-cache --library-path: a library
     found on the build host instead shows up as a path outside the rootfs), and the
     binary runs in a chroot of it (--version, install-seccomp).
  4. The SPDX SBOM lists every package of the status file with its version.
  5. The manifest carries the OCI annotations source, revision (this commit), version
     (the binary's) and created (the commit time); config and history are dated the same.
  6. The compressed image is at most 30 MiB.
The checks are run against broken inputs too (they must be able to fail).
As root a missing mmdebstrap/umoci/skopeo is a failure; otherwise a loud skip (77).
"""

import argparse
import datetime
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import log, skip_or_fail  # noqa: E402

MAX_COMPRESSED = 30 * 2**20
SHELLS = {"sh", "bash", "dash", "ash", "busybox", "zsh", "ksh", "mksh", "rbash", "csh", "tcsh", "perl", "python3"}
HOST_FILES = {"etc/hostname", "etc/resolv.conf", "etc/hosts", "etc/apt", "var/lib/apt", "var/cache/apt",
              "etc/fstab", "etc/machine-id"}


def load_image_module(src):
    loader = importlib.machinery.SourceFileLoader("scripts_image", os.path.join(src, "scripts", "image"))
    spec = importlib.util.spec_from_loader("scripts_image", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def build(src, out, build_dir):
    r = subprocess.run([os.path.join(src, "scripts", "image"), "--out", out, "--build-dir", build_dir],
                       capture_output=True, text=True, timeout=1500)
    sys.stdout.write(r.stderr[-3000:])
    if r.returncode != 0:
        raise AssertionError(f"scripts/image failed (exit {r.returncode})")
    with open(os.path.join(out, "image.json")) as f:
        return json.load(f)


def blob(layout, digest):
    return os.path.join(layout, "blobs", *digest.split(":"))


def read_image(layout):
    with open(os.path.join(layout, "index.json")) as f:
        index = json.load(f)
    desc = index["manifests"][0]
    with open(blob(layout, desc["digest"]), "rb") as f:
        raw = f.read()
    manifest = json.loads(raw)
    with open(blob(layout, manifest["config"]["digest"])) as f:
        config = json.load(f)
    return desc, raw, manifest, config


def layer_entries(layout, manifest, errors):
    """{path: TarInfo} of all layers in order (a later layer overrides), after checking their digests."""
    entries = {}
    for layer in manifest["layers"]:
        path = blob(layout, layer["digest"])
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        if "sha256:" + h.hexdigest() != layer["digest"]:
            errors.append(f"layer {layer['digest']} does not match its blob")
        with tarfile.open(path, "r:*") as t:
            for ti in t.getmembers():
                entries[ti.name.lstrip("./") if ti.name not in (".", "./") else ""] = ti
    entries.pop("", None)
    return entries


def check_contents(entries, owned, own_files, errors):
    """owned: every path some package's .list names; own_files: what scripts/image writes itself."""
    executables = []
    for name, ti in entries.items():
        base = name.rsplit("/", 1)[-1]
        if base in SHELLS:
            errors.append(f"{name}: a shell or interpreter in the image")
        if ti.isdev() or name.startswith("dev/"):
            errors.append(f"{name}: /dev content in the image")
        for h in HOST_FILES:
            if name == h or name.startswith(h + "/"):
                errors.append(f"{name}: build host or bootstrap file in the image")
        if ti.isfile() and ti.mode & 0o111 and not any(p.startswith("lib") for p in name.split("/")[:-1]):
            executables.append(name)
        if "/" + name not in owned and "/" + name not in own_files and \
                not name.startswith("var/lib/dpkg/info/") and \
                not any(o.startswith("/" + name + "/") for o in own_files):
            errors.append(f"{name}: owned by no package and not written by scripts/image")
    if sorted(executables) != ["usr/local/bin/pressured"]:
        errors.append(f"executables outside library directories: {sorted(executables)} (only pressured expected)")
    for need in ("etc/passwd", "etc/group", "etc/ssl/certs/ca-certificates.crt", "var/lib/dpkg/status"):
        if need not in entries or not entries[need].isfile():
            errors.append(f"{need} missing")


def loader_list(root, target):
    """(resolved paths, problems) of target's libraries as the rootfs's loader finds them."""
    libdirs = ":".join(os.path.join(root, d) for d in ("lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu"))
    r = subprocess.run([os.path.join(root, "lib64/ld-linux-x86-64.so.2"), "--inhibit-cache", "--library-path",
                        libdirs, "--list", target], capture_output=True, text=True, timeout=60)
    problems, paths = [], []
    if r.returncode != 0:
        problems.append(f"loader --list {target}: exit {r.returncode}: {(r.stdout + r.stderr).strip()[-300:]}")
    for line in r.stdout.splitlines():
        if "not found" in line:
            problems.append(f"{os.path.relpath(target, root)}: {line.strip()}")
        m = re.match(r"\s*(\S+) => (\S+) \(", line)
        if m:
            paths.append(m.group(2))
            # Not realpath: the rootfs's symlinks are absolute (/lib64/ld-linux... -> /lib/...).
            if not os.path.normpath(m.group(2)).startswith(os.path.normpath(root) + "/"):
                problems.append(f"{os.path.relpath(target, root)}: {m.group(1)} resolves to {m.group(2)}, "
                                f"outside the image")
    return paths, problems


def find_soname(root, soname):
    for d in ("lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu", "lib", "usr/lib"):
        p = os.path.join(root, d, soname)
        if os.path.exists(p):
            return p
    return None


def parse_status(text):
    pkgs = {}
    for stanza in text.split("\n\n"):
        f = dict(re.findall(r"^([A-Za-z-]+): (.*)$", stanza, re.M))
        if f.get("Package"):
            pkgs[f["Package"]] = f.get("Version")
    return pkgs


def check_sbom(sbom, status, errors):
    listed = {p["name"]: p.get("versionInfo") for p in sbom.get("packages", [])
              if any(r.get("referenceLocator", "").startswith("pkg:deb/") for r in p.get("externalRefs", []))}
    for pkg, ver in status.items():
        if pkg not in listed:
            errors.append(f"SBOM lacks {pkg}")
        elif listed[pkg] != ver:
            errors.append(f"SBOM lists {pkg} {listed[pkg]}, the image has {ver}")
    for pkg in set(listed) - set(status):
        errors.append(f"SBOM lists {pkg}, which the image's dpkg status does not")
    if sbom.get("spdxVersion") != "SPDX-2.3":
        errors.append(f"SBOM spdxVersion {sbom.get('spdxVersion')!r}")


def check_annotations(manifest, config, revision, version, created, errors):
    ann = manifest.get("annotations", {})
    want = {"org.opencontainers.image.source": None, "org.opencontainers.image.revision": revision,
            "org.opencontainers.image.version": version, "org.opencontainers.image.created": created}
    for k, v in want.items():
        if not ann.get(k):
            errors.append(f"annotation {k} missing")
        elif v is not None and ann[k] != v:
            errors.append(f"annotation {k} is {ann[k]!r}, expected {v!r}")
    if config.get("created") != created:
        errors.append(f"config created {config.get('created')!r}, expected {created}")
    for h in config.get("history", []):
        if h.get("created") != created:
            errors.append(f"history entry created {h.get('created')!r}, expected {created}")


def self_test(entries, owned, own_files, status, sbom):
    """Each check rejects a broken image."""
    problems = []
    bad = dict(entries)
    for extra in ("bin/sh", "etc/resolv.conf", "usr/bin/stray"):
        ti = tarfile.TarInfo(extra)
        ti.mode = 0o755
        bad[extra] = ti
        e = []
        check_contents(bad, owned, own_files, e)
        if not e:
            problems.append(f"self-test: an image with {extra} passed the contents check")
        del bad[extra]
    e = []
    check_sbom({"spdxVersion": "SPDX-2.3", "packages": [p for p in sbom["packages"]
                                                        if p["name"] != sorted(status)[0]]}, status, e)
    if not e:
        problems.append("self-test: an SBOM lacking a package passed")
    e = []
    check_annotations({"annotations": {}}, {}, "r", "v", "c", e)
    if not e:
        problems.append("self-test: a manifest without annotations passed")
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--build-dir", required=True, help="the Release build directory scripts/image uses")
    ap.add_argument("--work", required=True, help="scratch directory (removed at the end)")
    args = ap.parse_args()
    src = os.path.abspath(args.source_dir)
    for tool in ("mmdebstrap", "umoci", "skopeo"):
        if not shutil.which(tool):
            skip_or_fail(f"{tool} (scripts/setup installs it)", fail_as_root=True)
    img = load_image_module(src)
    errors = []
    work = os.path.abspath(args.work)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    try:
        a = build(src, os.path.join(work, "a"), args.build_dir)
        b = build(src, os.path.join(work, "b"), args.build_dir)
        log(f"digests {a['digest']} {b['digest']}")
        if a["digest"] != b["digest"]:
            errors.append(f"two builds of the same commit differ: {a['digest']} vs {b['digest']}")
        with open(a["sbom"], "rb") as f1, open(b["sbom"], "rb") as f2:
            if f1.read() != f2.read():
                errors.append("two builds give different SBOMs")

        desc, raw, manifest, config = read_image(a["layout"])
        if "sha256:" + hashlib.sha256(raw).hexdigest() != a["digest"]:
            errors.append("the layout's manifest does not hash to the reported digest")
        r = subprocess.run(["skopeo", "inspect", "--raw", f"oci-archive:{a['archive']}"], capture_output=True,
                           timeout=120)
        if r.returncode != 0 or "sha256:" + hashlib.sha256(r.stdout).hexdigest() != a["digest"]:
            errors.append(f"the oci-archive does not hold manifest {a['digest']}: {r.stderr.decode()[-300:]}")

        entries = layer_entries(a["layout"], manifest, errors)
        root = a["rootfs"]
        owned = set()
        info = os.path.join(root, "var/lib/dpkg/info")
        for f in os.listdir(info):
            with open(os.path.join(info, f)) as fh:
                owned.update(line.strip() for line in fh)
        own_files = set(img.OWN_FILES)
        check_contents(entries, owned, own_files, errors)

        # The layers, unpacked: what a runtime would run.
        rootfs = os.path.join(work, "unpacked")
        os.makedirs(rootfs)
        for layer in manifest["layers"]:
            subprocess.run(["tar", "-xf", blob(a["layout"], layer["digest"]), "-C", rootfs, "--numeric-owner"],
                           check=True)
        binary = os.path.join(rootfs, "usr/local/bin/pressured")
        _, problems = loader_list(rootfs, binary)
        errors += problems
        sonames, bad = img.dlopened_sonames(src)
        errors += [f"dlopen with a computed name: {x}" for x in bad]
        if not sonames:
            errors.append("scripts/image found no dlopen()ed library in userspace/ (libcurl is one)")
        for so in sonames:
            p = find_soname(rootfs, so)
            if not p:
                errors.append(f"{so} (dlopen()ed by pressured) is not in the image")
                continue
            _, problems = loader_list(rootfs, p)
            errors += problems
        log(f"NEEDED and dlopen()ed ({', '.join(sonames)}) libraries resolve inside the image")
        # Self-test: with a library gone from the rootfs the loader takes the build host's, and the
        # check must say so.
        libz = find_soname(rootfs, "libz.so.1")
        if libz:
            os.rename(libz, libz + ".hidden")
            _, problems = loader_list(rootfs, binary)
            os.rename(libz + ".hidden", libz)
            if not any("libz.so.1" in p for p in problems):
                errors.append("self-test: a rootfs without libz.so.1 passed the loader check")
        version = img.version_of(os.path.join(args.build_dir, "pressured"))
        if os.geteuid() == 0:
            r = subprocess.run(["chroot", rootfs, "/usr/local/bin/pressured", "--version"], capture_output=True,
                               text=True, timeout=60)
            if r.returncode != 0 or version not in r.stdout:
                errors.append(f"pressured --version in a chroot of the image: exit {r.returncode} "
                              f"{(r.stdout + r.stderr).strip()[-300:]}")
            r = subprocess.run(["chroot", rootfs, "/usr/local/bin/pressured", "install-seccomp", "--dir", "/tmp"],
                               capture_output=True, text=True, timeout=60)
            installed = os.path.join(rootfs, "tmp/profiles/pressured.json")
            with open(os.path.join(src, "deploy/seccomp/pressured.json")) as f:
                shipped = f.read()
            if r.returncode != 0 or not os.path.exists(installed) or open(installed).read() != shipped:
                errors.append(f"pressured install-seccomp in a chroot of the image did not install "
                              f"deploy/seccomp/pressured.json: {(r.stdout + r.stderr).strip()[-300:]}")
            else:
                log("pressured runs in a chroot of the image (--version, install-seccomp)")
        else:
            log("NOTE: not root: the binary is not run in a chroot of the image")

        with open(os.path.join(rootfs, "var/lib/dpkg/status")) as f:
            status = parse_status(f.read())
        with open(a["sbom"]) as f:
            sbom = json.load(f)
        check_sbom(sbom, status, errors)
        log(f"SBOM: {len(status)} Debian packages")

        revision = subprocess.run(["git", "-C", src, "rev-parse", "HEAD"], capture_output=True, text=True,
                                  check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", src, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
        epoch = int(os.environ.get("SOURCE_DATE_EPOCH") or subprocess.run(
            ["git", "-C", src, "log", "-1", "--format=%ct"], capture_output=True, text=True, check=True).stdout)
        created = datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        check_annotations(manifest, config, revision + ("-dirty" if dirty else ""), version, created, errors)

        size = sum(layer["size"] for layer in manifest["layers"]) + manifest["config"]["size"] + desc["size"]
        log(f"compressed size {size} bytes ({size / 2**20:.1f} MiB), limit {MAX_COMPRESSED / 2**20:.0f} MiB")
        if size > MAX_COMPRESSED:
            errors.append(f"compressed image is {size / 2**20:.1f} MiB, more than 30 MiB")

        errors += self_test(entries, owned, own_files, status, sbom)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if errors:
        for e in errors:
            print("FAIL:", e)
        return 1
    print(f"OK: {a['digest']} reproducible, {len(status)} packages, contents and annotations checked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
