"""Optimizer state updated in place: under `jit(step, donate_argnums=(0, 1))` every new
parameter and moment array is written into a donated buffer (no fresh array per call, on the
numpy tier and the native one), and the numbers are optax's (the moment sums are written with
the dying old moment first, which a float addition's commutativity makes the same bits).
"""

import re

import numpy as np
import pytest
from test_native_backend import HAVE_CC, native_mode

import funcgrad as fg
from funcgrad import optim
from funcgrad.tree_util import tree_leaves, tree_map

OPTIMIZERS = {
    "adam": lambda: optim.adam(1e-2),
    "adamw": lambda: optim.adamw(1e-2, weight_decay=0.1),
    "rmsprop": lambda: optim.rmsprop(1e-2),
    "adagrad": lambda: optim.adagrad(1e-2),
    "sgd_momentum": lambda: optim.sgd(1e-2, momentum=0.9),
    "sgd_nesterov": lambda: optim.sgd(1e-2, momentum=0.9, nesterov=True),
}


def _problem(seed=0):
    rng = np.random.default_rng(seed)  # four steps: the 2nd to 4th run in the steady state
    params = {"w": rng.standard_normal((48, 32)).astype(np.float32),
              "b": rng.standard_normal((32,)).astype(np.float32)}
    grads = [tree_map(lambda p: rng.standard_normal(p.shape).astype(np.float32), params)
             for _ in range(4)]
    return params, grads


def _stepper(opt):
    def step(params, state, grads):
        updates, state = opt.update(grads, state, params)
        return optim.apply_updates(params, updates), state
    return step


def _buffers(tree):
    """The data addresses of the tree's non-scalar arrays."""
    return {np.asarray(x).ctypes.data for x in tree_leaves(tree) if np.ndim(x)}


def _run_donated(opt, **jit_options):
    params, grads = _problem()
    f = fg.jit(_stepper(opt), donate_argnums=(0, 1), **jit_options)
    # the first call copies what it is given (`params` stays the caller's; eager Arrays are
    # read-only), and from then on it owns the buffers it passes back
    p, s = f(params, opt.init(params), grads[0])
    for g in grads[1:]:
        donated = _buffers((p, s))
        p, s = f(p, s, g)
        fresh = _buffers((p, s)) - donated
        assert not fresh, f"{len(fresh)} new arrays among the updated params and state"
    return p, s


def _run_eager(opt):
    params, grads = _problem()
    p, s = params, opt.init(params)
    for g in grads:
        p, s = _stepper(opt)(p, s, g)
    return p, s


def _assert_same(a, b):
    for x, y in zip(tree_leaves(a), tree_leaves(b), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_numpy_tier_writes_params_and_moments_into_donated_buffers(name):
    got = _run_donated(OPTIMIZERS[name](), backend="numpy")
    _assert_same(got, _run_eager(OPTIMIZERS[name]()))


@pytest.mark.skipif(not HAVE_CC, reason="no C compiler (test_native_backend fails then)")
@pytest.mark.parametrize("name", ["adam", "sgd_momentum"])
def test_native_tier_writes_into_donated_buffers(name):
    with native_mode():
        got = _run_donated(OPTIMIZERS[name]())
    want = _run_eager(OPTIMIZERS[name]())
    for x, y in zip(tree_leaves(got), tree_leaves(want), strict=True):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-6, atol=1e-7)


def test_memory_plan_reuses_the_donated_state():
    opt = optim.adam(1e-2)
    params, grads = _problem()
    p = tree_map(fg.numpy.asarray, params)
    s = opt.init(p)
    lowered = fg.jit(_stepper(opt), donate_argnums=(0, 1), backend="numpy").lower(p, s, grads[0])
    mem = lowered.compile().memory_analysis()
    arrays = sum(np.asarray(x).nbytes for x in tree_leaves((p, s)) if np.ndim(x))
    assert mem.alias_bytes >= arrays, str(mem)
    src = lowered.compile().as_text()
    returned = src[src.rindex("return ["):]
    assert not re.findall(r"\bb\d+\b", returned), returned  # no fresh buffer (b3) returned


def test_adam_moments_are_optaxs_terms_bit_for_bit():
    # optax: mu = (1 - b1) * g + b1 * mu; nu = (1 - b2) * g**2 + b2 * nu, in that order
    b1, b2 = 0.9, 0.999
    params, grads = _problem(1)
    opt = optim.scale_by_adam(b1, b2)
    s = opt.init(params)
    mu, nu = tree_map(np.zeros_like, params), tree_map(np.zeros_like, params)
    for g in grads:
        _, s = opt.update(g, s)
        mu = tree_map(lambda g_, m: (1 - b1) * g_ + b1 * m, g, mu)
        nu = tree_map(lambda g_, v: (1 - b2) * (g_ * g_) + b2 * v, g, nu)
        mu = tree_map(lambda m: m.astype(np.float32), mu)
        nu = tree_map(lambda v: v.astype(np.float32), nu)
    _assert_same(s.mu, mu)
    _assert_same(s.nu, nu)


def _mlp_sgd_step(params, x, t):
    """The MNIST step's pattern: the gradients are made inside the step, and each new
    parameter `p - lr * g` could go into the dying gradient's buffer or the donated p's."""
    def loss(p):
        h = fg.numpy.maximum(x @ p["w1"] + p["b1"], 0.0)
        return fg.numpy.mean((h @ p["w2"] - t) ** 2)
    value, g = fg.value_and_grad(loss)(params)
    return tree_map(lambda p, g: p - 0.01 * g, params, g), value


def _mlp_problem():
    rng = np.random.default_rng(3)
    params = {"w1": rng.standard_normal((20, 64)).astype(np.float32),
              "b1": np.zeros(64, np.float32),
              "w2": rng.standard_normal((64, 8)).astype(np.float32)}
    return params, rng.standard_normal((16, 20)).astype(np.float32), \
        rng.standard_normal((16, 8)).astype(np.float32)


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_a_train_step_writes_each_new_parameter_into_its_donated_buffer(backend):
    params, x, t = _mlp_problem()
    if backend == "cpu" and not HAVE_CC:
        pytest.skip("no C compiler (the numpy tier runs the same plan)")
    with native_mode():
        f = fg.jit(_mlp_sgd_step, donate_argnums=0, backend=backend)
        p, _ = f(params, x, t)
        for _ in range(3):
            donated = _buffers(p)
            p, value = f(p, x, t)
            assert _buffers(p) == donated  # no fresh array for any new parameter
    want = params
    for _ in range(4):
        want, want_value = _mlp_sgd_step(want, x, t)
    if backend == "numpy":  # eager's bits; C sums float32 in double (docs/internals.md)
        _assert_same((p, value), (want, want_value))
    for x_, y_ in zip(tree_leaves((p, value)), tree_leaves((want, want_value)), strict=True):
        np.testing.assert_allclose(np.asarray(x_), np.asarray(y_), rtol=1e-6, atol=1e-7)


def test_a_train_steps_peak_holds_no_second_copy_of_the_parameters():
    # each update runs once it is its operands' last reader, into the donated parameter:
    # the peak is the arguments plus temporaries, not arguments plus new parameters
    params, x, t = _mlp_problem()
    mem = (fg.jit(_mlp_sgd_step, donate_argnums=0, backend="numpy")
           .lower(params, x, t).compile().memory_analysis())
    param_bytes = sum(p.nbytes for p in params.values())
    assert mem.alias_bytes == param_bytes, str(mem)
    assert mem.peak_bytes - mem.argument_bytes <= mem.temp_bytes + 4, str(mem)
