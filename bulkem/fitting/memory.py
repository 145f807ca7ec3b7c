"""Memory a batch of fits needs, checked before it is allocated.

The API (a batch's starts and results) and the CPU engines (their work buffers,
:func:`check_buffers`) ask :func:`check` before they allocate, with what the memory is for
and what to do about it, so that a batch too large for memory ends in a ``MemoryError``
that says so, not a bare one from NumPy or a ``SystemError`` from a buffer allocated
inside a compiled ``prange`` loop.
"""

from __future__ import annotations

import os

GIB = 2.0**30


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def available_bytes() -> float:
    """Memory this process can still use: the least of the machine's available memory
    (``MemAvailable``, else the free pages), its cgroup's limit less its use, and its
    address-space limit (``ulimit -v``) less its size."""
    have = [float("inf")]
    meminfo = _read("/proc/meminfo")
    if meminfo is not None:
        have += [float(line.split()[1]) * 1024 for line in meminfo.splitlines()
                 if line.startswith("MemAvailable:")]
    else:
        try:
            have.append(float(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")))
        except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
            pass
    limit, used = _read("/sys/fs/cgroup/memory.max"), _read("/sys/fs/cgroup/memory.current")
    if limit and used and limit.strip().isdigit():
        have.append(float(limit) - float(used))
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        status = _read("/proc/self/status") or ""
        size = [float(line.split()[1]) * 1024 for line in status.splitlines()
                if line.startswith("VmSize:")]
        if soft != resource.RLIM_INFINITY and size:
            have.append(soft - size[0])
    except ImportError:  # pragma: no cover - not POSIX
        pass
    return max(0.0, min(have))


def check(needed: float, what: str, advice: str) -> None:
    """Raise MemoryError saying what needs how much, what there is and what to do.

    Parameters
    ----------
    needed : float
        Bytes about to be allocated.
    what : str
        What they hold, for the message ("the starting values and results of 10^12 fits").
    advice : str
        What the user can do instead.
    """
    have = available_bytes()
    if needed > have:
        raise MemoryError(f"{what} need {needed / GIB:.3g} GiB, but {have / GIB:.3g} GiB of "
                          f"memory is available; {advice}")


def check_buffers(n_buf: int, longest: int, at_once: int) -> None:
    """The per-fit work buffers (``n_buf`` float64 values each, sized by the longest unit)
    of ``at_once`` fits running at the same time on the CPU."""
    if n_buf:
        check(8.0 * n_buf * at_once,
              f"the work buffers of {at_once} fits running at once ({8 * n_buf / GIB:.3g} GiB "
              f"each, for the longest sequence or series: {longest:,} steps)",
              "split the longest sequences or series into shorter ones, or run fewer fits at "
              "once (NUMBA_NUM_THREADS).")
