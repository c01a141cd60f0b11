"""checkpoint / remat: same values and derivatives as the plain function, the linearized
program holds only the block's inputs, and the forward is recomputed in the backward pass."""

import contextlib
import functools

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import lax
from funcgrad.checkpoint import checkpoint_lin_p
from funcgrad.core import Array
from funcgrad.interpreters import ad
from funcgrad.test_util import check_grads


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


def block(x, w):
    return fnp.sin(fnp.tanh(x @ w) * 2.0)


@contextlib.contextmanager
def count_evals(prim):
    """Count the eager evaluations of `prim` inside the block."""
    calls = [0]
    impl = prim.impl_rule

    def counted(*args, **params):
        calls[0] += 1
        return impl(*args, **params)
    prim.impl_rule = counted
    try:
        yield calls
    finally:
        prim.impl_rule = impl


def _args(seed=0):
    rng = np.random.default_rng(seed)
    return (fnp.asarray(rng.standard_normal((2, 3)).astype(np.float32)),
            fnp.asarray(rng.standard_normal((3, 3)).astype(np.float32)))


def test_values_and_gradients_match_the_plain_function():
    x, w = _args()
    loss = lambda x, w: fnp.sum(block(block(x, w), w))
    ck = fg.checkpoint(block)
    loss_ck = lambda x, w: fnp.sum(ck(ck(x, w), w))
    close(loss_ck(x, w), loss(x, w))
    g, g_ck = fg.grad(loss, (0, 1))(x, w), fg.grad(loss_ck, (0, 1))(x, w)
    for a, b in zip(g, g_ck):
        close(a, b)
    close(fg.jvp(loss_ck, (x, w), (x, w))[1], fg.jvp(loss, (x, w), (x, w))[1], 1e-4)
    assert fg.remat is fg.checkpoint


def test_linearized_program_holds_only_the_inputs():
    x, w = _args()
    ck = fg.checkpoint(block)
    _, lin = ad.linearize_flat(lambda a, b: [fnp.sum(ck(a, b))], [x, w])
    (eqn,) = [e for e in lin.jaxpr.eqns if e.prim is checkpoint_lin_p]
    primal_ins = eqn.invars[:2]
    assert [np.asarray(lin.known[v]).tolist() for v in primal_ins] == \
        [np.asarray(x).tolist(), np.asarray(w).tolist()]
    # nothing computed inside the block is stored: every residual is an input of the block
    # (or the ct of the sum), and no known equation was recorded while linearizing
    held = {id(lin.known[v]) for v in lin.jaxpr.constvars}
    assert held <= {id(lin.known[v]) for v in primal_ins}
    assert not [e for e in lin.jaxpr.eqns if e.outvars[0] in lin.known]
    # without checkpoint the intermediates (tanh, cos, ...) are residuals
    _, plain = ad.linearize_flat(lambda a, b: [fnp.sum(block(a, b))], [x, w])
    assert len(plain.jaxpr.constvars) > len(lin.jaxpr.constvars)


def test_forward_is_recomputed_in_the_backward_pass():
    x, w = _args()
    ck = fg.checkpoint(block)
    with count_evals(lax.tanh_p) as plain:
        fg.grad(lambda w: fnp.sum(block(x, w)))(w)
    with count_evals(lax.tanh_p) as ckd:
        fg.grad(lambda w: fnp.sum(ck(x, w)))(w)
    assert plain[0] == 1
    assert ckd[0] == 2  # forward, then once more inside the backward pass
    with count_evals(lax.tanh_p) as lin_only:
        fg.linearize(lambda w: fnp.sum(ck(x, w)), w)
    assert lin_only[0] == 1  # linearizing a checkpoint does not evaluate its forward again


def test_printed_ir():
    f = fg.checkpoint(lambda x: fnp.sin(fnp.sin(x)))
    assert str(fg.make_jaxpr(f)(1.0)) == (
        "{ lambda ; a:f32[]. let\n"
        "    b:f32[] = checkpoint[jaxpr={ lambda ; c:f32[]. let\n"
        "        d:f32[] = sin c\n"
        "        e:f32[] = sin d\n"
        "      in (e,) } policy=None prevent_cse=True] a\n"
        "  in (b,) }")


def test_nested_transforms():
    x, w = _args(1)
    ck = fg.checkpoint(block)
    f = lambda s: fnp.sum(ck(x * s, w))
    g = lambda s: fnp.sum(block(x * s, w))
    close(fg.grad(fg.grad(f))(0.7), fg.grad(fg.grad(g))(0.7), 1e-4)
    close(fg.hessian(f)(0.7), fg.hessian(g)(0.7), 1e-4)
    xs = fnp.stack([x, 2 * x])
    per = fg.vmap(fg.grad(lambda x, w: fnp.sum(ck(x, w)), argnums=1), in_axes=(0, None))(xs, w)
    for i in range(2):
        close(per[i], fg.grad(lambda w, i=i: fnp.sum(block(xs[i], w)))(w), 1e-5)
    gb = fg.grad(lambda w: fnp.sum(fg.vmap(ck, in_axes=(0, None))(xs, w)))(w)
    close(gb, fg.grad(lambda w: fnp.sum(block(xs[0], w) + block(xs[1], w)))(w), 1e-5)
    close(fg.grad(lambda s: fg.jvp(f, (s,), (1.0,))[1])(0.3),
          fg.grad(lambda s: fg.jvp(g, (s,), (1.0,))[1])(0.3), 1e-4)
    check_grads(lambda s: ck(x * s, w), (0.4,), order=2)


def test_policy_saves_chosen_intermediates():
    x, w = _args()
    ck = fg.checkpoint(block, policy=fg.checkpoint_policies.everything_saveable)
    _, lin = ad.linearize_flat(lambda a, b: [fnp.sum(ck(a, b))], [x, w])
    (eqn,) = [e for e in lin.jaxpr.eqns if e.prim is checkpoint_lin_p]
    assert eqn.params["saved"]
    with count_evals(lax.tanh_p) as calls:
        g = fg.grad(lambda w: fnp.sum(ck(x, w)))(w)
    assert calls[0] == 1  # the forward, which saves as it goes (as JAX); none in the backward
    close(g, fg.grad(lambda w: fnp.sum(block(x, w)))(w))
    dots = fg.checkpoint(block, policy=fg.checkpoint_policies.dots_saveable)
    close(fg.grad(lambda w: fnp.sum(dots(x, w)))(w), g)


def test_static_argnums_kwargs_and_pytrees():
    @functools.partial(fg.checkpoint, static_argnums=(1,))
    def f(p, n, scale=1.0):
        y = p["x"]
        for _ in range(n):
            y = fnp.sin(y) * scale
        return {"y": y, "n": n}

    p = {"x": fnp.array([0.1, 0.2])}
    g = fg.grad(lambda p: fnp.sum(f(p, 3, scale=2.0)["y"]))(p)

    def plain(p):
        y = p["x"]
        for _ in range(3):
            y = fnp.sin(y) * 2.0
        return fnp.sum(y)
    close(g["x"], fg.grad(plain)(p)["x"])


def test_eager_call_just_runs():
    f = fg.checkpoint(lambda x: x * 2.0)
    assert isinstance(f(fnp.ones(2)), Array)


@pytest.mark.parametrize("depth", [1, 3])
def test_nested_checkpoints(depth):
    x, w = _args(2)
    f = block
    for _ in range(depth):
        f = fg.checkpoint(functools.partial(lambda inner, a, b: inner(a, b) * 0.5, f))
    plain = block
    for _ in range(depth):
        plain = functools.partial(lambda inner, a, b: inner(a, b) * 0.5, plain)
    close(fg.grad(lambda w: fnp.sum(f(x, w)))(w), fg.grad(lambda w: fnp.sum(plain(x, w)))(w))


def test_checkpoint_composes_with_jit():
    x, w = _args(3)
    ck = fg.checkpoint(block)
    want = fg.grad(lambda w: fnp.sum(block(x, w)))(w)
    close(fg.jit(fg.grad(lambda w: fnp.sum(ck(x, w))))(w), want)
    close(fg.grad(fg.jit(lambda w: fnp.sum(ck(x, w))))(w), want)
