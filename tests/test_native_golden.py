"""The native backend on the canonical kernels (`cuda_canonical.py`: every strategy, index
pattern and dtype family of the fused kernels): each runs in C with the eager results
(`tolerance_ok`, exact for integers and bools), and the C source of seven is a golden file
(`tests/golden/native/*.c`; regenerate with FUNCGRAD_REGEN_GOLDEN=1 after reviewing a
codegen change).
"""

import os

import cuda_canonical as canonical
import numpy as np
import pytest

from funcgrad import make_jaxpr
from funcgrad.backends.native import build
from funcgrad.backends.native.kernel import CKernel
from funcgrad.compiler import pipeline
from funcgrad.config import config

GOLDEN = os.path.join(os.path.dirname(__file__), "golden", "native")
pytestmark = pytest.mark.skipif(build.compiler() is None,
                                reason="no C compiler (test_native_backend.py checks that)")


def _native(case, args):
    saved = config.native, config.enable_x64
    config.update("native", "sync")
    config.update("enable_x64", case.x64)
    try:
        exe = pipeline.compile_jaxpr(make_jaxpr(case.fn)(*args))
        return exe, exe(*args)
    finally:
        config.update("native", saved[0])
        config.update("enable_x64", saved[1])


@pytest.mark.parametrize("case", canonical.CASES, ids=lambda c: c.name)
def test_canonical_kernels_run_in_c_as_eager(case):
    args = case.make(np.random.default_rng(0))
    exe, got = _native(case, args)
    assert "void fg_k0(" in exe.as_text(), f"{case.name}: no C kernel"
    saved = config.enable_x64
    config.update("enable_x64", case.x64)
    try:
        import funcgrad.numpy as fnp
        want = case.fn(*[fnp.asarray(a) for a in args])
    finally:
        config.update("enable_x64", saved)
    want = want if isinstance(want, (tuple, list)) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert canonical.tolerance_ok(g, np.asarray(w), max(case.rtol, 1e-5)), case.name


GOLDEN_CASES = ["ew_row_col_broadcast", "ew_vec_relu_bias", "sum_k5", "max_k1000",
                "float16_sum", "sum_columns", "min_columns"]


@pytest.mark.parametrize("name", GOLDEN_CASES)
def test_golden_source(name):
    case = canonical.by_name(name)
    program = case.trace(case.make(np.random.default_rng(0)))
    node = program.kernels[0]
    src = CKernel(node.spec, "fg_k0", node.eqns).source()
    src = "\n".join(ln.split("  /*")[0] if "/* " in ln and "kernel" not in ln else ln
                    for ln in src.splitlines()) + "\n"  # source lines differ by checkout
    path = os.path.join(GOLDEN, f"{name}.c")
    if os.environ.get("FUNCGRAD_REGEN_GOLDEN"):
        os.makedirs(GOLDEN, exist_ok=True)
        with open(path, "w") as f:
            f.write(src)
    with open(path) as f:
        assert src == f.read(), f"{name}: codegen changed; review and regenerate the golden"
