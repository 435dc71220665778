#!/usr/bin/env bash
# Create the environment Ivy's transpiler works in (requirements.txt) at the path given.
#
#   bash benchmarks/ivy_baseline/setup.sh .venv-ivy
#
# Why a separate venv: Ivy 1.0.0.5's generated code fails on the project's stack (jax 0.10,
# keras >= 3.12), so it gets the older jax/keras it was written for. With the exact pins of
# requirements.txt one pip step resolves (~1 min, ~2.5 GB); unpinned, the measured recipe was two
# steps: `torch==2.13.0 ivy jax==0.6.2 jaxlib==0.6.2 flax`, then
# `tensorflow-cpu==2.20.* "keras<3.12" "numpy<2.4"` (which downgrades numpy).
set -euo pipefail
target="${1:?usage: setup.sh VENV_PATH}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python="${PYTHON:-python3}"
"$python" -m venv "$target"
"$target/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt"
# Ivy formats what it writes with ruff, found on PATH; run_ivy.py puts this bin first.
"$target/bin/ruff" --version >/dev/null
"$target/bin/python" -c "import ivy, torch, jax, flax, tensorflow, keras; print('ivy', ivy.__version__)"
