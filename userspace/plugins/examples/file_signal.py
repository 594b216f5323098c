#!/usr/bin/python3
"""pressured-plugin-file-signal: an example eviction plugin (docs/plugins.md).

Reports one threshold of its own on a number read from a file (a GPU's free
memory, an application's queue depth, written there by whatever measures it),
so pressured evicts when it is met, on its own ranking:

  file_signal.py --socket /run/pressured/plugins/queue.sock --name queue \\
      --file /run/app/queue-depth --signal queue.depth --above 10000 \\
      --kind soft --grace 60 --resource memory

The file holds one number (surrounding whitespace ignored). A file that is
missing or does not hold a number reports no threshold: a signal that cannot
be read never evicts. Needs Debian's python3-grpcio and python3-protobuf, and
the stubs generated from plugin_v1alpha1.proto (--stubs, or
PRESSURED_PLUGIN_STUBS, or next to this file).
"""
import argparse
import os
import sys

import plugin_server  # beside this file (the image and the source tree alike)


def load_stubs(path):
    sys.path.insert(0, path)
    import plugin_v1alpha1_pb2 as pb  # noqa: E402
    import plugin_v1alpha1_pb2_grpc as pb_grpc  # noqa: E402
    return pb, pb_grpc


def main():
    p = argparse.ArgumentParser(description="pressured eviction plugin: a threshold on a number in a file")
    p.add_argument("--socket", required=True, help="Unix socket to create in pressured's plugin directory")
    p.add_argument("--name", required=True, help="the plugin's name: [a-z0-9.-], at most 63 characters")
    p.add_argument("--file", required=True, help="file holding the observed value")
    p.add_argument("--signal", required=True, help="the signal's name ([a-zA-Z0-9._/-])")
    limit = p.add_mutually_exclusive_group(required=True)
    limit.add_argument("--above", type=float, help="met when the value is above this")
    limit.add_argument("--below", type=float, help="met when the value is below this")
    p.add_argument("--kind", choices=["soft", "hard"], default="soft")
    p.add_argument("--grace", type=int, default=60, help="soft: seconds met before pressured evicts")
    p.add_argument("--resource", choices=["memory", "ephemeral-storage", "pids"], default="memory",
                   help="which pods' usage ranks the eviction")
    p.add_argument("--stubs", default=os.environ.get("PRESSURED_PLUGIN_STUBS",
                                                     os.path.dirname(os.path.abspath(__file__))))
    args = p.parse_args()
    if args.kind == "soft" and args.grace < 0:
        p.error("--grace must be 0 or more")
    pb, pb_grpc = load_stubs(args.stubs)

    resource = {"memory": pb.MEMORY, "ephemeral-storage": pb.EPHEMERAL_STORAGE, "pids": pb.PIDS}[args.resource]
    above = args.above is not None

    class FileSignal(pb_grpc.EvictionPluginServicer):
        def Identify(self, request, context):
            return pb.IdentifyResponse(name=args.name, version="1.0", capabilities=[pb.THRESHOLDS])

        def GetThresholds(self, request, context):
            try:
                with open(args.file) as f:
                    observed = float(f.read().strip())
            except (OSError, ValueError) as e:
                print("file-signal: %s: %s: no threshold reported" % (args.file, e), file=sys.stderr)
                return pb.GetThresholdsResponse()
            return pb.GetThresholdsResponse(thresholds=[pb.PluginThreshold(
                signal=args.signal, observed=observed, threshold=args.above if above else args.below,
                operator=pb.GREATER_THAN if above else pb.LESS_THAN,
                kind=pb.SOFT if args.kind == "soft" else pb.HARD,
                grace_period_seconds=args.grace if args.kind == "soft" else 0, resource=resource)])

    plugin_server.serve(FileSignal(), pb_grpc.add_EvictionPluginServicer_to_server, args.socket, "file-signal: %s" % args.name)

if __name__ == "__main__":
    main()
