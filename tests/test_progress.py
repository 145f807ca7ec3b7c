"""Progress: counts, a bar on stderr, and the phase label shown before fits are counted."""

from __future__ import annotations

from bulkem.fitting.progress import Progress


def test_phase_is_shown_on_the_bar_and_ends(capsys):
    bar = Progress(True, total=10)
    bar.phase("compiling kernels")
    assert "fits (compiling kernels)" in capsys.readouterr().err
    bar.phase("")
    bar(4)
    bar.close()
    last = capsys.readouterr().err.strip().split("\r")[-1]  # the bar as last drawn
    assert last.startswith("fits:") and "4/10" in last
    assert bar.done == 4


def test_phase_without_a_bar_does_nothing(capsys):
    calls = []
    for progress in (False, lambda done, total: calls.append((done, total))):
        p = Progress(progress, total=5)
        p.phase("compiling kernels")
        p.phase("")
        p(5)
        p.close()
    assert capsys.readouterr().err == ""
    assert calls == [(5, 5)]
