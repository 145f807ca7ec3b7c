#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs R from Debian's packages when
# it is missing, bulkem with its test extras into .venv, then runs ruff, pytest
# (the CUDA engine under numba's simulator unless BULKEM_TEST_REAL_GPU=1) and
# the R package's tests and vignettes.
set -euo pipefail
cd "$(dirname "$0")/.."

r_pkgs="r-base-core r-cran-reticulate r-cran-testthat r-cran-statmod r-cran-knitr r-cran-rmarkdown pandoc"
if ! command -v Rscript >/dev/null 2>&1 || ! command -v pandoc >/dev/null 2>&1 \
   || ! Rscript -e 'for (p in c("reticulate","testthat","statmod","knitr","rmarkdown")) library(p, character.only=TRUE)' >/dev/null 2>&1; then
  echo "== installing R from Debian's packages"
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $r_pkgs >/dev/null
fi

echo "== installing bulkem into .venv"
source scripts/setup_env.sh "test,r,parquet"

# Kernels compile at LLVM's -O1 in tests (NUMBA_OPT=1): half the compile time of the default
# -O3 for the same arithmetic (no fast-math: the same bits; the on-disk cache keys by the
# level, so a later run at -O3 never loads them).  Export NUMBA_OPT=3 to test at -O3.
export NUMBA_OPT="${NUMBA_OPT:-1}"
# The CPU's mixture kernels read the numbers of components and dimensions at run time
# (Tuning.cpu_sizes): the tests fit ~25 sizes, each a kernel of its own with the sizes
# compiled in (the users' default, which tests/test_gaussian.py checks gives the same
# bits).  Export BULKEM_CPU_SIZES=compiled to test the users' default throughout.
export BULKEM_CPU_SIZES="${BULKEM_CPU_SIZES:-run-time}"

echo "== ruff"
.venv/bin/ruff check .

# pytest in two processes (test files shared out whole, so a file's kernels compile once;
# compiled kernels are also shared through numba's disk cache) and the R side beside it:
# compiling is single-threaded, so two processes keep both cores of a CI machine busy.
r_log="$(mktemp)"
r_pid=""
if [ -f scripts/test_r.sh ]; then
  BULKEM_PYTHON="$BULKEM_PYTHON" bash scripts/test_r.sh > "$r_log" 2>&1 &
  r_pid=$!
fi
echo "== pytest (the R package's tests and vignettes run beside it; their log follows)"
py_rc=0
.venv/bin/python -m pytest -q -p no:cacheprovider -n 2 --dist loadfile --durations=15 || py_rc=$?
r_rc=0
if [ -n "$r_pid" ]; then
  wait "$r_pid" || r_rc=$?
  echo "== R package and vignettes (exit status $r_rc)"
  cat "$r_log"
fi
rm -f "$r_log"
[ "$py_rc" -eq 0 ] && [ "$r_rc" -eq 0 ]
