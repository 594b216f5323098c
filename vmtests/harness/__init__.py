"""The vmtests harness (entry point: vmtests/run). One module a concern:

  common      paths, logging, the run-wide settings main() sets
  kernel      Debian cloud kernels and the modules the initramfs loads
  image       the guest's binaries, the initramfs (checked before a boot), the scratch disk
  qemu        the QEMU command line, a bounded boot, the console's markers
  node        the real-kubelet node: node disk, offline images, control plane on 127.0.0.1
  scenarios   the scenarios, their expectations, the verdict on one result
  contenders  the contenders and their boots (again after a guest lockup)
  report      the console table and the markdown of docs/comparison.md
  gtest       --gtest: a project GoogleTest binary inside the guest
  fixtures    --fixtures: cgroup v2 fixture files from the guest
  suite       a run of scenarios x contenders
  cli         the command line
"""
