"""funcgrad.random against numbers and signatures recorded from jax.random 0.10.2.

`tools/record_random_golden.py` ran every case of `random_golden_cases.py` on JAX into
`golden/random/jax_random.json`; here the same calls run on funcgrad and must give the same
numbers: bit for bit where the case's tolerance is 0, else to that relative tolerance (XLA
and NumPy round transcendental functions differently in the last bit). JAX is not needed.
"""

import inspect
import json
import os
import types

import numpy as np
import pytest
from random_golden_cases import CASES, CASES_X64

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import random as r

with open(os.path.join(os.path.dirname(__file__), "golden", "random", "jax_random.json")) as _f:
    GOLDEN = json.load(_f)

NS = types.SimpleNamespace(r=r, xp=fnp, grad=fg.grad, vmap=fg.vmap, jit=fg.jit, key=r.PRNGKey)


def _want(record):
    values = record["values"]
    if record["dtype"].startswith("complex"):
        values = [complex(re, im) for re, im in values]
    return np.array(values, record["dtype"]).reshape(record["shape"])


def _check(name, got, record):
    got, want = np.asarray(got), _want(record)
    assert (got.dtype, got.shape) == (want.dtype, want.shape), name
    if record["tol"] == 0:
        np.testing.assert_array_equal(got, want, err_msg=name)
    else:
        np.testing.assert_allclose(got, want, rtol=record["tol"], atol=record["tol"],
                                   err_msg=name)


def test_every_case_was_recorded():
    assert set(GOLDEN["cases"]) == set(CASES) and set(GOLDEN["cases_x64"]) == set(CASES_X64)


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_jax(name):
    fn, tol = CASES[name]
    assert GOLDEN["cases"][name]["tol"] == tol
    _check(name, fn(NS), GOLDEN["cases"][name])


@pytest.mark.parametrize("name", sorted(CASES_X64))
def test_matches_jax_x64(name):
    fg.config.update("enable_x64", True)
    _check(name, CASES_X64[name][0](NS), GOLDEN["cases_x64"][name])


# --- signatures -----------------------------------------------------------------------------------
def _params(fn):
    return [[p.name, p.kind.name, None if p.default is p.empty else repr(p.default)]
            for p in inspect.signature(fn).parameters.values()]


def test_every_jax_random_name_exists():
    missing = sorted(set(GOLDEN["signatures"]) - set(dir(r)))
    assert not missing, f"jax.random names missing from funcgrad.random: {missing}"


@pytest.mark.parametrize("name", sorted(GOLDEN["signatures"]))
def test_signature_is_jaxs(name):
    # same parameter names, order, kinds and defaults as jax.random 0.10.2
    assert _params(getattr(r, name)) == GOLDEN["signatures"][name]
