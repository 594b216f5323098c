# Captures real cgroup v2 / procfs files from this kernel into a tar archive,
# streamed to the console as base64 between @@VMT FIXTURES-BEGIN/END markers.
vmt_capture_fixtures() {
  local out=/tmp/fixtures cg=/sys/fs/cgroup
  mkdir -p $out/root $out/child $out/proc/pressure $out/proc/sys/kernel $out/proc/self
  # A child cgroup with real usage: a pod-like cgroup with a process holding memory
  # and a file in the page cache, so memory.stat and memory.events are not all zero.
  mkdir -p $cg/kubepods
  echo "+memory +pids +io" > $cg/kubepods/cgroup.subtree_control 2>/dev/null
  mkdir -p $cg/kubepods/pod-fixture
  echo 200M > $cg/kubepods/pod-fixture/memory.max
  echo 512 > $cg/kubepods/pod-fixture/pids.max
  vmt_spawn $cg/kubepods/pod-fixture memhog --mib 64 --hold 30
  local hog=$VMT_PID
  vmt_in $cg/kubepods/pod-fixture filewriter --path /scratch/fixture.dat --mib 48 --fsync 1 2>/dev/null
  vmt_in $cg/kubepods/pod-fixture cachereader --file /scratch/fixture.dat 2>/dev/null
  # Brief limit squeeze so memory.events has non-zero high/max counters.
  echo 90M > $cg/kubepods/pod-fixture/memory.high
  vmt_in $cg/kubepods/pod-fixture spiker --mib 40 --hold-ms 200 --gap-ms 0 --bursts 1 2>/dev/null
  echo max > $cg/kubepods/pod-fixture/memory.high
  sleep 2
  for f in memory.stat memory.events memory.pressure memory.current memory.max cgroup.controllers \
    cgroup.stat pids.current pids.max cgroup.subtree_control cgroup.events memory.high memory.min memory.low \
    memory.swap.current memory.swap.max memory.events.local io.pressure cpu.pressure cgroup.procs; do
    [ -r $cg/$f ] && cat $cg/$f > $out/root/$f 2>/dev/null
    [ -r $cg/kubepods/pod-fixture/$f ] && cat $cg/kubepods/pod-fixture/$f > $out/child/$f 2>/dev/null
  done
  for f in memory io cpu; do cat /proc/pressure/$f > $out/proc/pressure/$f; done
  cat /proc/meminfo > $out/proc/meminfo
  cat /proc/vmstat > $out/proc/vmstat
  cat /proc/sys/kernel/pid_max > $out/proc/sys/kernel/pid_max
  cat /proc/sys/kernel/threads-max > $out/proc/sys/kernel/threads-max
  cat /proc/self/mountinfo > $out/proc/self/mountinfo
  cat /proc/self/cgroup > $out/proc/self/cgroup
  cat /proc/version > $out/proc/version
  uname -r > $out/uname-r
  ls $cg > $out/root-files.txt
  ls $cg/kubepods/pod-fixture > $out/child-files.txt
  kill $hog 2>/dev/null
  wait
  vmt_mark FIXTURES-BEGIN ""
  tar -C $out -cf - . | gzip -c | base64
  vmt_mark FIXTURES-END ""
}
