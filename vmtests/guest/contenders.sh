# The contenders, sourced by scenarios.sh inside the guest (busybox sh): the
# scenario's thresholds for each (vmt_thresholds), how each starts and stops
# (vmt_contender_start, vmt_contender_stop: pressured, pressured from its OCI
# image under runc, the kubelet, pressured beside the kubelet, the DaemonSet,
# oomd, earlyoom, ...), their CPU time, and what pressured's /metrics says
# about the run. Uses the library (scenario_lib.sh).

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

# vmt_reclaim_metrics: the daemon's pressured_reclaim_* samples, each name's
# values summed over its labels, as a JSON object ({} when it has none).
vmt_reclaim_metrics() {
  timeout 5 wget -q -O - http://127.0.0.1:9847/metrics 2>/dev/null | awk '
    /^pressured_reclaim_/ { n = $1; sub(/\{.*/, "", n); v[n] += $NF }
    END { s = ""; for (n in v) s = s (s ? "," : "") sprintf("\"%s\":%g", n, v[n]); printf "{%s}", s }'
}

# vmt_undone_records: pressured's pressured_kubernetes_eviction_records_undone_total,
# summed over its causes ("null" when /metrics could not be read).
vmt_undone_records() {
  timeout 5 wget -q -O - http://127.0.0.1:9847/metrics 2>/dev/null | awk '
    /^pressured_kubernetes_eviction_records_undone_total[{ ]/ { s += $NF; n++ }
    END { if (n) printf "%d", s; else printf "null" }'
}
