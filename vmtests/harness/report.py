"""The results table on the console and the markdown of docs/comparison.md."""
import json

from .scenarios import RESULT_NAMES, SCENARIO_ORDER, record_cells
from .contenders import CONTENDER_ORDER


def fmt(v, unit=""):
    return "-" if v is None else f"{v}{unit}"


def latency_text(m):
    if m.get("latency_ms") is not None:
        return f"{m['latency_ms']}ms"
    if m.get("victims") and m.get("crossed_ms") == -1:
        return "before"  # acted before the kubelet-formula threshold was crossed
    return "-"


def print_table(results):
    hdr = ["scenario", "contender", "verdict", "OOM", "victims", "wrong", "procs", "latency", "min.avail", "cpu",
           "cpu-run"]
    rows = []
    for r in results:
        m = r.get("metrics", {})
        verdict = "n/a" if r.get("unavailable") else ("PASS" if r["passed"] else "FAIL")
        rows.append([r["scenario"], r["contender"], verdict, fmt(m.get("kernel_oom_kills")),
                     ",".join(m.get("victims", [])) or "-", fmt(m.get("wrong_victims")),
                     fmt(m.get("processes_killed")), latency_text(m), fmt(m.get("min_available_mib")),
                     fmt(m.get("cpu_ms"), "ms"), fmt(m.get("cpu_after_start_ms"), "ms")])
    widths = [max(len(str(x[i])) for x in rows + [hdr]) for i in range(len(hdr))]
    line = lambda cols: "  ".join(str(c).ljust(w) for c, w in zip(cols, widths))  # noqa: E731
    print(line(hdr))
    print(line(["-" * w for w in widths]))
    for row in rows:
        print(line(row))
    shown = set()
    for r in results:
        if r.get("unavailable"):
            if r["contender"] not in shown:
                shown.add(r["contender"])
                print(f"  {r['contender']}: not run: {r['unavailable']}")
        elif r.get("failures"):
            print(f"  {r['scenario']}/{r['contender']}: {'; '.join(r['failures'])}")
        if r.get("retried") and r["contender"] + "/retried" not in shown:
            shown.add(r["contender"] + "/retried")
            print(f"  {r['contender']}: {r['retried']}")


def print_flavours(fl):
    progs = fl.get("programs", {})
    if not progs:
        print("  pressured BPF: no 'bpf:' lines in its log")
        return
    print("  pressured BPF flavours:")
    for p, v in progs.items():
        print(f"    {p:22} {v['reason'] if v['mode'] != 'off' else 'off: ' + v['reason']}")
    for r in fl.get("load_refusals", []):
        print(f"    refused at load: {r['program']} {r['mode']} {r['target']}: {r['why']}")


def markdown_report(path):
    """Renders a results.json as the markdown table of docs/comparison.md."""
    with open(path) as f:
        doc = json.load(f)
    print(f"- command: `{doc['command']}`")
    print(f"- date: {doc['date']}; kernel: `{doc['kernel']}`; accelerator: {doc['accel']}; "
          f"VM: {doc['vm']['memory_mib']} MiB, {doc['vm']['cpus']} vCPUs"
          + (f" (the real node: {doc['node_memory_mib']} MiB, cgroup {doc.get('node_cgroup')})"
             if doc.get("node_memory_mib") else "")
          + f"; wall time {doc['elapsed_s']} s; "
          f"pressured binary: {doc.get('pressured_binary')}")
    print()
    print("| scenario | contender | verdict | kernel OOM kills | victims (in order) | wrong victims | "
          "processes killed | threshold crossed → memory released | min. available (MiB, or pids) | daemon CPU "
          "(total / after start-up) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    order = {s: i for i, s in enumerate([n for s in SCENARIO_ORDER for n in RESULT_NAMES.get(s, [s])])}
    for r in sorted(doc["results"], key=lambda r: (order.get(r["scenario"], 99),
                                                   CONTENDER_ORDER.index(r["contender"]))):
        m = r.get("metrics", {})
        verdict = "n/a" if r.get("unavailable") else ("pass" if r["passed"] else "**fail**")
        print(f"| {r['scenario']} | {r['contender']} | {verdict} | {fmt(m.get('kernel_oom_kills'))} | "
              f"{', '.join(m.get('victims', [])) or '-'} | {fmt(m.get('wrong_victims'))} | "
              f"{fmt(m.get('processes_killed'))} | {latency_text(m) if m else '-'} | "
              f"{fmt(m.get('min_available_mib'))} | {fmt(m.get('cpu_ms'), ' ms')} / "
              f"{fmt(m.get('cpu_after_start_ms'), ' ms')} |")
    node_rows = [r for r in doc["results"] if r.get("metrics", {}).get("evicted_by") is not None]
    if node_rows:
        print()
        print("On the real node: who evicted (Evicted Events by component), the victims' container restarts, "
              "and the time from the threshold crossing to the API showing the first victim deleted or Failed:")
        print()
        print("| scenario | contender | evictions by component | victim restarts | threshold crossed → API |")
        print("|---|---|---|---|---|")
        for r in node_rows:
            m = r["metrics"]
            by = ", ".join(f"{k} {v}" for k, v in sorted(m["evicted_by"].items())) or "none"
            rs = ", ".join(f"{k} {v}" for k, v in m.get("victim_restarts", {}).items()) or "-"
            print(f"| {r['scenario']} | {r['contender']} | {by} | {rs} | {fmt(m.get('api_gone_latency_ms'), ' ms')} |")
    record_rows = [r for r in doc["results"] if r.get("metrics", {}).get("eviction_records")]
    if record_rows:
        print()
        print("The eviction record on the real node: each victim's status as the API first showed it Failed (the "
              "evictor's write), and again after the kubelet's status sync (`kubectl get pods` STATUS, reason, "
              "message, the DisruptionTarget condition, restarts; writes: the pod's updates after the record):")
        print()
        print("| scenario | contender | pod | recorded | after the kubelet's sync | kubectl STATUS | message | "
              "restarts | writes | kubelet |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for r in record_rows:
            for name, rec in r["metrics"]["eviction_records"].items():
                print("| " + " | ".join([r["scenario"], r["contender"], name] + record_cells(rec)) + " |")
    phase_rows = [r for r in doc["results"] if "phase1_victims" in r.get("metrics", {})]
    if phase_rows:
        print()
        print("Per phase (phase 1: re-read page cache under the soft, then the hard threshold; phase 2: anonymous "
              "growth): evictions, kernel OOM kills, the node's minimum memory.available, and from each threshold's "
              "first crossing to the node back over it (relief) or to the first victim's memory released:")
        print()
        print("| scenario | contender | phase | evicted | kernel OOM kills | min. available (MiB) | "
              "soft: crossings, crossed → back over / → eviction | hard: crossings, crossed → back over / → eviction |")
        print("|---|---|---|---|---|---|---|---|")
        for r in phase_rows:
            m = r["metrics"]
            n = 1
            while f"phase{n}_victims" in m:
                cells = []
                for t in ("soft", "hard"):
                    if f"phase{n}_{t}_crossings" not in m:
                        cells.append("-")
                        continue
                    cells.append(f"{m[f'phase{n}_{t}_crossings']}, {fmt(m.get(f'phase{n}_{t}_crossed_to_recovered_ms'), ' ms')}"
                                 f" / {fmt(m.get(f'phase{n}_{t}_crossed_to_eviction_ms'), ' ms')}")
                print(f"| {r['scenario']} | {r['contender']} | {n} | {', '.join(m[f'phase{n}_victims']) or 'nobody'} | "
                      f"{fmt(m.get(f'phase{n}_oom_kills'))} | {fmt(m.get(f'phase{n}_min_available_mib'))} | "
                      f"{cells[0]} | {cells[1]} |")
                n += 1
    reclaim_rows = [r for r in doc["results"] if r.get("metrics", {}).get("reclaim")]
    if reclaim_rows:
        print()
        print("pressured's reclaim stage over each scenario (its `pressured_reclaim_*` samples at the end, summed "
              "over their labels):")
        print()
        print("| scenario | contender | pressured_reclaim_* |")
        print("|---|---|---|")
        for r in reclaim_rows:
            text = ", ".join(f"{k[len('pressured_reclaim_'):]} {v:g}" for k, v in sorted(r["metrics"]["reclaim"].items()))
            print(f"| {r['scenario']} | {r['contender']} | {text} |")
    if doc.get("relief"):
        print()
        print("The reclaim stage's effective settings (`pressured check-config` with `relief: {enabled: true}`):")
        print()
        print("```yaml")
        print(doc["relief"])
        print("```")
    print()
    for r in doc["results"]:
        if r.get("failures") and not r.get("unavailable"):
            print(f"- {r['scenario']} / {r['contender']}: {'; '.join(r['failures'])}")
    seen = set()
    for r in doc["results"]:
        if r.get("unavailable") and r["contender"] not in seen:
            seen.add(r["contender"])
            print(f"- {r['contender']}: not run: {r['unavailable']}")
    fl = doc.get("bpf") or {}
    if fl.get("programs"):
        print()
        print(f"pressured's BPF programs on `{doc['kernel']}`:")
        print()
        print("| program | flavour (and the better candidates refused) |")
        print("|---|---|")
        for p, v in fl["programs"].items():
            text = v["reason"] if v["mode"] != "off" else "off: " + v["reason"]
            print(f"| {p} | {text.replace('|', '/')} |")
        for r in fl.get("load_refusals", []):
            print(f"\n- refused at load: {r['program']} {r['mode']} {r['target']}: {r['why']}")
