"""funcgrad.example_libraries (stax, optimizers) and the lax shape tuples / conv_transpose they
need: layer shapes from init equal the applied outputs, layer numbers against NumPy,
conv_transpose against a NumPy scatter, optimizers against NumPy loops of JAX's update rules,
jit against eager."""

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import lax, random
from funcgrad.example_libraries import optimizers, stax
from funcgrad.test_util import check_grads

KEY = random.PRNGKey(0)


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


LAYERS = {
    "dense": (stax.Dense(5), (2, 3)),
    "conv_same_strided": (stax.Conv(4, (3, 3), (2, 2), "SAME"), (2, 7, 6, 3)),
    "conv_nchw": (stax.GeneralConv(("NCHW", "OIHW", "NCHW"), 4, (3, 2)), (2, 3, 7, 6)),
    "conv_transpose": (stax.ConvTranspose(4, (3, 3), (2, 2), "SAME"), (2, 4, 5, 3)),
    "conv1d_transpose_valid": (stax.Conv1DTranspose(2, (4,), (3,), "VALID"), (2, 5, 3)),
    "batchnorm": (stax.BatchNorm(), (4, 3, 3, 2)),
    "maxpool": (stax.MaxPool((2, 2), (2, 2)), (2, 5, 4, 3)),
    "sumpool_same": (stax.SumPool((3, 3), (2, 2), "SAME"), (2, 5, 4, 3)),
    "avgpool_same": (stax.AvgPool((3, 3), (1, 1), "SAME"), (2, 5, 4, 3)),
    "avgpool_nchw": (stax.AvgPool((2, 2), spec="NCHW"), (2, 3, 5, 4)),
    "flatten": (stax.Flatten, (2, 3, 4)),
    "fanout_concat": (stax.serial(stax.FanOut(2), stax.parallel(stax.Dense(3), stax.Identity),
                                  stax.FanInConcat()), (2, 4)),
    "fanout_sum": (stax.serial(stax.FanOut(3), stax.FanInSum), (2, 4)),
    "shape_dependent": (stax.shape_dependent(lambda s: stax.Dense(s[-1] * 2)), (2, 3)),
    "mlp": (stax.serial(stax.Dense(8), stax.Relu, stax.Dense(3), stax.LogSoftmax), (5, 4)),
}


def _shapes(tree):
    if isinstance(tree, (list, tuple)) and tree and not isinstance(tree[0], int):
        return [_shapes(t) for t in tree]
    return tuple(tree)


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_init_shape_equals_apply_shape_and_jit_equals_eager(name):
    (init_fun, apply_fun), in_shape = LAYERS[name]
    out_shape, params = init_fun(KEY, in_shape)
    x = random.normal(random.PRNGKey(1), in_shape)
    y = apply_fun(params, x)
    got = [tuple(o.shape) for o in y] if isinstance(y, list) else tuple(y.shape)
    assert got == _shapes(out_shape)
    close(fg.jit(apply_fun)(params, x), y)


def test_dense_batchnorm_and_pools_against_numpy():
    x = np.random.default_rng(0).normal(size=(2, 4, 4, 3)).astype(np.float32)
    _, (w, b) = stax.Dense(5)[0](KEY, (2, 3))
    close(stax.Dense(5)[1]((w, b), x[:, 0, 0]), x[:, 0, 0] @ np.asarray(w) + np.asarray(b))
    _, bn = stax.BatchNorm()[0](KEY, x.shape)
    z = (x - x.mean((0, 1, 2))) / np.sqrt(x.var((0, 1, 2)) + 1e-5)
    close(stax.BatchNorm()[1](bn, x), z, tol=1e-4)
    blocks = x.reshape(2, 2, 2, 2, 2, 3)
    close(stax.MaxPool((2, 2), (2, 2))[1]((), x), blocks.max((2, 4)))
    close(stax.AvgPool((2, 2), (2, 2))[1]((), x), blocks.mean((2, 4)))
    # SAME average pooling divides by the number of real (unpadded) entries per window
    y = stax.AvgPool((3, 3), (1, 1), "SAME")[1]((), x)
    close(y[:, 0, 0], x[:, :2, :2].mean((1, 2)))
    close(y[:, 1, 1], x[:, :3, :3].mean((1, 2)))


def test_dropout_keeps_rate_and_needs_a_key():
    init_fun, apply_fun = stax.Dropout(0.75)
    x = fnp.ones((200, 50))
    y = np.asarray(apply_fun((), x, rng=KEY))
    assert set(np.unique(y).tolist()) <= {0.0, float(np.float32(1 / 0.75))}
    assert abs((y > 0).mean() - 0.75) < 0.02
    close(stax.Dropout(0.5, mode="test")[1]((), x), x)
    with pytest.raises(ValueError, match="rng="):
        apply_fun((), x)


def _scatter_transpose_1d(x, w, s):
    """conv_transpose (NHC/HIO, VALID, transpose_kernel=False) as a scatter of the flipped
    kernel: out[n, i*s + m, o] += x[n, i, c] * w[K-1-m, c, o]."""
    n, length, _ = x.shape
    k, _, o = w.shape
    out = np.zeros((n, length * s + max(k - s, 0), o))
    for i in range(length):
        for m in range(k):
            out[:, i * s + m] += x[:, i] @ w[k - 1 - m]
    return out


@pytest.mark.parametrize("k,s", [(3, 2), (2, 3), (4, 1), (1, 2)])
def test_conv_transpose_against_a_numpy_scatter(k, s):
    rng = np.random.default_rng(k * 10 + s)
    x, w = rng.normal(size=(2, 5, 3)), rng.normal(size=(k, 3, 4))
    got = lax.conv_transpose(x.astype(np.float32), w.astype(np.float32), (s,), "VALID")
    close(got, _scatter_transpose_1d(x, w, s), tol=1e-4)
    assert got.shape == lax.conv_transpose_shape_tuple(x.shape, w.shape, (s,), "VALID",
                                                       ("NHC", "HIO", "NHC"))
    # transpose_kernel flips the kernel and swaps its I/O axes
    flipped = np.swapaxes(w[::-1], 1, 2)
    close(lax.conv_transpose(x.astype(np.float32), flipped.astype(np.float32), (s,), "VALID",
                             transpose_kernel=True), _scatter_transpose_1d(x, w, s), tol=1e-4)


def test_conv_transpose_same_shape_derivatives_and_vmap():
    x, w = fnp.ones((1, 4, 4, 3)), fnp.ones((3, 3, 3, 8))
    assert lax.conv_transpose(x, w, (2, 2), "SAME").shape == (1, 8, 8, 8)
    assert lax.conv_transpose_shape_tuple((1, 4, 4, 3), (3, 3, 3, 8), (2, 2), "SAME",
                                          ("NHWC", "HWIO", "NHWC")) == (1, 8, 8, 8)
    rng = np.random.default_rng(0)
    f = lambda x, w: lax.conv_transpose(x, w, (2,), "SAME")
    fg.config.update("enable_x64", True)
    check_grads(f, (rng.normal(size=(1, 3, 2)), rng.normal(size=(3, 2, 2))), order=2)
    xs, w1 = rng.normal(size=(4, 1, 3, 2)), rng.normal(size=(3, 2, 2))
    close(fg.vmap(f, in_axes=(0, None))(xs, w1), np.stack([np.asarray(f(v, w1)) for v in xs]))


def test_shape_tuples():
    assert lax.conv_shape_tuple((1, 3, 8, 8), (4, 3, 3, 3), (2, 2), "SAME") == (1, 4, 4, 4)
    assert lax.conv_shape_tuple((1, 3, 8, 8), (4, 3, 3, 3), (1, 1), ((1, 0), (0, 0))) == (
        1, 4, 7, 6)
    assert lax.conv_general_shape_tuple((1, 8, 8, 3), (3, 3, 3, 4), (2, 2), "VALID",
                                        ("NHWC", "HWIO", "NHWC")) == (1, 3, 3, 4)
    assert lax.reduce_window_shape_tuple((1, 8, 8, 3), (1, 3, 3, 1), (1, 2, 2, 1),
                                         ((0, 0), (1, 1), (1, 1), (0, 0))) == (1, 4, 4, 3)
    assert lax.reduce_window_shape_tuple((5,), (2,), (1,), ((0, 0),), base_dilation=(2,)) == (
        8,)
    with pytest.raises(ValueError, match="smaller than the window"):
        lax.conv_shape_tuple((1, 1, 2), (1, 1, 3), (1,), "VALID")


# --- optimizers ---------------------------------------------------------------------------------

def _np_rule(name, x, g, s, i, lr):
    if name == "sgd":
        return x - lr * g, s
    if name == "momentum":
        v = 0.9 * s[0] + g
        return x - lr * v, (v,)
    if name == "nesterov":
        v = 0.9 * s[0] + g
        return x - lr * (0.9 * v + g), (v,)
    if name == "adam":
        m, v = 0.1 * g + 0.9 * s[0], 0.001 * g * g + 0.999 * s[1]
        mh, vh = m / (1 - 0.9 ** (i + 1)), v / (1 - 0.999 ** (i + 1))
        return x - lr * mh / (np.sqrt(vh) + 1e-8), (m, v)
    if name == "rmsprop":
        a = 0.9 * s[0] + 0.1 * g * g
        return x - lr * g / np.sqrt(a + 1e-8), (a,)
    if name == "adagrad":
        gs = s[0] + g * g
        m = 0.1 * g / np.sqrt(gs) + 0.9 * s[1]
        return x - lr * m, (gs, m)
    if name == "adamax":
        m, u = 0.1 * g + 0.9 * s[0], np.maximum(0.999 * s[1], np.abs(g))
        return x - lr / (1 - 0.9 ** (i + 1)) * m / (u + 1e-8), (m, u)
    raise KeyError(name)


MAKERS = {"sgd": lambda lr: optimizers.sgd(lr), "momentum": lambda lr: optimizers.momentum(lr, 0.9),
          "nesterov": lambda lr: optimizers.nesterov(lr, 0.9), "adam": optimizers.adam,
          "rmsprop": optimizers.rmsprop, "adagrad": optimizers.adagrad,
          "adamax": optimizers.adamax}
N_STATE = {"sgd": 0, "momentum": 1, "nesterov": 1, "adam": 2, "rmsprop": 1, "adagrad": 2,
           "adamax": 2}


def _loss(p):
    return fnp.sum(p["w"] ** 2 * fnp.arange(1.0, 4.0)) + fnp.sum(fnp.sin(p["b"]))


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_optimizer_matches_its_numpy_rule_and_jit(name):
    opt_init, opt_update, get_params = MAKERS[name](0.1)
    params = {"w": fnp.array([1.0, -2.0, 0.5]), "b": fnp.array(0.3)}
    state = opt_init(params)
    ref = {k: (np.asarray(v, np.float64), tuple(np.zeros(np.shape(v)) for _ in
                                                range(N_STATE[name]))) for k, v in params.items()}
    step = fg.jit(lambda i, st: opt_update(i, fg.grad(_loss)(get_params(st)), st))
    for i in range(4):
        g = fg.grad(_loss)({k: fnp.asarray(v[0], fnp.float32) for k, v in ref.items()})
        ref = {k: _np_rule(name, ref[k][0], np.asarray(g[k], np.float64), ref[k][1], i, 0.1)
               for k in ref}
        eager = opt_update(i, fg.grad(_loss)(get_params(state)), state)
        state = step(i, state)
        close(get_params(state)["w"], get_params(eager)["w"])
    for k in ref:
        close(get_params(state)[k], ref[k][0], tol=1e-4)
    packed = optimizers.pack_optimizer_state(optimizers.unpack_optimizer_state(state))
    close(get_params(packed)["w"], get_params(state)["w"])


def test_schedules_norms_and_clipping():
    close(optimizers.exponential_decay(1.0, 10, 0.5)(20), 0.25)
    close(optimizers.inverse_time_decay(1.0, 10, 1.0, staircase=True)(15), 0.5)
    close(optimizers.polynomial_decay(1.0, 10, 0.0)(5), 0.5)
    close(optimizers.polynomial_decay(1.0, 10, 0.1)(50), 0.1)
    sched = optimizers.piecewise_constant([2, 5], [1.0, 0.5, 0.1])
    close([sched(i) for i in (0, 2, 3, 5, 6)], [1.0, 1.0, 0.5, 0.5, 0.1])
    tree = {"a": fnp.array([3.0, 0.0]), "b": fnp.array(4.0)}
    close(optimizers.l2_norm(tree), 5.0)
    clipped = optimizers.clip_grads(tree, 1.0)
    close(optimizers.l2_norm(clipped), 1.0)
    close(optimizers.clip_grads(tree, 10.0)["a"], [3.0, 0.0])
    with pytest.raises(TypeError, match="does not match"):
        optimizers.sgd(0.1)[1](0, {"x": fnp.ones(2)}, optimizers.sgd(0.1)[0]({"y": fnp.ones(2)}))


def test_namespaces_load_on_use_and_missing_names_point_to_their_home():
    assert fg.example_libraries.stax is stax and fg.example_libraries.optimizers is optimizers
    with pytest.raises(AttributeError, match=r"funcgrad.numpy.sin \(namespaces: numpy, lax"):
        fg.sin  # noqa: B018
    with pytest.raises(AttributeError, match="no attribute 'nothing_here' .namespaces"):
        fg.nothing_here  # noqa: B018
    assert fg.config.config_with_absl() is None and fg.config.parse_flags_with_absl() is None
    assert fg.jacobian is fg.jacrev
