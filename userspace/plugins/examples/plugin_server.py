"""What the Python example plugins share: serve one EvictionPlugin servicer on a
Unix socket in pressured's plugin directory until SIGTERM or SIGINT, and take the
socket away at the end (pressured drops a plugin when its socket goes)."""

import os
import signal
import sys
import threading
from concurrent import futures

import grpc


def serve(servicer, add_servicer, socket_path, banner):
    try:
        os.unlink(socket_path)  # left by an earlier run
    except FileNotFoundError:
        pass
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    add_servicer(servicer, server)
    server.add_insecure_port("unix:" + socket_path)
    server.start()
    print("%s serving on %s" % (banner, socket_path), file=sys.stderr)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    done.wait()
    server.stop(0)
    try:
        os.unlink(socket_path)  # pressured drops the plugin when its socket goes
    except FileNotFoundError:
        pass
