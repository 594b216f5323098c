#!/usr/bin/env python3
"""deploy/uninstall/: what it removes is where deploy/ puts it, and the real binary removes
exactly that from a fake node.

  - the init container runs `pressured uninstall` on the node paths deploy/ uses (through its
    mounts, each host path resolved): the kubelet's seccomp directory of deploy/'s kubelet-seccomp
    volume, whose profiles/pressured.json is the DaemonSet's localhostProfile, and daemon.stateFile
    of deploy/base/config.yaml on its state volume; the pod's host paths are those two directories
    and nothing else (not the node's /var/lib); the main container mounts nothing and runs
    `uninstall --wait` with no path; the same image as deploy/; no capability, not privileged,
    no ServiceAccount token, every taint tolerated;
  - on a fake node in a temporary directory, prepared as deploy/ would leave it (the init
    container's `install-seccomp`, a checkpoint in a state directory the kubelet made) beside
    files that are not pressured's, the init container's command with its mounts resolved there
    removes pressured's files and profiles/ (install-seccomp made it) and nothing else (the state
    directory, which the kubelet made, stays), and says so; the main container's command touches
    nothing, stays, and exits 0 at SIGTERM; a profile of another version, or a `.tmp` beside the
    checkpoint that is no piece of one, is refused with exit 1 and left in place.
Needs the pressured binary (an argument)."""
import argparse
import os
import signal
import subprocess
import sys
import tempfile

import yaml
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import log, wait_for  # noqa: E402

CHECKPOINT = '{"version": 1, "boot_id": "b", "engine": {}, "policy": {}}\n'


def load(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def host_path(container_path, mounts, volumes):
    """The node's path behind a container path (the longest mount that holds it)."""
    best = None
    for m in mounts:
        mp = m["mountPath"].rstrip("/")
        if container_path == mp or container_path.startswith(mp + "/"):
            if best is None or len(mp) > len(best[0]):
                best = (mp, volumes[m["name"]])
    if best is None:
        raise AssertionError(f"{container_path} is on no mount")
    return best[1] + container_path[len(best[0]):]


def flag(args, name):
    for a in args:
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pressured")
    ap.add_argument("--source-dir", required=True)
    a = ap.parse_args()
    deploy = os.path.join(a.source_dir, "deploy", "base")
    failures = []

    def check(ok, what):
        if not ok:
            failures.append(what)
            log(f"FAIL: {what}")

    base = {d["kind"]: d for d in load(os.path.join(deploy, "daemonset.yaml"))}
    bspec = base["DaemonSet"]["spec"]["template"]["spec"]
    bvol = {v["name"]: v["hostPath"]["path"] for v in bspec["volumes"] if "hostPath" in v}
    bmain = bspec["containers"][0]
    with open(os.path.join(deploy, "config.yaml")) as f:  # the ConfigMap's (kustomization.yaml generates it)
        config = yaml.safe_load(f)
    state_on_node = host_path(config["daemon"]["stateFile"], bmain["volumeMounts"], bvol)
    seccomp_on_node = bvol["kubelet-seccomp"]
    check(bmain["securityContext"]["seccompProfile"].get("localhostProfile") == "profiles/pressured.json",
          "deploy/'s localhostProfile is not profiles/pressured.json, the file uninstall removes")

    docs = []
    with open(os.path.join(a.source_dir, "deploy", "uninstall", "kustomization.yaml")) as f:
        for name in yaml.safe_load(f)["resources"]:
            docs += load(os.path.join(a.source_dir, "deploy", "uninstall", name))
    ds = next(d for d in docs if d["kind"] == "DaemonSet")
    spec = ds["spec"]["template"]["spec"]
    vol = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    check(spec.get("automountServiceAccountToken") is False, "the uninstall pod mounts a ServiceAccount token")
    check({"operator": "Exists"} in spec.get("tolerations", []), "the uninstall pod does not tolerate every taint")
    check(not spec.get("hostPID"), "the uninstall pod shares the node's pids")
    # Like pressured's pod it needs no pod network (CNI), which a node it must clean may lack.
    check(spec.get("hostNetwork") is True, "the uninstall pod needs the pod network (hostNetwork is not true)")
    containers = spec.get("initContainers", []) + spec["containers"]
    check(len(spec.get("initContainers", [])) == 1, "expected one init container doing the removal")
    # Only the two directories, not a parent of theirs (the node's /var/lib holds every pod's secrets).
    check(sorted(vol.values()) == sorted([seccomp_on_node, os.path.dirname(state_on_node)]),
          f"the uninstall pod mounts {sorted(vol.values())}, not only {seccomp_on_node} and "
          f"{os.path.dirname(state_on_node)}")
    for c in spec["containers"]:
        check(not c.get("volumeMounts"), f"container {c['name']} mounts {c.get('volumeMounts')}: only the init "
              "container needs the node's files")
        check(c.get("args") == ["uninstall", "--wait"], f"container {c['name']}: args {c.get('args')}, expected "
              "uninstall --wait with no path")
    for c in containers:
        where = f"container {c['name']}"
        check(c["image"] == bmain["image"], f"{where}: image {c['image']}, deploy/ runs {bmain['image']}")
        sc = c.get("securityContext", {})
        check(sc.get("privileged") is False and sc.get("allowPrivilegeEscalation") is False and
              sc.get("readOnlyRootFilesystem") is True, f"{where}: not unprivileged with a read-only root")
        check(sc.get("capabilities") == {"drop": ["ALL"]}, f"{where}: capabilities {sc.get('capabilities')}")
    for c in spec.get("initContainers", []):
        where = f"container {c['name']}"
        args = c.get("args", [])
        check(args[:1] == ["uninstall"], f"{where}: does not run `pressured uninstall` ({args})")
        check("--wait" not in args, f"{where}: --wait belongs to the main container only ({args})")
        sd, sf = flag(args, "--seccomp-dir"), flag(args, "--state-file")
        check(sd and host_path(sd, c["volumeMounts"], vol) == seccomp_on_node,
              f"{where}: --seccomp-dir={sd} is not the node's {seccomp_on_node}")
        check(sf and host_path(sf, c["volumeMounts"], vol) == state_on_node,
              f"{where}: --state-file={sf} is not the node's {state_on_node}")

    init, main_c = spec["initContainers"][0], spec["containers"][0]
    with tempfile.TemporaryDirectory(prefix="pressured-uninstall-") as node:
        def on_node(c, arg, volumes=vol):
            return [x if not x.startswith("--") or "=" not in x else
                    x.split("=", 1)[0] + "=" + node + host_path(x.split("=", 1)[1], c["volumeMounts"], volumes)
                    for x in arg]

        binit = bspec["initContainers"][0]
        inst = on_node(binit, binit["args"], bvol)
        # deploy/'s init container, its mount resolved into the fake node, as the kubelet would have run it.
        os.makedirs(node + seccomp_on_node)
        r = subprocess.run([a.pressured, *inst], capture_output=True, text=True, timeout=60)
        check(r.returncode == 0, f"install-seccomp {inst}: {r.stderr}")
        os.makedirs(os.path.dirname(node + state_on_node))
        with open(node + state_on_node, "w") as f:
            f.write(CHECKPOINT)
        others = [node + seccomp_on_node + "/other-profile.json", node + "/var/lib/someone-else"]
        for p in others:
            with open(p, "w") as f:
                f.write("not pressured's\n")
        r = subprocess.run([a.pressured, *on_node(init, init["args"])], capture_output=True, text=True, timeout=60)
        check(r.returncode == 0 and "nothing of pressured's left" in r.stderr, f"uninstall: exit {r.returncode}: {r.stderr}")
        for gone in (node + seccomp_on_node + "/profiles", node + state_on_node):
            check(not os.path.exists(gone), f"{gone} left by uninstall")
        # The state directory is the kubelet's (deploy/'s DirectoryOrCreate volume made it), not pressured's.
        for p in others + [node + seccomp_on_node, node + os.path.dirname(state_on_node)]:
            check(os.path.exists(p), f"uninstall removed {p}, which is not pressured's")
        check("kept" in r.stderr and os.path.dirname(state_on_node) in r.stderr,
              f"uninstall does not say why it kept the state directory: {r.stderr}")

        errf = os.path.join(node, "wait.log")

        def said():
            with open(errf) as f:
                return f.read()
        with open(errf, "w") as ef:
            p = subprocess.Popen([a.pressured, *on_node(main_c, main_c["args"])], stderr=ef)
        try:
            wait_for("the main container's uninstall to wait",
                     lambda: p.poll() is not None or "waiting for SIGTERM" in said(), 30)
            check(p.poll() is None, f"uninstall --wait did not stay: exit {p.returncode}: {said()}")
            p.send_signal(signal.SIGTERM)
            rc = p.wait(timeout=30)
            check(rc == 0 and "nothing touched" in said(), f"uninstall --wait: exit {rc}: {said()}")
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()

        # Another version's profile is not this image's to remove.
        r = subprocess.run([a.pressured, *inst], capture_output=True, text=True, timeout=60)
        prof = node + seccomp_on_node + "/profiles/pressured.json"
        with open(prof, "w") as f:
            f.write('{"defaultAction": "SCMP_ACT_ERRNO"}\n')
        r = subprocess.run([a.pressured, *on_node(init, init["args"])], capture_output=True, text=True, timeout=60)
        check(r.returncode == 1 and prof in r.stderr and os.path.exists(prof),
              f"uninstall of another version's profile: exit {r.returncode}: {r.stderr}")
        os.unlink(prof)

        # A .tmp beside the checkpoint that no crash of pressured's writer leaves is someone else's.
        tmp = node + state_on_node + ".tmp"
        with open(tmp, "w") as f:
            f.write('{"someone": "else"}\n')
        r = subprocess.run([a.pressured, *on_node(init, init["args"])], capture_output=True, text=True, timeout=60)
        check(r.returncode == 1 and tmp in r.stderr and os.path.exists(tmp),
              f"uninstall of a .tmp that is not pressured's: exit {r.returncode}: {r.stderr}")

    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    log("deploy/uninstall removes exactly what deploy/ put on the node")
    return 0


if __name__ == "__main__":
    sys.exit(main())
