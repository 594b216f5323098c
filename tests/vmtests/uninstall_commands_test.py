#!/usr/bin/env python3
"""The uninstall commands docs/operations.md ("Uninstall") and README.md ("Deploy", step 5) give are
the ones the VM's DaemonSet test runs (vmtests/guest/node.sh, vmt_ds_delete and vmt_ds_uninstall),
in the same order: the documented path is the tested one, and a change to either side is noticed.
The test's own additions are bounds and its kubeconfig (--timeout, --kubeconfig), and its overlay
(vmtests/deploy/) stands where the documents say `my-overlay/`."""
import os
import re
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def read(rel):
    with open(os.path.join(ROOT, rel)) as f:
        return f.read()


def normalise(cmd):
    """A kubectl command without what only the test adds, its paths as the documents write them."""
    cmd = re.sub(r"\s+", " ", cmd).strip()
    cmd = re.sub(r" --kubeconfig \S+", "", cmd)
    cmd = re.sub(r" --timeout=\S+", "", cmd)
    cmd = cmd.replace("$DS_OVERLAY", "my-overlay/").replace("$u", "deploy/uninstall/")
    cmd = cmd.replace("daemonset/", "ds/")
    return cmd


def tested_commands(script):
    """The kubectl commands of vmt_ds_delete and vmt_ds_uninstall (not the `kc` probes), in order."""
    body = ""
    for fn in ("vmt_ds_delete", "vmt_ds_uninstall"):
        m = re.search(r"^" + fn + r"\(\) \{\n(.*?)^\}", script, re.S | re.M)
        if not m:
            raise AssertionError(f"vmtests/guest/node.sh has no {fn}")
        body += m.group(1)
    body = body.replace("\\\n", " ")
    out = []
    for line in body.splitlines():
        # A command line (not a message that names kubectl).
        m = re.match(r"\s*(?:if\s+)?(kubectl .*)", line)
        if not m:
            continue
        # Each command ends at its redirection or the shell's && / ||.
        for part in re.split(r"&&", m.group(1)):
            part = re.split(r"\s(?:>>?|\|\||2>)", part)[0].strip()
            if part.startswith("kubectl "):
                out.append(normalise(part))
    return out


def documented_commands(markdown, anchor):
    """The kubectl commands of the first ```sh block after `anchor` that deletes deploy/uninstall/."""
    start = markdown.index(anchor)
    for block in re.findall(r"```sh\n(.*?)```", markdown[start:], re.S):
        cmds = [normalise(line.split("#", 1)[0]) for line in block.splitlines() if line.strip().startswith("kubectl")]
        if any("deploy/uninstall/" in c for c in cmds):
            return cmds
    raise AssertionError(f"no uninstall commands after {anchor!r}")


class UninstallCommands(unittest.TestCase):
    def setUp(self):
        self.tested = tested_commands(read("vmtests/guest/node.sh"))

    def test_the_test_runs_the_delete_then_the_uninstall(self):
        self.assertEqual(self.tested, ["kubectl delete -k my-overlay/", "kubectl apply -k deploy/uninstall/",
                                       "kubectl -n pressured-uninstall rollout status ds/pressured-uninstall",
                                       "kubectl delete -k deploy/uninstall/"])

    def test_operations_uninstall_is_what_the_test_runs(self):
        self.assertEqual(documented_commands(read("docs/operations.md"), "### Uninstall"), self.tested)

    def test_the_readme_deploy_steps_are_what_the_test_runs(self):
        self.assertEqual(documented_commands(read("README.md"), "## Deploy"), self.tested)

    def test_a_changed_document_is_noticed(self):
        doc = read("docs/operations.md").replace("rollout status ds/pressured-uninstall", "get pods", 1)
        self.assertNotEqual(documented_commands(doc, "### Uninstall"), self.tested)


if __name__ == "__main__":
    unittest.main()
