"""The real-kubelet node for vmtests (contenders `kubelet`, `pressured+kubelet` and `daemonset`).

Host side of the guest node: containerd and runc from Debian, the kubelet 1.20.2
and kubectl from scripts/build-control-plane, offline OCI images (a pause sandbox
image and the workloads, both from the static binaries of vmtests/workloads), all
on a second virtio disk (/dev/vdb, opened snapshot=on) so the initramfs stays small;
and a control plane (etcd + kube-apiserver) on the host's 127.0.0.1 that the guest
reaches only through QEMU's user-mode network with restrict=on and one guestfwd
rule (10.0.2.100:6443 in the guest -> 127.0.0.1:<port> on the host).
"""
import glob
import hashlib
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import tarfile
import tempfile
import threading
import time

import yaml

from .common import OUT, ROOT, log

CACHE = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
                     "pressured", "vmtests-node")
RUNTIME_PACKAGES = ["containerd", "runc"]
# Where the guest finds the apiserver: a guestfwd address inside QEMU's slirp
# network, never a real host address.
GUEST_API_ADDR = "10.0.2.100"
GUEST_API_PORT = 6443
NODE_NAME = "vm"
PAUSE_IMAGE = "docker.io/vmtests/pause:1"
# The image scripts/image builds, as the kubelet resolves deploy/'s `image:
# pressured:<version>` (a bare name is docker.io/library/...): imported under
# that name, the real base needs no `images:` override.
PRESSURED_IMAGE_REF = "pressured:0.1.0"
PRESSURED_IMAGE = "docker.io/library/" + PRESSURED_IMAGE_REF
WORKLOAD_IMAGE = "docker.io/vmtests/workload:1"
# Binaries the guest needs beside busybox. nice and a GNU du: the kubelet runs
# `nice -n 19 du -x -s -B 1` for its log and volume stats; busybox du has no -B.
HOST_TOOLS = ["/usr/bin/du", "/usr/bin/nice"]


# ---------------------------------------------------------------------------
# binaries
# ---------------------------------------------------------------------------

def kubernetes_dir(controllers=False):
    """The directory with kubelet, kubectl and kube-apiserver 1.20.2 (scripts/build-control-plane),
    and with controllers=True also kube-controller-manager and kube-scheduler (built only with
    --controllers: the daemonset contender alone needs them), or raises."""
    script = os.path.join(ROOT, "scripts", "build-control-plane")
    flags = ["--controllers"] if controllers else []
    env_dir = os.environ.get("PRESSURED_K8S_BIN_DIR")
    if env_dir:
        d = env_dir
    else:
        check = subprocess.run([script, *flags, "--check"], capture_output=True, text=True)
        if check.returncode != 0:
            raise EnvironmentError(f"kubernetes 1.20.2 is not built completely: run scripts/build-control-plane "
                                   f"{' '.join(flags)} (cached under ~/.cache/pressured, tens of minutes the first "
                                   f"time: docs/testing.md) ({check.stderr.strip()})")
        d = subprocess.run([script, *flags, "--print-dir"], capture_output=True, text=True,
                           check=True).stdout.strip()
    need = ["kubelet", "kubectl", "kube-apiserver"] + (["kube-controller-manager", "kube-scheduler"]
                                                       if controllers else [])
    for b in need:
        if not os.access(os.path.join(d, b), os.X_OK):
            raise EnvironmentError(f"{os.path.join(d, b)} is missing (scripts/build-control-plane)")
    return d


def runtime_root():
    """containerd and runc unpacked from their Debian packages (downloaded once with apt-get
    download, no install). Returns the unpacked root."""
    root = os.path.join(CACHE, "root")
    stamp = os.path.join(CACHE, ".complete")
    if os.path.exists(stamp):
        return root
    debs = os.path.join(CACHE, "debs")
    os.makedirs(debs, exist_ok=True)
    for pkg in RUNTIME_PACKAGES:
        if glob.glob(os.path.join(debs, f"{pkg}_*.deb")):
            continue
        log(f"downloading {pkg} (apt-get download; cache {CACHE})")
        r = subprocess.run(["apt-get", "download", pkg], cwd=debs, capture_output=True, text=True, timeout=600)
        if r.returncode != 0 or not glob.glob(os.path.join(debs, f"{pkg}_*.deb")):
            r = subprocess.run([os.path.join(ROOT, "scripts", "apt-extra"), "download", pkg], cwd=debs,
                               capture_output=True, text=True, timeout=600)
        if not glob.glob(os.path.join(debs, f"{pkg}_*.deb")):
            raise EnvironmentError(f"cannot download the Debian package {pkg}: "
                                   f"{(r.stderr.strip().splitlines() or ['?'])[-1]}")
    shutil.rmtree(root, ignore_errors=True)
    for d in sorted(glob.glob(os.path.join(debs, "*.deb"))):
        subprocess.run(["dpkg-deb", "-x", d, root], check=True)
    open(stamp, "w").close()
    return root


def runtime_binaries():
    root = runtime_root()
    out = {}
    for name, rel in (("containerd", "usr/bin/containerd"), ("containerd-shim-runc-v2", "usr/bin/containerd-shim-runc-v2"),
                      ("ctr", "usr/bin/ctr"), ("runc", "usr/sbin/runc")):
        p = os.path.join(root, rel)
        if not os.access(p, os.X_OK):
            raise EnvironmentError(f"{rel} not found in the unpacked {RUNTIME_PACKAGES} packages ({root})")
        out[name] = p
    for t in HOST_TOOLS:
        if not os.access(t, os.X_OK):
            raise EnvironmentError(f"{t} is missing (coreutils)")
    return out


# ---------------------------------------------------------------------------
# offline OCI images
# ---------------------------------------------------------------------------

def _tar_add(t, name, data, mode=0o755, mtime=0):
    ti = tarfile.TarInfo(name)
    ti.size = len(data)
    ti.mode = mode
    ti.mtime = mtime
    t.addfile(ti, io.BytesIO(data))


def oci_archive(path, image_name, files, symlinks=(), entrypoint=None):
    """Writes an OCI image layout tar with one uncompressed layer holding `files`
    ({path in image: host path}) and `symlinks` ([(link, target)]), named with the
    io.containerd.image.name annotation that `ctr images import` reads."""
    layer_buf = io.BytesIO()
    with tarfile.open(fileobj=layer_buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        dirs = sorted({os.path.dirname(p) for p in list(files) + [l for l, _ in symlinks]} - {""})
        for d in dirs:
            ti = tarfile.TarInfo(d)
            ti.type = tarfile.DIRTYPE
            ti.mode = 0o755
            t.addfile(ti)
        for p, src in sorted(files.items()):
            with open(src, "rb") as f:
                _tar_add(t, p, f.read())
        for link, target in symlinks:
            ti = tarfile.TarInfo(link)
            ti.type = tarfile.SYMTYPE
            ti.linkname = target
            t.addfile(ti)
    layer = layer_buf.getvalue()
    layer_digest = "sha256:" + hashlib.sha256(layer).hexdigest()
    config = json.dumps({"architecture": "amd64", "os": "linux",
                         "config": {"Entrypoint": entrypoint, "Env": ["PATH=/bin"]} if entrypoint else
                         {"Env": ["PATH=/bin"]},
                         "rootfs": {"type": "layers", "diff_ids": [layer_digest]}}, sort_keys=True).encode()
    config_digest = "sha256:" + hashlib.sha256(config).hexdigest()
    manifest = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                           "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                      "digest": config_digest, "size": len(config)},
                           "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                                       "digest": layer_digest, "size": len(layer)}]}, sort_keys=True).encode()
    manifest_digest = "sha256:" + hashlib.sha256(manifest).hexdigest()
    index = json.dumps({"schemaVersion": 2, "manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": manifest_digest,
         "size": len(manifest), "annotations": {"io.containerd.image.name": image_name,
                                                  "org.opencontainers.image.ref.name": image_name.rsplit(":", 1)[1]}}]}
    ).encode()
    with tarfile.open(path + ".tmp", "w", format=tarfile.PAX_FORMAT) as t:
        _tar_add(t, "oci-layout", b'{"imageLayoutVersion":"1.0.0"}', 0o644)
        _tar_add(t, "index.json", index, 0o644)
        for blob in (layer, config, manifest):
            _tar_add(t, "blobs/sha256/" + hashlib.sha256(blob).hexdigest(), blob, 0o644)
    os.rename(path + ".tmp", path)


# ---------------------------------------------------------------------------
# the node disk
# ---------------------------------------------------------------------------

# Both node contenders boot in parallel (vmtests/run --jobs): one builds the
# disk, the other waits for it instead of building in the same staging dir.
_NODE_DISK_LOCK = threading.Lock()


def build_node_disk(workloads, pressured_image=None):
    """An ext4 image (/dev/vdb in the guest, mounted at /node) with the node's binaries,
    the image archives (with pressured's OCI archive when `pressured_image` is given:
    the daemonset contender's node disk), and room for containerd's and the kubelet's
    state. Rebuilt when an input is newer."""
    with _NODE_DISK_LOCK:
        return _build_node_disk(workloads, pressured_image)


def pressured_image_archive():
    """The OCI archive scripts/image wrote (build/image/image.json names it), built
    first when there is none; PRESSURED_IMAGE_ARCHIVE points at another one."""
    env = os.environ.get("PRESSURED_IMAGE_ARCHIVE")
    if env:
        if not os.path.isfile(env):
            raise EnvironmentError(f"PRESSURED_IMAGE_ARCHIVE={env} does not exist")
        return env
    meta = os.path.join(ROOT, "build", "image", "image.json")
    if not os.path.exists(meta):
        log("building pressured's image (scripts/image: the Release binary, then the rootfs from Debian)")
        r = subprocess.run([os.path.join(ROOT, "scripts", "image")], capture_output=True, text=True, timeout=3600)
        if r.returncode != 0 or not os.path.exists(meta):
            raise EnvironmentError("scripts/image failed: " + (r.stderr.strip() or r.stdout.strip())[-800:])
    with open(meta) as f:
        info = json.load(f)
    # A multi-architecture build (scripts/image --arch all) records its index and, under
    # "platforms", each image: the guest is x86-64, and its containerd imports that one.
    info = info.get("platforms", {}).get("amd64", info)
    archive = info.get("archive", "")
    if not os.path.isfile(archive):
        raise EnvironmentError(f"{meta} names the archive {archive!r}, which does not exist: run scripts/image")
    log(f"pressured's image: {archive} ({info.get('reference')}, {info.get('digest')}, "
        f"commit {str(info.get('revision'))[:12]})")
    return archive


def named_for_containerd(archive, out, name):
    """Copies an oci-archive, adding the io.containerd.image.name annotation `ctr images
    import` reads: skopeo's archive names the image only by org.opencontainers.image.ref.name
    ("pressured:0.1.0"), which ctr does not turn into a reference by itself. The blobs,
    and so the manifest digest, are unchanged."""
    with tarfile.open(archive) as src, tarfile.open(out + ".tmp", "w", format=tarfile.PAX_FORMAT) as dst:
        for m in src.getmembers():
            data = src.extractfile(m).read() if m.isfile() else None
            if m.name.lstrip("./") == "index.json":
                index = json.loads(data)
                if len(index.get("manifests", [])) != 1:
                    raise EnvironmentError(f"{archive}: expected one manifest in index.json, "
                                           f"found {len(index.get('manifests', []))}")
                index["manifests"][0].setdefault("annotations", {})["io.containerd.image.name"] = name
                data = json.dumps(index).encode()
                m.size = len(data)
            dst.addfile(m, io.BytesIO(data) if data is not None else None)
    os.rename(out + ".tmp", out)


def _build_node_disk(workloads, pressured_image=None):
    k8s = kubernetes_dir()
    rt = runtime_binaries()
    inputs = {"kubelet": os.path.join(k8s, "kubelet"), "kubectl": os.path.join(k8s, "kubectl"), **rt}
    img = os.path.join(OUT, "node-daemonset.img" if pressured_image else "node.img")
    newest = max(os.path.getmtime(p) for p in list(inputs.values()) + list(workloads) + [__file__] +
                 ([pressured_image] if pressured_image else []))
    if os.path.exists(img) and os.path.getmtime(img) >= newest:
        return img
    stage = img[:-len(".img")] + "-stage"
    shutil.rmtree(stage, ignore_errors=True)
    os.makedirs(os.path.join(stage, "bin"))
    os.makedirs(os.path.join(stage, "images"))
    for name, src in inputs.items():
        dst = os.path.join(stage, "bin", name)
        if subprocess.run(["strip", "--strip-debug", "-o", dst, src], capture_output=True).returncode != 0:
            shutil.copy2(src, dst)
        os.chmod(dst, 0o755)
    by_name = {os.path.basename(w): w for w in workloads}
    if "pause" not in by_name:
        raise EnvironmentError("the pause workload (vmtests/workloads/pause.c) was not built")
    oci_archive(os.path.join(stage, "images", "pause.tar"), PAUSE_IMAGE, {"pause": by_name["pause"]},
                entrypoint=["/pause"])
    files = {"bin/busybox": "/usr/bin/busybox"}
    files.update({"bin/" + n: p for n, p in by_name.items() if n not in ("pause", "sampler")})
    oci_archive(os.path.join(stage, "images", "workload.tar"), WORKLOAD_IMAGE, files,
                symlinks=[("bin/sh", "busybox"), ("bin/sleep", "busybox"), ("bin/cat", "busybox"),
                          ("bin/touch", "busybox"), ("bin/test", "busybox"), ("bin/[", "busybox")])
    if pressured_image:
        named_for_containerd(pressured_image, os.path.join(stage, "images", "pressured.tar"), PRESSURED_IMAGE)
    size_mb = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(stage) for f in fs) // 1048576
    size_mb += 1024  # containerd's content store and snapshots (the images again), kubelet state, logs
    log(f"creating the node disk ({size_mb} MiB ext4: kubelet, kubectl, containerd, runc, images)")
    run_quiet(["truncate", "-s", f"{size_mb}M", img + ".tmp"])
    run_quiet(["mkfs.ext4", "-q", "-F", "-L", "vmtnode", "-d", stage, img + ".tmp"])
    os.rename(img + ".tmp", img)
    shutil.rmtree(stage)
    return img


# Where the guest finds deploy/ and the test overlay (vmtests/deploy/), at the same
# relative paths as in the repository so the overlays' relative bases hold.
GUEST_REPO = "/vmt/repo"


def deploy_files():
    """{guest path: text} of what the guest applies: the test overlay vmtests/deploy/ and
    the uninstall deploy/uninstall/, with every kustomization they reach through `bases:`
    or a directory in `resources:` (deploy/overlays/before-1.30/, deploy/base/), each
    directory's .yaml files. Following the references rather than naming directories keeps
    the copy whole when the layout of deploy/ changes."""
    out = {}
    todo = [os.path.join("vmtests", "deploy"), os.path.join("deploy", "uninstall")]
    seen = set()
    while todo:
        rel = os.path.normpath(todo.pop())
        if rel in seen:
            continue
        seen.add(rel)
        d = os.path.join(ROOT, rel)
        if rel.startswith("..") or not os.path.isfile(os.path.join(d, "kustomization.yaml")):
            raise EnvironmentError(f"{rel}: no kustomization.yaml inside the repository (a base the test overlay names)")
        for name in sorted(os.listdir(d)):
            if name.endswith((".yaml", ".yml")) and os.path.isfile(os.path.join(d, name)):
                with open(os.path.join(d, name)) as f:
                    out[f"{GUEST_REPO}/{rel}/{name}"] = f.read()
        with open(os.path.join(d, "kustomization.yaml")) as f:
            kust = yaml.safe_load(f) or {}
        for ref in (kust.get("bases") or []) + (kust.get("resources") or []):
            if os.path.isdir(os.path.join(d, ref)):
                todo.append(os.path.join(rel, ref))
    if f"{GUEST_REPO}/vmtests/deploy/kustomization.yaml" not in out:
        raise EnvironmentError("vmtests/deploy/kustomization.yaml (the test overlay) is missing")
    return out


def run_quiet(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise EnvironmentError(f"{' '.join(cmd)} failed: {r.stderr.strip()}")


def initramfs_needs():
    """(executables for /usr/bin in the initramfs with their libraries, executables whose
    libraries only are needed: they live on the node disk)."""
    rt = runtime_binaries()
    return ({"/usr/bin/runc": rt["runc"], "/usr/bin/du": "/usr/bin/du", "/usr/bin/nice": "/usr/bin/nice"},
            [rt["containerd"], rt["containerd-shim-runc-v2"], rt["ctr"]])


def qemu_node_args(disk, api_port):
    """The node disk and the restricted user-mode network: the guest reaches exactly one
    host address, 127.0.0.1:<api_port>, through the guestfwd rule. The rule runs a
    command per connection: a guestfwd to "tcp:host:port" is one chardev connected
    once, so only the guest's first connection got through (kubectl's first call
    worked, then every one, the kubelet's too, timed out in the TLS handshake)."""
    return ["-drive", f"file={disk},if=virtio,format=raw,snapshot=on",
            "-nic", f"user,model=virtio-net-pci,restrict=on,"
                    f"guestfwd=tcp:{GUEST_API_ADDR}:{GUEST_API_PORT}-cmd:busybox nc 127.0.0.1 {api_port}"]


# ---------------------------------------------------------------------------
# control plane on the host's 127.0.0.1
# ---------------------------------------------------------------------------

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class ControlPlane:
    """etcd + kube-apiserver 1.20.2 on 127.0.0.1 with their own CA, for one vmtests run.
    stop() kills both (also called from the harness's signal handler)."""

    def __init__(self, controllers=False):
        self.dir = tempfile.mkdtemp(prefix="pressured-vmt-k8s-")
        self.procs = []
        self.port = None
        # kube-controller-manager and kube-scheduler beside the apiserver (the daemonset
        # contender: the DaemonSet controller creates the pod, the scheduler binds it,
        # the token controller issues its ServiceAccount token).
        self.controllers = controllers

    def _spawn(self, argv, logname):
        lf = open(os.path.join(self.dir, logname), "w")
        p = subprocess.Popen(argv, stdout=lf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             start_new_session=True)
        self.procs.append(p)
        return p

    def _tail(self, logname, n=2500):
        try:
            with open(os.path.join(self.dir, logname), errors="replace") as f:
                return f.read()[-n:]
        except OSError:
            return ""

    def start(self):
        k8s = kubernetes_dir(controllers=self.controllers)
        etcd = shutil.which("etcd")
        if not etcd:
            raise EnvironmentError("etcd is missing (Debian package etcd-server; scripts/setup)")
        d = self.dir
        # The cluster's PKI comes from the one script the k8s tier uses too. The node and the
        # guest's tools use its system:masters identity: this is a throwaway cluster, and the
        # kubelet's Node authorizer is not under test.
        r = subprocess.run([os.path.join(ROOT, "scripts", "cluster-pki"), d, "--ca-name", "vmtests-ca",
                            "--san", f"IP:{GUEST_API_ADDR}"], capture_output=True, text=True)
        if r.returncode != 0:
            raise EnvironmentError("generating certificates failed: " + r.stderr[-2500:])
        ep, pp = free_port(), free_port()
        client, peer = f"http://127.0.0.1:{ep}", f"http://127.0.0.1:{pp}"
        self._spawn([etcd, "--name=vmt", f"--data-dir={d}/etcd", f"--listen-client-urls={client}",
                     f"--advertise-client-urls={client}", f"--listen-peer-urls={peer}",
                     f"--initial-advertise-peer-urls={peer}", f"--initial-cluster=vmt={peer}",
                     "--log-level=warn", "--logger=zap"], "etcd.log")
        self.port = free_port()
        self._spawn([os.path.join(k8s, "kube-apiserver"), "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
                     f"--secure-port={self.port}", "--insecure-port=0", f"--etcd-servers={client}",
                     f"--tls-cert-file={d}/server.crt", f"--tls-private-key-file={d}/server.key",
                     f"--client-ca-file={d}/ca.crt", "--authorization-mode=Node,RBAC",
                     f"--service-account-key-file={d}/sa.pub", f"--service-account-signing-key-file={d}/sa.key",
                     "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                     "--api-audiences=https://kubernetes.default.svc.cluster.local",
                     "--service-cluster-ip-range=10.96.0.0/24", "--endpoint-reconciler-type=none",
                     "--profiling=false", "--logtostderr=true", "--v=1"], "kube-apiserver.log")
        self.kubectl = os.path.join(k8s, "kubectl")
        with open(self.admin_kubeconfig(), "w") as f:
            f.write(self.kubeconfig(f"https://127.0.0.1:{self.port}", embed=False))
        deadline = time.monotonic() + 120
        last = ""
        while time.monotonic() < deadline:
            for p, name in zip(self.procs, ("etcd.log", "kube-apiserver.log")):
                if p.poll() is not None:
                    raise EnvironmentError(f"{name[:-4]} exited ({p.returncode}): {self._tail(name)}")
            try:
                r = self.kubectl_run(["get", "--raw", "/readyz"], timeout=20)
            except subprocess.TimeoutExpired:
                last = "kubectl get --raw /readyz: no answer in 20 s"
                continue
            if r.returncode == 0 and r.stdout.strip() == "ok":
                break
            last = (r.stdout + r.stderr).strip()[-300:]
            time.sleep(0.5)
        else:
            raise EnvironmentError(f"kube-apiserver not ready after 120 s ({last}): {self._tail('kube-apiserver.log')}")
        if self.controllers:
            self._start_controllers(k8s)
        # The scenarios' namespace, and its default ServiceAccount (without a controller-manager
        # nothing creates it; the ServiceAccount admission plugin wants it).
        for args in (["create", "namespace", "vmtests"], ["-n", "vmtests", "create", "serviceaccount", "default"]):
            r = self.kubectl_run(args, timeout=30)
            if r.returncode != 0 and "AlreadyExists" not in r.stderr:
                raise EnvironmentError(f"kubectl {' '.join(args)}: {r.stderr.strip()}")
        if self.controllers:
            self._wait_token("vmtests", "default")
        log(f"control plane up: kube-apiserver https://127.0.0.1:{self.port}, etcd {client}"
            f"{', kube-controller-manager, kube-scheduler' if self.controllers else ''} (dir {d})")
        return self

    # The controllers the daemonset contender needs, and the garbage collector and
    # namespace controller that `kubectl delete -k` relies on (the DaemonSet's pods,
    # the namespace's contents). No node lifecycle controller: it would taint and
    # evict on a TCG node that is slow to post its status, which is not under test.
    KCM_CONTROLLERS = "daemonset,serviceaccount,serviceaccount-token,namespace,garbagecollector"

    def _start_controllers(self, k8s):
        """kube-controller-manager and kube-scheduler on the host, talking to the apiserver
        on 127.0.0.1 with the throwaway PKI's admin identity (the control plane's own RBAC
        is not under test). Neither serves HTTP (--port=0 --secure-port=0): nothing scrapes
        them, and a fixed port would collide with a parallel run."""
        d = self.dir
        kcfg = self.admin_kubeconfig()
        self._spawn([os.path.join(k8s, "kube-controller-manager"), f"--kubeconfig={kcfg}",
                     f"--controllers={self.KCM_CONTROLLERS}", "--leader-elect=false",
                     "--use-service-account-credentials=false",
                     # The token controller signs the ServiceAccount tokens with the key whose
                     # public half the apiserver verifies (--service-account-key-file), and puts
                     # the cluster CA into each token Secret (the pod's ca.crt).
                     f"--service-account-private-key-file={d}/sa.key", f"--root-ca-file={d}/ca.crt",
                     "--port=0", "--secure-port=0", "--logtostderr=true", "--v=1"], "kube-controller-manager.log")
        self._spawn([os.path.join(k8s, "kube-scheduler"), f"--kubeconfig={kcfg}", "--leader-elect=false",
                     "--port=0", "--secure-port=0", "--logtostderr=true", "--v=1"], "kube-scheduler.log")

    def _wait_token(self, namespace, sa, timeout=180):
        """Waits (bounded) until the token controller has issued the ServiceAccount's token
        Secret: the proof that the controller-manager runs and signs with the right key."""
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            for p in self.procs[2:]:
                if p.poll() is not None:
                    name = p.args[0].rsplit("/", 1)[-1]
                    raise EnvironmentError(f"{name} exited ({p.returncode}): {self._tail(name + '.log')}")
            try:
                r = self.kubectl_run(["-n", namespace, "get", "serviceaccount", sa, "-o",
                                      "jsonpath={.secrets[*].name}"], timeout=20)
                last = (r.stdout + r.stderr).strip()
                if r.returncode == 0 and last:
                    return last
            except subprocess.TimeoutExpired:
                last = "kubectl: no answer in 20 s"
            time.sleep(1)
        raise EnvironmentError(f"no token for ServiceAccount {namespace}/{sa} after {timeout} s ({last}): "
                               f"{self._tail('kube-controller-manager.log')}")

    def admin_kubeconfig(self):
        return os.path.join(self.dir, "admin.kubeconfig")

    def kubectl_run(self, args, timeout=60):
        return subprocess.run([self.kubectl, "--kubeconfig", self.admin_kubeconfig()] + args, capture_output=True,
                              text=True, timeout=timeout)

    def kubeconfig(self, server, embed=True):
        d = self.dir
        if embed:
            import base64
            b = lambda p: base64.b64encode(open(os.path.join(d, p), "rb").read()).decode()  # noqa: E731
            cluster = f"    certificate-authority-data: {b('ca.crt')}\n"
            user = f"    client-certificate-data: {b('admin.crt')}\n    client-key-data: {b('admin.key')}\n"
        else:
            cluster = f"    certificate-authority: {d}/ca.crt\n"
            user = f"    client-certificate: {d}/admin.crt\n    client-key: {d}/admin.key\n"
        return ("apiVersion: v1\nkind: Config\ncurrent-context: vmt\nclusters:\n- name: vmt\n  cluster:\n"
                f"    server: {server}\n{cluster}users:\n- name: admin\n  user:\n{user}"
                "contexts:\n- name: vmt\n  context:\n    cluster: vmt\n    user: admin\n")

    def guest_kubeconfig(self):
        return self.kubeconfig(f"https://{GUEST_API_ADDR}:{GUEST_API_PORT}")

    def stop(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                    p.wait(timeout=10)
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    try:
                        os.killpg(p.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    p.wait()
        self.procs = []
        if os.environ.get("VMT_KEEP_K8S") != "1":
            shutil.rmtree(self.dir, ignore_errors=True)
