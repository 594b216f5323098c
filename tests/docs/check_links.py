#!/usr/bin/env python3
"""Every link in the manual resolves: README.md, docs/ (evidence included) and the other markdown files of
the tree.

Checked, in each markdown file outside build trees and hidden folders:
  - a relative link `[text](path)` or `[text](path#anchor)` names a file or folder that exists;
  - its #anchor (or a bare `(#anchor)`) is a heading of the target, slugged as GitHub does;
  - every dated run in docs/evidence/ is named <YYYY-MM-DD>-<topic>.md and linked from a page outside
    docs/evidence/ (the page it supports);
  - a quoted reference to a section, `docs/engine.md, "Relief before eviction"` (also `engine.md "..."` and
    `[engine.md](engine.md), "..."`), names a heading of that page, or a paragraph led by a bold phrase
    (`**Escalation.** ...`), that starts with the quoted words.
External links (http:, https:, mailto:) are not fetched. Code blocks and inline code are skipped.

  check_links.py [--source-dir DIR]      exit 0 when all resolve, 1 with one line per broken link
  check_links.py --self-test             shows that a broken link, anchor or section reference fails"""
import argparse
import bisect
import os
import re
import sys
import tempfile

SKIP_DIRS = {"build", "node_modules", "third_party"}
LINK = re.compile(r"(?<!!)\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")
# `docs/x.md, "Title"`, `x.md "Title"`, `[x](x.md), "Title"`, `x.md ("Title"`.
SECTION_REF = re.compile(r"([\w./-]+\.md)(?:#[\w-]+)?\)?,? \(?\"([^\"]{1,120})\"")


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation but - and _ dropped, spaces to dashes."""
    text = re.sub(r"`", "", heading.strip()).lower()
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link in a heading keeps its text
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def strip_code(text):
    """The text with fenced blocks blanked (line count kept) and inline code removed."""
    out, fence = [], None
    for line in text.split("\n"):
        m = re.match(r"\s*(`{3,}|~{3,})", line)
        if fence is None and m:
            fence = m.group(1)[0] * 3
            out.append("")
        elif fence is not None:
            if line.strip().startswith(fence):
                fence = None
            out.append("")
        else:
            out.append(re.sub(r"`[^`\n]*`", "``", line))
    return out


def headings(path, cache={}):
    """(anchors, titles) of a markdown file: anchors with GitHub's -1, -2 for repeats; titles as written."""
    if path not in cache:
        anchors, titles, seen = set(), [], {}
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
        fence = None
        for line in lines:
            m = re.match(r"\s*(`{3,}|~{3,})", line)
            if m:
                fence = None if fence and line.strip().startswith(fence) else (fence or m.group(1)[0] * 3)
                continue
            if fence:
                continue
            bold = re.match(r"\*\*([^*]+?)[.:]?\*\*", line)
            if bold:  # a paragraph led by a bold phrase is a named part too ("**Escalation.** While ...")
                titles.append(re.sub(r"`", "", bold.group(1)).strip())
                continue
            h = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
            if not h:
                continue
            s = slug(h.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            anchors.add(s if n == 0 else f"{s}-{n}")
            titles.append(re.sub(r"`", "", h.group(1)).strip())
        for a in re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", "\n".join(lines)):
            anchors.add(a)
        cache[path] = (anchors, titles)
    return cache[path]


def markdown_files(root):
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if not x.startswith(".") and x not in SKIP_DIRS
                         and not x.startswith("build"))
        for f in sorted(files):
            if f.endswith(".md"):
                yield os.path.join(d, f)


def resolve_ref(root, here, name):
    """The file a section reference names: relative to the page, else to the source root."""
    for base in (os.path.dirname(here), root):
        p = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(p):
            return p
    return None


def check_file(root, path, targets=None):
    errors = []
    rel = os.path.relpath(path, root)
    with open(path, encoding="utf-8") as f:
        lines = strip_code(f.read())
    for lineno, line in enumerate(lines, 1):
        where = f"{rel}:{lineno}"
        for target in LINK.findall(line) + IMAGE.findall(line):
            target = target.strip("<>")
            if re.match(r"[a-z][a-z0-9+.-]*:", target):
                continue
            file_part, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            if targets is not None:
                targets.setdefault(dest, set()).add(path)
            if not os.path.exists(dest):
                errors.append(f"{where}: link {target!r}: no {os.path.relpath(dest, root)}")
                continue
            if anchor:
                if os.path.isdir(dest) or not dest.endswith(".md"):
                    errors.append(f"{where}: link {target!r}: an anchor into a file that is not markdown")
                elif anchor not in headings(dest)[0]:
                    errors.append(f"{where}: link {target!r}: {os.path.relpath(dest, root)} has no heading "
                                  f"#{anchor}")
    # A section reference may wrap: scan the text with its line breaks as spaces.
    joined = " ".join(lines)
    starts, pos = [], 0
    for l in lines:
        starts.append(pos)
        pos += len(l) + 1
    for m in SECTION_REF.finditer(joined):
        name, title = m.group(1), m.group(2)
        where = f"{rel}:{bisect.bisect_right(starts, m.start())}"
        title = re.sub(r"\s+", " ", title)
        dest = resolve_ref(root, path, name)
        if dest is None:
            errors.append(f"{where}: section reference {name}, \"{title}\": no such file")
            continue
        want = title.replace("`", "").strip().lower()
        if not any(t.lower().startswith(want) for t in headings(dest)[1]):
            errors.append(f"{where}: section reference {name}, \"{title}\": "
                          f"{os.path.relpath(dest, root)} has no heading starting so")
    return errors


def check(root):
    errors, targets = [], {}
    for path in markdown_files(root):
        errors += check_file(root, path, targets)
    # Every dated run is linked from the page it supports (outside docs/evidence/), or it is a notebook
    # page no reader reaches.
    evidence = os.path.join(root, "docs", "evidence")
    if os.path.isdir(evidence):
        for f in sorted(os.listdir(evidence)):
            p = os.path.join(evidence, f)
            if not f.endswith(".md") or f == "README.md":
                continue
            if not re.match(r"\d{4}-\d{2}-\d{2}-[\w.-]+\.md$", f):
                errors.append(f"docs/evidence/{f}: not named <YYYY-MM-DD>-<topic>.md")
            linkers = targets.get(p, set())
            if not any(os.path.dirname(x) != evidence for x in linkers):
                errors.append(f"docs/evidence/{f}: no page outside docs/evidence/ links it")
    return errors


def self_test():
    """A tree with one good and three broken references must give exactly the three errors."""
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "docs"))
        with open(os.path.join(root, "docs", "a.md"), "w") as f:
            f.write("# Page A\n\n## The `eviction` record (v1)\n\n```\n[not a link](nowhere.md)\n```\n")
        os.makedirs(os.path.join(root, "docs", "evidence"))
        with open(os.path.join(root, "docs", "evidence", "2026-01-02-run.md"), "w") as f:
            f.write("# A run\n\n[back](../a.md)\n")
        with open(os.path.join(root, "README.md"), "w") as f:
            f.write("[ok](docs/a.md#the-eviction-record-v1) and docs/a.md, \"The eviction record\".\n"
                    "[gone](docs/b.md) [bad anchor](docs/a.md#the-record) docs/a.md, \"No such part\"\n"
                    "[web](https://kubernetes.io/docs/) [self](#page-b)\n\n# Page B\n")
        errors = check(root)
    expected = ["no docs/b.md", "has no heading #the-record", "\"No such part\"",
                "2026-01-02-run.md: no page outside docs/evidence/ links it"]
    missing = [e for e in expected if not any(e in x for x in errors)]
    if missing or len(errors) != len(expected):
        print("self-test FAILED: expected errors", expected, "got", errors)
        return 1
    print(f"self-test: {len(expected)} broken references found, the good ones passed")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source-dir", default=os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    errors = check(os.path.abspath(args.source_dir))
    for e in errors:
        print(e)
    n = sum(1 for _ in markdown_files(args.source_dir))
    print(f"{len(errors)} broken link(s) in {n} markdown files" if errors else f"all links resolve in {n} markdown files")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
