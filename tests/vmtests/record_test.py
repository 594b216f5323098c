#!/usr/bin/env python3
"""The eviction record from the guest's shell to the verdict, without a guest.

vmtests/guest/node.sh turns the pods' watch lines and a last read of the pods into each
victim's "record" (vmt_node_record_json), which the harness judges (judge_record in
vmtests/harness/scenarios.py). Here the lines come from the pod statuses rendered by the
real kubectl 1.20 with the guest's own template (VMT_RECORD_TEMPLATE: `kubectl annotate
--local`, no server), the functions run under busybox sh as in the guest (node.sh copied
with its /tmp paths moved into a temporary directory), and the result must be valid JSON
that carries every field, a message with quotes and a tab intact, and the verdict the
judge gives on it (Record); vmt_end (scenario_lib.sh) keeps the contender running until the kubelet
has written over the record, and reads its CPU time before that wait. RecordAgainstApiserver runs the guest's watch and last read
against kube-apiserver 1.20 on 127.0.0.1 while the test writes pressured's record and then a
status without reason and message, as kubelet 1.20's sync does. Skips (77) without busybox
or scripts/build-control-plane's kubectl, unless PRESSURED_REQUIRE_PRIVILEGED=1.

    record_test.py [Record | RecordAgainstApiserver]"""
import json
import os
import shutil
import subprocess
import sys
import ssl
import tempfile
import time
import unittest
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "vmtests"))
from harness import node  # noqa: E402
from harness.scenarios import judge  # noqa: E402
import control_plane_case  # noqa: E402  (beside this file)
from control_plane_case import ControlPlaneCase  # noqa: E402

MESSAGE = ('The node was low on resource: memory. Threshold quantity: 150Mi, available: 120Mi. Pod "besteffort-spike"'
           ' was using 300Mi,\trequest is 0. Evicted by pressured (eviction 1a-1) for memory.available (hard threshold)')


def pod(phase, restarts, reason=None, message=None, condition=True):
    status = {"phase": phase, "conditions": [{"type": "Ready", "status": "False"}],
              "containerStatuses": [{"name": "main", "restartCount": restarts, "ready": False, "image": "w",
                                     "imageID": "", "state": {"terminated": {"exitCode": 137, "reason": "Error"}}}]}
    if condition:
        status["conditions"].append({"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet",
                                     "message": MESSAGE})
    if reason:
        status["reason"] = reason
    if message:
        status["message"] = message
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "besteffort-spike", "namespace": "vmtests"},
            "spec": {"containers": [{"name": "main", "image": "w"}]}, "status": status}


class Record(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="pressured-record-test-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.kubectl = os.path.join(node.kubernetes_dir(), "kubectl")
        guest = os.path.join(ROOT, "vmtests", "guest")
        for name in ("lib.sh", "node.sh", "scenario_lib.sh", "contenders.sh", "scenarios.sh"):
            with open(os.path.join(guest, name)) as f:
                text = f.read().replace("/tmp/", self.dir + "/")
            with open(os.path.join(self.dir, name), "w") as f:
                f.write(text)

    def sh(self, script):
        # VMT_DIR: where scenarios.sh finds its library and contenders (the guest's /vmt).
        r = subprocess.run(["busybox", "sh", "-c", f". {self.dir}/lib.sh; . {self.dir}/node.sh; {script}"],
                           capture_output=True, text=True, timeout=60, env=dict(os.environ, VMT_DIR=self.dir))
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def render(self, obj):
        """One record line as the guest's kubectl prints it (VMT_RECORD_TEMPLATE)."""
        path = os.path.join(self.dir, "pod.json")
        with open(path, "w") as f:
            json.dump(obj, f)
        tpl = self.sh('printf %s "$VMT_RECORD_TEMPLATE"')
        r = subprocess.run([self.kubectl, "annotate", "--local", "-f", path, "vmtests=1", "-o", f"go-template={tpl}"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("\n", r.stdout)
        return r.stdout

    def write(self, name, text):
        with open(os.path.join(self.dir, name), "w") as f:
            f.write(text)

    def facts(self, synced_pod, kubectl_line):
        """The pod's facts after a watch that saw it running, then pressured's record, then the
        kubelet's write over it; `synced_pod` is the last read (None: the object is gone)."""
        watch = [(1_000, pod("Running", 0, condition=False)), (2_000, pod("Failed", 0, "Evicted", MESSAGE)),
                 (2_500, pod("Failed", 0))]
        self.write("podwatch.txt", "".join(f"{ms}\x1fMODIFIED\x1f{self.render(p)}\n" for ms, p in watch))
        self.write("records-synced.txt", self.render(synced_pod) + "\n" if synced_pod else "")
        self.write("records-kubectl.txt", kubectl_line)
        self.write("pods-state.txt", "besteffort-spike Failed - 0 - Error\n")
        self.write("events.txt", "Pod/besteffort-spike Evicted src=pressured n=1 The node was low on resource\n")
        # The wait ends at once: the watch shows the kubelet's write after the record, long ago.
        out = self.sh("SCEN=t; vmt_node_record_wait; KUBELET_VERSION=v1.20.2; VMT_RECORD_READ_MS=9000; "
                      "vmt_node_pod_facts besteffort-spike")
        return json.loads("{" + out + "}")

    def test_the_record_reaches_the_verdict(self):
        f = self.facts(pod("Failed", 0), "besteffort-spike   0/1   Error   0   1m\n")
        rec = f["record"]
        self.assertEqual(f["api_evicted_ms"], 2_000)
        self.assertEqual(f["evicted_by"], {"pressured": 1})
        self.assertEqual(rec["kubelet"], "v1.20.2")
        self.assertEqual(rec["evicted"], {"at_ms": 2_000, "phase": "Failed", "deleting": False, "restarts": 0,
                                          "reason": "Evicted", "disruption_target": "True/TerminationByKubelet",
                                          "message": MESSAGE, "disruption_target_message": MESSAGE})
        self.assertEqual(rec["writes_after"], 1)
        self.assertEqual(rec["synced"], {"exists": True, "kubectl_status": "Error", "phase": "Failed",
                                         "deleting": False, "restarts": 0, "reason": "",
                                         "disruption_target": "True/TerminationByKubelet", "message": "",
                                         "disruption_target_message": MESSAGE})
        r = judge({"scenario": "fast-spike", "contender": "pressured+kubelet", "contender_started": True,
                   "contender_alive_at_end": True, "extra": {},
                   "pods": [dict(f, name="besteffort-spike", qos="BestEffort", workload="evicted", oom_kills=0)],
                   "sampler": {"signal": "memory", "start_mono_ns": 0, "crossed_ms": 100, "min_available": 1,
                               "oom_kill_start": 0, "oom_kill_end": 0,
                               "pods": {"besteffort-spike": {"released_ms": 1_000, "peak_procs": 1}}}})
        # The record held (Failed, DisruptionTarget, no restart): the reason and message the
        # kubelet's write dropped are reported, not judged.
        self.assertEqual(r["failures"], [])
        self.assertEqual(r["metrics"]["eviction_records"]["besteffort-spike"]["synced"]["message"], "")
        self.assertEqual(r["metrics"]["eviction_records"]["besteffort-spike"]["synced"]["kubectl_status"], "Error")

    def test_the_contender_runs_on_until_the_kubelet_wrote_over_the_record(self):
        """vmt_end beside a kubelet: pressured must still run while the kubelet's status sync
        writes over its record (it ends the pod when the sync undoes it), and be stopped after;
        its CPU time is read before that wait. The node's API calls are stubbed; the contender
        is a real process, stopped by the real vmt_contender_stop."""
        self.write("pods.list", "besteffort-spike|BestEffort|u1|cg|ctr|1000|0|0|0|0|main\n")
        self.write("ticks", "100\n")
        d = self.dir
        out = self.sh(
            f". {d}/scenarios.sh; VMT_CONTENDER=pressured+kubelet; VMT_NODE=1; SCEN=t; SCEN_T0=$(vmt_ms); "
            "CONTENDER_STARTED=true; DRIVER=cgroupfs; "
            "sleep 0 & SAMPLER_PID=$!; sleep 60 & CONTENDER_PID=$!; "
            f"vmt_ticks() {{ cat {d}/ticks; }}; "
            f"vmt_node_settle() {{ echo settle >> {d}/calls; }}; "
            f"vmt_node_records() {{ echo records-$1 >> {d}/calls; }}; "
            # The kubelet's sync takes its time; the contender burns CPU meanwhile (idle work).
            f"vmt_node_record_wait() {{ if kill -0 $CONTENDER_PID 2>/dev/null; then echo wait-running; "
            f"else echo wait-stopped; fi >> {d}/calls; echo 5000 > {d}/ticks; }}; "
            f"vmt_node_events() {{ echo events >> {d}/calls; }}; "
            "vmt_node_snapshot() { :; }; vmt_node_watch_stop() { :; }; vmt_node_pod_state() { echo failed--; }; "
            "vmt_node_pod_facts() { printf '\"record\":null'; }; vmt_cg_oom_kills() { echo 0; }; "
            "vmt_reset() { :; }; vmt_wl_logs() { echo /dev/null; }; "
            "vmt_end '{}' 2>/dev/null </dev/null; "
            "if kill -0 $CONTENDER_PID 2>/dev/null; then kill $CONTENDER_PID; echo LEFT-RUNNING; fi")
        with open(os.path.join(d, "calls")) as f:
            calls = f.read().split()
        self.assertEqual(calls, ["settle", "records-now", "wait-running", "events"])
        self.assertNotIn("LEFT-RUNNING", out)
        line = next(l for l in out.splitlines() if l.startswith("@@VMT RESULT "))
        result = json.loads(line[len("@@VMT RESULT "):])
        self.assertTrue(result["contender_alive_at_end"])
        # 100 ticks at 100 Hz, taken before the wait; not the 5000 after it.
        self.assertEqual(result["cpu_ms"], 1000)

    def test_a_pod_gone_and_a_restart_are_told_apart(self):
        self.assertEqual(self.facts(None, "")["record"]["synced"], {"exists": False})
        restarted = self.facts(pod("Running", 1, condition=False), "besteffort-spike 1/1 Running 1 1m\n")
        self.assertEqual(restarted["record"]["synced"]["restarts"], 1)
        self.assertEqual(restarted["record"]["synced"]["disruption_target"], "")
        self.assertEqual(restarted["restarts"], 0)  # the watch never saw the restart; the record did


class RecordAgainstApiserver(ControlPlaneCase):
    """The guest's watch and read (vmt_node_watch_start, vmt_node_record_read) against the real
    kube-apiserver 1.20 on 127.0.0.1 (no kubelet: the test writes the two statuses itself, as
    pressured's status update and then as the kubelet's sync that drops reason and message)."""

    setUp = Record.setUp
    write = Record.write

    def sh(self, script, detached=False):
        """Runs `script` after the guest's functions; `detached`: it leaves a process behind (the
        watch), which must not hold this side's pipes."""
        env = dict(os.environ, PATH=os.path.dirname(self.kubectl) + ":" + os.environ.get("PATH", ""))
        out = subprocess.DEVNULL if detached else subprocess.PIPE
        r = subprocess.run(["busybox", "sh", "-c", f". {self.dir}/lib.sh; . {self.dir}/node.sh; "
                            f"KCFG={self.cp.admin_kubeconfig()}; {script}"],
                           stdout=out, stderr=out, text=True, timeout=120, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def patch_status(self, body):
        ctx = ssl.create_default_context(cafile=os.path.join(self.cp.dir, "ca.crt"))
        ctx.load_cert_chain(os.path.join(self.cp.dir, "admin.crt"), os.path.join(self.cp.dir, "admin.key"))
        req = urllib.request.Request(
            f"https://127.0.0.1:{self.cp.port}/api/v1/namespaces/vmtests/pods/besteffort-spike/status",
            data=json.dumps(body).encode(), method="PATCH",
            headers={"Content-Type": "application/strategic-merge-patch+json"})
        with urllib.request.urlopen(req, context=ctx, timeout=30) as resp:
            self.assertEqual(resp.status, 200)

    def watched(self, want):
        """Waits (bounded) until the watch file has `want` lines; returns them."""
        path = os.path.join(self.dir, "podwatch.txt")
        deadline = time.monotonic() + 60
        lines = []
        while time.monotonic() < deadline:
            with open(path) as f:
                lines = f.read().splitlines()
            if len(lines) >= want:
                return lines
            time.sleep(0.5)
        self.fail(f"the watch showed {len(lines)} event(s), not {want}: {lines}")

    def test_the_watch_and_the_read_carry_the_record(self):
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "besteffort-spike", "namespace": "vmtests"},
               "spec": {"nodeName": node.NODE_NAME, "automountServiceAccountToken": False, "containers": [{"name": "main", "image": "w"}]}}
        path = os.path.join(self.dir, "pod.json")
        with open(path, "w") as f:
            json.dump(pod, f)
        r = self.cp.kubectl_run(["-n", "vmtests", "create", "-f", path], timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.addCleanup(self.cp.kubectl_run, ["-n", "vmtests", "delete", "pod", "besteffort-spike",
                                              "--grace-period=0", "--force"], 60)
        self.sh("vmt_node_watch_start", detached=True)
        self.addCleanup(self.sh, "vmt_node_watch_stop")
        # A first change the watch must show, so it is known to be established before the record.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            self.cp.kubectl_run(["-n", "vmtests", "label", "--overwrite", "pod", "besteffort-spike",
                                 f"probe={int(time.monotonic())}"], timeout=30)
            with open(os.path.join(self.dir, "podwatch.txt")) as f:
                if f.read().strip():
                    break
            time.sleep(1)
        first = len(self.watched(1))
        self.patch_status({"status": {"phase": "Failed", "reason": "Evicted", "message": MESSAGE,
                                      "conditions": [{"type": "DisruptionTarget", "status": "True",
                                                      "reason": "TerminationByKubelet", "message": MESSAGE}]}})
        self.watched(first + 1)
        self.patch_status({"status": {"reason": None, "message": None}})
        self.watched(first + 2)
        self.write("pods-state.txt", "besteffort-spike Failed - 0 - -\n")
        self.write("events.txt", "")
        out = self.sh("SCEN=t; vmt_node_record_wait; vmt_node_record_read; vmt_node_pod_facts besteffort-spike")
        f = json.loads("{" + out + "}")
        rec = f["record"]
        with open(os.path.join(self.dir, "podwatch.txt")) as w:
            self.assertIsNotNone(rec["evicted"], "no Failed event in the watch:\n" + w.read())
        self.assertEqual((rec["evicted"]["phase"], rec["evicted"]["reason"], rec["evicted"]["message"],
                          rec["evicted"]["disruption_target"]),
                         ("Failed", "Evicted", MESSAGE, "True/TerminationByKubelet"))
        self.assertEqual(rec["writes_after"], 1)
        self.assertLess(rec["waited_ms"], 45_000)
        self.assertEqual((rec["synced"]["exists"], rec["synced"]["phase"], rec["synced"]["reason"],
                          rec["synced"]["message"], rec["synced"]["disruption_target_message"]),
                         (True, "Failed", "", "", MESSAGE))
        # kubectl 1.20's STATUS column: the reason where there is one, else the phase.
        self.assertEqual(rec["synced"]["kubectl_status"], "Failed")
        self.assertGreater(f["api_evicted_ms"], 0)


if __name__ == "__main__":
    def check():
        node.kubernetes_dir()
        if not shutil.which("busybox"):
            raise EnvironmentError("busybox is missing (Debian package busybox; scripts/setup)")
    control_plane_case.main(check)
