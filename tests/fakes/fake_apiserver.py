"""A fake Kubernetes API server for tests and benchmarks that run the real daemon.

It holds one node's pods and serves what pressured asks of an API server:
the pod metadata source (`pods.kind: apiserver`: LIST and WATCH of the
node's pods, field selector spec.nodeName) and the eviction target (GET pod,
PATCH pods/status, policy/v1 Eviction, Events, GET and PATCH of the node and
its status). It records what the daemon asked (`evictions`, `events`,
`requests`) and can fail the pod LIST and WATCH (`set_failing`), to stand in
for an API server outage. Plain HTTP on 127.0.0.1 only.

    sys.path.insert(0, os.path.join(<repo>, "tests", "fakes"))
    import fake_apiserver
    api = fake_apiserver.FakeApi(node="soak-node", namespace="soak")
    server = fake_apiserver.serve(api)   # on 127.0.0.1, a port of its own
    ... server.server_port ...
    fake_apiserver.shutdown(api, server)

Used by bench/soak.
"""
import http.server
import json
import re
import sys
import threading
import time
import urllib.parse


class FakeApi:
    """This node's pods, served as an API server's list + watch, and what the daemon asked of it.

    A watch waits until something changed after its resourceVersion (or its
    timeout), sends the changes and ends; the daemon watches again from there.
    While `failing`, pod LIST and WATCH answer 500."""

    def __init__(self, node, namespace):
        self.node_name = node
        self.namespace = namespace
        self.cond = threading.Condition()
        self.rv = 1
        self.pods = {}  # (namespace, name) -> pod object
        self.changes = []  # (rv, type, object), the last few thousand
        self.failing = False
        self.delivered_rv = 0  # the highest resourceVersion sent to the daemon
        self.evictions = []  # (monotonic, name, uid)
        self.events = []  # (reason, involved name, involved uid)
        self.requests = {}
        self.lists = 0
        self.failed_requests = 0
        self.stopping = False
        self.node = {"apiVersion": "v1", "kind": "Node",
                     "metadata": {"name": node, "resourceVersion": "1", "uid": "50a40000-0000-4000-8000-000000000001"},
                     "spec": {}, "status": {"conditions": []}}

    def change(self, kind, pod):
        """Records a change of `pod` (the caller holds `cond`); returns its resourceVersion."""
        self.rv += 1
        pod["metadata"]["resourceVersion"] = str(self.rv)
        self.changes.append((self.rv, kind, json.loads(json.dumps(pod))))
        del self.changes[:-5000]
        self.cond.notify_all()
        return self.rv

    def put(self, pod):
        """ADDED or MODIFIED; returns the change's resourceVersion."""
        with self.cond:
            key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
            kind = "MODIFIED" if key in self.pods else "ADDED"
            self.pods[key] = pod
            return self.change(kind, pod)

    def delete(self, name):
        with self.cond:
            pod = self.pods.pop((self.namespace, name), None)
            if pod is not None:
                self.change("DELETED", pod)

    def set_failing(self, failing):
        with self.cond:
            self.failing = failing
            self.cond.notify_all()

    def delivered(self, rv):
        with self.cond:
            return self.delivered_rv >= rv

    def stop(self):
        with self.cond:
            self.stopping = True
            self.cond.notify_all()


class ApiServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        # The daemon closing a watch or a request it gave up on is not an error of the run.
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError, TimeoutError)):
            super().handle_error(request, client_address)


def make_handler(api):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, *args):
            pass

        def reply(self, code, obj):
            body = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def status(self, code, reason):
            if code >= 400:
                with api.cond:
                    api.failed_requests += 1
            self.reply(code, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason})

        def body(self):
            n = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(n) if n else b""

        def count(self, what):
            with api.cond:
                api.requests[what] = api.requests.get(what, 0) + 1

        def do_GET(self):
            url = urllib.parse.urlsplit(self.path)
            q = urllib.parse.parse_qs(url.query)
            if url.path == "/api/v1/pods":
                if q.get("fieldSelector") != [f"spec.nodeName={api.node_name}"]:
                    return self.status(400, "BadRequest")
                return self.watch(q) if q.get("watch") == ["1"] else self.list()
            m = re.fullmatch(r"/api/v1/namespaces/([^/]+)/pods/([^/]+)", url.path)
            if m:
                self.count("get pod")
                with api.cond:
                    pod = api.pods.get((m.group(1), m.group(2)))
                    pod = json.loads(json.dumps(pod)) if pod else None
                return self.reply(200, pod) if pod else self.status(404, "NotFound")
            if url.path == f"/api/v1/nodes/{api.node_name}":
                self.count("get node")
                with api.cond:
                    return self.reply(200, api.node)
            return self.status(404, "NotFound")

        def list(self):
            self.count("list pods")
            with api.cond:
                if api.failing:
                    return self.status(500, "InternalError")
                items = [json.loads(json.dumps(p)) for p in api.pods.values()]
                rv = api.rv
                api.lists += 1
            self.reply(200, {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": str(rv)},
                             "items": items})
            with api.cond:
                api.delivered_rv = max(api.delivered_rv, rv)

        def watch(self, q):
            self.count("watch pods")
            try:
                since = int(q.get("resourceVersion", ["0"])[0])
                timeout = min(float(q.get("timeoutSeconds", ["5"])[0]), 30.0)
            except ValueError:
                return self.status(400, "BadRequest")
            end = time.monotonic() + timeout
            with api.cond:
                while True:
                    if api.failing:
                        return self.status(500, "InternalError")
                    if api.stopping:
                        return self.status(503, "ServiceUnavailable")
                    if api.changes and since < api.changes[0][0] - 1:
                        lines = [{"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}]
                        break
                    lines = [{"type": t, "object": o} for rv, t, o in api.changes if rv > since]
                    left = end - time.monotonic()
                    if lines or left <= 0:
                        break
                    api.cond.wait(min(left, 1.0))
                last = max([since] + [rv for rv, _, _ in api.changes if rv > since])
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Connection", "close")
            self.end_headers()
            for line in lines:
                self.wfile.write(json.dumps(line).encode() + b"\n")
            self.wfile.flush()
            if lines and lines[0]["type"] != "ERROR":
                with api.cond:
                    api.delivered_rv = max(api.delivered_rv, last)

        def do_POST(self):
            url = urllib.parse.urlsplit(self.path)
            raw = self.body()
            m = re.fullmatch(r"/api/v1/namespaces/([^/]+)/pods/([^/]+)/eviction", url.path)
            if m:
                self.count("eviction")
                try:
                    doc = json.loads(raw)
                except ValueError:
                    return self.status(400, "BadRequest")
                uid = ((doc.get("deleteOptions") or {}).get("preconditions") or {}).get("uid", "")
                with api.cond:
                    pod = api.pods.get((m.group(1), m.group(2)))
                    if pod is None:
                        return self.status(404, "NotFound")
                    if uid and uid != pod["metadata"]["uid"]:
                        return self.status(409, "Conflict")
                    api.evictions.append((time.monotonic(), m.group(2), pod["metadata"]["uid"]))
                    # The API server marks the pod terminating; the caller's
                    # "kubelet" deletes it once its processes are gone.
                    pod["metadata"]["deletionTimestamp"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                    api.change("MODIFIED", pod)
                return self.reply(201, {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201})
            if re.fullmatch(r"/api/v1/namespaces/[^/]+/events", url.path):
                self.count("event")
                try:
                    ev = json.loads(raw)
                except ValueError:
                    return self.status(400, "BadRequest")
                inv = ev.get("involvedObject") or {}
                with api.cond:
                    api.events.append((ev.get("reason", ""), inv.get("name", ""), inv.get("uid", "")))
                    del api.events[:-5000]
                ev.setdefault("metadata", {})["resourceVersion"] = "1"
                return self.reply(201, ev)
            return self.status(404, "NotFound")

        def do_PATCH(self):
            url = urllib.parse.urlsplit(self.path)
            raw = self.body()
            m = re.fullmatch(r"/api/v1/namespaces/([^/]+)/pods/([^/]+)/status", url.path)
            if m:
                # The kubelet's way of recording an eviction, which pressured
                # follows: the pod's status set to Failed/Evicted (the Eviction
                # API only when that is refused). Either is the eviction's API half.
                self.count("pod status")
                try:
                    patch = json.loads(raw)
                except ValueError:
                    return self.status(400, "BadRequest")
                uid = (patch.get("metadata") or {}).get("uid", "")
                with api.cond:
                    pod = api.pods.get((m.group(1), m.group(2)))
                    if pod is None:
                        return self.status(404, "NotFound")
                    if uid and uid != pod["metadata"]["uid"]:
                        return self.status(409, "Conflict")
                    st = patch.get("status") or {}
                    if st.get("phase") == "Failed":
                        api.evictions.append((time.monotonic(), m.group(2), pod["metadata"]["uid"]))
                    for k in ("phase", "reason", "message"):
                        if k in st:
                            pod["status"][k] = st[k]
                    api.change("MODIFIED", pod)
                    return self.reply(200, json.loads(json.dumps(pod)))
            if url.path in (f"/api/v1/nodes/{api.node_name}", f"/api/v1/nodes/{api.node_name}/status"):
                self.count("patch node")
                try:
                    patch = json.loads(raw)
                except ValueError:
                    return self.status(400, "BadRequest")
                with api.cond:
                    for part in ("spec", "status"):
                        if isinstance(patch.get(part), dict):
                            api.node[part].update(patch[part])
                    return self.reply(200, api.node)
            return self.status(404, "NotFound")

        def do_DELETE(self):
            self.count("delete pod")
            self.body()
            return self.status(404, "NotFound")

    return Handler


def serve(api, host="127.0.0.1"):
    """Starts serving `api` on `host` (loopback), a free port, on a daemon thread; returns the server."""
    server = ApiServer((host, 0), make_handler(api))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def shutdown(api, server):
    """Ends the watches in progress and stops the server."""
    api.stop()
    if server is not None:
        server.shutdown()
        server.server_close()
