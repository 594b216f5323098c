#!/usr/bin/env python3
"""vmtests/run --pressured-image without a guest (vmtests/harness/container.py): the container's OCI spec
is deploy/base/daemonset.yaml's pressured container (namespaces, capabilities, read-only root, its
hostPath volumes, its memory limit) with deploy/seccomp/pressured.json as linux.seccomp, as shipped
and with SCMP_ACT_LOG as the default; the guest's facts of a bad run fail the verdict; a container
rootfs staged in the initramfs is checked as its own root. No QEMU, no root."""
import json
import os
import shutil
import sys
import tempfile
import unittest

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "vmtests"))
from harness import common, container, image  # noqa: E402
from harness.scenarios import CONTAINER_CGROUP, judge_container, judge_paranoid_remedy  # noqa: E402

GOOD = {"pid": "321", "exe": "/usr/local/bin/pressured", "elf_machine": "183", "seccomp": 2, "no_new_privs": "1",
        "cap_eff": "000000c001804024", "cgroup": CONTAINER_CGROUP, "root_read_only": True,
        "metrics_program_lines": 5, "bpf_attached": 4, "eperm_lines": 0, "stopped_cleanly": True, "rc": 0,
        "audit_seccomp": 0, "containers_left": 0, "perf_event_paranoid": 3, "kprobe_attached": 0, "kprobe_refused": 4,
        "kprobe_refused_explained": 4, "metrics_paranoid_reasons": 4, "metrics_wget_rc": 0, "metrics_wget_error": ""}


class Spec(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(os.path.join(ROOT, "deploy", "base", "daemonset.yaml")) as f:
            pod = yaml.safe_load(f)["spec"]["template"]["spec"]
        cls.ds = next(c for c in pod["containers"] if c["name"] == "pressured")
        cls.volumes = {v["name"]: v for v in pod["volumes"]}
        with open(os.path.join(ROOT, "deploy", "seccomp", "pressured.json")) as f:
            cls.profile = json.load(f)

    def test_the_daemonsets_shape(self):
        spec = container.container_spec({"defaultAction": "SCMP_ACT_ERRNO"})
        ns = {n["type"] for n in spec["linux"]["namespaces"]}
        self.assertNotIn("pid", ns, "hostPID")
        self.assertNotIn("network", ns, "hostNetwork")
        self.assertTrue(spec["root"]["readonly"])
        self.assertTrue(spec["process"]["noNewPrivileges"])
        self.assertEqual(spec["process"]["user"], {"uid": 0, "gid": 0})
        caps = sorted("CAP_" + c for c in self.ds["securityContext"]["capabilities"]["add"])
        for kind in ("bounding", "effective", "permitted"):
            self.assertEqual(sorted(spec["process"]["capabilities"][kind]), caps)
        self.assertEqual(spec["linux"]["resources"]["memory"]["limit"], 256 << 20)
        self.assertEqual(spec["linux"]["cgroupsPath"], CONTAINER_CGROUP)
        mounts = {m["destination"]: m for m in spec["mounts"]}
        for vm in self.ds["volumeMounts"]:
            v = self.volumes[vm["name"]]
            if "hostPath" not in v:
                self.assertNotIn(vm["mountPath"], mounts)
                continue
            m = mounts[vm["mountPath"]]
            self.assertEqual(m["source"], v["hostPath"]["path"])
            self.assertIn("ro" if vm.get("readOnly") else "rw", m["options"], vm["mountPath"])
        # PSI and BTF through the container's own /proc and /sys: no host path a kernel may lack.
        self.assertNotIn("/host/proc/pressure", mounts)
        self.assertNotIn("/sys/kernel/btf", mounts)
        self.assertIn("ro", mounts["/host/proc"]["options"])
        self.assertEqual(spec["process"]["args"], ["@@VMT-ARGS@@"])

    def test_the_shipped_profile_as_oci(self):
        shipped = container.oci_seccomp(None)
        logged = container.oci_seccomp("SCMP_ACT_LOG")
        self.assertEqual(shipped["defaultAction"], self.profile["defaultAction"])
        self.assertEqual(shipped["architectures"], self.profile["architectures"])
        self.assertIn("SCMP_ARCH_AARCH64", shipped["architectures"])
        self.assertEqual(logged["defaultAction"], "SCMP_ACT_LOG")
        self.assertNotIn("defaultErrnoRet", logged)
        names = lambda p: sorted(n for r in p["syscalls"] for n in r["names"])  # noqa: E731
        self.assertEqual(names(shipped), names(self.profile))
        self.assertEqual(names(logged), names(self.profile))


class Verdict(unittest.TestCase):
    def setUp(self):
        self.arch = common.ARCH
        common.ARCH = "arm64"

    def tearDown(self):
        common.ARCH = self.arch

    def failures(self, **change):
        out = []
        judge_container(dict(GOOD, **change), out)
        return out

    def test_a_good_run_passes(self):
        self.assertEqual(self.failures(), [])

    def test_each_bad_fact_fails(self):
        for change, words in [({"audit_seccomp": 2}, "audit"), ({"exe": "/usr/bin/pressured"}, "image's"),
                              ({"elf_machine": "62"}, "ELF machine"), ({"seccomp": 0}, "Seccomp"),
                              ({"root_read_only": False}, "read-only"), ({"rc": 137}, "SIGTERM"),
                              ({"metrics_program_lines": 0}, "/metrics"), ({"bpf_attached": 0}, "BPF"),
                              ({"containers_left": 1}, "left"), ({"no_new_privs": "0"}, "NoNewPrivs"),
                              ({"cgroup": "/"}, "cgroup"), ({"audit_seccomp": None}, "audit")]:
            got = self.failures(**change)
            self.assertTrue(any(words in f for f in got), f"{change}: {got}")
        out = []
        judge_container(None, out)
        self.assertEqual(out, ["no container facts from the guest"])

    def test_why_metrics_were_not_read_is_said(self):
        got = self.failures(metrics_program_lines=0, metrics_wget_rc=139, metrics_wget_error="Segmentation fault ")
        self.assertTrue(any("wget exit 139: Segmentation fault" in f for f in got), got)

    def test_kprobes_refused_by_perf_paranoid_must_say_so(self):
        # Above 2 a refusal is expected (no CAP_SYS_ADMIN), but each must name the sysctl and its remedy.
        self.assertEqual(self.failures(kprobe_refused=0, kprobe_refused_explained=0, metrics_paranoid_reasons=0), [])
        got = self.failures(kprobe_refused_explained=3)
        self.assertTrue(any("1 of 4 kprobe(s) refused" in f for f in got), got)
        got = self.failures(metrics_paranoid_reasons=0)
        self.assertTrue(any("/metrics" in f and "perf_event_paranoid" in f for f in got), got)
        got = self.failures(perf_event_paranoid=None)
        self.assertTrue(any("perf_event_paranoid" in f for f in got), got)

    def test_at_two_no_kprobe_may_be_refused(self):
        at2 = {"perf_event_paranoid": 2, "kprobe_attached": 4, "kprobe_refused": 0, "kprobe_refused_explained": 0,
               "metrics_paranoid_reasons": 0}
        self.assertEqual(self.failures(**at2), [])
        got = self.failures(**dict(at2, kprobe_refused=4))
        self.assertTrue(any("CAP_PERFMON should do" in f for f in got), got)
        got = self.failures(**dict(at2, metrics_paranoid_reasons=1))
        self.assertTrue(any("blame" in f for f in got), got)

    def test_the_remedy_attaches_what_the_shipped_run_refused(self):
        def run(c, **d):
            return {"scenario": "fast-spike", "contender": c, "deploy": dict(GOOD, **d)}
        shipped = run("pressured-image")
        out = []
        judge_paranoid_remedy([shipped, run("pressured-image-paranoid2", perf_event_paranoid=2, kprobe_attached=4,
                                            kprobe_refused=0)], out)
        self.assertEqual(out, [])
        judge_paranoid_remedy([shipped, run("pressured-image-paranoid2", perf_event_paranoid=2, kprobe_attached=1,
                                            kprobe_refused=0)], out)
        self.assertTrue(out and "only 1 attached" in out[0], out)


class GuestWget(unittest.TestCase):
    """Every wget command line of the guest's scripts, its options as written, against a local
    HTTP server with the guest's busybox of this machine's architecture (Debian's 1.35 static
    busybox crashes on `wget -T`, which once left the container's /metrics unread)."""

    def test_the_guests_wget_options_fetch(self):
        import glob
        import http.server
        import re
        import subprocess
        import threading
        body = b"pressured_bpf_program_info{program=\"oom_victim\"} 1\n"

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        busybox = "/usr/bin/busybox"  # the amd64 guest's; the arm64 guest's is the same Debian version
        if not os.path.exists(busybox):
            self.fail(f"{busybox} is missing: install busybox-static (scripts/setup)")
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        try:
            seen = 0
            for script in sorted(glob.glob(os.path.join(ROOT, "vmtests", "guest", "*.sh"))):
                with open(script) as f:
                    for line in f:
                        if not re.search(r"\bwget\b.*http://", line):
                            continue
                        opts, words = [], iter(line.split("wget", 1)[1].split())
                        for w in words:
                            if w.startswith("http://"):
                                break
                            if w == "-O":
                                next(words)  # the output: stdout here
                            else:
                                opts.append(w)
                        cmd = [busybox, "wget"] + opts + ["-O", "-", f"http://127.0.0.1:{srv.server_port}/metrics"]
                        r = subprocess.run(cmd, capture_output=True, timeout=20)
                        self.assertEqual((r.returncode, r.stdout), (0, body),
                                         f"{os.path.basename(script)}: {line.strip()}: {r}")
                        seen += 1
            self.assertGreaterEqual(seen, 3, "the guest scripts' wget lines were not found")
        finally:
            srv.shutdown()
            srv.server_close()


class Rootfs(unittest.TestCase):
    def test_a_container_rootfs_is_checked_as_its_own_root(self):
        with tempfile.TemporaryDirectory() as d:
            stage = os.path.join(d, "stage")
            rootfs = os.path.join(stage, "vmt", "ctr", "rootfs")
            exe = shutil.which("du") or "/usr/bin/du"
            os.makedirs(os.path.join(rootfs, "usr", "bin"))
            shutil.copy2(exe, os.path.join(rootfs, "usr", "bin", "du"))
            # Skipped from the stage's check, which would look for its libraries in the stage...
            image.check_initramfs(stage, skip=("vmt/ctr/rootfs",))
            # ...and refused when the image's binary, checked in its own root, lacks them.
            os.makedirs(os.path.join(rootfs, "usr", "local", "bin"))
            shutil.copy2(exe, os.path.join(rootfs, "usr", "local", "bin", "pressured"))
            with self.assertRaises(image.HarnessError) as e:
                container.check_rootfs(rootfs)
            self.assertIn("is in none of", str(e.exception))


if __name__ == "__main__":
    unittest.main()
