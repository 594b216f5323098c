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
     binary runs in a chroot of it (--version, install-seccomp). The plugin transport
     (/usr/local/lib/pressured/libpressured_plugin_grpc.so, dlopen()ed when plugins.directory
     is set) is in this machine's image, not executable, and its libraries (gRPC, protobuf)
     resolve inside the rootfs the same way; so does the metrics port's TLS module
     (/usr/local/lib/pressured/libpressured_metrics_tls.so: libmicrohttpd, GnuTLS), in every image.
  4. The SPDX SBOM lists every package of the status file with its version.
  5. The manifest carries the OCI annotations source, revision (this commit), version
     (the binary's), created (the commit time) and licenses (Apache-2.0), and no base.name (no
     base image); config and history are dated the same. The SBOM declares pressured Apache-2.0.
  6. The compressed image is at most 36 MiB (about 21 of pressured's own libraries, 10 of the plugin
     transport's gRPC, protobuf and abseil).
With several --arch (scripts/image --arch amd64 --arch arm64), each architecture's image gets
all of the above (its binary and every ELF file in it of that architecture, its packages of that
architecture or `all`, its libraries resolved by its own loader, under qemu-user for a foreign
one, its own SBOM, its own reproducible digest), and the OCI image index:
  7. One tag, an index listing exactly one manifest per architecture, each with the platform
     (os, architecture) of its image's config and the digest of that architecture's build;
     two builds give the same index digest; the oci-archive holds the index.
  8. --push to an OCI layout (skopeo copy --all; no registry is reachable here) gives the same
     index digest, and every platform's manifest resolves from it under the one tag.
The checks are run against broken inputs too (they must be able to fail).
As root a missing mmdebstrap/umoci/skopeo (buildah, qemu-user for several architectures) is a
failure; otherwise a loud skip (77).
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

MAX_COMPRESSED = 36 * 2**20
SHELLS = {"sh", "bash", "dash", "ash", "busybox", "zsh", "ksh", "mksh", "rbash", "csh", "tcsh", "perl", "python3"}
HOST_FILES = {"etc/hostname", "etc/resolv.conf", "etc/hosts", "etc/apt", "var/lib/apt", "var/cache/apt",
              "etc/fstab", "etc/machine-id"}


def load_image_module(src):
    loader = importlib.machinery.SourceFileLoader("scripts_image", os.path.join(src, "scripts", "image"))
    spec = importlib.util.spec_from_loader("scripts_image", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def build(src, out, build_dirs, arches, push=None):
    cmd = [os.path.join(src, "scripts", "image"), "--out", out]
    for a in arches:
        cmd += ["--arch", a]
    for d in build_dirs:
        cmd += ["--build-dir", d]
    if push:
        cmd += ["--push", push]
    # A first cross build of the arm64 binary takes up to half an hour on a loaded 2-core machine.
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=3300)
    sys.stdout.write(r.stderr[-4000:])
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


def in_root(root, path):
    """path as a process chrooted into root sees it: absolute symlinks stay inside root."""
    parts = [p for p in path.split("/") if p]
    cur = root
    for _ in range(40):
        if not parts:
            return cur
        nxt = os.path.join(cur, parts.pop(0))
        if os.path.islink(nxt):
            target = os.readlink(nxt)
            parts = [p for p in target.split("/") if p] + parts
            if target.startswith("/"):
                cur = root
        else:
            cur = nxt
    raise AssertionError(f"{path}: too many symlinks in {root}")


def lib_dirs(img, arch):
    t = img.ARCHES[arch]["triplet"]
    return [f"lib/{t}", f"usr/lib/{t}", "lib", "usr/lib"]


def loader_list(img, arch, root, target):
    """(resolved paths, problems) of target's libraries as the rootfs's own loader finds them; a
    foreign architecture's loader runs under qemu-user (with no -L: a library missing from the
    rootfs is then looked for in this machine's directories, which have none of that architecture)."""
    interp = img.elf_needs(os.path.join(root, "usr/local/bin/pressured"))[1]
    loader = in_root(root, interp)
    libdirs = ":".join(os.path.join(root, d) for d in lib_dirs(img, arch)[:2])
    qemu = img.ARCHES[arch]["qemu"] if arch != img.native_arch() else None
    r = subprocess.run(([qemu] if qemu else []) + [loader, "--inhibit-cache", "--library-path", libdirs,
                                                   "--list", target], capture_output=True, text=True, timeout=120)
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


def find_soname(img, arch, root, soname):
    for d in lib_dirs(img, arch):
        p = os.path.join(root, d, soname)
        if os.path.exists(p):
            return p
    return None


def check_elf_arch(img, arch, root, errors):
    """Every ELF file of the rootfs is built for arch: an amd64 library in the arm64 image would be
    the build host's, not Debian's arm64 package."""
    want = img.ARCHES[arch]["elf_machine"]
    n = 0
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            if os.path.islink(p) or not os.path.isfile(p):
                continue
            m = img.elf_machine(p)
            if m is None:
                continue
            n += 1
            if m != want:
                errors.append(f"{arch} image: {os.path.relpath(p, root)} is ELF machine {m}, not {want}")
    if n == 0:
        errors.append(f"{arch} image: no ELF file at all")
    return n


def parse_status(text):
    """{package: version}, {package: architecture}"""
    pkgs, arches = {}, {}
    for stanza in text.split("\n\n"):
        f = dict(re.findall(r"^([A-Za-z-]+): (.*)$", stanza, re.M))
        if f.get("Package"):
            pkgs[f["Package"]] = f.get("Version")
            arches[f["Package"]] = f.get("Architecture")
    return pkgs, arches


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
    own = [p for p in sbom.get("packages", []) if p.get("SPDXID") == "SPDXRef-pressured"]
    if not own or own[0].get("licenseDeclared") != "Apache-2.0":
        errors.append("the SBOM's pressured package does not declare Apache-2.0")
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
    # pressured's license (LICENSE) as SPDX; no base.name: the rootfs is packages, not a base image.
    if ann.get("org.opencontainers.image.licenses") != "Apache-2.0":
        errors.append(f"annotation licenses is {ann.get('org.opencontainers.image.licenses')!r}, expected Apache-2.0")
    if "org.opencontainers.image.base.name" in ann:
        errors.append(f"annotation base.name {ann['org.opencontainers.image.base.name']!r}: the image has no base image")
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


def check_arch_image(img, src, arch, info, work, meta, errors):
    """Checks 2-6 on one architecture's image (info: its image.json); returns what the self-tests use."""
    desc, raw, manifest, config = read_image(info["layout"])
    if "sha256:" + hashlib.sha256(raw).hexdigest() != info["digest"]:
        errors.append(f"{arch}: the layout's manifest does not hash to the reported digest")
    if config.get("architecture") != arch or config.get("os") != "linux":
        errors.append(f"{arch}: the config says {config.get('os')}/{config.get('architecture')}")
    r = subprocess.run(["skopeo", "inspect", "--raw", f"oci-archive:{info['archive']}"], capture_output=True,
                       timeout=120)
    if r.returncode != 0 or "sha256:" + hashlib.sha256(r.stdout).hexdigest() != info["digest"]:
        errors.append(f"{arch}: the oci-archive does not hold manifest {info['digest']}: {r.stderr.decode()[-300:]}")

    entries = layer_entries(info["layout"], manifest, errors)
    owned = set()
    infodir = os.path.join(info["rootfs"], "var/lib/dpkg/info")
    for f in os.listdir(infodir):
        with open(os.path.join(infodir, f)) as fh:
            owned.update(line.strip() for line in fh)
    own_files = set(img.OWN_FILES)
    check_contents(entries, owned, own_files, errors)

    # The layers, unpacked: what a runtime would run.
    rootfs = os.path.join(work, f"unpacked-{arch}")
    os.makedirs(rootfs)
    for layer in manifest["layers"]:
        subprocess.run(["tar", "-xf", blob(info["layout"], layer["digest"]), "-C", rootfs, "--numeric-owner"],
                       check=True)
    nelf = check_elf_arch(img, arch, rootfs, errors)
    log(f"{arch}: {nelf} ELF files, all of {arch}")
    binary = os.path.join(rootfs, "usr/local/bin/pressured")
    _, problems = loader_list(img, arch, rootfs, binary)
    errors += problems
    sonames, bad = img.dlopened_sonames(src)
    errors += [f"dlopen with a computed name: {x}" for x in bad]
    if not sonames:
        errors.append("scripts/image found no dlopen()ed library in userspace/ (libcurl is one)")
    for so in sonames:
        p = find_soname(img, arch, rootfs, so)
        if not p:
            errors.append(f"{arch}: {so} (dlopen()ed by pressured) is not in the image")
            continue
        _, problems = loader_list(img, arch, rootfs, p)
        errors += problems
    log(f"{arch}: NEEDED and dlopen()ed ({', '.join(sonames)}) libraries resolve inside the image")
    module = img.MODULE_IN_IMAGE.lstrip("/")
    if module in entries:
        if entries[module].mode & 0o111:
            errors.append(f"{arch}: {img.MODULE_IN_IMAGE} is executable (the image has one executable)")
        _, problems = loader_list(img, arch, rootfs, os.path.join(rootfs, module))
        errors += problems
        if not problems:
            log(f"{arch}: the plugin transport {img.MODULE_IN_IMAGE} and its libraries resolve inside the image")
    elif arch == img.native_arch():
        errors.append(f"{arch}: the plugin transport {img.MODULE_IN_IMAGE} is not in the image: plugins.directory "
                      f"would not work in it")
    else:
        log(f"NOTE: {arch}: no plugin transport in the image (its cross build has no gRPC)")
    # The metrics port's TLS module: in every architecture's image (every build makes it).
    metrics_module = img.METRICS_MODULE_IN_IMAGE.lstrip("/")
    if metrics_module not in entries:
        errors.append(f"{arch}: the metrics TLS module {img.METRICS_MODULE_IN_IMAGE} is not in the image: a web "
                      f"configuration with TLS or authentication would not work in it")
    else:
        if entries[metrics_module].mode & 0o111:
            errors.append(f"{arch}: {img.METRICS_MODULE_IN_IMAGE} is executable (the image has one executable)")
        _, problems = loader_list(img, arch, rootfs, os.path.join(rootfs, metrics_module))
        errors += problems
        if not problems:
            log(f"{arch}: the metrics TLS module {img.METRICS_MODULE_IN_IMAGE} and its libraries resolve inside "
                f"the image")
    # Self-test: with a library gone from the rootfs the loader takes the build host's (or, for a
    # foreign architecture, finds none), and the check must say so.
    libz = find_soname(img, arch, rootfs, "libz.so.1")
    if libz:
        os.rename(libz, libz + ".hidden")
        _, problems = loader_list(img, arch, rootfs, binary)
        os.rename(libz + ".hidden", libz)
        if not any("libz.so.1" in p for p in problems):
            errors.append(f"self-test: an {arch} rootfs without libz.so.1 passed the loader check")
    else:
        errors.append(f"{arch}: libz.so.1 (pressured links it) is not in the image")
    run_in_image(img, src, arch, rootfs, meta["version"], errors)

    with open(os.path.join(rootfs, "var/lib/dpkg/status")) as f:
        status, pkg_arches = parse_status(f.read())
    wrong = {p: a for p, a in pkg_arches.items() if a not in (arch, "all")}
    if wrong:
        errors.append(f"{arch} image: packages of another architecture: {wrong}")
    with open(info["sbom"]) as f:
        sbom = json.load(f)
    check_sbom(sbom, status, errors)
    for p in sbom.get("packages", []):
        for ref in p.get("externalRefs", []):
            loc = ref.get("referenceLocator", "")
            if loc.startswith("pkg:deb/") and f"arch={pkg_arches.get(p['name'])}" not in loc:
                errors.append(f"{arch} SBOM: {loc} does not name the package's architecture")
    if f"linux/{arch}" not in sbom.get("name", ""):
        errors.append(f"{arch} SBOM: its name {sbom.get('name')!r} does not say linux/{arch}")
    log(f"{arch}: SBOM {os.path.basename(info['sbom'])}: {len(status)} Debian packages")

    check_annotations(manifest, config, meta["revision"], meta["version"], meta["created"], errors)
    size = sum(layer["size"] for layer in manifest["layers"]) + manifest["config"]["size"] + desc["size"]
    log(f"{arch}: compressed size {size} bytes ({size / 2**20:.1f} MiB), limit {MAX_COMPRESSED / 2**20:.0f} MiB")
    if size > MAX_COMPRESSED:
        errors.append(f"{arch}: compressed image is {size / 2**20:.1f} MiB, more than {MAX_COMPRESSED / 2**20:.0f} MiB")
    errors += self_test(entries, owned, own_files, status, sbom)
    return rootfs, len(status)


def run_in_image(img, src, arch, rootfs, version, errors):
    """pressured --version and install-seccomp in the image: in a chroot for this machine's
    architecture (root only), under qemu-user with the rootfs as its prefix for another."""
    native = arch == img.native_arch()
    if native and os.geteuid() != 0:
        log("NOTE: not root: the binary is not run in a chroot of the image")
        return
    if native:
        cmd, seccomp_dir = ["chroot", rootfs, "/usr/local/bin/pressured"], "/tmp"
    else:
        # qemu -L maps only paths that exist in the prefix: the profile goes to an explicit rootfs path.
        cmd = [img.ARCHES[arch]["qemu"], "-L", rootfs, os.path.join(rootfs, "usr/local/bin/pressured")]
        seccomp_dir = os.path.join(rootfs, "tmp")
    how = "a chroot of the image" if native else f"{img.ARCHES[arch]['qemu']} with the image's rootfs"
    r = subprocess.run(cmd + ["--version"], capture_output=True, text=True, timeout=120)
    if r.returncode != 0 or version not in r.stdout:
        errors.append(f"{arch}: pressured --version in {how}: exit {r.returncode} "
                      f"{(r.stdout + r.stderr).strip()[-300:]}")
    r = subprocess.run(cmd + ["install-seccomp", "--dir", seccomp_dir], capture_output=True, text=True, timeout=120)
    installed = os.path.join(rootfs, "tmp/profiles/pressured.json")
    with open(os.path.join(src, "deploy/seccomp/pressured.json")) as f:
        shipped = f.read()
    if r.returncode != 0 or not os.path.exists(installed) or open(installed).read() != shipped:
        errors.append(f"{arch}: pressured install-seccomp in {how} did not install "
                      f"deploy/seccomp/pressured.json: {(r.stdout + r.stderr).strip()[-300:]}")
    else:
        log(f"{arch}: pressured runs in {how} (--version, install-seccomp)")


def read_index(layout):
    """(descriptor in index.json, raw index, index) of a layout whose one tag is an image index."""
    with open(os.path.join(layout, "index.json")) as f:
        top = json.load(f)
    if len(top.get("manifests", [])) != 1:
        raise AssertionError(f"{layout}: {len(top.get('manifests', []))} tags, expected one")
    desc = top["manifests"][0]
    with open(blob(layout, desc["digest"]), "rb") as f:
        raw = f.read()
    return desc, raw, json.loads(raw)


INDEX_TYPE = "application/vnd.oci.image.index.v1+json"
MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"


def check_index(layout, tag, images, errors):
    """The index under the layout's one tag: one manifest per architecture with its build's digest
    and the platform of its config. images: {arch: digest}."""
    desc, raw, index = read_index(layout)
    if desc.get("annotations", {}).get("org.opencontainers.image.ref.name") != tag:
        errors.append(f"index tag {desc.get('annotations')}, expected {tag}")
    if desc.get("mediaType") != INDEX_TYPE or index.get("mediaType") != INDEX_TYPE:
        errors.append(f"the tag is a {desc.get('mediaType')} ({index.get('mediaType')}), not an OCI image index")
    if "sha256:" + hashlib.sha256(raw).hexdigest() != desc["digest"]:
        errors.append("the index does not hash to its digest")
    listed = {}
    for m in index.get("manifests", []):
        plat = m.get("platform", {})
        arch = plat.get("architecture")
        if arch in listed:
            errors.append(f"the index lists {arch} twice")
        listed[arch] = m.get("digest")
        if m.get("mediaType") != MANIFEST_TYPE:
            errors.append(f"index entry {arch}: media type {m.get('mediaType')}")
        if plat.get("os") != "linux":
            errors.append(f"index entry {arch}: os {plat.get('os')!r}")
        try:
            with open(blob(layout, m["digest"]), "rb") as f:
                mraw = f.read()
            if len(mraw) != m.get("size"):
                errors.append(f"index entry {arch}: size {m.get('size')}, the manifest has {len(mraw)} bytes")
            with open(blob(layout, json.loads(mraw)["config"]["digest"])) as f:
                config = json.load(f)
            if (config.get("os"), config.get("architecture")) != (plat.get("os"), arch):
                errors.append(f"index entry {arch}: its image's config says "
                              f"{config.get('os')}/{config.get('architecture')}")
        except (OSError, KeyError, ValueError) as e:
            errors.append(f"index entry {arch}: {m.get('digest')} is not in the layout: {e}")
    if listed != images:
        errors.append(f"the index lists {listed}, the per-architecture builds are {images}")
    return desc["digest"]


def check_pushed(dest_layout, tag, index_digest, configs, errors):
    """What --push oci:DIR:TAG wrote: the same index under the one tag, and each platform resolving
    from it to its own image (a runtime's view: skopeo picks the instance for --override-arch, whose
    config must be that architecture's build's). configs: {arch: config digest}."""
    ref = f"oci:{dest_layout}:{tag}"
    r = subprocess.run(["skopeo", "inspect", "--raw", ref], capture_output=True, timeout=120)
    if r.returncode != 0 or "sha256:" + hashlib.sha256(r.stdout).hexdigest() != index_digest:
        errors.append(f"--push {ref}: not index {index_digest}: {r.stderr.decode()[-300:]}")
        return
    bad = len(errors)
    for arch, digest in configs.items():
        r = subprocess.run(["skopeo", "--override-os", "linux", "--override-arch", arch, "inspect", "--config",
                            "--raw", ref], capture_output=True, timeout=120)
        got = "sha256:" + hashlib.sha256(r.stdout).hexdigest() if r.returncode == 0 else r.stderr.decode()[-300:]
        if got != digest:
            errors.append(f"--push {ref}: linux/{arch} resolves to config {got}, expected {digest}")
    if len(errors) == bad:
        log(f"--push {ref}: index {index_digest}, " + ", ".join(f"linux/{a} resolves" for a in sorted(configs)))


def self_test_index(layout, tag, images, errors_out):
    """check_index rejects an index without one of the platforms and one with a wrong platform."""
    if len(images) < 2:
        return
    first = sorted(images)[0]
    e = []
    check_index(layout, tag, {a: d for a, d in images.items() if a != first}, e)
    if not e:
        errors_out.append("self-test: an index check expecting one platform less passed")
    bad = layout + "-bad"
    shutil.copytree(layout, bad)
    desc, raw, index = read_index(bad)
    index["manifests"][0]["platform"]["architecture"] = "s390x"
    data = json.dumps(index).encode()
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    with open(blob(bad, digest), "wb") as f:
        f.write(data)
    with open(os.path.join(bad, "index.json"), "w") as f:
        json.dump({"schemaVersion": 2, "manifests": [dict(desc, digest=digest, size=len(data))]}, f)
    e = []
    check_index(bad, tag, images, e)
    if not e:
        errors_out.append("self-test: an index with a wrong platform passed")
    shutil.rmtree(bad)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--build-dir", action="append", required=True,
                    help="[ARCH=]DIR: the Release build directory scripts/image uses (repeatable)")
    ap.add_argument("--arch", action="append", help="architecture (repeatable; default this machine's); several "
                                                     "check the OCI image index too")
    ap.add_argument("--work", required=True, help="scratch directory (removed at the end)")
    args = ap.parse_args()
    src = os.path.abspath(args.source_dir)
    img = load_image_module(src)
    arches = args.arch or [img.native_arch()]
    multi = len(arches) > 1
    tools = ["mmdebstrap", "umoci", "skopeo"] + (["buildah"] if multi else [])
    tools += [img.ARCHES[a]["qemu"] for a in arches if a != img.native_arch()]
    for tool in tools:
        if not shutil.which(tool):
            skip_or_fail(f"{tool} (scripts/setup installs it)", fail_as_root=True)
    errors = []
    work = os.path.abspath(args.work)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    build_dirs = [d if "=" in d else os.path.abspath(d) for d in args.build_dir]
    try:
        a = build(src, os.path.join(work, "a"), build_dirs, arches)
        tag = a["reference"].split(":", 1)[1]
        pushed = os.path.join(work, "pushed")
        # The second build also pushes (to an OCI layout: no registry is reachable here).
        b = build(src, os.path.join(work, "b"), build_dirs, arches,
                  push=f"oci:{pushed}:{tag}" if multi else None)
        log(f"digests {a['digest']} {b['digest']}")
        if a["digest"] != b["digest"]:
            errors.append(f"two builds of the same commit differ: {a['digest']} vs {b['digest']}")
        per_arch_a = a.get("platforms", {arches[0]: a})
        per_arch_b = b.get("platforms", {arches[0]: b})
        if multi and sorted(per_arch_a) != sorted(arches):
            errors.append(f"image.json lists the platforms {sorted(per_arch_a)}, asked for {sorted(arches)}")
        for arch in arches:
            ia, ib = per_arch_a.get(arch), per_arch_b.get(arch)
            if not ia or not ib:
                errors.append(f"no {arch} image in image.json")
                continue
            if ia["digest"] != ib["digest"]:
                errors.append(f"{arch}: two builds of the same commit differ: {ia['digest']} vs {ib['digest']}")
            with open(ia["sbom"], "rb") as f1, open(ib["sbom"], "rb") as f2:
                if f1.read() != f2.read():
                    errors.append(f"{arch}: two builds give different SBOMs")
        if len({per_arch_a[x]["sbom"] for x in arches if x in per_arch_a}) != len(arches):
            errors.append("the architectures share an SBOM file")

        revision = subprocess.run(["git", "-C", src, "rev-parse", "HEAD"], capture_output=True, text=True,
                                  check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", src, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
        epoch = int(os.environ.get("SOURCE_DATE_EPOCH") or subprocess.run(
            ["git", "-C", src, "log", "-1", "--format=%ct"], capture_output=True, text=True, check=True).stdout)
        meta = {"revision": revision + ("-dirty" if dirty else ""),
                "created": datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime(
                    "%Y-%m-%dT%H:%M:%SZ"),
                "version": img.version_of(per_arch_a[arches[0]]["binary"], arches[0])}
        npkgs = {}
        for arch in arches:
            if arch in per_arch_a:
                _, npkgs[arch] = check_arch_image(img, src, arch, per_arch_a[arch], work, meta, errors)

        if multi:
            images = {x: per_arch_a[x]["digest"] for x in arches if x in per_arch_a}
            index_digest = check_index(a["layout"], tag, images, errors)
            if index_digest != a["digest"]:
                errors.append(f"image.json says {a['digest']}, the layout's tag is {index_digest}")
            r = subprocess.run(["skopeo", "inspect", "--raw", f"oci-archive:{a['archive']}"], capture_output=True,
                               timeout=120)
            if r.returncode != 0 or "sha256:" + hashlib.sha256(r.stdout).hexdigest() != index_digest:
                errors.append(f"the oci-archive does not hold index {index_digest}: {r.stderr.decode()[-300:]}")
            log(f"index {index_digest}: " + ", ".join(f"linux/{x} {d}" for x, d in sorted(images.items())))
            configs = {x: read_image(per_arch_a[x]["layout"])[2]["config"]["digest"] for x in images}
            check_pushed(pushed, tag, index_digest, configs, errors)
            self_test_index(a["layout"], tag, images, errors)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if errors:
        for e in errors:
            print("FAIL:", e)
        return 1
    print(f"OK: {a['digest']} reproducible; " + ", ".join(f"{x}: {n} packages" for x, n in npkgs.items()) +
          "; contents and annotations checked" + ("; the index and its push checked" if multi else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
