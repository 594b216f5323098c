#!/usr/bin/env python3
"""vmtests/run --pressured-image without a guest (vmtests/harness/container.py): the container's OCI spec
is deploy/daemonset.yaml's pressured container (namespaces, capabilities, read-only root, its
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
from harness.scenarios import CONTAINER_CGROUP, judge_container  # noqa: E402

GOOD = {"pid": "321", "exe": "/usr/local/bin/pressured", "elf_machine": "183", "seccomp": 2, "no_new_privs": "1",
        "cap_eff": "000000c001804024", "cgroup": CONTAINER_CGROUP, "root_read_only": True,
        "metrics_program_lines": 5, "bpf_attached": 4, "eperm_lines": 0, "stopped_cleanly": True, "rc": 0,
        "audit_seccomp": 0, "containers_left": 0}


class Spec(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(os.path.join(ROOT, "deploy", "daemonset.yaml")) as f:
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
        self.assertIn("rw", mounts["/host/proc/pressure"]["options"])
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
