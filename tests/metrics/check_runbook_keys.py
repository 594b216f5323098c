#!/usr/bin/env python3
"""Every configuration key docs/runbooks.md names is one pressured takes.

The schema comes from the binary, never from a list kept here: `pressured check-config` with no file
prints the effective configuration in the config-file schema, every section and key. Checked:
  - each code span `section.key` (or `section.key: value`) whose section is a top-level key of that
    schema names a key of that section;
  - each `section.key: value` is a value pressured accepts (`check-config` on that one setting);
  - no code span is a key spelled as in the C++ code (`kubepods_name` for cgroup.kubepodsName,
    `cgroup_driver` for cgroup.driver).
The checks are run against the old misspellings first, so they can fail.
usage: check_runbook_keys.py --pressured BIN --source-dir DIR
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

import yaml

SPAN = re.compile(r"`([^`\n]+)`")
KEY = re.compile(r"^([a-z][A-Za-z0-9]*)\.([A-Za-z][A-Za-z0-9_]*)(?::\s*(\S.*))?$")


def schema(pressured):
    r = subprocess.run([pressured, "check-config"], capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        raise SystemExit(f"FAIL: pressured check-config (no file): exit {r.returncode}: {r.stderr[-400:]}")
    doc = yaml.safe_load(r.stdout)
    return {s: set(v) for s, v in doc.items() if isinstance(v, dict)}


def camel(snake):
    head, *rest = snake.split("_")
    return head + "".join(w.capitalize() for w in rest)


def accepted(pressured, section, key, value):
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(f"{section}:\n  {key}: {value}\n...\n")
        path = f.name
    try:
        r = subprocess.run([pressured, "check-config", "--config", path], capture_output=True, text=True, timeout=30)
        return r.returncode == 0, (r.stdout + r.stderr).strip()[-300:]
    finally:
        os.unlink(path)


def check(text, sections, pressured, where):
    errors, seen = [], 0
    all_keys = {(s, k) for s, keys in sections.items() for k in keys}
    for n, line in enumerate(text.splitlines(), 1):
        for span in SPAN.findall(line):
            m = KEY.match(span.strip())
            if m and m.group(1) in sections:
                seen += 1
                section, key, value = m.groups()
                if key not in sections[section]:
                    near = [k for k in sections[section] if k.lower() == camel(key).lower()]
                    errors.append(f"{where}:{n}: `{span}`: {section} has no key {key!r}"
                                  + (f" (did you mean {section}.{near[0]}?)" if near else ""))
                elif value is not None:
                    ok, out = accepted(pressured, section, key, value)
                    if not ok:
                        errors.append(f"{where}:{n}: `{span}`: check-config refuses it: {out}")
            elif "_" in span and re.fullmatch(r"[a-z][a-z0-9_]*", span.strip()):
                c = camel(span.strip())
                owners = [f"{s}.{k}" for s, k in all_keys if k == c]
                # cgroup_driver: the section's name and the key (cgroup.driver).
                head, _, rest = span.strip().partition("_")
                if head in sections and camel(rest) in sections[head]:
                    owners.append(f"{head}.{camel(rest)}")
                if owners:
                    errors.append(f"{where}:{n}: `{span}` is the code's spelling of {owners[0]}")
    return errors, seen


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pressured", required=True)
    ap.add_argument("--source-dir", required=True)
    args = ap.parse_args()
    sections = schema(args.pressured)
    with open(os.path.join(args.source_dir, "docs", "runbooks.md")) as f:
        text = f.read()
    problems = []
    # Self-test: the spellings docs/runbooks.md once had are caught.
    for bad in ("`events.ring_buffer_bytes`", "`daemon.release_wait_timeout`", "`kubepods_name`", "`cgroup_driver`",
                "`events.bpf: sometimes`"):
        e, _ = check(bad, sections, args.pressured, "self-test")
        if not e:
            problems.append(f"self-test: {bad} was not caught")
    errors, seen = check(text, sections, args.pressured, "docs/runbooks.md")
    problems += errors
    if seen == 0:
        problems.append("docs/runbooks.md names no configuration key: the span pattern is broken")
    for p in problems:
        print("FAIL:", p)
    if problems:
        return 1
    print(f"OK: {seen} configuration keys named in docs/runbooks.md, each one pressured takes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
