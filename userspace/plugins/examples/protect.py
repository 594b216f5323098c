#!/usr/bin/python3
"""pressured-plugin-protect (Python): an example eviction plugin (docs/plugins.md).

Protects pods from eviction by label selector or namespace, and demotes
others (evicted only after every other candidate), for every resource; the
Python twin of protect.cpp:

  protect.py --socket /run/pressured/plugins/protect-py.sock --name protect-py \\
      --protect-selector 'app=db,tier!=canary' --protect-namespace payments \\
      --demote-selector batch

A selector is Kubernetes' equality-based label selector: requirements joined
by commas, all of which must hold (k=v, k==v, k!=v, k: the label is set, !k:
it is not). A pod whose labels pressured could not send whole
(labels_incomplete) is protected by a selector whose outcome depends on a
label it lacks, and never demoted by one. pressured decides what a protection
may do: under a hard threshold the last candidate is evicted all the same.
Needs Debian's python3-grpcio and python3-protobuf, and the stubs generated
from plugin_v1alpha1.proto (--stubs, or PRESSURED_PLUGIN_STUBS, or next to
this file).
"""
import argparse
import os
import re
import sys

import plugin_server  # beside this file (the image and the source tree alike)

KEY = re.compile(r"^[A-Za-z0-9._/-]{1,317}$")
YES, NO, UNKNOWN = "yes", "no", "unknown"


class Selector:
    """An equality-based label selector: every requirement must hold."""

    def __init__(self, text):
        self.text = text
        self.requirements = []  # (op, key, value), op in "=", "!=", "exists", "!exists"
        for part in text.split(","):
            part = part.strip()
            if "!=" in part:
                key, value = part.split("!=", 1)
                op = "!="
            elif "==" in part:
                key, value = part.split("==", 1)
                op = "="
            elif "=" in part:
                key, value = part.split("=", 1)
                op = "="
            elif part.startswith("!"):
                key, value, op = part[1:], "", "!exists"
            else:
                key, value, op = part, "", "exists"
            key, value = key.strip(), value.strip()
            if not KEY.match(key) or len(value) > 63 or any(c in value for c in "=!,"):
                raise ValueError('selector "%s": requirement "%s" is not k=v, k==v, k!=v, k or !k with a label key '
                                 'and value' % (text, part))
            self.requirements.append((op, key, value))

    def matches(self, pod):
        """YES, NO, or UNKNOWN when it depends on a label the pod lacks while its labels are incomplete."""
        unknown = False
        for op, key, value in self.requirements:
            has = key in pod.labels
            if not has and pod.labels_incomplete:
                unknown = True
                continue
            if op == "=":
                holds = has and pod.labels[key] == value
            elif op == "!=":
                holds = not has or pod.labels[key] != value
            elif op == "exists":
                holds = has
            else:
                holds = not has
            if not holds:
                return NO
        return UNKNOWN if unknown else YES


def selector(text):
    try:
        return Selector(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e))


def protected_by(args, pod):
    if pod.namespace in args.protect_namespace:
        return "namespace " + pod.namespace
    for s in args.protect_selector:
        m = s.matches(pod)
        if m == YES:
            return "labels " + s.text
        if m == UNKNOWN:
            return "labels %s (labels incomplete)" % s.text
    return None


def demoted_by(args, pod):
    if pod.namespace in args.demote_namespace:
        return "namespace " + pod.namespace
    for s in args.demote_selector:
        if s.matches(pod) == YES:
            return "labels " + s.text
    return None


def main():
    p = argparse.ArgumentParser(description="pressured eviction plugin: protect pods by label or namespace")
    p.add_argument("--socket", required=True, help="Unix socket to create in pressured's plugin directory")
    p.add_argument("--name", default="protect-py", help="the plugin's name: [a-z0-9.-], at most 63 characters")
    p.add_argument("--protect-selector", action="append", default=[], type=selector, metavar="SELECTOR")
    p.add_argument("--demote-selector", action="append", default=[], type=selector, metavar="SELECTOR")
    p.add_argument("--protect-namespace", action="append", default=[], metavar="NS")
    p.add_argument("--demote-namespace", action="append", default=[], metavar="NS")
    p.add_argument("--stubs", default=os.environ.get("PRESSURED_PLUGIN_STUBS",
                                                     os.path.dirname(os.path.abspath(__file__))))
    args = p.parse_args()
    if not (args.protect_selector or args.demote_selector or args.protect_namespace or args.demote_namespace):
        p.error("nothing to do: give --protect-selector, --demote-selector, --protect-namespace or --demote-namespace")
    sys.path.insert(0, args.stubs)
    import grpc  # noqa: E402
    import plugin_v1alpha1_pb2 as pb  # noqa: E402
    import plugin_v1alpha1_pb2_grpc as pb_grpc  # noqa: E402
    selectors = args.protect_selector or args.demote_selector

    class Protect(pb_grpc.EvictionPluginServicer):
        def Identify(self, request, context):
            if selectors and "pod-labels" not in request.features:
                # An older pressured sends no labels: every selector would match nothing.
                print("protect-py: this pressured sends no pod labels: refusing to register with label selectors",
                      file=sys.stderr)
                context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                              "pressured sends no pod labels (feature pod-labels): label selectors cannot be honoured")
            return pb.IdentifyResponse(name=args.name, version="1.0", capabilities=[pb.RANK])

        def RankCandidates(self, request, context):
            out = []
            for pod in request.candidates:
                why = protected_by(args, pod)
                if why is not None:
                    out.append(pb.Adjustment(uid=pod.uid, action=pb.PROTECT, reason="protected: " + why))
                    continue
                why = demoted_by(args, pod)
                if why is not None:
                    out.append(pb.Adjustment(uid=pod.uid, action=pb.DEMOTE, reason="evicted last: " + why))
            return pb.RankCandidatesResponse(adjustments=out)

    plugin_server.serve(Protect(), pb_grpc.add_EvictionPluginServicer_to_server, args.socket, "protect-py: %s" % args.name)

if __name__ == "__main__":
    main()
