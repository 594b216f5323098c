# Helpers shared by the guest scripts (busybox sh).

# vmt_mark KIND TEXT: one marker line on the console, parsed by vmtests/run.
vmt_mark() {
  echo "@@VMT $1 $2"
}

# vmt_ms: milliseconds since boot (CLOCK_BOOTTIME via /proc/uptime, 10 ms grain).
vmt_ms() {
  awk '{printf "%d", $1 * 1000}' /proc/uptime
}

# vmt_in CGDIR CMD ARGS...: runs CMD inside the cgroup CGDIR (foreground; add &
# at the call site for background). The process moves itself, then execs.
vmt_in() {
  sh -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' vmt-in "$@"
}

# vmt_spawn CGDIR CMD ARGS...: like vmt_in, in the background; the pid of the
# workload itself is left in VMT_PID (the shell execs, so it is the same pid).
vmt_spawn() {
  sh -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' vmt-in "$@" &
  VMT_PID=$!
}
