#!/usr/bin/env bash
# The main job: install bulkem (into .venv) and fit the embedded demo batch
# (1,000 datasets x 2,000 values, 10 random starts each) on the GPU when one is
# usable, else on every CPU core.  Extra arguments go to `bulkem demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup_env.sh
exec .venv/bin/bulkem demo "$@"
