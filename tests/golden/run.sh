#!/usr/bin/env bash
# Golden timelines for `pressured simulate`.
#   run.sh PRESSURED_BINARY [NAME...]
# For each NAME (default: every *.jsonl here) it runs
#   pressured simulate --config NAME.yaml [$(cat NAME.args)] [--engine-only] --input NAME.jsonl
# Every timeline states its mode on its first line: "# mode: policy" (the
# whole eviction policy, as the daemon runs it) or "# mode: engine-only".
# and diffs stdout against NAME.expected. When NAME.error exists the command
# must fail (non-zero exit) and its stderr must contain that file's first line.
# Expected outputs were derived by hand from the rules in docs/engine.md; the
# reasoning is in the comments of each .jsonl file.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:?usage: run.sh PRESSURED_BINARY [NAME...]}
shift
names=("$@")
if [[ ${#names[@]} -eq 0 ]]; then
  for f in "${here}"/*.jsonl; do names+=("$(basename "${f}" .jsonl)"); done
fi
tmp=$(mktemp -d)
trap 'rm -rf "${tmp}"' EXIT
failed=0
for name in "${names[@]}"; do
  args=()
  if [[ -f "${here}/${name}.args" ]]; then read -r -a args <"${here}/${name}.args"; fi
  mode=$(head -n1 "${here}/${name}.jsonl")
  case "${mode}" in
    "# mode: policy"*) ;;
    "# mode: engine-only"*) args+=(--engine-only) ;;
    *) echo "FAIL ${name}: the first line must be '# mode: policy' or '# mode: engine-only'"; failed=$((failed + 1)); continue ;;
  esac
  "${bin}" simulate --config "${here}/${name}.yaml" "${args[@]}" --input "${here}/${name}.jsonl" \
    >"${tmp}/${name}.out" 2>"${tmp}/${name}.err"
  rc=$?
  ok=1
  if [[ -f "${here}/${name}.error" ]]; then
    want=$(head -n1 "${here}/${name}.error")
    if [[ ${rc} -eq 0 ]]; then
      echo "FAIL ${name}: expected a non-zero exit"; ok=0
    elif ! grep -qF -- "${want}" "${tmp}/${name}.err"; then
      echo "FAIL ${name}: stderr lacks '${want}':"; cat "${tmp}/${name}.err"; ok=0
    fi
  elif [[ ${rc} -ne 0 ]]; then
    echo "FAIL ${name}: exit ${rc}"; cat "${tmp}/${name}.err"; ok=0
  fi
  if ! diff -u "${here}/${name}.expected" "${tmp}/${name}.out" >"${tmp}/${name}.diff"; then
    echo "FAIL ${name}: output differs (- expected, + actual):"; cat "${tmp}/${name}.diff"; ok=0
  fi
  if [[ ${ok} -eq 1 ]]; then echo "ok   ${name}"; else failed=$((failed + 1)); fi
done
if [[ ${failed} -gt 0 ]]; then
  echo "${failed} golden timeline(s) failed"
  exit 1
fi
