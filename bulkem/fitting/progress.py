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
        self._desc = desc
        self._phase = ""
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

    def phase(self, text: str) -> None:
        """Say what happens before fits are counted, e.g. ``"compiling kernels"``.

        Shown in the bar's label when a bar is shown; nothing otherwise (a
        callable ``progress`` receives counts only).  An empty ``text`` ends
        the phase: the label goes back to ``desc`` and, if no fit has been
        counted yet, the bar's clock restarts so that its rate is of the
        fitting alone.

        Parameters
        ----------
        text : str
            The phase, or "" when it is over.
        """
        self._phase = text
        if self._bar is None:
            return
        if text:
            self._bar.set_description_str(f"{self._desc} ({text})")
        else:
            self._bar.set_description_str(self._desc)
            if self.done == 0:
                self._bar.reset(total=self.total)

    def __call__(self, n: int) -> None:
        if self._phase:  # the first fits are done: the phase is over
            self.phase("")
        self.done += n
        if self._bar is not None:
            self._bar.update(n)
        if self._callback is not None:
            self._callback(self.done, self.total)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
