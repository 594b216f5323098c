#!/usr/bin/python3
"""A plugin for the plugin host tests: well-behaved, or misbehaving on purpose.

  fixture_plugin.py --socket PATH --name NAME --mode MODE [--uid UID]... [--marker FILE]

Modes:
  protect   RankCandidates protects the pods --uid names
  hang      RankCandidates writes --marker, then never answers
  hostile   protects every candidate and thousands of unknown uids, promotes
            unknown pods, proposes every --uid (critical pods), and reports
            thresholds with garbage values
  huge      RankCandidates answers a message over pressured's 1 MiB limit

The generated stubs come from PRESSURED_PLUGIN_STUBS (the build's
generated/plugin_proto). Stops on SIGTERM, removing its socket.
"""
import argparse
import os
import signal
import sys
import threading
import time
from concurrent import futures

sys.path.insert(0, os.environ["PRESSURED_PLUGIN_STUBS"])
import grpc  # noqa: E402
import plugin_v1alpha1_pb2 as pb  # noqa: E402
import plugin_v1alpha1_pb2_grpc as pb_grpc  # noqa: E402


class Fixture(pb_grpc.EvictionPluginServicer):
    def __init__(self, args):
        self.args = args

    def Identify(self, request, context):
        caps = [pb.RANK]
        if self.args.mode == "hostile":
            caps += [pb.PROPOSE, pb.THRESHOLDS, 99]
        return pb.IdentifyResponse(name=self.args.name, version="test", capabilities=caps)

    def GetThresholds(self, request, context):
        return pb.GetThresholdsResponse(thresholds=[
            pb.PluginThreshold(signal="nan", observed=float("nan"), threshold=1, operator=pb.LESS_THAN,
                               kind=pb.HARD, resource=pb.MEMORY),
            pb.PluginThreshold(signal="no kind", observed=0, threshold=1, operator=pb.LESS_THAN, resource=pb.MEMORY),
            pb.PluginThreshold(signal="bad resource", observed=0, threshold=1, operator=pb.LESS_THAN, kind=pb.HARD,
                               resource=42),
        ])

    def RankCandidates(self, request, context):
        mode = self.args.mode
        if mode == "protect":
            return pb.RankCandidatesResponse(adjustments=[
                pb.Adjustment(uid=u, action=pb.PROTECT, reason="fixture protects " + u)
                for u in self.args.uid if any(c.uid == u for c in request.candidates)])
        if mode == "hang":
            with open(self.args.marker, "w") as f:
                f.write("in RankCandidates\n")
            time.sleep(3600)
            return pb.RankCandidatesResponse()
        if mode == "huge":
            return pb.RankCandidatesResponse(adjustments=[
                pb.Adjustment(uid=c.uid, action=pb.PROTECT, reason="x" * (2 << 20)) for c in request.candidates])
        # hostile
        adj = [pb.Adjustment(uid=c.uid, action=pb.PROTECT, reason="mine, all mine") for c in request.candidates]
        adj += [pb.Adjustment(uid="unknown-%d" % i, action=pb.PROMOTE, reason="?") for i in range(5000)]
        return pb.RankCandidatesResponse(adjustments=adj)

    def ProposeEvictions(self, request, context):
        return pb.ProposeEvictionsResponse(proposals=[pb.Proposal(uid=u, reason="evict it") for u in self.args.uid])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--socket", required=True)
    p.add_argument("--name", required=True)
    p.add_argument("--mode", required=True, choices=["protect", "hang", "hostile", "huge"])
    p.add_argument("--uid", action="append", default=[])
    p.add_argument("--marker")
    args = p.parse_args()
    try:
        os.unlink(args.socket)
    except FileNotFoundError:
        pass
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4),
                         options=[("grpc.max_send_message_length", 64 << 20)])
    pb_grpc.add_EvictionPluginServicer_to_server(Fixture(args), server)
    server.add_insecure_port("unix:" + args.socket)
    server.start()
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    done.wait()
    server.stop(0)
    try:
        os.unlink(args.socket)
    except FileNotFoundError:
        pass


if __name__ == "__main__":
    main()
