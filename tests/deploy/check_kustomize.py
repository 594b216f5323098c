#!/usr/bin/env python3
"""kustomize: the operator's overlay of deploy/, and deploy/monitoring/ against dashboards/ and deploy/.

  - deploy/base/ holds the objects; deploy/ (1.30+, the current kubectl only: `resources:` with a
    directory), deploy/overlays/before-1.30 and deploy/overlays/cri-o are overlays of it. The current
    kubectl renders deploy/ as deploy/base/ itself;
  - an overlay whose only content is an `images:` entry (what docs/operations.md tells operators to
    write) renders, with kubectl 1.20 over deploy/overlays/before-1.30 (`bases:`, its kustomize 2.0.3
    takes no directory in `resources:`) and with the current kubectl over deploy/ and over
    deploy/overlays/before-1.30 (`resources:`), to its base with both containers' image (the init
    container's and pressured's) replaced and nothing else changed;

  - the generated files are what deploy/monitoring/generate.py makes of dashboards/ now (no drift),
    and the check notices a changed rules file (self-test);
  - `kubectl kustomize deploy/monitoring` renders with the kubectl on PATH and with kubectl 1.20
    (scripts/build-control-plane; its kustomize is 2.0.3): a PodMonitor, a PrometheusRule, a ConfigMap;
  - the PrometheusRule's spec is the rules file (same groups) and passes `promtool check rules`;
  - the ConfigMap is labelled grafana_dashboard: "1" and holds dashboards/pressured.json byte for byte;
  - the PodMonitor selects the DaemonSet's pods and port, keeps pressured's labels, puts the node in
    `node` and names the job as the rules' job="pressured" selectors expect;
  - the DaemonSet keeps the prometheus.io/* annotations for a plain Prometheus;
  - the base sets AppArmor through the 1.30+ securityContext field; deploy/overlays/before-1.30 renders (both
    kubectls) to the base with only that field turned into the annotation;
  - deploy/overlays/cri-o mounts CRI-O's storage root where pressured's --imagefs-path says, nothing else;
  - deploy/overlays/plugins (the current kubectl; kubectl 1.20 over deploy/overlays/before-1.30, as
    docs/plugins.md says to point it) adds to its base exactly: --plugins-directory to pressured's
    arguments (the rest of them unchanged), the shared in-memory plugin directory mounted in
    pressured and in every plugin container, and the plugin containers, which run
    pressured-plugins:<pressured's version>, start a program scripts/image --plugins puts in that
    image, create their socket in the directory, and run as root with every capability dropped;
  - a changed config.yaml renders as a ConfigMap of another name that the DaemonSet mounts (the pods
    roll), in deploy/ (kubectl 1.20: deploy/overlays/before-1.30) and in vmtests/deploy (whose committed
    config.yaml is deploy/base/'s);
  - deploy/monitoring's release-label knob (an overlay's `commonLabels: {release: NAME}`) relabels the
    PodMonitor and the PrometheusRule and changes nothing else.
As root a missing kubectl 1.20 or promtool is a failure; otherwise a loud skip (77).
"""

import argparse
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import skip_or_fail  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from image_test import load_image_module  # noqa: E402


def kubectl_120(src):
    script = os.path.join(src, "scripts", "build-control-plane")
    if subprocess.run([script, "--check"], capture_output=True).returncode != 0:
        return None
    d = subprocess.run([script, "--print-dir"], capture_output=True, text=True).stdout.strip()
    k = os.path.join(d, "kubectl")
    return k if os.access(k, os.X_OK) else None


def render(kubectl, path, errors):
    r = subprocess.run([kubectl, "kustomize", path], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        errors.append(f"{kubectl} kustomize {path}: {r.stderr.strip()[-400:]}")
        return {}
    return {d["kind"]: d for d in yaml.safe_load_all(r.stdout) if d}


def check_rendered(objs, src, ds, errors, where):
    for kind in ("PodMonitor", "PrometheusRule", "ConfigMap"):
        if kind not in objs:
            errors.append(f"{where}: no {kind} rendered")
    if len(objs) != 3:
        errors.append(f"{where}: rendered {sorted(objs)}, expected PodMonitor, PrometheusRule, ConfigMap")
    with open(os.path.join(src, "dashboards/pressured.rules.yml")) as f:
        rules = yaml.safe_load(f)
    with open(os.path.join(src, "dashboards/pressured.json")) as f:
        dashboard = f.read()

    pr = objs.get("PrometheusRule", {})
    if pr.get("spec") != rules:
        errors.append(f"{where}: the PrometheusRule's spec is not dashboards/pressured.rules.yml")
    cm = objs.get("ConfigMap", {})
    if cm.get("metadata", {}).get("labels", {}).get("grafana_dashboard") != "1":
        errors.append(f"{where}: the dashboard ConfigMap is not labelled grafana_dashboard: \"1\"")
    if cm.get("data", {}).get("pressured.json", "").rstrip("\n") != dashboard.rstrip("\n"):
        errors.append(f"{where}: the ConfigMap's pressured.json is not dashboards/pressured.json")

    pm = objs.get("PodMonitor", {})
    tmpl = ds["spec"]["template"]
    labels = tmpl["metadata"]["labels"]
    sel = pm.get("spec", {}).get("selector", {}).get("matchLabels", {})
    if not sel or any(labels.get(k) != v for k, v in sel.items()):
        errors.append(f"{where}: the PodMonitor's selector {sel} does not match the DaemonSet's pods {labels}")
    ns = ds["metadata"]["namespace"]
    if ns not in pm.get("spec", {}).get("namespaceSelector", {}).get("matchNames", []):
        errors.append(f"{where}: the PodMonitor does not look in namespace {ns}")
    ports = {p.get("name") for c in tmpl["spec"]["containers"] for p in c.get("ports", [])}
    eps = pm.get("spec", {}).get("podMetricsEndpoints", [])
    if len(eps) != 1:
        errors.append(f"{where}: expected one podMetricsEndpoint, got {len(eps)}")
        return
    ep = eps[0]
    if ep.get("port") not in ports:
        errors.append(f"{where}: PodMonitor port {ep.get('port')!r} is not a DaemonSet port {sorted(ports)}")
    if ep.get("path", "/metrics") != tmpl["metadata"]["annotations"].get("prometheus.io/path"):
        errors.append(f"{where}: PodMonitor path differs from the prometheus.io/path annotation")
    if ep.get("honorLabels") is not True:
        errors.append(f"{where}: PodMonitor must honour pressured's own labels (node)")
    relabel = ep.get("relabelings", [])
    node = [r for r in relabel if r.get("targetLabel") == "node"]
    if not node or node[0].get("sourceLabels") != ["__meta_kubernetes_pod_node_name"]:
        errors.append(f"{where}: PodMonitor does not relabel __meta_kubernetes_pod_node_name into node")
    job = [r for r in relabel if r.get("targetLabel") == "job"]
    jobs_in_rules = set(re.findall(r'job="([^"]+)"', yaml.safe_dump(rules)))
    if not job or not jobs_in_rules or {job[-1].get("replacement")} != jobs_in_rules:
        errors.append(f"{where}: the PodMonitor's job {[j.get('replacement') for j in job]} is not the rules' "
                      f"job selector {sorted(jobs_in_rules)}")


OVERLAY_IMAGE = ("registry.example.com/infra/pressured", "0.1.0-site1")


def check_overlay(kubectl, src, errors, where, field, target):
    where = f"{where}: over {target}"
    with tempfile.TemporaryDirectory() as d:
        overlay = os.path.join(d, "overlay")
        os.makedirs(overlay)
        with open(os.path.join(overlay, "kustomization.yaml"), "w") as f:
            f.write(f"{field}:\n  - {os.path.relpath(os.path.join(src, target), overlay)}\n"
                    f"images:\n  - name: pressured\n    newName: {OVERLAY_IMAGE[0]}\n    newTag: {OVERLAY_IMAGE[1]}\n")
        r = subprocess.run([kubectl, "kustomize", overlay], capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            errors.append(f"{where}: an overlay with `{field}:` and `images:` does not render: {r.stderr[-300:]}")
            return
        got = [o for o in yaml.safe_load_all(r.stdout) if o]
    want = kustomize(kubectl, os.path.join(src, target))
    image = f"{OVERLAY_IMAGE[0]}:{OVERLAY_IMAGE[1]}"
    for o in want:
        if o["kind"] == "DaemonSet":
            for ct in o["spec"]["template"]["spec"].get("initContainers", []) + o["spec"]["template"]["spec"]["containers"]:
                ct["image"] = image
    key = lambda o: (o["kind"], o["metadata"]["name"])
    if sorted(got, key=key) != sorted(want, key=key):
        errors.append(f"{where}: the overlay changed more than the images, or not every image "
                      f"(expected every container at {image})")
    else:
        print(f"{where}: overlay with `{field}:` + `images:` sets both containers to {image}, nothing else")


def kustomize(kubectl, path):
    r = subprocess.run([kubectl, "kustomize", path], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise AssertionError(f"{kubectl} kustomize {path}: {r.stderr.strip()[-400:]}")
    return [o for o in yaml.safe_load_all(r.stdout) if o]


def by_kind(objs, kind):
    return [o for o in objs if o["kind"] == kind]


def pressured_container(ds):
    return next(c for c in ds["spec"]["template"]["spec"]["containers"] if c["name"] == "pressured")


def check_entry_point(kubectl, src, errors, where):
    """deploy/ (the current kubectl) is deploy/base/ itself: the 1.30+ path adds nothing to the base."""
    if kustomize(kubectl, os.path.join(src, "deploy")) != kustomize(kubectl, os.path.join(src, "deploy", "base")):
        errors.append(f"{where}: deploy/ does not render as deploy/base/")
    else:
        print(f"{where}: deploy/ renders as deploy/base/")


def check_apparmor(kubectl, src, errors, where):
    """The base: the field; deploy/overlays/before-1.30: the annotation instead, nothing else changed."""
    base = kustomize(kubectl, os.path.join(src, "deploy", "base"))
    old = kustomize(kubectl, os.path.join(src, "deploy", "overlays", "before-1.30"))
    ds = by_kind(base, "DaemonSet")[0]
    ann = ds["spec"]["template"]["metadata"].get("annotations", {})
    if pressured_container(ds)["securityContext"].get("appArmorProfile") != {"type": "Unconfined"} or \
            any(k.startswith("container.apparmor.security.beta.kubernetes.io/") for k in ann):
        errors.append(f"{where}: deploy/base/ does not set AppArmor through the securityContext field alone")
    want = copy.deepcopy(base)
    wds = by_kind(want, "DaemonSet")[0]
    del pressured_container(wds)["securityContext"]["appArmorProfile"]
    wds["spec"]["template"]["metadata"].setdefault("annotations", {})[
        "container.apparmor.security.beta.kubernetes.io/pressured"] = "unconfined"
    key = lambda o: (o["kind"], o["metadata"]["name"])
    if sorted(old, key=key) != sorted(want, key=key):
        errors.append(f"{where}: deploy/overlays/before-1.30 is not deploy/base/ with the AppArmor field turned into the annotation")
    else:
        print(f"{where}: deploy/base/ has the appArmorProfile field, deploy/overlays/before-1.30 the annotation, nothing else differs")


def check_crio(kubectl, src, errors, where):
    objs = kustomize(kubectl, os.path.join(src, "deploy", "overlays", "cri-o"))
    base = kustomize(kubectl, os.path.join(src, "deploy", "base"))
    ds = by_kind(objs, "DaemonSet")[0]
    ct = pressured_container(ds)
    vol = next(v for v in ds["spec"]["template"]["spec"]["volumes"] if v["name"] == "imagefs")
    mount = next(m for m in ct["volumeMounts"] if m["name"] == "imagefs")
    root = "/var/lib/containers/storage"
    if vol["hostPath"]["path"] != root or mount["mountPath"] != root or f"--imagefs-path={root}" not in ct["args"]:
        errors.append(f"{where}: deploy/overlays/cri-o does not mount {root} where --imagefs-path says: volume "
                      f"{vol['hostPath']}, mount {mount['mountPath']}, args {ct['args']}")
    # Nothing else: undo the three changes and compare with the base.
    vol["hostPath"]["path"] = mount["mountPath"] = "/var/lib/containerd"
    ct["args"].remove(f"--imagefs-path={root}")
    key = lambda o: (o["kind"], o["metadata"]["name"])
    if sorted(objs, key=key) != sorted(base, key=key):
        errors.append(f"{where}: deploy/overlays/cri-o changes more than the imagefs volume, its mount and the flag")
    else:
        print(f"{where}: deploy/overlays/cri-o mounts {root} for --imagefs-path, nothing else")


PLUGIN_DIR = "/run/pressured/plugins"


def check_plugins(kubectl, src, errors, where, old):
    """deploy/overlays/plugins over its base: only the plugin directory, the flag and the sidecars."""
    overlay = os.path.join(src, "deploy", "overlays", "plugins")
    base_dir = os.path.join(src, "deploy", "overlays", "before-1.30") if old else os.path.join(src, "deploy", "base")
    if old:
        # kubectl 1.20's kustomize takes no directory in `resources:`: the overlay pointed at
        # before-1.30 under `bases:`, as docs/plugins.md says.
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(overlay, "kustomization.yaml")) as f:
                k = yaml.safe_load(f)
            k.pop("resources", None)
            k["bases"] = [os.path.relpath(base_dir, d)]
            with open(os.path.join(d, "kustomization.yaml"), "w") as f:
                yaml.safe_dump(k, f)
            for patch in k.get("patchesStrategicMerge", []):
                shutil.copy(os.path.join(overlay, patch), d)
            objs = kustomize(kubectl, d)
    else:
        objs = kustomize(kubectl, overlay)
    base = kustomize(kubectl, base_dir)
    with open(os.path.join(src, "CMakeLists.txt")) as f:
        version = re.search(r"project\(pressured VERSION (\S+)", f.read()).group(1)
    img = load_image_module(src)
    in_image = {dest for _, _, dest, _ in img.PLUGINS_FILES} | {"/usr/bin/python3"}
    ds = by_kind(objs, "DaemonSet")[0]
    spec = ds["spec"]["template"]["spec"]
    problems = []
    base_ds = by_kind(base, "DaemonSet")[0]
    base_args = pressured_container(base_ds)["args"]
    ct = pressured_container(ds)
    if ct["args"] != base_args + [f"--plugins-directory={PLUGIN_DIR}"]:
        problems.append(f"pressured's args {ct['args']} are not the base's {base_args} + --plugins-directory")
    vols = {v["name"]: v for v in spec["volumes"]}
    plug_vol = [n for n, v in vols.items() if v.get("emptyDir", {}).get("medium") == "Memory"]
    if len(plug_vol) != 1:
        problems.append(f"no single in-memory emptyDir for the plugin directory: {sorted(vols)}")
        plug_vol = ["?"]
    plugins = [c for c in spec["containers"] if c["name"] != "pressured"]
    if not plugins:
        problems.append("no plugin container")
    for c in [ct] + plugins:
        if {"name": plug_vol[0], "mountPath": PLUGIN_DIR} not in c.get("volumeMounts", []):
            problems.append(f"container {c['name']} does not mount {plug_vol[0]} at {PLUGIN_DIR}")
    for c in plugins:
        if c.get("image") != f"pressured-plugins:{version}":
            problems.append(f"container {c['name']} runs {c.get('image')}, not pressured-plugins:{version}")
        missing = [x for x in c.get("command", []) + c.get("args", [])
                   if x.startswith("/usr/") and x not in in_image]
        if not c.get("command") or missing:
            problems.append(f"container {c['name']} starts {c.get('command')}, not in scripts/image --plugins's "
                            f"image ({sorted(in_image)}): {missing}")
        if not any(a.startswith(f"--socket={PLUGIN_DIR}/") for a in c.get("args", [])):
            problems.append(f"container {c['name']} creates no socket in {PLUGIN_DIR}")
        sc = c.get("securityContext", {})
        if sc.get("runAsUser") != 0 or sc.get("capabilities", {}).get("drop") != ["ALL"] or \
                sc.get("allowPrivilegeEscalation") is not False:
            problems.append(f"container {c['name']}: not root with every capability dropped: {sc}")
    # Nothing else: undo what the overlay adds and compare with the base.
    spec["containers"] = [ct]
    ct["args"] = ct["args"][:len(base_args)]
    ct["volumeMounts"] = [m for m in ct["volumeMounts"] if m["name"] != plug_vol[0]]
    base_vols = {v["name"] for v in base_ds["spec"]["template"]["spec"]["volumes"]}
    spec["volumes"] = [v for v in spec["volumes"] if v["name"] in base_vols]
    key = lambda o: (o["kind"], o["metadata"]["name"])
    if sorted(objs, key=key) != sorted(base, key=key):
        problems.append("it changes more than the plugin directory, the flag and the plugin containers")
    name = "deploy/overlays/plugins" + (" (bases: ../before-1.30)" if old else "")
    if problems:
        errors += [f"{where}: {name}: {p}" for p in problems]
    else:
        print(f"{where}: {name} adds --plugins-directory, the shared directory and "
              f"{', '.join(c['name'] for c in plugins)} (pressured-plugins:{version}), nothing else")


def config_names(objs):
    cms = [o["metadata"]["name"] for o in by_kind(objs, "ConfigMap") if o["metadata"]["name"].startswith("pressured-config")]
    refs = [v["configMap"]["name"] for ds in by_kind(objs, "DaemonSet")
            for v in ds["spec"]["template"]["spec"]["volumes"] if "configMap" in v]
    return cms, refs


def check_rollout(kubectl, src, errors, where, entry):
    """A changed config.yaml is a ConfigMap of another name, mounted by the pods: apply rolls them."""
    with tempfile.TemporaryDirectory() as d:
        for tree in ("deploy", "vmtests/deploy"):
            shutil.copytree(os.path.join(src, tree), os.path.join(d, tree),
                            ignore=shutil.ignore_patterns("monitoring", "uninstall"))
        for path, cfg in ((entry, "deploy/base/config.yaml"), ("vmtests/deploy", "vmtests/deploy/config.yaml")):
            before = kustomize(kubectl, os.path.join(d, path))
            with open(os.path.join(d, cfg), "a") as f:
                f.write("# changed\n")
            after = kustomize(kubectl, os.path.join(d, path))
            (cb, rb), (ca, ra) = config_names(before), config_names(after)
            if len(cb) != 1 or rb != cb or len(ca) != 1 or ra != ca or ca == cb:
                errors.append(f"{where}: {path}: config.yaml changed, ConfigMap {cb} -> {ca}, DaemonSet mounts "
                              f"{rb} -> {ra}: the pods would not roll")
            else:
                print(f"{where}: {path}: a changed config.yaml mounts {ca[0]} instead of {cb[0]} (the pods roll)")
    with open(os.path.join(src, "deploy", "base", "config.yaml")) as a, open(os.path.join(src, "vmtests", "deploy", "config.yaml")) as b:
        if a.read() != b.read():
            errors.append("vmtests/deploy/config.yaml is not deploy/base/config.yaml (as committed it must be the base's)")


def check_release_knob(kubectl, src, errors, where, field):
    """README step 4's knob: an overlay of deploy/monitoring with commonLabels: {release: NAME}."""
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "kustomization.yaml"), "w") as f:
            f.write(f"{field}:\n  - {os.path.relpath(os.path.join(src, 'deploy', 'monitoring'), d)}\n"
                    "commonLabels:\n  release: my-prometheus\n")
        got = kustomize(kubectl, d)
    base = kustomize(kubectl, os.path.join(src, "deploy", "monitoring"))
    for o in got:
        if o["kind"] in ("PodMonitor", "PrometheusRule") and o["metadata"]["labels"].get("release") != "my-prometheus":
            errors.append(f"{where}: the release knob did not relabel the {o['kind']}")
    strip = lambda objs: sorted((json.dumps({k: v for k, v in o.items() if k != "metadata"}, sort_keys=True),
                                 o["metadata"]["name"]) for o in objs)
    if strip(got) != strip(base):
        errors.append(f"{where}: the release knob changed more than labels")
    else:
        print(f"{where}: commonLabels release: my-prometheus relabels the PodMonitor and PrometheusRule, "
              f"changes labels only")


def check_runbook_prefix(src, errors):
    """generate.py --runbook-url-prefix: every alert's runbook_url under the prefix, at its own anchor,
    and nothing else changed, in both files it writes."""
    prefix = "https://wiki.example.com/platform/pressured-runbooks"
    with open(os.path.join(src, "dashboards/pressured.rules.yml")) as f:
        rules = yaml.safe_load(f)
    with tempfile.TemporaryDirectory() as d:
        r = subprocess.run([sys.executable, os.path.join(src, "deploy/monitoring/generate.py"),
                            "--runbook-url-prefix", prefix, "--out", d], capture_output=True, text=True)
        if r.returncode != 0:
            errors.append(f"generate.py --runbook-url-prefix: {r.stderr[-300:]}")
            return
        with open(os.path.join(d, "pressured.rules.yml")) as f:
            plain = yaml.safe_load(f)
        with open(os.path.join(d, "prometheusrule.yaml")) as f:
            pr = yaml.safe_load(f)
    for where, got in (("pressured.rules.yml", plain), ("prometheusrule.yaml", pr.get("spec"))):
        want = copy.deepcopy(rules)
        for g in want["groups"]:
            for rule in g["rules"]:
                if "alert" in rule:
                    rule["annotations"]["runbook_url"] = f"{prefix}#{rule['alert'].lower()}"
        if got != want:
            errors.append(f"generate.py --runbook-url-prefix: {where} is not the rules with every runbook_url "
                          f"at {prefix}#<alert>")
    if pr.get("metadata", {}).get("labels", {}).get("release") != "kube-prometheus-stack":
        errors.append("generate.py --runbook-url-prefix: the PrometheusRule lost its release label")
    print(f"generate.py --runbook-url-prefix: every runbook_url at {prefix}#<alert>, nothing else changed")


def promtool_check(pr, errors):
    promtool = shutil.which("promtool")
    with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as f:
        yaml.safe_dump(pr.get("spec", {}), f)
        path = f.name
    try:
        r = subprocess.run([promtool, "check", "rules", path], capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            errors.append(f"promtool check rules on the PrometheusRule's spec: {(r.stdout + r.stderr)[-400:]}")
        else:
            print("promtool check rules: " + r.stdout.strip().splitlines()[-1])
    finally:
        os.unlink(path)


def self_test(src):
    """The drift check notices a rules file changed without regenerating."""
    with tempfile.TemporaryDirectory() as d:
        shutil.copytree(os.path.join(src, "dashboards"), os.path.join(d, "dashboards"))
        shutil.copytree(os.path.join(src, "deploy/monitoring"), os.path.join(d, "deploy/monitoring"))
        with open(os.path.join(d, "dashboards/pressured.rules.yml"), "a") as f:
            f.write("  - name: drift\n    rules: []\n")
        r = subprocess.run([sys.executable, os.path.join(d, "deploy/monitoring/generate.py"), "--check"],
                           capture_output=True, text=True)
        if r.returncode == 0:
            return ["self-test: a changed rules file was not noticed by generate.py --check"]
    return []


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source-dir", required=True)
    args = ap.parse_args()
    src = os.path.abspath(args.source_dir)
    if not shutil.which("promtool"):
        skip_or_fail("promtool (Debian package prometheus; scripts/setup)", fail_as_root=True)
    k120 = kubectl_120(src)
    if not k120:
        skip_or_fail("kubectl 1.20: run scripts/build-control-plane", fail_as_root=True)
    errors = []
    r = subprocess.run([sys.executable, os.path.join(src, "deploy/monitoring/generate.py"), "--check"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        errors.append(r.stdout.strip() or r.stderr.strip())
    errors += self_test(src)
    check_runbook_prefix(src, errors)
    with open(os.path.join(src, "deploy/base/daemonset.yaml")) as f:
        ds = yaml.safe_load(f)
    if ds["spec"]["template"]["metadata"]["annotations"].get("prometheus.io/scrape") != "true":
        errors.append("the DaemonSet lost its prometheus.io/scrape annotation (plain Prometheus)")
    kubectls = [k120] + ([shutil.which("kubectl")] if shutil.which("kubectl") else [])
    rendered = None
    for k in kubectls:
        v = subprocess.run([k, "version", "--client", "--short"], capture_output=True, text=True).stdout.strip() or \
            subprocess.run([k, "version", "--client"], capture_output=True, text=True).stdout.strip()
        where = f"{k} ({v.splitlines()[0] if v else '?'})"
        # kubectl 1.20 serves 1.20-1.29 clusters only (deploy/overlays/before-1.30, `bases:`); deploy/ is
        # for 1.30 and later, whose kubectl is a current one.
        old = k == k120
        for field, target in ([("bases", "deploy/overlays/before-1.30")] if old else
                              [("resources", "deploy"), ("resources", "deploy/overlays/before-1.30")]):
            try:
                check_overlay(k, src, errors, where, field, target)
            except AssertionError as e:
                errors.append(f"{where}: {e}")
        checks = [check_apparmor, check_crio,
                  lambda *a: check_rollout(*a, "deploy/overlays/before-1.30" if old else "deploy"),
                  lambda *a: check_plugins(*a, old)]
        for check in checks + ([] if old else [check_entry_point]):
            try:
                check(k, src, errors, where)
            except AssertionError as e:
                errors.append(f"{where}: {e}")
        try:
            check_release_knob(k, src, errors, where, "bases" if k == k120 else "resources")
        except AssertionError as e:
            errors.append(f"{where}: {e}")
        objs = render(k, os.path.join(src, "deploy/monitoring"), errors)
        if objs:
            check_rendered(objs, src, ds, errors, where)
            print(f"{where}: kustomize renders {', '.join(sorted(objs))}")
            rendered = rendered or objs
    if rendered:
        promtool_check(rendered.get("PrometheusRule", {}), errors)
    if errors:
        for e in errors:
            print("FAIL:", e)
        return 1
    print("OK: deploy/monitoring matches dashboards/ and deploy/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
