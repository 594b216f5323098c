# The vmtests scenarios, run inside the guest for one contender (busybox sh).
#
# Each scenario builds a kubelet-shaped cgroup tree and a PodList file, starts
# the pods' steady workloads, starts the contender and the ground-truth sampler,
# drives pressure, waits for the outcome (bounded), and prints one
#   @@VMT RESULT {json}
# line with the raw facts: which pod workloads were killed and how, kernel OOM
# kills, the sampler's timings, the contender's CPU time. vmtests/run judges
# them (assertions live there, next to the scenario descriptions).
#
# The library (the tree, the pods, the waits, one run) is scenario_lib.sh, the
# contenders contenders.sh; this file sources both and holds the scenarios.
# VMT_DIR: where the three are (the initramfs's /vmt; tests point it elsewhere).

. "${VMT_DIR:-/vmt}/scenario_lib.sh"
. "${VMT_DIR:-/vmt}/contenders.sh"

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
