"""funcgrad.optim against optax 0.2.8: every case of `optax_cases.py` (optimizers, wrappers,
schedules, losses, tree utilities, projections, contrib) is run here with funcgrad and compared
with the numbers optax gave (`tests/golden/optax_golden.json`, written by
`tools/record_optax_golden.py`; JAX is not needed here).

Tolerance: float32 rounding, `rtol=2e-5, atol=2e-6` after a few steps (the two libraries sum
in different orders); cases that iterate (line searches, L-BFGS, Newton-Schulz) or divide by
small differences have their own, stated below."""

import json
import pathlib

import numpy as np
import optax_cases
import pytest

import funcgrad
import funcgrad.numpy as fnp
from funcgrad import optim

GOLDEN = json.loads((pathlib.Path(__file__).parent / "golden" / "optax_golden.json").read_text())
FG = optax_cases.Frameworks(optax=optim, jnp=fnp, jax=funcgrad)
CASES = optax_cases.all_cases()

RTOL, ATOL = 2e-5, 2e-6
TOLERANCE = {
    # RAdam's ro = ro_inf - 2 t b2**t / (1 - b2**t) cancels (1999 - 1998 at t = 1 with
    # b2 = 0.999): one ulp of difference in pow (XLA's against numpy's) becomes ~1e-5.
    "opt_radam": (1e-4, 2e-5),
}


def _numeric(tree):
    """`tree` as a float64 array, or None when it is not a rectangular nest of numbers."""
    try:
        return np.asarray(tree, dtype=np.float64)
    except (TypeError, ValueError):
        return None


def assert_close(got, want, rtol, atol, where="result"):
    if isinstance(want, dict):
        assert isinstance(got, dict) and sorted(got) == sorted(want), where
        for k in want:
            assert_close(got[k], want[k], rtol, atol, f"{where}[{k!r}]")
        return
    w = _numeric(want)
    if w is None:
        assert isinstance(got, list) and len(got) == len(want), where
        for i, (g, v) in enumerate(zip(got, want)):
            assert_close(g, v, rtol, atol, f"{where}[{i}]")
        return
    g = _numeric(got)
    assert g is not None and g.shape == w.shape, f"{where}: {got!r} is not shaped as {want!r}"
    np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=where)


def test_every_case_is_recorded():
    assert sorted(GOLDEN["cases"]) == sorted(CASES)
    assert GOLDEN["versions"]["optax"] == "0.2.8"


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_optax(name):
    got = optax_cases.to_json(CASES[name](FG))
    rtol, atol = TOLERANCE.get(name, (RTOL, ATOL))
    assert_close(got, GOLDEN["cases"][name], rtol, atol, name)
