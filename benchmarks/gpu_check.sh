#!/usr/bin/env bash
# One call on a GPU machine: the CUDA tests on the real GPU, then the engine
# profile and the issue-4 speed table; logs under $OUT (default ./gpu_out).
#
#   bash benchmarks/gpu_check.sh tests          # CUDA tests + profile_engine
#   bash benchmarks/gpu_check.sh ptests [JOBS]  # CUDA tests only, the test files in JOBS
#                                  # (default 3) pytest processes at once (compiling
#                                  # is CPU-bound); one log per process, a total
#   bash benchmarks/gpu_check.sh bench [ARGS]   # bench_speed.py ARGS
#   bash benchmarks/gpu_check.sh compare DIR [ARGS]   # bench_speed.py ARGS in DIR (an older
#                                  # tree, carried) and here, alternately: before/after a change
#   bash benchmarks/gpu_check.sh hmm [ARGS]     # bench_hmm.py ARGS
#   bash benchmarks/gpu_check.sh tmap [ARGS]    # bench_tmap.py ARGS (TMAP Table 1 and bulk)
#   bash benchmarks/gpu_check.sh kernel "" "NAME=V NAME2=V2" ...
#                                  # kernel-only times (profile_engine.py), one
#                                  # line per variant: each argument lists the
#                                  # Tuning fields of one variant (profile_engine.py
#                                  # --set: field names, or the old upper-case
#                                  # config names; "": defaults)
#
# Runs from the working tree (PYTHONPATH=.), as the device machines have no
# package index; wheels carried in .whl/ (hmmlearn for the HMM baseline) are
# installed first; prints each log's last lines.
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
case "${1:-tests}" in
  tests)
    BULKEM_TEST_REAL_GPU=1 timeout "${TESTS_TIMEOUT:-600}" python3 -m pytest -q -m cuda tests \
      -p no:cacheprovider --durations=5 > "$out/cuda_tests.log" 2>&1
    echo "rc=$?" >> "$out/cuda_tests.log"
    grep -E "passed|failed|error|rc=" "$out/cuda_tests.log" | tail -5
    [ -n "${SKIP_PROFILE:-}" ] || { python3 benchmarks/profile_engine.py \
      > "$out/profile_engine.log" 2>&1; cat "$out/profile_engine.log"; }
    ;;
  ptests)
    jobs="${2:-3}"
    mapfile -t files < <(BULKEM_TEST_REAL_GPU=1 python3 -m pytest --collect-only -q -m cuda \
      -p no:cacheprovider tests 2>/dev/null | grep "::" | cut -d: -f1 | sort -u)
    for ((j = 0; j < jobs; j++)); do
      group=()
      for ((i = j; i < ${#files[@]}; i += jobs)); do group+=("${files[i]}"); done
      BULKEM_TEST_REAL_GPU=1 timeout "${TESTS_TIMEOUT:-600}" python3 -m pytest -q -m cuda \
        -p no:cacheprovider -rf "${group[@]}" > "$out/cuda_tests_$j.log" 2>&1 &
    done
    wait
    grep -h -E "^FAILED|^ERROR|passed|failed" "$out"/cuda_tests_*.log
    ;;
  kernel)
    shift
    for variant in "$@"; do
      sets=()
      for item in $variant; do sets+=(--set "$item"); done
      echo "== ${variant:-defaults}: $(timeout 150 python3 benchmarks/profile_engine.py "${sets[@]}" \
        2>&1 | tee -a "$out/kernel_variants.log" | grep -o 'kernel [0-9.]* ms\|kernel [0-9.]* (' \
        | tr -d '(' | paste -sd' ')"
    done
    ;;
  compare)
    before="$2"; shift 2
    for round in 1 2; do
      (cd "$before" && PYTHONPATH=".:/tmp/site" timeout 120 python3 benchmarks/bench_speed.py "$@") \
        > "$out/speed_before_$round.log" 2>&1
      timeout 120 python3 benchmarks/bench_speed.py "$@" > "$out/speed_after_$round.log" 2>&1
      [ "$round" = 1 ] && [ -n "${ONE_ROUND:-}" ] && break
    done
    grep -H "^cuda f\|^cpu" "$out"/speed_*.log
    ;;
  hmm)
    shift
    python3 benchmarks/bench_hmm.py "$@" > "$out/bench_hmm.log" 2>&1
    tail -20 "$out/bench_hmm.log"
    ;;
  tmap)
    shift
    python3 benchmarks/bench_tmap.py --out "$out" "$@" > "$out/bench_tmap.log" 2>&1
    echo "rc=$?" >> "$out/bench_tmap.log"
    tail -45 "$out/bench_tmap.log"
    ;;
  bench)
    shift
    python3 benchmarks/bench_speed.py "$@" > "$out/bench_speed.log" 2>&1
    tail -60 "$out/bench_speed.log"
    ;;
esac
