"""funcgrad.nn losses (optax names): values vs float64 NumPy, derivatives, float32 stability at
extreme logits, several losses in one backward pass."""

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import nn, random
from funcgrad.errors import FuncgradTypeError, FuncgradValueError
from funcgrad.test_util import check_grads

RNG = np.random.default_rng(0)
LOGITS = np.array([[100.0, 100.0, 101.0], [0.0, -1000.0, 3.0], [-2.0, 0.5, 1.0],
                   [1000.0, -1000.0, 0.0]], np.float32)
INT_LABELS = np.array([2, 1, 0, 1])
ONE_HOT = np.eye(3, dtype=np.float32)[INT_LABELS]


def _np_log_softmax(x):
    x = np.asarray(x, np.float64)
    m = x.max(-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))


def _np_softmax(x):
    return np.exp(_np_log_softmax(x))


def test_softmax_cross_entropy_values_and_stability():
    want = -(ONE_HOT * _np_log_softmax(LOGITS)).sum(-1)
    ce = nn.softmax_cross_entropy(fnp.asarray(LOGITS), fnp.asarray(ONE_HOT))
    ce_int = nn.softmax_cross_entropy_with_integer_labels(fnp.asarray(LOGITS),
                                                          fnp.asarray(INT_LABELS))
    for got in (ce, ce_int):
        assert got.dtype == np.float32 and got.shape == (4,)
        np.testing.assert_allclose(got, want, rtol=1e-6)
    assert float(ce[0]) == pytest.approx(0.5514447, rel=1e-6)  # [100, 100, 101], label 2
    assert float(ce[1]) == pytest.approx(1003.0485873, rel=1e-6)  # label on the -1000 logit


@pytest.mark.parametrize("integer", [False, True])
def test_cross_entropy_gradient_is_softmax_minus_onehot(integer):
    def loss(logits):
        if integer:
            return nn.softmax_cross_entropy_with_integer_labels(logits, fnp.asarray(INT_LABELS))
        return nn.softmax_cross_entropy(logits, fnp.asarray(ONE_HOT))
    g = np.asarray(fg.grad(lambda x: loss(x).sum())(fnp.asarray(LOGITS)))
    assert g.dtype == np.float32 and np.isfinite(g).all()
    np.testing.assert_allclose(g, _np_softmax(LOGITS) - ONE_HOT, atol=1e-6)
    np.testing.assert_allclose(fg.jit(fg.grad(lambda x: loss(x).sum()))(fnp.asarray(LOGITS)), g,
                               atol=1e-6)


def test_sigmoid_binary_cross_entropy():
    logits = np.array([[0.0, -1000.0, 1000.0], [3.0, -2.0, 0.5]], np.float32)
    labels = np.array([[1.0, 0.0, 1.0], [0.3, 1.0, 0.0]], np.float32)
    x = logits.astype(np.float64)
    want = labels * np.logaddexp(0, -x) + (1 - labels) * np.logaddexp(0, x)
    got = nn.sigmoid_binary_cross_entropy(fnp.asarray(logits), fnp.asarray(labels))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    g = np.asarray(fg.grad(lambda z: nn.sigmoid_binary_cross_entropy(
        z, fnp.asarray(labels)).sum())(fnp.asarray(logits)))
    sig = np.exp(-np.logaddexp(0, -x))
    assert np.isfinite(g).all()
    np.testing.assert_allclose(g, sig - labels, atol=1e-6)
    extreme = nn.sigmoid_binary_cross_entropy(fnp.array([1000.0, -1000.0]), fnp.array([0., 1.]))
    np.testing.assert_allclose(extreme, [1000.0, 1000.0])


def test_regression_losses():
    p = RNG.standard_normal((3, 4)).astype(np.float32) * 2
    t = RNG.standard_normal((3, 4)).astype(np.float32)
    e = p.astype(np.float64) - t
    np.testing.assert_allclose(nn.squared_error(fnp.asarray(p), fnp.asarray(t)), e ** 2,
                               rtol=1e-6)
    np.testing.assert_allclose(nn.l2_loss(fnp.asarray(p), fnp.asarray(t)), 0.5 * e ** 2,
                               rtol=1e-6)
    np.testing.assert_allclose(nn.l2_loss(fnp.asarray(p)), 0.5 * p.astype(np.float64) ** 2,
                               rtol=1e-6)
    for delta in (1.0, 0.5):
        a = np.abs(e)
        want = np.where(a <= delta, 0.5 * e ** 2, delta * (a - 0.5 * delta))
        np.testing.assert_allclose(nn.huber_loss(fnp.asarray(p), fnp.asarray(t), delta=delta),
                                   want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(nn.log_cosh(fnp.asarray(p), fnp.asarray(t)), np.log(np.cosh(e)),
                               rtol=1e-5, atol=1e-6)
    assert np.isfinite(np.asarray(nn.log_cosh(fnp.array([1000.0, -1000.0])))).all()


def test_smooth_labels():
    np.testing.assert_allclose(nn.smooth_labels(fnp.asarray(ONE_HOT), 0.1),
                               ONE_HOT * 0.9 + 0.1 / 3, rtol=1e-6)
    smoothed = nn.smooth_labels(fnp.asarray(ONE_HOT), 0.2)
    np.testing.assert_allclose(np.asarray(smoothed).sum(-1), 1.0, rtol=1e-6)
    assert np.isfinite(np.asarray(nn.softmax_cross_entropy(fnp.asarray(LOGITS),
                                                           smoothed))).all()


GRAD_CASES = {
    "softmax_cross_entropy": lambda x, y: nn.softmax_cross_entropy(x, nn.softmax(y)),
    "integer_labels": lambda x, y: nn.softmax_cross_entropy_with_integer_labels(
        x, fnp.array([0, 2])),
    "sigmoid_bce": lambda x, y: nn.sigmoid_binary_cross_entropy(x, nn.sigmoid(y)),
    "squared_error": nn.squared_error,
    "l2_loss": nn.l2_loss,
    "huber_loss": lambda x, y: nn.huber_loss(x, y, delta=0.7),
    "log_cosh": nn.log_cosh,
}


@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_loss_derivatives(name):
    x = np.array([[0.3, -1.2, 2.0], [1.5, 0.2, -0.4]])
    y = np.array([[0.1, 0.9, 0.4], [-1.0, 0.5, 1.3]])
    check_grads(GRAD_CASES[name], (x, y), order=1 if name == "huber_loss" else 2)


def test_several_losses_in_one_backward_pass():
    k1, k2 = random.split(random.PRNGKey(0))
    model = nn.Linear(3)
    x = random.normal(k1, (8, 5))
    labels = random.randint(k2, (8,), 0, 3)
    params, _ = model.init(random.PRNGKey(1), x)
    targets = fnp.ones((8, 3)) * 0.5

    def parts(p):
        logits, _ = model.apply(p, {}, x)
        return (nn.softmax_cross_entropy_with_integer_labels(logits, labels).mean(),
                0.5 * nn.huber_loss(logits, targets).mean(),
                1e-2 * sum(nn.l2_loss(w).sum() for w in fg.tree_util.tree_leaves(p)),
                0.1 * nn.sigmoid_binary_cross_entropy(logits, targets).mean())

    total, grads = fg.value_and_grad(lambda p: sum(parts(p)))(params)
    separate = [fg.grad(lambda p, i=i: parts(p)[i])(params) for i in range(4)]
    assert np.isfinite(float(total))
    for name in ("w", "b"):
        np.testing.assert_allclose(grads[name], sum(np.asarray(g[name]) for g in separate),
                                   rtol=1e-5, atol=1e-6)
    jit_total, jit_grads = fg.jit(fg.value_and_grad(lambda p: sum(parts(p))))(params)
    np.testing.assert_allclose(jit_total, total, rtol=1e-6)
    np.testing.assert_allclose(jit_grads["w"], grads["w"], rtol=1e-5, atol=1e-6)
    # a few SGD steps on the combined objective decrease it
    step = fg.jit(lambda p: fg.tree_util.tree_map(
        lambda w, g: w - 0.3 * g, p, fg.grad(lambda q: sum(parts(q)))(p)))
    p = params
    for _ in range(20):
        p = step(p)
    assert float(sum(parts(p))) < 0.8 * float(total)


def test_losses_under_vmap():
    per_example = fg.vmap(nn.softmax_cross_entropy_with_integer_labels)(
        fnp.asarray(LOGITS), fnp.asarray(INT_LABELS))
    np.testing.assert_allclose(per_example, -(ONE_HOT * _np_log_softmax(LOGITS)).sum(-1),
                               rtol=1e-6)


def test_bad_inputs():
    with pytest.raises(FuncgradValueError, match=r"labels shape \(3,\) must be the logits "
                                                  r"shape \(4, 3\) without the class axis"):
        nn.softmax_cross_entropy_with_integer_labels(fnp.asarray(LOGITS), fnp.array([0, 1, 2]))
    with pytest.raises(FuncgradTypeError, match="labels must be integers"):
        nn.softmax_cross_entropy_with_integer_labels(fnp.asarray(LOGITS), fnp.ones(4))
    with pytest.raises(FuncgradValueError, match=r"logits shape \(4, 3\) does not match "
                                                  r"labels shape \(4, 2\)"):
        nn.softmax_cross_entropy(fnp.asarray(LOGITS), fnp.ones((4, 2)))
    with pytest.raises(FuncgradTypeError, match="expected floating-point"):
        nn.squared_error(fnp.array([1, 2]), fnp.array([1, 2]))
    with pytest.raises(FuncgradValueError, match="does not match"):
        nn.l2_loss(fnp.ones(3), fnp.ones(2))
