# The vmtests scenarios, run inside the guest for one contender (busybox sh).
#
# Each scenario builds a kubelet-shaped cgroup tree and a PodList file, starts
# the pods' steady workloads, starts the contender and the ground-truth sampler,
# drives pressure, waits for the outcome (bounded), and prints one
#   @@VMT RESULT {json}
# line with the raw facts: which pod workloads were killed and how, kernel OOM
# kills, the sampler's timings, the contender's CPU time. vmtests/run judges
# them (assertions live there, next to the scenario descriptions).

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

# --- contenders --------------------------------------------------------------

# Thresholds of the current scenario (MiB, or a count for PIDs). Peers get the
# hard memory threshold, which is the one that acts at once.
vmt_thresholds() {
  HARD_MI=${1:-150}
  SOFT_MI=${2:-0}
  SOFT_GRACE=${3:-0s}
  MIN_RECLAIM_MI=${4:-0}
  TRANSITION=${5:-10s}
  PID_HARD=${6:-0}
  MAX_POD_GRACE=${7:-0}
  # The memory thresholds of whoever acts first: beside the kubelet, pressured's
  # are PRESSURED_MARGIN_MI (50) above the scenario's, which the kubelet keeps.
  ACT_MI=$HARD_MI
  ACT_SOFT_MI=$SOFT_MI
  if [ "$VMT_CONTENDER" = pressured+kubelet ] || [ "$VMT_CONTENDER" = daemonset ]; then
    ACT_MI=$((HARD_MI + ${PRESSURED_MARGIN_MI:-50}))
    [ "$SOFT_MI" -gt 0 ] && ACT_SOFT_MI=$((SOFT_MI + ${PRESSURED_MARGIN_MI:-50}))
  fi
  if [ -n "$VMT_NODE" ]; then
    vmt_mark STEP "node: (re)starting the kubelet"
    vmt_kubelet_start || NODE_BROKEN=1
  fi
  # The DaemonSet's pod starts with the kubelet, before the scenario's pods: its
  # memory is part of the node's when the scenario sizes its pressure.
  [ "$VMT_CONTENDER" = daemonset ] && [ -z "$NODE_BROKEN" ] && vmt_ds_apply
}

CONTENDER_PIDS=
CONTENDER_TICKS=0

vmt_contender_start() {
  : > /tmp/contender.log.start
  local in="$CG/system.slice/contender"
  # The acting thresholds (vmt_thresholds): beside the kubelet, which keeps the
  # scenario's own, pressured's are PRESSURED_MARGIN_MI above (docs/kubernetes.md).
  local hard="memory.available<${ACT_MI}Mi"
  [ "$PID_HARD" -gt 0 ] && hard="$hard,pid.available<$PID_HARD"
  case "$VMT_CONTENDER" in
    kubelet)
      # Already running with the scenario's thresholds (vmt_thresholds).
      CONTENDER_PID=$KUBELET_PID
      CONTENDER_PIDS="$CONTENDER_PIDS $CONTENDER_PID"
      kill -0 $CONTENDER_PID 2>/dev/null || return 1
      CONTENDER_START_TICKS=$((CONTENDER_START_TICKS + $(vmt_ticks $CONTENDER_PID)))
      return 0
      ;;
    daemonset)
      # Running since vmt_thresholds (vmt_ds_apply): its pid, through hostPID.
      CONTENDER_PID=$DS_PID
      [ -n "$CONTENDER_PID" ] && kill -0 $CONTENDER_PID 2>/dev/null || return 1
      CONTENDER_PIDS="$CONTENDER_PIDS $CONTENDER_PID"
      CONTENDER_START_TICKS=$((CONTENDER_START_TICKS + $(vmt_ticks $CONTENDER_PID)))
      return 0
      ;;
    pressured*)
      local podsrc="--pod-file $PODS_JSON"
      [ "$VMT_CONTENDER" = pressured+kubelet ] && podsrc=
      set -- pressured run --cgroup-driver "$DRIVER" --kubepods-name "$KUBEPODS" $podsrc \
        --state-file /var/lib/pressured/state.json --metrics-listen 127.0.0.1:9847 --log-level debug
      if [ "$VMT_CONTENDER" = pressured+kubelet ]; then
        # Beside the kubelet, its documented deployment: the eviction settings
        # from the kubelet's own file (vmt_kubelet_start wrote it), memory
        # thresholds PRESSURED_MARGIN_MI above (the ACT_* of vmt_thresholds);
        # pods from the API, evictions through the API.
        set -- "$@" --kubelet-config /etc/kubernetes/kubelet.yaml \
          --kubelet-threshold-offset "memory.available=${PRESSURED_MARGIN_MI:-50}Mi" \
          --pod-source apiserver --kubeconfig $KCFG --node-name $NODE_NAME
      else
        set -- "$@" --eviction-hard "$hard" --eviction-pressure-transition-period "$TRANSITION" \
          --eviction-max-pod-grace-period "$MAX_POD_GRACE"
        if [ "$SOFT_MI" -gt 0 ]; then
          set -- "$@" --eviction-soft "memory.available<${ACT_SOFT_MI}Mi" --eviction-soft-grace-period "memory.available=$SOFT_GRACE"
        fi
        [ "$MIN_RECLAIM_MI" -gt 0 ] && set -- "$@" --eviction-minimum-reclaim "memory.available=${MIN_RECLAIM_MI}Mi"
      fi
      # The reclaim stage before a memory eviction, on or off. Off is written
      # out (not left to the default) when this pressured knows the section
      # (VMT_RELIEF_KEY, probed on the host with check-config); a build
      # without it has no stage, which is the same decision.
      case "$VMT_CONTENDER" in
        pressured-relief) vmt_relief_config true > /tmp/relief.yaml && set -- "$@" --config /tmp/relief.yaml ;;
        pressured-relief-off)
          [ -n "$VMT_RELIEF_KEY" ] && vmt_relief_config false > /tmp/relief.yaml && set -- "$@" --config /tmp/relief.yaml
          ;;
      esac
      case "$VMT_CONTENDER" in
        pressured-poll10s) set -- "$@" --poll-interval 10s --bpf off ;;
        pressured-poll1s) set -- "$@" --poll-interval 1s --bpf off ;;
      esac
      ;;
    earlyoom)
      # SIGTERM below the hard threshold, SIGKILL below half of it (earlyoom's
      # own TERM/KILL split); no swap in the VM, so -s 100 makes the swap
      # condition always true; -r 0: no periodic report.
      set -- earlyoom -M $((HARD_MI * 1024)),$((HARD_MI * 512)) -s 100 -r 0
      ;;
    oomd)
      vmt_oomd_config > /tmp/oomd.json
      set -- oomd --config /tmp/oomd.json --interval 1 --runtime-dir /run/oomd --kmsg-override /tmp/oomd-kills.log
      ;;
    *)
      vmt_mark ERROR "unknown contender $VMT_CONTENDER"
      return 1
      ;;
  esac
  echo "# $*" >> /tmp/contender.log
  case "$VMT_CONTENDER" in
    pressured-image*) vmt_ctr_run "$@" ;;
    *)
      sh -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' vmt-contender "$in" "$@" >> /tmp/contender.log 2>&1 &
      CONTENDER_PID=$!
      ;;
  esac
  CONTENDER_PIDS="$CONTENDER_PIDS $CONTENDER_PID"
  # Readiness: give it time to load (BPF under TCG is slow), bounded.
  # pressured says "pressured running" once its events are attached: under TCG
  # on a loaded host that took 4-18 s (2026-11-22), so wait for it up to 60 s
  # rather than start the pressure before the daemon is there.
  local i=0 max=30
  case "$VMT_CONTENDER" in pressured*) max=600 ;; esac
  while [ $i -lt $max ]; do
    kill -0 $CONTENDER_PID 2>/dev/null || break
    case "$VMT_CONTENDER" in
      pressured*) grep -q "pressured running" /tmp/contender.log && break ;;
      *) grep -qiE "ready|started|running|monitoring|sending SIGTERM when|Running oomd" /tmp/contender.log && break ;;
    esac
    sleep 0.1
    i=$((i + 1))
  done
  sleep 0.5
  if ! kill -0 $CONTENDER_PID 2>/dev/null; then
    vmt_mark WARN "contender $VMT_CONTENDER exited at start"
    return 1
  fi
  case "$VMT_CONTENDER" in pressured-image*) vmt_ctr_started ;; esac
  # CPU spent starting up (for pressured: probing and loading BPF), reported apart.
  CONTENDER_START_TICKS=$((CONTENDER_START_TICKS + $(vmt_ticks ${CTR_PID:-$CONTENDER_PID})))
  return 0
}

# --- pressured from its OCI image (contenders pressured-image*) ----------------------
#
# The image's rootfs (umoci unpack of scripts/image's arm64 archive) is the bundle
# /vmt/ctr; runc is Debian's, of the guest's architecture. The host wrote the bundle's
# config.json per contender (vmtests/harness/container.py): the DaemonSet's shape
# (hostPID, hostNetwork, its capabilities, no new privileges, a read-only root, its
# volumes, its memory limit) and the shipped seccomp profile as OCI linux.seccomp,
# as shipped (pressured-image) or with SCMP_ACT_LOG as the default action
# (pressured-image-log: nothing is refused, and every call outside the allow list is
# written to the kernel log as an audit type=1326 record). Only the process's
# arguments are left to the scenario: "@@VMT-ARGS@@" in config.json.in.
CTR_ROOT=/run/runc
CTR_ID=pressured

vmt_ctr_run() {  # ARGS...: pressured's command line, run in the container (runc in the foreground)
  local args="" a
  for a in "$@"; do args="$args,\"$a\""; done
  sed "s|\"@@VMT-ARGS@@\"|${args#,}|" /vmt/ctr/$VMT_CONTENDER.json.in > /vmt/ctr/config.json
  CTR_PID=
  # pressured-image-paranoid2: the remedy docs/operations.md gives for kprobes refused in the
  # container (Debian's kernels default kernel.perf_event_paranoid to 3, where perf_event_open
  # needs CAP_SYS_ADMIN): the node sysctl at 2 before the daemon starts, put back after it.
  CTR_PARANOID_SAVED=
  if [ "$VMT_CONTENDER" = pressured-image-paranoid2 ]; then
    CTR_PARANOID_SAVED=$(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null)
    echo 2 > /proc/sys/kernel/perf_event_paranoid
  fi
  CTR_PARANOID=$(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null)
  CTR_AUDIT0=$(dmesg | grep -c 'type=1326')
  # runc run stays the container's parent and forwards signals to it (SIGTERM at the stop);
  # --no-pivot: the initramfs root cannot pivot_root (containerd's NoPivotRoot, node.sh).
  runc --root $CTR_ROOT run --no-pivot --bundle /vmt/ctr $CTR_ID >> /tmp/contender.log 2>&1 &
  CONTENDER_PID=$!
}

vmt_ctr_started() {  # facts of the running container, once pressured said it runs
  CTR_PID=$(runc --root $CTR_ROOT state $CTR_ID 2>/dev/null | sed -n 's/^ *"pid": *\([0-9]*\),*$/\1/p')
  CTR_SECCOMP=$(awk '$1 == "Seccomp:" {print $2}' /proc/$CTR_PID/status 2>/dev/null)
  CTR_EXE=$(readlink /proc/$CTR_PID/exe 2>/dev/null)
  CTR_CGROUP=$(cut -d: -f3 /proc/$CTR_PID/cgroup 2>/dev/null)
  CTR_CAPEFF=$(awk '$1 == "CapEff:" {print $2}' /proc/$CTR_PID/status 2>/dev/null)
  CTR_NNP=$(awk '$1 == "NoNewPrivs:" {print $2}' /proc/$CTR_PID/status 2>/dev/null)
  # The image's ELF machine, read from the binary the container runs (bytes 18-19).
  CTR_MACHINE=$(od -An -tu2 -j18 -N2 /proc/$CTR_PID/exe 2>/dev/null | tr -d ' ')
  # Its root as it sees it (the last mount on / in its mount namespace): read-only.
  CTR_ROOT_RO=false
  awk '$5 == "/" {o = $6} END {exit !(o ~ /^ro(,|$)/)}' /proc/$CTR_PID/mountinfo 2>/dev/null && CTR_ROOT_RO=true
  # Not `wget -T`: Debian's static busybox 1.35 wget crashes (SIGSEGV) on -T; timeout bounds it.
  rm -f /tmp/ctr-metrics.txt
  timeout 10 wget -q -O /tmp/ctr-metrics.txt http://127.0.0.1:9847/metrics > /tmp/ctr-wget.txt 2>&1
  CTR_WGET_RC=$?
  CTR_WGET_ERR=$(head -c 200 /tmp/ctr-wget.txt | tr -d '"\\' | tr '\n' ' ')
  CTR_METRICS=$(grep -c '^pressured_bpf_program_info{' /tmp/ctr-metrics.txt 2>/dev/null)
  # Off programs whose metric reason names the sysctl and its remedy (the label keeps 128 characters).
  CTR_METRICS_PARANOID=$(grep '^pressured_bpf_program_info{' /tmp/ctr-metrics.txt 2>/dev/null | grep 'mode="off"' |
    grep -c 'kernel.perf_event_paranoid=2')
  vmt_mark STEP "container $CTR_ID: pid $CTR_PID exe $CTR_EXE machine $CTR_MACHINE seccomp ${CTR_SECCOMP:-?} cgroup $CTR_CGROUP"
}

vmt_ctr_stopped() {  # after runc run returned: the container is deleted, the kernel log read
  runc --root $CTR_ROOT delete --force $CTR_ID 2>/dev/null
  CTR_LEFT=$(runc --root $CTR_ROOT list -q 2>/dev/null | wc -l)
  CTR_AUDIT=$(($(dmesg | grep -c 'type=1326') - ${CTR_AUDIT0:-0}))
  dmesg | grep 'type=1326' | tail -n 20 | sed "s/^/@@VMT LOG $SCEN seccomp: /"
  [ -n "$CTR_PARANOID_SAVED" ] && echo "$CTR_PARANOID_SAVED" > /proc/sys/kernel/perf_event_paranoid
  CTR_PARANOID_SAVED=
}

# vmt_ctr_probe: the kernel log check above can fail in this guest: a static busybox in a
# container under the same allow list with SCMP_ACT_LOG as its default calls sync(), which
# the list lacks; its audit record (type=1326) must appear. Bundle /vmt/probe (the host's).
vmt_ctr_probe() {
  local n0 n1
  n0=$(dmesg | grep -c 'type=1326')
  runc --root $CTR_ROOT run --no-pivot --bundle /vmt/probe seccomp-probe > /tmp/probe.log 2>&1
  local rc=$?
  runc --root $CTR_ROOT delete --force seccomp-probe 2>/dev/null
  n1=$(dmesg | grep -c 'type=1326')
  dmesg | grep 'type=1326' | tail -n $((n1 - n0)) | sed 's/^/@@VMT LOG seccomp-probe: /'
  vmt_mark SECCOMP-PROBE "records=$((n1 - n0)) rc=$rc $(head -c 300 /tmp/probe.log | tr '\n' ' ')"
}

vmt_ctr_json() {
  local attached eperm stopped
  attached=$(grep -c 'bpf: .* attached as' /tmp/contender.log)
  eperm=$(grep -cE 'Operation not permitted|EPERM' /tmp/contender.log)
  stopped=false
  grep -q 'pressured stopped' /tmp/contender.log && stopped=true
  # kprobes: attached, refused for permission (EACCES/EPERM), and of those the ones whose
  # reason in the log names kernel.perf_event_paranoid and its remedy.
  local kp_on kp_refused kp_explained
  kp_on=$(grep -cE 'bpf: [a-z_]+ attached as kprobe ' /tmp/contender.log)
  grep -E 'bpf: [a-z_]+ off: ' /tmp/contender.log |
    grep -E 'perf_event_open kprobe: (Permission denied|Operation not permitted)' > /tmp/ctr-kprobe-refused.txt
  kp_refused=$(grep -c . /tmp/ctr-kprobe-refused.txt)
  kp_explained=$(grep -c 'kernel.perf_event_paranoid=2' /tmp/ctr-kprobe-refused.txt)
  printf '{"pid":"%s","exe":"%s","elf_machine":"%s","seccomp":%s,"no_new_privs":"%s","cap_eff":"%s","cgroup":"%s","root_read_only":%s,"metrics_program_lines":%s,"metrics_wget_rc":%s,"metrics_wget_error":"%s","bpf_attached":%s,"eperm_lines":%s,"stopped_cleanly":%s,"rc":%s,"audit_seccomp":%s,"containers_left":%s,"perf_event_paranoid":%s,"kprobe_attached":%s,"kprobe_refused":%s,"kprobe_refused_explained":%s,"metrics_paranoid_reasons":%s}' \
    "$CTR_PID" "$CTR_EXE" "$CTR_MACHINE" "${CTR_SECCOMP:-null}" "$CTR_NNP" "$CTR_CAPEFF" "$CTR_CGROUP" "$CTR_ROOT_RO" \
    "${CTR_METRICS:-0}" "${CTR_WGET_RC:-null}" "$CTR_WGET_ERR" "$attached" "$eperm" "$stopped" "${CONTENDER_RC:-null}" \
    "${CTR_AUDIT:-null}" "${CTR_LEFT:-null}" "${CTR_PARANOID:-null}" "$kp_on" "$kp_refused" "$kp_explained" \
    "${CTR_METRICS_PARANOID:-0}"
}

# vmt_relief_config true|false: pressured's configuration file with the reclaim
# stage on or off, the stage's other settings left at their defaults (what an
# operator who turns it on gets).
vmt_relief_config() {
  printf 'relief:\n  enabled: %s\n...\n' "$1"
}

vmt_oomd_config() {
  # oomd's documented pattern: detect pressure on the protected workload's
  # parent, act with kill_by_memory_size_or_growth on its children. Two rulesets:
  # PSI memory pressure on kubepods, and kubepods anon usage above what leaves
  # the hard threshold free (oomd has no "available below" detector).
  local anon=$(($(avail_mib) - HARD_MI))
  local pods="$KUBEPODS/*/*,$KUBEPODS/*"
  [ "$DRIVER" = systemd ] && pods="$KUBEPODS/*/*.slice,$KUBEPODS/*.slice"
  cat <<EOF
{"rulesets": [
 {"name": "kubepods memory pressure",
  "detectors": [["kubepods pressure above 40 for 2s",
     {"name": "pressure_above", "args": {"cgroup": "$KUBEPODS", "resource": "memory", "threshold": "40", "duration": "2"}}]],
  "actions": [{"name": "kill_by_memory_size_or_growth", "args": {"cgroup": "$pods", "recursive": "true", "post_action_delay": "2"}}]},
 {"name": "kubepods anon above node budget",
  "detectors": [["kubepods anon above ${anon}M",
     {"name": "memory_above", "args": {"cgroup": "$KUBEPODS", "threshold_anon": "${anon}M", "duration": "0"}}]],
  "actions": [{"name": "kill_by_memory_size_or_growth", "args": {"cgroup": "$pods", "recursive": "true", "post_action_delay": "2"}}]}
]}
EOF
}

vmt_ticks() {  # utime+stime of a live pid, in clock ticks
  awk '{print $14 + $15}' /proc/$1/stat 2>/dev/null || echo 0
}

# vmt_contender_ticks PID: the contender's ticks for its CPU time: those vmt_end took
# before letting it run on (CONTENDER_TICKS_AT), else PID's now.
vmt_contender_ticks() {
  if [ -n "$CONTENDER_TICKS_AT" ]; then echo "$CONTENDER_TICKS_AT"; else vmt_ticks $1; fi
}

vmt_contender_stop() {
  local alive=false
  if [ "$VMT_CONTENDER" = kubelet ]; then
    # The kubelet stays up until the pods' fate is read from the API (vmt_end).
    kill -0 $CONTENDER_PID 2>/dev/null && alive=true
    CONTENDER_TICKS=$((CONTENDER_TICKS + $(vmt_contender_ticks $CONTENDER_PID)))
    CONTENDER_RC=0
    CONTENDER_ALIVE=$alive
    return
  fi
  if [ "$VMT_CONTENDER" = daemonset ]; then
    # Stopped the way an operator removes it: kubectl delete -k (vmt_ds_delete).
    [ -n "$CONTENDER_PID" ] && kill -0 $CONTENDER_PID 2>/dev/null && alive=true
    [ -n "$CONTENDER_PID" ] && CONTENDER_TICKS=$((CONTENDER_TICKS + $(vmt_contender_ticks $CONTENDER_PID)))
    vmt_ds_delete
    CONTENDER_RC=0
    CONTENDER_ALIVE=$alive
    return
  fi
  if kill -0 $CONTENDER_PID 2>/dev/null; then
    alive=true
    CONTENDER_TICKS=$((CONTENDER_TICKS + $(vmt_contender_ticks ${CTR_PID:-$CONTENDER_PID})))
    kill -TERM $CONTENDER_PID 2>/dev/null
    local i=0
    while kill -0 $CONTENDER_PID 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
    kill -KILL $CONTENDER_PID 2>/dev/null
  fi
  wait $CONTENDER_PID 2>/dev/null
  CONTENDER_RC=$?
  CONTENDER_ALIVE=$alive
  case "$VMT_CONTENDER" in pressured-image*) vmt_ctr_stopped ;; esac
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

# --- scenarios ---------------------------------------------------------------------

# 1. A BestEffort pod grows at >= 500 MiB/s until the node would run out.
scenario_fast_spike() {
  vmt_tree cgroupfs
  vmt_thresholds 150
  vmt_pod guaranteed-steady Guaranteed 128 128
  vmt_pod burstable-steady Burstable 96 256
  vmt_pod besteffort-spike BestEffort 0 0
  vmt_pods_json
  vmt_pod_run guaranteed-steady memhog --mib 96 --hold 300
  vmt_pod_run burstable-steady memhog --mib 96 --hold 300
  vmt_wait_mem guaranteed-steady 96 20
  vmt_wait_mem burstable-steady 96 20
  local a=$(avail_mib)
  local size=$((a + 100))
  vmt_begin fast-spike memory $((ACT_MI * 1048576))
  vmt_pod_run besteffort-spike memhog --mib $size --rate 500 --hold 300
  vmt_wait_gone besteffort-spike 40
  sleep 3  # anything evicted after the victim is over-eviction
  vmt_end "{\"spike_mib\":$size,\"avail_before_mib\":$a}"
}

# 2. A slow leak in a Burstable pod over its request, among pods within request.
scenario_slow_leak() {
  vmt_tree cgroupfs
  vmt_thresholds 100 300 5s 0 10s 0 2
  vmt_pod burstable-ok-1 Burstable 160 0
  vmt_pod burstable-ok-2 Burstable 160 0
  vmt_pod burstable-leak Burstable 64 0 0 30
  vmt_pods_json
  vmt_pod_run burstable-ok-1 memhog --mib 128 --hold 300
  vmt_pod_run burstable-ok-2 memhog --mib 128 --hold 300
  vmt_wait_mem burstable-ok-1 128 20
  vmt_wait_mem burstable-ok-2 128 20
  local a=$(avail_mib)
  local size=$((a - HARD_MI + 60))
  vmt_begin slow-leak memory $((ACT_SOFT_MI * 1048576))
  vmt_pod_run burstable-leak memhog --start-mib 32 --mib $size --rate 25 --hold 300
  vmt_wait_gone burstable-leak 50
  sleep 3
  vmt_end "{\"leak_mib\":$size,\"leak_rate_mib_s\":25,\"soft_grace_s\":5,\"avail_before_mib\":$a}"
}

# 3. Ranking: pods of each class with known usage and request, neutral pressure.
scenario_ranking() {
  vmt_tree systemd
  vmt_thresholds 150
  vmt_pod besteffort-small BestEffort 0 0
  vmt_pod besteffort-large BestEffort 0 0
  vmt_pod burstable-over-96 Burstable 32 0
  vmt_pod burstable-over-32 Burstable 32 0
  vmt_pod burstable-within Burstable 192 0
  vmt_pod guaranteed Guaranteed 128 128
  vmt_pods_json
  vmt_pod_run besteffort-small memhog --mib 48 --hold 300
  vmt_pod_run besteffort-large memhog --mib 96 --hold 300
  vmt_pod_run burstable-over-96 memhog --mib 128 --hold 300
  vmt_pod_run burstable-over-32 memhog --mib 64 --hold 300
  vmt_pod_run burstable-within memhog --mib 96 --hold 300
  vmt_pod_run guaranteed memhog --mib 64 --hold 300
  for p in besteffort-small:48 besteffort-large:96 burstable-over-96:128 burstable-over-32:64 \
    burstable-within:96 guaranteed:64; do
    vmt_wait_mem ${p%%:*} ${p##*:} 20
  done
  local a=$(avail_mib)
  # After evicting the first three in the expected order the node is still
  # 10 MiB under the acting threshold; after the fourth it is 54 MiB over it.
  # The node's own daemons (a kubelet, containerd, the pods' teardown) take
  # tens of MiB while the evictions run, which only deepens the first margin
  # and must not eat the second.
  local size=$((a + 272 - (ACT_MI - 10)))
  vmt_begin ranking memory $((ACT_MI * 1048576))
  vmt_neutral memhog --mib $size --rate 40 --hold 300
  local i=0
  while [ $i -lt 90 ]; do
    vmt_wait_gone burstable-over-32 1 && break
    grep -q "memhog: $size MiB" $(vmt_wl_logs) 2>/dev/null && [ $i -gt 5 ] && sleep 4 && break
    i=$((i + 1))
  done
  sleep 4
  vmt_end "{\"neutral_mib\":$size,\"avail_before_mib\":$a}"
}

# 4. Minimum reclaim: first without it (one eviction frees enough: no second),
#    then with evictionMinimumReclaim 200Mi (evictions continue until met).
scenario_min_reclaim_part() {
  local scen=$1 mr=$2
  vmt_tree cgroupfs
  vmt_thresholds 150 0 0s $mr
  vmt_pod besteffort-large BestEffort 0 0
  vmt_pod besteffort-small BestEffort 0 0
  vmt_pod guaranteed Guaranteed 128 128
  vmt_pods_json
  vmt_pod_run besteffort-large memhog --mib 192 --hold 300
  vmt_pod_run besteffort-small memhog --mib 128 --hold 300
  vmt_pod_run guaranteed memhog --mib 64 --hold 300
  vmt_wait_mem besteffort-large 192 20
  vmt_wait_mem besteffort-small 128 20
  vmt_wait_mem guaranteed 64 20
  local a=$(avail_mib)
  local size=$((a - HARD_MI + 40))  # 40 MiB under the threshold
  vmt_begin $scen memory $((ACT_MI * 1048576))
  vmt_neutral memhog --mib $size --rate 50 --hold 300
  vmt_wait_gone besteffort-large 40
  if [ $mr -gt 0 ]; then vmt_wait_gone besteffort-small 15; fi
  sleep 6
  vmt_end "{\"neutral_mib\":$size,\"min_reclaim_mib\":$mr,\"avail_before_mib\":$a}"
}
scenario_min_reclaim() {
  scenario_min_reclaim_part min-reclaim 0
  scenario_min_reclaim_part min-reclaim-200Mi 200
}

# 5. Oscillation around the soft threshold, each dip shorter than the grace period.
#    A Burstable pod within its request holds most of the memory, so that each
#    burst is small and quick even under TCG: dips are ~4 s, gaps ~4 s.
scenario_oscillation() {
  vmt_tree cgroupfs
  # On the kubelet's node the node's own daemons leave ~350-400 MiB available
  # once the pods run: a 300 MiB soft threshold (350 for pressured beside it)
  # would leave the steady level no room above it.
  if [ -n "$VMT_NODE" ]; then
    vmt_thresholds 100 200 8s 0 20s
  else
    vmt_thresholds 100 300 8s 0 20s
  fi
  # Its request keeps it within request whatever it holds; on the real node it
  # must also fit allocatable, or the kubelet rejects the pod (OutOfmemory).
  local steady_req=1024
  [ -n "$VMT_NODE" ] && steady_req=512
  vmt_pod guaranteed Guaranteed 96 96
  vmt_pod burstable-steady Burstable $steady_req 0
  vmt_pod besteffort-bursty BestEffort 0 0
  vmt_pods_json
  vmt_pod_run guaranteed memhog --mib 64 --hold 300
  vmt_wait_mem guaranteed 64 20
  # Leave 60 MiB over the soft threshold that acts (pressured's sits 50 MiB
  # above the kubelet's beside it): only the bursts may cross it.
  local base=$(($(avail_mib) - ACT_SOFT_MI - 60))
  if [ $base -lt 16 ]; then
    vmt_mark WARN "oscillation: only $(avail_mib) MiB available, under the soft threshold that acts (${ACT_SOFT_MI} MiB) + 60: the steady pod holds 16 MiB"
    base=16
  fi
  vmt_pod_run burstable-steady memhog --mib $base --hold 300
  vmt_wait_mem burstable-steady $base 60
  local a=$(avail_mib)
  # Each burst leaves the node midway between the acting soft and hard
  # thresholds (200 MiB for 100/300): under soft, over hard.
  local burst=$((a - (ACT_SOFT_MI + ACT_MI) / 2))
  vmt_begin oscillation memory $((ACT_SOFT_MI * 1048576))
  vmt_pod_run besteffort-bursty spiker --mib $burst --hold-ms 3000 --gap-ms 4000 --bursts 4
  # Until the spiker's four bursts are over: on the node its process is the
  # container's, not a child of this shell, so wait out its schedule (4 x (3 + 4) s).
  local i=0
  if [ -n "$VMT_NODE" ]; then
    sleep 30
  else
    while [ $i -lt 60 ] && kill -0 $(awk '$1 == "besteffort-bursty" {print $2}' /tmp/pod_pids) 2>/dev/null; do
      sleep 1
      i=$((i + 1))
    done
  fi
  sleep 2
  local flips
  flips=$(grep -c "node condition MemoryPressure is now" /tmp/contender.log)  # pressured's log line
  vmt_end "{\"burst_mib\":$burst,\"bursts\":4,\"soft_grace_s\":8,\"transition_s\":20,\"condition_log_lines\":${flips:-0}}"
}

# 6. Reclaimable page cache: a pod reads a 1.2 GiB file once (no eviction expected).
scenario_page_cache() {
  vmt_tree cgroupfs
  vmt_thresholds 150
  vmt_pod guaranteed Guaranteed 128 128
  vmt_pod burstable-reader Burstable 64 0
  vmt_pods_json
  vmt_pod_run guaranteed memhog --mib 96 --hold 300
  vmt_wait_mem guaranteed 96 20
  local a=$(avail_mib)
  if [ ! -f /scratch/big.dat ]; then
    vmt_mark ERROR "page-cache: /scratch/big.dat missing (no scratch disk)"
  fi
  vmt_begin page-cache memory $((ACT_MI * 1048576))
  vmt_pod_run burstable-reader cachereader --file /scratch/big.dat --passes 1 --duration 90 --hold 300
  local i=0
  while [ $i -lt 100 ] && ! grep -q "cachereader: read" $(vmt_wl_logs) 2>/dev/null; do
    vmt_wait_gone burstable-reader 1 && break
    i=$((i + 1))
  done
  sleep 2
  local peak=$(($(cat $(vmt_pod_field burstable-reader 4)/memory.peak 2>/dev/null || echo 0) / 1048576))
  local file_mib=$(($(vmt_cg_stat $(vmt_pod_field burstable-reader 4) file) / 1048576))
  vmt_end "{\"file_mib\":1200,\"reader_file_cache_mib_at_end\":$file_mib,\"avail_before_mib\":$a}"
}

# 7. PID pressure: a pod forks until pid.available is below the threshold.
scenario_pid_pressure() {
  vmt_tree cgroupfs
  echo 1500 > /proc/sys/kernel/pid_max
  vmt_thresholds 100 0 0s 0 10s 300
  vmt_pod burstable-steady Burstable 64 0
  vmt_pod besteffort-forker BestEffort 0 0
  vmt_pods_json
  vmt_pod_run burstable-steady forker --count 20 --hold 300
  sleep 1
  vmt_begin pid-pressure pid 300
  vmt_pod_run besteffort-forker forker --count 1450 --rate 150 --hold 300
  vmt_wait_gone besteffort-forker 25
  sleep 3
  local failed=0
  grep -q "forker: fork" $(vmt_wl_logs) && failed=1
  vmt_end "{\"pid_max\":1500,\"fork_failed\":$failed}"
}

# 8. Daemon restart under pressure: soft eviction in progress, victim ignores
#    SIGTERM, the contender is restarted; expect exactly one victim.
scenario_restart() {
  vmt_tree cgroupfs
  vmt_thresholds 100 300 3s 0 10s 0 6
  vmt_pod burstable-other Burstable 32 0
  vmt_pod burstable-leak Burstable 32 0 0 30
  vmt_pods_json
  vmt_pod_run burstable-other memhog --mib 128 --hold 300
  vmt_wait_mem burstable-other 128 20
  local a=$(avail_mib)
  local size=$((a - 220))  # ends ~220 MiB available: under soft, over hard
  vmt_begin restart memory $((ACT_SOFT_MI * 1048576))
  vmt_pod_run burstable-leak memhog --ignore-term 1 --start-mib 32 --mib $size --rate 40 --hold 300
  vmt_wait_avail_below $SOFT_MI 60
  local crossed=$(vmt_ms)
  sleep 4.5
  vmt_restart_contender
  local restarted=$(($(vmt_ms) - crossed))
  vmt_wait_gone burstable-leak 25
  sleep 3
  # pressured logs what it restored from its checkpoint when it starts again.
  local restored
  restored=$(grep -cE "checkpoint .* restored|checkpoint: resuming eviction" /tmp/contender.log)
  vmt_end "{\"leak_mib\":$size,\"restart_after_crossing_ms\":$restarted,\"soft_grace_s\":3,\"max_pod_grace_s\":6,\"checkpoint_restored_lines\":${restored:-0}}"
}

# 9. kubernetes#123872: a BestEffort pod ignoring SIGTERM (grace 120 s, no
#    evictionMaxPodGracePeriod cap) is soft-evicted; then a Burstable pod
#    spikes at 400 MiB/s past what is left. A hard threshold must not wait
#    behind the soft grace: the soft victim is killed, the spike survives.
scenario_soft_then_spike() {
  vmt_tree cgroupfs
  vmt_thresholds 150 400 1s 0 10s 0 0
  vmt_pod burstable-spike Burstable 64 0
  vmt_pod besteffort-stubborn BestEffort 0 0 0 120
  vmt_pods_json
  local a=$(avail_mib)
  # Leaves about halfway between the acting hard and soft thresholds (~300 MiB
  # alone: under soft 400, over hard 150; beside the kubelet, pressured's 200/450).
  local left=$(((ACT_MI + ACT_SOFT_MI) / 2 + 25))
  local hold=$((a - left))
  [ $hold -lt 64 ] && vmt_mark WARN "soft-then-spike: only $a MiB available, the stubborn pod holds $hold MiB"
  vmt_pod_run besteffort-stubborn memhog --ignore-term 1 --mib $hold --hold 300
  vmt_wait_mem besteffort-stubborn $hold 60
  vmt_begin soft-then-spike memory $((ACT_MI * 1048576))
  sleep 4  # soft grace (1 s) over: SIGTERM sent, ignored
  local left=$(avail_mib)
  local size=$((left + 120))  # past what is left: without an eviction, a kernel OOM kill
  vmt_pod_run burstable-spike memhog --mib $size --rate 400 --hold 300
  vmt_wait_gone besteffort-stubborn 40
  sleep 3  # the spike completes; anything evicted after the victim is over-eviction
  vmt_end "{\"stubborn_mib\":$hold,\"spike_mib\":$size,\"avail_before_spike_mib\":$left,\"termination_grace_s\":120}"
}

# vmt_wait_active_file NAME MIB TIMEOUT_S BELOW_MIB: waits until the pod's
# active file pages reach MIB (a reader's range read twice), the node's
# memory.available is under BELOW_MIB (a reclaim stage may take the cache back
# as soon as it grows), or the pod has no process left (evicted on the way);
# bounded by the guest clock (a loaded TCG guest takes far longer than the
# sleeps for each round).
vmt_wait_active_file() {
  local podcg=$(vmt_pod_field $1 4) want=$(($2 * 1048576)) end=$(($(vmt_ms) + $3 * 1000))
  while [ $(vmt_ms) -lt $end ]; do
    [ "$(vmt_cg_stat $podcg active_file)" -ge $want ] && return 0
    [ $(avail_mib) -lt $4 ] && return 0
    vmt_cg_populated $podcg || { vmt_mark STEP "active-page-cache: pod $1 has no process left"; return 1; }
    sleep 0.2
  done
  vmt_mark WARN "pod $1: active file pages did not reach $2 MiB in $3 s"
  return 1
}

# vmt_reclaim_metrics: the daemon's pressured_reclaim_* samples, each name's
# values summed over its labels, as a JSON object ({} when it has none).
vmt_reclaim_metrics() {
  timeout 5 wget -q -O - http://127.0.0.1:9847/metrics 2>/dev/null | awk '
    /^pressured_reclaim_/ { n = $1; sub(/\{.*/, "", n); v[n] += $NF }
    END { s = ""; for (n in v) s = s (s ? "," : "") sprintf("\"%s\":%g", n, v[n]); printf "{%s}", s }'
}

# vmt_grow_past_cache SCENARIO POD: phase 2 of scenarios 10 and 11. POD, if
# phase 1 left it running, asks for what is free plus all the page cache plus
# 100 MiB of anonymous memory: no reclaim can cover it, so it must be evicted
# before the kernel OOM-kills. Sets GROWTH_MIB (0 when phase 1 evicted POD)
# and PHASE2_RAN; anything evicted within 3 s after POD is over-eviction.
vmt_grow_past_cache() {
  GROWTH_MIB=0 PHASE2_RAN=false
  if vmt_cg_populated $(vmt_pod_field $2 4); then
    GROWTH_MIB=$(awk '/^(MemFree|Cached):/ { s += $2 } END { printf "%d", s / 1024 + 100 }' /proc/meminfo)
    PHASE2_RAN=true
    vmt_mark STEP "$1: phase 2, avail=$(avail_mib)MiB; $2 asks for $GROWTH_MIB MiB more"
    vmt_pod_run $2 memhog --mib $GROWTH_MIB --rate 50 --hold 300
    vmt_wait_gone $2 60
  else
    vmt_mark STEP "$1: $2 was evicted in phase 1: no phase 2 growth"
  fi
  sleep 3
}

# vmt_undone_records: pressured's pressured_kubernetes_eviction_records_undone_total,
# summed over its causes ("null" when /metrics could not be read).
vmt_undone_records() {
  timeout 5 wget -q -O - http://127.0.0.1:9847/metrics 2>/dev/null | awk '
    /^pressured_kubernetes_eviction_records_undone_total[{ ]/ { s += $NF; n++ }
    END { if (n) printf "%d", s; else printf "null" }'
}

# 10. Active page cache (kubernetes#43916, the kubelet's false pressure): two
#     pods keep re-reading their parts of a file, each part larger than the
#     room left above the threshold it crosses, so the kubelet's
#     memory.available (which counts active file pages as used) falls under
#     the soft and then the hard threshold while the kernel could give all of
#     that cache back. Phase 2: one pod's anonymous memory grows past what the
#     node has, cache included: an eviction is due, or the kernel OOM-kills.
#     With the reclaim stage on, nobody is evicted in phase 1 and the grower
#     is in phase 2; with it off, the kubelet's decision evicts in phase 1.
scenario_active_page_cache() {
  vmt_tree cgroupfs
  vmt_thresholds 200 350 10s 0 10s 0 2
  vmt_pod guaranteed-steady Guaranteed 128 128
  vmt_pod burstable-reader-1 Burstable 64 0
  vmt_pod burstable-reader-2 Burstable 64 0
  vmt_pod burstable-grower Burstable 96 0 0 30
  vmt_pods_json
  vmt_pod_run guaranteed-steady memhog --mib 96 --hold 300
  vmt_pod_run burstable-grower memhog --mib 32 --hold 300
  vmt_wait_mem guaranteed-steady 96 20
  vmt_wait_mem burstable-grower 32 20
  [ -f /scratch/big.dat ] || vmt_mark ERROR "active-page-cache: /scratch/big.dat missing (no scratch disk)"
  local a=$(avail_mib)
  # Reader 1's part, once active, leaves the node 60 MiB under the acting soft
  # threshold (over the hard one); reader 2's takes it 80 MiB under the hard
  # one. Both parts fit the 1200 MiB file and, all active, the guest's RAM with
  # free pages to spare: the kernel itself sees no shortage in phase 1.
  local r1=$((a - ACT_SOFT_MI + 60)) r2=$((ACT_SOFT_MI - 60 - ACT_MI + 80))
  if [ $r1 -lt 64 ] || [ $((r1 + r2)) -gt 1200 ]; then
    vmt_mark WARN "active-page-cache: $a MiB available: reader parts $r1 + $r2 MiB out of range"
    [ $r1 -lt 64 ] && r1=64
  fi
  # Two phases of waits bounded by the guest clock: up to 60 + 60 + 30 s, then 60 s.
  SAMPLER_DURATION=400 vmt_begin active-page-cache memory $((ACT_SOFT_MI * 1048576)) $((ACT_MI * 1048576))
  # Re-reading at 64 MiB/s keeps each page hot (touched every few seconds) at a
  # CPU cost a TCG guest can carry beside the daemon; bounded by --duration.
  vmt_pod_run burstable-reader-1 cachereader --file /scratch/big.dat --offset-mib 0 --mib $r1 --passes 1000 \
    --rate 64 --duration 150 --hold 300
  vmt_wait_active_file burstable-reader-1 $((r1 * 3 / 4)) 60 $ACT_SOFT_MI
  vmt_mark STEP "active-page-cache: reader 1 hot, avail=$(avail_mib)MiB; reader 2 starts"
  vmt_pod_run burstable-reader-2 cachereader --file /scratch/big.dat --offset-mib $r1 --mib $r2 --passes 1000 \
    --rate 64 --duration 150 --hold 300
  vmt_wait_active_file burstable-reader-2 $((r2 * 3 / 4)) 60 $ACT_MI
  vmt_mark STEP "active-page-cache: reader 2 hot, avail=$(avail_mib)MiB; phase 1 holds 30 s"
  # Longer than the soft grace period (10 s) and several reclaim rounds.
  sleep 30
  local rd1_file=$(($(vmt_cg_stat $(vmt_pod_field burstable-reader-1 4) file) / 1048576))
  local rd2_file=$(($(vmt_cg_stat $(vmt_pod_field burstable-reader-2 4) file) / 1048576))
  local m1=$(vmt_reclaim_metrics)
  kill -USR1 $SAMPLER_PID
  vmt_grow_past_cache active-page-cache burstable-grower
  local m2=$(vmt_reclaim_metrics)
  vmt_end "{\"reader_1_mib\":$r1,\"reader_2_mib\":$r2,\"avail_before_mib\":$a,\"grower_mib\":$GROWTH_MIB,\"phase2_ran\":$PHASE2_RAN,\"reader_1_file_mib_end_phase1\":$rd1_file,\"reader_2_file_mib_end_phase1\":$rd2_file,\"reclaim_metrics_phase1\":$m1,\"reclaim_metrics_end\":$m2,\"relief_key\":\"${VMT_RELIEF_KEY:-0}\"}"
}

# 11. Page cache and anonymous growth in one pod: a Burstable pod keeps
#     re-reading its part of the file (active cache that takes the node 60 MiB
#     under the soft threshold, as in scenario 10), then its own anonymous
#     memory grows past what the node has. The reclaim stage must take the
#     pod's cache in phase 1 (nobody evicted), and in phase 2 still evict that
#     same pod once its cache cannot cover the shortfall, before the kernel's
#     OOM killer; with the stage off the kubelet's decision evicts it in phase 1.
scenario_cache_and_growth() {
  vmt_tree cgroupfs
  vmt_thresholds 200 350 10s 0 10s 0 2
  vmt_pod guaranteed-steady Guaranteed 128 128
  vmt_pod burstable-steady Burstable 128 0
  vmt_pod burstable-mixed Burstable 64 0 0 30
  vmt_pods_json
  vmt_pod_run guaranteed-steady memhog --mib 96 --hold 300
  vmt_pod_run burstable-steady memhog --mib 64 --hold 300
  vmt_pod_run burstable-mixed memhog --mib 32 --hold 300
  vmt_wait_mem guaranteed-steady 96 20
  vmt_wait_mem burstable-steady 64 20
  vmt_wait_mem burstable-mixed 32 20
  [ -f /scratch/big.dat ] || vmt_mark ERROR "cache-and-growth: /scratch/big.dat missing (no scratch disk)"
  local a=$(avail_mib)
  # The pod's part, once active, leaves the node 60 MiB under the acting soft
  # threshold and over the hard one (as reader 1 of scenario 10).
  local r=$((a - ACT_SOFT_MI + 60))
  if [ $r -lt 64 ] || [ $r -gt 1200 ]; then
    vmt_mark WARN "cache-and-growth: $a MiB available: the pod's part $r MiB out of range"
    [ $r -lt 64 ] && r=64
  fi
  SAMPLER_DURATION=300 vmt_begin cache-and-growth memory $((ACT_SOFT_MI * 1048576)) $((ACT_MI * 1048576))
  vmt_pod_run burstable-mixed cachereader --file /scratch/big.dat --offset-mib 0 --mib $r --passes 1000 \
    --rate 64 --duration 150 --hold 300
  vmt_wait_active_file burstable-mixed $((r * 3 / 4)) 60 $ACT_SOFT_MI
  vmt_mark STEP "cache-and-growth: the pod's cache hot, avail=$(avail_mib)MiB; phase 1 holds 30 s"
  sleep 30  # three soft grace periods
  local file_p1=$(($(vmt_cg_stat $(vmt_pod_field burstable-mixed 4) file) / 1048576))
  local m1=$(vmt_reclaim_metrics)
  kill -USR1 $SAMPLER_PID
  vmt_grow_past_cache cache-and-growth burstable-mixed
  local m2=$(vmt_reclaim_metrics)
  vmt_end "{\"cache_mib\":$r,\"avail_before_mib\":$a,\"growth_mib\":$GROWTH_MIB,\"phase2_ran\":$PHASE2_RAN,\"file_mib_end_phase1\":$file_p1,\"reclaim_metrics_phase1\":$m1,\"reclaim_metrics_end\":$m2,\"relief_key\":\"${VMT_RELIEF_KEY:-0}\"}"
}

vmt_run_scenarios() {
  ip link set lo up 2>/dev/null
  if [ -n "$VMT_NODE" ]; then
    . /vmt/node.sh
    if ! vmt_node_up; then
      vmt_mark ERROR "node did not come up: no scenario run for $VMT_CONTENDER"
      return 1
    fi
  fi
  vmt_reset
  for s in $VMT_SCENARIOS; do
    vmt_mark SCENARIO "$s contender=$VMT_CONTENDER avail=$(avail_mib)MiB"
    case $s in
      fast-spike) scenario_fast_spike ;;
      slow-leak) scenario_slow_leak ;;
      ranking) scenario_ranking ;;
      min-reclaim) scenario_min_reclaim ;;
      oscillation) scenario_oscillation ;;
      page-cache) scenario_page_cache ;;
      pid-pressure) scenario_pid_pressure ;;
      restart) scenario_restart ;;
      soft-then-spike) scenario_soft_then_spike ;;
      active-page-cache) scenario_active_page_cache ;;
      cache-and-growth) scenario_cache_and_growth ;;
      *) vmt_mark ERROR "unknown scenario $s" ;;
    esac
  done
}
