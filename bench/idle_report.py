#!/usr/bin/env python3
"""Idle cost and footprint of `pressured run` with N pods (default 110 and 1000).

For each N: builds a sandbox pods root under the host's v1 memory hierarchy,
/sys/fs/cgroup/memory/pressured-test-<pid>-idle<N>/kubepods/{,burstable/,besteffort/}pod<uid>
(mirrored in the pids hierarchy, as the kubelet does), each pod cgroup holding
one sleeping process, writes a matching PodList file,
starts `pressured run` (pod file source, hard thresholds on memory.available and
allocatableMemory.available far from being met, 1 s safety net, dry run,
metrics on 127.0.0.1), lets it settle, then samples it for --seconds:

  start CPU   CPU time (user+sys, every thread) used until the daemon logged "pressured running",
              as the daemon counts it itself (getrusage) in that line
  idle CPU    CPU time over the sample window / wall time, in % of one core
              (utime+stime: sampled at the scheduler tick, 10 ms a sample)
  on-CPU      the same from the threads' schedstat run time (exact: a daemon
              that wakes for ~1 ms a second is charged by chance by ticks)
  RSS / peak  VmRSS at the end of the window / VmHWM (peak RSS)
  wakeups/s   context switches (voluntary + involuntary, all threads) per second
  threads     number of threads

With --rss-breakdown it also prints, per N, what the RSS is made of: anonymous
memory (heap, stacks) against file-backed pages (the binary and its shared
libraries), and the mappings holding the most, summed per file, from
/proc/<pid>/smaps.

Everything it starts is stopped and every cgroup it made removed at the end,
on error and on SIGINT/SIGTERM. Needs root (real memory cgroups). No memory
pressure is created: the pods only sleep.

  python3 bench/idle_report.py --pressured build/release/pressured [--pods 110,1000] [--seconds 20]
"""
import argparse
import functools
import http.server
import threading
import json
import os
import signal
import ssl
import subprocess
import re
import sys
import tempfile
import time

MEMORY_MOUNT = "/sys/fs/cgroup/memory"
PIDS_MOUNT = "/sys/fs/cgroup/pids"  # the kubelet creates pod cgroups in every v1 hierarchy
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # fields[0] is the state (field 3): utime is field 14, stime field 15.
    return (int(fields[11]) + int(fields[12])) / TICKS


def run_ns(pid):
    """Time on CPU (ns) of all threads: /proc/<pid>/task/*/schedstat, exact where
    utime+stime are sampled at the scheduler tick."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


def status(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


def switches(pid):
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            st = status(f"{pid}/task/{tid}")
        except FileNotFoundError:
            continue
        total += int(st.get("voluntary_ctxt_switches", 0)) + int(st.get("nonvoluntary_ctxt_switches", 0))
    return total


def smaps_by_mapping(pid, top=12):
    """Rss (KiB) per mapped file ([heap], [stack], anonymous, ...), largest first."""
    sums, name = {}, "[anon]"
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            head = line.split()
            if not head:
                continue
            if "-" in head[0] and not head[0].endswith(":"):
                name = head[5] if len(head) > 5 else "[anon]"
            elif head[0] == "Rss:":
                sums[name] = sums.get(name, 0) + int(head[1])
    return sorted(sums.items(), key=lambda kv: -kv[1])[:top]


def kib(s):
    return int(s.split()[0])


class Sandbox:
    """The sandbox tree and the sleepers in it; removed bottom-up by cleanup()."""

    def __init__(self, tag, mount=MEMORY_MOUNT):
        self.root = f"{mount}/pressured-test-{os.getpid()}-{tag}"
        self.sleepers = []
        self.dirs = []

    def make(self, rel):
        path = f"{self.root}/{rel}" if rel else self.root
        os.mkdir(path)
        self.dirs.append(path)
        return path

    def sleeper(self, *cgroups):
        p = subprocess.Popen(["sleep", "3600"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        self.sleepers.append(p)
        for cgroup in cgroups:
            with open(f"{cgroup}/cgroup.procs", "w") as f:
                f.write(str(p.pid))

    def cleanup(self):
        for p in self.sleepers:
            if p.poll() is None:
                p.kill()
        for p in self.sleepers:
            p.wait()
        self.sleepers = []
        for d in sorted(self.dirs, key=len, reverse=True):
            for _ in range(50):
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)
        self.dirs = []


def pod_list(pods, labels=None):
    """labels(i) -> a pod's metadata.labels (none when None)."""
    items = []
    for i, (uid, qos) in enumerate(pods):
        if qos == "BestEffort":
            res = {}
        elif qos == "Burstable":
            res = {"requests": {"memory": "32Mi"}}
        else:
            res = {"requests": {"memory": "32Mi", "cpu": "10m"}, "limits": {"memory": "32Mi", "cpu": "10m"}}
        items.append({
            "metadata": dict({"name": "idle-" + uid[-6:], "namespace": "bench", "uid": uid},
                             **({"labels": labels(i)} if labels else {})),
            "spec": {"terminationGracePeriodSeconds": 1, "containers": [{"name": "c", "resources": res}]},
            "status": {"phase": "Running", "qosClass": qos},
        })
    return {"apiVersion": "v1", "kind": "PodList", "items": items}


def measure(binary, n, seconds, settle, extra_env, breakdown=False, pod_source="file", extra_args=(), labels=None):
    """extra_args: more `pressured run` flags; labels: as pod_list's."""
    sb = Sandbox(f"idle{n}")
    pids = Sandbox(f"idle{n}", PIDS_MOUNT) if os.path.isdir(PIDS_MOUNT) else None
    daemon = None
    server = None
    served = [0]  # pod lists the kubelet-like server answered
    tmp = tempfile.mkdtemp(prefix="pressured-idle-")
    try:
        for tree in [sb] + ([pids] if pids else []):
            tree.make("")
            tree.make("kubepods")
            tree.make("kubepods/burstable")
            tree.make("kubepods/besteffort")
        pods = []
        for i in range(n):
            qos = ("Guaranteed", "Burstable", "BestEffort")[i % 3]
            uid = f"0cc1b2c3-0000-4000-8000-{i:012d}"
            sub = {"Guaranteed": "", "Burstable": "burstable/", "BestEffort": "besteffort/"}[qos]
            rel = f"kubepods/{sub}pod{uid}"
            sb.sleeper(sb.make(rel), *([pids.make(rel)] if pids else []))
            pods.append((uid, qos))
        with open(f"{tmp}/pods.json", "w") as f:
            json.dump(pod_list(pods, labels), f)
        log = open(f"{tmp}/daemon.log", "w")
        if pod_source == "file":
            source = ["--pod-file", f"{tmp}/pods.json"]
        else:
            # The kubelet's /pods on loopback, over HTTPS as the kubelet's port
            # serves it (kubelet-https: the daemon's TLS is loaded and used), or
            # plain HTTP (kubelet-http): the daemon runs its HTTP client as a
            # node with a kubelet or API server pod source does.
            class Quiet(http.server.SimpleHTTPRequestHandler):
                def log_message(self, *args):
                    pass

                def log_request(self, code="-", size="-"):
                    if str(code) == "200":
                        served[0] += 1

            handler = functools.partial(Quiet, directory=tmp)
            server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
            scheme, trust = "http", ""
            if pod_source == "kubelet-https":
                subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                                "-nodes", "-days", "1", "-subj", "/CN=idle-report", "-addext",
                                "subjectAltName=IP:127.0.0.1", "-keyout", f"{tmp}/tls.key", "-out", f"{tmp}/tls.crt"],
                               check=True, capture_output=True)
                ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
                ctx.load_cert_chain(f"{tmp}/tls.crt", f"{tmp}/tls.key")
                server.socket = ctx.wrap_socket(server.socket, server_side=True)
                scheme, trust = "https", f"  caFile: {tmp}/tls.crt\n"
            threading.Thread(target=server.serve_forever, daemon=True).start()
            with open(f"{tmp}/token", "w") as f:
                f.write("idle-report\n")
            with open(f"{tmp}/config.yaml", "w") as f:
                f.write(f"pods:\n  kind: kubelet\n  kubeletUrl: {scheme}://127.0.0.1:{server.server_address[1]}/pods.json\n"
                        f"  tokenFile: {tmp}/token\n{trust}")
            source = ["--config", f"{tmp}/config.yaml"]
        argv = [binary, "run", "--cgroup-root", "/" + os.path.basename(sb.root), "--cgroup-driver", "cgroupfs",
                *source, "--metrics-listen", "127.0.0.1:0", "--state-file", f"{tmp}/state.json",
                "--safety-net-interval", "1s", "--dry-run", "--log-level", "info",
                "--eviction-hard", "memory.available<100Mi,allocatableMemory.available<100Mi", *extra_args]
        env = dict(os.environ, **extra_env)
        # A process group of its own: a wrapper passed as --pressured (perf
        # record, strace) is stopped with the daemon it started.
        daemon = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        deadline = time.time() + 30
        start_cpu = None
        while time.time() < deadline:
            if daemon.poll() is not None:
                raise RuntimeError(f"pressured exited with {daemon.returncode}: see {tmp}/daemon.log")
            with open(f"{tmp}/daemon.log") as f:
                text = f.read()
            if "pressured running" in text:
                # The daemon's own count (getrusage: every thread, µs): exact
                # where /proc's utime+stime move by whole clock ticks.
                m = re.search(r"pressured running: .*\(([0-9.]+) ms of CPU\)", text)
                start_cpu = float(m.group(1)) / 1000 if m else cpu_seconds(daemon.pid)
                break
            time.sleep(0.01)
        if start_cpu is None:
            raise RuntimeError(f"pressured did not start within 30 s: see {tmp}/daemon.log")
        time.sleep(settle)
        c0, r0, s0, t0 = cpu_seconds(daemon.pid), run_ns(daemon.pid), switches(daemon.pid), time.monotonic()
        time.sleep(seconds)
        c1, r1, s1, t1 = cpu_seconds(daemon.pid), run_ns(daemon.pid), switches(daemon.pid), time.monotonic()
        st = status(daemon.pid)
        if server is not None and served[0] == 0:
            # A source that never fetched measured a daemon without its HTTP client.
            raise RuntimeError(f"the daemon never fetched the pod list from {pod_source}: see {tmp}/daemon.log")
        return {
            "pods": n,
            "start_cpu_ms": start_cpu * 1000,
            "idle_cpu_pct": (c1 - c0) / (t1 - t0) * 100,
            "idle_run_pct": (r1 - r0) / 1e9 / (t1 - t0) * 100,
            "rss_mib": kib(st["VmRSS"]) / 1024,
            "peak_rss_mib": kib(st["VmHWM"]) / 1024,
            "wakeups_per_s": (s1 - s0) / (t1 - t0),
            "threads": int(st["Threads"]),
            "rss_anon_mib": kib(st.get("RssAnon", "0 kB")) / 1024,
            "rss_file_mib": kib(st.get("RssFile", "0 kB")) / 1024,
            "mappings": smaps_by_mapping(daemon.pid) if breakdown else [],
        }
    finally:
        if daemon is not None:
            stop_group(daemon)
        if server is not None:
            server.shutdown()
        sb.cleanup()
        if pids:
            pids.cleanup()
        subprocess.run(["rm", "-rf", tmp], check=False)


def stop_group(proc):
    """SIGTERM to the daemon's process group (the daemon, or a wrapper and the
    daemon it started), 10 s for it to empty, then SIGKILL to what is left."""
    def group_alive():
        try:
            os.killpg(proc.pid, 0)
            return True
        except (ProcessLookupError, PermissionError):
            return False
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.time() + 10
    while time.time() < deadline:
        proc.poll()  # reaps the direct child, so an emptied group reads as gone
        if not group_alive():
            break
        time.sleep(0.05)
    if group_alive():
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pressured", default="build/release/pressured")
    ap.add_argument("--pods", default="110,1000")
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--settle", type=float, default=3)
    ap.add_argument("--rss-breakdown", action="store_true", help="also print what the RSS is made of")
    ap.add_argument("--pod-source", choices=["file", "kubelet-http", "kubelet-https"], default="file",
                    help="pod metadata from a PodList file, or from a kubelet-like /pods served over HTTP or HTTPS "
                         "(the kubelet's own port is HTTPS) on 127.0.0.1 (the daemon's HTTP client loaded, as on "
                         "a node with a kubelet/API pod source)")
    ap.add_argument("--env", action="append", default=[], help="KEY=VALUE for the daemon (e.g. MALLOC_ARENA_MAX=1)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("idle_report: needs root (real memory cgroups under " + MEMORY_MOUNT + ")", file=sys.stderr)
        return 77
    if not os.access(a.pressured, os.X_OK):
        print(f"idle_report: {a.pressured} is not an executable", file=sys.stderr)
        return 2
    if a.seconds <= 0 or a.seconds > 600:
        print("idle_report: --seconds must be in (0, 600]", file=sys.stderr)
        return 2
    extra_env = dict(kv.split("=", 1) for kv in a.env)

    def stop(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, stop)
    counts = [int(x) for x in a.pods.split(",") if x]
    if any(n < 1 or n > 5000 for n in counts):
        print("idle_report: pod counts must be in 1..5000", file=sys.stderr)
        return 2
    print(f"pressured run, idle, {a.seconds:.0f} s window after {a.settle:.0f} s settling; load average "
          f"{os.getloadavg()[0]:.2f}; pod source {a.pod_source}" + (f"; env {' '.join(a.env)}" if a.env else ""))
    print()
    print("| pods | start CPU ms | idle CPU % of a core | on-CPU % (schedstat) | RSS MiB | peak RSS MiB | wakeups/s | "
          "threads |")
    print("|---|---|---|---|---|---|---|---|")
    results = []
    for n in counts:
        r = measure(a.pressured, n, a.seconds, a.settle, extra_env, a.rss_breakdown, a.pod_source)
        results.append(r)
        print(f"| {r['pods']} | {r['start_cpu_ms']:.0f} | {r['idle_cpu_pct']:.2f} | {r['idle_run_pct']:.3f} | "
              f"{r['rss_mib']:.1f} | "
              f"{r['peak_rss_mib']:.1f} | {r['wakeups_per_s']:.1f} | {r['threads']} |", flush=True)
    for r in results if a.rss_breakdown else []:
        print()
        print(f"RSS of {r['pods']} pods: {r['rss_anon_mib']:.1f} MiB anonymous, {r['rss_file_mib']:.1f} MiB "
              f"file-backed; largest mappings:")
        print()
        print("| mapping | RSS KiB |")
        print("|---|---|")
        for name, kb in r["mappings"]:
            print(f"| {name} | {kb} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
