"""The Array API standard (2023.12) surface of funcgrad.numpy: the standard's names against
NumPy, `device=`/`copy=` keywords, DLPack in and out, `unique_*` (eager, and under jit/vmap
with `size=`), finfo/iinfo, the inspection namespace, and immutability. The public
conformance suite itself runs outside CI: tools/array_api/run_conformance.sh.
"""

import inspect

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from numpy_strategies import F32, I32, assert_matches, make_array, nonempty_shapes, seeds

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad.errors import ConcretizationTypeError, FuncgradTypeError, FuncgradValueError
from funcgrad.test_util import check_grads

NAMES = {"acos": (np.arccos, "unit"), "asin": (np.arcsin, "unit"), "atan": (np.arctan, "any"),
         "acosh": (np.arccosh, "ge1"), "asinh": (np.arcsinh, "any"),
         "atanh": (np.arctanh, "unit")}


@pytest.mark.parametrize("name", sorted(NAMES))
def test_standard_names_match_numpy(name):
    ref, domain = NAMES[name]
    x = make_array(0, (3, 4), F32, domain)
    f = getattr(fnp, name)
    assert_matches(f(x), ref(x), F32)
    assert_matches(fg.jit(f)(x), ref(x), F32)
    check_grads(f, (make_array(1, (3,), np.float64, domain),), order=2)


def test_atan2_concat_permute_pow_shifts():
    y, x = make_array(0, (2, 3), F32), make_array(1, (2, 3), F32)
    assert_matches(fnp.atan2(y, x), np.arctan2(y, x), F32)
    check_grads(fnp.atan2, (y.astype(np.float64), x.astype(np.float64)), order=1)
    assert_matches(fnp.concat([y, x], axis=1), np.concatenate([y, x], axis=1), F32)
    assert_matches(fnp.permute_dims(y, (1, 0)), y.T, F32)
    assert_matches(fnp.pow(fnp.abs(y), 2), np.abs(y) ** 2, F32)
    i = np.array([1, 2, 3], np.int32)
    assert_matches(fnp.bitwise_left_shift(i, 2), i << 2, I32)
    assert_matches(fnp.bitwise_right_shift(i, 1), i >> 1, I32)
    assert_matches(fnp.bitwise_invert(i), ~i, I32)


# --- signatures and keywords -----------------------------------------------------------------

CREATION = {"arange": (3,), "asarray": ([1, 2],), "empty": ((2,),), "empty_like": (np.ones(2),),
            "eye": (2,), "full": ((2,), 1.0), "full_like": (np.ones(2), 3.0),
            "linspace": (0.0, 1.0, 3), "ones": ((2,),), "ones_like": (np.ones(2),),
            "zeros": ((2,),), "zeros_like": (np.ones(2),)}


@pytest.mark.parametrize("name", sorted(CREATION))
def test_creation_functions_take_device(name):
    f, args = getattr(fnp, name), CREATION[name]
    assert inspect.signature(f).parameters["device"].kind == inspect.Parameter.KEYWORD_ONLY
    want = getattr(np, name.replace("empty", "zeros"))(*args)  # funcgrad's empty is zeros
    for device in (None, "cpu", fg.devices("cpu")[0]):
        out = f(*args, device=device)
        assert out.device == fg.devices("cpu")[0]
        np.testing.assert_allclose(np.asarray(out), want)
    with pytest.raises(FuncgradValueError, match=f"{name}: invalid device 'tpu'"):
        f(*args, device="tpu")


def test_creation_device_under_jit_keeps_the_trace():
    out = fg.jit(lambda x: fnp.zeros_like(x, device="cpu") + x)(fnp.ones(3))
    assert_matches(out, np.ones(3), F32)


def test_asarray_copy():
    src = np.arange(3, dtype=np.int32)
    shared = fnp.asarray(src, copy=False)
    assert np.shares_memory(np.asarray(shared), src)
    copied = fnp.asarray(src, copy=True)
    assert not np.shares_memory(np.asarray(copied), src)
    x = fnp.arange(3)
    assert fnp.asarray(x) is x and fnp.asarray(x, copy=False) is x
    assert fnp.asarray(x, copy=True) is not x
    for bad, kw in (([1, 2], {}), (src, {"dtype": fnp.float32}), (x, {"dtype": "float32"})):
        with pytest.raises(FuncgradValueError, match="asarray: copy=False, but"):
            fnp.asarray(bad, copy=False, **kw)
    with pytest.raises(FuncgradValueError, match="x64 is off"):
        fnp.asarray(np.ones(2), copy=False)  # float64 must become float32


class _Holder:
    """An array-like whose `__array__` hands out its NumPy array itself."""

    def __init__(self, a):
        self.a = a

    def __array__(self, dtype=None, copy=None):
        return self.a


@pytest.mark.parametrize("convert", [
    fnp.asarray, fnp.array, fnp.copy, fg.device_put, lambda a: fnp.asarray(a, copy=True),
    lambda a: fnp.asarray(a, fnp.int32), lambda a: fnp.array(a, ndmin=3),
    lambda a: fnp.full((2, 3), a), lambda a: fnp.full_like(a, a), lambda a: fnp.asarray(a[:, 1]),
    lambda a: fnp.asarray(_Holder(a)), lambda a: fg.device_put({"w": a})["w"],
    lambda a: fnp.meshgrid(a[0], a[1], sparse=True)[1],
], ids=["asarray", "array", "copy", "device_put", "copy=True", "dtype", "ndmin", "full",
        "full_like", "view", "__array__", "device_put-tree", "meshgrid"])
def test_conversions_do_not_share_the_callers_buffer(convert):
    src = np.arange(6, dtype=np.int32).reshape(2, 3)
    out = convert(src)
    before = np.array(out)
    src[...] = -7  # funcgrad arrays are immutable: JAX copies here too
    np.testing.assert_array_equal(np.asarray(out), before)
    assert not np.shares_memory(np.asarray(out), src)


def test_only_copy_false_shares_and_arrays_are_not_copied_twice():
    src = np.arange(3, dtype=np.float32)
    shared = fnp.asarray(src, copy=False)
    src[0] = 5.0
    assert np.asarray(shared)[0] == 5.0  # the Array API's copy=False: the same memory
    assert np.shares_memory(np.asarray(fnp.array(src, copy=False)), src)
    x = fnp.arange(3.0)
    assert fnp.asarray(x) is x and fg.device_put(x) is x
    assert not np.shares_memory(np.asarray(fnp.copy(x)), np.asarray(x))  # donation-safe


def test_astype_and_clip_follow_the_standard():
    x = fnp.arange(5)
    assert list(inspect.signature(fnp.astype).parameters) == ["x", "dtype", "copy", "device"]
    assert_matches(fnp.astype(x, fnp.float32, device="cpu"), np.arange(5.0), F32)
    same = fnp.astype(x, fnp.int32, copy=False)
    assert same is x and fnp.astype(x, fnp.int32, copy=True) is not x
    assert fnp.astype(x, fnp.int32) is x  # JAX's default copy=False (the standard's is True)
    assert x.astype(fnp.float32).dtype == F32
    assert_matches(fnp.clip(x, min=1, max=3), np.clip(np.arange(5), 1, 3), I32)
    assert_matches(fnp.clip(x, max=2), np.minimum(np.arange(5), 2), I32)
    assert_matches(fnp.clip(x, 1.5, 3.5), np.array([1.5, 1.5, 2, 3, 3.5]), F32)  # as JAX
    assert fnp.clip(x) is x
    f = np.array([np.nan, -2.0, 5.0], np.float32)
    assert_matches(fnp.clip(f, min=fnp.zeros(3), max=1.0), np.clip(f, 0, 1), F32)


def test_array_namespace_and_methods():
    x = fnp.ones((2, 3))
    assert x.__array_namespace__() is fnp
    assert x.__array_namespace__(api_version="2023.12") is fnp
    with pytest.raises(FuncgradValueError, match="api_version '2030.01'"):
        x.__array_namespace__(api_version="2030.01")
    assert fnp.__array_api_version__ == "2023.12"
    assert x.to_device("cpu").device == x.device == fg.devices("cpu")[0]
    assert x.to_device(x.device, stream=None) is x
    assert x.mT.shape == (3, 2)
    assert fg.jit(lambda y: y.__array_namespace__().sum(y.to_device("cpu")))(x) == 6.0


def test_arrays_are_immutable_with_the_at_hint():
    x = fnp.zeros(3)
    with pytest.raises(TypeError, match=r"x = x.at\[idx\].set\(y\)"):
        x[0] = 1.0
    assert_matches(x.at[0].set(1.0), np.array([1.0, 0, 0]), F32)


# --- DLPack -----------------------------------------------------------------------------------

@given(shape=nonempty_shapes, seed=seeds, dt=st.sampled_from([np.float32, np.int32, np.bool_,
                                                              np.uint8, np.complex64]))
def test_dlpack_round_trips(shape, seed, dt):
    src = np.asarray(make_array(seed, shape, dt))
    x = fnp.from_dlpack(src)
    assert x.dtype == np.dtype(dt)
    np.testing.assert_array_equal(np.asarray(x), src)
    assert x.__dlpack_device__() == (1, 0)
    out = np.from_dlpack(x)  # numpy asks for a versioned capsule: read-only
    np.testing.assert_array_equal(out, src)
    assert not out.flags.writeable
    back = fnp.from_dlpack(x, copy=True)
    np.testing.assert_array_equal(np.asarray(back), src)


def test_dlpack_copy_and_legacy_consumers():
    src = np.arange(4, dtype=np.float32)
    assert np.shares_memory(np.asarray(fnp.from_dlpack(src, copy=False)), src)
    assert not np.shares_memory(np.asarray(fnp.from_dlpack(src, copy=True)), src)
    x = fnp.asarray(src)
    for kw in ({}, {"max_version": (0, 0)}, {"max_version": (1, 0), "copy": True},
               {"copy": False, "dl_device": (1, 0)}):
        assert type(x.__dlpack__(**kw)).__name__ == "PyCapsule"
    with pytest.raises(FuncgradValueError, match="from_dlpack: copy=False, but float64"):
        fnp.from_dlpack(np.ones(2), copy=False)
    with pytest.raises(FuncgradTypeError, match="from_dlpack: list does not support DLPack"):
        fnp.from_dlpack([1, 2])
    fg.config.update("enable_x64", True)
    assert fnp.from_dlpack(np.ones(2), copy=False).dtype == np.float64


def test_dlpack_of_a_tracer_is_an_error():
    with pytest.raises(ConcretizationTypeError, match="__dlpack__: a traced value"):
        fg.jit(lambda x: x.__dlpack__())(fnp.ones(2))


# --- unique_* ---------------------------------------------------------------------------------

small_ints = hnp.arrays(np.int32, hnp.array_shapes(min_dims=0, max_dims=2, max_side=6),
                        elements=st.integers(-3, 3))


@given(x=small_ints)
def test_unique_functions_match_numpy(x):
    values, indices, inverse, counts = fnp.unique_all(x)
    want_v, want_i, want_inv, want_c = np.unique(x, return_index=True, return_inverse=True,
                                                 return_counts=True)
    assert_matches(values, want_v, I32)
    assert_matches(indices, want_i, I32)
    assert_matches(inverse, want_inv.reshape(x.shape), I32)
    assert_matches(counts, want_c, I32)
    assert_matches(fnp.unique_values(x), want_v, I32)
    assert_matches(fnp.unique_counts(x).counts, want_c, I32)
    assert_matches(fnp.unique_inverse(x).inverse_indices, want_inv.reshape(x.shape), I32)
    assert_matches(fnp.unique(x), want_v, I32)


def test_unique_nans_and_zeros():
    x = np.array([np.nan, 0.0, -0.0, 1.0, np.nan], np.float32)
    assert_matches(fnp.unique_values(x), np.array([0.0, 1.0, np.nan, np.nan]), F32)
    assert_matches(fnp.unique_counts(x).counts, np.array([2, 1, 1, 1]), I32)
    assert_matches(fnp.unique(x), np.unique(x), F32)  # NumPy's unique: NaNs collapse
    assert_matches(fnp.unique(x, equal_nan=False), np.unique(x, equal_nan=False), F32)


@given(x=small_ints, size=st.integers(1, 8))
def test_unique_with_size_under_jit_pads_and_truncates(x, size):
    got = fg.jit(lambda v: fnp.unique_all(v, size=size, fill_value=9))(x)
    want_v, want_i, want_inv, want_c = np.unique(x, return_index=True, return_inverse=True,
                                                 return_counts=True)
    n, pad = min(size, want_v.size), max(size - want_v.size, 0)
    assert_matches(got.values, np.concatenate([want_v[:n], np.full(pad, 9)]), I32)
    assert_matches(got.indices, np.concatenate([want_i[:n], np.zeros(pad)]), I32)
    assert_matches(got.counts, np.concatenate([want_c[:n], np.zeros(pad)]), I32)
    assert_matches(got.inverse_indices, want_inv.reshape(x.shape), I32)
    eager = fnp.unique_all(x, size=size, fill_value=9)
    for a, b in zip(got, eager):
        assert_matches(a, b, I32)


def test_unique_default_fill_and_empty_input():
    assert_matches(fnp.unique_values(np.array([5, 2, 5]), size=4), np.array([2, 5, 2, 2]), I32)
    empty = fnp.unique_all(np.zeros((0, 2), np.float32))
    assert empty.values.shape == (0,) and empty.inverse_indices.shape == (0, 2)
    assert_matches(fnp.unique_counts(np.zeros(0), size=2).counts, np.zeros(2), I32)


def test_unique_under_jit_needs_size():
    with pytest.raises(ConcretizationTypeError, match="(?s)unique_values: .*hint: pass a "
                                                      "static size=N"):
        fg.jit(fnp.unique_values)(fnp.arange(3))


def test_unique_vmap_and_grad():
    xs = np.array([[1, 1, 2], [3, 0, 3]], np.int32)
    got = fg.vmap(lambda v: fnp.unique_counts(v, size=3))(xs)
    for i, row in enumerate(xs):
        want = fnp.unique_counts(row, size=3)
        assert_matches(got.values[i], want.values, I32)
        assert_matches(got.counts[i], want.counts, I32)
    check_grads(lambda v: fnp.unique_values(v, size=3) * 2.0,
                (np.array([0.3, -1.2, 2.5], np.float64),), order=2)


# --- dtypes -----------------------------------------------------------------------------------

def test_finfo_iinfo_fields_are_python_numbers():
    for dt, real in ((fnp.float32, F32), (fnp.float16, np.float16), (fnp.complex64, F32)):
        for arg in (dt, np.dtype(dt), fnp.ones(1, dt)):
            info = fnp.finfo(arg)
            assert type(info.bits) is int and info.dtype == np.dtype(real)
            for f in ("eps", "max", "min", "smallest_normal"):
                assert type(getattr(info, f)) is float
                assert getattr(info, f) == float(getattr(np.finfo(real), f))
        assert info.tiny == np.finfo(real).tiny  # NumPy's other fields pass through
    info = fnp.iinfo(fnp.arange(2, dtype=fnp.uint8))
    assert (info.bits, info.min, info.max, info.dtype) == (8, 0, 255, np.dtype(np.uint8))
    assert type(fnp.iinfo(fnp.int32).max) is int
    with pytest.raises(FuncgradTypeError, match="iinfo: dtype float32 is not an integer"):
        fnp.iinfo(fnp.float32)


def test_scalar_types_compare_like_jax():
    assert (fnp.float64 == None) is False  # noqa: E711  (np.dtype(None) is float64)
    assert fnp.float64 != "float64" and fnp.int32 != fnp.int64
    assert fnp.float32 == np.float32 and fnp.float32 == np.dtype("float32")
    assert np.dtype("float32") == fnp.float32 and fnp.float32 in {np.float32: 1}
    assert fnp.isdtype(fnp.uint8, fnp.uint8) and fnp.isdtype(fnp.uint8, (fnp.int8, "integral"))


def test_namespace_info():
    info = fnp.__array_namespace_info__()
    assert info.capabilities()["data-dependent shapes"] is True
    assert info.default_device() in info.devices()
    assert info.default_dtypes()["real floating"] == F32
    assert set(info.dtypes(kind="real floating")) == {"float32"}
    assert set(info.dtypes(kind=("bool", "unsigned integer"))) == {"bool", "uint8", "uint16",
                                                                   "uint32"}
    with pytest.raises(FuncgradValueError, match="unknown kind 'float'"):
        info.dtypes(kind="float")
    fg.config.update("enable_x64", True)
    assert info.default_dtypes()["indexing"] == np.int64
    assert "complex128" in info.dtypes()


# --- small fixes the conformance suite found ------------------------------------------------

def test_special_values_and_edge_cases():
    x = np.array([-np.nan, np.nan, -0.0, 0.0, -np.inf], np.float32)
    assert_matches(fnp.signbit(x), np.signbit(x))
    assert_matches(fnp.copysign(1.0, x), np.copysign(1.0, x), F32)
    u = np.ones(3, np.uint8)
    assert fnp.vecdot(u, u).dtype == np.uint8
    assert_matches(fnp.eye(2, k=2 ** 62), np.zeros((2, 2)), F32)
    assert_matches(fnp.repeat(np.arange(3), np.array([2])), np.repeat(np.arange(3), [2]), I32)
    with pytest.raises(IndexError, match="expand_dims: axis 3 is out of bounds"):
        fnp.expand_dims(fnp.ones(2), axis=3)


def test_size_zero_boolean_mask_selects_nothing():
    x = np.arange(6.0, dtype=np.float32).reshape(3, 2)
    assert fnp.asarray(x)[np.zeros((0,), bool)].shape == (0, 2)
    assert fnp.asarray(x[:1])[np.zeros((0,), bool)].shape == x[:1][np.zeros((0,), bool)].shape
    with pytest.raises(IndexError, match=r"boolean index of shape \(2,\)"):
        fnp.asarray(x)[np.zeros(2, bool)]


def test_pow_special_cases_follow_c99():
    x = np.array([-np.inf, -0.0, -np.inf, -0.0, 4.0], np.float32)
    y = np.array([0.5, 0.5, 3.0, 3.0, 0.5], np.float32)
    want = np.array([np.inf, 0.0, -np.inf, -0.0, 2.0], np.float32)
    assert_matches(fnp.power(x, y), want, F32)
    for xi, wi in zip(x[:2], want[:2]):  # a rank-0 exponent: no NumPy sqrt fast path
        got = np.asarray(fnp.power(fnp.asarray(xi), 0.5))
        assert got == wi and np.signbit(got) == np.signbit(wi)


def test_eager_results_never_share_a_numpy_operands_memory():
    # a view op's eager result (reshape, transpose, ...) would otherwise be a view of the
    # caller's NumPy array, and change when the caller writes to it (JAX copies its inputs)
    ops = {"reshape": lambda a: fnp.reshape(a, (2, 3)), "ravel": fnp.ravel,
           "transpose": fnp.transpose, "squeeze": lambda a: fnp.squeeze(a[None]),
           "expand_dims": lambda a: fnp.expand_dims(a, 0), "astype": lambda a: fnp.astype(
               a, np.float32), "broadcast_to": lambda a: fnp.broadcast_to(a, (2, 2, 3)),
           "lax.reshape": lambda a: fg.lax.reshape(a, (3, 2)),
           "lax.slice": lambda a: fg.lax.slice(a, (0, 0), (1, 3)),
           "real": fnp.real, "atleast_3d": fnp.atleast_3d}
    for name, op in ops.items():
        a = np.arange(6, dtype=np.float32).reshape(2, 3)
        out = op(a)
        before = np.array(out)
        a[...] = -1.0
        np.testing.assert_array_equal(np.asarray(out), before, err_msg=name)


def test_numpy_array_of_an_array_is_a_writable_copy():
    x = fnp.arange(3.0)
    b = np.array(x)  # NumPy 2 passes copy=True to __array__ and trusts it
    assert b.flags.writeable and not np.shares_memory(b, np.asarray(x))
    b[0] = 7.0
    np.testing.assert_array_equal(x, [0.0, 1.0, 2.0])
    assert not np.asarray(x).flags.writeable  # a read-only view, as of a JAX array
