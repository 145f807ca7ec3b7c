#!/usr/bin/env bash
# Several GPU measurements in one device call, each in its own time box, most
# important first (a step that overruns is cut and the next one still runs):
#
#   bash benchmarks/gpu_session.sh "NAME SECONDS COMMAND..." ...
#
# Each step's output goes to $OUT/NAME.log (default ./gpu_out), ending with its
# exit status and seconds; the last lines of each are printed. Runs from the
# working tree (PYTHONPATH=.); wheels carried in .whl/ (hmmlearn, simdkalman:
# the device machines have no package index) are installed first.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=. PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH=.:/tmp/site
fi
out="${OUT:-gpu_out}"
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
for step in "$@"; do
  read -r name limit cmd <<<"$step"
  t0=$SECONDS
  timeout "$limit" bash -c "$cmd" > "$out/$name.log" 2>&1
  rc=$?
  echo "rc=$rc seconds=$((SECONDS - t0))" >> "$out/$name.log"
  echo "== $name (rc=$rc, $((SECONDS - t0)) s of $limit)"
  grep -v "Warning\|warn(" "$out/$name.log" | tail -"${TAIL:-12}"
done
