#!/usr/bin/env python3
"""scripts/vmlinux-btf finds a kernel's BTF inside its decompressed Image (an arm64 vmlinuz is no ELF
file): exactly the blob the header announces, not a stray magic number, not a truncated copy. The blob
here is this machine's own BTF (/sys/kernel/btf/vmlinux, what the kernel serves of its image). No network."""
import importlib.machinery
import importlib.util
import os
import struct
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_loader = importlib.machinery.SourceFileLoader("vmlinux_btf", os.path.join(ROOT, "scripts", "vmlinux-btf"))
_spec = importlib.util.spec_from_loader("vmlinux_btf", _loader)
vmlinux_btf = importlib.util.module_from_spec(_spec)
_loader.exec_module(vmlinux_btf)

HOST_BTF = "/sys/kernel/btf/vmlinux"


class FindBtf(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.exists(HOST_BTF):
            raise unittest.SkipTest(f"{HOST_BTF} is missing: this kernel has no BTF to embed")
        with open(HOST_BTF, "rb") as f:
            cls.btf = f.read()

    def test_the_blob_is_found_between_code_and_data(self):
        # A decoy header first (magic, version, flags, hdr_len 24) whose sections do not add up.
        decoy = struct.pack("<HBBIIIII", 0xEB9F, 1, 0, 24, 0, 100, 50, 10)
        image = os.urandom(4096) + decoy + os.urandom(4096) + self.btf + os.urandom(8192)
        self.assertEqual(vmlinux_btf.find_btf(image), self.btf)

    def test_a_truncated_blob_is_not_taken(self):
        image = os.urandom(1024) + self.btf[:len(self.btf) // 2]
        self.assertIsNone(vmlinux_btf.find_btf(image))


if __name__ == "__main__":
    unittest.main()
