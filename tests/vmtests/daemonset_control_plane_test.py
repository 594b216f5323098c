#!/usr/bin/env python3
"""The daemonset contender's control plane without a guest (vmtests/harness/node.py).

DaemonSetApply (the default run; etcd and kube-apiserver only): the test overlay
vmtests/deploy/ applied with kubectl 1.20's `apply -k` is accepted by the 1.20
apiserver with validation on, stored as written (the overlay's address and paths), its
ServiceAccount may evict pods and nothing broader, and `kubectl delete -k` removes the
DaemonSet and the cluster-wide RBAC; deploy/uninstall/ is accepted too. Both are applied
from the files node.deploy_files() copies into the guest, laid out as there: a base the
copy misses fails here rather than in a VM boot.

DaemonSetControllers (vm-daemonset only: -DPRESSURED_VM_DAEMONSET_TEST=ON, since it
needs kube-controller-manager and kube-scheduler, `scripts/build-control-plane
--controllers`, ~20 more minutes of build on a fresh machine): the DaemonSet controller
creates the pod, the scheduler binds it to the node, the token controller issues the
ServiceAccount token it mounts; `kubectl delete -k` removes it all.

The node is an API object only (no kubelet runs here), so nothing is started on this host
but the control plane, on 127.0.0.1, stopped at the end. Skips (77) without the binaries
of scripts/build-control-plane, unless PRESSURED_REQUIRE_PRIVILEGED=1.

    daemonset_control_plane_test.py DaemonSetApply | DaemonSetControllers"""
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "vmtests"))
from harness import node  # noqa: E402
import control_plane_case  # noqa: E402  (beside this file)

NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node.NODE_NAME,
                                                        "labels": {"kubernetes.io/os": "linux"}}}
STATUS = {"status": {"capacity": {"cpu": "2", "memory": "1536Mi", "pods": "110"},
                     "allocatable": {"cpu": "2", "memory": "1536Mi", "pods": "110"},
                     "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                     "message": "an API object for the test",
                                     "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                                     "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}


def poll(what, fn, timeout=180):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(1)
    raise AssertionError(f"{what}: not after {timeout} s (last: {last!r})")


class ControlPlaneCase(control_plane_case.ControlPlaneCase):
    @classmethod
    def setUpClass(cls):
        # The guest's copy (node.deploy_files()), at its paths below a directory of our own;
        # before the control plane starts, so nothing is left running if it fails.
        cls.guest_repo = tempfile.mkdtemp(prefix="pressured-guest-repo-")
        try:
            for path, text in node.deploy_files().items():
                local = os.path.join(cls.guest_repo, os.path.relpath(path, node.GUEST_REPO))
                os.makedirs(os.path.dirname(local), exist_ok=True)
                with open(local, "w") as f:
                    f.write(text)
            super().setUpClass()
        except BaseException:
            shutil.rmtree(cls.guest_repo, ignore_errors=True)
            raise

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.guest_repo, ignore_errors=True)
        super().tearDownClass()

    def kc(self, *args, stdin=None, ok=True):
        r = subprocess.run([self.cp.kubectl, "--kubeconfig", self.cp.admin_kubeconfig(), *args], input=stdin,
                           capture_output=True, text=True, timeout=120)
        if ok:
            self.assertEqual(r.returncode, 0, f"kubectl {' '.join(args)}: {r.stderr}")
        return r

    def pods(self):
        out = self.kc("-n", "pressured", "get", "pods", "-o", "json", ok=False)
        return json.loads(out.stdout)["items"] if out.returncode == 0 else []


class DaemonSetApply(ControlPlaneCase):
    def test_overlay_accepted_as_written_and_deleted(self):
        overlay = os.path.join(self.guest_repo, "vmtests", "deploy")
        # kubectl validates against the server's schema (--validate, on by default).
        self.kc("apply", "-k", overlay)
        ds = json.loads(self.kc("-n", "pressured", "get", "daemonset", "pressured", "-o", "json").stdout)
        spec = ds["spec"]["template"]["spec"]
        env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}
        self.assertEqual(env.get("KUBERNETES_SERVICE_HOST"), node.GUEST_API_ADDR)
        paths = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
        self.assertEqual(paths["kubelet"], "/node/state/kubelet")
        self.assertEqual(paths["kubelet-seccomp"], "/var/lib/kubelet/seccomp")
        self.assertEqual([c["name"] for c in spec["initContainers"]], ["install-seccomp"])
        self.assertEqual(spec["serviceAccountName"], "pressured")
        # The RBAC as the apiserver authorizes it: what the daemon calls, nothing broader.
        sa = "system:serviceaccount:pressured:pressured"
        for args, want in ((["create", "pods", "--subresource=eviction", "-n", "vmtests"], "yes"),
                           (["watch", "pods", "--all-namespaces"], "yes"),
                           (["patch", "nodes"], "yes"),
                           (["get", "secrets", "-n", "vmtests"], "no")):
            r = self.kc("auth", "can-i", *args, "--as", sa, ok=False)
            self.assertEqual(r.stdout.strip(), want, f"can-i {' '.join(args)}: {r.stderr}")

        self.kc("delete", "-k", overlay, "--wait=false")
        # No garbage collector or namespace controller here: the objects themselves go,
        # their dependents and the namespace's contents would follow with the controllers.
        poll("the DaemonSet gone",
             lambda: self.kc("-n", "pressured", "get", "daemonset", "pressured", ok=False).returncode != 0, timeout=60)
        for kind in ("clusterrole", "clusterrolebinding"):
            self.assertNotEqual(self.kc("get", kind, "pressured", ok=False).returncode, 0, f"{kind} pressured left")

    def test_uninstall_accepted(self):
        # deploy/uninstall/ (docs/operations.md, "Uninstall") passes the 1.20 apiserver's validation too.
        uninstall = os.path.join(self.guest_repo, "deploy", "uninstall")
        self.kc("apply", "-k", uninstall)
        ds = json.loads(self.kc("-n", "pressured-uninstall", "get", "daemonset", "pressured-uninstall", "-o",
                                "json").stdout)
        self.assertEqual([c["args"][0] for c in ds["spec"]["template"]["spec"]["initContainers"]], ["uninstall"])
        self.kc("delete", "-k", uninstall, "--wait=false")


class DaemonSetControllers(ControlPlaneCase):
    controllers = True

    def test_overlay_pod_made_by_the_daemonset_controller_bound_by_the_scheduler(self):
        # A Node's status may be set on create: allocatable for the scheduler's fit checks.
        self.kc("create", "-f", "-", stdin=json.dumps(dict(NODE, **STATUS)))
        self.kc("apply", "-k", os.path.join(self.guest_repo, "vmtests", "deploy"))

        pod = poll("a bound pressured pod", lambda: next((p for p in self.pods() if p["spec"].get("nodeName")), None))
        self.assertEqual(pod["metadata"]["ownerReferences"][0]["kind"], "DaemonSet")
        self.assertEqual(pod["spec"]["nodeName"], node.NODE_NAME)
        secrets = [v["secret"]["secretName"] for v in pod["spec"]["volumes"] if "secret" in v]
        self.assertTrue(any(s.startswith("pressured-token-") for s in secrets), secrets)
        env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
        self.assertEqual(env.get("KUBERNETES_SERVICE_HOST"), node.GUEST_API_ADDR)
        paths = {v["name"]: v["hostPath"]["path"] for v in pod["spec"]["volumes"] if "hostPath" in v}
        self.assertEqual(paths["kubelet"], "/node/state/kubelet")
        self.assertEqual(paths["kubelet-seccomp"], "/var/lib/kubelet/seccomp")

        events = json.loads(self.kc("-n", "pressured", "get", "events", "-o", "json").stdout)["items"]
        by = {(e["reason"], e.get("source", {}).get("component") or e.get("reportingComponent")) for e in events}
        self.assertIn(("SuccessfulCreate", "daemonset-controller"), by)
        self.assertIn(("Scheduled", "default-scheduler"), by)

        # The token is the control plane's: the apiserver accepts it as the ServiceAccount.
        sec = json.loads(self.kc("-n", "pressured", "get", "secret", next(s for s in secrets
                                                                      if s.startswith("pressured-token-")),
                                 "-o", "json").stdout)
        token = base64.b64decode(sec["data"]["token"]).decode()
        r = subprocess.run([self.cp.kubectl, "--server", f"https://127.0.0.1:{self.cp.port}",
                            "--certificate-authority", os.path.join(self.cp.dir, "ca.crt"), "--token", token,
                            "auth", "can-i", "create", "pods", "--subresource=eviction", "-n", "vmtests"],
                           capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(r.stdout.strip(), "yes", r.stderr)

        self.kc("delete", "-k", os.path.join(self.guest_repo, "vmtests", "deploy"), "--wait=false")
        # No kubelet confirms the pod's graceful deletion here (in the VM it does): force it,
        # or the namespace waits for it forever.
        self.kc("-n", "pressured", "delete", "pods", "--all", "--grace-period=0", "--force", ok=False)
        poll("namespace pressured gone",
             lambda: self.kc("get", "namespace", "pressured", ok=False).returncode != 0, timeout=240)


if __name__ == "__main__":
    control_plane_case.main(
        lambda: node.kubernetes_dir(controllers=not sys.argv[1:] or any("Controllers" in a for a in sys.argv[1:])))
