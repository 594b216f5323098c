#pragma once
// The words of one eviction, built in one place so that the log line, the
// pod's Event and status record, `pressured top` and the "why" record say the
// same thing and cannot drift apart: the kubelet's eviction message and
// annotations, pressured's own facts after it, the line that starts an
// eviction, the explanation of the choice, and relief's record line.
// Pure: values in, text out; no I/O, no clock.

#include <cstddef>
#include <map>
#include <string>
#include <string_view>

#include "pressured/engine.hpp"
#include "pressured/relief.hpp"

namespace pressured {

/// The kubelet's name of the resource an eviction for `s` reclaims, as its
/// messages and the `starved_resource` annotation spell it ("memory",
/// "ephemeral-storage", "inodes", "pids").
std::string starved_resource_name(Signal s);

/// A byte amount for people: "0", "512", "12.5Mi", "1.2Gi", "300Gi" (three
/// significant digits at most, binary suffixes); for logs and `top`, not for
/// the kubelet's exact quantities (eviction_message).
std::string human_bytes(double bytes);

/// "container app grew by 300Mi in 12.0s to 1.2Gi (request 1Gi)" or
/// "container app is 200Mi over its request (1.2Gi of 1Gi; no reading before to
/// tell growth)": the container of a memory eviction's victim that grew
/// (Eviction::grew, docs/observation.md "Per container").
std::string growth_text(const ContainerGrowth& g);

/// "memory stall (some avg10): pod 12.30%, app 30.10%": the victim pod's and
/// each container's own stall time (v2 memory.pressure), those read; empty
/// when none was (v1, PSI off).
std::string stall_text(const Eviction& e);

/// " Grew: <growth_text>. Hurt: <stall_text>." for the eviction's log line;
/// empty when there is neither.
std::string attribution_sentences(const Eviction& e);

/// "pod ns/name (uid)", or "pod <uid>" without metadata.
std::string pod_label(const std::string& ns, const std::string& name, const std::string& uid);

/// "qos=BestEffort over-request priority=0 usage=700Mi request=0" for logs
/// and `top`. Byte amounts are shown with binary suffixes for memory and
/// ephemeral storage, as counts for inodes and pids.
std::string describe_keys(const RankKeys& keys, StarvedResource resource);

/// Why the victim of `e` went before its runner-up, in one line an operator
/// can read: the victim's keys, the runner-up's, and the deciding key in words
/// ("BestEffort before Burstable").
std::string explain_choice(const Eviction& e);

/// The deciding key in a few words, for messages: "chosen before shop/web
/// by qos: BestEffort before Burstable", or "the only pod that could be
/// evicted" without a runner-up.
std::string choice_summary(const Eviction& e);

/// Longest eviction message (longer ones are cut, ending in "..."; the cut
/// takes pressured's facts first, the kubelet's part stays whole).
inline constexpr std::size_t kMaxEventMessage = 1024;

/// The kubelet's own message for this eviction, exactly as its
/// evictionMessage (pkg/kubelet/eviction/helpers.go, 1.33-1.36) writes it:
/// "The node was low on resource: memory. Threshold quantity: X, available:
/// Y. ", then, for a memory eviction of a pod with a pod-level memory request,
/// "Pod NAME was using Z, request is W, has larger consumption of memory. ",
/// then "Container C was using U, request is R, has larger consumption of
/// memory. " for each container over its own request, quantities as the
/// kubelet prints them. For an own local-storage limit, the kubelet's
/// sentence for it.
std::string kubelet_eviction_message(const Eviction& e);

/// The message of an eviction's Event, status record and log line: the
/// kubelet's message, unchanged and first (tooling that parses it matches
/// it as a prefix), then pressured's own facts: the eviction id, signal and
/// threshold kind, what woke the decision, the detection latency, and why
/// this pod (docs/kubernetes.md).
std::string eviction_message(const Eviction& e);

/// The annotations of an eviction's Event, under the kubelet's keys
/// (pkg/kubelet/eviction/helpers.go): `starved_resource`,
/// `offending_containers` and `offending_containers_usage` (the containers
/// over their own request, comma-separated, as in the message), and for the
/// pod sentence's case `offending_pod` / `offending_pod_usage`. None for an
/// own local-storage limit, as the kubelet's. pressured's own, under its
/// prefix so that tooling reading the kubelet's keys is not disturbed: the
/// container of a memory eviction's victim that grew,
/// `pressured.io/grown-container` (its name) and
/// `pressured.io/grown-container-detail` (growth_text).
std::map<std::string, std::string> eviction_annotations(const Eviction& e);

/// The info line that starts an eviction: who, why, the observed value and
/// the threshold, the grace period, the message and the choice's
/// explanation, relief's outcome when reclaim was asked first, and the
/// container that grew and who was hurt (attribution_sentences).
std::string eviction_start_line(const Eviction& e, bool dry_run);

/// "relief 3: memory.available (hard) short 10.0Mi: asked 120.0Mi from 2 pod
/// cgroup(s), got back 118.2Mi in 35.0 ms: eviction avoided"
std::string relief_record_line(const ReliefRecord& r);

}  // namespace pressured
