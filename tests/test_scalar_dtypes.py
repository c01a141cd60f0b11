"""Result dtypes of the functions that take Python scalars (clip bounds, fill values,
exponents, steps...) next to arrays, against JAX: against the dtypes JAX gave, recorded by
tools/record_jax_scalar_dtypes.py in tests/golden/jax_scalar_dtypes.json (always), and
against JAX itself where it is importable.

Each case is an expression over `xp` (the library), `onp` (NumPy, for NumPy scalars) and the
recorded operands. A weak bool is compared as a bool: JAX marks some comparison results
weak, but bool has no weak kind in its promotion lattice, so the mark changes nothing.
"""

import importlib.util
import json
import os

import numpy as onp
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad.errors import FuncgradError

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "golden", "jax_scalar_dtypes.json")) as _f:
    RECORD = json.load(_f)


def _operands(xp):
    return {k: xp.asarray(onp.array([complex(x) if isinstance(x, str) else x for x in v], dt))
            for k, (dt, v) in RECORD["operands"].items()}


def _result(xp, case):
    """[dtype, weak] of the case (a list of them for a tuple result), or "error"."""
    env = {"xp": xp, "onp": onp, **_operands(xp)}
    try:
        r = eval(case, env)  # the recorded expressions (this repository's file)
    except FuncgradError:
        return "error"
    parts = r if isinstance(r, tuple) else (r,)
    got = [[str(p.dtype), bool(p.weak_type) and p.dtype != onp.bool_] for p in parts]
    return got if isinstance(r, tuple) else got[0]


def _unweak_bools(want):
    if want == "error" or isinstance(want[0], list):
        return want if want == "error" else [_unweak_bools(w) for w in want]
    return [want[0], want[1] and want[0] != "bool"]


@pytest.mark.parametrize("x64", [False, True], ids=["x32", "x64"])
def test_scalar_arguments_promote_as_recorded_from_jax(x64):
    fg.config.update("enable_x64", x64)
    record = RECORD["x64" if x64 else "x32"]
    wrong = {case: (_result(fnp, case), _unweak_bools(want)) for case, want in record.items()}
    wrong = {c: f"funcgrad {got}, JAX {want}" for c, (got, want) in wrong.items() if got != want}
    assert not wrong, wrong
    assert len(record) >= 150  # the whole family, not a few


def test_clip_with_a_float_bound_is_float_as_in_jax():
    x = fnp.arange(-2, 3)
    out = fnp.clip(x, -1.5, 2)
    assert out.dtype == onp.float32 and out.weak_type
    onp.testing.assert_array_equal(onp.asarray(out), [-1.5, -1, 0, 1, 2])
    grad = fg.grad(lambda v: fnp.sum(fnp.clip(v, -1.5, 2)))(fnp.array([-3.0, 0.0, 3.0]))
    onp.testing.assert_array_equal(onp.asarray(grad), [0, 1, 0])


def test_heaviside_keeps_nan_as_numpy():
    x = onp.array([onp.nan, -1, 0, 2], onp.float32)
    onp.testing.assert_array_equal(onp.asarray(fnp.heaviside(x, 0.5)), onp.heaviside(x, 0.5))


def _jax_record():
    jax = pytest.importorskip("jax")  # the optional tier: JAX is no dependency
    path = os.path.join(HERE, "..", "tools", "record_jax_scalar_dtypes.py")
    spec = importlib.util.spec_from_file_location("record_jax_scalar_dtypes", path)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    import jax.numpy as jnp
    try:
        return {"x32": tool.record(jax, jnp, False), "x64": tool.record(jax, jnp, True)}
    finally:
        jax.config.update("jax_enable_x64", False)


def test_scalar_arguments_promote_as_jax_does_now():
    live = _jax_record()
    for mode in ("x32", "x64"):
        fg.config.update("enable_x64", mode == "x64")
        for case, want in live[mode].items():
            assert _result(fnp, case) == _unweak_bools(want), (mode, case)
