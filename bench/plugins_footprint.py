#!/usr/bin/env python3
"""What eviction plugins cost: per decision, and the daemon's RSS and idle CPU with plugins on and off.

Two tables (docs/plugins.md, "Footprint"):

1. Per decision, from bench_plugins (Google Benchmark, Release build):
     merge        on the daemon's loop thread: one plugin's answers merged into the decision and
                  the next round's questions built (BM_PluginMerge, 110 and 1000 pods)
     round trip   on the plugin host's thread: one RankCandidates call of 32 candidates with 5
                  labels each over the Unix socket, to the C++ example and to the Python one
                  (BM_PluginRoundTrip; wall time, and the host thread's own CPU time)

2. `pressured run` idle on a sandbox node of N pods (bench/idle_report.py's measure(): real v1
   memory cgroups under /sys/fs/cgroup/memory/pressured-test-<pid>-*, a PodList file, dry run,
   1 s safety net, so a decision a second), in these configurations:
     off                  no plugins.directory (the gRPC module never loaded)
     off, labels          the same, every pod with 5 labels (the pod snapshot carries them)
     on, no plugin        plugins.directory set, nothing registered: the module loaded, the host's
                          thread and inotify watch
     on, C++ example      the C++ protect example registered (asked once a second)
     on, Python example   the Python protect example registered
   with, for the last two, the plugin process's own RSS.

Needs root (real memory cgroups); everything it starts is stopped and every cgroup removed, as
idle_report.py does. No memory pressure is created.

  sudo python3 bench/plugins_footprint.py --build-dir build/release [--pods 110,1000] [--seconds 20]
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import idle_report  # noqa: E402

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def labels(i):
    """What a Deployment's pod carries (the same five bench_plugins sends)."""
    return {"app": f"svc-{i % 40}", "app.kubernetes.io/instance": f"release-{i % 40}",
            "app.kubernetes.io/name": f"svc-{i % 40}", "pod-template-hash": f"7d9f8c6b5{i % 10}",
            "tier": "db" if i % 5 == 0 else "web"}


def per_decision(build):
    exe = os.path.join(build, "bench", "bench_plugins")
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        # The results to a file of their own: the plugins the benchmark starts share its stdout.
        r = subprocess.run([exe, f"--build-dir={build}", f"--benchmark_out={f.name}", "--benchmark_out_format=json",
                            "--benchmark_min_time=1"], capture_output=True, text=True, timeout=900)
        if r.returncode != 0:
            raise RuntimeError(f"{exe}: exit {r.returncode}: {r.stderr[-600:]}")
        out = json.load(f)
    print(f"Per decision (bench_plugins; load average {os.getloadavg()[0]:.2f}):")
    print()
    print("| what | where | wall µs | CPU µs of the calling thread |")
    print("|---|---|---|---|")
    for b in out["benchmarks"]:
        if b.get("error_occurred"):
            raise RuntimeError(f"{b['name']}: {b.get('error_message')}")
        name = b["name"]
        if name.startswith("BM_PluginMerge/"):
            what = f"merge + next questions, {name.split('/')[1]} pods"
            where = "loop thread"
        else:
            example = {"0": "C++", "1": "Python"}[name.split("/")[1]]
            what = f"RankCandidates, 32 candidates, {example} example"
            where = "plugin host thread"
        print(f"| {what} | {where} | {b['real_time']:.1f} | {b['cpu_time']:.1f} |")
    print()


def rss_mib(pid):
    return idle_report.kib(idle_report.status(pid)["VmRSS"]) / 1024


def configurations(build):
    protect_cpp = [os.path.join(build, "userspace/plugins/pressured-plugin-protect"), "--name", "protect",
                   "--protect-selector", "tier=db"]
    protect_py = ["/usr/bin/python3", os.path.join(SRC, "userspace/plugins/examples/protect.py"), "--name",
                  "protect", "--protect-selector", "tier=db"]
    return [("off", None, False, None), ("off, labels", None, True, None),
            ("on, no plugin", [], True, None), ("on, C++ example", [], True, protect_cpp),
            ("on, Python example", [], True, protect_py)]


def idle(build, counts, seconds, settle):
    binary = os.path.join(build, "pressured")
    print(f"`pressured run` idle, {seconds:.0f} s after {settle:.0f} s settling, a decision a second "
          f"(idle_report.py; load average {os.getloadavg()[0]:.2f}):")
    print()
    print("| pods | plugins | RSS MiB | peak RSS MiB | idle CPU % of a core | on-CPU % (schedstat) | wakeups/s | "
          "threads | plugin RSS MiB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n in counts:
        for name, on, with_labels, plugin in configurations(build):
            tmp = tempfile.mkdtemp(prefix="pressured-plugins-bench-")
            directory = os.path.join(tmp, "plugins")
            os.mkdir(directory, 0o700)
            child = None
            try:
                env = dict(os.environ, PRESSURED_PLUGIN_STUBS=os.path.join(build, "generated/plugin_proto"))
                if plugin:
                    sock = os.path.join(directory, "protect.sock")
                    child = subprocess.Popen(plugin + ["--socket", sock], env=env, stdout=subprocess.DEVNULL,
                                             stderr=subprocess.DEVNULL)
                    end = time.monotonic() + 30
                    while not os.path.exists(sock) and time.monotonic() < end:
                        time.sleep(0.1)
                    if not os.path.exists(sock):
                        raise RuntimeError(f"{' '.join(plugin)} made no socket")
                extra = ["--plugins-directory", directory] if on is not None else []
                r = idle_report.measure(binary, n, seconds, settle, {}, extra_args=extra,
                                        labels=labels if with_labels else None)
                plugin_rss = f"{rss_mib(child.pid):.1f}" if child else "—"
                print(f"| {n} | {name} | {r['rss_mib']:.1f} | {r['peak_rss_mib']:.1f} | {r['idle_cpu_pct']:.2f} | "
                      f"{r['idle_run_pct']:.3f} | {r['wakeups_per_s']:.1f} | {r['threads']} | {plugin_rss} |",
                      flush=True)
            finally:
                if child and child.poll() is None:
                    child.terminate()
                    try:
                        child.wait(10)
                    except subprocess.TimeoutExpired:
                        child.kill()
                        child.wait()
                shutil.rmtree(tmp, ignore_errors=True)
    print()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default=os.path.join(SRC, "build/release"))
    ap.add_argument("--pods", default="110,1000")
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--settle", type=float, default=5)
    ap.add_argument("--skip-idle", action="store_true", help="per-decision table only (no root needed)")
    a = ap.parse_args()
    build = os.path.abspath(a.build_dir)
    for f in ("pressured", "bench/bench_plugins", "userspace/plugins/libpressured_plugin_grpc.so",
              "userspace/plugins/pressured-plugin-protect", "generated/plugin_proto/plugin_v1alpha1_pb2.py"):
        if not os.path.exists(os.path.join(build, f)):
            print(f"plugins_footprint: {build}/{f} is missing: ninja -C {build} pressured bench_plugins",
                  file=sys.stderr)
            return 2
    if not a.skip_idle and os.geteuid() != 0:
        print("plugins_footprint: the idle table needs root (real memory cgroups); --skip-idle for the rest",
              file=sys.stderr)
        return 77
    counts = [int(x) for x in a.pods.split(",") if x]
    if any(n < 1 or n > 5000 for n in counts) or not 0 < a.seconds <= 600:
        print("plugins_footprint: pod counts in 1..5000, --seconds in (0, 600]", file=sys.stderr)
        return 2

    def stop(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, stop)
    per_decision(build)
    if not a.skip_idle:
        idle(build, counts, a.seconds, a.settle)
    return 0


if __name__ == "__main__":
    sys.exit(main())
