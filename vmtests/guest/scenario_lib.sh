# The scenarios' library, sourced by scenarios.sh inside the guest (busybox sh):
# the kubelet-shaped cgroup tree, the pods and their workloads, the waits, and
# one scenario run (vmt_begin: contender and sampler started; vmt_end: both
# stopped, the @@VMT RESULT line printed, the node reset). The contenders are
# contenders.sh; the scenarios themselves scenarios.sh.

# CG: the memory controller's hierarchy, where the pods' cgroups are read.
# The real-kubelet contenders boot the guest in cgroup v1 mode (VMT_CGROUP=v1,
# vmtests/run --node-cgroup): kubelet 1.20's cAdvisor has no working set for the
# v2 root, so on v2 its memory.available never falls (docs/comparison.md).
if [ "$VMT_CGROUP" = v1 ]; then CG=/sys/fs/cgroup/memory; else CG=/sys/fs/cgroup; fi
PODS_JSON=/run/pods.json
PODS_LIST=/tmp/pods.list
CLK_TCK=100
MEM_TOTAL_KB=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)
# The real-kubelet contenders run pods through containerd and the API (node.sh).
case "$VMT_CONTENDER" in kubelet|pressured+kubelet|daemonset) VMT_NODE=1 ;; *) VMT_NODE= ;; esac

# --- tree ------------------------------------------------------------------

vmt_enable() {  # enable controllers for children of $1 (v2; v1 has them everywhere)
  [ "$VMT_CGROUP" = v1 ] && return 0
  echo "+memory +pids +io" > "$1/cgroup.subtree_control" 2>/dev/null ||
    echo "+memory +pids" > "$1/cgroup.subtree_control"
}

# The few files that differ between the hierarchies, for one cgroup DIR.
vmt_cg_current() {  # bytes charged
  if [ "$VMT_CGROUP" = v1 ]; then cat $1/memory.usage_in_bytes 2>/dev/null || echo 0
  else cat $1/memory.current 2>/dev/null || echo 0; fi
}
vmt_cg_populated() {  # true while a process is in DIR or below (v1 has no cgroup.events)
  if [ "$VMT_CGROUP" = v1 ]; then
    [ -n "$(find $1 -name tasks -exec cat {} + 2>/dev/null | head -n 1)" ]
  else
    grep -q "populated 1" $1/cgroup.events 2>/dev/null
  fi
}
vmt_cg_oom_kills() {  # the kernel's OOM kills inside DIR
  local f=memory.events
  [ "$VMT_CGROUP" = v1 ] && f=memory.oom_control
  awk '$1 == "oom_kill" {print $2}' $1/$f 2>/dev/null
}
vmt_cg_stat() {  # DIR KEY: a v2 memory.stat key (anon, file, inactive_file), hierarchical on v1 too
  local k=$2
  [ "$VMT_CGROUP" = v1 ] && case $k in anon) k=total_rss ;; file) k=total_cache ;; *) k=total_$k ;; esac
  awk -v k=$k '$1 == k {v = $2} END {print v + 0}' $1/memory.stat
}

# vmt_tree DRIVER: creates the kubepods tree for the cgroupfs or systemd driver.
vmt_tree() {
  DRIVER=$1
  # The kubelet runs with the cgroupfs driver (no systemd in the guest).
  [ -n "$VMT_NODE" ] && DRIVER=cgroupfs
  if [ "$DRIVER" = systemd ]; then
    KUBEPODS=kubepods.slice
    KP=$CG/kubepods.slice
    BU=$KP/kubepods-burstable.slice
    BE=$KP/kubepods-besteffort.slice
  else
    KUBEPODS=kubepods
    KP=$CG/kubepods
    BU=$KP/burstable
    BE=$KP/besteffort
  fi
  mkdir -p $KP && vmt_enable $KP
  mkdir -p $BU $BE && vmt_enable $BU && vmt_enable $BE
  mkdir -p $CG/system.slice && vmt_enable $CG/system.slice
  mkdir -p $CG/system.slice/contender $CG/system.slice/sampler $CG/system.slice/neutral
  : > $PODS_LIST
  POD_N=0
  NEUTRAL_PID=
}

# vmt_pod NAME QOS REQ_MIB LIM_MIB [PRIORITY] [TERMINATION_GRACE]: one pod with
# one container, like the kubelet lays it out; registered in the PodList.
vmt_pod() {
  local name=$1 qos=$2 req=$3 lim=$4 prio=${5:-0} grace=${6:-30}
  POD_N=$((POD_N + 1))
  local uid ctr podcg ctrcg adj
  uid=$(printf '%08x-1111-4222-8333-%012x' $POD_N $POD_N)
  ctr=$(printf '%064x' $((POD_N * 7919)))
  local uidu=$(echo $uid | tr - _)
  if [ "$DRIVER" = systemd ]; then
    case $qos in
      Guaranteed) podcg=$KP/kubepods-pod$uidu.slice ;;
      Burstable) podcg=$BU/kubepods-burstable-pod$uidu.slice ;;
      BestEffort) podcg=$BE/kubepods-besteffort-pod$uidu.slice ;;
    esac
    ctrcg=$podcg/cri-containerd-$ctr.scope
  else
    case $qos in
      Guaranteed) podcg=$KP/pod$uid ;;
      Burstable) podcg=$BU/pod$uid ;;
      BestEffort) podcg=$BE/pod$uid ;;
    esac
    ctrcg=$podcg/$ctr
  fi
  mkdir -p $podcg && vmt_enable $podcg && mkdir -p $ctrcg
  if [ "$lim" -gt 0 ]; then
    echo $((lim * 1048576)) > $podcg/memory.max
    echo $((lim * 1048576)) > $ctrcg/memory.max
  fi
  # oom_score_adj exactly as the kubelet sets it (pkg/kubelet/qos/policy.go).
  case $qos in
    Guaranteed) adj=-997 ;;
    BestEffort) adj=1000 ;;
    Burstable)
      adj=$((1000 - (1000 * req * 1024) / MEM_TOTAL_KB))
      [ $adj -lt 2 ] && adj=2
      [ $adj -gt 999 ] && adj=999
      ;;
  esac
  echo "$name|$qos|$uid|$podcg|$ctrcg|$adj|$req|$lim|$prio|$grace|$ctr" >> $PODS_LIST
}

# vmt_pod_resources QOS REQUEST_MIB LIMIT_MIB: a container's "resources" JSON for a
# pod of that QoS class (the pod file's and the API's pods alike). Guaranteed: memory
# and cpu requests equal to the limits; Burstable: a memory request, and a limit
# when LIMIT_MIB > 0; BestEffort: none.
vmt_pod_resources() {
  case $1 in
    Guaranteed) printf '{"requests":{"memory":"%sMi","cpu":"100m"},"limits":{"memory":"%sMi","cpu":"100m"}}' "$2" "$3" ;;
    Burstable)
      if [ "$3" -gt 0 ]; then
        printf '{"requests":{"memory":"%sMi"},"limits":{"memory":"%sMi"}}' "$2" "$3"
      else
        printf '{"requests":{"memory":"%sMi"}}' "$2"
      fi
      ;;
    *) printf '{}' ;;
  esac
}

# vmt_pods_json: writes the PodList (standard Kubernetes Pod JSON) for pressured.
vmt_pods_json() {
  if [ -n "$VMT_NODE" ]; then
    vmt_node_pods_create
    return
  fi
  local first=1
  {
    printf '{"apiVersion":"v1","kind":"PodList","items":['
    while IFS='|' read -r name qos uid podcg ctrcg adj req lim prio grace ctr; do
      local res
      res=$(vmt_pod_resources "$qos" "$req" "$lim")
      [ $first = 1 ] || printf ','
      first=0
      printf '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"%s","namespace":"vmtests","uid":"%s",' "$name" "$uid"
      printf '"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"%s-rs","uid":"%s","controller":true}]},' "$name" "$uid"
      printf '"spec":{"priority":%s,"terminationGracePeriodSeconds":%s,"nodeName":"vm",' "$prio" "$grace"
      printf '"containers":[{"name":"main","image":"vmtests/workload","resources":%s}]},' "$res"
      printf '"status":{"phase":"Running","qosClass":"%s","containerStatuses":[{"name":"main","ready":true,"containerID":"containerd://%s"}]}}' "$qos" "$ctr"
    done < $PODS_LIST
    printf ']}\n'
  } > $PODS_JSON.tmp
  mv $PODS_JSON.tmp $PODS_JSON
}

# vmt_wl_logs: the files the workloads' stderr goes to (pods on the real node
# write into their trigger directory).
vmt_wl_logs() {
  echo /tmp/workloads.log
  [ -n "$VMT_NODE" ] && ls /run/vmt/trig/*/log 2>/dev/null
}

vmt_pod_field() {  # vmt_pod_field NAME FIELD_INDEX
  awk -F'|' -v n="$1" -v f="$2" '$1 == n {print $f}' $PODS_LIST
}

# vmt_pod_run NAME CMD...: starts CMD in the pod's container cgroup with the
# kubelet's oom_score_adj; the pid is recorded for the verdict.
vmt_pod_run() {
  local name=$1
  shift
  if [ -n "$VMT_NODE" ]; then
    vmt_node_pod_run $name "$@"
    return
  fi
  local ctrcg=$(vmt_pod_field $name 5) adj=$(vmt_pod_field $name 6)
  sh -c 'echo $$ > "$1/cgroup.procs" && echo "$2" > /proc/self/oom_score_adj && shift 2 && exec "$@"' \
    vmt-pod "$ctrcg" "$adj" "$@" 2>>/tmp/workloads.log &
  echo "$name $!" >> /tmp/pod_pids
  local i=0  # the pod is running once its cgroup is populated
  while ! vmt_cg_populated $ctrcg && [ $i -lt 100 ]; do
    sleep 0.05
    i=$((i + 1))
  done
}

# vmt_neutral CMD...: pressure from outside kubepods (system.slice/neutral).
vmt_neutral() {
  sh -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' vmt-neutral $CG/system.slice/neutral "$@" \
    2>>/tmp/workloads.log &
  NEUTRAL_PID=$!
  local i=0
  while ! vmt_cg_populated $CG/system.slice/neutral && [ $i -lt 100 ]; do
    sleep 0.05
    i=$((i + 1))
  done
}

# vmt_wait_mem NAME MIB TIMEOUT_S: waits until the pod charges MIB.
vmt_wait_mem() {
  local podcg=$(vmt_pod_field $1 4) want=$(($2 * 1048576)) i=0
  while [ $i -lt $(($3 * 10)) ]; do
    [ "$(vmt_cg_current $podcg)" -ge $want ] && return 0
    sleep 0.1
    i=$((i + 1))
  done
  vmt_mark WARN "pod $1 did not reach $2 MiB in $3 s"
  return 1
}

# vmt_wait_gone NAME TIMEOUT_S: waits until the pod has no process left.
vmt_wait_gone() {
  local podcg=$(vmt_pod_field $1 4) i=0
  while [ $i -lt $(($2 * 10)) ]; do
    # A removed cgroup is gone too (the kubelet removes an evicted pod's).
    { [ ! -d $podcg ] || ! vmt_cg_populated $podcg; } && return 0
    sleep 0.1
    i=$((i + 1))
  done
  return 1
}

# avail_mib: memory.available as the kubelet (and pressured) compute it on
# cgroup v2: MemTotal - (anon + file - inactive_file) of the root memory.stat
# (v1: MemTotal - (the root's memory.usage_in_bytes - total_inactive_file)),
# the same formula as the sampler (workloads/available.h). Not MemFree +
# inactive_file: that also subtracts the kernel's own memory (slab, stacks,
# page tables, vmalloc, BPF maps: 35-60 MiB here), so a scenario sized with it
# to end 30-40 MiB under a threshold never crosses it for the daemon.
avail_mib() {
  if [ "$VMT_CGROUP" = v1 ]; then
    awk -v total_kb=$MEM_TOTAL_KB -v usage=$(cat $CG/memory.usage_in_bytes) '
      $1 == "total_inactive_file" { i = $2 }
      END { ws = usage - i; if (ws < 0) ws = 0; printf "%d\n", (total_kb * 1024 - ws) / 1048576 }' $CG/memory.stat
    return
  fi
  awk -v total_kb=$MEM_TOTAL_KB '
    $1 == "anon" { a = $2 } $1 == "file" { f = $2 } $1 == "inactive_file" { i = $2 }
    END { ws = a + f - i; if (ws < 0) ws = 0; printf "%d\n", (total_kb * 1024 - ws) / 1048576 }' $CG/memory.stat
}

vmt_wait_avail_below() {  # MIB TIMEOUT_S
  local i=0
  while [ $i -lt $(($2 * 5)) ]; do
    [ $(avail_mib) -lt $1 ] && return 0
    sleep 0.2
    i=$((i + 1))
  done
  return 1
}

# vmt_reset: kills everything the previous scenario started and removes the tree.
vmt_reset() {
  # The node's daemons stay; its pods go through the API (the kubelet owns kubepods).
  local keep='^$'
  [ -n "$VMT_NODE" ] && { vmt_node_reset; keep="^$CG/(node.slice|kubepods)"; }
  for d in $(find $CG -mindepth 1 -depth -type d 2>/dev/null | grep -vE "$keep"); do
    if [ -f $d/cgroup.kill ]; then
      echo 1 > $d/cgroup.kill 2>/dev/null
    else
      # cgroup.kill is 5.14+: on older kernels kill what is listed (bounded retries).
      for i in 1 2 3; do
        pids=$(cat $d/cgroup.procs 2>/dev/null)
        [ -z "$pids" ] && break
        kill -9 $pids 2>/dev/null
        sleep 0.1
      done
    fi
  done
  sleep 0.5
  # The node daemons are children of PID 1 (this shell) too: a bare wait would block on them.
  [ -n "$VMT_NODE" ] || wait 2>/dev/null
  for d in $(find $CG -mindepth 1 -depth -type d 2>/dev/null | grep -vE "$keep"); do rmdir $d 2>/dev/null; done
  rm -f /tmp/pod_pids /tmp/sampler.json /var/lib/pressured/* /tmp/contender.log /tmp/workloads.log
  : > /tmp/pod_pids
  sync
  echo 3 > /proc/sys/vm/drop_caches
  echo 32768 > /proc/sys/kernel/pid_max
  sleep 1
}

# --- one scenario run ------------------------------------------------------------

# vmt_begin SCENARIO SAMPLER_SIGNAL SAMPLER_THRESHOLD [SAMPLER_THRESHOLD2]:
# starts contender + sampler (which follows a second threshold when given).
vmt_begin() {
  SCEN=$1
  CONTENDER_TICKS=0
  CONTENDER_START_TICKS=0
  CONTENDER_PIDS=
  CONTENDER_STARTED=true
  vmt_mark STEP "$SCEN: pods ready, avail=$(avail_mib)MiB; starting $VMT_CONTENDER"
  [ -n "$VMT_NODE" ] && vmt_node_watch_start
  vmt_contender_start || CONTENDER_STARTED=false
  local pods="" name podcg
  while IFS='|' read -r name qos uid podcg rest; do pods="$pods,$name=$podcg"; done < $PODS_LIST
  pods="${pods#,}"
  [ -n "$NEUTRAL_PID" ] && pods="$pods,neutral=$CG/system.slice/neutral"
  sh -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' vmt-sampler $CG/system.slice/sampler \
    sampler --signal $2 --threshold $3 --out /tmp/sampler.json --interval-ms 10 --duration ${SAMPLER_DURATION:-240} --pods "$pods" ${4:+--threshold2 $4} &
  SAMPLER_PID=$!
  SCEN_T0=$(vmt_ms)
}

# vmt_restart_contender: SIGTERM the contender and start it again (scenario 8).
vmt_restart_contender() {
  vmt_contender_stop
  vmt_mark STEP "$SCEN: contender stopped (rc=$CONTENDER_RC), restarting"
  vmt_contender_start || CONTENDER_STARTED=false
}

# vmt_end EXTRA_JSON: stops the sampler and the contender, emits the result.
vmt_end() {
  local extra=${1:-"{}"}
  # The node's memory at the end, while the pressure is still held: both ways of
  # reading memory.available (the kubelet's MemTotal - (anon + file -
  # inactive_file), which the sampler uses, and MemFree + inactive_file, which
  # also counts the kernel's own memory as used) can be compared.
  echo "@@VMT MEM $SCEN meminfo $(awk '/^(MemTotal|MemFree|Slab|SUnreclaim|KernelStack|PageTables|Percpu|VmallocUsed|Shmem|Cached|Buffers|Unevictable):/ {printf "%s=%s ", $1, $2}' /proc/meminfo)"
  echo "@@VMT MEM $SCEN root.memory.stat $(awk '$1 ~ /^(total_)?(anon|rss|cache|file|kernel|kernel_stack|pagetables|percpu|sock|shmem|slab|inactive_file|active_file|inactive_anon|active_anon|unevictable)$/ {printf "%s=%s ", $1, $2}' $CG/memory.stat)"
  kill -TERM $SAMPLER_PID 2>/dev/null
  wait $SAMPLER_PID 2>/dev/null
  [ -n "$VMT_NODE" ] && vmt_node_settle
  # pressured's reclaim stage: what it asked and got back over the scenario.
  local reclaim='{}'
  case "$VMT_CONTENDER" in pressured|pressured-*) reclaim=$(vmt_reclaim_metrics) ;; esac
  # Beside a kubelet the contender runs on until the kubelet has written its status
  # over the eviction records (vmt_node_record_wait, on the pods' watch): ending a
  # record the kubelet undoes is pressured's job (docs/kubernetes.md, "Ending a record
  # the kubelet undoes"), which a contender stopped before the kubelet's 10 s status
  # sync cannot do. Its CPU time is taken before that wait, so cpu_ms covers the
  # scenario as before, not the idle wait.
  if [ -n "$VMT_NODE" ]; then
    [ -n "${CTR_PID:-$CONTENDER_PID}" ] && CONTENDER_TICKS_AT=$(vmt_ticks ${CTR_PID:-$CONTENDER_PID})
    vmt_node_records now
    vmt_node_record_wait
  fi
  # How many eviction records pressured counted as undone by the kubelet (and so
  # ended through the API): the judge holds it against the pods it finds ended.
  local undone=null
  [ "$VMT_CONTENDER" = pressured+kubelet ] && undone=$(vmt_undone_records)
  vmt_contender_stop
  CONTENDER_TICKS_AT=
  local pods_json="" name pid st qos podcg ooms
  [ -n "$VMT_NODE" ] && { vmt_node_snapshot; vmt_node_events; vmt_node_watch_stop; }
  while IFS='|' read -r name qos uid podcg ctrcg adj req lim prio grace ctr; do
    pid=$(awk -v n=$name '$1 == n {print $2; exit}' /tmp/pod_pids)
    if [ -n "$VMT_NODE" ]; then
      st=$(vmt_node_pod_state $name)
    elif [ -z "$pid" ]; then
      st=none
    elif kill -0 $pid 2>/dev/null; then
      st=running
    else
      wait $pid 2>/dev/null
      st=$?
    fi
    ooms=$(vmt_cg_oom_kills $podcg)
    local facts=
    [ -n "$VMT_NODE" ] && facts=",$(vmt_node_pod_facts $name)"
    pods_json="$pods_json,{\"name\":\"$name\",\"qos\":\"$qos\",\"uid\":\"$uid\",\"request_mib\":$req,\"limit_mib\":$lim,\"workload\":\"$st\",\"oom_kills\":${ooms:-0}$facts}"
  done < $PODS_LIST
  if [ -n "$NEUTRAL_PID" ]; then
    if kill -0 $NEUTRAL_PID 2>/dev/null; then st=running; else wait $NEUTRAL_PID 2>/dev/null; st=$?; fi
    pods_json="$pods_json,{\"name\":\"neutral\",\"qos\":\"none\",\"workload\":\"$st\",\"oom_kills\":0}"
  fi
  local sampler_json
  sampler_json=$(cat /tmp/sampler.json 2>/dev/null)
  [ -n "$sampler_json" ] || sampler_json=null
  local deploy=null
  [ "$VMT_CONTENDER" = daemonset ] && deploy=$(vmt_ds_json)
  case "$VMT_CONTENDER" in pressured-image*) deploy=$(vmt_ctr_json) ;; esac
  printf '@@VMT RESULT {"scenario":"%s","contender":"%s","driver":"%s","cgroup":"%s","contender_started":%s,"contender_alive_at_end":%s,"contender_rc":%s,"cpu_ms":%s,"cpu_start_ms":%s,"duration_ms":%s,"pods":[%s],"extra":%s,"sampler":%s,"deploy":%s,"reclaim":%s,"records_undone":%s}\n' \
    "$SCEN" "$VMT_CONTENDER" "$DRIVER" "${VMT_CGROUP:-v2}" "$CONTENDER_STARTED" "$CONTENDER_ALIVE" "$CONTENDER_RC" \
    $((CONTENDER_TICKS * 1000 / CLK_TCK)) $((CONTENDER_START_TICKS * 1000 / CLK_TCK)) $(($(vmt_ms) - SCEN_T0)) "${pods_json#,}" "$extra" "$sampler_json" "${deploy:-null}" "$reclaim" "${undone:-null}"
  # The BPF flavour of each program, once per boot (vmtests/run records it).
  if [ -z "$VMT_BPF_REPORTED" ] && { [ "$VMT_CONTENDER" = pressured ] || [ "$VMT_CONTENDER" = pressured-image ]; }; then
    VMT_BPF_REPORTED=1
    grep -E "bpf: |BPF unavailable|running on PSI" /tmp/contender.log | grep -vE "libbpf:|debug bpf" |
      sed "s/^/@@VMT BPF /"
  fi
  # The reclaim stage's lines (its decisions, records and skips), which the tail
  # below may not reach, then the contender's log, for the console log kept on
  # failure (both bounded).
  grep -E "relief" /tmp/contender.log | grep -v " debug " | head -n 80 | sed "s/^/@@VMT LOG $SCEN relief: /"
  grep -v "debug bpf probe" /tmp/contender.log | tail -n 120 | sed "s/^/@@VMT LOG $SCEN: /"
  tail -n 12 $(vmt_wl_logs) 2>/dev/null |
    sed "s/^/@@VMT LOG $SCEN workload: /"
  vmt_reset
}
