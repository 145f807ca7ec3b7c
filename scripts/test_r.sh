#!/usr/bin/env bash
# The R side, for real: install the R package, run its testthat tests against
# the Python in $BULKEM_PYTHON, build and check the package (R CMD check, every
# example run), render every vignette, check the figures.
#
#   BULKEM_PYTHON=.venv/bin/python bash scripts/test_r.sh
#
# Environment:
#   BULKEM_PYTHON        Python where bulkem (and rpy2) are installed; default python3
#   BULKEM_R_LIB         writable R library for the package; default $OUT/rlib
#   BULKEM_VIGNETTE_OUT  where rendered vignettes and PNG figures go;
#                        default vignettes/output (git-ignored)
#   BULKEM_NO_PANDOC     set: run the R Markdown code by knitr::purl + Rscript even with pandoc
#   BULKEM_NO_INSTALL_TEST  set: skip installing the repository with install_bulkem()
#                        into a temporary virtualenv (it needs the package index)
#
# Fails when R is missing, when `import bulkem` fails in $BULKEM_PYTHON, when
# any R test fails or is skipped (the Python side is there, so nothing may be
# skipped), when `R CMD check` of the built tarball reports an error or a
# warning or its examples did not run their Python part, when a vignette
# fails, or when a figure is missing.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

say() { printf '\n== %s\n' "$*"; }
die() { printf 'test_r.sh: %s\n' "$*" >&2; exit 1; }

command -v Rscript >/dev/null || die "Rscript not found; install R (apt-get install r-base-core r-cran-reticulate r-cran-testthat r-cran-statmod r-cran-knitr r-cran-rmarkdown)."

PY="${BULKEM_PYTHON:-python3}"
command -v "$PY" >/dev/null || die "BULKEM_PYTHON=$PY is not a command."
# The real interpreter path (a venv's python, not a pyenv shim), for reticulate.
PY_EXE="$("$PY" -c 'import sys; print(sys.executable)')"

if ! "$PY_EXE" -c 'import bulkem; bulkem.fit' 2>/dev/null; then
    if PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" "$PY_EXE" -c 'import bulkem; bulkem.fit' 2>/dev/null; then
        echo "note: bulkem is not installed in $PY_EXE; using the source tree through PYTHONPATH"
        export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
    else
        "$PY_EXE" -c 'import bulkem; bulkem.fit' || true
        die "\`import bulkem\` fails in $PY_EXE; install it (pip install -e .) or set BULKEM_PYTHON."
    fi
fi

OUT="${BULKEM_VIGNETTE_OUT:-$ROOT/vignettes/output}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
R_LIB="${BULKEM_R_LIB:-$OUT/rlib}"
mkdir -p "$R_LIB"
R_LIB="$(cd "$R_LIB" && pwd)"

export RETICULATE_PYTHON="$PY_EXE"
export R_LIBS="$R_LIB${R_LIBS:+:$R_LIBS}"
export BULKEM_VIGNETTE_OUT="$OUT"
export BULKEM_REQUIRE_PYTHON=1 # a missing Python side fails the R tests, never skips them

say "R packages needed (see DESCRIPTION)"
Rscript -e '
need <- c("reticulate", "testthat", "statmod", "knitr", "rmarkdown")
have <- vapply(need, requireNamespace, logical(1), quietly = TRUE)
for (p in need) cat(sprintf("  %-11s %s\n", p,
  if (have[[p]]) as.character(utils::packageVersion(p)) else "MISSING"))
if (!all(have)) {
  cat("missing R packages:", need[!have], "\n")
  quit(status = 1)
}' || die "install the missing R packages (Debian: r-cran-<name>)."

say "R CMD INSTALL r_wrapper -> $R_LIB"
R CMD INSTALL --no-multiarch -l "$R_LIB" r_wrapper >"$OUT/r_install.log" 2>&1 \
    || { cat "$OUT/r_install.log"; die "R CMD INSTALL r_wrapper failed."; }
tail -n 1 "$OUT/r_install.log"

say "testthat (Python: $PY_EXE)"
Rscript -e '
library(testthat)
ok <- bulkem::bulkem_available()
cat(attr(ok, "reason"), "\n")
if (!ok) quit(status = 1)
res <- test_dir("r_wrapper/tests/testthat", package = "bulkem",
                load_package = "installed", reporter = "summary",
                stop_on_failure = FALSE)
df <- as.data.frame(res)
failed <- sum(df$failed > 0 | df$error)
skipped <- sum(df$skipped)
cat(sprintf("\nR tests: %d run, %d passed, %d failed, %d skipped; %d expectations\n",
            nrow(df), nrow(df) - failed - skipped, failed, skipped, sum(df$nb)))
if (skipped > 0) {
  cat("skipped (not allowed here, the Python side is present):\n")
  print(df[df$skipped, c("file", "test")], row.names = FALSE)
}
if (nrow(df) == 0 || failed > 0 || skipped > 0) quit(status = 1)
' || die "R tests failed (or were skipped)."

say "R CMD build + R CMD check --no-manual --no-tests (examples against $PY_EXE)"
# The tarball as CRAN would check it; its tests are the testthat run above
# (--no-tests). BULKEM_REQUIRE_PYTHON=1 makes bulkem_available() an error
# when the Python side is missing, so no example can skip its Python part.
# repos: an empty local index, so that the dependency check looks up no
# package index on the network (offline it warns "unable to access index").
CHECK_DIR="$OUT/rcheck"
rm -rf "$CHECK_DIR"
mkdir -p "$CHECK_DIR/repo/src/contrib"
: >"$CHECK_DIR/repo/src/contrib/PACKAGES"
printf 'options(repos = c(CRAN = "file://%s/repo"))\n' "$CHECK_DIR" >"$CHECK_DIR/Rprofile"
(cd "$CHECK_DIR" && R CMD build "$ROOT/r_wrapper") >"$CHECK_DIR/build.log" 2>&1 \
    || { cat "$CHECK_DIR/build.log"; die "R CMD build r_wrapper failed."; }
TARBALL="$(cd "$CHECK_DIR" && ls bulkem_*.tar.gz)"
(cd "$CHECK_DIR" && R_PROFILE_USER="$CHECK_DIR/Rprofile" \
    R CMD check --no-manual --no-tests "$TARBALL") >"$CHECK_DIR/check.log" 2>&1 \
    || { tail -n 60 "$CHECK_DIR/check.log"; tail -n 40 "$CHECK_DIR/bulkem.Rcheck/bulkem-Ex.Rout" 2>/dev/null;
         die "R CMD check failed (log: $CHECK_DIR/check.log)."; }
STATUS="$(grep '^Status:' "$CHECK_DIR/check.log" || true)"
echo "  $TARBALL: $STATUS"
grep -E '^\* .*\.\.\. (NOTE|WARNING|ERROR)' "$CHECK_DIR/check.log" || true
case "$STATUS" in
    *ERROR*|*WARNING*) die "R CMD check: $STATUS (log: $CHECK_DIR/check.log)." ;;
esac
# Every example ran its Python part: each fitting function's print is there.
EX="$CHECK_DIR/bulkem.Rcheck/bulkem-Ex.Rout"
EXPECT=("found in the Python at" "bulkem fit: invgauss mixture" "bulkem fit: hidden Markov model"
        "bulkem fit: AR(1) plus noise" "bulkem fit: TMAP")
if "$PY_EXE" -c 'import pyarrow' 2>/dev/null; then
    EXPECT+=("Resumed the checkpoint") # (fit_mixture's example; without pyarrow it says so)
fi
for what in "${EXPECT[@]}"; do
    grep -qF "$what" "$EX" || die "the examples did not run their Python part: no \"$what\" in $EX."
done
echo "  examples ran (their output: $EX)"

if [ -z "${BULKEM_NO_INSTALL_TEST:-}" ]; then
    # From R, as a user would: R's LD_LIBRARY_PATH is set, and install_bulkem()
    # must keep it from the Python it runs. pip's cache keeps this to ~40 s.
    say "install_bulkem() into a temporary virtualenv"
    IB_DIR="$(mktemp -d)"
    Rscript -e "bulkem::install_bulkem('$ROOT', envname = '$IB_DIR/venv')" \
        >"$OUT/install_bulkem.log" 2>&1 \
        || { tail -n 40 "$OUT/install_bulkem.log"; rm -rf "$IB_DIR"; die "install_bulkem() failed."; }
    (cd "$IB_DIR" && env -u PYTHONPATH "$IB_DIR/venv/bin/python" -c '
import bulkem, sys
assert bulkem.__file__.startswith(sys.prefix), bulkem.__file__
print("  bulkem", bulkem.__version__, "installed in", sys.prefix)') \
        || { rm -rf "$IB_DIR"; die "bulkem does not import from the virtualenv install_bulkem() made."; }
    rm -rf "$IB_DIR"
fi

say "vignettes -> $OUT"
if [ -z "${BULKEM_NO_PANDOC:-}" ] && Rscript -e 'quit(status = !rmarkdown::pandoc_available())' >/dev/null 2>&1; then
    HAVE_PANDOC=1
else
    HAVE_PANDOC=0
    echo "pandoc not found: running the R Markdown code through knitr::purl + Rscript"
fi
# The Python vignettes run in a second process beside the R Markdown ones: the test
# command's pytest finishes first, and its core would otherwise idle while the vignettes
# run one after another (kernels are shared through the disk cache: one that the other
# process is compiling is waited for and loaded, not compiled twice).
py_vignettes() {
    for py in vignettes/*.py; do
        name="$(basename "$py" .py)"
        echo "-- $py"
        "$PY_EXE" "$py" --out "$OUT" >"$OUT/${name}_py.log" 2>&1 \
            || { cat "$OUT/${name}_py.log"; echo "test_r.sh: $py failed." >&2; return 1; }
    done
}
py_vignettes >"$OUT/py_vignettes.log" 2>&1 &
py_pid=$!
trap 'kill "$py_pid" 2>/dev/null || true' EXIT
for rmd in vignettes/*.Rmd; do
    name="$(basename "$rmd" .Rmd)"
    echo "-- $rmd"
    if [ "$HAVE_PANDOC" = 1 ]; then
        # Intermediates stay beside the .Rmd: knitr writes figure paths relative to it.
        (cd vignettes && Rscript -e "rmarkdown::render('$name.Rmd', output_dir = '$OUT',
            quiet = TRUE)") >"$OUT/$name.log" 2>&1 \
            || { cat "$OUT/$name.log"; die "rendering $rmd failed."; }
        test -s "$OUT/$name.html" || die "$OUT/$name.html was not written."
    else
        (cd vignettes && Rscript -e "knitr::purl('$name.Rmd', output = '$OUT/$name.R', quiet = TRUE)
            source('$OUT/$name.R', echo = TRUE)") >"$OUT/$name.log" 2>&1 \
            || { cat "$OUT/$name.log"; die "running $rmd failed."; }
    fi
done
py_rc=0
wait "$py_pid" || py_rc=$?
trap - EXIT
cat "$OUT/py_vignettes.log"
[ "$py_rc" = 0 ] || die "a Python vignette failed (exit status $py_rc)."

say "figures"
missing=0
for fig in bmi_fits bmi_starts bmi_bic demo_timing demo_truth hmm_paper hmm_decoded \
           tmap_loglik tmap_moments kalman_speed kalman_error gmm_paper gmm_fit \
           bmi_fits_py bmi_starts_py bmi_bic_py demo_timing_py demo_truth_py \
           kalman_speed_py kalman_error_py hmm_paper_py hmm_path_py \
           tmap_loglik_py tmap_moments_py gmm_paper_py gmm_fit_py; do
    f="$OUT/$fig.png"
    if [ -s "$f" ] && [ "$(head -c 8 "$f" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ]; then
        printf '  ok       %s (%s bytes)\n' "$fig.png" "$(wc -c <"$f" | tr -d ' ')"
    else
        printf '  MISSING  %s\n' "$fig.png"
        missing=1
    fi
done
[ "$missing" = 0 ] || die "some figures are missing in $OUT."

say "R side OK (outputs in $OUT)"
