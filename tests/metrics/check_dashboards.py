#!/usr/bin/env python3
"""Validates dashboards/: the Grafana dashboard, its provisioning file and the
Prometheus alert rules, against the metric names pressured really exports.

- pressured.json: valid JSON, current schemaVersion, a `datasource` variable
  of type datasource and a `node` variable from label values, no hard-coded
  data source uid, unique panel ids, every query parses (each expression is
  written as a recording rule into a temporary file and checked with
  `promtool check rules`, since promtool 2.42 cannot parse bare expressions),
  every query filters on the node variable and uses only exported metrics.
- pressured.json is what generate_dashboard.py produces.
- provisioning.yml: a file provider pointing at a path.
- pressured.rules.yml: every alert has severity, summary, description and a
  runbook_url whose anchor exists in docs/runbooks.md; only exported metrics
  (plus Prometheus' own `up`); every alert has a firing and a not-firing case
  in dashboards/tests/*.yml.
The exported names come from the Metrics class (`--names-bin`, a program that
prints Metrics::metric_names()), never from a list kept here.

Before checking the real files, the script checks that it rejects broken
inputs (unknown metric, hard-coded uid, unparsable query), so it can fail.
"""

import argparse
import copy
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

import yaml

# Series Prometheus itself adds to every target; rules may use them.
PROMETHEUS_SYNTHETIC = {"up"}
# Series of kube-state-metrics (kube-prometheus-stack ships it) that rules may join with pressured's.
KUBE_STATE_METRICS = {"kube_pod_info"}
DS_VAR = {"${datasource}", "$datasource"}
GRAFANA_VARS = {
    "$__rate_interval": "5m", "${__rate_interval}": "5m", "$__interval": "1m", "${__interval}": "1m",
    "$__range": "1h", "${__range}": "1h", "${node}": ".*", "$node": ".*",
}
PROMQL_WORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset",
    "inf", "nan", "Inf", "NaN",
}


def metric_names_in(expr):
    """Metric names used by a PromQL expression (functions, labels and keywords left out)."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)                      # string literals
    e = re.sub(r"\{[^}]*\}", "", e)                                    # label matchers
    e = re.sub(r"\[[^\]]*\]", "", e)                                   # range selectors
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    names = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", e):
        word = m.group(0)
        before = e[m.start() - 1] if m.start() > 0 else " "
        if before.isdigit() or before == ".":
            continue  # part of a number like 1e-5 or 2.5e3
        rest = e[m.end():].lstrip()
        if rest.startswith("("):
            continue  # function or aggregation
        if word in PROMQL_WORDS:
            continue
        names.add(word)
    return names


def substitute(expr):
    for k in sorted(GRAFANA_VARS, key=len, reverse=True):
        expr = expr.replace(k, GRAFANA_VARS[k])
    return expr


def promtool_parse(exprs):
    """Returns {index: error} for expressions promtool cannot parse."""
    def run(items):
        rules = {"groups": [{"name": "dashboard_exprs", "rules": [
            {"record": f"dashboard:expr_{i}", "expr": e} for i, e in items]}]}
        with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as f:
            yaml.safe_dump(rules, f)
            path = f.name
        try:
            r = subprocess.run(["promtool", "check", "rules", path], capture_output=True, text=True)
            return r.returncode, r.stdout + r.stderr
        finally:
            os.unlink(path)

    items = list(enumerate(exprs))
    if not items:
        return {}
    code, _ = run(items)
    if code == 0:
        return {}
    errors = {}
    for i, e in items:  # pinpoint
        c, out = run([(i, e)])
        if c != 0:
            errors[i] = out.strip().splitlines()[-1] if out.strip() else "promtool failed"
    return errors or {-1: "promtool check rules failed on the batch"}


def walk(node, path="$"):
    yield path, node
    if isinstance(node, dict):
        for k, v in node.items():
            yield from walk(v, f"{path}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from walk(v, f"{path}[{i}]")


def all_panels(dash):
    for p in dash.get("panels", []):
        yield p
        for q in p.get("panels", []) or []:
            yield q


def check_dashboard(dash, exported, errors):
    sv = dash.get("schemaVersion")
    if not isinstance(sv, int) or sv < 36:
        errors.append(f"schemaVersion {sv!r}: expected a current one (>= 36)")
    variables = {v.get("name"): v for v in dash.get("templating", {}).get("list", [])}
    ds = variables.get("datasource")
    if not ds or ds.get("type") != "datasource" or ds.get("query") != "prometheus":
        errors.append("no `datasource` variable of type datasource for prometheus")
    node = variables.get("node")
    if not node or node.get("type") != "query":
        errors.append("no `node` query variable")
    else:
        q = node.get("query")
        q = q.get("query") if isinstance(q, dict) else q
        m = re.fullmatch(r"\s*label_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)\s*,\s*node\s*\)\s*", q or "")
        if not m:
            errors.append(f"node variable query {q!r} is not label_values(<metric>, node)")
        elif m.group(1) not in exported:
            errors.append(f"node variable uses {m.group(1)}, which pressured does not export")
        if node.get("datasource", {}).get("uid") not in DS_VAR:
            errors.append("node variable does not use the ${datasource} variable")

    for path, value in walk(dash):
        if path.endswith(".datasource"):
            if isinstance(value, dict):
                if value.get("type") == "grafana":
                    continue  # Grafana's built-in annotations source
                if value.get("uid") not in DS_VAR:
                    errors.append(f"{path}: hard-coded data source uid {value.get('uid')!r}")
            elif isinstance(value, str) and value not in DS_VAR:
                errors.append(f"{path}: hard-coded data source {value!r}")

    ids = set()
    exprs = []
    for p in all_panels(dash):
        pid = p.get("id")
        if pid in ids:
            errors.append(f"duplicate panel id {pid}")
        ids.add(pid)
        if "gridPos" not in p or not p.get("title"):
            errors.append(f"panel {pid}: missing gridPos or title")
        if p.get("type") == "row":
            continue
        targets = p.get("targets") or []
        if not targets:
            errors.append(f"panel {pid} {p.get('title')!r}: no queries")
        refs = [t.get("refId") for t in targets]
        if len(set(refs)) != len(refs):
            errors.append(f"panel {pid}: duplicate refId")
        for t in targets:
            expr = t.get("expr", "")
            where = f"panel {pid} {p.get('title')!r} {t.get('refId')}"
            if not expr.strip():
                errors.append(f"{where}: empty expr")
                continue
            used = metric_names_in(expr)
            if not used:
                errors.append(f"{where}: uses no metric")
            for n in sorted(used - exported):
                errors.append(f"{where}: metric {n} is not exported by pressured")
            if '$node' not in expr and '${node}' not in expr:
                errors.append(f"{where}: does not filter on the node variable")
            exprs.append((where, substitute(expr)))
    for i, err in promtool_parse([e for _, e in exprs]).items():
        where = exprs[i][0] if i >= 0 else "dashboard"
        errors.append(f"{where}: query does not parse: {err}")


def github_anchor(heading):
    a = heading.strip().lower()
    a = re.sub(r"[^\w\- ]", "", a)
    return a.replace(" ", "-")


def check_rules(rules, tests, runbook_text, exported, errors):
    anchors = {github_anchor(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", runbook_text, re.M)}
    alerts = []
    exprs = []
    for g in rules.get("groups", []):
        for r in g.get("rules", []):
            name = r.get("alert") or r.get("record")
            expr = str(r.get("expr", ""))
            exprs.append((name, expr))
            for n in sorted(metric_names_in(expr) - exported - PROMETHEUS_SYNTHETIC - KUBE_STATE_METRICS):
                errors.append(f"rule {name}: metric {n} is not exported by pressured")
            if "alert" not in r:
                continue
            alerts.append(name)
            sev = r.get("labels", {}).get("severity")
            if sev not in ("critical", "warning", "info"):
                errors.append(f"alert {name}: severity {sev!r}")
            ann = r.get("annotations", {})
            for k in ("summary", "description", "runbook_url"):
                if not ann.get(k):
                    errors.append(f"alert {name}: no {k} annotation")
            url = ann.get("runbook_url", "")
            m = re.search(r"docs/runbooks\.md#([\w-]+)$", url)
            if not m:
                errors.append(f"alert {name}: runbook_url {url!r} does not point at docs/runbooks.md#<anchor>")
            elif m.group(1) not in anchors:
                errors.append(f"alert {name}: docs/runbooks.md has no section #{m.group(1)}")
    for i, err in promtool_parse([substitute(e) for _, e in exprs]).items():
        errors.append(f"rule {exprs[i][0] if i >= 0 else '?'}: does not parse: {err}")

    firing, silent = set(), set()
    for t in tests:
        for case in t.get("tests", []):
            for a in case.get("alert_rule_test", []) or []:
                (firing if a.get("exp_alerts") else silent).add(a.get("alertname"))
    for name in alerts:
        if name not in firing:
            errors.append(f"alert {name}: no promtool test where it fires")
        if name not in silent:
            errors.append(f"alert {name}: no promtool test where it stays silent")
    if not alerts:
        errors.append("no alerts found")


def check_provisioning(prov, errors):
    if prov.get("apiVersion") != 1:
        errors.append("provisioning.yml: apiVersion must be 1")
    providers = prov.get("providers") or []
    if not providers:
        errors.append("provisioning.yml: no providers")
    for p in providers:
        if p.get("type") != "file" or not p.get("options", {}).get("path"):
            errors.append(f"provisioning.yml: provider {p.get('name')!r} is not a file provider with a path")


def self_test(dash, exported):
    """The checks must reject broken dashboards; returns problems with the checker itself."""
    problems = []
    assert metric_names_in('sum by (le) (rate(a_b_bucket{x="y"}[5m])) / b') == {"a_b_bucket", "b"}
    assert metric_names_in("histogram_quantile(0.99, x) > 1e-05") == {"x"}
    assert metric_names_in("time() - s") == {"s"}
    cases = {
        "unknown metric": lambda d: d["panels"][1]["targets"][0].update(expr='nope_total{node=~"$node"}'),
        "hard-coded uid": lambda d: d["panels"][1].update(datasource={"type": "prometheus", "uid": "P1809F7CD0C75ACF3"}),
        "unparsable query": lambda d: d["panels"][1]["targets"][0].update(
            expr='sum(rate(pressured_events_total{node=~"$node"}[5m])'),
        "no node filter": lambda d: d["panels"][1]["targets"][0].update(expr="pressured_ready"),
        "no datasource variable": lambda d: d["templating"].update(
            list=[v for v in d["templating"]["list"] if v["name"] != "datasource"]),
    }
    for what, mutate in cases.items():
        d = copy.deepcopy(dash)
        mutate(d)
        errs = []
        check_dashboard(d, exported, errs)
        if not errs:
            problems.append(f"self-test: a dashboard with {what} was accepted")
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--names-bin", required=True, help="program printing Metrics::metric_names()")
    ap.add_argument("--source-dir", required=True)
    args = ap.parse_args()
    src = args.source_dir
    exported = set(subprocess.run([args.names_bin], check=True, capture_output=True, text=True).stdout.split())
    if len(exported) < 10 or not all(n.startswith("pressured_") for n in exported):
        print(f"FAIL: implausible metric names from {args.names_bin}: {sorted(exported)}")
        return 1
    print(f"{len(exported)} exported metric names from {args.names_bin}")

    errors = []
    dash_path = os.path.join(src, "dashboards", "pressured.json")
    try:
        with open(dash_path) as f:
            dash = json.load(f)
    except (OSError, ValueError) as e:
        print(f"FAIL: {dash_path}: {e}")
        return 1
    errors += self_test(dash, exported)
    check_dashboard(dash, exported, errors)

    gen = subprocess.run([sys.executable, os.path.join(src, "dashboards", "generate_dashboard.py"), "--stdout"],
                         capture_output=True, text=True)
    with open(dash_path) as f:
        if gen.returncode != 0 or gen.stdout != f.read():
            errors.append("pressured.json differs from generate_dashboard.py's output: regenerate it")

    with open(os.path.join(src, "dashboards", "provisioning.yml")) as f:
        check_provisioning(yaml.safe_load(f), errors)

    with open(os.path.join(src, "dashboards", "pressured.rules.yml")) as f:
        rules = yaml.safe_load(f)
    tests = []
    for t in sorted(glob.glob(os.path.join(src, "dashboards", "tests", "*.yml"))):
        with open(t) as f:
            tests.append(yaml.safe_load(f))
    with open(os.path.join(src, "docs", "runbooks.md")) as f:
        runbook = f.read()
    check_rules(rules, tests, runbook, exported, errors)

    panels = sum(1 for p in all_panels(dash) if p.get("type") != "row")
    if errors:
        for e in errors:
            print("FAIL:", e)
        return 1
    print(f"OK: {panels} panels, {sum(len(g['rules']) for g in rules['groups'])} rules checked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
