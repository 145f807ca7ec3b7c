"""Progress reporting for long batches."""

from __future__ import annotations

import sys
from collections.abc import Callable

# Batches smaller than this many fits show no bar unless asked to.
AUTO_MIN_FITS = 20_000


class Progress:
    """Counts finished fits and shows them: a tqdm bar, a callable, or nothing.

    Parameters
    ----------
    progress : bool, callable or None
        True: a bar on stderr.  False: nothing.  None: a bar when stderr is a
        terminal and the batch is large.  A callable is called as
        ``progress(done, total)`` after each chunk.
    total : int
        Number of fits in the batch.
    desc : str
        Label of the bar.
    """

    def __init__(self, progress: bool | Callable | None, total: int, desc: str = "fits"):
        self.total = total
        self.done = 0
        self._callback = progress if callable(progress) else None
        show = progress is True or (
            progress is None and total >= AUTO_MIN_FITS and sys.stderr.isatty()
        )
        self._bar = None
        if show:
            try:
                from tqdm.auto import tqdm
            except ImportError:  # pragma: no cover - tqdm is a dependency
                tqdm = None
            if tqdm is not None:
                self._bar = tqdm(total=total, desc=desc, unit="fit", file=sys.stderr)

    @property
    def active(self) -> bool:
        """Whether anybody is watching (then engines report in smaller steps)."""
        return self._bar is not None or self._callback is not None

    def __call__(self, n: int) -> None:
        self.done += n
        if self._bar is not None:
            self._bar.update(n)
        if self._callback is not None:
            self._callback(self.done, self.total)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
