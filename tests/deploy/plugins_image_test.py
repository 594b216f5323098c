#!/usr/bin/env python3
"""The pressured-plugins image (scripts/image --plugins) runs the plugin overlay's sidecars.

  1. scripts/image --plugins builds pressured-plugins:<version> from the Release build: an OCI
     layout and archive whose reference is that tag (what deploy/overlays/plugins runs).
  2. Contents: every example and stub at its place and mode (scripts/image's PLUGINS_FILES);
     every other file owned by a Debian package of the image's dpkg status or written by
     scripts/image; python3-grpcio and python3-protobuf installed; nothing of the build host.
  3. The C++ example's NEEDED libraries resolve inside the rootfs with its own loader
     (--inhibit-cache --library-path: a library taken from the build host shows as outside).
  4. As root: every sidecar of deploy/overlays/plugins/sidecars.yaml, with its command and
     arguments as the overlay gives them, runs in a chroot of the unpacked image, creates its
     socket in the plugin directory and answers pressured's API over it (Identify with the name
     it was given; the protect example protects a kube-system candidate, the file-signal one
     reports the number in its file), and removes its socket on SIGTERM.
The ownership check is run against a planted file too (it must be able to fail). As root a
missing mmdebstrap/umoci/skopeo is a failure; otherwise a loud skip (77).
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import yaml
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import log, skip_or_fail  # noqa: E402
import image_test  # noqa: E402

PLUGIN_DIR = "run/pressured/plugins"


def unowned(entries, owned, own_files):
    return sorted(n for n, ti in entries.items()
                  if not ti.isdir() and "/" + n not in owned and "/" + n not in own_files and
                  not n.startswith("var/lib/dpkg/info/"))


def loader_problems(img, root, target):
    """image_test.loader_list for an executable other than pressured: its own interpreter."""
    interp = img.elf_needs(target)[1]
    loader = image_test.in_root(root, interp)
    t = img.ARCHES[img.native_arch()]["triplet"]
    libdirs = ":".join(os.path.join(root, d) for d in (f"lib/{t}", f"usr/lib/{t}"))
    r = subprocess.run([loader, "--inhibit-cache", "--library-path", libdirs, "--list", target],
                       capture_output=True, text=True, timeout=120)
    problems = [] if r.returncode == 0 else [f"loader --list {target}: exit {r.returncode}: {r.stderr[-300:]}"]
    for line in r.stdout.splitlines():
        if "not found" in line:
            problems.append(f"{os.path.relpath(target, root)}: {line.strip()}")
        parts = line.split(" => ")
        if len(parts) == 2 and not os.path.normpath(parts[1].split(" (")[0]).startswith(os.path.normpath(root) + "/"):
            problems.append(f"{os.path.relpath(target, root)}: {line.strip()} resolves outside the image")
    return problems


ASK = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import grpc
import plugin_v1alpha1_pb2 as pb
import plugin_v1alpha1_pb2_grpc as pb_grpc
with grpc.insecure_channel("unix:" + sys.argv[2]) as ch:
    stub = pb_grpc.EvictionPluginStub(ch)
    ident = stub.Identify(pb.IdentifyRequest(api_version="v1alpha1", features=["pod-labels"]), timeout=10)
    out = {"name": ident.name, "capabilities": sorted(pb.Capability.Name(c) for c in ident.capabilities)}
    if pb.RANK in ident.capabilities:
        r = stub.RankCandidates(pb.RankCandidatesRequest(resource=pb.MEMORY, candidates=[
            pb.Pod(uid="u1", name="dns", namespace="kube-system"),
            pb.Pod(uid="u2", name="web", namespace="shop", labels={"app": "web"})]), timeout=10)
        out["adjustments"] = {a.uid: pb.Action.Name(a.action) for a in r.adjustments}
    if pb.THRESHOLDS in ident.capabilities:
        r = stub.GetThresholds(pb.GetThresholdsRequest(), timeout=10)
        out["observed"] = [t.observed for t in r.thresholds]
print(json.dumps(out))
"""


def ask(stubs, socket):
    """What the plugin on socket answers: Identify, then its capability's call. Asked with Debian's
    python3 and python3-grpcio, as pressured's tests' plugins run."""
    r = subprocess.run(["/usr/bin/python3", "-c", ASK, stubs, socket], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        return {"error": r.stderr.strip()[-400:]}
    return json.loads(r.stdout)


def run_sidecars(src, stubs, rootfs, errors):
    with open(os.path.join(src, "deploy/overlays/plugins/sidecars.yaml")) as f:
        ds = yaml.safe_load(f)
    sidecars = [c for c in ds["spec"]["template"]["spec"]["containers"]
                if str(c.get("image", "")).startswith("pressured-plugins:")]
    if not sidecars:
        errors.append("deploy/overlays/plugins runs no pressured-plugins container")
    os.makedirs(os.path.join(rootfs, PLUGIN_DIR), mode=0o700, exist_ok=True)
    os.makedirs(os.path.join(rootfs, "run/app"), exist_ok=True)
    with open(os.path.join(rootfs, "run/app/queue-depth"), "w") as f:
        f.write("12345\n")
    for c in sidecars:
        argv = c["command"] + c.get("args", [])
        name = next((a.split("=", 1)[1] for a in argv if a.startswith("--name=")), None)
        sock = next((a.split("=", 1)[1] for a in argv if a.startswith("--socket=")), "")
        host_sock = os.path.join(rootfs, sock.lstrip("/"))
        logf = os.path.join(rootfs, "tmp", c["name"] + ".log")
        with open(logf, "w") as lf:
            p = subprocess.Popen([shutil.which("chroot") or "/usr/sbin/chroot", rootfs] + argv, stdout=lf, stderr=subprocess.STDOUT,
                                 env={"PATH": "/usr/local/bin:/usr/bin"})
        try:
            end = time.monotonic() + 60
            while not os.path.exists(host_sock) and p.poll() is None and time.monotonic() < end:
                time.sleep(0.2)
            if not os.path.exists(host_sock):
                with open(logf) as lf:
                    errors.append(f"sidecar {c['name']} ({' '.join(argv)}) made no socket {sock} in a chroot of the "
                                  f"image (exit {p.poll()}): {lf.read()[-400:]}")
                continue
            got = ask(stubs, host_sock)
            want = {"name": name}
            if "RANK" in got.get("capabilities", []):
                want["adjustments"] = {"u1": "PROTECT"}  # --protect=kube-system
            if "THRESHOLDS" in got.get("capabilities", []):
                want["observed"] = [12345.0]  # the number in its file
            if {k: got.get(k) for k in want} != want or not got.get("capabilities"):
                errors.append(f"sidecar {c['name']} answered {got}, expected {want}")
            else:
                log(f"sidecar {c['name']} runs in the image as the overlay starts it and answers {got}")
        finally:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                errors.append(f"sidecar {c['name']} did not stop within 20 s of SIGTERM")
        if os.path.exists(host_sock):
            errors.append(f"sidecar {c['name']} left its socket {sock} behind")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--build-dir", required=True, help="the Release build directory scripts/image uses")
    ap.add_argument("--work", required=True, help="scratch directory (removed at the end)")
    args = ap.parse_args()
    src = os.path.abspath(args.source_dir)
    build_dir = os.path.abspath(args.build_dir)
    img = image_test.load_image_module(src)
    for tool in ("mmdebstrap", "umoci", "skopeo"):
        if not shutil.which(tool):
            skip_or_fail(f"{tool} (scripts/setup installs it)", fail_as_root=True)
    errors = []
    work = os.path.abspath(args.work)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    try:
        r = subprocess.run([os.path.join(src, "scripts", "image"), "--plugins", "--out", work,
                            "--build-dir", build_dir], capture_output=True, text=True, timeout=3000)
        sys.stdout.write(r.stderr[-3000:])
        if r.returncode != 0:
            raise AssertionError(f"scripts/image --plugins failed (exit {r.returncode})")
        with open(os.path.join(work, "plugins", "image.json")) as f:
            info = json.load(f)
        version = img.version_of(os.path.join(build_dir, "pressured"))
        if info["reference"] != f"{img.PLUGINS_NAME}:{version}":
            errors.append(f"the image is {info['reference']}, the overlay runs {img.PLUGINS_NAME}:{version}")
        rr = subprocess.run(["skopeo", "inspect", "--raw", f"oci-archive:{info['archive']}"], capture_output=True,
                            timeout=120)
        if rr.returncode != 0:
            errors.append(f"the oci-archive does not read: {rr.stderr.decode()[-300:]}")

        _, _, manifest, _ = image_test.read_image(info["layout"])
        entries = image_test.layer_entries(info["layout"], manifest, errors)
        for _, _, dest, mode in img.PLUGINS_FILES:
            ti = entries.get(dest.lstrip("/"))
            if ti is None or not ti.isfile() or ti.mode & 0o7777 != mode:
                errors.append(f"{dest}: missing or not a file of mode {oct(mode)} "
                              f"({oct(ti.mode) if ti is not None else 'absent'})")
        for h in image_test.HOST_FILES:
            if any(n == h or n.startswith(h + "/") for n in entries):
                errors.append(f"{h}: build host or bootstrap file in the image")
        owned = set()
        infodir = os.path.join(info["rootfs"], "var/lib/dpkg/info")
        for f in os.listdir(infodir):
            with open(os.path.join(infodir, f)) as fh:
                owned.update(line.strip() for line in fh)
        stray = unowned(entries, owned, set(img.PLUGINS_OWN_FILES))
        if stray:
            errors.append(f"owned by no package and not written by scripts/image: {stray[:10]}")
        planted = dict(entries)
        planted["usr/local/bin/stray"] = entries[img.PLUGINS_FILES[0][2].lstrip("/")]
        if unowned(planted, owned, set(img.PLUGINS_OWN_FILES)) != ["usr/local/bin/stray"]:
            errors.append("self-test: a planted file passed the ownership check")
        with open(os.path.join(info["rootfs"], "var/lib/dpkg/status")) as f:
            status, _ = image_test.parse_status(f.read())
        for pkg in img.PLUGINS_PACKAGES:
            if pkg not in status:
                errors.append(f"{pkg} is not installed in the image")
        log(f"{info['reference']} {info['digest']}: {len(entries)} files, {len(status)} Debian packages, "
            f"{info['compressed_bytes'] / 2**20:.1f} MiB compressed")

        rootfs = os.path.join(work, "unpacked")
        os.makedirs(rootfs)
        for layer in manifest["layers"]:
            subprocess.run(["tar", "-xf", image_test.blob(info["layout"], layer["digest"]), "-C", rootfs,
                            "--numeric-owner"], check=True)
        protect = os.path.join(rootfs, img.PLUGINS_FILES[0][2].lstrip("/"))
        errors += loader_problems(img, rootfs, protect)
        if os.geteuid() != 0:
            log("NOTE: not root: the sidecars are not run in a chroot of the image")
        else:
            run_sidecars(src, os.path.join(build_dir, "generated", "plugin_proto"), rootfs, errors)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if errors:
        for e in errors:
            print("FAIL:", e)
        return 1
    print("OK: pressured-plugins holds the examples, their libraries resolve in it, and the overlay's sidecars "
          "run in it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
