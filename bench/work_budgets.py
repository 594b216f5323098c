#!/usr/bin/env python3
"""Counted work of pressured's hot paths against committed budgets.

Runs bench/work_counts.cpp (the `work_counts` binary of the Release tree) for
each scenario below on a fake node of fixed pod fixtures, and measures, per
decision, per idle second, per walk of the OOM kill counters or per refresh of an
unchanged pod source:

  instructions  userspace instructions executed (valgrind --tool=callgrind, Ir)
  allocations   heap allocations (malloc, calloc, realloc, aligned; counted
                by work_counts itself)
  syscalls      system calls of every thread (strace -f)
  file_reads    read, pread64, readv, preadv(2) and getdents64 calls on files
                and directories (strace -y names each fd)

and, in the BPF object every start loads (bpf/pressured_events.bpf.c, compiled),
what libbpf and the verifier work through before the daemon runs:

  programs          BPF programs (global functions in program sections)
  instructions      BPF instructions of every program and subprogram
  core_relocations  CO-RE relocation records (.BTF.ext)
  core_types        distinct local types those records name: libbpf 1.1 walks
                    every type of the kernel's BTF once for each (~1 ms a type)

None of these depends on the machine's load, so they can gate a change where
wall-clock time cannot. Each is held to its line in the budgets file
(bench/work_budgets.txt: `<scenario>.<pods>.<quantity> <budget> <commit>`, and
`start.bpf.<quantity>` for the object); a
count above its budget by more than --margin (10 %) fails. The table
(measured, budget, ratio) is always printed, so a reviewer sees what a change
costs. A count well under its budget (below 1 - margin) is pointed out: lower
the budget in the change that earns it.

  bench/work_budgets.py --work-counts build/release/bench/work_counts            # check
  bench/work_budgets.py --work-counts build/release/bench/work_counts --update   # rewrite the budgets

Needs valgrind and strace (scripts/setup installs both). Unprivileged.
"""
import argparse
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time

# (scenario, pods, iterations): decisions are 20 in a row after a warm one;
# an idle run is one events.fullObservationInterval (10 safety-net ticks, one
# of them the full observation), divided by 10 for one idle second; a
# oom-walk run is 2 walks at 110 pods, 1 at 1000 (each ~15 syscalls a memcg, slow under strace), per walk; a
# pods-refresh run is 10 refreshes of an unchanged pod file (the source's
# thread does one every pods.refreshInterval), divided by 10 for one.
SCENARIOS = [
    ("decision-quiet", 110, 20),
    ("decision-quiet", 1000, 20),
    ("decision-pressure", 110, 20),
    ("decision-pressure", 1000, 20),
    ("idle", 110, 10),
    ("idle", 1000, 10),
    ("oom-walk", 110, 2),
    ("oom-walk", 1000, 1),
    ("pods-refresh", 110, 10),
    ("pods-refresh", 1000, 10),
]
UNITS = {"idle": "seconds", "oom-walk": "walks", "pods-refresh": "refreshes"}
QUANTITIES = ["instructions", "allocations", "syscalls", "file_reads"]
READS = {"read", "pread64", "readv", "preadv", "preadv2", "getdents64"}
BEGIN = '"/pressured-work-counts/begin"'
END = '"/pressured-work-counts/end"'


OBJECT_QUANTITIES = ["programs", "instructions", "core_relocations", "core_types"]
OBJECT_KEY = "start.bpf"
# .BTF.ext: the CO-RE record kind that names no kernel type (bpf_core_type_id_local), so libbpf searches nothing for it.
BPF_CORE_TYPE_ID_LOCAL = 6
SHF_EXECINSTR = 0x4


def key(scenario, pods, quantity):
    return f"{scenario}.{pods}.{quantity}"


def budget_keys():
    """Every count the check holds to a budget, in the table's order."""
    return [key(s, p, q) for s, p, _ in SCENARIOS for q in QUANTITIES] + [f"{OBJECT_KEY}.{q}" for q in OBJECT_QUANTITIES]


def elf_sections(data, path):
    """The section headers of a little-endian ELF64 file (what clang -target bpf writes), by name."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise RuntimeError(f"{path} is not a little-endian ELF64 object")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    heads = []
    for i in range(shnum):
        name, _, flags, _, off, size, _, _, _, _ = struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)
        heads.append({"name_off": name, "flags": flags, "off": off, "size": size, "index": i})
    names = heads[shstrndx]["off"]
    for h in heads:
        start = names + h["name_off"]
        h["name"] = data[start:data.index(b"\0", start)].decode()
    return heads


def bpf_object_counts(path):
    """Counts, in a compiled BPF object, what a start makes libbpf and the verifier go through
    (see OBJECT_QUANTITIES). Read from the ELF itself: no BPF, no root."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise RuntimeError(f"cannot read the BPF object {path}: {e.strerror} (ninja -C build/release pressured builds it)")
    try:
        return object_counts(data, path)
    except (struct.error, IndexError, ValueError, UnicodeDecodeError) as e:
        raise RuntimeError(f"{path}: not a well-formed BPF object ({e})")


def object_counts(data, path):
    heads = elf_sections(data, path)
    by_name = {h["name"]: h for h in heads}
    code = {h["index"] for h in heads if h["flags"] & SHF_EXECINSTR and h["size"]}
    instructions = sum(heads[i]["size"] // 8 for i in code)
    programs = 0
    symtab = by_name.get(".symtab")
    if symtab is None:
        raise RuntimeError(f"{path} has no .symtab")
    for off in range(symtab["off"], symtab["off"] + symtab["size"], 24):
        _, info, _, shndx, _, _ = struct.unpack_from("<IBBHQQ", data, off)
        # A program is a global function in a program section; .text holds the subprograms.
        if info & 0xf == 2 and info >> 4 == 1 and shndx in code and heads[shndx]["name"] != ".text":
            programs += 1
    ext = by_name.get(".BTF.ext")
    if ext is None:
        raise RuntimeError(f"{path} has no .BTF.ext (built without -g?): its CO-RE records cannot be counted")
    e = data[ext["off"]:ext["off"] + ext["size"]]
    magic, _, _, hdr_len = struct.unpack_from("<HBBI", e, 0)
    if magic != 0xeB9F or hdr_len < 32:
        raise RuntimeError(f"{path}: .BTF.ext has magic {magic:#x} and a {hdr_len}-byte header: not one with CO-RE records")
    core_off, core_len = struct.unpack_from("<II", e, 24)
    relocations, types = 0, set()
    if core_len:
        pos = hdr_len + core_off
        rec_size, = struct.unpack_from("<I", e, pos)
        pos, end = pos + 4, hdr_len + core_off + core_len
        while pos < end:
            _, count = struct.unpack_from("<II", e, pos)
            pos += 8
            for _ in range(count):
                _, type_id, _, kind = struct.unpack_from("<IIII", e, pos)
                pos += rec_size
                relocations += 1
                if kind != BPF_CORE_TYPE_ID_LOCAL:
                    types.add(type_id)
    return {"programs": programs, "instructions": instructions, "core_relocations": relocations,
            "core_types": len(types)}


def fake_node_dir():
    """Where work_counts makes its fake node: tmpfs when there is one (the
    ~10 000 files of 1000 pods are written in a second there; a disk busy with
    other builds takes half a minute). The counts are the same either way."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else tempfile.gettempdir()


def run(argv, **kw):
    env = dict(os.environ, TMPDIR=fake_node_dir())
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, **kw)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {r.returncode}:\n{r.stdout}{r.stderr}")
    return r.stdout


def allocations_of(stdout):
    m = re.search(r"allocations=(\d+)", stdout)
    if not m:
        raise RuntimeError(f"work_counts printed no allocation count: {stdout!r}")
    return int(m.group(1))


def instructions(binary, scenario, pods, iterations, tmp):
    out = os.path.join(tmp, "callgrind.out")
    stdout = run(["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
                  binary, "--scenario", scenario, "--pods", str(pods), "--iterations", str(iterations)])
    total = None
    with open(out) as f:
        for line in f:
            if line.startswith("summary:") or line.startswith("totals:"):
                total = int(line.split()[1])
    if total is None:
        raise RuntimeError(f"no instruction total in {out}")
    return total, allocations_of(stdout)


def tracer_of(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("TracerPid:"):
                return int(line.split()[1])
    return 0


def wait_for(p, word, scenario, pods):
    """Reads work_counts' stdout up to the line `word` (its log lines come first)."""
    for line in p.stdout:
        if line.strip() == word:
            return
    raise RuntimeError(f"work_counts {scenario} {pods}: exited {p.wait()} before '{word}'")


def syscalls(binary, scenario, pods, iterations, tmp):
    """strace attached for the measured section only (work_counts --pause)."""
    out = os.path.join(tmp, "strace.out")
    env = dict(os.environ, TMPDIR=fake_node_dir())
    p = subprocess.Popen([binary, "--scenario", scenario, "--pods", str(pods), "--iterations", str(iterations),
                          "--pause"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    tracer = None
    try:
        wait_for(p, "ready", scenario, pods)
        tracer = subprocess.Popen(["strace", "-f", "-qq", "-y", "-o", out, "-p", str(p.pid)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 30
        while tracer_of(p.pid) == 0:
            if tracer.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"strace could not attach to work_counts: {tracer.stderr.read()}")
            time.sleep(0.01)
        p.stdin.write("go\n")
        p.stdin.flush()
        wait_for(p, "measured", scenario, pods)
        tracer.terminate()  # detaches: the clean-up is not traced
        tracer.wait(30)
        tracer = None
        p.stdin.write("go\n")
        p.stdin.flush()
        stdout = p.stdout.read()
        if p.wait() != 0:
            raise RuntimeError(f"work_counts {scenario} {pods} exited {p.returncode}")
    finally:
        if tracer is not None and tracer.poll() is None:
            tracer.kill()
            tracer.wait()
        if p.poll() is None:
            p.kill()
            p.wait()
    calls = reads = 0
    inside = False
    with open(out) as f:
        for line in f:
            # "<pid>  name(args) = ret"; a call another thread interrupted is
            # split into "<unfinished ...>" and "<... name resumed>": counted once.
            body = line.split(None, 1)[1] if line[:1].isdigit() else line
            if body.startswith("access(" + BEGIN):
                inside = True
                continue
            if body.startswith("access(" + END):
                inside = False
                continue
            if not inside or body.startswith(("<...", "---", "+++")):
                continue
            m = re.match(r"([a-z0-9_]+)\((\d+)<([^>]*)>", body)
            name = body.split("(", 1)[0]
            calls += 1
            if name in READS and m and m.group(3).startswith("/"):
                reads += 1
    return calls, reads, allocations_of(stdout)


def measure(binary):
    results = {}
    with tempfile.TemporaryDirectory(prefix="pressured-work-") as tmp:
        for scenario, pods, iterations in SCENARIOS:
            ir, alloc_cg = instructions(binary, scenario, pods, iterations, tmp)
            calls, reads, alloc = syscalls(binary, scenario, pods, iterations, tmp)
            if alloc != alloc_cg:
                raise RuntimeError(f"{scenario} {pods}: allocations differ between two runs ({alloc} vs {alloc_cg}): "
                                   "the scenario is not deterministic")
            per = float(iterations)
            results[key(scenario, pods, "instructions")] = ir / per
            results[key(scenario, pods, "allocations")] = alloc / per
            results[key(scenario, pods, "syscalls")] = calls / per
            results[key(scenario, pods, "file_reads")] = reads / per
            print(f"  measured {scenario} at {pods} pods ({iterations} {UNITS.get(scenario, 'decisions')})",
                  flush=True)
    return results


def read_budgets(path):
    budgets = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            if len(parts) != 3:
                raise RuntimeError(f"{path}:{n}: expected '<scenario>.<pods>.<quantity> <budget> <commit>', got {line!r}")
            try:
                budgets[parts[0]] = (float(parts[1]), parts[2])
            except ValueError:
                raise RuntimeError(f"{path}:{n}: budget {parts[1]!r} is not a number")
    return budgets


def commit_of(repo):
    try:
        head = subprocess.run(["git", "-C", repo, "rev-parse", "--short", "HEAD"], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", repo, "status", "--porcelain", "--untracked-files=no"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout.strip()
        return head + ("+changes" if dirty else "")
    except (subprocess.CalledProcessError, FileNotFoundError):
        return "unknown"


def write_budgets(path, results, commit):
    with open(path, "w") as f:
        f.write("# Work budgets: bench/work_budgets.py checks each count against its line (fails above +10 %).\n")
        f.write("# Per decision (decision-*), per idle second (idle), per OOM-counter walk (oom-walk) or per "
                "refresh of an unchanged pod source (pods-refresh);\n# `<scenario>.<pods>.<quantity> <budget> <commit measured>`.\n")
        f.write("# Rewrite with: bench/work_budgets.py --work-counts build/release/bench/work_counts --update\n")
        for scenario, pods, _ in SCENARIOS:
            for q in QUANTITIES:
                k = key(scenario, pods, q)
                v = results[k]
                f.write(f"{k} {v:.0f} {commit}\n" if q == "instructions" else f"{k} {v:.1f} {commit}\n")
        f.write("# What every start loads: the BPF object's programs, instructions and CO-RE records.\n")
        for q in OBJECT_QUANTITIES:
            f.write(f"{OBJECT_KEY}.{q} {results[f'{OBJECT_KEY}.{q}']} {commit}\n")


def compare(rows, results, budgets, margin):
    """Each measured count against its budget: (over by more than margin %, under by more than
    margin %, without a budget, the table's lines)."""
    limit = 1 + margin / 100
    failed, lower, missing = [], [], []
    table = ["| quantity (per decision / idle second / walk / refresh; per start) | measured | budget | ratio | budget's commit |",
             "|---|---|---|---|---|"]
    for k in rows:
        v = results[k]
        if k not in budgets:
            missing.append(k)
            table.append(f"| {k} | {v:.1f} | (none) | | |")
            continue
        b, commit = budgets[k]
        ratio = v / b if b > 0 else (1.0 if v == 0 else float("inf"))
        mark = ""
        if ratio > limit:
            failed.append(k)
            mark = " **over**"
        elif ratio < 1 / limit:
            lower.append(k)
            mark = " (under: lower the budget)"
        table.append(f"| {k} | {v:.1f} | {b:g} | {ratio:.3f}{mark} | {commit} |")
    return failed, lower, missing, table


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work-counts", required=True, help="the work_counts binary (Release tree: bench/work_counts)")
    ap.add_argument("--budgets", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "work_budgets.txt"))
    ap.add_argument("--margin", type=float, default=10.0, help="percent a count may exceed its budget (default 10)")
    ap.add_argument("--update", action="store_true", help="rewrite the budgets file with the counts measured now")
    ap.add_argument("--bpf-object", help="the compiled BPF object every start loads (default: the work_counts "
                    "binary's tree, bpf/pressured_events.bpf.o)")
    a = ap.parse_args()
    if a.bpf_object is None:
        tree = os.path.dirname(os.path.dirname(os.path.abspath(a.work_counts)))
        a.bpf_object = os.path.join(tree, "bpf", "pressured_events.bpf.o")
    for tool in ("valgrind", "strace"):
        if shutil.which(tool) is None:
            print(f"work_budgets: {tool} is not installed (Debian package '{tool}'; scripts/setup installs it)",
                  file=sys.stderr)
            return 1
    if not os.access(a.work_counts, os.X_OK):
        print(f"work_budgets: {a.work_counts} is not an executable (ninja -C build/release work_counts)", file=sys.stderr)
        return 1
    start = time.monotonic()
    print(f"work budgets: {len(SCENARIOS)} scenarios, margin {a.margin:g} %, budgets {a.budgets}", flush=True)
    results = {f"{OBJECT_KEY}.{q}": v for q, v in bpf_object_counts(a.bpf_object).items()}
    results.update(measure(a.work_counts))
    if a.update:
        commit = commit_of(os.path.dirname(os.path.abspath(a.budgets)))
        write_budgets(a.budgets, results, commit)
        print(f"wrote {a.budgets} (commit {commit}) in {time.monotonic() - start:.0f} s")
        budgets = read_budgets(a.budgets)
    else:
        budgets = read_budgets(a.budgets)
    failed, lower, missing, table = compare(budget_keys(), results, budgets, a.margin)
    print()
    print("\n".join(table))
    print()
    print(f"work budgets: {time.monotonic() - start:.0f} s")
    if lower:
        print(f"{len(lower)} counts are more than {a.margin:g} % under their budgets: lower them with --update "
              "in the change that earns it")
    if missing:
        print(f"FAILED: no budget for {', '.join(missing)} (add them with --update)")
    if failed:
        print(f"FAILED: {len(failed)} counts over budget by more than {a.margin:g} %: {', '.join(failed)}")
    return 1 if failed or missing else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except RuntimeError as e:
        print(f"work_budgets: {e}", file=sys.stderr)
        sys.exit(1)
