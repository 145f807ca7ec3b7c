#!/usr/bin/env bash
# One call on a GPU machine: the CUDA tests on the real GPU, then the engine
# profile and the issue-4 speed table; logs under $OUT (default ./gpu_out).
#
#   bash benchmarks/gpu_check.sh tests          # CUDA tests + profile_engine
#   bash benchmarks/gpu_check.sh bench [ARGS]   # bench_speed.py ARGS
#
# Runs from the working tree (PYTHONPATH=.), as the device machines have no
# package index; prints each log's last lines.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=. PYTHONUNBUFFERED=1
out="${OUT:-gpu_out}"
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
case "${1:-tests}" in
  tests)
    BULKEM_TEST_REAL_GPU=1 python3 -m pytest -q -m cuda tests -p no:cacheprovider \
      > "$out/cuda_tests.log" 2>&1
    echo "rc=$?" >> "$out/cuda_tests.log"
    tail -5 "$out/cuda_tests.log"
    python3 benchmarks/profile_engine.py > "$out/profile_engine.log" 2>&1
    cat "$out/profile_engine.log"
    ;;
  bench)
    shift
    python3 benchmarks/bench_speed.py "$@" > "$out/bench_speed.log" 2>&1
    tail -60 "$out/bench_speed.log"
    ;;
esac
