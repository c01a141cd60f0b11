"""Operators and array methods on concrete arrays and on tracers: `+ - * / // % ** @ & | ^
<< >> ~ -x abs`, comparisons, reflected forms, NumPy arrays on the left, `.T .sum()
.reshape() ...`, iteration; and funcgrad.numpy inside make_jaxpr, grad, vmap and jit.
"""

import operator

import numpy as np
import pytest
from hypothesis import given
from numpy_strategies import F32, I32, assert_matches, make_array, pair_shapes, seeds

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad.test_util import check_grads

_FLOAT_OPS = [operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
              operator.mod, operator.lt, operator.le, operator.gt, operator.ge, operator.eq,
              operator.ne]
_INT_OPS = [operator.and_, operator.or_, operator.xor, operator.lshift, operator.rshift]


@pytest.mark.parametrize("op", _FLOAT_OPS + _INT_OPS, ids=lambda f: f.__name__)
@given(shapes2=pair_shapes, seed=seeds)
def test_binary_operators_and_reflected_forms(op, shapes2, seed):
    (s1, s2), _ = shapes2
    dt = I32 if op in _INT_OPS else F32
    x = make_array(seed, s1, dt, "nonzero")
    y = make_array(seed + 1, s2, dt, "nonzero")
    if op in (operator.lshift, operator.rshift):
        y = np.abs(y) % 8
    with np.errstate(all="ignore"):
        want = op(x, y)
    kind = np.bool_ if want.dtype == np.bool_ else dt
    fx, fy = fnp.asarray(x), fnp.asarray(y)
    assert_matches(op(fx, fy), want, kind)
    assert_matches(op(x, fy), want, kind)  # NumPy array on the left defers to funcgrad
    assert isinstance(op(x, fy), fnp.ndarray)
    assert_matches(op(fx, y), want, kind)
    s = 3 if dt == I32 else 1.5
    with np.errstate(all="ignore"):
        assert_matches(op(s, fx), op(dt.type(s), x), kind)
        assert_matches(op(fx, s), op(x, dt.type(s)), kind)


def test_unary_operators_pow_matmul_divmod():
    x = np.array([[-1.5, 2.0], [0.5, -3.0]], np.float32)
    fx = fnp.asarray(x)
    assert_matches(-fx, -x, F32)
    assert_matches(+fx, x, F32)
    assert_matches(abs(fx), abs(x), F32)
    assert_matches(~fnp.array([1, 2]), ~np.array([1, 2]), I32)
    assert_matches(~fnp.array([True, False]), np.array([False, True]), np.bool_)
    assert_matches(fx ** 2, x ** 2, F32)
    assert_matches(2.0 ** fx, 2.0 ** x, F32)
    assert_matches(fx @ fx, x @ x, F32)
    assert_matches(x @ fx, x @ x, F32)
    q, r = divmod(fx, 2.0)
    assert_matches(q, x // 2, F32)
    assert_matches(r, x % 2, F32)
    assert_matches(round(fnp.asarray(2.567), 2), np.float32(2.57), F32)
    assert f"{fnp.asarray(2.5):.2f}" == "2.50"
    assert (fnp.ones(2) == None) is False  # noqa: E711
    assert (fnp.ones(2) != "a") is True


def test_methods_and_properties():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    fx = fnp.asarray(x)
    assert_matches(fx.T, x.T, F32)
    assert_matches(fx.mT, np.swapaxes(x, -1, -2), F32)
    assert_matches(fx.sum(), x.sum(), F32)
    assert_matches(fx.sum(axis=(0, 2), keepdims=True), x.sum(axis=(0, 2), keepdims=True), F32)
    assert_matches(fx.mean(1), x.mean(1), F32)
    assert_matches(fx.var(ddof=1), x.var(ddof=1), F32, rtol=1e-4)
    assert_matches(fx.std(0), x.std(0), F32)
    assert_matches(fx.max(-1), x.max(-1), F32)
    assert_matches(fx.min(), x.min(), F32)
    assert_matches(fx.prod(0), x.prod(0), F32)
    assert_matches(fx.argmax(), np.int32(x.argmax()), I32)
    assert_matches(fx.argmin(axis=1), x.argmin(axis=1).astype(I32), I32)
    assert_matches((fx > 3).all(axis=0), (x > 3).all(axis=0), np.bool_)
    assert_matches((fx > 3).any(), (x > 3).any(), np.bool_)
    assert_matches(fx.cumsum(axis=2), x.cumsum(axis=2), F32)
    assert_matches(fx.cumprod(), x.cumprod(), F32, rtol=1e-4)
    assert_matches(fx.reshape(4, 6), x.reshape(4, 6), F32)
    assert_matches(fx.reshape((6, -1)), x.reshape((6, -1)), F32)
    assert_matches(fx.reshape(-1), x.reshape(-1), F32)
    assert_matches(fx.transpose(1, 0, 2), x.transpose(1, 0, 2), F32)
    assert_matches(fx.transpose((2, 0, 1)), x.transpose((2, 0, 1)), F32)
    assert_matches(fx.transpose(), x.transpose(), F32)
    assert_matches(fx.swapaxes(0, 2), x.swapaxes(0, 2), F32)
    assert_matches(fx[:1].squeeze(0), x[:1].squeeze(0), F32)
    assert_matches(fx.flatten(), x.flatten(), F32)
    assert_matches(fx.ravel(), x.ravel(), F32)
    assert_matches(fx.astype(fnp.int32), x.astype(np.int32), I32)
    assert_matches(fx.clip(2, 5), x.clip(2, 5), F32)
    assert_matches(fx.clip(max=5), x.clip(max=5), F32)
    assert_matches((fx / 7).round(2), (x / 7).round(2), F32)
    assert_matches(fx[0].dot(fx[0].T), x[0].dot(x[0].T), F32)
    assert_matches(fx.conj(), x, F32)
    assert_matches(fx.real, x, F32)
    assert_matches(fx.imag, np.zeros_like(x), F32)
    assert_matches(fx[0].diagonal(), x[0].diagonal(), F32)
    assert_matches(fx[0].trace(), x[0].trace(), F32)
    assert fx.nbytes == x.nbytes and fx.itemsize == 4 and len(fx) == 2
    rows = list(fx)
    assert len(rows) == 2
    for r, w in zip(rows, x):
        assert_matches(r, w, F32)
    with pytest.raises(TypeError, match="0-d"):
        iter(fnp.asarray(1.0))


def _loss(w, x):
    return ((x @ w) ** 2).sum() / 2 + fnp.abs(w).mean() - fnp.maximum(w, 0.0).sum()


def test_operators_on_tracers_in_make_jaxpr():
    x, w = fnp.ones((4, 3)), fnp.ones((3, 2))
    jaxpr = fg.make_jaxpr(lambda x, w: (x @ w + 1.0).T.sum(axis=0) * 2 - x.mean())(x, w)
    text = str(jaxpr)
    for prim in ("dot_general", "add", "transpose", "reduce_sum", "mul", "sub", "div"):
        assert prim in text, prim
    assert [a.shape for a in jaxpr.out_avals] == [(4,)]
    assert str(jaxpr.out_avals[0]) == "f32[4]"
    jaxpr = fg.make_jaxpr(lambda x: (x > 0) & (x < 1) | ~(x == 2))(x)
    assert jaxpr.out_avals[0].dtype == np.bool_


def test_grad_of_matmul_sum_is_analytic():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 3)).astype(np.float32)
    w = rng.standard_normal((3, 2)).astype(np.float32)
    g = fg.grad(lambda w: (fnp.asarray(x) @ w).sum())(fnp.asarray(w))
    assert_matches(g, np.broadcast_to(x.sum(0)[:, None], (3, 2)), F32, rtol=1e-5)
    gx = fg.grad(lambda x: (x @ fnp.asarray(w)).sum())(fnp.asarray(x))
    assert_matches(gx, np.broadcast_to(w.sum(1), (5, 3)), F32, rtol=1e-5)
    g = fg.grad(_loss)(fnp.asarray(w), fnp.asarray(x))
    want = x.T @ (x @ w) + np.sign(w) / w.size - (w > 0)
    assert_matches(g, want, F32, rtol=1e-4, atol=1e-5)


def test_grad_through_broadcasting_reductions_and_where():
    x = fnp.array([[1.0, -2.0, 3.0]])
    g = fg.grad(lambda b: (fnp.ones((4, 3)) * b).sum())(x)
    assert_matches(g, np.full((1, 3), 4.0), F32)
    g = fg.grad(lambda x: fnp.where(x > 0, x, fnp.log(x)).sum())(fnp.array([-1.0, 2.0]))
    assert_matches(g, np.array([-1.0, 1.0]), F32)  # log(-1) is NaN but unused
    g = fg.grad(lambda x: fnp.mean(x, axis=1, keepdims=True).sum())(fnp.ones((2, 4)))
    assert_matches(g, np.full((2, 4), 0.25), F32)
    g = fg.grad(lambda x: fnp.max(x))(fnp.array([1.0, 5.0, 2.0]))
    assert_matches(g, np.array([0.0, 1.0, 0.0]), F32)


@pytest.mark.parametrize("fn", [
    lambda x, y: fnp.logaddexp(x, y).sum(),
    lambda x, y: fnp.hypot(x, y).sum(),
    lambda x, y: (fnp.var(x, axis=0) * fnp.std(y)).sum(),
    lambda x, y: fnp.einsum("ij,kj->ik", x, y).sum(),
    lambda x, y: (fnp.matmul(x[None], y.T) ** 2).sum(),
    lambda x, y: fnp.pad(x, ((1, 2), (2, 1)), mode="reflect").sum() * y.sum(),
    lambda x, y: fnp.cumsum(x * y, axis=1).sum(),
    lambda x, y: fnp.linalg.norm(x - y),
    lambda x, y: fnp.tanh(fnp.concatenate([x, y], axis=1)).mean(),
    lambda x, y: (fnp.tile(x, (2, 1)) * fnp.repeat(y, 2, axis=0)).sum(),
    lambda x, y: fnp.diagonal(x @ y.T).sum() + fnp.trace(fnp.roll(x, 1, 0)),
    lambda x, y: fnp.sinc(x).sum() + fnp.arctan2(x, y).sum(),
], ids=["logaddexp", "hypot", "var_std", "einsum", "matmul_batch", "pad", "cumsum", "norm",
        "concat", "tile_repeat", "diagonal_trace", "sinc_arctan2"])
def test_check_grads_of_composites(fn):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 3)) + 0.1
    y = rng.standard_normal((3, 3)) + 0.1
    check_grads(fn, (x, y), order=1)


def test_vmap_and_jit_of_numpy_functions():
    x = fnp.asarray(make_array(0, (4, 3), F32))
    w = fnp.asarray(make_array(1, (3, 2), F32))
    f = lambda row: fnp.tanh(row @ w).sum() + fnp.where(row > 0, row, 0.0).max()
    got = fg.vmap(f)(x)
    want = fnp.stack([f(r) for r in x])
    assert_matches(got, np.asarray(want), F32, rtol=1e-5)
    g = fg.jit(lambda x: (fnp.mean(x, axis=0) + fnp.einsum("ij->j", x)) @ w)
    assert_matches(g(x), np.asarray((fnp.mean(x, 0) + x.sum(0)) @ w), F32, rtol=1e-5)


_PER_EXAMPLE = {
    "ufuncs": lambda x: fnp.logaddexp(x, 1.0) * fnp.sign(x) + fnp.floor_divide(x, 0.7),
    "reductions": lambda x: fnp.var(x, axis=0) + fnp.max(x, axis=1).sum() + fnp.argmax(x),
    "cumsum_median": lambda x: fnp.cumsum(x, axis=1)[-1] + fnp.median(x, axis=0),
    "shape": lambda x: fnp.concatenate([fnp.flip(x, 0), x.T], axis=1).reshape(-1)[:5],
    "pad_roll": lambda x: fnp.roll(fnp.pad(x, 1, mode="edge"), 2, axis=1).sum(axis=0),
    "linalg": lambda x: fnp.einsum("ij,jk->ik", x, x.T).trace() + fnp.linalg.norm(x),
    "where_clip": lambda x: fnp.where(x > 0, fnp.sqrt(fnp.abs(x)), fnp.clip(x, -0.5, 0.5)),
    "tril_diag": lambda x: fnp.tril(x, -1) + fnp.diag(fnp.diagonal(x)),
}


@pytest.mark.parametrize("name", list(_PER_EXAMPLE))
def test_vmap_and_jit_agree_with_eager(name):
    f = _PER_EXAMPLE[name]
    xs = fnp.asarray(make_array(3, (4, 3, 3), F32))
    want = np.stack([np.asarray(f(x)) for x in xs])
    assert_matches(fg.vmap(f)(xs), want, want.dtype, rtol=1e-5, atol=1e-5)
    assert_matches(fg.jit(f)(xs[0]), want[0], want.dtype, rtol=1e-5, atol=1e-5)


def test_index_methods_and_setitem_error():
    x = fnp.array([[3, 1, 2], [0, 5, 4]])
    assert_matches(x.sort(), np.sort(np.asarray(x)), I32)
    assert_matches(x.argsort(axis=0), np.argsort(np.asarray(x), axis=0).astype(I32), I32)
    assert_matches(x.take(fnp.array([2, 0]), axis=1), np.asarray(x)[:, [2, 0]], I32)
    for g, w in zip(x.nonzero(), np.asarray(x).nonzero()):
        assert_matches(g, w.astype(I32), I32)
    with pytest.raises(TypeError, match=r"immutable.*\.at\[idx\]\.set"):
        x[0, 0] = 1
