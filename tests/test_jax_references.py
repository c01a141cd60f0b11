"""funcgrad against outputs recorded from JAX 0.10.2 / optax 0.2.8 (no JAX needed here).

`tools/record_jax_references.py` holds the cases (`CASES`: function, inputs, keywords) and
wrote `tests/golden/jax/references.npz`; each case runs here through the same-named funcgrad
function (`optax.X` is `funcgrad.optim.X`, `jax.nn.X` is `funcgrad.nn.X`).
"""

import os
import sys

import numpy as np
import pytest

import funcgrad as fg

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))

import record_jax_references as ref  # noqa: E402

RECORD = np.load(os.path.join(os.path.dirname(__file__), "golden", "jax", "references.npz"))


def _funcgrad(path):
    module, name = path.rsplit(".", 1)
    home = {"jax.nn": fg.nn, "optax": fg.optim}[module]
    return getattr(home, name)


@pytest.mark.parametrize("name", sorted(ref.CASES))
def test_matches_the_recorded_jax_output(name):
    path, _, kwargs = ref.CASES[name]
    args = {k.split("/")[-1]: RECORD[k] for k in RECORD.files if k.startswith(f"{name}/in/")}
    fn = _funcgrad(path)
    if path.startswith("optax."):
        got = (ref.run_optimizer(fn(**kwargs), args["params"], args["grads"]),)
    else:
        out = fn(**args, **kwargs)
        got = out if isinstance(out, tuple) else (out,)
    want = [RECORD[f"{name}/out/{i}"] for i in range(len(got))]
    assert f"{name}/out/{len(got)}" not in RECORD.files, "funcgrad returned fewer outputs"
    for g, w in zip(got, want):
        assert np.asarray(g).shape == w.shape and np.asarray(g).dtype == w.dtype
        np.testing.assert_allclose(np.asarray(g), w, rtol=2e-5, atol=2e-6)
