# GoogleTest mode (vmtests/run --gtest): runs one gtest binary of the project
# inside the guest as root, with the privileged tiers required, and streams its
# output to the console as "@@VMT GT <line>" markers; "@@VMT GTEST-RC <rc>" ends it.
#   VMT_GTEST          the binary (copied to /usr/bin with its ldd libraries)
#   VMT_GTEST_FILTER   --gtest_filter
#   VMT_GTEST_TIMEOUT  seconds before the binary is killed (SIGKILL)
vmt_run_gtest() {
  export PRESSURED_REQUIRE_PRIVILEGED=1  # a missing capability fails instead of skipping
  export PRESSURED_REQUIRE_CGROUP_V2=1   # the v2-only tests must not skip here
  export PRESSURED_VM_GUEST=1            # tests that change system state may run
  export PRESSURED_EVENTS_ALLOC=/vmt/bin/events_alloc
  vmt_mark INFO "memory=$(awk '/MemTotal/ {print $2 " kB"}' /proc/meminfo) controllers=$(cat /sys/fs/cgroup/cgroup.controllers)"
  vmt_mark STEP "gtest $VMT_GTEST --gtest_filter=$VMT_GTEST_FILTER (timeout ${VMT_GTEST_TIMEOUT}s)"
  local t0 t1
  t0=$(vmt_ms)
  rm -f /tmp/gtest.rc
  {
    timeout -s KILL "$VMT_GTEST_TIMEOUT" "$VMT_GTEST" --gtest_filter="$VMT_GTEST_FILTER" --gtest_color=no \
      </dev/null
    echo $? > /tmp/gtest.rc
  } 2>&1 | while IFS= read -r line; do echo "@@VMT GT $line"; done
  t1=$(vmt_ms)
  vmt_mark GTEST-RC "$(cat /tmp/gtest.rc 2>/dev/null || echo 255) elapsed_ms=$((t1 - t0))"
  # Nothing the tests made may be left behind.
  local left
  left=$(ls -d /sys/fs/cgroup/pressured-test-* 2>/dev/null | tr '\n' ' ')
  [ -n "$left" ] && vmt_mark WARN "sandbox cgroups left behind: $left"
  vmt_mark GTEST-LEFT "$left"
}
