#!/usr/bin/env python3
"""The harness's initramfs (vmtests/harness/image.py) carries what the guest's binaries load: the libraries ldd
lists, and those pressured dlopens (read from its source) with their own closure. A
stage that lacks one is refused before any boot, naming the library. No QEMU."""
import os
import sys
import shutil
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "vmtests"))
from harness import image  # noqa: E402

# Any dynamic host executable stands in for pressured: the check looks at the path it is staged at.
STAND_IN = shutil.which("du") or "/usr/bin/du"


class Initramfs(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.stage = os.path.join(self.dir.name, "stage")
        os.makedirs(self.stage)

    def tearDown(self):
        self.dir.cleanup()

    def test_the_dlopened_sonames_come_from_the_source(self):
        self.assertIn("libcurl.so.4", image.dlopened_sonames())

    def test_a_dlopen_without_a_literal_soname_is_refused(self):
        src = os.path.join(self.dir.name, "src")
        os.makedirs(src)
        with open(os.path.join(src, "x.cpp"), "w") as f:
            f.write('void* a = ::dlopen("libfoo.so.1", RTLD_NOW);\nvoid* b = dlopen(name.c_str(), RTLD_NOW);\n')
        with self.assertRaises(image.HarnessError) as e:
            image.dlopened_sonames(src)
        self.assertIn("name.c_str()", str(e.exception))

    def test_an_executable_without_its_libraries_is_refused(self):
        os.makedirs(os.path.join(self.stage, "usr", "bin"))
        shutil.copy2(STAND_IN, os.path.join(self.stage, "usr", "bin", "du"))
        with self.assertRaises(image.HarnessError) as e:
            image.check_initramfs(self.stage)
        self.assertIn("libc.so.6 (needed by /usr/bin/du)", str(e.exception))

    def test_pressured_with_its_ldd_libraries_only_lacks_what_it_dlopens(self):
        image.copy_with_libs(self.stage, STAND_IN, "/usr/bin/pressured")
        with self.assertRaises(image.HarnessError) as e:
            image.check_initramfs(self.stage)
        self.assertIn("libcurl.so.4 (dlopened by /usr/bin/pressured)", str(e.exception))

    def test_pressured_with_the_dlopened_closure_is_complete(self):
        image.copy_with_libs(self.stage, STAND_IN, "/usr/bin/pressured", extra=image.dlopen_libs())
        image.check_initramfs(self.stage)
        # libcurl's own dependencies came along (ldd of libcurl.so.4 itself).
        curl = image.resolve_soname("libcurl.so.4")
        for lib in [curl] + image.ldd_libs(curl):
            self.assertTrue(os.path.exists(self.stage + lib), lib)

    def test_libraries_for_an_executable_outside_the_initramfs_are_checked(self):
        with self.assertRaises(image.HarnessError) as e:
            image.check_initramfs(self.stage, needs_of=[STAND_IN])
        self.assertIn(f"libc.so.6 (needed by {STAND_IN})", str(e.exception))


if __name__ == "__main__":
    unittest.main()
