#!/usr/bin/env bash
# Run the Array API conformance suite (data-apis/array-api-tests) against funcgrad.numpy.
#
#   tools/array_api/run_conformance.sh                     # whole suite, x64 on, 20 examples
#   tools/array_api/run_conformance.sh -k unique           # extra args go to pytest
#   X64=0 MAX_EXAMPLES=50 tools/array_api/run_conformance.sh array_api_tests/test_set_functions.py
#
# Everything lives in a throwaway directory (WORK, default /tmp/funcgrad-array-api): a checkout
# of the suite at SUITE_COMMIT with its spec submodule, a venv with the suite's requirements and
# funcgrad installed editable, and a one-line pytest plugin that turns x64 on before the suite
# imports funcgrad. Nothing in the repository is changed. An existing checkout can be reused
# with SUITE_DIR=/path/to/array-api-tests (its array-api/ submodule must be populated).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
WORK="${WORK:-/tmp/funcgrad-array-api}"
SUITE_COMMIT="${SUITE_COMMIT:-55fcc60179efa2680ddd6cd926ddf17b83530e2b}"  # 2026-04-03
SUITE_DIR="${SUITE_DIR:-$WORK/array-api-tests}"
PYTHON="${PYTHON:-python3}"
MAX_EXAMPLES="${MAX_EXAMPLES:-20}"
X64="${X64:-1}"
mkdir -p "$WORK"

if [ ! -d "$SUITE_DIR/array_api_tests" ]; then
    git clone -q https://github.com/data-apis/array-api-tests "$SUITE_DIR"
    git -C "$SUITE_DIR" checkout -q "$SUITE_COMMIT"
    git -C "$SUITE_DIR" submodule update -q --init
fi

if [ ! -x "$WORK/venv/bin/python" ]; then
    "$PYTHON" -m venv "$WORK/venv"
    "$WORK/venv/bin/pip" install -q -r "$SUITE_DIR/requirements.txt" numpy jinja2
    "$WORK/venv/bin/pip" install -q --no-deps -e "$REPO"
fi

mkdir -p "$WORK/plugins"
cat > "$WORK/plugins/funcgrad_x64.py" <<PY
"""pytest plugin: funcgrad's enable_x64 set before the conformance suite imports funcgrad."""
import funcgrad

funcgrad.config.update("enable_x64", bool($X64))
PY

cd "$SUITE_DIR"
export PYTHONPATH="$WORK/plugins${PYTHONPATH:+:$PYTHONPATH}"
export ARRAY_API_TESTS_MODULE=funcgrad.numpy ARRAY_API_TESTS_VERSION=2023.12
[ $# -eq 0 ] && set -- array_api_tests/
exec "$WORK/venv/bin/python" -m pytest -p funcgrad_x64 -p no:cacheprovider \
    --max-examples="$MAX_EXAMPLES" -q --tb=no -rfE "$@"
