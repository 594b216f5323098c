#!/usr/bin/env python3
"""The real daemon's /readyz waits for the pod source's first pod list.

pressured runs (--dry-run, as root, in its own sandbox memcg tree like
tests/metrics/prometheus_e2e.py) with `pods.kind: apiserver` against a stub API
server on 127.0.0.1 that answers 401 at first: the daemon is alive and has
observed, yet /readyz stays 503, pressured_pod_source_synced is 0 and the
error log names the cause. Then the stub serves an empty PodList: /readyz
turns 200 and the gauge 1. Waits are bounded polls, never assertions on time.
Exit 77 (skip) without root or a memory cgroup, unless PRESSURED_REQUIRE_PRIVILEGED=1.
"""
import argparse
import http.server
import json
import os
import shutil
import sys
import tempfile
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "metrics"))
import prometheus_e2e as e2e  # noqa: E402  (its sandbox, process and HTTP helpers)


class StubApi(http.server.BaseHTTPRequestHandler):
    serving = False  # False: 401 to everything

    def do_GET(self):
        if not StubApi.serving:
            body = json.dumps({"kind": "Status", "code": 401, "reason": "Unauthorized"}).encode()
            self.send_response(401)
        elif "watch=1" in self.path:
            body = b""  # a watch that ends at once: the source backs off
            self.send_response(200)
        else:
            body = json.dumps({"kind": "PodList", "apiVersion": "v1",
                               "metadata": {"resourceVersion": "7"}, "items": []}).encode()
            self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def metric(port, name):
    status, text = e2e.http_get(f"http://127.0.0.1:{port}/metrics")[:2]
    if status != 200:
        return None
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pressured")
    args = ap.parse_args()
    if os.geteuid() != 0:
        e2e.skip_or_fail("root (a sandbox memory cgroup)")
    mount, v2 = e2e.memory_mount()
    if not mount:
        e2e.skip_or_fail("a memory cgroup controller")
    tmp = tempfile.mkdtemp(prefix="pressured-readyz-")
    sandbox = e2e.Sandbox(mount, v2)
    sandbox.name = sandbox.name.replace("-prom", "-readyz")
    sandbox.root = os.path.join(mount, sandbox.name)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), StubApi)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    kubeconfig = os.path.join(tmp, "kubeconfig")
    with open(kubeconfig, "w") as f:
        f.write(f"""apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "http://127.0.0.1:{server.server_port}"}}}}]
users: [{{name: u, user: {{token: wrong}}}}]
contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
current-context: x
""")
    log_path = os.path.join(tmp, "pressured.log")
    daemon = None
    failures = []
    try:
        sandbox.build()
        port = e2e.free_port()
        daemon = e2e.start([args.pressured, "run", "--dry-run",
                            "--cgroup-mount", "/sys/fs/cgroup", "--cgroup-root", "/" + sandbox.name,
                            "--kubepods-name", "kubepods", "--cgroup-driver", "cgroupfs",
                            "--metrics-listen", f"127.0.0.1:{port}",
                            "--state-file", os.path.join(tmp, "state.json"),
                            "--node-name", "readyz-node", "--pod-source", "apiserver",
                            "--kubeconfig", kubeconfig, "--log-level", "info"], log_path)

        def alive_and_observed():
            if daemon.poll() is not None:
                raise AssertionError(f"pressured exited with {daemon.returncode}")
            return (metric(port, "pressured_observations_total") or 0) >= 1

        e2e.wait_for("pressured's first observation", alive_and_observed, 60)
        rz = e2e.http_get(f"http://127.0.0.1:{port}/readyz")[0]
        e2e.check(failures, rz == 503, f"/readyz is 503 while the pod source has delivered nothing (got {rz})")
        e2e.check(failures, metric(port, "pressured_pod_source_synced") == 0, "pressured_pod_source_synced is 0")
        e2e.check(failures, metric(port, "pressured_ready") == 0, "pressured_ready is 0")
        with open(log_path) as f:
            text = f.read()
        e2e.check(failures, "no pod list yet" in text and "HTTP 401" in text,
                  "the error log names the cause (no pod list yet ... HTTP 401)")

        StubApi.serving = True
        e2e.wait_for("/readyz 200 after the first pod list",
                     lambda: e2e.http_get(f"http://127.0.0.1:{port}/readyz")[0] == 200, 90)
        e2e.check(failures, metric(port, "pressured_pod_source_synced") == 1, "pressured_pod_source_synced is 1")
    except AssertionError as err:
        failures.append(str(err))
    finally:
        e2e.stop(daemon, "pressured")
        server.shutdown()
        sandbox.cleanup()
        if failures:
            print(e2e.tail(log_path), flush=True)
        shutil.rmtree(tmp, ignore_errors=True)
    for f in failures:
        print(f"FAIL: {f}", flush=True)
    if not failures:
        print("PASS", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
