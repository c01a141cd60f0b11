"""The long tail (issue 28, item 8) against values recorded from JAX 0.10.2 where NumPy and
SciPy do not give the reference: JAX's edge values of the incomplete gamma and beta functions
and of zeta, `igamma_grad_a` / `random_gamma_grad`, XLA's ReducePrecision rounding, the output
sizes of `approx_max_k`/`approx_min_k`, JAX's `nearest` quantile ties.

Recorded by `tools/record_jax_tail.py` into `tests/golden/jax/tail.npz`; no JAX needed here.
"""

import importlib.util
import os

import numpy as np
import pytest

import funcgrad as fg

HERE = os.path.dirname(os.path.abspath(__file__))
_SPEC = importlib.util.spec_from_file_location(
    "record_jax_tail", os.path.join(HERE, "..", "tools", "record_jax_tail.py"))
TOOL = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(TOOL)
GOLDEN = np.load(os.path.join(HERE, "golden", "jax", "tail.npz"))


def _resolve(path):
    obj = fg
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


@pytest.mark.parametrize("name", sorted(TOOL.CASES))
def test_matches_jax(name):
    path, args, kwargs, x64 = TOOL.CASES[name]
    fg.config.update("enable_x64", x64)
    args = [GOLDEN[f"{name}/arg/{i}"] if isinstance(a, np.ndarray) else
            a.make(fg) if isinstance(a, TOOL.Built) else a for i, a in enumerate(args)]
    got = _resolve(path)(*args, **kwargs)
    got = got if isinstance(got, (tuple, list)) else [got]
    want = [GOLDEN[f"{name}/out/{i}"] for i in range(len(got))]
    for g, w in zip(got, want):
        g = np.asarray(g)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        if name.startswith("reduce_precision"):
            np.testing.assert_array_equal(g.view(np.uint32), w.view(np.uint32))  # bit for bit
        else:
            np.testing.assert_allclose(g, w, rtol=1e-9 if x64 else 1e-5, atol=1e-300 if x64
                                       else 1e-6)  # (float32 sums in another order)
