# The real-kubelet node (contenders kubelet and pressured+kubelet), busybox sh.
#
# containerd + runc (Debian) and kubelet 1.20.2 run on the guest; the apiserver
# runs on the host's 127.0.0.1, reached at 10.0.2.100:6443 through QEMU's
# restricted user-mode network (vmtests/harness/node.py). Node binaries, image archives
# and the runtime state live on /dev/vdb (/node). Pods are created through the
# API with spec.nodeName and hostNetwork; each waits for its command in a
# hostPath trigger file so the scenario decides when the workload starts, as
# with the hand-made tree of the other contenders.
#
# Every wait is bounded; a daemon that fails to start is reported with its log
# (@@VMT ERROR + @@VMT LOG lines), never a hang.

NODE=/node
NODE_CG=$CG/node.slice
KCFG=/etc/kubernetes/kubeconfig
TRIG=/run/vmt/trig
NODE_NAME=vm
NODE_IP=10.0.2.15
KUBELET_PID=
CONTAINERD_PID=

kc() { kubectl --kubeconfig $KCFG --request-timeout=20s "$@"; }

# vmt_node_log FILE TAG: the last lines of a daemon's log on the console.
vmt_node_log() {
  tail -n ${3:-60} "$1" 2>/dev/null | sed "s/^/@@VMT LOG $2: /"
}

vmt_node_fail() {
  vmt_mark ERROR "node: $1"
  vmt_node_log $NODE/state/containerd.log containerd 40
  grep -v 'node "vm" not found' $NODE/state/kubelet.log | tail -n 80 | sed "s/^/@@VMT LOG kubelet: /"
  return 1
}

# vmt_node_daemon CGDIR LOG CMD...: starts a node daemon in CGDIR, appending to
# LOG, detached from this shell (the scenarios' `wait` must not wait for it);
# its pid is left in VMT_DAEMON_PID.
vmt_node_daemon() {
  local cg=$1 logf=$2
  shift 2
  rm -f /tmp/daemon.pid
  (sh -c 'echo $$ > /tmp/daemon.pid && echo $$ > "$1/cgroup.procs" && l=$2 && shift 2 && exec "$@" >> "$l" 2>&1' \
    vmt-node "$cg" "$logf" "$@" < /dev/null &)
  local i=0
  while [ ! -s /tmp/daemon.pid ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
  VMT_DAEMON_PID=$(cat /tmp/daemon.pid 2>/dev/null)
}

# vmt_node_up: disk, network, containerd, images. Once per boot.
vmt_node_up() {
  local i=0
  while [ ! -b /dev/vdb ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
  [ -b /dev/vdb ] || { vmt_node_fail "no /dev/vdb node disk"; return 1; }
  mkdir -p $NODE && mount -t ext4 /dev/vdb $NODE || { vmt_node_fail "node disk did not mount"; return 1; }
  # deploy/ mounts the kubelet's directory with HostToContainer propagation, which
  # the runtime refuses on a private mount: shared, as systemd makes / on a real node.
  if [ "$VMT_CONTENDER" = daemonset ]; then
    # (busybox: --make-rshared; its `-o rshared` looks the path up in /etc/fstab.)
    mount --make-rshared / 2>/dev/null
    mount --make-rshared $NODE || { vmt_node_fail "cannot make $NODE a shared mount"; return 1; }
  fi
  export PATH=$PATH:$NODE/bin
  mkdir -p $NODE/state /etc/containerd /etc/kubernetes /var/log/pods $TRIG $NODE_CG
  echo "+memory +pids +io +cpu" > $NODE_CG/cgroup.subtree_control 2>/dev/null
  # Host-network sandboxes copy these two files into every pod.
  echo "nameserver 10.0.2.3" > /etc/resolv.conf
  printf '127.0.0.1 localhost\n%s %s\n' $NODE_IP $NODE_NAME > /etc/hosts
  hostname $NODE_NAME
  ip link set lo up
  ip link set eth0 up && ip addr add $NODE_IP/24 dev eth0 && ip route add default via 10.0.2.2 ||
    { vmt_node_fail "eth0 did not come up (virtio_net loaded?)"; return 1; }
  # The apiserver through QEMU's forwarding, bounded: a broken network is said now.
  local out
  out=$(kc get --raw /readyz 2>&1)
  [ "$out" = ok ] || { vmt_node_fail "apiserver not reachable at 10.0.2.100:6443: $out"; return 1; }
  vmt_mark STEP "node: apiserver reachable through QEMU's forwarding"
  cat > /etc/containerd/config.toml <<EOF
version = 2
root = "$NODE/state/containerd"
state = "/run/containerd"
[grpc]
  address = "/run/containerd/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "docker.io/vmtests/pause:1"
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
  # The guest's root is the initramfs (rootfs), which pivot_root cannot leave.
  # (The older no_pivot key makes the CRI plugin refuse to load.)
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
    NoPivotRoot = true
EOF
  # Pods use hostNetwork (no CNI plugin runs), but without a network config the
  # runtime says NetworkReady=false ("cni plugin not initialized") and the node
  # stays NotReady: a loopback-only config makes it Ready like a real node.
  mkdir -p /etc/cni/net.d
  echo '{"cniVersion":"0.4.0","name":"vmtests","plugins":[{"type":"loopback"}]}' > /etc/cni/net.d/10-vmtests.conflist
  mkdir -p $NODE_CG/containerd
  vmt_mark STEP "node: starting containerd"
  vmt_node_daemon $NODE_CG/containerd $NODE/state/containerd.log containerd --config /etc/containerd/config.toml
  CONTAINERD_PID=$VMT_DAEMON_PID
  i=0
  while ! ctr version > /dev/null 2>&1; do
    kill -0 $CONTAINERD_PID 2>/dev/null || { vmt_node_fail "containerd exited at start"; return 1; }
    i=$((i + 1))
    [ $i -lt 600 ] || { vmt_node_fail "containerd not answering after 60 s"; return 1; }
    sleep 0.1
  done
  grep -q 'failed to load plugin io.containerd.grpc.v1.cri' $NODE/state/containerd.log &&
    { vmt_node_fail "containerd's CRI plugin did not load"; return 1; }
  for img in $NODE/images/*.tar; do
    ctr -n k8s.io images import $img > /tmp/ctr-import.log 2>&1 ||
      { cat /tmp/ctr-import.log >> $NODE/state/containerd.log; vmt_node_fail "ctr images import $img failed"; return 1; }
  done
  vmt_mark STEP "node: containerd up, images: $(ctr -n k8s.io images ls -q | grep -E 'vmtests|pressured' | tr '\n' ' ')"
  return 0
}

# vmt_kubelet_start: (re)starts the kubelet with the scenario's thresholds
# (vmt_thresholds) and waits for the node to be Ready (bounded).
vmt_kubelet_start() {
  NODE_BROKEN=
  vmt_kubelet_stop
  local hard="    memory.available: \"${HARD_MI}Mi\""
  [ "$PID_HARD" -gt 0 ] && hard="$hard
    pid.available: \"$PID_HARD\""
  {
    cat <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
cgroupsPerQOS: true
enforceNodeAllocatable: ["pods"]
failSwapOn: false
readOnlyPort: 10255
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
evictionPressureTransitionPeriod: "$TRANSITION"
evictionMaxPodGracePeriod: $MAX_POD_GRACE
evictionHard:
$hard
EOF
    if [ "$SOFT_MI" -gt 0 ]; then
      printf 'evictionSoft:\n    memory.available: "%sMi"\nevictionSoftGracePeriod:\n    memory.available: "%s"\n' \
        $SOFT_MI $SOFT_GRACE
    fi
    [ "$MIN_RECLAIM_MI" -gt 0 ] && printf 'evictionMinimumReclaim:\n    memory.available: "%sMi"\n' $MIN_RECLAIM_MI
  } > /etc/kubernetes/kubelet.yaml
  mkdir -p $NODE_CG/kubelet
  printf '# ---- kubelet (re)start, config:\n%s\n' "$(cat /etc/kubernetes/kubelet.yaml)" >> $NODE/state/kubelet.log
  # /usr/bin first: GNU du and nice (the kubelet's `nice -n 19 du -x -s -B 1` log stats
  # fail with busybox's du, which /bin holds and which has no -B).
  vmt_node_daemon $NODE_CG/kubelet $NODE/state/kubelet.log env PATH=/usr/bin:$PATH \
    kubelet --config /etc/kubernetes/kubelet.yaml --kubeconfig $KCFG --hostname-override $NODE_NAME \
    --node-ip $NODE_IP --container-runtime remote \
    --container-runtime-endpoint unix:///run/containerd/containerd.sock --root-dir $NODE/state/kubelet \
    --cert-dir $NODE/state/pki --v 2
  KUBELET_PID=$VMT_DAEMON_PID
  # Which kubelet wrote over the eviction records (reported with each record).
  KUBELET_VERSION=$(kubelet --version 2>/dev/null | awk '{print $2}')
  local t0=$(vmt_ms) ready= n=0
  vmt_mark STEP "node: kubelet started (pid $KUBELET_PID)"
  while [ $(($(vmt_ms) - t0)) -lt 180000 ]; do
    kill -0 $KUBELET_PID 2>/dev/null || { vmt_node_fail "kubelet exited at start"; return 1; }
    ready=$(kc get node $NODE_NAME -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>&1)
    # Ready, and posted by this kubelet (the condition of the previous one may still say True).
    if [ "$ready" = True ] && wget -q -O /dev/null http://127.0.0.1:10255/healthz 2>/dev/null; then
      vmt_mark STEP "node: kubelet ready after $(($(vmt_ms) - t0)) ms (thresholds hard=${HARD_MI}Mi soft=${SOFT_MI}Mi/$SOFT_GRACE)"
      return 0
    fi
    n=$((n + 1))
    [ $((n % 15)) = 0 ] && vmt_mark STEP "node: waiting for the kubelet ($(($(vmt_ms) - t0)) ms): Ready='$ready' $(tail -n 1 $NODE/state/kubelet.log | cut -c1-200)"
    sleep 1
  done
  vmt_node_fail "node $NODE_NAME not Ready after 180 s (last: '$ready')"
}

vmt_kubelet_stop() {
  [ -n "$KUBELET_PID" ] || return 0
  kill -TERM $KUBELET_PID 2>/dev/null
  local i=0
  while kill -0 $KUBELET_PID 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
  kill -KILL $KUBELET_PID 2>/dev/null
  KUBELET_PID=
}

# vmt_node_pods_create: the scenario's pods (PODS_LIST) as API objects; waits until
# each runs and rewrites PODS_LIST with the real uid and cgroup paths.
vmt_node_pods_create() {
  local f=/tmp/pods-api.json first=1
  [ -z "$NODE_BROKEN" ] || return 1
  {
    printf '{"apiVersion":"v1","kind":"List","items":['
    while IFS='|' read -r name qos uid podcg ctrcg adj req lim prio grace ctr; do
      local res
      res=$(vmt_pod_resources "$qos" "$req" "$lim")
      mkdir -p $TRIG/$name
      rm -f $TRIG/$name/*
      [ $first = 1 ] || printf ','
      first=0
      printf '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"%s","namespace":"vmtests","labels":{"vmtests":"1"}},' "$name"
      printf '"spec":{"nodeName":"%s","hostNetwork":true,"automountServiceAccountToken":false,"enableServiceLinks":false,' $NODE_NAME
      printf '"terminationGracePeriodSeconds":%s,"restartPolicy":"Always",' "$grace"
      printf '"volumes":[{"name":"trig","hostPath":{"path":"%s/%s"}},{"name":"scratch","hostPath":{"path":"/scratch"}}],' $TRIG "$name"
      # The workload starts when the scenario writes its command (vmt_pod_run).
      printf '"containers":[{"name":"main","image":"docker.io/vmtests/workload:1","imagePullPolicy":"Never",'
      printf '"command":["/bin/sh","-c","while [ ! -s /trig/cmd ]; do sleep 0.2; done; touch /trig/started; exec $(cat /trig/cmd) 2>>/trig/log"],'
      printf '"volumeMounts":[{"name":"trig","mountPath":"/trig"},{"name":"scratch","mountPath":"/scratch"}],'
      printf '"resources":%s}]}}' "$res"
    done < $PODS_LIST
    printf ']}\n'
  } > $f
  # A client timeout on a loaded node can hide a create the server carried out;
  # apply is idempotent, so try again (bounded) rather than go on with pods whose
  # uids were never read.
  local try=0
  until kc apply -f $f > /tmp/kc.log 2>&1; do
    try=$((try + 1))
    if [ $try -ge 4 ]; then
      sed 's/^/@@VMT LOG kubectl: /' /tmp/kc.log
      vmt_mark ERROR "creating pods failed"
      return 1
    fi
    vmt_mark WARN "node: creating pods: $(tail -n 1 /tmp/kc.log | cut -c1-160); again ($try)"
    sleep 2
  done
  # Running, with the real uid and container id -> the kubelet's cgroup paths.
  local t0=$(vmt_ms) lines n
  n=$(wc -l < $PODS_LIST)
  while [ $(($(vmt_ms) - t0)) -lt 600000 ]; do
    lines=$(kc -n vmtests get pods -o go-template='{{range .items}}{{if eq .status.phase "Running"}}{{range .status.containerStatuses}}{{if .state.running}}{{$.kind}} {{end}}{{end}}{{end}}{{end}}' 2>/dev/null | wc -w)
    [ "$lines" -ge "$n" ] && break
    sleep 1
  done
  if [ "$lines" -lt "$n" ]; then
    kc -n vmtests get pods -o wide 2>&1 | sed 's/^/@@VMT LOG pods: /'
    kc -n vmtests get events 2>&1 | tail -n 30 | sed 's/^/@@VMT LOG events: /'
    grep -E "RunPodSandbox|CreateContainer|StartContainer|rror" $NODE/state/kubelet.log | grep -v 'node "vm" not found' |
      tail -n 30 | sed 's/^/@@VMT LOG kubelet-errors: /'
    grep -E "level=(error|warning)" $NODE/state/containerd.log | tail -n 30 | sed 's/^/@@VMT LOG containerd-errors: /'
    { ctr -n k8s.io containers ls; ctr -n k8s.io tasks ls; } 2>&1 | sed "s/^/@@VMT LOG ctr: /"
    vmt_node_fail "pods not running after 600 s ($lines of $n)"
    return 1
  fi
  # Every pod's uid and container id, or the sampler would watch paths that do
  # not exist: a kubectl call can time out on a loaded node, so retry (bounded).
  try=0
  while [ $try -lt 10 ]; do
    kc -n vmtests get pods -o go-template='{{range .items}}{{.metadata.name}} {{.metadata.uid}} {{.status.qosClass}} {{range .status.containerStatuses}}{{.containerID}}{{end}}{{"\n"}}{{end}}' > /tmp/pods-api.txt 2>/dev/null
    [ "$(awk 'NF >= 4' /tmp/pods-api.txt | wc -l)" -ge "$n" ] && break
    try=$((try + 1))
    sleep 2
  done
  [ $try -lt 10 ] || vmt_mark WARN "node: uids and container ids of the pods not all known: $(tr '\n' ';' < /tmp/pods-api.txt)"
  local out=/tmp/pods.list.new
  : > $out
  while IFS='|' read -r name qos uid podcg ctrcg adj req lim prio grace ctr; do
    local line=$(awk -v n=$name '$1 == n' /tmp/pods-api.txt)
    uid=$(echo "$line" | awk '{print $2}')
    ctr=$(echo "$line" | awk '{print $4}' | sed 's|.*://||')
    case $qos in
      Guaranteed) podcg=$KP/pod$uid ;;
      Burstable) podcg=$BU/pod$uid ;;
      BestEffort) podcg=$BE/pod$uid ;;
    esac
    ctrcg=$podcg/$ctr
    [ -d $ctrcg ] || vmt_mark WARN "pod $name: no cgroup $ctrcg"
    echo "$name|$qos|$uid|$podcg|$ctrcg|$adj|$req|$lim|$prio|$grace|$ctr" >> $out
  done < $PODS_LIST
  mv $out $PODS_LIST
  vmt_mark STEP "node: $n pod(s) running through the API after $(($(vmt_ms) - t0)) ms"
}

# vmt_node_pod_run NAME CMD...: starts the workload in the pod's container.
vmt_node_pod_run() {
  local name=$1
  shift
  echo "$*" > $TRIG/$name/cmd.tmp && mv $TRIG/$name/cmd.tmp $TRIG/$name/cmd
  local i=0
  while [ ! -e $TRIG/$name/started ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
  [ -e $TRIG/$name/started ] || vmt_mark WARN "pod $name: workload did not start in 10 s"
  echo "$name api" >> /tmp/pod_pids
}

# vmt_node_pod_state NAME: the pod's fate from the API, as one word for the
# verdict: running | evicted | deleted | deleting (an eviction or deletion the kubelet
# is carrying out) | failed-<reason> | oomkilled[-restarts-<n>] |
# killed-<reason>[-restarts-<n>]. A restart whose container never ran (a CreateContainer
# timeout under TCG: no lastState.terminated) is not a kill.
vmt_node_pod_state() {
  awk -v n=$1 '$1 == n {
      found = 1
      if ($2 == "Failed") { print ($3 == "Evicted" ? "evicted" : "failed-" $3); exit }
      if ($NF == "deleting") { print "deleting"; exit }
      r = ($6 != "-" && $6 != "") ? $6 : $5
      if (r == "OOMKilled") { print "oomkilled" ($4 > 0 ? "-restarts-" $4 : ""); exit }
      if (r != "-" && r != "") { print "killed-" r ($4 > 0 ? "-restarts-" $4 : ""); exit }
      print ($2 == "Running" ? "running" : tolower($2)); exit }
    END { if (!found) print "deleted" }' /tmp/pods-state.txt
}

vmt_node_snapshot() {
  kc -n vmtests get pods -o go-template='{{range .items}}{{.metadata.name}} {{.status.phase}} {{if .status.reason}}{{.status.reason}}{{else}}-{{end}} {{range .status.containerStatuses}}{{.restartCount}} {{if .lastState.terminated}}{{.lastState.terminated.reason}}{{else}}-{{end}} {{if .state.terminated}}{{.state.terminated.reason}}{{else}}-{{end}}{{end}}{{if .metadata.deletionTimestamp}} deleting{{end}}{{"\n"}}{{end}}' \
    > /tmp/pods-state.txt 2>/dev/null
}

# vmt_node_events: the namespace's and the node's Events, on the console, and
# the eviction counts for the result (who evicted whom).
vmt_node_events() {
  kc get events -A -o go-template='{{range .items}}{{.involvedObject.kind}}/{{.involvedObject.name}} {{.reason}} src={{.source.component}}{{if .reportingComponent}}/{{.reportingComponent}}{{end}} n={{.count}} {{.message}}{{"\n"}}{{end}}' \
    > /tmp/events.txt 2>/dev/null
  grep -vE " (Scheduled|Pulled|Created|Started|SandboxChanged|Starting|NodeHasSufficientMemory|NodeHasNoDiskPressure|NodeHasSufficientPID|NodeAllocatableEnforced|RegisteredNode|NodeReady) " /tmp/events.txt |
    tail -n 40 | sed "s/^/@@VMT LOG $SCEN events: /"
  grep -E "eviction_manager|evict" $NODE/state/kubelet.log | tail -n 40 | sed "s/^/@@VMT LOG $SCEN kubelet: /"
  # The record each eviction left (docs/kubernetes.md, "The eviction record"): the
  # Evicted Events' annotations, and the pods once the kubelet has written its status
  # over that record (vmt_end waited for it with vmt_node_record_wait, the contender
  # still running; the pods as they stood before that wait are the "now" lines).
  kc get events -A -o go-template='{{range .items}}{{if eq .reason "Evicted"}}{{.involvedObject.name}} src={{.source.component}} {{.metadata.annotations}}{{"\n"}}{{end}}{{end}}' \
    2>&1 | sed "s/^/@@VMT LOG $SCEN event-annotations: /"
  vmt_node_records later
  vmt_node_record_read
  # The node's memory as the kubelet's eviction manager sees it (its summary
  # API, from cAdvisor), next to the sampler's own reading of memory.available.
  # The node's systemContainers (kubelet, runtime, pods) come first, the node's own last.
  echo "@@VMT LOG $SCEN kubelet-summary: $(wget -q -O - http://127.0.0.1:10255/stats/summary 2>/dev/null |
    tr -d ' \n' | sed 's/"pods":\[.*//' | grep -oE '"name":"[^"]*"|"memory":\{[^}]*\}' | tr '\n' ' ')"
  echo "@@VMT LOG $SCEN kubelet-summary: sampler memory.available $(avail_mib) MiB"
}

# vmt_node_records WHEN: each pod's status as `kubectl get pods` and `describe` show it.
vmt_node_records() {
  kc -n vmtests get pods -o wide 2>&1 | sed "s/^/@@VMT LOG $SCEN pods-$1: /"
  kc -n vmtests get pods -o go-template='{{range .items}}{{.metadata.name}} phase={{.status.phase}} reason={{.status.reason}} conditions={{range .status.conditions}}{{.type}}={{.status}}/{{.reason}},{{end}} containers={{range .status.containerStatuses}}{{.restartCount}}:{{if .state.terminated}}terminated/{{.state.terminated.reason}}{{else if .state.running}}running{{else}}waiting{{end}}{{end}} message={{.status.message}}{{"\n"}}{{end}}' \
    2>&1 | cut -c1-400 | sed "s/^/@@VMT LOG $SCEN status-$1: /"
}

# vmt_node_watch_start: a watch on the scenario's pods, each change stamped with
# vmt_ms, so the verdict can say when the API showed a pod gone (DELETED or
# phase Failed), the most restarts any of its containers had, and what each write
# left of the eviction record. One line per event, its fields separated by the
# ASCII unit separator (kubectl puts a watch's output through a tab writer, which
# turns tabs into spaces): ms, type, name,
# phase, deleting|-, the containers' restart counts, reason|-, the DisruptionTarget
# condition (status/reason|-), the message and the condition's message (both
# Go-quoted, so a line stays one line and each is a JSON string). No
# --request-timeout: the watch runs until vmt_node_watch_stop.
VMT_RECORD_TEMPLATE='{{.metadata.name}}{{"\x1f"}}{{.status.phase}}{{"\x1f"}}{{if .metadata.deletionTimestamp}}deleting{{else}}-{{end}}{{"\x1f"}}{{range .status.containerStatuses}}{{.restartCount}} {{end}}{{"\x1f"}}{{with .status.reason}}{{.}}{{else}}-{{end}}{{"\x1f"}}{{range .status.conditions}}{{if eq .type "DisruptionTarget"}}{{.status}}/{{.reason}}{{end}}{{end}}{{"\x1f"}}{{with .status.message}}{{printf "%q" .}}{{else}}""{{end}}{{"\x1f"}}{{range .status.conditions}}{{if eq .type "DisruptionTarget"}}{{with .message}}{{printf "%q" .}}{{end}}{{end}}{{end}}'
vmt_node_watch_start() {
  : > /tmp/podwatch.txt
  rm -f /tmp/podwatch.pid
  (sh -c 'echo $$ > /tmp/podwatch.pid && exec kubectl --kubeconfig "$1" -n vmtests get pods --watch-only \
      --output-watch-events -o go-template="$2"' vmt-watch $KCFG \
      "{{.type}}{{\"\\x1f\"}}{{with .object}}$VMT_RECORD_TEMPLATE{{end}}{{\"\\n\"}}" \
      2>/dev/null | while read -r l; do printf '%s\037%s\n' "$(vmt_ms)" "$l"; done >> /tmp/podwatch.txt) &
}

vmt_node_watch_stop() {
  [ -s /tmp/podwatch.pid ] && kill $(cat /tmp/podwatch.pid) 2>/dev/null
  rm -f /tmp/podwatch.pid
}

# vmt_node_pod_facts NAME: the JSON fields the verdict reads for one pod: when the
# API showed it evicted and gone (ms since boot, -1: never), its most restarts, its
# Evicted Events by the component that sent them ({"pressured":1}), and its eviction
# record (vmt_node_record_json).
vmt_node_pod_facts() {
  local gone evicted_at restarts evicted
  gone=$(awk -F'\037' -v n=$1 '$3 == n && ($2 == "DELETED" || $4 == "Failed") { print $1; exit }' /tmp/podwatch.txt)
  # Evicted as the API sees it: deletion requested (an API eviction) or phase Failed
  # (the kubelet's own eviction): the order of the contender's choices.
  evicted_at=$(awk -F'\037' -v n=$1 '$3 == n && ($5 == "deleting" || $4 == "Failed") { print $1; exit }' /tmp/podwatch.txt)
  restarts=$( (awk -F'\037' -v n=$1 '$3 == n { k = split($6, r, " "); for (i = 1; i <= k; i++) if (r[i] + 0 > m) m = r[i] + 0 }
      END { print m + 0 }' /tmp/podwatch.txt; awk -v n=$1 '$1 == n { print $4 + 0 }' /tmp/pods-state.txt) | sort -n | tail -n 1)
  evicted=$(awk -v n="Pod/$1" '$1 == n && $2 == "Evicted" {
      split($3, s, "[=/]"); c = $4; sub("^n=", "", c); if (c !~ /^[0-9]+$/) c = 1; cnt[s[2]] += c }
    END { o = ""; for (k in cnt) o = o (o == "" ? "" : ",") "\"" k "\":" cnt[k]; print o }' /tmp/events.txt)
  printf '"api_evicted_ms":%s,"api_gone_ms":%s,"restarts":%s,"evicted_by":{%s},"record":%s' "${evicted_at:--1}" \
    "${gone:--1}" "${restarts:-0}" "$evicted" "$(vmt_node_record_json $1)"
}

# VMT_RECORD_AWK: awk functions that turn one record line (fields from
# the name on: VMT_RECORD_TEMPLATE) into JSON fields. A message is Go-quoted; the
# escapes JSON lacks (\a \v \xNN, only in a control byte) become "?".
VMT_RECORD_AWK='
function q(s) { if (s == "") return "\"\""; gsub(/\\x[0-9a-f][0-9a-f]|\\[av]/, "?", s); return s }
function nil(s) { return (s == "-" || s == "") ? "" : s }
function rec(o,    k, r, i, m) {
  k = split($(o + 3), r, " "); m = 0
  for (i = 1; i <= k; i++) if (r[i] + 0 > m) m = r[i] + 0
  return "\"phase\":\"" $(o + 1) "\",\"deleting\":" ($(o + 2) == "deleting" ? "true" : "false") \
    ",\"restarts\":" m ",\"reason\":\"" nil($(o + 4)) "\",\"disruption_target\":\"" nil($(o + 5)) "\"" \
    ",\"message\":" q($(o + 6)) ",\"disruption_target_message\":" q($(o + 7))
}'

# vmt_node_record_json NAME: the pod's eviction record: "evicted", as the watch first
# showed it Failed or deleting (the evictor's write; null: never); "writes_after", the
# watch events after that one (the kubelet's status writes, or the deletion); and
# "synced", as the API held it after vmt_node_record_wait (with kubectl's STATUS column;
# {"exists":false}: the object is gone).
vmt_node_record_json() {
  local evicted writes synced status
  evicted=$(awk -F'\037' -v n=$1 "$VMT_RECORD_AWK"'
    $3 == n && $2 != "DELETED" && ($4 == "Failed" || $5 == "deleting") { print "{\"at_ms\":" $1 "," rec(3) "}"; exit }' \
    /tmp/podwatch.txt)
  writes=$(awk -F'\037' -v n=$1 '$3 == n && !seen && ($4 == "Failed" || $5 == "deleting") { seen = 1; next }
    $3 == n && seen { c++ } END { print c + 0 }' /tmp/podwatch.txt)
  status=$(awk -v n=$1 '$1 == n { print $3; exit }' /tmp/records-kubectl.txt 2>/dev/null)
  synced=$(awk -F'\037' -v n=$1 -v st="$status" "$VMT_RECORD_AWK"'
    $1 == n { print "{\"exists\":true,\"kubectl_status\":\"" st "\"," rec(1) "}"; f = 1; exit }
    END { if (!f) print "{\"exists\":false}" }' /tmp/records-synced.txt 2>/dev/null)
  printf '{"kubelet":"%s","evicted":%s,"writes_after":%s,"synced":%s,"synced_at_ms":%s,"waited_ms":%s}' \
    "$KUBELET_VERSION" "${evicted:-null}" "${writes:-0}" "${synced:-null}" "${VMT_RECORD_READ_MS:--1}" \
    "${VMT_RECORD_WAITED_MS:--1}"
}

# vmt_node_record_wait: waits (bounded, 45 s) until the record of every pod the API
# showed Failed has been written over (the kubelet's status sync) and has then stayed
# as it is for 11 s, one of the kubelet's 10 s status syncs and its reconcile: a kubelet
# may write a pod more than once on its way to terminal (reason and message first
# dropped, then taken back). A kubelet that agrees with the record writes nothing; the
# wait then ends at the bound and the record is read as it stands.
vmt_node_record_wait() {
  local t0=$(vmt_ms) pending
  while [ $(($(vmt_ms) - t0)) -lt 45000 ]; do
    pending=$(awk -F'\037' -v now=$(vmt_ms) '$4 == "Failed" && !($3 in at) { at[$3] = NR; next }
      ($3 in at) { last[$3] = $1 }
      END { for (n in at) if (!(n in last) || now - last[n] < 11000) printf " %s", n }' /tmp/podwatch.txt)
    [ -z "$pending" ] && break
    sleep 1
  done
  [ -n "$pending" ] && vmt_mark STEP "$SCEN: the eviction record of$pending not written over and settled in 45 s"
  VMT_RECORD_WAITED_MS=$(($(vmt_ms) - t0))
}

# vmt_node_record_read: the pods' records as the API holds them now (the "synced" record),
# and the STATUS column `kubectl get pods` shows for each.
vmt_node_record_read() {
  VMT_RECORD_READ_MS=$(vmt_ms)
  kc -n vmtests get pods -o go-template="{{range .items}}$VMT_RECORD_TEMPLATE{{\"\\n\"}}{{end}}" \
    > /tmp/records-synced.txt 2>/dev/null
  kc -n vmtests get pods --no-headers > /tmp/records-kubectl.txt 2>/dev/null
}

# vmt_node_settle: waits (bounded) until the API has recorded the fate of every pod
# whose container was killed: pressured kills locally first and evicts through
# the API after, which on a TCG guest can take seconds; stopping it before then
# would drop the eviction and report a plain container kill.
vmt_node_settle() {
  local t0=$(vmt_ms) name pending
  while [ $(($(vmt_ms) - t0)) -lt 30000 ]; do
    vmt_node_snapshot
    pending=
    while IFS='|' read -r name rest; do
      case $(vmt_node_pod_state $name) in
        deleting | killed-*) pending="$pending $name" ;;
      esac
    done < $PODS_LIST
    [ -z "$pending" ] && return 0
    sleep 1
  done
  vmt_mark WARN "$SCEN: the API still shows no eviction of$pending after 30 s"
}

# vmt_node_reset: deletes the scenario's pods (bounded) so the next one starts clean.
vmt_node_reset() {
  [ -n "$KUBELET_PID" ] || return 0
  kc -n vmtests delete pods --all --grace-period=0 --force --wait=false > /dev/null 2>&1
  kc delete events -n vmtests --all > /dev/null 2>&1
  local i=0
  while [ $i -lt 60 ]; do
    [ -z "$(ls -d $CG/kubepods/*/pod* $CG/kubepods/pod* 2>/dev/null)" ] && break
    sleep 1
    i=$((i + 1))
  done
  [ $i -lt 60 ] || vmt_mark WARN "node: pod cgroups still there 60 s after the pods' deletion"
  rm -rf $TRIG/*
}

# --- the daemonset contender: pressured as deploy/'s DaemonSet pod --------------
#
# Per scenario: the test overlay (vmtests/deploy/, over the real deploy/ base) is
# applied with the scenario's thresholds; the DaemonSet controller (host) creates
# the pod, the scheduler binds it, the kubelet runs it from the imported image with
# the ServiceAccount token the controller-manager issued. At the scenario's end the
# overlay is deleted and the node checked for leftovers. Facts go into the result's
# "deploy" object; vmtests/harness/scenarios.py judges them.

DS_REPO=/vmt/repo
DS_OVERLAY=$DS_REPO/vmtests/deploy
DS_FACTS=/tmp/ds-facts
DS_PID=

# vmt_ds_fact KEY VALUE: one fact (a JSON value: quote strings with vmt_ds_str).
# An empty value is null: the result line must stay valid JSON whatever a probe printed.
vmt_ds_fact() { echo "$1 ${2:-null}" >> $DS_FACTS; }
vmt_ds_str() { printf '"%s"' "$(printf '%s' "$*" | tr -d '"\\' | tr '\n\t' '  ' | cut -c1-240)"; }
vmt_ds_json() {
  awk 'BEGIN { o = "" } { k = $1; $1 = ""; sub(/^ /, ""); o = o (o == "" ? "" : ",") "\"" k "\":" $0 }
    END { print "{" o "}" }' $DS_FACTS 2>/dev/null
}

# vmt_ds_config: the overlay's config.yaml: deploy/base/config.yaml with its
# eviction settings (the kubelet's file and offsets, the PSI threshold) replaced by
# the scenario's acting thresholds (vmt_thresholds), the ones pressured+kubelet takes
# from the guest kubelet's file plus its offset (the guest kubelet's file is not at
# the path the DaemonSet mounts); every other key stays the base's.
vmt_ds_config() {
  awk -v hard="$ACT_MI" -v soft="$ACT_SOFT_MI" -v grace="$SOFT_GRACE" -v mr="$MIN_RECLAIM_MI" \
      -v pg="$MAX_POD_GRACE" -v tr="$TRANSITION" -v pid="$PID_HARD" '
    /^# The eviction settings are the node/ { skip = 1; next }
    /^kubelet:/ {
      skip = 1
      print "# vmtests: the scenario'"'"'s thresholds (vmtests/guest/node.sh, vmt_ds_config)"
      print "evictionHard:"
      print "  memory.available: " hard "Mi"
      if (pid > 0) print "  pid.available: \"" pid "\""
      if (soft > 0) {
        print "evictionSoft:"
        print "  memory.available: " soft "Mi"
        print "evictionSoftGracePeriod:"
        print "  memory.available: " grace
      }
      if (mr > 0) { print "evictionMinimumReclaim:"; print "  memory.available: " mr "Mi" }
      print "evictionMaxPodGracePeriod: " pg
      print "evictionPressureTransitionPeriod: " tr
      next
    }
    skip && /^daemonSetPods:/ { skip = 0 }
    !skip' $DS_REPO/deploy/base/config.yaml > $DS_OVERLAY/config.yaml.new && mv $DS_OVERLAY/config.yaml.new $DS_OVERLAY/config.yaml
}

vmt_ds_pod_line() {
  kc -n pressured get pods -l app.kubernetes.io/name=pressured -o go-template='{{range .items}}{{.metadata.name}} {{if .spec.nodeName}}{{.spec.nodeName}}{{else}}-{{end}} {{.status.phase}} {{range .status.conditions}}{{if eq .type "Ready"}}{{.status}}{{end}}{{end}} {{range .status.containerStatuses}}{{.restartCount}}{{end}}{{if .metadata.deletionTimestamp}} deleting{{end}}{{"\n"}}{{end}}' 2>/dev/null
}

# vmt_ds_log CONTAINER: the container's log as the kubelet wrote it (CRI format, every
# restart's file). `kubectl logs` cannot work here: the apiserver on the host has no
# route to the kubelet in the guest.
vmt_ds_log() {
  cat /var/log/pods/pressured_pressured-*/$1/*.log 2>/dev/null
}

vmt_ds_dump() {
  kc get all -n pressured -o wide 2>&1 | sed 's/^/@@VMT LOG daemonset: /'
  kc get events -n pressured 2>&1 | tail -n 30 | sed 's/^/@@VMT LOG daemonset-events: /'
  kc -n pressured describe pods 2>&1 | tail -n 40 | sed 's/^/@@VMT LOG daemonset-pod: /'
  vmt_ds_log install-seccomp | tail -n 10 | sed 's/^/@@VMT LOG daemonset-init-log: /'
  vmt_ds_log pressured | tail -n 40 | sed 's/^/@@VMT LOG daemonset-log: /'
  grep -E "pressured|rror" $NODE/state/kubelet.log | grep -v 'node "vm" not found' | tail -n 30 |
    sed 's/^/@@VMT LOG kubelet-errors: /'
}

# vmt_ds_pids: pids of the pressured daemon (hostPID: the guest sees them), not the
# init container's `pressured install-seccomp`.
vmt_ds_pids() {
  local p
  for p in /proc/[0-9]*; do
    [ "$(cat $p/comm 2>/dev/null)" = pressured ] || continue
    tr '\0' ' ' < $p/cmdline 2>/dev/null | grep -q ' run ' && echo ${p#/proc/}
  done
}

# vmt_ds_links: BPF links on the node (bpftool; "-" when it cannot tell).
vmt_ds_links() {
  if command -v bpftool > /dev/null 2>&1; then
    bpftool link show 2>/dev/null | grep -cE '^[0-9]+:'
  else
    echo -
  fi
}

# vmt_ds_apply: the overlay with the scenario's thresholds; waits (bounded) for the
# DaemonSet's pod to be Running and Ready, then records what the deployment did.
vmt_ds_apply() {
  : > $DS_FACTS
  DS_PID=
  vmt_ds_config
  local t0=$(vmt_ms) try=0
  vmt_mark STEP "daemonset: kubectl apply -k (thresholds hard=${ACT_MI}Mi soft=${ACT_SOFT_MI}Mi/$SOFT_GRACE)"
  until kc apply -k $DS_OVERLAY > /tmp/ds-apply.log 2>&1; do
    try=$((try + 1))
    if [ $try -ge 4 ]; then
      sed 's/^/@@VMT LOG kubectl-apply: /' /tmp/ds-apply.log
      vmt_mark ERROR "daemonset: kubectl apply -k failed"
      vmt_ds_fact applied false
      return 1
    fi
    sleep 2
  done
  vmt_ds_fact applied true
  local line= n=0
  while [ $(($(vmt_ms) - t0)) -lt 600000 ]; do
    line=$(vmt_ds_pod_line | head -n 1)
    set -- $line
    [ "$3" = Running ] && [ "$4" = True ] && break
    n=$((n + 1))
    [ $((n % 20)) = 0 ] && vmt_mark STEP "daemonset: waiting for the pod ($(($(vmt_ms) - t0)) ms): ${line:-none yet}"
    sleep 1
  done
  set -- $line
  if [ "$3" != Running ] || [ "$4" != True ]; then
    vmt_ds_fact ready false
    vmt_ds_dump
    vmt_mark ERROR "daemonset: pod not Running and Ready after 600 s (${line:-no pod})"
    return 1
  fi
  local pod=$1
  vmt_ds_fact ready true
  vmt_ds_fact ready_ms $(($(vmt_ms) - t0))
  vmt_ds_fact pod "$(vmt_ds_str $pod)"
  vmt_ds_fact node "$(vmt_ds_str $2)"
  vmt_mark STEP "daemonset: pod $pod Running and Ready on $2 after $(($(vmt_ms) - t0)) ms"
  DS_PID=$(vmt_ds_pids | head -n 1)
  vmt_ds_fact pid "${DS_PID:-0}"
  local sc=
  [ -n "$DS_PID" ] && sc=$(awk '$1 == "Seccomp:" {print $2}' /proc/$DS_PID/status 2>/dev/null)
  vmt_ds_fact seccomp "${sc:--1}"
  vmt_ds_fact no_new_privs "$(awk '$1 == "NoNewPrivs:" {print $2}' /proc/$DS_PID/status 2>/dev/null)"
  vmt_ds_fact cap_eff "$(vmt_ds_str $(awk '$1 == "CapEff:" {print $2}' /proc/$DS_PID/status 2>/dev/null))"
  # Who made and placed the pod, and with which credential. (The scheduler writes its
  # events through events.k8s.io: its name is then the reportingComponent.)
  vmt_ds_fact owner "$(vmt_ds_str $(kc -n pressured get pod $pod -o 'jsonpath={.metadata.ownerReferences[0].kind}' 2>/dev/null))"
  vmt_ds_fact token_secret "$(vmt_ds_str $(kc -n pressured get pod $pod -o 'jsonpath={.spec.volumes[*].secret.secretName}' 2>/dev/null))"
  kc -n pressured get events -o go-template='{{range .items}}{{.involvedObject.kind}} {{.reason}} {{if .source.component}}{{.source.component}}{{else}}{{.reportingComponent}}{{end}}{{"\n"}}{{end}}' > /tmp/ds-events.txt 2>/dev/null
  vmt_ds_fact created_by "$(vmt_ds_str $(awk '$1 == "DaemonSet" && $2 == "SuccessfulCreate" {print $3; exit}' /tmp/ds-events.txt))"
  vmt_ds_fact scheduled_by "$(vmt_ds_str $(awk '$1 == "Pod" && $2 == "Scheduled" {print $3; exit}' /tmp/ds-events.txt))"
  # The daemon's own account of its start (its log through the API).
  local i=0
  while [ $i -lt 60 ]; do
    vmt_ds_log pressured > /tmp/ds-log.txt
    grep -q "pressured running" /tmp/ds-log.txt && break
    sleep 1
    i=$((i + 1))
  done
  vmt_ds_fact bpf_attached "$(grep -c 'bpf: [a-z_]* attached as' /tmp/ds-log.txt)"
  grep -oE 'bpf: [a-z_]+ (attached as|off:)[^"]*' /tmp/ds-log.txt | sed 's/^/@@VMT BPF /'
  vmt_ds_fact cgroups_line "$(vmt_ds_str "$(grep -oE 'cgroups: [^"]*' /tmp/ds-log.txt | head -n 1)")"
  vmt_ds_fact running_line "$(vmt_ds_str "$(grep -oE 'pressured running: [^"]*' /tmp/ds-log.txt | head -n 1)")"
  local listed
  listed=$(grep -oE 'pressured running: [0-9]+ thresholds, [0-9]+ pods' /tmp/ds-log.txt | head -n 1 | awk '{print $5}')
  vmt_ds_fact pods_listed "${listed:--1}"
  vmt_ds_fact links_running "$(vmt_ds_str $(vmt_ds_links))"
  vmt_ds_fact init_log "$(vmt_ds_str "$(vmt_ds_log install-seccomp | tail -n 2)")"
  return 0
}

# vmt_ds_delete: the pod's log for the result, then `kubectl delete -k` and what is
# left on the node (processes, BPF links, the taint, files).
vmt_ds_delete() {
  local pod line
  line=$(vmt_ds_pod_line | head -n 1)
  set -- $line
  pod=$1
  case "$5" in [0-9]*) vmt_ds_fact restarts "$5" ;; *) vmt_ds_fact restarts "$(vmt_ds_str "$line")" ;; esac
  vmt_ds_log pressured > /tmp/ds-log.txt
  cp /tmp/ds-log.txt /tmp/contender.log 2>/dev/null
  # Seccomp refusals are audited as type=1326 (SECCOMP) records in the kernel log.
  vmt_ds_fact audit_seccomp "$(dmesg | grep -c 'type=1326.*comm="pressured"')"
  local t0=$(vmt_ms)
  kubectl --kubeconfig $KCFG delete -k $DS_OVERLAY --timeout=300s > /tmp/ds-delete.log 2>&1 ||
    sed 's/^/@@VMT LOG kubectl-delete: /' /tmp/ds-delete.log
  local gone=false
  while [ $(($(vmt_ms) - t0)) -lt 300000 ]; do
    if ! kc get namespace pressured > /dev/null 2>&1 && [ -z "$(vmt_ds_pids)" ]; then gone=true; break; fi
    sleep 1
  done
  vmt_ds_fact deleted $gone
  vmt_ds_fact delete_ms $(($(vmt_ms) - t0))
  [ $gone = true ] || { vmt_ds_dump; vmt_mark WARN "daemonset: not gone 300 s after kubectl delete -k"; }
  vmt_ds_fact left_processes "$(vmt_ds_pids | wc -l)"
  vmt_ds_fact left_links "$(vmt_ds_str $(vmt_ds_links))"
  vmt_ds_fact left_taints "$(vmt_ds_str $(kc get node $NODE_NAME -o 'jsonpath={.spec.taints[*].key}' 2>/dev/null | tr ' ' '\n' | grep pressured))"
  vmt_ds_fact left_conditions "$(vmt_ds_str $(kc get node $NODE_NAME -o 'jsonpath={.status.conditions[*].type}' 2>/dev/null | tr ' ' '\n' | grep -i pressured))"
  vmt_ds_fact files_after_delete "$(vmt_ds_str $(ls -d /var/lib/pressured/* /var/lib/kubelet/seccomp/profiles/* 2>/dev/null))"
  vmt_mark STEP "daemonset: deleted after $(($(vmt_ms) - t0)) ms (gone=$gone)"
  vmt_ds_uninstall
  DS_PID=
}
# vmt_ds_uninstall: the documented uninstall (docs/operations.md, "Uninstall"; the
# README's Deploy section) after `kubectl delete -k`, as an operator runs it:
# deploy/uninstall/ applied, its rollout waited for, deleted; then what is left of
# pressured's files. The commands are the documented ones plus bounds (--timeout).
vmt_ds_uninstall() {
  local t0=$(vmt_ms) ok=false u=$DS_REPO/deploy/uninstall
  vmt_mark STEP "daemonset: kubectl apply -k deploy/uninstall/"
  if kubectl --kubeconfig $KCFG apply -k $u > /tmp/ds-uninstall.log 2>&1 &&
    kubectl --kubeconfig $KCFG -n pressured-uninstall rollout status ds/pressured-uninstall \
      --timeout=300s >> /tmp/ds-uninstall.log 2>&1; then
    ok=true
  fi
  # What `pressured uninstall` said (its init container's log, as the kubelet wrote it).
  cat /var/log/pods/pressured-uninstall_pressured-uninstall-*/uninstall/*.log 2>/dev/null > /tmp/ds-uninstall-pod.log
  sed 's/^/@@VMT LOG daemonset-uninstall-log: /' /tmp/ds-uninstall-pod.log
  if [ $ok != true ]; then
    sed 's/^/@@VMT LOG kubectl-uninstall: /' /tmp/ds-uninstall.log
    kc -n pressured-uninstall describe pods 2>&1 | tail -n 40 | sed 's/^/@@VMT LOG daemonset-uninstall-pod: /'
    kc get events -n pressured-uninstall 2>&1 | tail -n 20 | sed 's/^/@@VMT LOG daemonset-uninstall-events: /'
  fi
  vmt_ds_fact uninstall_log "$(vmt_ds_str "$(grep -oE 'pressured uninstall: [^"]*' /tmp/ds-uninstall-pod.log | tail -n 4)")"
  kubectl --kubeconfig $KCFG delete -k $u --timeout=300s >> /tmp/ds-uninstall.log 2>&1 ||
    sed 's/^/@@VMT LOG kubectl-uninstall: /' /tmp/ds-uninstall.log
  while [ $(($(vmt_ms) - t0)) -lt 300000 ] && kc get namespace pressured-uninstall > /dev/null 2>&1; do sleep 1; done
  vmt_ds_fact uninstalled $ok
  vmt_ds_fact uninstall_ms $(($(vmt_ms) - t0))
  vmt_ds_fact left_files "$(vmt_ds_str $(ls -d /var/lib/pressured/* /var/lib/kubelet/seccomp/profiles/* 2>/dev/null))"
  vmt_mark STEP "daemonset: uninstalled=$ok after $(($(vmt_ms) - t0)) ms"
}
