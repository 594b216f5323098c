"""What the Python test harnesses run by CTest share (tests/deploy, tests/metrics).

Import it from a script in a tests/ subfolder with
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import harness
"""

import os
import socket
import sys
import time
import urllib.error
import urllib.request

# Each line a harness prints names it: CTest interleaves nothing, but a log read later does.
NAME = os.path.splitext(os.path.basename(sys.argv[0]))[0]


def log(msg):
    print(f"[{NAME}] {msg}", flush=True)


def skip_or_fail(what, fail_as_root=False):
    """Exit 77 (CTest's SKIP_RETURN_CODE) for something missing, or fail when it is required:
    PRESSURED_REQUIRE_PRIVILEGED=1, or root if `fail_as_root`."""
    if os.environ.get("PRESSURED_REQUIRE_PRIVILEGED") == "1" or (fail_as_root and os.geteuid() == 0):
        print(f"FAIL: required for this test but missing: {what} (PRESSURED_REQUIRE_PRIVILEGED=1 or root)", flush=True)
        sys.exit(1)
    print(f"SKIPPED, missing: {what}", flush=True)
    sys.exit(77)


class Deadline:
    """The whole test's time bound: every wait is cut to what is left of it."""

    def __init__(self, seconds):
        self.end = time.monotonic() + seconds

    def remaining(self, cap):
        """At most `cap` seconds, at least 1 (a last try past the deadline rather than none)."""
        return max(1.0, min(cap, self.end - time.monotonic()))


def wait_for(what, fn, seconds, deadline=None, interval=0.2):
    """Polls `fn` until it returns something true, for at most `seconds` (cut by `deadline`)."""
    end = time.monotonic() + (deadline.remaining(seconds) if deadline else seconds)
    last = None
    while time.monotonic() < end:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url, timeout=3):
    """(status, body); status 0 when nothing answered."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except (urllib.error.URLError, OSError):
        return 0, ""


def memory_mount():
    """(mount, is_v2) of the memory controller, or (None, False) without one."""
    v1 = "/sys/fs/cgroup/memory"
    if os.path.exists(os.path.join(v1, "memory.stat")) or os.path.exists(os.path.join(v1, "memory.usage_in_bytes")):
        return v1, False
    try:
        with open("/sys/fs/cgroup/cgroup.controllers") as f:
            if "memory" in f.read().split():
                return "/sys/fs/cgroup", True
    except OSError:
        pass
    return None, False


def check(failures, ok, what):
    """Logs one named check and collects it in `failures` when it failed."""
    log(("ok:   " if ok else "FAIL: ") + what)
    if not ok:
        failures.append(what)
