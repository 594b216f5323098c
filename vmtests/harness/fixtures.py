"""--fixtures: capture cgroup v2 fixture files from the guest."""
import datetime
import gzip
import io
import os
import tarfile
import base64

from .common import OUT, ROOT, log
from .image import build_initramfs, build_scratch_disk, build_workloads
from .qemu import boot, qemu_cmd


def capture_fixtures(args, vmlinuz, mods, version, accel, dest):
    workloads = build_workloads()
    initrd = build_initramfs(mods, {"VMT_MODE": "fixtures"}, {"workloads": workloads}, tag="fixtures")
    disk = build_scratch_disk()
    logp = os.path.join(OUT, "fixtures-console.log")
    lines, status = boot(qemu_cmd(vmlinuz, initrd, disk, accel), logp, 240)
    data, inside = [], False
    for line in lines:
        if "@@VMT FIXTURES-BEGIN" in line:
            inside = True
            continue
        if "@@VMT FIXTURES-END" in line:
            inside = False
            continue
        if inside:
            data.append(line.strip())
    if not data:
        raise RuntimeError(f"no fixtures in the console output ({status}); see {logp}")
    blob = gzip.decompress(base64.b64decode("".join(data)))
    os.makedirs(dest, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(blob)) as t:
        t.extractall(dest)
    with open(os.path.join(dest, "README.md"), "w") as f:
        f.write(f"""# cgroup v2 fixtures from a real 6.1 kernel

Captured by `vmtests/run --fixtures {os.path.relpath(dest, ROOT)}` on {datetime.date.today().isoformat()}
from the Debian cloud kernel `{version}` (`proc/version`: {open(os.path.join(dest, 'proc', 'version')).read().strip()})
booted under QEMU ({accel}, 1 GiB RAM, 2 vCPUs) with a busybox initramfs: pure cgroup v2
(`/sys/fs/cgroup`, nsdelegate) with the memory, pids and io controllers enabled at the root.

- `root/`: files of the root cgroup `/sys/fs/cgroup` (the root has no memory.current,
  memory.max, memory.events, pids.max on 6.1; see `root-files.txt` for what exists).
- `child/`: files of `/sys/fs/cgroup/kubepods/pod-fixture`, a cgroup with memory.max=200M,
  pids.max=512, a process holding 64 MiB of anonymous memory, 48 MiB of file pages written and
  read from an ext4 disk, and a 40 MiB spike against a temporary memory.high=90M (so
  memory.events has non-zero `high` counts). `child-files.txt` lists every file in it.
- `proc/`: /proc/pressure/{{memory,io,cpu}}, /proc/meminfo, /proc/vmstat, /proc/sys/kernel/pid_max,
  threads-max, /proc/self/mountinfo, /proc/self/cgroup, /proc/version, all read at the same moment.

Regenerate with the command above (it overwrites these files).
""")
    log(f"fixtures written to {dest}")
