"""The README's Python blocks run as pasted, one after the other, in one session."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", README.read_text(), flags=re.S | re.M)


@pytest.mark.slow
def test_readme_python_blocks_run_in_order(tmp_path):
    blocks = python_blocks()
    assert len(blocks) >= 3
    script = "\n".join(f"# --- README python block {i + 1}\n{b}" for i, b in enumerate(blocks))
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env.update(MPLBACKEND="Agg",  # files only, no display
               NUMBA_DISABLE_CUDA="1",  # backend "auto" runs on the CPU
               PYTHONPATH=str(README.parent))
    run = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, f"README blocks failed:\n{run.stderr[-3000:]}"
    assert "converged" in run.stdout and "mean_1" in run.stdout
    assert (tmp_path / "dataset0.png").read_bytes()[:4] == b"\x89PNG"
