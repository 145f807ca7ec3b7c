"""Test set-up: the CUDA engine runs under numba's simulator unless asked not to.

Set ``BULKEM_TEST_REAL_GPU=1`` to run the CUDA tests on a real GPU instead.
``BULKEM_TEST_SEED`` overrides the seed of the randomised tests (it is
printed in each test's output) so that a failing case can be replayed.
"""

from __future__ import annotations

import os
import sys

if os.environ.get("BULKEM_TEST_REAL_GPU") != "1":
    # Must be set before numba is imported anywhere.
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

SIMULATED = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"


@pytest.fixture(autouse=True)
def _short_switch_interval_for_the_simulator(request):
    """The simulator runs a Python thread per CUDA thread; warp shuffles make them meet at
    barriers, which the default 5 ms GIL switch interval turns into minutes.  Only the
    CUDA tests get the short interval: everywhere else it costs (switches between every
    thread, compilation's included, took a sixth of the suite's CPU time in system calls)."""
    if not (SIMULATED and request.node.get_closest_marker("cuda")):
        yield
        return
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(before)

SEED = int(os.environ.get("BULKEM_TEST_SEED", "20261121"))


@pytest.fixture
def plain_em(monkeypatch):
    """Plain EM by default (``fit(accel=None)`` without SQUAREM), for the modules that check
    the engines iteration by iteration against plain-EM oracles and peers (hmmlearn);
    tests/test_accel.py checks the accelerated default against plain EM."""
    from bulkem.models.base import Likelihood

    monkeypatch.setattr(Likelihood, "accel_default", False)


@pytest.fixture
def seed() -> int:
    print(f"seed = {SEED} (override with BULKEM_TEST_SEED)")
    return SEED


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def backend(request) -> str:
    """Every engine (with the ``tuning`` fixture's tuning)."""
    return request.param


@pytest.fixture
def tuning(backend):
    """The tuning of a test over engines: CUDA with two warps per block, so that several
    blocks run on tiny inputs; under the simulator also 4 lanes per fit (and as many for a
    float32 fit's float64 refit as a float64 batch has), not 32: it runs a Python thread per
    CUDA thread, and a fit on 32 of them took 10x as long (the 32-lane fit keeps its own
    simulator tests, e.g. tests/test_engines.py::test_cpu_and_cuda_agree)."""
    from bulkem.tuning import Tuning

    if backend != "cuda":
        return Tuning()
    if not SIMULATED:
        return Tuning(cuda_warps_per_block=2)
    return Tuning(cuda_warps_per_block=2, cuda_lanes_per_fit=4,
                  cuda_lanes_per_fit_tol0={"float64": 4, "float32": 4}, cuda_lanes_per_refit=None)


# Blocks, tiles and grids of the one-large-dataset regime small enough for tiny data, and
# small E-step blocks (tests/test_gaussian.py and test_exact.py share them: compiled once;
# each (family, components, dimensions, dtype, compiled tuning) is a kernel to compile, so
# the tests share a few shapes: Gaussian (2, 1) in both regimes and dtypes, (3, 2) for more
# components and dimensions, (2, 2) float64 bulk, inverse Gaussian 2; see
# BULKEM_COMPILE_LOG in bulkem/kernels/cache.py for which tests compile what).
SMALL_LARGE = dict(estep_block_obs={"float64": 16, "float32": 16}, large_cuda_threads=64,
                   large_cuda_tile=16, large_cuda_max_blocks=2, large_cuda_reduce_cols=8,
                   large_cuda_reduce_threads=32, large_cuda_check_every=2)


def forced_regime(request, tuning, backend, *, cpu_large: bool = True):
    """``tuning`` forcing the strategy ``request.param`` ("bulk" or "large", the large one with
    :data:`SMALL_LARGE`), for a mixture family's ``regime`` fixture.  Skips the large regime
    under the simulator (it runs the GPU's large engine slowly) and, with ``cpu_large=False``,
    on the CPU, whose large regime runs the hooks the bulk engine runs (its own code is tested
    with the inverse Gaussian, Gaussian and gamma families): a kernel of its own would cost
    the test command ~25 s."""
    import pytest

    if request.param == "large" and backend == "cuda" and SIMULATED:
        pytest.skip("the simulator runs the GPU's large engine slowly: a real GPU only")
    if request.param == "large" and backend == "cpu" and not cpu_large:
        pytest.skip("the CPU's large regime runs the bulk engine's hooks (a kernel of its own "
                    "would cost the test command ~25 s)")
    return tuning.replace(strategy=request.param,
                          **(SMALL_LARGE if request.param == "large" else {}))


def assert_same_tables(a, b) -> None:
    """Two FitResults hold the same tables, bit for bit."""
    import pandas as pd

    from bulkem.scale import combine

    assert combine.table_names(a) == combine.table_names(b)
    for name in combine.table_names(a):
        pd.testing.assert_frame_equal(combine.split(a).tables[name],
                                      combine.split(b).tables[name], check_exact=True)


def run_and_kill(argv: list[str], marker, timeout: float = 300) -> None:
    """Run ``python argv...`` until it creates the file ``marker``, then kill -9 it."""
    import signal
    import subprocess
    import time

    child = subprocess.Popen([sys.executable, *argv], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + timeout
        while not marker.exists():
            assert child.poll() is None, child.stdout.read().decode()
            assert time.monotonic() < deadline, "the child never reached chunk 1"
            time.sleep(0.05)
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(timeout=60) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def demo(n_datasets: int, n_obs: int, seed: int) -> list[np.ndarray]:
    from bulkem.interop.datasets import simulate_demo

    return simulate_demo(n_datasets, n_obs, seed=seed)


def assert_starts_match_ig_oracle(res, data, max_iter: int, tol: float) -> None:
    """Every start of an inverse-Gaussian fit: status, n_iter and loglik as the oracle's."""
    from reference import ig_em

    for row in res.starts.itertuples():
        sv = res.start_values[(res.start_values.dataset == row.dataset)
                              & (res.start_values.start == row.start)]
        ref = ig_em(data[row.dataset], sv.weight, sv.mu, sv["lambda"], max_iter=max_iter, tol=tol)
        assert (row.status, row.n_iter) == (ref["status"], ref["n_iter"])
        rel = abs(row.loglik - ref["loglik"]) / abs(ref["loglik"])
        assert rel < 1e-9


@pytest.fixture
def small_many_states(monkeypatch):
    """Small tiles and splits of the GPU's many-states engine under the simulator (which runs
    a Python thread per CUDA thread). Patched, not passed: they size the shared and local
    arrays of the module's kernels, which the real compiler needs as single named
    constants (engines/cuda/many_states.py)."""
    if SIMULATED:
        from bulkem.engines.cuda import many_states as many

        for name, value in (("TS", 4), ("KS", 2), ("KSG", 2), ("KT", 4)):
            monkeypatch.setattr(many, name, value)
        monkeypatch.setattr(many, "XT", many.TS * many.RB)
        monkeypatch.setattr(many, "LOADS", many.KT * many.XT // (many.TS * many.TS))
