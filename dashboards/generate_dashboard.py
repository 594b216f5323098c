#!/usr/bin/env python3
"""Generates dashboards/pressured.json, the Grafana dashboard for pressured.

The JSON is checked in (operators import it as is); this script is its source.
Edit here, run `python3 dashboards/generate_dashboard.py`, and commit both.
tests/metrics/check_dashboards.py fails when the two disagree.
"""

import json
import os
import sys

DS = {"type": "prometheus", "uid": "${datasource}"}
SEL = 'node=~"$node"'

_next_id = [0]


def _id():
    _next_id[0] += 1
    return _next_id[0]


def target(expr, legend="", ref="A", instant=False, fmt="time_series"):
    t = {"datasource": DS, "expr": expr, "legendFormat": legend, "refId": ref, "format": fmt}
    if instant:
        t["instant"] = True
        t["range"] = False
    return t


def timeseries(title, targets, x, y, w=12, h=8, unit="short", description="", overrides=None, stack=False):
    return {
        "id": _id(),
        "type": "timeseries",
        "title": title,
        "description": description,
        "datasource": DS,
        "gridPos": {"x": x, "y": y, "w": w, "h": h},
        "fieldConfig": {
            "defaults": {
                "unit": unit,
                "custom": {
                    "drawStyle": "line",
                    "lineWidth": 1,
                    "fillOpacity": 10 if stack else 0,
                    "stacking": {"mode": "normal" if stack else "none", "group": "A"},
                    "showPoints": "never",
                },
            },
            "overrides": overrides or [],
        },
        "options": {
            "legend": {"displayMode": "table", "placement": "bottom", "calcs": ["lastNotNull", "max"]},
            "tooltip": {"mode": "multi", "sort": "desc"},
        },
        "targets": targets,
    }


def threshold_overrides():
    # Thresholds drawn dashed, in red, so "signal vs threshold" reads at a glance.
    return [{
        "matcher": {"id": "byRegexp", "options": ".*threshold.*"},
        "properties": [
            {"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}},
            {"id": "color", "value": {"mode": "fixed", "fixedColor": "red"}},
        ],
    }]


def signals_vs_thresholds(title, signal_re, unit, x, y, w=12, description=""):
    return timeseries(
        title,
        [
            target(f'pressured_signal_value{{{SEL}, signal=~"{signal_re}"}}', "{{node}} {{signal}}", "A"),
            target(f'pressured_signal_threshold{{{SEL}, signal=~"{signal_re}"}}',
                   "{{node}} {{signal}} {{threshold_type}} threshold", "B"),
        ],
        x, y, w=w, unit=unit, description=description, overrides=threshold_overrides())


def stat(title, targets, x, y, w=6, h=4, unit="short", mappings=None, thresholds=None, description="",
         color_mode="background"):
    return {
        "id": _id(),
        "type": "stat",
        "title": title,
        "description": description,
        "datasource": DS,
        "gridPos": {"x": x, "y": y, "w": w, "h": h},
        "fieldConfig": {
            "defaults": {
                "unit": unit,
                "mappings": mappings or [],
                "thresholds": thresholds or {"mode": "absolute", "steps": [{"color": "green", "value": None}]},
            },
            "overrides": [],
        },
        "options": {
            "colorMode": color_mode,
            "graphMode": "none",
            "justifyMode": "auto",
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "textMode": "auto",
        },
        "targets": targets,
    }


def table(title, targets, x, y, w=12, h=8, description="", overrides=None, exclude=()):
    excl = {k: True for k in ("Time", "__name__", "job", "instance") + tuple(exclude)}
    return {
        "id": _id(),
        "type": "table",
        "title": title,
        "description": description,
        "datasource": DS,
        "gridPos": {"x": x, "y": y, "w": w, "h": h},
        "fieldConfig": {"defaults": {}, "overrides": overrides or []},
        "options": {"showHeader": True, "sortBy": [{"displayName": "Value", "desc": True}]},
        "transformations": [{"id": "organize", "options": {"excludeByName": excl}}],
        "targets": targets,
    }


def heatmap(title, expr, x, y, w=12, h=8, description=""):
    return {
        "id": _id(),
        "type": "heatmap",
        "title": title,
        "description": description,
        "datasource": DS,
        "gridPos": {"x": x, "y": y, "w": w, "h": h},
        "fieldConfig": {"defaults": {}, "overrides": []},
        "options": {
            "calculate": False,
            "cellGap": 1,
            "color": {"mode": "scheme", "scheme": "Oranges", "exponent": 0.5, "steps": 64},
            "yAxis": {"unit": "s"},
            "rowsFrame": {"layout": "auto"},
            "tooltip": {"show": True, "yHistogram": True},
        },
        "targets": [target(expr, "{{le}}", "A", fmt="heatmap")],
    }


def row(title, y):
    return {"id": _id(), "type": "row", "title": title, "collapsed": False,
            "gridPos": {"x": 0, "y": y, "w": 24, "h": 1}, "panels": []}


def quantiles(metric, by=""):
    by_ = f"{by}, le" if by else "le"
    legend_by = "{{" + by + "}} " if by else ""
    return [
        target(f'histogram_quantile({q}, sum by ({by_}) (rate({metric}_bucket{{{SEL}}}[$__rate_interval])))',
               f"{legend_by}p{int(q * 100)}", ref)
        for q, ref in ((0.5, "A"), (0.9, "B"), (0.99, "C"))
    ]


def dashboard():
    p = []
    y = 0
    p.append(row("Node pressure", y)); y += 1
    cond_map = [{"type": "value", "options": {"0": {"text": "OK", "color": "green"},
                                              "1": {"text": "Pressure", "color": "red"}}}]
    for i, c in enumerate(("MemoryPressure", "DiskPressure", "PIDPressure")):
        p.append(stat(c, [target(f'max(pressured_node_condition{{{SEL}, condition="{c}"}})', c, instant=True)],
                      6 * i, y, mappings=cond_map,
                      thresholds={"mode": "absolute", "steps": [{"color": "green", "value": None},
                                                                {"color": "red", "value": 1}]},
                      description=f"pressured's {c} condition on the selected nodes (max)."))
    p.append(stat("Ready", [target(f'min(pressured_ready{{{SEL}}})', "ready", instant=True)], 18, y,
                  mappings=[{"type": "value", "options": {"0": {"text": "Not ready", "color": "red"},
                                                          "1": {"text": "Ready", "color": "green"}}}],
                  thresholds={"mode": "absolute", "steps": [{"color": "red", "value": None},
                                                            {"color": "green", "value": 1}]},
                  description="1 when every selected pressured has events attached and has observed once."))
    y += 4
    p.append(signals_vs_thresholds("Memory available vs thresholds", "memory.available|allocatableMemory.available",
                                   "bytes", 0, y,
                                   description="Available memory (kubelet formula) and the configured eviction "
                                               "thresholds (dashed)."))
    p.append(signals_vs_thresholds("Memory and IO PSI vs thresholds", "memory.pressure.*|io.pressure.*", "percent",
                                   12, y, description="Pressure stall information, percent of time stalled."))
    y += 8
    p.append(signals_vs_thresholds("Disk available vs thresholds",
                                   "nodefs.available|imagefs.available|containerfs.available", "bytes", 0, y))
    p.append(signals_vs_thresholds("Inodes and PIDs free vs thresholds",
                                   "nodefs.inodesFree|imagefs.inodesFree|containerfs.inodesFree|pid.available", "short",
                                   12, y))
    y += 8
    p.append(timeseries(
        "Signal headroom (available / capacity)",
        [target(f'pressured_signal_value{{{SEL}, unit!="percent"}} / pressured_signal_capacity{{{SEL}, unit!="percent"}}',
                "{{node}} {{signal}}")],
        0, y, unit="percentunit", description="Share of each resource still available."))
    p.append(timeseries(
        "Node condition transitions",
        [target(f'sum by (node, condition) (increase(pressured_node_condition_transitions_total{{{SEL}}}[$__rate_interval]))',
                "{{node}} {{condition}}")],
        12, y, description="Flips of pressured's node conditions (the pressure-transition period damps these)."))
    y += 8

    p.append(row("Evictions", y)); y += 1
    p.append(timeseries(
        "Eviction rate by signal",
        [target(f'sum by (signal) (rate(pressured_evictions_total{{{SEL}}}[$__rate_interval]))', "{{signal}}")],
        0, y, unit="ops", stack=True))
    p.append(timeseries(
        "Eviction rate by QoS class and threshold type",
        [target(f'sum by (qos_class, threshold_type) (rate(pressured_evictions_total{{{SEL}}}[$__rate_interval]))',
                "{{qos_class}} {{threshold_type}}")],
        12, y, unit="ops", stack=True))
    y += 8
    p.append(table(
        "Latest victims",
        [target(f'pressured_eviction_last_timestamp_seconds{{{SEL}}} * 1000', "", instant=True, fmt="table")],
        0, y, w=16,
        description="The most recent evictions per node (pressured keeps the last few).",
        overrides=[{"matcher": {"id": "byName", "options": "Value"},
                    "properties": [{"id": "unit", "value": "dateTimeAsIso"},
                                   {"id": "displayName", "value": "Evicted at"}]}]))
    p.append(timeseries(
        "Eviction outcomes",
        [target(f'sum by (result) (rate(pressured_local_kills_total{{{SEL}}}[$__rate_interval]))',
                "local kill {{result}}", "A"),
         target(f'sum by (action, result) (rate(pressured_kubernetes_api_requests_total{{{SEL}}}[$__rate_interval]))',
                "api {{action}} {{result}}", "B"),
         target(f'sum by (signal) (rate(pressured_eviction_no_candidates_total{{{SEL}}}[$__rate_interval]))',
                "no candidate {{signal}}", "C")],
        16, y, w=8, unit="ops"))
    y += 8
    p.append(table(
        "Top pods: memory usage over request",
        [target(f'topk(20, pressured_pod_memory_usage_over_request_ratio{{{SEL}}})', "", instant=True, fmt="table")],
        0, y,
        overrides=[{"matcher": {"id": "byName", "options": "Value"},
                    "properties": [{"id": "unit", "value": "percentunit"},
                                   {"id": "displayName", "value": "Usage / request"}]}]))
    p.append(timeseries(
        "Top pods: working set",
        [target(f'topk(10, pressured_pod_memory_working_set_bytes{{{SEL}}})', "{{namespace}}/{{pod}}", "A"),
         target(f'topk(10, pressured_pod_memory_request_bytes{{{SEL}}})', "{{namespace}}/{{pod}} request", "B")],
        12, y, unit="bytes", overrides=[{
            "matcher": {"id": "byRegexp", "options": ".* request"},
            "properties": [{"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}}]}]))
    y += 8

    p.append(row("Relief (reclaim before memory evictions)", y)); y += 1
    p.append(timeseries(
        "Relief runs by outcome",
        [target(f'sum by (outcome) (increase(pressured_reclaim_runs_total{{{SEL}}}[$__rate_interval]))',
                "{{outcome}}", "A"),
         target(f'sum by (reason) (increase(pressured_reclaim_skipped_total{{{SEL}}}[$__rate_interval]))',
                "skipped: {{reason}}", "B")],
        0, y, w=9, stack=True,
        description="Each run asks memory.reclaim for page cache before a memory eviction: avoided (the node was "
                    "no longer short on the re-read), still_short (evicted as usual), failed, dry_run. Skipped: "
                    "crossings that evicted without reclaim (not_covered: anonymous pressure)."))
    p.append(timeseries(
        "Relief: asked and given back",
        [target(f'sum by (node) (rate(pressured_reclaim_asked_bytes_total{{{SEL}}}[$__rate_interval]))',
                "{{node}} asked", "A"),
         target(f'sum by (node) (rate(pressured_reclaim_reclaimed_bytes_total{{{SEL}}}[$__rate_interval]))',
                "{{node}} given back", "B")],
        9, y, w=9, unit="Bps"))
    p.append(stat(
        "Relief available",
        [target(f'min(pressured_reclaim_available{{{SEL}}})', "")],
        18, y, w=6, h=4,
        mappings=[{"type": "value", "options": {"0": {"text": "off (v1 / no memory.reclaim / disabled)"},
                                                "1": {"text": "on"}}}],
        description="0 on a node where the stage is off: cgroup v1, a kernel before 5.19, or relief.enabled false."))
    p.append(stat(
        "Cgroups backing off",
        [target(f'sum(pressured_reclaim_backoff_cgroups{{{SEL}}})', "")],
        18, y + 4, w=6, h=4,
        description="Pod cgroups that gave back little and are not asked again for relief.backoff."))
    y += 8
    p.append(timeseries("Relief run duration",
                        quantiles("pressured_reclaim_duration_seconds"),
                        0, y, w=24, unit="s",
                        description="How long each run's memory.reclaim writes took (a hard threshold waits at most "
                                    "relief.hardThresholdBudget whatever this says)."))
    y += 8

    p.append(row("Reclaim and thrashing (BPF, tracked cgroups)", y)); y += 1
    p.append(timeseries(
        "Reclaim in kubepods and QoS tiers",
        [target(f'sum by (node, cgroup) (rate(pressured_kubepods_reclaim_scanned_pages_total{{{SEL}}}[$__rate_interval]))',
                "{{node}} {{cgroup}} scanned", "A"),
         target(f'sum by (node, cgroup) (rate(pressured_kubepods_reclaim_stolen_pages_total{{{SEL}}}[$__rate_interval]))',
                "{{node}} {{cgroup}} stolen", "B"),
         target(f'sum by (node, cgroup) (rate(pressured_kubepods_workingset_refaults_total{{{SEL}}}[$__rate_interval]))',
                "{{node}} {{cgroup}} refaults", "C")],
        0, y, unit="short",
        description="Pages per second scanned and reclaimed, and workingset refaults (thrashing), summed over "
                    "each cgroup's subtree (from the count_memcg_events / mod_memcg_lruvec_state BPF hooks)."))
    p.append(timeseries(
        "Memory stall time in kubepods and QoS tiers",
        [target(f'sum by (node, cgroup) (rate(pressured_kubepods_memstall_seconds_total{{{SEL}}}[$__rate_interval]))',
                "{{node}} {{cgroup}}")],
        12, y, unit="s",
        description="Seconds of task memstall per second (psi_memstall_enter/leave hooks; 0 where they are off)."))
    y += 8
    p.append(timeseries(
        "Top pods: reclaimed and refaulted pages",
        [target(f'topk(10, rate(pressured_pod_reclaim_stolen_pages_total{{{SEL}}}[$__rate_interval]))',
                "{{namespace}}/{{pod}} stolen", "A"),
         target(f'topk(10, rate(pressured_pod_reclaim_scanned_pages_total{{{SEL}}}[$__rate_interval]))',
                "{{namespace}}/{{pod}} scanned", "B"),
         target(f'topk(10, rate(pressured_pod_workingset_refaults_total{{{SEL}}}[$__rate_interval]))',
                "{{namespace}}/{{pod}} refaults", "C")],
        0, y, unit="short", description="Pages per second; top pods by working set only."))
    p.append(timeseries(
        "Top pods: memory stall time",
        [target(f'topk(10, rate(pressured_pod_memstall_seconds_total{{{SEL}}}[$__rate_interval]))',
                "{{namespace}}/{{pod}}")],
        12, y, unit="s", description="Seconds of task memstall per second in each pod."))
    y += 8

    p.append(row("Latency", y)); y += 1
    p.append(timeseries("Detection latency (kernel event to decision)",
                        quantiles("pressured_detection_latency_seconds")
                        + [target(f'histogram_quantile(0.99, sum by (le) '
                                  f'(rate(pressured_reactor_dispatch_latency_seconds_bucket{{{SEL}}}[$__rate_interval])))',
                                  "p99 reactor dispatch (every event)", "D")],
                        0, y, unit="s",
                        description="Quantiles over all event sources. p99 reactor dispatch: kernel event to the "
                                    "reactor handing it on, for every event (decisions are only some of them)."))
    p.append(heatmap("Detection latency heatmap",
                     f'sum by (le) (increase(pressured_detection_latency_seconds_bucket{{{SEL}}}[$__rate_interval]))',
                     12, y))
    y += 8
    p.append(timeseries("Detection latency p99 by source",
                        [target(f'histogram_quantile(0.99, sum by (source, le) '
                                f'(rate(pressured_detection_latency_seconds_bucket{{{SEL}}}[$__rate_interval])))',
                                "{{source}} p99")],
                        0, y, unit="s"))
    p.append(timeseries("Eviction latency (decision to pod gone)",
                        quantiles("pressured_eviction_latency_seconds", by="threshold_type"), 12, y, unit="s"))
    y += 8
    p.append(heatmap("Eviction latency heatmap",
                     f'sum by (le) (increase(pressured_eviction_latency_seconds_bucket{{{SEL}}}[$__rate_interval]))',
                     0, y))
    p.append(timeseries("Decisions per second",
                        [target(f'sum by (node) (rate(pressured_observations_total{{{SEL}}}[$__rate_interval]))',
                                "{{node}}")],
                        12, y, unit="ops", description="Fresh observations evaluated by the engine."))
    y += 8

    p.append(row("Kernel OOM kills", y)); y += 1
    p.append(stat("Kernel OOM kills in range",
                  [target(f'sum(increase(pressured_kernel_oom_kills_total{{{SEL}, scope="node"}}[$__range]))',
                          "node ran out", instant=True),
                   target(f'sum(increase(pressured_kernel_oom_kills_total{{{SEL}, scope!="node"}}[$__range]))',
                          "own limit or unknown", ref="C", instant=True),
                   target(f'sum(increase(pressured_kernel_oom_kills_unreported_total{{{SEL}}}[$__range]))',
                          "of all unreported", ref="B", instant=True)],
                  0, y, w=6, h=8,
                  thresholds={"mode": "absolute", "steps": [{"color": "green", "value": None},
                                                            {"color": "red", "value": 1}]},
                  description="\"Node ran out\": kernel OOM kills with no pod or container limit reached, each "
                              "one pressured did not prevent. \"Own limit or unknown\": a pod or container at its "
                              "own memory limit (the kernel enforcing it), or a kill whose scope could not be told. "
                              "\"Of all unreported\": kills no event reported (a lost ring-buffer record, no BPF), "
                              "found later in the kernel's own counters: pressured learnt of them late."))
    p.append(timeseries(
        "Kernel OOM kills by scope and QoS class",
        [target(f'sum by (node, scope, qos_class) '
                f'(increase(pressured_kernel_oom_kills_total{{{SEL}}}[$__rate_interval]))',
                "{{node}} {{scope}} {{qos_class}}")],
        6, y, w=18, stack=True,
        description="scope: node (the node ran out), cgroup (a pod's or container's own limit), unknown."))
    y += 8

    p.append(row("Daemon health", y)); y += 1
    p.append(timeseries(
        "Events received",
        [target(f'sum by (source, type) (rate(pressured_events_total{{{SEL}}}[$__rate_interval]))',
                "{{source}} {{type}}")],
        0, y, unit="ops"))
    p.append(timeseries(
        "Drops, resyncs, safety-net detections",
        [target(f'sum by (node) (rate(pressured_ring_buffer_dropped_events_total{{{SEL}}}[$__rate_interval]))',
                "{{node}} ring buffer drops", "A"),
         target(f'sum by (node, reason) (rate(pressured_resyncs_total{{{SEL}}}[$__rate_interval]))',
                "{{node}} resync {{reason}}", "B"),
         target(f'sum by (node) (rate(pressured_safety_net_detections_total{{{SEL}}}[$__rate_interval]))',
                "{{node}} safety-net detections", "C"),
         target(f'sum by (node, target) (rate(pressured_stale_reads_total{{{SEL}}}[$__rate_interval]))',
                "{{node}} stale {{target}}", "D")],
        12, y, unit="ops"))
    y += 8
    p.append(table("BPF attach modes",
                   [target(f'pressured_bpf_program_info{{{SEL}}}', "", instant=True, fmt="table")],
                   0, y, exclude=("Value",),
                   description="How each BPF program is attached on each node, and why a fallback was chosen."))
    p.append(table("Build and configuration",
                   [target(f'pressured_build_info{{{SEL}}}', "", "A", instant=True, fmt="table"),
                    target(f'pressured_config_last_reload_successful{{{SEL}}}', "", "B", instant=True, fmt="table")],
                   12, y, description="Version per node; the last configuration reload's result (1 ok)."))
    y += 8
    p.append(timeseries(
        "Configuration reloads",
        [target(f'sum by (node, result) (increase(pressured_config_reloads_total{{{SEL}}}[$__rate_interval]))',
                "{{node}} {{result}}")],
        0, y))
    p.append(timeseries(
        "Uptime",
        [target(f'time() - pressured_start_time_seconds{{{SEL}}}', "{{node}}")],
        12, y, unit="s"))

    return {
        "title": "pressured: node pressure and evictions",
        "uid": "pressured-node",
        "description": "Memory, disk and PID pressure as pressured sees it, its evictions, latency and health.",
        "tags": ["pressured", "kubernetes", "eviction"],
        "editable": True,
        "graphTooltip": 1,
        "refresh": "30s",
        "schemaVersion": 39,
        "version": 1,
        "time": {"from": "now-6h", "to": "now"},
        "timezone": "",
        "annotations": {"list": [{
            "builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"}, "enable": True, "hide": True,
            "iconColor": "rgba(0, 211, 255, 1)", "name": "Annotations & Alerts", "type": "dashboard"}]},
        "links": [],
        "templating": {"list": [
            {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
             "current": {}, "hide": 0, "refresh": 1, "regex": "", "includeAll": False, "multi": False,
             "options": []},
            {"name": "node", "label": "Node", "type": "query", "datasource": DS,
             "definition": "label_values(pressured_build_info, node)",
             "query": {"query": "label_values(pressured_build_info, node)", "refId": "node"},
             "refresh": 2, "sort": 1, "includeAll": True, "allValue": ".*", "multi": True,
             "current": {}, "hide": 0, "regex": "", "options": []},
        ]},
        "panels": p,
    }


def render():
    return json.dumps(dashboard(), indent=2, sort_keys=False) + "\n"


if __name__ == "__main__":
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pressured.json")
    if len(sys.argv) > 1 and sys.argv[1] == "--stdout":
        sys.stdout.write(render())
    else:
        with open(out, "w") as f:
            f.write(render())
        print(f"wrote {out}")
