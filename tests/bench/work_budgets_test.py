#!/usr/bin/env python3
"""bench/work_budgets.py's own checks: the BPF object's counts read from an object
compiled here, and the comparison that fails a change over its budget.

The object is a two-program BPF source written below, compiled with the same clang
the project's BPF programs use (no root, no BPF), so the counts are known: two
programs, one subprogram, and CO-RE reads of two local types beside a third named
only by its local type id."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import work_budgets  # noqa: E402

SOURCE = r"""
struct task { int pid; int tgid; } __attribute__((preserve_access_index));
struct memcg { long usage; } __attribute__((preserve_access_index));
struct local_only { int x; } __attribute__((preserve_access_index));

static __attribute__((noinline)) int twice(int x) { return x * 2; }

__attribute__((section("raw_tp/one"), used)) int one(struct task *t) { return twice(t->pid) + t->tgid; }
__attribute__((section("raw_tp/two"), used)) int two(struct memcg *m) { return m->usage > 0; }
__attribute__((section("raw_tp/two"), used)) int same(struct task *t) {
    return __builtin_preserve_type_info(*t, 0) + __builtin_btf_type_id(*(struct local_only *)t, 0);
}
char LICENSE[] __attribute__((section("license"), used)) = "GPL";
"""


class BpfObjectCounts(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="pressured-work-budgets-")
        clang = shutil.which("clang")
        if clang is None:
            raise RuntimeError("clang is not installed (scripts/setup installs it): the BPF object cannot be built")
        src = os.path.join(cls.tmp, "probe.bpf.c")
        with open(src, "w") as f:
            f.write(SOURCE)
        cls.obj = os.path.join(cls.tmp, "probe.bpf.o")
        subprocess.run([clang, "-target", "bpf", "-g", "-O2", "-c", src, "-o", cls.obj], check=True)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_counts_programs_not_subprograms(self):
        # one, two and same; twice lives in .text and is a subprogram.
        self.assertEqual(work_budgets.bpf_object_counts(self.obj)["programs"], 3)

    def test_counts_every_instruction_slot(self):
        counts = work_budgets.bpf_object_counts(self.obj)
        if shutil.which("llvm-objdump") is None:
            self.fail("llvm-objdump is not installed (Debian llvm; scripts/setup installs it)")
        dump = subprocess.run(["llvm-objdump", "-d", "--no-show-raw-insn", self.obj], stdout=subprocess.PIPE,
                              text=True, check=True).stdout
        # llvm-objdump numbers the 8-byte slots within each section and prints a 16-byte ld_imm64
        # (`r1 = 2 ll`) once: a section's slots are its last instruction's number plus its width.
        slots, last = 0, None
        for line in dump.splitlines() + ["Disassembly of section end:"]:
            if line.startswith("Disassembly of section"):
                slots += last or 0
                last = None
                continue
            parts = line.split(":", 1)
            if len(parts) == 2 and parts[0].strip().isdigit() and line.startswith(" "):
                last = int(parts[0]) + (2 if parts[1].rstrip().endswith(" ll") else 1)
        self.assertGreater(slots, 6)
        self.assertEqual(counts["instructions"], slots)

    def test_counts_core_types_not_type_id_local(self):
        counts = work_budgets.bpf_object_counts(self.obj)
        # pid, tgid, usage, task's existence and local_only's local type id.
        self.assertGreaterEqual(counts["core_relocations"], 4)
        # struct task and struct memcg; struct local_only appears only in a local type id
        # (__builtin_btf_type_id(.., 0)), which names no kernel type: libbpf searches nothing for it.
        self.assertEqual(counts["core_types"], 2)

    def test_refuses_what_is_not_an_object(self):
        bad = os.path.join(self.tmp, "not-an-object")
        with open(bad, "wb") as f:
            f.write(b"#!/bin/sh\n" + b"\0" * 64)
        with self.assertRaisesRegex(RuntimeError, "not a little-endian ELF64"):
            work_budgets.bpf_object_counts(bad)
        with self.assertRaisesRegex(RuntimeError, "cannot read the BPF object"):
            work_budgets.bpf_object_counts(os.path.join(self.tmp, "missing.bpf.o"))

    def test_refuses_a_cut_object_with_a_reason(self):
        with open(self.obj, "rb") as f:
            head = f.read(200)
        cut = os.path.join(self.tmp, "cut.bpf.o")
        with open(cut, "wb") as f:
            f.write(head)
        with self.assertRaisesRegex(RuntimeError, "not a well-formed BPF object"):
            work_budgets.bpf_object_counts(cut)

    def test_refuses_an_object_without_btf_ext(self):
        # Without -g clang writes no BTF at all (and refuses the CO-RE builtins, so a plain program).
        src, bare = os.path.join(self.tmp, "bare.bpf.c"), os.path.join(self.tmp, "bare.bpf.o")
        with open(src, "w") as f:
            f.write('__attribute__((section("raw_tp/one"), used)) int one(void *ctx) { return 0; }\n')
        subprocess.run(["clang", "-target", "bpf", "-O2", "-c", src, "-o", bare], check=True)
        with self.assertRaisesRegex(RuntimeError, "no .BTF.ext"):
            work_budgets.bpf_object_counts(bare)


class Compare(unittest.TestCase):
    KEY = work_budgets.OBJECT_KEY + ".core_types"

    def test_over_the_margin_fails(self):
        failed, lower, missing, table = work_budgets.compare([self.KEY], {self.KEY: 12}, {self.KEY: (10, "abc")}, 10)
        self.assertEqual((failed, lower, missing), ([self.KEY], [], []))
        self.assertIn("**over**", table[-1])

    def test_within_the_margin_passes(self):
        failed, lower, missing, _ = work_budgets.compare([self.KEY], {self.KEY: 11}, {self.KEY: (10, "abc")}, 10)
        self.assertEqual((failed, lower, missing), ([], [], []))

    def test_well_under_asks_for_a_lower_budget(self):
        failed, lower, _, table = work_budgets.compare([self.KEY], {self.KEY: 8}, {self.KEY: (10, "abc")}, 10)
        self.assertEqual((failed, lower), ([], [self.KEY]))
        self.assertIn("lower the budget", table[-1])

    def test_a_count_without_a_budget_fails(self):
        _, _, missing, _ = work_budgets.compare([self.KEY], {self.KEY: 8}, {}, 10)
        self.assertEqual(missing, [self.KEY])

    def test_the_committed_budgets_cover_every_count(self):
        budgets = work_budgets.read_budgets(os.path.join(ROOT, "bench", "work_budgets.txt"))
        self.assertEqual([k for k in work_budgets.budget_keys() if k not in budgets], [])


if __name__ == "__main__":
    unittest.main()
