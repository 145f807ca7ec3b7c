"""Kernels loaded from the disk cache keep their own code (issue 30, bug 1).

Two families fitted one after the other in one process got one family's compiled EM
for both: numba names a closure's symbol by its qualified name and a per-process
counter, so two processes that compiled two closures of one factory in the same
order wrote cache entries with the same symbols, and a third process loading both
linked every call to the first.  ``bulkem.kernels.cache`` draws those ids at random.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent

# A factory of two closures, each calling the other by symbol (not inlined: a loop),
# cached with bulkem's keyed cache; run as a script with the factory's constants.
FACTORY = textwrap.dedent("""
    import sys

    import numpy as np
    from numba import njit

    from bulkem.kernels.cache import njit_cached


    def make(c):
        @njit
        def inner(x):
            s = 0.0
            for i in range(x.shape[0]):
                s += x[i] * c + (x[i] / c if i % 3 else c)
            return s

        @njit_cached(("test_cache_symbols", c))
        def outer(x):
            return inner(x) + inner(x[1:])

        return outer


    x = np.arange(1.0, 6.0)
    print([make(float(c))(x) for c in sys.argv[1:]])
""")


def _run(args: list[str], env: dict, cwd: Path) -> str:
    out = subprocess.run([sys.executable, *args], env=env, cwd=cwd, capture_output=True,
                         text=True, check=True, timeout=900)
    return out.stdout.strip().splitlines()[-1]


def _env(cache: Path | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "BULKEM_NO_CACHE"}
    if cache is not None:
        env["NUMBA_CACHE_DIR"] = str(cache)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return env


def test_closures_compiled_in_two_processes_keep_their_code_when_loaded_together(tmp_path):
    (tmp_path / "factory.py").write_text(FACTORY)
    env = _env(tmp_path / "cache")
    alone = [_run(["factory.py", c], env, tmp_path) for c in ("2", "3")]  # each compiles
    assert alone == ["[74.5]", "[104.66666666666669]"]
    # both from the cache in one process, in either order
    assert _run(["factory.py", "2", "3"], env, tmp_path) == "[74.5, 104.66666666666669]"
    assert _run(["factory.py", "3", "2"], env, tmp_path) == "[104.66666666666669, 74.5]"


FITS = textwrap.dedent("""
    import json
    import sys

    import numpy as np

    import bulkem

    out = {}
    for family in sys.argv[1:]:
        if family == "gaussian":
            X = np.random.default_rng(0).normal(size=(200, 1))
            res = bulkem.fit([X], family="gaussian", n_components=2, n_starts=4, seed=5,
                             backend="cpu", progress=False)
        elif family == "hmm":  # (the shapes of tests/test_hmm.py and test_ssm_em.py)
            seqs = [np.random.default_rng(1).integers(0, 4, 40).astype(float)]
            res = bulkem.fit([seqs], family="hmm", emission="categorical", n_symbols=4,
                             n_components=3, n_starts=3, seed=2, backend="cpu", progress=False)
        elif family == "ar":
            y = np.random.default_rng(2).normal(size=120)
            res = bulkem.fit([y], family="ar", order=2, n_starts=3, seed=4, backend="cpu",
                             progress=False)
        else:
            x = np.random.default_rng(3).wald(1, 2, 300)
            res = bulkem.fit([x], n_components=2, n_starts=3, seed=0, backend="cpu",
                             progress=False)
        out[family] = res.starts[["status", "loglik", "n_iter"]].astype(str).values.tolist()
    print(json.dumps(out))
""")


def test_two_families_in_one_process_give_the_tables_of_each_alone(tmp_path):
    """The issue's case: a Gaussian then an inverse-Gaussian fit, each alone in a fresh
    process, then both in one process, in both orders (the package's own cache, shared
    with the other tests: the test above pins the mechanism down); and an HMM and an AR
    model, whose kernels come from other factories, in the same process."""
    (tmp_path / "fits.py").write_text(FITS)
    env = _env(None)
    alone = {}
    families = ["gaussian", "invgauss", "hmm", "ar"]
    for family in families:
        alone.update(json.loads(_run(["fits.py", family], env, tmp_path)))
    assert {row[0] for rows in alone.values() for row in rows} <= {"converged", "max_iter"}
    for order in (families, families[::-1]):
        assert json.loads(_run(["fits.py", *order], env, tmp_path)) == alone


# A kernel compiled slowly (its compiler held for a second first), so that two processes
# started together both reach it before either has saved it.
SLOW = textwrap.dedent("""
    import sys
    import time

    import numpy as np

    from bulkem.kernels.cache import njit_cached


    def make(c):
        @njit_cached(("test_cache_lock", sys.argv[1], c))
        def kernel(x):
            return x.sum() * c

        compile_once = kernel._compiler.compile

        def slowly(*args, **kwargs):
            time.sleep(1.0)
            return compile_once(*args, **kwargs)

        kernel._compiler.compile = slowly
        return kernel


    print([make(float(c))(np.arange(4.0)) for c in sys.argv[2:]])
""")


def test_processes_wait_for_a_kernel_another_compiles_and_never_mix_two_up(tmp_path):
    """Processes sharing the disk cache (pytest's workers, R's Python, the vignettes): a
    kernel that one of them is compiling is waited for and loaded by the others, not
    compiled again (without the lock all three compiled it); and two kernels of one
    function saved at about the same time each keep their own code (numba's index and
    data files are written under a lock: unlocked, two processes could give two kernels
    one data file, though this test does not hit that window reliably)."""
    (tmp_path / "slow.py").write_text(SLOW)
    env = _env(tmp_path / "cache")
    log = tmp_path / "compiles.jsonl"
    env["BULKEM_COMPILE_LOG"] = str(log)
    token = str(os.getpid())

    def together(*argvs):
        children = [subprocess.Popen([sys.executable, "slow.py", token, *argv], env=env,
                                     cwd=tmp_path, stdout=subprocess.PIPE, text=True)
                    for argv in argvs]
        return [child.communicate(timeout=900)[0].strip().splitlines()[-1]
                for child in children]

    assert together(["2"], ["2"], ["2"]) == ["[12.0]"] * 3
    compiles = [json.loads(line) for line in log.read_text().splitlines()]
    compiles = [c for c in compiles if "use" not in c]  # (the log's calls: not compilations)
    assert len([c for c in compiles if c["name"] == "make.<locals>.kernel"]) == 1
    # two kernels of one function compiled and saved at once, then loaded together
    assert together(["3"], ["5"]) == ["[18.0]", "[30.0]"]
    assert together(["5", "3"]) == ["[30.0, 18.0]"]


def test_a_compilation_releases_its_lock_whether_it_succeeds_or_fails():
    """The per-kernel lock is let go once the kernel is saved, or at once when it fails to
    compile (numba's ``Event.is_failed`` reads the other way round: trusting it let go of
    the lock before the kernel was saved, and a second process compiled it too)."""
    from bulkem.kernels import cache

    if not cache.enabled():
        pytest.skip("BULKEM_NO_CACHE is set")

    @cache.njit_cached(("test_cache_lock_release", os.getpid(), "bad"))
    def bad(x):
        return x.no_such_attribute

    @cache.njit_cached(("test_cache_lock_release", os.getpid(), "good"))
    def good(x):
        return x.sum()

    with pytest.raises(Exception, match="no_such_attribute"):
        bad(np.arange(3.0))
    assert bad._cache._compiling is None
    assert good(np.arange(3.0)) == 3.0
    assert good._cache._compiling is None
