"""funcgrad.numpy elementwise functions against NumPy: unary and binary ufuncs on
hypothesis-drawn shapes (size-0 and size-1 axes, broadcasting pairs) and dtypes, plus the
special values (NaN, inf, -0.0, ties) that the composite ufuncs must get right.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from numpy_strategies import (
    BOOL,
    F32,
    I32,
    assert_matches,
    make_array,
    pair_shapes,
    seeds,
    shapes,
)

import funcgrad.numpy as fnp

_KINDS = {"f": F32, "i": I32, "b": BOOL}

# name, NumPy reference, value domain, dtypes tested, result dtype rule
UNARY = [
    ("negative", np.negative, "any", "fi", "same"),
    ("positive", np.positive, "any", "fi", "same"),
    ("abs", np.abs, "any", "fib", "same"),
    ("absolute", np.absolute, "any", "fi", "same"),
    ("fabs", np.fabs, "any", "fi", "float"),
    ("sign", np.sign, "any", "fi", "same"),
    ("exp", np.exp, "small", "fib", "float"),
    ("exp2", np.exp2, "small", "fi", "float"),
    ("expm1", np.expm1, "small", "fi", "float"),
    ("log", np.log, "pos", "fi", "float"),
    ("log2", np.log2, "pos", "fi", "float"),
    ("log10", np.log10, "pos", "fi", "float"),
    ("log1p", np.log1p, "gtm1", "f", "float"),
    ("sqrt", np.sqrt, "nonneg", "fi", "float"),
    ("square", np.square, "any", "fi", "same"),
    ("cbrt", np.cbrt, "any", "fi", "float"),
    ("reciprocal", np.reciprocal, "nonzero", "f", "same"),
    ("sin", np.sin, "any", "fib", "float"),
    ("cos", np.cos, "any", "fi", "float"),
    ("tan", np.tan, "unit", "fi", "float"),
    ("arcsin", np.arcsin, "unit", "f", "float"),
    ("arccos", np.arccos, "unit", "f", "float"),
    ("arctan", np.arctan, "any", "fi", "float"),
    ("sinh", np.sinh, "small", "fi", "float"),
    ("cosh", np.cosh, "small", "fi", "float"),
    ("tanh", np.tanh, "any", "fi", "float"),
    ("arcsinh", np.arcsinh, "any", "fi", "float"),
    ("arccosh", np.arccosh, "ge1", "fi", "float"),
    ("arctanh", np.arctanh, "unit", "f", "float"),
    ("floor", np.floor, "any", "fi", "same"),
    ("ceil", np.ceil, "any", "fi", "same"),
    ("trunc", np.trunc, "any", "fi", "same"),
    ("fix", np.fix, "any", "fi", "same"),
    ("rint", np.rint, "any", "fi", "float"),
    ("round", np.round, "any", "fi", "same"),
    ("around", np.round, "any", "f", "same"),
    ("isnan", np.isnan, "any", "fib", "bool"),
    ("isinf", np.isinf, "any", "fib", "bool"),
    ("isfinite", np.isfinite, "any", "fib", "bool"),
    ("isposinf", np.isposinf, "any", "fi", "bool"),
    ("isneginf", np.isneginf, "any", "fi", "bool"),
    ("signbit", np.signbit, "any", "fi", "bool"),
    ("degrees", np.degrees, "any", "fi", "float"),
    ("radians", np.radians, "any", "fi", "float"),
    ("deg2rad", np.deg2rad, "any", "f", "float"),
    ("rad2deg", np.rad2deg, "any", "f", "float"),
    ("sinc", np.sinc, "any", "fi", "float"),
    ("logical_not", np.logical_not, "any", "fib", "bool"),
    ("bitwise_not", np.invert, "any", "ib", "same"),
    ("invert", np.invert, "any", "ib", "same"),
    ("nan_to_num", np.nan_to_num, "any", "fib", "same"),
    ("real", np.real, "any", "fib", "same"),
    ("imag", np.imag, "any", "fi", "same"),
    ("conj", np.conj, "any", "fi", "same"),
    ("conjugate", np.conjugate, "any", "f", "same"),
]

_UNARY_CASES = [(n, ref, dom, k, rule) for n, ref, dom, kinds, rule in UNARY for k in kinds]


def _result_dtype(rule, dt):
    return {"same": dt, "float": F32, "bool": BOOL}[rule]


@pytest.mark.parametrize("name,ref,domain,kind,rule", _UNARY_CASES,
                         ids=[f"{c[0]}-{c[3]}" for c in _UNARY_CASES])
@given(shape=shapes, seed=seeds)
def test_unary_matches_numpy(name, ref, domain, kind, rule, shape, seed):
    dt = _KINDS[kind]
    x = make_array(seed, shape, dt, domain)
    out = getattr(fnp, name)(fnp.asarray(x))
    want_dt = _result_dtype(rule, dt)
    x_ref = x.astype(np.float32) if rule == "float" else x
    want = np.asarray(ref(x_ref))
    if want_dt == BOOL or dt == BOOL:
        want = want.astype(want_dt)
    assert_matches(out, want.astype(want_dt) if want.dtype.kind != "b" else want, want_dt)


BINARY = [
    ("add", np.add, ("any", "any"), "fib", "same"),
    ("subtract", np.subtract, ("any", "any"), "fi", "same"),
    ("multiply", np.multiply, ("any", "any"), "fib", "same"),
    ("divide", np.divide, ("any", "nonzero"), "fi", "float"),
    ("true_divide", np.true_divide, ("any", "nonzero"), "fi", "float"),
    ("floor_divide", np.floor_divide, ("any", "nonzero"), "fi", "same"),
    ("remainder", np.remainder, ("any", "nonzero"), "fi", "same"),
    ("mod", np.mod, ("any", "nonzero"), "fi", "same"),
    ("fmod", np.fmod, ("any", "nonzero"), "fi", "same"),
    ("power", np.power, ("pos", "small"), "f", "same"),
    ("power", np.power, ("small", "pow"), "i", "same"),
    ("pow", np.power, ("pos", "small"), "f", "same"),
    ("float_power", np.float_power, ("pos", "small"), "fi", "float"),
    ("maximum", np.maximum, ("any", "any"), "fib", "same"),
    ("minimum", np.minimum, ("any", "any"), "fib", "same"),
    ("fmax", np.fmax, ("any", "any"), "fi", "same"),
    ("fmin", np.fmin, ("any", "any"), "fi", "same"),
    ("arctan2", np.arctan2, ("any", "any"), "fi", "float"),
    ("hypot", np.hypot, ("any", "any"), "fi", "float"),
    ("logaddexp", np.logaddexp, ("any", "any"), "fi", "float"),
    ("logaddexp2", np.logaddexp2, ("any", "any"), "f", "float"),
    ("copysign", np.copysign, ("any", "any"), "fi", "float"),
    ("heaviside", np.heaviside, ("any", "any"), "fi", "float"),
    ("equal", np.equal, ("any", "any"), "fib", "bool"),
    ("not_equal", np.not_equal, ("any", "any"), "fib", "bool"),
    ("less", np.less, ("any", "any"), "fib", "bool"),
    ("less_equal", np.less_equal, ("any", "any"), "fib", "bool"),
    ("greater", np.greater, ("any", "any"), "fib", "bool"),
    ("greater_equal", np.greater_equal, ("any", "any"), "fib", "bool"),
    ("logical_and", np.logical_and, ("any", "any"), "fib", "bool"),
    ("logical_or", np.logical_or, ("any", "any"), "fib", "bool"),
    ("logical_xor", np.logical_xor, ("any", "any"), "fib", "bool"),
    ("bitwise_and", np.bitwise_and, ("any", "any"), "ib", "same"),
    ("bitwise_or", np.bitwise_or, ("any", "any"), "ib", "same"),
    ("bitwise_xor", np.bitwise_xor, ("any", "any"), "ib", "same"),
    ("left_shift", np.left_shift, ("any", "shift"), "i", "same"),
    ("right_shift", np.right_shift, ("any", "shift"), "i", "same"),
]

_BINARY_CASES = [(n, ref, dom, k, rule) for n, ref, dom, kinds, rule in BINARY for k in kinds]


def _operand(seed, shape, dt, domain):
    if domain in ("pow", "shift"):  # small non-negative integer exponents / shift counts
        return np.random.default_rng(seed).integers(0, 5 if domain == "pow" else 9,
                                                    shape).astype(dt)
    return make_array(seed, shape, dt, domain)


@pytest.mark.parametrize("name,ref,domains,kind,rule", _BINARY_CASES,
                         ids=[f"{c[0]}-{c[3]}" for c in _BINARY_CASES])
@given(shapes2=pair_shapes, seed=seeds)
def test_binary_matches_numpy(name, ref, domains, kind, rule, shapes2, seed):
    dt = _KINDS[kind]
    (s1, s2), _ = shapes2
    x = _operand(seed, s1, dt, domains[0])
    y = _operand(seed + 1, s2, dt, domains[1])
    out = getattr(fnp, name)(fnp.asarray(x), fnp.asarray(y))
    want_dt = _result_dtype(rule, dt)
    if rule == "float":
        x, y = x.astype(np.float32), y.astype(np.float32)
    with np.errstate(all="ignore"):
        want = np.asarray(ref(x, y))
    assert_matches(out, want.astype(want_dt), want_dt, rtol=2e-5)


@pytest.mark.parametrize("op", ["add", "subtract", "multiply", "true_divide", "maximum",
                                "less", "power", "arctan2"])
@given(shape=shapes, seed=seeds, scalar=st.sampled_from([2.0, -1.5, 3, 0.5]))
def test_binary_with_python_scalar_keeps_array_dtype(op, shape, seed, scalar):
    x = make_array(seed, shape, F32, "pos")
    fn, ref = getattr(fnp, op), getattr(np, op)
    for args, ref_args in (((fnp.asarray(x), scalar), (x, np.float32(scalar))),
                           ((scalar, fnp.asarray(x)), (np.float32(scalar), x))):
        out = fn(*args)
        with np.errstate(all="ignore"):
            want = ref(*ref_args)
        assert_matches(out, want, BOOL if op == "less" else F32, rtol=2e-5)


# --- special values ---------------------------------------------------------------------------

def test_rounding_ties_go_to_even():
    x = fnp.array([0.5, 1.5, 2.5, -0.5, -1.5, 2.675])
    assert_matches(fnp.round(x), np.round(np.asarray(x)), F32)
    assert_matches(fnp.rint(x), np.rint(np.asarray(x)), F32)
    assert_matches(fnp.round(x, 2), np.round(np.asarray(x), 2), F32)
    assert_matches(fnp.round(fnp.array([15, 25, -35, 123]), -1),
                   np.round(np.array([15, 25, -35, 123], np.int32), -1), I32)


def test_nan_and_inf_handling():
    x = fnp.array([np.nan, 1.0, -np.inf, 2.0, 0.0])
    y = fnp.array([1.0, np.nan, 3.0, np.inf, -0.0])
    nx, ny = np.asarray(x), np.asarray(y)
    for name in ("maximum", "minimum", "fmax", "fmin", "logaddexp", "hypot", "copysign",
                 "arctan2"):
        with np.errstate(all="ignore"):
            assert_matches(getattr(fnp, name)(x, y), getattr(np, name)(nx, ny), F32)
    assert_matches(fnp.nan_to_num(x), np.nan_to_num(nx), F32)
    assert_matches(fnp.nan_to_num(x, nan=-1.0, posinf=9.0, neginf=-9.0),
                   np.nan_to_num(nx, nan=-1.0, posinf=9.0, neginf=-9.0), F32)
    assert_matches(fnp.signbit(fnp.array([-0.0, 0.0, -1.0, np.inf, -np.inf])),
                   np.array([True, False, True, False, True]), BOOL)
    assert_matches(fnp.logaddexp(fnp.array([1000.0, -np.inf]), fnp.array([1000.0, -np.inf])),
                   np.array([1000.0 + np.log(2), -np.inf]), F32)


def test_division_edge_cases_match_numpy():
    x = np.array([1.0, -1.0, 0.0, 7.0, -7.0, 1.0], np.float32)
    y = np.array([0.0, 0.0, 0.0, -2.0, 2.0, 0.1], np.float32)
    with np.errstate(all="ignore"):
        for name in ("floor_divide", "remainder", "fmod", "true_divide"):
            assert_matches(getattr(fnp, name)(fnp.asarray(x), fnp.asarray(y)),
                           getattr(np, name)(x, y), F32)
        q, r = fnp.divmod(fnp.asarray(x), fnp.asarray(y))
        nq, nr = np.divmod(x, y)
    assert_matches(q, nq, F32)
    assert_matches(r, nr, F32)
    a, b = np.array([-7, 7, -7, 7], np.int32), np.array([2, -2, -2, 2], np.int32)
    assert_matches(fnp.asarray(a) // fnp.asarray(b), a // b, I32)
    assert_matches(fnp.asarray(a) % fnp.asarray(b), a % b, I32)


def test_power_special_cases():
    x = fnp.array([-2.0, -1.0, 0.0, 0.5, 3.0])
    for p in (0, 1, 2, 3, -1, -2):
        with np.errstate(all="ignore"):
            assert_matches(x ** p, np.asarray(x) ** p, F32)
    assert_matches(fnp.power(fnp.array([2, -3, 1, -1, 5]), fnp.array([10, 3, 0, 7, 1])),
                   np.array([1024, -27, 1, -1, 5]), I32)
    assert_matches(fnp.power(fnp.array([1, -1, -1, 2]), fnp.array([-1, -2, -3, -1])),
                   np.array([1, 1, -1, 0]), I32)
    assert_matches(2 ** fnp.arange(4), np.array([1, 2, 4, 8]), I32)
    assert_matches(fnp.square(fnp.array([-3, 4])), np.array([9, 16]), I32)


def test_where_clip_and_friends():
    x = np.array([[-2.0, 0.5, 3.0], [np.nan, 1.0, -1.0]], np.float32)
    c = x > 0
    assert_matches(fnp.where(c, x, 0.0), np.where(c, x, 0), F32)
    assert_matches(fnp.where(c, 1, fnp.zeros(3, fnp.int32)), np.where(c, 1, 0).astype(I32), I32)
    assert_matches(fnp.where(fnp.array([1, 0, 2]), 1.0, -1.0), np.array([1.0, -1.0, 1.0]), F32)
    assert_matches(fnp.clip(x, -1.0, 1.0), np.clip(x, -1, 1), F32)
    assert_matches(fnp.clip(fnp.arange(6), 2), np.clip(np.arange(6), 2, None), I32)
    assert_matches(fnp.clip(fnp.arange(6), None, fnp.array([1, 2, 3, 4, 5, 6])),
                   np.clip(np.arange(6), None, np.arange(1, 7)), I32)
    assert_matches(fnp.heaviside(fnp.array([-1.0, 0.0, 2.0]), 0.5), np.array([0, 0.5, 1.0]),
                   F32)


@given(shapes2=pair_shapes, seed=seeds)
def test_where_broadcasts_three_ways(shapes2, seed):
    (s1, s2), _ = shapes2
    c = make_array(seed, s1, BOOL)
    x = make_array(seed + 1, s2, F32)
    y = make_array(seed + 2, (), I32)
    assert_matches(fnp.where(fnp.asarray(c), fnp.asarray(x), fnp.asarray(y)),
                   np.where(c, x, y).astype(F32), F32)


@given(shapes2=pair_shapes, seed=seeds, equal_nan=st.booleans())
def test_isclose_allclose_array_equal(shapes2, seed, equal_nan):
    (s1, s2), _ = shapes2
    a = make_array(seed, s1, F32)
    b = a + make_array(seed + 1, s1, F32) * 1e-7 if s1 == s2 else make_array(seed + 1, s2, F32)
    if a.size:
        a.flat[0] = np.nan
    assert_matches(fnp.isclose(fnp.asarray(a), fnp.asarray(b), equal_nan=equal_nan),
                   np.isclose(a, b, equal_nan=equal_nan), BOOL)
    assert bool(fnp.allclose(fnp.asarray(a), fnp.asarray(b), equal_nan=equal_nan)) == \
        np.allclose(a, b, equal_nan=equal_nan)
    assert bool(fnp.array_equal(fnp.asarray(a), fnp.asarray(b), equal_nan=equal_nan)) == \
        np.array_equal(a, b, equal_nan=equal_nan)
    assert bool(fnp.array_equiv(fnp.asarray(a), fnp.asarray(b))) == np.array_equiv(a, b)


def test_isclose_with_infinities_and_ints():
    a = fnp.array([np.inf, -np.inf, np.inf, 1.0, 1e10])
    b = fnp.array([np.inf, np.inf, 1e38, 1.0 + 1e-6, 1.00001e10])
    assert_matches(fnp.isclose(a, b), np.isclose(np.asarray(a), np.asarray(b)), BOOL)
    assert_matches(fnp.isclose(fnp.arange(3), fnp.array([0, 1, 3])),
                   np.array([True, True, False]), BOOL)


def test_where_one_argument_is_nonzero():
    got = fnp.where(fnp.array([[0, 1], [2, 0]]))
    want = np.where(np.array([[0, 1], [2, 0]]))
    assert len(got) == 2
    for g, w in zip(got, want):
        assert_matches(g, w.astype(I32), I32)


def test_bitwise_count_and_shifts_unsigned():
    x = fnp.array([0, 1, 7, 255], fnp.uint8)
    assert_matches(fnp.bitwise_count(x), np.bitwise_count(np.asarray(x)), np.uint8)
    u = fnp.array([0x80000000, 8], fnp.uint32)
    assert_matches(u >> 1, np.array([0x40000000, 4], np.uint32), np.uint32)
    assert_matches(fnp.array([-8, 8]) >> 1, np.array([-4, 4]), I32)


@pytest.mark.parametrize("name", ["floor", "ceil", "trunc", "fix"])
@pytest.mark.parametrize("value", [1.6 + 2.4j, np.array([1.6 + 2.4j], np.complex64)])
def test_floor_ceil_trunc_of_complex_raise_like_numpy(name, value):
    from funcgrad.errors import FuncgradTypeError
    with pytest.raises(TypeError):  # NumPy's behaviour: no rounding loop for complex
        getattr(np, name)(value)
    with pytest.raises(FuncgradTypeError, match=r"complex64") as info:
        getattr(fnp, name)(value)
    assert ("trunc" if name == "fix" else name) in str(info.value)
    assert "test_numpy_ufuncs.py" in str(info.value)


@pytest.mark.parametrize("value", [1.6 + 2.4j, -2.5 + 0.5j, np.array([1.5 - 3.5j, 0.2j])])
def test_rint_of_complex_rounds_both_parts(value):
    got = fnp.rint(value)
    want = np.rint(np.asarray(value, np.complex64))
    assert got.dtype == np.complex64
    np.testing.assert_array_equal(np.asarray(got), want)
