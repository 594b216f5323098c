#!/usr/bin/env python3
"""scripts/image's push path and metadata, without building an image (no Debian mirror needed):

  1. --push-only DEST pushes the image the last build left in --out (its image.json and OCI
     layout) without building anything: the destination holds the same manifest digest, stdout
     is that digest alone, and no build step ran (no binary is given; a build would stop on that);
  2. a registry that refuses the push (a closed port on 127.0.0.1) ends it with `image: error:`,
     the destination and skopeo's reason, and no Python traceback;
  3. --push-only with nothing built, with a layout that no longer holds image.json's digest, and
     together with --push each end with a clear error;
  4. the annotations carry the SPDX license of LICENSE (Apache-2.0) and no
     org.opencontainers.image.base.name unless it is a valid image reference; the SBOM declares
     pressured's license.
The checks are run against broken inputs too (they must be able to fail).
As root a missing umoci/skopeo is a failure; otherwise a loud skip (77).
"""

import argparse
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import skip_or_fail  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from image_test import load_image_module  # noqa: E402

# The distribution reference grammar (github.com/distribution/reference), what a scanner pulls.
_COMP = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN = r"(?:(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*|\[[0-9a-fA-F:]+\])(?::[0-9]+)?"
REFERENCE = re.compile(rf"^(?:{_DOMAIN}/)?{_COMP}(?:/{_COMP})*(?::[\w][\w.-]{{0,127}})?(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{{32,}})?$")


def check_metadata(ann, sbom, license_text, errors):
    if ann.get("org.opencontainers.image.licenses") != "Apache-2.0":
        errors.append(f"annotation licenses is {ann.get('org.opencontainers.image.licenses')!r}, LICENSE is Apache-2.0")
    base = ann.get("org.opencontainers.image.base.name")
    if base is not None and not REFERENCE.match(base):
        errors.append(f"annotation base.name {base!r} is not an image reference")
    if "Apache License" not in license_text or "Version 2.0, January 2004" not in license_text:
        errors.append("LICENSE is not the Apache License 2.0")
    pressured = [p for p in sbom.get("packages", []) if p.get("SPDXID") == "SPDXRef-pressured"]
    if not pressured or pressured[0].get("licenseDeclared") != "Apache-2.0":
        errors.append(f"the SBOM's pressured package does not declare Apache-2.0: {pressured}")


def fake_build(out, tag):
    """What a build leaves in --out for --push-only: an OCI layout with one small image under the tag,
    and image.json naming it (umoci, as scripts/image makes its layouts)."""
    layout = os.path.join(out, "oci")
    subprocess.run(["umoci", "init", "--layout", layout], check=True)
    subprocess.run(["umoci", "new", "--image", f"{layout}:{tag}"], check=True)
    subprocess.run(["umoci", "config", "--image", f"{layout}:{tag}", "--config.cmd", "run"], check=True,
                   capture_output=True)
    with open(os.path.join(layout, "index.json")) as f:
        digest = json.load(f)["manifests"][0]["digest"]
    with open(os.path.join(out, "image.json"), "w") as f:
        json.dump({"reference": f"pressured:{tag}", "digest": digest, "layout": layout}, f)
    return layout, digest


def image(src, *args):
    return subprocess.run([os.path.join(src, "scripts", "image"), *args], capture_output=True, text=True,
                          timeout=120)


def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed once the socket is: nothing listens there


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source-dir", required=True)
    args = ap.parse_args()
    src = os.path.abspath(args.source_dir)
    for tool in ("umoci", "skopeo"):
        if not shutil.which(tool):
            skip_or_fail(f"{tool} (scripts/setup)", fail_as_root=True)
    errors = []

    mod = load_image_module(src)
    ann = mod.image_annotations("r" * 40, "0.1.0", "2026-01-01T00:00:00Z")
    with tempfile.NamedTemporaryFile("w", delete=False) as f:
        f.write("Package: libc6\nVersion: 2.36-9\nArchitecture: amd64\nMaintainer: Debian\n\n")
        status = f.name
    try:
        sbom = mod.spdx_sbom(status, "pressured", "0.1.0", "r" * 40, "2026-01-01T00:00:00Z", "sha256:" + "0" * 64,
                             "amd64")
    finally:
        os.unlink(status)
    with open(os.path.join(src, "LICENSE")) as f:
        license_text = f.read()
    check_metadata(ann, sbom, license_text, errors)
    for what, bad in (("the old base.name", dict(ann, **{"org.opencontainers.image.base.name":
                                                          "debian:bookworm (packages, scripts/image)"})),
                      ("NOASSERTION", dict(ann, **{"org.opencontainers.image.licenses": "NOASSERTION"}))):
        e = []
        check_metadata(bad, sbom, license_text, e)
        if not e:
            errors.append(f"self-test: annotations with {what} passed")
    if REFERENCE.match("debian:bookworm") is None or REFERENCE.match("registry.example.com:5000/a/b:1@sha256:" + "a" * 64) is None:
        errors.append("self-test: the reference grammar refuses valid references")
    print(f"annotations: licenses {ann.get('org.opencontainers.image.licenses')}, base.name "
          f"{ann.get('org.opencontainers.image.base.name', 'absent')}; SBOM declares Apache-2.0")

    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "out")
        os.makedirs(out)
        tag = "0.1.0-test"
        layout, digest = fake_build(out, tag)

        # 1. push-only to an OCI layout: the same digest, nothing built.
        dest = os.path.join(d, "pushed")
        r = image(src, "--out", out, "--push-only", f"oci:{dest}:{tag}")
        if r.returncode != 0:
            errors.append(f"--push-only oci:{dest}:{tag}: exit {r.returncode}: {r.stderr[-600:]}")
        else:
            if r.stdout.strip() != digest:
                errors.append(f"--push-only printed {r.stdout.strip()!r}, the image is {digest}")
            got = subprocess.run(["skopeo", "inspect", "--raw", f"oci:{dest}:{tag}"], capture_output=True)
            if got.returncode != 0 or "sha256:" + hashlib.sha256(got.stdout).hexdigest() != digest:
                errors.append(f"--push-only: oci:{dest}:{tag} does not hold manifest {digest}")
            if "mmdebstrap" in r.stderr:
                errors.append("--push-only ran a build step")
            print(f"--push-only oci:...:{tag}: {digest}, nothing built")

        # 2. a registry that cannot be reached: a clear error, no traceback.
        port = closed_port()
        r = image(src, "--out", out, "--push-only", f"127.0.0.1:{port}/pressured:{tag}")
        msg = r.stderr
        if r.returncode == 0:
            errors.append(f"--push-only to a closed port 127.0.0.1:{port} succeeded")
        if "Traceback" in msg:
            errors.append(f"a refused push ends in a Python traceback: {msg[-600:]}")
        if "image: error: pushing pressured:" not in msg or f"127.0.0.1:{port}" not in msg:
            errors.append(f"a refused push does not say what failed where: {msg[-600:]}")
        else:
            print("refused push: " + next(l for l in msg.splitlines() if "image: error:" in l)[:200])

        # 3. nothing built, a layout that lost its image, both flags.
        empty = os.path.join(d, "empty")
        os.makedirs(empty)
        cases = [("nothing built", ["--out", empty, "--push-only", f"oci:{dest}2:{tag}"], "no image built"),
                 ("--push with --push-only", ["--out", out, "--push", "x/y:1", "--push-only", "x/y:1"], "give one")]
        for what, argv, want in cases:
            r = image(src, *argv)
            if r.returncode == 0 or "Traceback" in r.stderr or want not in r.stderr:
                errors.append(f"--push-only, {what}: exit {r.returncode}, expected a clear error with "
                              f"{want!r}: {r.stderr[-400:]}")
        with open(os.path.join(out, "image.json")) as f:
            summary = json.load(f)
        summary["digest"] = "sha256:" + "1" * 64
        with open(os.path.join(out, "image.json"), "w") as f:
            json.dump(summary, f)
        r = image(src, "--out", out, "--push-only", f"oci:{dest}3:{tag}")
        if r.returncode == 0 or "build again" not in r.stderr:
            errors.append(f"--push-only with a layout that lost image.json's digest: exit {r.returncode}: "
                          f"{r.stderr[-400:]}")

    if errors:
        for e in errors:
            print("FAIL:", e)
        return 1
    print("OK: push-only, push errors and the image's license metadata")
    return 0


if __name__ == "__main__":
    sys.exit(main())
