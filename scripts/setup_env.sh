#!/usr/bin/env bash
# Creates .venv (once) and installs bulkem into it with the given extras.
# Usage: source scripts/setup_env.sh [extras]   e.g. "test,r,parquet"
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
extras="${1:-}"
if [ ! -x "$root/.venv/bin/python" ]; then
  python3 -m venv "$root/.venv"
  "$root/.venv/bin/python" -m pip install -q --upgrade pip
fi
spec="$root"
[ -n "$extras" ] && spec="$root[$extras]"
"$root/.venv/bin/python" -m pip install -q -e "$spec"
export BULKEM_PYTHON="$root/.venv/bin/python"
