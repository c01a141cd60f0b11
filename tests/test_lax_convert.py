"""convert_element_type from floats to integers follows JAX (XLA): round toward zero, saturate
at the integer range (+-inf included), NaN -> 0. Eagerly, in the numpy backend's fused
expression and in the CUDA expression (run on the CPU through the emulation header) alike,
for every int/uint width and float16/32/64 sources; the reference is built with Python ints.
"""

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import lax

INTS = [np.dtype(t) for t in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                              "uint64")]
FLOATS = [np.dtype(t) for t in ("float16", "float32", "float64")]
EDGES = [math.inf, -math.inf, math.nan, 1e10, 300.0, -300.0, 2.7, -2.7, -0.5, -0.0, 127.9,
         128.0, -128.9, -129.0, 255.5, 256.0, 32767.5, 65535.9, 65536.0, 2.0**31, -2.0**31,
         2.0**31 - 128, -2.0**31 - 256, 2.0**32, 2.0**32 - 256, 2.0**63, -2.0**63, 2.0**64,
         2.0**63 - 1024, 3e38, -3e38, 1e300]


def jax_rule(x, dtype):
    """XLA's float -> int conversion, element by element in exact (Python int) arithmetic."""
    info = np.iinfo(dtype)

    def one(v):
        if v != v:
            return 0
        if math.isinf(v):
            return info.max if v > 0 else info.min
        return min(max(math.trunc(v), info.min), info.max)
    return np.array([one(v) for v in x.ravel().tolist()], dtype).reshape(x.shape)


def _floats(values, dt):
    with np.errstate(over="ignore"):
        return np.array(values, np.float64).astype(dt)


def _check_all_paths(x, dt):
    want = jax_rule(x, dt)
    eager = np.asarray(lax.convert_element_type(fnp.asarray(x), dt))
    fused = np.asarray(fg.jit(lambda v: lax.convert_element_type(v * 1.0, dt) + dt.type(0))(x))
    alone = np.asarray(fg.jit(lambda v: lax.convert_element_type(v, dt))(x))
    for name, got in (("eager", eager), ("jit fused", fused), ("jit", alone)):
        assert got.dtype == dt, (name, got.dtype, dt)
        np.testing.assert_array_equal(got, want, err_msg=f"{name}: {x.dtype} -> {dt}")


def test_edge_values_every_width_and_source():
    fg.config.update("enable_x64", True)
    for src in FLOATS:
        x = _floats(EDGES, src)
        for dt in INTS:
            _check_all_paths(x, dt)


def test_the_reviewed_example_saturates_like_jax():
    x = fnp.asarray(np.array([np.inf, -np.inf, np.nan, 1e10, 300.0], np.float32))
    assert x.astype(np.int8).tolist() == [127, -128, 0, 127, 127]
    assert fg.jit(lambda v: v.astype(np.int8))(x).tolist() == [127, -128, 0, 127, 127]
    assert x.astype(np.uint8).tolist() == [255, 0, 0, 255, 255]
    assert fnp.asarray(np.array([np.inf, np.nan, -1e10]), dtype=int).tolist() == [
        2**31 - 1, 0, -2**31]
    assert fnp.array([1e10, -2.5], dtype=np.int16).tolist() == [32767, -2]
    assert fnp.astype(x, np.int16).tolist() == [32767, -32768, 0, 32767, 300]


def test_float_to_bool_is_nonzero():
    x = np.array([0.0, -0.0, np.nan, np.inf, 1e-30, -2.0], np.float32)
    want = [False, False, True, True, True, True]
    assert lax.convert_element_type(x, bool).tolist() == want
    assert fg.jit(lambda v: lax.convert_element_type(v * 1.0, bool))(x).tolist() == want


_wild = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                  st.sampled_from(EDGES),
                  st.floats(-1e20, 1e20))


@given(st.lists(_wild, min_size=1, max_size=12), st.sampled_from(FLOATS),
       st.sampled_from(INTS))
def test_eager_equals_jit_equals_the_jax_rule(values, src, dt):
    fg.config.update("enable_x64", True)
    _check_all_paths(_floats(values, src), dt)


def test_cuda_expression_saturates_in_the_emulation():
    from cuda_canonical import Case

    from funcgrad.backends.cuda import emulate

    fg.config.update("enable_x64", True)
    cases = []
    for src in FLOATS:
        x = _floats(EDGES * 4, src)  # a few warps' worth
        for dt in INTS:
            case = Case(f"convert_{src}_{dt}", lambda v, dt=dt: lax.convert_element_type(
                v * 1.0, dt), lambda r, x=x: (x,), x64=True)
            plan, inputs, _ = case.build(np.random.default_rng(0))
            cases.append((plan, inputs, jax_rule(x, dt)))
    lib = emulate.build([c[0] for c in cases])
    for plan, inputs, want in cases:
        out = emulate.EmulatedRuntime.empty(want.shape, want.dtype)
        lib.run(plan, inputs, [out], emulate.EMULATED_DEVICE)
        np.testing.assert_array_equal(out, want, err_msg=plan.name)
