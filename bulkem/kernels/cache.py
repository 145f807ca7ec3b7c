"""Compiled CPU kernels kept on disk, so that a second process does not compile them again.

Numba's own ``cache=True`` keys a function by its bytecode and the pickled
contents of its closure; bulkem's kernels are closures built by factories
around other compiled functions, whose pickles differ from one process to the
next, so that cache never hits.  :func:`njit_cached` keys them instead by what
the compiled code depends on: the kernel's name and the model's key (which holds the
tuning compiled into it, ``Tuning.key``), the source of the whole package, and (as
numba does) the signature and the machine.  Any edit to bulkem is a new key.

A cached kernel's object code names the functions it calls by symbol, and
numba makes a closure's symbol from its qualified name and a per-process
counter (``make_em.<locals>.em$62``).  Two processes that compile two
different closures of one factory in the same order give them the same
symbol; a third process that loads both from the cache links every call to
the first one loaded, so the second family's kernel ran the first family's EM
(numba issue #10486).  :func:`unique_symbol_ids` makes the counter's values
random 62-bit numbers, so that two compilations never share a symbol.

Processes share the cache (the test command runs pytest's workers, R's Python and
the vignettes at once): a kernel that one process is compiling is waited for and
loaded by the others, and numba's index and data files are read and written under
a lock (:class:`_KeyedCache`).

``BULKEM_NO_CACHE=1`` turns the disk cache off; numba's ``NUMBA_CACHE_DIR`` says
where the files go (by default beside the sources, or in the user's cache
folder when those are read-only).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import time
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: the cache goes unlocked
    fcntl = None

from numba import config as numba_config
from numba import njit
from numba.core import event as numba_event
from numba.core.bytecode import FunctionIdentity
from numba.core.caching import FunctionCache


class _RandomIds:
    """An endless iterator of random 62-bit integers, drawn anew in every process
    (a forked child shares no state with its parent)."""

    def __iter__(self):
        return self

    def __next__(self) -> int:
        return int.from_bytes(os.urandom(8), "little") >> 2


def unique_symbol_ids() -> None:
    """Give every function numba compiles from now on a random id in its symbol (see above).

    numba reads ``FunctionIdentity._unique_ids`` only through ``next()``; the id
    only has to differ between two compilations of one qualified name.
    """
    if not isinstance(FunctionIdentity._unique_ids, _RandomIds):
        FunctionIdentity._unique_ids = _RandomIds()


unique_symbol_ids()


@functools.cache
def source_hash() -> str:
    """A hash of every Python source file of the package."""
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


class _KeyedCache(FunctionCache):
    """numba's function cache with the index key given, not derived from the closure,
    and safe to share between processes that compile at the same time (see
    :func:`_locked`): the index and data files are read and written under a lock, and a
    kernel that another process is compiling is waited for and loaded, not compiled twice
    (pytest's workers, R's Python and the vignettes of the test command share one cache).
    """

    def __init__(self, py_func, key: str) -> None:
        super().__init__(py_func)
        self._bulkem_key = key
        self._compiling = None  # the lock held while this process compiles a kernel

    def _index_key(self, sig, codegen):
        # numba's optimisation level too: kernels compiled with NUMBA_OPT=0 (the test
        # command's, for compile time) are never loaded by a run at the default level
        return (sig, codegen.magic_tuple(), numba_config.OPT, self._bulkem_key)

    def _lock_path(self, what: str) -> str:
        return os.path.join(self._cache_path, f"{self._cache_file._index_name}.{what}.lock")

    def load_overload(self, sig, target_context):
        with _locked(self._lock_path("index")):
            data = super().load_overload(sig, target_context)
        if data is not None or not self._enabled:
            return data
        # Not on disk: compile it here, unless another process is compiling it now; then
        # wait for that (the lock), and load what it saved.
        try:
            self._impl.locator.ensure_cache_path()  # (for the lock files)
        except OSError:  # pragma: no cover - numba falls back to no cache
            pass
        what = hashlib.sha256(repr(self._index_key(sig, target_context.codegen()))
                              .encode()).hexdigest()[:16]
        lock = _acquire(self._lock_path(what))
        with _locked(self._lock_path("index")):
            data = super().load_overload(sig, target_context)
        if data is not None:
            _release(lock)
        else:
            self._compiling = lock  # released once saved (or the compilation failed)
        return data

    def save_overload(self, sig, data):
        try:
            with _locked(self._lock_path("index")):
                super().save_overload(sig, data)
        finally:
            self.compiled()

    def compiled(self) -> None:
        """Let other processes at this kernel (this one's compilation ended)."""
        lock, self._compiling = self._compiling, None
        if lock is not None:
            _release(lock)


# How long a process waits for another that compiles the kernel it needs before it
# compiles the kernel itself (the largest kernels compile in about two minutes).
LOCK_WAIT_S = 900.0


def _acquire(path: str):
    """An exclusive ``flock`` on ``path`` (created if need be), waited for up to
    :data:`LOCK_WAIT_S`; None where locks cannot be taken (the caller goes on unlocked)."""
    if fcntl is None:  # pragma: no cover
        return None
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:
        return None
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(fd)
                return None
            time.sleep(0.05)
        except OSError:  # a file system without locks
            os.close(fd)
            return None


def _release(fd) -> None:
    if fd is not None:
        os.close(fd)  # (closing drops the flock)


@contextlib.contextmanager
def _locked(path: str):
    """Hold :func:`_acquire`'s lock on ``path`` for a block.

    numba's index file maps each kernel key to a data file; two processes that save
    kernels of one function at the same time could each give its kernel the same data
    file, and a third would then load one kernel's code for the other's key.
    """
    fd = _acquire(path)
    try:
        yield
    finally:
        _release(fd)


class _CompileEnd(numba_event.Listener):
    """Releases a kernel's compile lock when its compilation fails (a success releases it
    once the kernel is saved, in ``_KeyedCache.save_overload``)."""

    def on_start(self, event) -> None:
        pass

    def on_end(self, event) -> None:
        disp = event.data.get("dispatcher")
        cache = getattr(disp, "_cache", None)
        # Failed: no overload for the signature (numba 0.68's Event.is_failed reads the
        # other way round, True after every success, which let a second process compile
        # a kernel the first had not saved yet).
        if (isinstance(cache, _KeyedCache)
                and tuple(event.data.get("args", ())) not in disp.overloads):
            cache.compiled()


numba_event.register("numba:compile", _CompileEnd())


def enabled() -> bool:
    return os.environ.get("BULKEM_NO_CACHE", "") not in ("1", "true", "yes")


_logged_keys: dict = {}  # id(dispatcher) -> its key, for BULKEM_COMPILE_LOG


class _CompileLog(numba_event.Listener):
    """With ``BULKEM_COMPILE_LOG=FILE``: a JSON line appended to FILE for every top-level
    compilation in this process as it ends (a test-time diagnostic: which kernels compile,
    where, for how long): ``t`` (end, epoch seconds), ``pid``, ``name``, ``key`` (a
    :func:`njit_cached` kernel's key, else the argument types), ``seconds`` and, under pytest,
    ``test`` (the test that was running: which test paid for the kernel) and ``args`` (the
    argument types: a kernel compiled twice under one key got other types)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.stack: list = []

    def on_start(self, event) -> None:
        self.stack.append(time.perf_counter())

    def on_end(self, event) -> None:
        seconds = time.perf_counter() - self.stack.pop()
        if self.stack:  # a callee, inside its caller's compilation
            return
        disp = event.data.get("dispatcher")
        func = getattr(disp, "py_func", None)
        key = _logged_keys.get(id(disp)) or str(event.data.get("args"))[:300]
        line = json.dumps({"t": round(time.time(), 3), "pid": os.getpid(),
                           "name": getattr(func, "__qualname__", str(disp)), "key": key,
                           "seconds": round(seconds, 3),
                           "args": str(event.data.get("args"))[:2000],
                           "test": os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0]})
        with open(self.path, "a") as fh:
            fh.write(line + "\n")


if os.environ.get("BULKEM_COMPILE_LOG"):
    numba_event.register("numba:compile", _CompileLog(os.environ["BULKEM_COMPILE_LOG"]))


class _UseLogged:
    """With ``BULKEM_COMPILE_LOG``: a kernel that appends a ``use`` line to the log the first
    time each test calls it (which tests need which kernels: a kernel that one test alone
    needs is a candidate to share), then calls it.  Kernels are only called from Python."""

    def __init__(self, disp, key: str) -> None:
        self._disp, self._key, self._seen = disp, key, set()

    def __call__(self, *args, **kwargs):
        test = os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0]
        if test not in self._seen:
            self._seen.add(test)
            line = json.dumps({"use": self._key, "pid": os.getpid(), "test": test,
                               "name": getattr(self._disp.py_func, "__qualname__", "")})
            with open(os.environ["BULKEM_COMPILE_LOG"], "a") as fh:
                fh.write(line + "\n")
        return self._disp(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._disp, name)


def njit_cached(key: tuple, **options):
    """``numba.njit(**options)``, its compiled code kept on disk under ``key`` (see above).

    Parameters
    ----------
    key : tuple
        What distinguishes this kernel from others built from the same source
        lines (a model's key, a dtype...); reprs of its items make the key.
    """
    options.setdefault("error_model", "numpy")  # as target.kernel: x/0 is inf or NaN

    def wrap(py_func):
        disp = njit(**options)(py_func)
        if enabled():
            full = repr((py_func.__qualname__, key, source_hash()))
            try:
                disp._cache = _KeyedCache(py_func, hashlib.sha256(full.encode()).hexdigest())
            except RuntimeError:  # pragma: no cover - no writable cache location
                pass
        if os.environ.get("BULKEM_COMPILE_LOG"):
            _logged_keys[id(disp)] = repr(key)
            return _UseLogged(disp, repr(key))
        return disp

    return wrap
