#!/usr/bin/env python3
"""kustomize: the operator's overlay of deploy/, and deploy/monitoring/ against dashboards/ and deploy/.

  - an overlay of deploy/ whose only content is an `images:` entry (what docs/operations.md tells
    operators to write) renders, with kubectl 1.20 (`bases:`, its kustomize 2.0.3 takes no directory
    in `resources:`) and the current kubectl (`resources:`), to deploy/ with both containers' image
    (the init container's and pressured's) replaced and nothing else changed;

  - the generated files are what deploy/monitoring/generate.py makes of dashboards/ now (no drift),
    and the check notices a changed rules file (self-test);
  - `kubectl kustomize deploy/monitoring` renders with the kubectl on PATH and with kubectl 1.20
    (scripts/build-control-plane; its kustomize is 2.0.3): a PodMonitor, a PrometheusRule, a ConfigMap;
  - the PrometheusRule's spec is the rules file (same groups) and passes `promtool check rules`;
  - the ConfigMap is labelled grafana_dashboard: "1" and holds dashboards/pressured.json byte for byte;
  - the PodMonitor selects the DaemonSet's pods and port, keeps pressured's labels, puts the node in
    `node` and names the job as the rules' job="pressured" selectors expect;
  - the DaemonSet keeps the prometheus.io/* annotations for a plain Prometheus.
As root a missing kubectl 1.20 or promtool is a failure; otherwise a loud skip (77).
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import skip_or_fail  # noqa: E402


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


def check_overlay(kubectl, src, errors, where, field):
    with tempfile.TemporaryDirectory() as d:
        overlay = os.path.join(d, "overlay")
        os.makedirs(overlay)
        with open(os.path.join(overlay, "kustomization.yaml"), "w") as f:
            f.write(f"{field}:\n  - {os.path.relpath(os.path.join(src, 'deploy'), overlay)}\n"
                    f"images:\n  - name: pressured\n    newName: {OVERLAY_IMAGE[0]}\n    newTag: {OVERLAY_IMAGE[1]}\n")
        r = subprocess.run([kubectl, "kustomize", overlay], capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            errors.append(f"{where}: an overlay with `{field}:` and `images:` does not render: {r.stderr[-300:]}")
            return
        got = [o for o in yaml.safe_load_all(r.stdout) if o]
    base = subprocess.run([kubectl, "kustomize", os.path.join(src, "deploy")], capture_output=True, text=True,
                          timeout=120)
    want = [o for o in yaml.safe_load_all(base.stdout) if o]
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
    with open(os.path.join(src, "deploy/daemonset.yaml")) as f:
        ds = yaml.safe_load(f)
    if ds["spec"]["template"]["metadata"]["annotations"].get("prometheus.io/scrape") != "true":
        errors.append("the DaemonSet lost its prometheus.io/scrape annotation (plain Prometheus)")
    kubectls = [k120] + ([shutil.which("kubectl")] if shutil.which("kubectl") else [])
    rendered = None
    for k in kubectls:
        v = subprocess.run([k, "version", "--client", "--short"], capture_output=True, text=True).stdout.strip() or \
            subprocess.run([k, "version", "--client"], capture_output=True, text=True).stdout.strip()
        where = f"{k} ({v.splitlines()[0] if v else '?'})"
        check_overlay(k, src, errors, where, "bases" if k == k120 else "resources")
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
