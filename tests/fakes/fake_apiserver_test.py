#!/usr/bin/env python3
"""The fake API server (tests/fakes/fake_apiserver.py) answers as the daemon expects an API server to.

bench/soak drives the real daemon against it; these check its answers on their own, over
real HTTP on 127.0.0.1, so a change to the fixture that would break the soak shows here,
without root: the pod LIST and WATCH of one node, a watch from a resourceVersion too old,
the Eviction and pod-status records with their uid preconditions, Events, the node, and
the outage mode.
"""
import json
import os
import sys
import threading
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fake_apiserver  # noqa: E402

NODE = "node-a"
NS = "default"


def pod(name, uid, node=NODE):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "uid": uid, "annotations": {}},
            "spec": {"nodeName": node}, "status": {"phase": "Running"}}


class FakeApiServer(unittest.TestCase):
    def setUp(self):
        self.api = fake_apiserver.FakeApi(NODE, NS)
        self.server = fake_apiserver.serve(self.api)
        self.addCleanup(fake_apiserver.shutdown, self.api, self.server)
        self.base = f"http://127.0.0.1:{self.server.server_port}"

    def call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def pods_path(self, extra=""):
        return f"/api/v1/pods?fieldSelector=spec.nodeName%3D{NODE}{extra}"

    def test_list_serves_the_nodes_pods_and_counts_as_delivered(self):
        rv = self.api.put(pod("a", "u-a"))
        status, text = self.call("GET", self.pods_path())
        self.assertEqual(status, 200)
        doc = json.loads(text)
        self.assertEqual(doc["kind"], "PodList")
        self.assertEqual([p["metadata"]["name"] for p in doc["items"]], ["a"])
        self.assertEqual(doc["metadata"]["resourceVersion"], str(rv))
        # The list is written before it is marked delivered: wait for the handler to finish.
        for _ in range(100):
            if self.api.delivered(rv):
                break
            threading.Event().wait(0.05)
        self.assertTrue(self.api.delivered(rv))

    def test_a_list_for_another_node_is_refused(self):
        status, _ = self.call("GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dother")
        self.assertEqual(status, 400)

    def test_watch_sends_the_changes_after_its_resource_version(self):
        rv_a = self.api.put(pod("a", "u-a"))
        self.api.put(pod("b", "u-b"))
        self.api.delete("a")
        status, text = self.call("GET", self.pods_path(f"&watch=1&resourceVersion={rv_a}&timeoutSeconds=1"))
        self.assertEqual(status, 200)
        lines = [json.loads(line) for line in text.splitlines() if line]
        self.assertEqual([(x["type"], x["object"]["metadata"]["name"]) for x in lines],
                         [("ADDED", "b"), ("DELETED", "a")])

    def test_watch_from_a_resource_version_no_longer_held_is_expired(self):
        for i in range(5010):  # the fake keeps the last 5000 changes
            self.api.put(pod("p", f"u-{i}"))
        status, text = self.call("GET", self.pods_path("&watch=1&resourceVersion=1&timeoutSeconds=1"))
        self.assertEqual(status, 200)
        first = json.loads(text.splitlines()[0])
        self.assertEqual(first["type"], "ERROR")
        self.assertEqual(first["object"]["code"], 410)

    def test_eviction_checks_the_uid_and_marks_the_pod_terminating(self):
        self.api.put(pod("a", "u-a"))
        path = f"/api/v1/namespaces/{NS}/pods/a/eviction"
        status, _ = self.call("POST", path, {"deleteOptions": {"preconditions": {"uid": "other"}}})
        self.assertEqual(status, 409)
        self.assertEqual(self.api.evictions, [])
        status, _ = self.call("POST", path, {"deleteOptions": {"preconditions": {"uid": "u-a"}}})
        self.assertEqual(status, 201)
        self.assertEqual([(n, u) for _, n, u in self.api.evictions], [("a", "u-a")])
        self.assertIn("deletionTimestamp", self.api.pods[(NS, "a")]["metadata"])
        status, _ = self.call("POST", f"/api/v1/namespaces/{NS}/pods/gone/eviction", {})
        self.assertEqual(status, 404)

    def test_a_failed_pod_status_is_the_evictions_record(self):
        self.api.put(pod("a", "u-a"))
        status, text = self.call("PATCH", f"/api/v1/namespaces/{NS}/pods/a/status",
                                 {"metadata": {"uid": "u-a"},
                                  "status": {"phase": "Failed", "reason": "Evicted", "message": "m"}})
        self.assertEqual(status, 200)
        self.assertEqual(json.loads(text)["status"]["reason"], "Evicted")
        self.assertEqual([(n, u) for _, n, u in self.api.evictions], [("a", "u-a")])

    def test_events_and_the_node(self):
        status, _ = self.call("POST", f"/api/v1/namespaces/{NS}/events",
                              {"reason": "Evicted", "involvedObject": {"name": "a", "uid": "u-a"}})
        self.assertEqual(status, 201)
        self.assertEqual(self.api.events, [("Evicted", "a", "u-a")])
        status, _ = self.call("PATCH", f"/api/v1/nodes/{NODE}/status",
                              {"status": {"conditions": [{"type": "MemoryPressure", "status": "True"}]}})
        self.assertEqual(status, 200)
        status, text = self.call("GET", f"/api/v1/nodes/{NODE}")
        self.assertEqual(json.loads(text)["status"]["conditions"][0]["type"], "MemoryPressure")
        self.assertEqual(self.api.requests.get("event"), 1)

    def test_an_outage_fails_list_and_watch_until_it_ends(self):
        self.api.set_failing(True)
        self.assertEqual(self.call("GET", self.pods_path())[0], 500)
        self.assertEqual(self.call("GET", self.pods_path("&watch=1&resourceVersion=0&timeoutSeconds=1"))[0], 500)
        self.api.set_failing(False)
        self.assertEqual(self.call("GET", self.pods_path())[0], 200)


if __name__ == "__main__":
    unittest.main()
