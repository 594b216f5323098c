#!/usr/bin/env python3
"""Validates deploy/: the Kubernetes manifests and the systemd unit.

kubectl's client-side dry run needs an API server for discovery, so it cannot
run offline; the manifests are checked here against a structural schema of
the fields they use (unknown keys are typos and fail), and for consistency:
  - every object: apiVersion/kind pair, name, namespace for namespaced kinds;
  - DaemonSet: selector matches the template, hostPID, system-node-critical,
    liveness /healthz and readiness /readyz on the port the ConfigMap's
    metrics.listen uses, scrape annotations with that port, every mount has a
    volume, the host paths pressured needs are mounted, the state file and
    procRoot live on mounts, capabilities drop ALL and add only documented ones;
    host /proc is read only except /proc/pressure (PSI triggers); seccomp is
    the shipped Localhost profile, never Unconfined, installed by an init
    container of the same image (`pressured install-seccomp`) into the
    kubelet's seccomp directory; AppArmor through the annotation every
    version from 1.20 accepts, never the 1.30+ field; the image is what
    scripts/image builds (pressured:<project version>); every host path is
    explained in docs/operations.md;
  - deploy/seccomp/pressured.json: an allow list (default errno) that has the
    calls pressured cannot run without and none that break out of a container;
  - RBAC: exactly the API calls the daemon makes, no wildcards, binding wired;
  - ConfigMap: its config.yaml passes `pressured check-config`;
  - `kubectl kustomize deploy/` renders (when kubectl is installed);
  - pressured.service: `systemd-analyze verify` (when available), same
    capability set as the DaemonSet, real-time scheduling allowed (the
    reactor is SCHED_FIFO), sd_notify with a watchdog, memory protected;
  - `pressured install-seccomp` writes deploy/seccomp/pressured.json byte for
    byte, is idempotent and refuses a directory that does not exist.
(The image's contents are checked against the binary by tests/deploy/image_test.py.)
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

API = {
    "Namespace": "v1", "ServiceAccount": "v1", "ConfigMap": "v1",
    "ClusterRole": "rbac.authorization.k8s.io/v1", "ClusterRoleBinding": "rbac.authorization.k8s.io/v1",
    "DaemonSet": "apps/v1",
}
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding"}
NAMESPACE = "pressured"

# The API calls pressured makes (userspace/k8s, userspace/pods) as (group, resource, verb).
EXPECTED_RBAC = {
    ("", "pods", "get"), ("", "pods", "list"), ("", "pods", "watch"),
    ("", "nodes", "get"), ("", "nodes", "patch"),
    ("", "pods/status", "patch"), ("", "pods/eviction", "create"), ("", "pods", "delete"),
    ("", "events", "create"), ("", "events", "patch"),
    ("events.k8s.io", "events", "create"), ("events.k8s.io", "events", "patch"),
    ("", "nodes/status", "get"), ("", "nodes/status", "patch"),
}
# Capabilities pressured may ask for; each must be explained in docs/operations.md.
ALLOWED_CAPS = {"BPF", "PERFMON", "SYS_RESOURCE", "KILL", "DAC_READ_SEARCH", "SYS_ADMIN", "SYS_PTRACE", "SYS_NICE",
                "IPC_LOCK"}
# The seccomp profile must allow these (pressured cannot work without them)
# and must not allow those (container escapes, kernel state).
SECCOMP_REQUIRED = {"bpf", "perf_event_open", "pidfd_open", "pidfd_send_signal", "epoll_wait", "epoll_ctl",
                    "timerfd_create", "signalfd4", "openat", "read", "write", "pread64", "accept4", "mlockall",
                    "sched_setscheduler", "getrandom", "statfs", "newfstatat", "clone3", "futex"}
SECCOMP_FORBIDDEN = {"mount", "umount2", "unshare", "setns", "ptrace", "init_module", "finit_module",
                     "delete_module", "kexec_load", "reboot", "pivot_root", "keyctl", "add_key", "open_by_handle_at",
                     "userfaultfd", "process_vm_writev"}
# Exactly these host paths, each used by pressured (docs/operations.md says what for).
REQUIRED_HOST_PATHS = {"/sys/fs/cgroup", "/sys/kernel/btf", "/proc", "/proc/pressure", "/var/lib/kubelet",
                       "/var/log/pods", "/var/lib/containerd", "/var/lib/pressured", "/var/lib/kubelet/seccomp"}
APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"
SECCOMP_PROFILE = "profiles/pressured.json"

# Allowed keys per structure (a subset of the Kubernetes schema: what a
# DaemonSet like this one may use). Unknown keys fail: they are typos.
S = {
    "metadata": {"name", "namespace", "labels", "annotations"},
    "ds_spec": {"selector", "updateStrategy", "template", "minReadySeconds", "revisionHistoryLimit"},
    "template": {"metadata", "spec"},
    "pod_spec": {"serviceAccountName", "priorityClassName", "hostPID", "hostNetwork", "hostIPC", "dnsPolicy",
                 "tolerations", "terminationGracePeriodSeconds", "containers", "initContainers", "volumes",
                 "nodeSelector", "affinity", "securityContext", "automountServiceAccountToken"},
    "container": {"name", "image", "imagePullPolicy", "args", "command", "env", "ports", "livenessProbe",
                  "readinessProbe", "startupProbe", "resources", "securityContext", "volumeMounts"},
    "probe": {"httpGet", "initialDelaySeconds", "periodSeconds", "timeoutSeconds", "failureThreshold",
              "successThreshold"},
    "httpGet": {"path", "port", "scheme", "host"},
    "port": {"name", "containerPort", "hostPort", "protocol"},
    "security": {"runAsUser", "runAsNonRoot", "privileged", "allowPrivilegeEscalation", "readOnlyRootFilesystem",
                 "capabilities", "seccompProfile"},
    "mount": {"name", "mountPath", "readOnly", "mountPropagation", "subPath"},
    "volume": {"name", "hostPath", "configMap"},
    "hostPath": {"path", "type"},
    "rule": {"apiGroups", "resources", "verbs", "resourceNames"},
}
HOSTPATH_TYPES = {"", "Directory", "DirectoryOrCreate", "File", "FileOrCreate", "Socket", "CharDevice",
                  "BlockDevice"}


class Checker:
    def __init__(self):
        self.errors = []

    def fail(self, msg):
        self.errors.append(msg)

    def keys(self, obj, schema, where):
        if not isinstance(obj, dict):
            self.fail(f"{where}: expected a mapping, got {type(obj).__name__}")
            return
        for k in obj:
            if k not in S[schema]:
                self.fail(f"{where}: unknown field {k!r}")


def load_manifests(deploy):
    docs = []
    for name in sorted(os.listdir(deploy)):
        if not name.endswith(".yaml") or name == "kustomization.yaml":
            continue
        with open(os.path.join(deploy, name)) as f:
            for d in yaml.safe_load_all(f):
                if d:
                    docs.append((name, d))
    return docs


def listen_port(listen):
    m = re.search(r":(\d+)$", listen or "")
    return int(m.group(1)) if m else None


def check_objects(c, docs):
    by_kind = {}
    for fname, d in docs:
        kind = d.get("kind")
        where = f"{fname}: {kind}/{d.get('metadata', {}).get('name')}"
        if kind not in API:
            c.fail(f"{where}: unexpected kind")
            continue
        if d.get("apiVersion") != API[kind]:
            c.fail(f"{where}: apiVersion {d.get('apiVersion')!r}, expected {API[kind]}")
        md = d.get("metadata", {})
        c.keys(md, "metadata", where + " metadata")
        if not md.get("name"):
            c.fail(f"{where}: no metadata.name")
        if kind in CLUSTER_SCOPED and "namespace" in md:
            c.fail(f"{where}: cluster-scoped object with a namespace")
        if kind not in CLUSTER_SCOPED and md.get("namespace") != NAMESPACE:
            c.fail(f"{where}: namespace {md.get('namespace')!r}, expected {NAMESPACE}")
        by_kind.setdefault(kind, []).append(d)
    for kind in API:
        if kind not in by_kind:
            c.fail(f"no {kind} in deploy/")
    return by_kind


def check_rbac(c, by_kind):
    role = (by_kind.get("ClusterRole") or [{}])[0]
    granted = set()
    for i, r in enumerate(role.get("rules", [])):
        c.keys(r, "rule", f"ClusterRole rule {i}")
        for g in r.get("apiGroups", []):
            for res in r.get("resources", []):
                for v in r.get("verbs", []):
                    if "*" in (g, res, v):
                        c.fail(f"ClusterRole: wildcard in rule {i}")
                    granted.add((g, res, v))
    for extra in sorted(granted - EXPECTED_RBAC):
        c.fail(f"ClusterRole grants {extra}, which pressured does not use")
    for missing in sorted(EXPECTED_RBAC - granted):
        c.fail(f"ClusterRole lacks {missing}, which pressured uses")
    binding = (by_kind.get("ClusterRoleBinding") or [{}])[0]
    sa = (by_kind.get("ServiceAccount") or [{}])[0].get("metadata", {})
    if binding.get("roleRef", {}).get("name") != role.get("metadata", {}).get("name") or \
            binding.get("roleRef", {}).get("kind") != "ClusterRole":
        c.fail("ClusterRoleBinding does not reference the ClusterRole")
    subjects = binding.get("subjects", [])
    if not any(s.get("kind") == "ServiceAccount" and s.get("name") == sa.get("name") and
               s.get("namespace") == sa.get("namespace") for s in subjects):
        c.fail("ClusterRoleBinding does not bind the ServiceAccount")
    return sa.get("name")


def project_version(source_dir):
    with open(os.path.join(source_dir, "CMakeLists.txt")) as f:
        return re.search(r"project\(pressured VERSION (\S+)", f.read()).group(1)


def check_init_container(c, pod, main, volumes):
    """The init container installs the main container's Localhost seccomp profile on the node."""
    inits = pod.get("initContainers", [])
    if len(inits) != 1 or inits[0].get("name") != "install-seccomp":
        c.fail("pod spec: expected one init container, install-seccomp (it puts the seccomp profile on the node)")
        return
    ic = inits[0]
    w = "init container install-seccomp"
    c.keys(ic, "container", w)
    if ic.get("image") != main.get("image"):
        c.fail(f"{w}: image {ic.get('image')!r} is not the main container's {main.get('image')!r} "
               f"(the profile must be the one of the binary that runs under it)")
    args = ic.get("args", [])
    dir_arg = next((a.split("=", 1)[1] for a in args if a.startswith("--dir=")), None)
    if not args or args[0] != "install-seccomp" or not dir_arg:
        c.fail(f"{w}: args {args} do not run `install-seccomp --dir=...`")
        return
    mount = next((m for m in ic.get("volumeMounts", []) if m.get("mountPath") == dir_arg), None)
    vol = volumes.get(mount.get("name")) if mount else None
    host = (vol or {}).get("hostPath", {}).get("path", "")
    if not mount or mount.get("readOnly") or not host.endswith("/seccomp"):
        c.fail(f"{w}: --dir={dir_arg} is not a writable mount of the kubelet's seccomp directory "
               f"(<kubelet root>/seccomp), got {host!r}")
    sc = ic.get("securityContext", {})
    c.keys(sc, "security", w + " securityContext")
    if sc.get("seccompProfile", {}).get("type") != "RuntimeDefault":
        c.fail(f"{w}: seccompProfile must be RuntimeDefault (the Localhost profile does not exist yet)")
    if sc.get("privileged") or sc.get("allowPrivilegeEscalation") is not False:
        c.fail(f"{w}: must not be privileged nor allow privilege escalation")
    if sc.get("capabilities", {}).get("drop") != ["ALL"] or sc.get("capabilities", {}).get("add"):
        c.fail(f"{w}: needs no capability (drop ALL, add none)")


def check_daemonset(c, ds, config, sa_name, cm_name, operations_md, version=None):
    spec = ds.get("spec", {})
    c.keys(spec, "ds_spec", "DaemonSet.spec")
    tmpl = spec.get("template", {})
    c.keys(tmpl, "template", "DaemonSet.spec.template")
    labels = tmpl.get("metadata", {}).get("labels", {})
    sel = spec.get("selector", {}).get("matchLabels", {})
    if not sel or any(labels.get(k) != v for k, v in sel.items()):
        c.fail("DaemonSet selector does not match the template labels")
    pod = tmpl.get("spec", {})
    c.keys(pod, "pod_spec", "pod spec")
    if pod.get("hostPID") is not True:
        c.fail("pod spec: hostPID must be true")
    if pod.get("priorityClassName") != "system-node-critical":
        c.fail("pod spec: priorityClassName must be system-node-critical")
    if pod.get("serviceAccountName") != sa_name:
        c.fail(f"pod spec: serviceAccountName {pod.get('serviceAccountName')!r} is not {sa_name!r}")
    if pod.get("hostNetwork") and pod.get("dnsPolicy") != "ClusterFirstWithHostNet":
        c.fail("pod spec: hostNetwork needs dnsPolicy ClusterFirstWithHostNet")

    port = listen_port(config.get("metrics", {}).get("listen", "0.0.0.0:9847"))
    ann = tmpl.get("metadata", {}).get("annotations", {})
    if ann.get("prometheus.io/scrape") != "true":
        c.fail('template annotation prometheus.io/scrape must be "true"')
    if ann.get("prometheus.io/port") != str(port):
        c.fail(f"template annotation prometheus.io/port {ann.get('prometheus.io/port')!r} != metrics port {port}")
    if ann.get("prometheus.io/path", "/metrics") != "/metrics":
        c.fail("template annotation prometheus.io/path must be /metrics")
    names = [ct.get("name") for ct in pod.get("containers", [])]
    for k, v in ann.items():
        if k.startswith(APPARMOR_ANNOTATION) and k[len(APPARMOR_ANNOTATION):] not in names + ["install-seccomp"]:
            c.fail(f"annotation {k}: no such container")
    for n in names:
        if ann.get(APPARMOR_ANNOTATION + n) != "unconfined":
            c.fail(f"template annotation {APPARMOR_ANNOTATION}{n} must be \"unconfined\" (the runtime's default "
                   f"AppArmor profile blocks PSI trigger writes)")

    volumes = {}
    for v in pod.get("volumes", []):
        c.keys(v, "volume", f"volume {v.get('name')}")
        volumes[v.get("name")] = v
        if "hostPath" in v:
            c.keys(v["hostPath"], "hostPath", f"volume {v.get('name')}.hostPath")
            if v["hostPath"].get("type", "") not in HOSTPATH_TYPES:
                c.fail(f"volume {v.get('name')}: hostPath type {v['hostPath'].get('type')!r}")
    host_paths = {v["hostPath"]["path"] for v in volumes.values() if "hostPath" in v}
    for p in sorted(REQUIRED_HOST_PATHS - host_paths):
        c.fail(f"pod spec: host path {p} is not mounted")
    for p in sorted(host_paths - REQUIRED_HOST_PATHS):
        c.fail(f"pod spec: host path {p} is mounted, and nothing in pressured uses it")
    for p in sorted(host_paths):
        if f"`{p}`" not in operations_md:
            c.fail(f"pod spec: host path {p} is not explained in docs/operations.md")

    containers = pod.get("containers", [])
    if len(containers) != 1:
        c.fail("pod spec: expected one container")
    elif containers:
        check_init_container(c, pod, containers[0], volumes)
        if version and containers[0].get("image") != f"pressured:{version}":
            c.fail(f"container image {containers[0].get('image')!r} is not pressured:{version}, the name "
                   f"scripts/image gives (operators override it with kustomize `images:`)")
    caps_added = set()
    for ct in containers:
        w = f"container {ct.get('name')}"
        c.keys(ct, "container", w)
        named = {}
        for p in ct.get("ports", []):
            c.keys(p, "port", w + " port")
            named[p.get("name")] = p.get("containerPort")
        if port not in named.values():
            c.fail(f"{w}: no containerPort {port} (metrics.listen)")
        for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
            pr = ct.get(probe)
            if not pr:
                c.fail(f"{w}: no {probe}")
                continue
            c.keys(pr, "probe", f"{w} {probe}")
            hg = pr.get("httpGet", {})
            c.keys(hg, "httpGet", f"{w} {probe}.httpGet")
            if hg.get("path") != path:
                c.fail(f"{w}: {probe} path {hg.get('path')!r}, expected {path}")
            pp = hg.get("port")
            pp = named.get(pp) if isinstance(pp, str) else pp
            if pp != port:
                c.fail(f"{w}: {probe} port resolves to {pp}, metrics listen on {port}")
        sc = ct.get("securityContext", {})
        if "appArmorProfile" in sc:
            c.fail(f"{w}: securityContext.appArmorProfile exists from Kubernetes 1.30 only (1.20-1.29 reject it "
                   f"under validation); use the annotation")
            sc = {k: v for k, v in sc.items() if k != "appArmorProfile"}
        c.keys(sc, "security", w + " securityContext")
        if sc.get("privileged"):
            c.fail(f"{w}: privileged; use capabilities")
        if sc.get("allowPrivilegeEscalation") is not False:
            c.fail(f"{w}: allowPrivilegeEscalation must be false")
        caps = sc.get("capabilities", {})
        if caps.get("drop") != ["ALL"]:
            c.fail(f"{w}: capabilities must drop ALL")
        caps_added = set(caps.get("add", []))
        for cap in sorted(caps_added):
            if cap not in ALLOWED_CAPS:
                c.fail(f"{w}: capability {cap} is not one pressured needs")
            if f"CAP_{cap}" not in operations_md:
                c.fail(f"{w}: capability CAP_{cap} is not explained in docs/operations.md")
        for need in ("BPF", "PERFMON", "KILL"):
            if need not in caps_added and "SYS_ADMIN" not in caps_added:
                c.fail(f"{w}: capability {need} missing (BPF and killing would not work)")

        mounts = {}
        for m in ct.get("volumeMounts", []):
            c.keys(m, "mount", f"{w} mount {m.get('name')}")
            if m.get("name") not in volumes:
                c.fail(f"{w}: volumeMount {m.get('name')} has no volume")
            mounts[m.get("mountPath")] = m
        init_mounts = {m.get("name") for ic in pod.get("initContainers", []) for m in ic.get("volumeMounts", [])}
        for vname in volumes:
            if vname not in {m.get("name") for m in mounts.values()} | init_mounts:
                c.fail(f"volume {vname} is not mounted")

        def on_mount(path, writable):
            best = None
            for mp, m in mounts.items():
                if path == mp or path.startswith(mp.rstrip("/") + "/"):
                    if best is None or len(mp) > len(best[0]):
                        best = (mp, m)
            if best is None:
                return False
            return not (writable and best[1].get("readOnly"))

        state = config.get("daemon", {}).get("stateFile", "/var/lib/pressured/state.json")
        if not on_mount(os.path.dirname(state), writable=True):
            c.fail(f"{w}: the state file {state} is not on a writable mount")
        for key, default, writable in (("cgroupMount", "/sys/fs/cgroup", True), ("procRoot", "/proc", False),
                                       ("nodefsPath", "/var/lib/kubelet", False),
                                       ("podLogsPath", "/var/log/pods", False)):
            path = config.get("cgroup", {}).get(key, default)
            if not on_mount(path, writable):
                c.fail(f"{w}: cgroup.{key} {path} is not on a{' writable' if writable else ''} host mount")
        # Host /proc: read only, except /proc/pressure (PSI triggers are writes).
        proc_root = config.get("cgroup", {}).get("procRoot", "/proc")
        if on_mount(proc_root, writable=True):
            c.fail(f"{w}: host /proc ({proc_root}) is mounted writable; only {proc_root}/pressure needs writes")
        if not on_mount(proc_root + "/pressure", writable=True):
            c.fail(f"{w}: {proc_root}/pressure is not on a writable mount (PSI triggers)")
        seccomp = sc.get("seccompProfile", {})
        if seccomp.get("type") != "Localhost" or seccomp.get("localhostProfile") != SECCOMP_PROFILE:
            c.fail(f"{w}: seccompProfile must be Localhost profiles/pressured.json (deploy/seccomp), "
                   f"not {seccomp}")

        # The config file the args name is the ConfigMap's key, mounted.
        cfg_arg = next((a.split("=", 1)[1] for a in ct.get("args", []) if a.startswith("--config=")), None)
        cfg_mount = next((mp for mp, m in mounts.items()
                          if volumes.get(m.get("name"), {}).get("configMap", {}).get("name") == cm_name), None)
        if not cfg_arg or not cfg_mount or cfg_arg != os.path.join(cfg_mount, "config.yaml"):
            c.fail(f"{w}: --config {cfg_arg!r} is not config.yaml of the mounted ConfigMap ({cfg_mount})")
    return caps_added


def check_seccomp(c, path):
    import json
    try:
        with open(path) as f:
            prof = json.load(f)
    except (OSError, ValueError) as e:
        c.fail(f"seccomp profile {path}: {e}")
        return
    if prof.get("defaultAction") not in ("SCMP_ACT_ERRNO", "SCMP_ACT_KILL_PROCESS", "SCMP_ACT_KILL"):
        c.fail(f"seccomp profile: defaultAction {prof.get('defaultAction')!r} is not a deny")
    allowed = set()
    for rule in prof.get("syscalls", []):
        if rule.get("action") == "SCMP_ACT_ALLOW":
            if rule.get("args"):
                continue  # conditional: not a blanket allow
            allowed |= set(rule.get("names", []))
    for name in sorted(SECCOMP_REQUIRED - allowed):
        c.fail(f"seccomp profile: {name} is not allowed (pressured needs it)")
    for name in sorted(SECCOMP_FORBIDDEN & allowed):
        c.fail(f"seccomp profile: {name} is allowed (nothing in pressured needs it)")
    if not c.errors:
        print(f"seccomp profile: {len(allowed)} calls allowed")


def check_config_with_pressured(c, text, pressured):
    if not pressured:
        return
    if not os.access(pressured, os.X_OK):
        c.fail(f"{pressured} is not executable: cannot run check-config on the ConfigMap")
        return
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(text)
        path = f.name
    try:
        r = subprocess.run([pressured, "check-config", "--config", path], capture_output=True, text=True,
                           timeout=30)
        out = (r.stdout + r.stderr).strip()
        if r.returncode != 0 or "not implemented" in out:
            c.fail(f"pressured check-config rejects the ConfigMap's config.yaml (exit {r.returncode}): {out[-400:]}")
        else:
            print("ConfigMap config.yaml accepted by pressured check-config")
    finally:
        os.unlink(path)


def check_systemd(c, unit_path, pressured, caps_added):
    with open(unit_path) as f:
        text = f.read()
    bounding = set(re.search(r"^CapabilityBoundingSet=(.*)$", text, re.M).group(1).split()) \
        if re.search(r"^CapabilityBoundingSet=", text, re.M) else set()
    want = {f"CAP_{x}" for x in caps_added}
    if bounding != want:
        c.fail(f"pressured.service CapabilityBoundingSet {sorted(bounding)} differs from the DaemonSet's {sorted(want)}")
    for line in ("NoNewPrivileges=yes", "ProtectSystem=strict", "ExecReload=/bin/kill -HUP $MAINPID", "Type=notify",
                 "RestrictRealtime=no", "OOMScoreAdjust=-999"):
        if line not in text.splitlines():
            c.fail(f"pressured.service: missing {line}")
    settings = [l.strip() for l in text.splitlines() if l.strip() and not l.strip().startswith("#")]
    for forbidden in ("ProtectControlGroups=yes", "ProtectKernelTunables=yes", "PrivateNetwork=yes",
                      "ProtectProc=invisible", "RestrictRealtime=yes"):
        if forbidden in settings:
            c.fail(f"pressured.service: {forbidden} would break cgroup writes, metrics, killing or the RT reactor")
    for prefix, why in (("WatchdogSec=", "the reactor feeds systemd's watchdog"),
                        ("MemoryMin=", "the daemon's memory must be protected from reclaim")):
        if not any(l.startswith(prefix) for l in settings):
            c.fail(f"pressured.service: no {prefix} ({why})")
    if "CAP_IPC_LOCK" in bounding and not any(l.startswith("LimitMEMLOCK=") for l in settings):
        c.fail("pressured.service: CAP_IPC_LOCK without LimitMEMLOCK=")
    analyze = shutil.which("systemd-analyze")
    if not analyze:
        print("NOTE: systemd-analyze not installed; unit checked structurally only")
        return
    exe = pressured if pressured and os.access(pressured, os.X_OK) else "/bin/true"
    with tempfile.TemporaryDirectory() as d:
        unit = os.path.join(d, "pressured.service")
        with open(unit, "w") as f:
            f.write(text.replace("/usr/local/bin/pressured", exe))
        r = subprocess.run([analyze, "verify", unit], capture_output=True, text=True, timeout=60)
        # verify also reports unrelated units' problems on some hosts; only ours count.
        ours = [l for l in (r.stdout + r.stderr).splitlines() if "pressured.service" in l]
        if r.returncode != 0 or ours:
            c.fail("systemd-analyze verify pressured.service: " + "; ".join(ours or [(r.stdout + r.stderr)[-300:]]))
        else:
            print("systemd-analyze verify: ok")


def check_install_seccomp(c, pressured, profile_path):
    """`pressured install-seccomp` installs the shipped profile where the DaemonSet's Localhost profile points."""
    if not pressured or not os.access(pressured, os.X_OK):
        print("NOTE: no pressured binary: install-seccomp not run")
        return
    with open(profile_path) as f:
        shipped = f.read()
    with tempfile.TemporaryDirectory() as d:
        def run(target):
            r = subprocess.run([pressured, "install-seccomp", "--dir", target], capture_output=True, text=True,
                               timeout=30)
            return r.returncode, (r.stdout + r.stderr).strip()
        rc, out = run(d)
        dest = os.path.join(d, SECCOMP_PROFILE)
        if rc != 0 or not os.path.exists(dest):
            c.fail(f"pressured install-seccomp --dir {d}: exit {rc}: {out[-300:]}")
            return
        with open(dest) as f:
            if f.read() != shipped:
                c.fail("pressured install-seccomp wrote a profile that differs from deploy/seccomp/pressured.json")
        if os.stat(dest).st_mode & 0o777 != 0o644:
            c.fail(f"pressured install-seccomp: mode {oct(os.stat(dest).st_mode & 0o777)}, expected 0644")
        rc, out = run(d)
        if rc != 0 or "up to date" not in out:
            c.fail(f"pressured install-seccomp a second time: exit {rc}: {out[-300:]}")
        with open(dest, "w") as f:
            f.write("{}")
        rc, out = run(d)
        with open(dest) as f:
            if rc != 0 or f.read() != shipped:
                c.fail(f"pressured install-seccomp did not replace a stale profile: exit {rc}: {out[-300:]}")
        rc, out = run(os.path.join(d, "missing"))
        if rc == 0 or "not a directory" not in out:
            c.fail(f"pressured install-seccomp into a missing directory: exit {rc}: {out[-300:]}")
    if not c.errors:
        print("pressured install-seccomp: installs the shipped profile, idempotent, refuses a missing directory")


def self_test(by_kind, config, sa, cm, ops, version):
    """The checks must reject broken manifests."""
    import copy
    problems = []
    mutations = {
        "a liveness probe on the wrong port":
            lambda ds: ds["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["httpGet"].update(port=8080),
        "a typo in a container field":
            lambda ds: ds["spec"]["template"]["spec"]["containers"][0].update(livenesProbe={}),
        "privileged: true":
            lambda ds: ds["spec"]["template"]["spec"]["containers"][0]["securityContext"].update(privileged=True),
        "no hostPID": lambda ds: ds["spec"]["template"]["spec"].update(hostPID=False),
        "seccomp Unconfined":
            lambda ds: ds["spec"]["template"]["spec"]["containers"][0]["securityContext"].update(
                seccompProfile={"type": "Unconfined"}),
        "host /proc writable":
            lambda ds: [m.pop("readOnly", None) for m in ds["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
                        if m.get("name") == "proc"],
        "the appArmorProfile field":
            lambda ds: ds["spec"]["template"]["spec"]["containers"][0]["securityContext"].update(
                appArmorProfile={"type": "Unconfined"}),
        "no AppArmor annotation":
            lambda ds: ds["spec"]["template"]["metadata"]["annotations"].pop(APPARMOR_ANNOTATION + "pressured"),
        "no init container": lambda ds: ds["spec"]["template"]["spec"].pop("initContainers"),
        "an init container of another image":
            lambda ds: ds["spec"]["template"]["spec"]["initContainers"][0].update(image="busybox"),
        "an image scripts/image does not build":
            lambda ds: [ct.update(image="ghcr.io/x/pressured:0.0.1") for ct in
                        ds["spec"]["template"]["spec"]["containers"] + ds["spec"]["template"]["spec"]["initContainers"]],
        "a bpffs mount nothing uses":
            lambda ds: ds["spec"]["template"]["spec"]["volumes"].append(
                {"name": "bpffs", "hostPath": {"path": "/sys/fs/bpf"}}),
    }
    for what, mutate in mutations.items():
        ds = copy.deepcopy(by_kind["DaemonSet"][0])
        mutate(ds)
        c = Checker()
        check_daemonset(c, ds, config, sa, cm, ops, version)
        if not c.errors:
            problems.append(f"self-test: a DaemonSet with {what} was accepted")
    bad = copy.deepcopy(by_kind)
    bad["ClusterRole"][0]["rules"].append({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]})
    c = Checker()
    check_rbac(c, bad)
    if not c.errors:
        problems.append("self-test: a ClusterRole granting secrets was accepted")
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--pressured", help="built pressured binary (check-config, systemd verify, libraries)")
    args = ap.parse_args()
    if args.pressured:
        args.pressured = os.path.abspath(args.pressured)
    deploy = os.path.join(args.source_dir, "deploy")
    with open(os.path.join(args.source_dir, "docs", "operations.md")) as f:
        ops = f.read()

    c = Checker()
    docs = load_manifests(deploy)
    by_kind = check_objects(c, docs)
    if c.errors:
        print("\n".join("FAIL: " + e for e in c.errors))
        return 1
    cm = by_kind["ConfigMap"][0]
    text = cm.get("data", {}).get("config.yaml")
    if not text:
        print("FAIL: ConfigMap has no config.yaml")
        return 1
    config = yaml.safe_load(text)
    sa = check_rbac(c, by_kind)
    version = project_version(args.source_dir)
    c.errors += self_test(by_kind, config, sa, cm["metadata"]["name"], ops, version)
    caps = check_daemonset(c, by_kind["DaemonSet"][0], config, sa, cm["metadata"]["name"], ops, version)
    check_config_with_pressured(c, text, args.pressured)

    kubectl = shutil.which("kubectl")
    if kubectl:
        r = subprocess.run([kubectl, "kustomize", deploy], capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            c.fail(f"kubectl kustomize deploy/: {r.stderr.strip()[-300:]}")
        else:
            rendered = [d for d in yaml.safe_load_all(r.stdout) if d]
            if len(rendered) != len(docs):
                c.fail(f"kubectl kustomize rendered {len(rendered)} objects, deploy/ has {len(docs)}")
            else:
                print(f"kubectl kustomize: {len(rendered)} objects")
    else:
        print("NOTE: kubectl not installed; kustomization not rendered")

    check_systemd(c, os.path.join(deploy, "pressured.service"), args.pressured, caps)
    check_seccomp(c, os.path.join(deploy, "seccomp", "pressured.json"))
    check_install_seccomp(c, args.pressured, os.path.join(deploy, "seccomp", "pressured.json"))

    if c.errors:
        for e in c.errors:
            print("FAIL:", e)
        return 1
    print(f"OK: {len(docs)} objects, unit, seccomp profile and its installer checked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
