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
from harness import common, image  # noqa: E402
import subprocess  # noqa: E402

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



CROSS_CC = "aarch64-linux-gnu-gcc"


class CrossInitramfs(unittest.TestCase):
    """--arch arm64: a cross-built binary's libraries come from the sysroot, found through its
    interpreter and NEEDED entries (ldd cannot run it), and go to their paths inside the sysroot.
    A tiny sysroot is built here with the cross compiler (scripts/setup installs it)."""

    def setUp(self):
        if shutil.which(CROSS_CC) is None:
            self.fail(f"{CROSS_CC} is missing (scripts/setup installs gcc-aarch64-linux-gnu)")
        self.dir = tempfile.TemporaryDirectory()
        self.root = os.path.join(self.dir.name, "sysroot")
        self.stage = os.path.join(self.dir.name, "stage")
        lib, ulib = os.path.join(self.root, "lib", "aarch64-linux-gnu"), os.path.join(self.root, "usr", "lib",
                                                                                      "aarch64-linux-gnu")
        for d in (lib, ulib, self.stage):
            os.makedirs(d)
        src = os.path.join(self.dir.name, "x.c")
        with open(src, "w") as f:
            f.write("int x(void) { return 1; }\n")
        cc = [CROSS_CC, "-nostdlib", "-fPIC", "-Wl,--no-as-needed", "-o"]
        subprocess.run(cc + [os.path.join(lib, "libb.so.1"), "-shared", "-Wl,-soname,libb.so.1", src], check=True)
        subprocess.run(cc + [os.path.join(ulib, "liba.so.1"), "-shared", "-Wl,-soname,liba.so.1", src,
                             os.path.join(lib, "libb.so.1")], check=True)
        self.exe = os.path.join(self.dir.name, "exe")
        subprocess.run(cc + [self.exe, "-Wl,--dynamic-linker=/lib/ld-linux-aarch64.so.1", "-Wl,-e,x", src,
                             os.path.join(ulib, "liba.so.1")], check=True)
        with open(os.path.join(self.root, "lib", "ld-linux-aarch64.so.1"), "wb") as f:
            f.write(b"not an ELF file: the loader's own closure is empty")
        self.saved = (common.ARCH, common.ARCHES["arm64"]["sysroot"])
        common.ARCH, common.ARCHES["arm64"]["sysroot"] = "arm64", self.root

    def tearDown(self):
        common.ARCH, common.ARCHES["arm64"]["sysroot"] = self.saved
        self.dir.cleanup()

    def test_the_needed_closure_comes_from_the_sysroot(self):
        libs = sorted(os.path.relpath(p, self.root) for p in image.ldd_libs(self.exe))
        self.assertEqual(libs, ["lib/aarch64-linux-gnu/libb.so.1", "lib/ld-linux-aarch64.so.1",
                                "usr/lib/aarch64-linux-gnu/liba.so.1"])
        image.copy_with_libs(self.stage, self.exe, "/usr/bin/tool")
        for guest in ("/usr/lib/aarch64-linux-gnu/liba.so.1", "/lib/aarch64-linux-gnu/libb.so.1",
                      "/lib/ld-linux-aarch64.so.1"):
            self.assertTrue(os.path.exists(self.stage + guest), guest)
        self.assertFalse(os.path.exists(self.stage + self.root), "a library kept its host (sysroot) path")
        image.check_initramfs(self.stage)

    def test_a_library_missing_from_the_sysroot_is_named(self):
        os.unlink(os.path.join(self.root, "lib", "aarch64-linux-gnu", "libb.so.1"))
        with self.assertRaises(image.HarnessError) as e:
            image.ldd_libs(self.exe)
        self.assertIn("libb.so.1 (needed by", str(e.exception))


if __name__ == "__main__":
    unittest.main()
