"""funcgrad.ops (segment reductions) and funcgrad.image with the transforms: derivatives in
float64, vmap against a loop, jit against eager; values against NumPy (JAX's recorded values
are in test_jax_api_golden.py)."""

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import errors, image, ops
from funcgrad.test_util import check_grads

IDS = np.array([0, 2, 2, 1, 0, 3, 1, 7])  # 7 is out of range (dropped)


def numpy_segment(op, data, ids, n):
    init = {"sum": 0.0, "prod": 1.0, "max": -np.inf, "min": np.inf}[op]
    ufunc = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}[op]
    out = np.full((n,) + data.shape[1:], init)
    keep = (ids >= 0) & (ids < n)
    ufunc.at(out, ids[keep], data[keep])
    return out


@pytest.mark.parametrize("op", ["sum", "prod", "max", "min"])
def test_segments_values_derivatives_batching_and_jit(op):
    fn = getattr(ops, f"segment_{op}")
    rng = np.random.default_rng(0)
    data = rng.standard_normal((8, 3))
    with fg.enable_x64(True):
        np.testing.assert_allclose(fn(data, IDS, 4), numpy_segment(op, data, IDS, 4))
        check_grads(lambda d: fn(d, IDS, 4), (data,), order=2)
        check_grads(lambda d: fn(d, IDS, 4, bucket_size=3), (data,), order=1)
        batch = rng.standard_normal((5, 8, 3))
        got = fg.vmap(lambda d: fn(d, IDS, 4))(batch)
        np.testing.assert_allclose(got, np.stack([numpy_segment(op, b, IDS, 4) for b in batch]))
        ids_batch = rng.integers(0, 4, (5, 8))
        got = fg.vmap(lambda i: fn(data, i, 4))(ids_batch)
        np.testing.assert_allclose(got, np.stack([numpy_segment(op, data, i, 4)
                                                  for i in ids_batch]))
        np.testing.assert_allclose(fg.jit(lambda d, i: fn(d, i, 4))(data, IDS),
                                   fn(data, IDS, 4))


def test_segment_options_and_errors():
    data = fnp.arange(1.0, 6.0)
    np.testing.assert_allclose(ops.segment_sum(data, fnp.array([0, 0, 1, -1, 9])),
                               [3.0, 3.0] + [0.0] * 7 + [5.0])  # max + 1 segments; -1 dropped
    np.testing.assert_allclose(ops.segment_sum(data, fnp.array([0, 0, 1, -1, 9]), 2,
                                               mode="clip"), [7.0, 8.0])
    np.testing.assert_allclose(ops.segment_max(fnp.array([1, 5, 2], fnp.int32),
                                               fnp.array([0, 0, 2]), 3),
                               [5, np.iinfo(np.int32).min, 2])
    with pytest.raises(errors.ConcretizationTypeError, match="num_segments"):
        fg.jit(lambda d, i: ops.segment_sum(d, i))(data, fnp.array([0, 1, 1, 0, 2]))
    with pytest.raises(errors.FuncgradTypeError, match="integers"):
        ops.segment_sum(data, fnp.ones(5))
    with pytest.raises(errors.FuncgradValueError, match="non-negative"):
        ops.segment_sum(data, fnp.zeros(5, fnp.int32), -1)


@pytest.mark.parametrize("method", ["linear", "cubic", "lanczos3", "lanczos5", "cubic-pytorch",
                                    "area", "nearest"])
def test_resize_derivatives_batching_and_jit(method):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 5, 2))
    with fg.enable_x64(True):
        for shape in [(3, 8, 2), (3, 2, 2)]:
            f = lambda x, shape=shape: image.resize(x, shape, method)  # noqa: E731
            check_grads(f, (x,), order=1)
            batch = rng.standard_normal((2,) + x.shape)
            np.testing.assert_allclose(fg.vmap(f)(batch), np.stack([f(b) for b in batch]),
                                       rtol=1e-12)
            np.testing.assert_allclose(fg.jit(f)(x), f(x), rtol=1e-12)


def test_resize_semantics():
    x = fnp.arange(6.0).reshape(2, 3)
    assert image.resize(x, (2, 3), "cubic") is not None
    np.testing.assert_allclose(image.resize(x, (2, 3), "cubic"), x)  # identity
    assert image.resize(fnp.arange(4, dtype=fnp.int32), (8,), "nearest").dtype == np.int32
    assert image.resize(fnp.arange(4, dtype=fnp.int32), (8,), "linear").dtype == np.float32
    np.testing.assert_allclose(image.resize(fnp.array([0.0, 1.0]), (4,), "bilinear"),
                               [0.0, 0.25, 0.75, 1.0])
    assert image.ResizeMethod.from_string("tricubic") is image.ResizeMethod.CUBIC
    with pytest.raises(errors.FuncgradValueError, match="Unknown resize method"):
        image.resize(x, (4, 4), "gaussian")
    with pytest.raises(errors.FuncgradValueError, match="length equal"):
        image.resize(x, (4,), "linear")
    with pytest.raises(errors.FuncgradValueError, match="Nearest"):
        image.scale_and_translate(x, (4, 4), (0, 1), fnp.ones(2), fnp.zeros(2), "nearest")


def test_scale_and_translate_derivatives_in_scale_and_translation():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((6, 5))
    with fg.enable_x64(True):
        f = lambda x, s, t: image.scale_and_translate(  # noqa: E731
            x, (7, 4), (0, 1), s, t, "lanczos3")
        check_grads(f, (x, np.array([1.3, 0.7]), np.array([0.4, -0.3])), order=1,
                    atol=1e-5, rtol=1e-5)
        scales = rng.uniform(0.5, 1.5, (3, 2))
        got = fg.vmap(lambda s: f(x, s, np.zeros(2)))(scales)
        np.testing.assert_allclose(got, np.stack([f(x, s, np.zeros(2)) for s in scales]),
                                   rtol=1e-12)
