#!/usr/bin/env python3
"""A real Prometheus scrapes a real pressured running against a sandbox.

usage: prometheus_e2e.py <path to pressured> [--source-dir DIR]

1. Builds a sandbox "node" under the memory controller:
   <memory mount>/pressured-test-<pid>-prom/kubepods{,/besteffort,/burstable}/pod<uid>
   with a 512 MiB limit on kubepods, and one bounded process (20 MiB, 90 s)
   in a BestEffort pod.
2. Runs `pressured run --dry-run` against it (cgroup root = the sandbox,
   metrics on 127.0.0.1:<free port>, state file in a temp dir).
3. Runs `prometheus` on 127.0.0.1:<free port> (temp storage, 1 s scrape
   interval, the alert rules loaded) scraping that pressured.
4. Queries the Prometheus HTTP API and asserts the series exist with plausible
   values; runs every dashboard query against it; checks the rules loaded.
Everything is bounded in time and killed/removed at the end, also on failure.

Needs root (cgroups). Without root: exit 77 (CTest SKIP_RETURN_CODE), unless
PRESSURED_REQUIRE_PRIVILEGED=1, in which case it fails.
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import harness  # noqa: E402
from harness import check, free_port, http_get, log, memory_mount, skip_or_fail  # noqa: E402,F401

DEADLINE = harness.Deadline(150)  # whole test, seconds


def wait_for(what, fn, seconds):
    return harness.wait_for(what, fn, seconds, DEADLINE, interval=0.5)


MIB = 1024 * 1024
LIMIT = 512 * MIB
HARD_THRESHOLD = 100 * MIB
NODE = "e2e-node"
POD_UID = "0e2e0000-0000-4000-8000-00000000e2e1"


class Skip(Exception):
    pass


class Sandbox:
    """Our own cgroup tree; removed bottom-up at the end, killing only what runs inside it."""

    def __init__(self, mount, v2):
        self.mount = mount
        self.v2 = v2
        self.name = f"pressured-test-{os.getpid()}-prom"
        self.root = os.path.join(mount, self.name)
        self.procs = []

    @staticmethod
    def sweep_stale(mount):
        """Trees this test left when it was killed past its `finally` (a CTest
        timeout's SIGKILL): ours by name, their process gone. Removed only when
        empty of processes; never anything of another name."""
        for name in os.listdir(mount):
            m = re.fullmatch(r"pressured-test-(\d+)-prom", name)
            if not m or os.path.exists(f"/proc/{m.group(1)}"):
                continue
            root = os.path.join(mount, name)
            for d in sorted((d for d, _, _ in os.walk(root)), key=len, reverse=True):
                try:
                    os.rmdir(d)
                except OSError as e:
                    log(f"WARNING: a stale sandbox of this test stays: {d}: {e}")
            if not os.path.isdir(root):
                log(f"removed {root}, left by an earlier run that was killed")

    def make(self, rel):
        os.makedirs(os.path.join(self.root, rel), exist_ok=True)

    def write(self, rel, file, value):
        with open(os.path.join(self.root, rel, file), "w") as f:
            f.write(value)

    def build(self):
        if self.v2:
            # Delegate memory to the children we create.
            self.make("")
            self.write("", "cgroup.subtree_control", "+memory")
            self.make("kubepods")
            self.write("kubepods", "cgroup.subtree_control", "+memory")
            self.write("kubepods", "memory.max", str(LIMIT))
            for q in ("besteffort", "burstable"):
                self.make(f"kubepods/{q}")
                self.write(f"kubepods/{q}", "cgroup.subtree_control", "+memory")
        else:
            self.make("kubepods/besteffort")
            self.make("kubepods/burstable")
            self.write("kubepods", "memory.limit_in_bytes", str(LIMIT))
        pod = f"kubepods/besteffort/pod{POD_UID}"
        self.make(pod)
        # A bounded workload: 20 MiB touched, then sleeps; exits by itself after 90 s.
        p = subprocess.Popen(
            [sys.executable, "-c",
             "import os,sys,time; sys.stdin.readline(); b=bytearray(20<<20)\n"
             "for i in range(0,len(b),4096): b[i]=1\n"
             "time.sleep(90)"],
            stdin=subprocess.PIPE)
        self.procs.append(p)
        self.write(pod, "cgroup.procs", str(p.pid))
        p.stdin.write(b"go\n")
        p.stdin.flush()

    def cleanup(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
        if not os.path.isdir(self.root):
            return
        # Anything else still in our tree (nothing should be) is killed, by pid, from our own cgroup.procs only.
        for dirpath, _, files in os.walk(self.root):
            if "cgroup.procs" in files:
                try:
                    with open(os.path.join(dirpath, "cgroup.procs")) as f:
                        for pid in f.read().split():
                            try:
                                os.kill(int(pid), signal.SIGKILL)
                            except ProcessLookupError:
                                pass
                except OSError:
                    pass
        for _ in range(50):
            dirs = sorted((d for d, _, _ in os.walk(self.root)), key=len, reverse=True)
            for d in dirs:
                try:
                    os.rmdir(d)
                except OSError:
                    pass
            if not os.path.isdir(self.root):
                return
            time.sleep(0.1)
        log(f"WARNING: could not remove {self.root}")


def start(cmd, logfile):
    log("starting: " + " ".join(cmd))
    out = open(logfile, "w")
    return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def stop(proc, name, timeout=10):
    if proc is None or proc.poll() is not None:
        return proc.returncode if proc else None
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        log(f"{name} ignored SIGTERM for {timeout}s: SIGKILL")
        proc.kill()
        proc.wait(timeout=10)
        return None


def tail(path, n=40):
    try:
        with open(path) as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


class Prom:
    def __init__(self, port):
        self.base = f"http://127.0.0.1:{port}"

    def query(self, expr):
        status, body = http_get(f"{self.base}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
        if status != 200:
            raise AssertionError(f"query {expr!r}: HTTP {status}: {body[:300]}")
        data = json.loads(body)
        if data.get("status") != "success":
            raise AssertionError(f"query {expr!r}: {data}")
        return data["data"]["result"]

    def values(self, expr):
        return [(r["metric"], float(r["value"][1])) for r in self.query(expr)]

    def one(self, expr):
        v = self.values(expr)
        if len(v) != 1:
            raise AssertionError(f"query {expr!r}: expected one series, got {len(v)}: {v}")
        return v[0]


def count_alerts(source_dir):
    """Alerts in the rules file ("- alert:" lines), to compare with what Prometheus loaded."""
    with open(os.path.join(source_dir, "dashboards", "pressured.rules.yml")) as f:
        return sum(1 for line in f if re.match(r"^\s*- alert:", line))


def assertions(prom, pressured_port, source_dir):
    failures = []
    sel = f'node="{NODE}"'

    _, up = prom.one('up{job="pressured"}')
    check(failures, up == 1, f'up{{job="pressured"}} == 1 (got {up})')

    labels, v = prom.one(f"pressured_build_info{{{sel}}}")
    check(failures, v == 1 and re.match(r"^\d+\.\d+\.\d+", labels.get("version", "")) is not None,
          f"pressured_build_info == 1 with a version label (got {v}, {labels})")

    _, start = prom.one(f"pressured_start_time_seconds{{{sel}}}")
    check(failures, time.time() - 300 < start <= time.time() + 5, f"pressured_start_time_seconds is recent ({start})")

    _, ready = prom.one(f"pressured_ready{{{sel}}}")
    check(failures, ready == 1, f"pressured_ready == 1 (got {ready})")

    # The sandbox's allocatable memory is the kubepods limit.
    sig = 'signal="allocatableMemory.available"'
    cap = prom.values(f"pressured_signal_capacity{{{sel},{sig}}}")
    val = prom.values(f"pressured_signal_value{{{sel},{sig}}}")
    check(failures, len(cap) == 1 and cap[0][1] == LIMIT,
          f"allocatableMemory.available capacity == sandbox limit {LIMIT} (got {cap})")
    check(failures, len(val) == 1 and LIMIT - 200 * MIB < val[0][1] <= LIMIT and cap[0][0].get("unit") == "bytes"
          if val and cap else False,
          f"allocatableMemory.available value within (limit - 200 MiB, limit] (got {val})")

    with open("/proc/meminfo") as f:
        total = int(re.search(r"MemTotal:\s+(\d+) kB", f.read()).group(1)) * 1024
    mem = prom.values(f'pressured_signal_value{{{sel},signal="memory.available"}}')
    check(failures, len(mem) == 1 and 0 < mem[0][1] <= total,
          f"memory.available in (0, MemTotal={total}] (got {mem})")

    thr = prom.values(f'pressured_signal_threshold{{{sel},{sig},threshold_type="hard"}}')
    check(failures, len(thr) == 1 and thr[0][1] == HARD_THRESHOLD,
          f"hard threshold for allocatableMemory.available == {HARD_THRESHOLD} (got {thr})")

    conds = {m["condition"]: v for m, v in prom.values(f"pressured_node_condition{{{sel}}}")}
    check(failures, conds == {"MemoryPressure": 0, "DiskPressure": 0, "PIDPressure": 0},
          f"three node conditions, all 0 (got {conds})")

    obs = prom.values(f"increase(pressured_observations_total{{{sel}}}[15s])")
    check(failures, len(obs) == 1 and obs[0][1] > 0, f"observations keep coming (increase over 15s: {obs})")
    polls = prom.values(f"increase(pressured_safety_net_polls_total{{{sel}}}[15s])")
    check(failures, len(polls) == 1 and polls[0][1] > 0, f"safety-net polls keep coming (increase over 15s: {polls})")

    ws = prom.values(f'pressured_pod_memory_working_set_bytes{{{sel},uid="{POD_UID}"}}')
    check(failures, len(ws) == 1 and 15 * MIB <= ws[0][1] <= 200 * MIB and ws[0][0].get("qos_class") == "BestEffort",
          f"the sandbox pod's working set is exported, 15..200 MiB, BestEffort (got {ws})")
    n_pods = prom.values(f"count(pressured_pod_memory_working_set_bytes{{{sel}}})")
    check(failures, n_pods and n_pods[0][1] <= 20, f"per-pod series bounded by topPods=20 (got {n_pods})")

    bpf = prom.values(f"pressured_bpf_program_info{{{sel}}}")
    check(failures, len(bpf) >= 1 and all(m.get("mode") for m, _ in bpf),
          f"BPF attach mode exported per program ({[(m.get('program'), m.get('mode')) for m, _ in bpf]})")

    # The OOM hook sees the whole host: a kill outside any pod (qos_class
    # "none": another test's sandbox, run in parallel) is counted and is not
    # this test's; its own pod was never OOM-killed.
    oom = prom.values(f"pressured_kernel_oom_kills_total{{{sel}}}")
    check(failures, len(oom) == 12 and all(v == 0 for m, v in oom if m.get("qos_class") != "none")
          and {m.get("scope") for m, _ in oom} == {"node", "cgroup", "unknown"},
          f"kernel OOM kill counters exist (4 QoS values by 3 scopes) and are 0 for pods (got {oom})")
    drops = prom.values(f"pressured_ring_buffer_dropped_events_total{{{sel}}}")
    check(failures, len(drops) == 1 and drops[0][1] >= 0, f"ring buffer drop counter exists ({drops})")
    # The reactor's and the observer's own stats, exported by `pressured run`.
    wakeups = prom.values(f"increase(pressured_reactor_wakeups_total{{{sel}}}[15s])")
    check(failures, len(wakeups) == 1 and wakeups[0][1] > 0, f"reactor wakeups keep coming (increase: {wakeups})")
    full = prom.values(f"increase(pressured_observer_observations_total{{{sel}}}[15s])")
    check(failures, len(full) == 1 and full[0][1] > 0, f"the observer's full observations keep coming ({full})")
    gauges = prom.values(f'{{__name__=~"pressured_observer_(pods_without_metadata|metadata_without_cgroup)",{sel}}}')
    check(failures, len(gauges) == 2, f"the observer's metadata gauges exist ({gauges})")

    # Every series pressured serves carries the node label (checked in Prometheus, not in the text).
    nolabel = prom.values('count({__name__=~"pressured_.+", node=""})')
    check(failures, not nolabel, f"no pressured_* series without a node label (got {nolabel})")

    # The alert rules loaded into a real Prometheus.
    status, body = http_get(f"{prom.base}/api/v1/rules")
    rules = [r for g in json.loads(body)["data"]["groups"] for r in g["rules"]] if status == 200 else []
    n_alerts = count_alerts(source_dir)
    check(failures, len([r for r in rules if r["type"] == "alerting"]) == n_alerts and
          all(r.get("health") == "ok" for r in rules if "health" in r),
          f"all {n_alerts} alert rules loaded and healthy ({len(rules)} rules)")
    firing = json.loads(http_get(f"{prom.base}/api/v1/alerts")[1] or '{"data":{"alerts":[]}}')["data"]["alerts"]
    bad = [a["labels"]["alertname"] for a in firing
           if a["labels"]["alertname"] in ("PressuredDown", "PressuredAbsent") and a["state"] == "firing"]
    check(failures, not bad, f"no PressuredDown/PressuredAbsent alert firing (got {bad})")

    # Every dashboard query runs against the real server.
    with open(os.path.join(source_dir, "dashboards", "pressured.json")) as f:
        dash = json.load(f)
    n = 0
    errors = []
    for p in dash["panels"]:
        for t in p.get("targets", []):
            expr = t["expr"].replace("$__rate_interval", "15s").replace("$__range", "1m").replace("$node", NODE)
            try:
                prom.query(expr)
                n += 1
            except AssertionError as e:
                errors.append(str(e))
    check(failures, not errors, f"{n} dashboard queries run against Prometheus ({errors[:2]})")

    hz = http_get(f"http://127.0.0.1:{pressured_port}/healthz")[0]
    rz = http_get(f"http://127.0.0.1:{pressured_port}/readyz")[0]
    check(failures, hz == 200 and rz == 200, f"/healthz and /readyz answer 200 (got {hz}, {rz})")
    return failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pressured")
    ap.add_argument("--source-dir", default=os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
    args = ap.parse_args()
    args.source_dir = os.path.abspath(args.source_dir)

    if os.geteuid() != 0:
        skip_or_fail("root (to create a sandbox memory cgroup)")
    prometheus = shutil.which("prometheus")
    if not prometheus:
        skip_or_fail("the prometheus binary (Debian package prometheus; scripts/setup installs it)")
    mount, v2 = memory_mount()
    if not mount:
        skip_or_fail("a memory cgroup controller")
    if not os.access(args.pressured, os.X_OK):
        print(f"FAIL: {args.pressured} is not an executable", flush=True)
        return 1

    Sandbox.sweep_stale(mount)

    # A SIGTERM (ctest's stop, a CI cancel) unwinds through the `finally` below
    # like an interrupt, so the sandbox and the processes go with it.
    def interrupted(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupted)
    tmp = tempfile.mkdtemp(prefix="pressured-prom-e2e-")
    sandbox = Sandbox(mount, v2)
    daemon = prom = None
    pressured_log = os.path.join(tmp, "pressured.log")
    prom_log = os.path.join(tmp, "prometheus.log")
    try:
        sandbox.build()
        log(f"sandbox {sandbox.root} ({'v2' if v2 else 'v1'}), limit {LIMIT}")

        mport = free_port()
        daemon = start([args.pressured, "run", "--dry-run",
                        "--cgroup-mount", "/sys/fs/cgroup",
                        "--cgroup-root", "/" + sandbox.name,
                        "--kubepods-name", "kubepods",
                        "--cgroup-driver", "cgroupfs",
                        "--eviction-hard", f"allocatableMemory.available<{HARD_THRESHOLD // MIB}Mi",
                        "--metrics-listen", f"127.0.0.1:{mport}",
                        "--state-file", os.path.join(tmp, "state.json"),
                        "--node-name", NODE,
                        "--log-level", "info"], pressured_log)

        def pressured_ready():
            if daemon.poll() is not None:
                raise AssertionError(f"pressured exited with {daemon.returncode} before becoming ready")
            return http_get(f"http://127.0.0.1:{mport}/readyz")[0] == 200

        wait_for("pressured /readyz", pressured_ready, 30)
        log("pressured is ready")

        pport = free_port()
        cfg = os.path.join(tmp, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                f"rule_files:\n  - {os.path.join(args.source_dir, 'dashboards', 'pressured.rules.yml')}\n"
                "scrape_configs:\n  - job_name: pressured\n"
                f"    static_configs:\n      - targets: ['127.0.0.1:{mport}']\n")
        prom = start([prometheus, f"--config.file={cfg}", f"--storage.tsdb.path={os.path.join(tmp, 'data')}",
                      f"--web.listen-address=127.0.0.1:{pport}", "--storage.tsdb.retention.time=1h",
                      "--log.level=warn"], prom_log)
        p = Prom(pport)

        def prom_ready():
            if prom.poll() is not None:
                raise AssertionError(f"prometheus exited with {prom.returncode}")
            return http_get(f"{p.base}/-/ready")[0] == 200

        wait_for("prometheus /-/ready", prom_ready, 40)
        log("prometheus is ready; waiting for 20 s of scrapes")
        wait_for("first successful scrape", lambda: any(v == 1 for _, v in p.values('up{job="pressured"}')), 30)
        time.sleep(20)  # enough samples for increase() over 15 s

        failures = assertions(p, mport, args.source_dir)

        code = stop(daemon, "pressured")
        check(failures, code == 0, f"pressured exits 0 on SIGTERM (got {code})")
        daemon = None
        if failures:
            log("pressured log (tail):\n" + tail(pressured_log))
            print(f"FAIL: {len(failures)} check(s) failed", flush=True)
            return 1
        log("all checks passed")
        return 0
    except AssertionError as e:
        print(f"FAIL: {e}", flush=True)
        log("pressured log (tail):\n" + tail(pressured_log))
        log("prometheus log (tail):\n" + tail(prom_log, 15))
        return 1
    finally:
        stop(daemon, "pressured")
        stop(prom, "prometheus")
        sandbox.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
