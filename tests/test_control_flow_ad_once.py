"""Reverse mode of `scan` (and `fori_loop`, which lowers to it) runs the forward loop once.

Under `value_and_grad`/`vjp`, a scan bound in linearize's define-by-run trace runs the known
half of its jvp: one loop gives the primal outputs (the value) and the residuals; the
backward pass is one reverse scan of the linear half. A counting primitive in the body proves
it (eagerly, under `jit` on the numpy and the native tier), the optimized IR has one forward
scan, and every result equals the previous implementation (each scan bound plainly, its
residuals recomputed by its transpose: `ad.linearizing` patched to say no).
"""

import contextlib

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import lax
from funcgrad.backends.native import build
from funcgrad.core import Primitive
from funcgrad.interpreters import ad, batching
from funcgrad.test_util import check_grads

# --- a sin that counts its evaluations (a library call: its impl runs under jit too) ----------
CALLS = [0]


def _counted_sin_impl(x):
    CALLS[0] += x.shape[0] if x.ndim == 3 else 1  # a batched (vmapped) body counts per example
    return np.sin(x)


counted_sin_p = Primitive("counted_sin")
counted_sin_p.def_impl(_counted_sin_impl)
counted_sin_p.def_abstract_eval(lambda a: a)
ad.defjvp(counted_sin_p, lambda t, x, out: lax.mul(t, lax.cos(x)))
batching.defvectorized(counted_sin_p)


def counted(fun, *args):
    CALLS[0] = 0
    out = fun(*args)
    fg.block_until_ready(out)
    return CALLS[0], out


@contextlib.contextmanager
def previous_implementation():
    """Scans bound plainly under linearize: the transpose recomputes the forward loop."""
    saved = ad.linearizing
    ad.linearizing = lambda trace: False
    try:
        yield
    finally:
        ad.linearizing = saved


def rnn(W, h0, xs, reverse=False):
    def step(h, x):
        h = counted_sin_p.bind(h @ W + x)
        return h, (h * h).sum()
    h, ys = lax.scan(step, h0, xs, reverse=reverse)
    return h.sum() + ys.sum()


def fori(W, h0):
    return lax.fori_loop(0, 6, lambda i, h: counted_sin_p.bind(h @ W + i * 0.1), h0).sum()


def inputs(dtype=np.float32, length=7):
    rng = np.random.default_rng(0)
    W = (rng.standard_normal((3, 3)) * 0.5).astype(dtype)
    return W, rng.standard_normal((2, 3)).astype(dtype), rng.standard_normal(
        (length, 2, 3)).astype(dtype)


def close(a, b, tol=1e-6):
    for x, y in zip(fg.tree_util.tree_leaves(a), fg.tree_util.tree_leaves(b)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=tol, atol=tol)


@pytest.mark.parametrize("reverse", [False, True])
def test_eager_value_and_grad_and_vjp_run_the_body_once_per_iteration(reverse):
    W, h0, xs = inputs()
    vg = fg.value_and_grad(lambda W, h0: rnn(W, h0, xs, reverse), argnums=(0, 1))
    n, got = counted(vg, W, h0)
    assert n == 7
    with previous_implementation():
        n_old, want = counted(vg, W, h0)
    assert n_old == 14  # the counter sees the recomputation this change removed
    close(got, want, 0)
    n, (out, f_vjp) = counted(fg.vjp, lambda W, xs: rnn(W, h0, xs, reverse), W, xs)
    assert n == 7
    CALLS[0] = 0
    cts = f_vjp(fnp.ones(()))
    assert CALLS[0] == 0  # the backward pass reads residuals only
    close(cts, fg.grad(lambda W, xs: rnn(W, h0, xs, reverse), argnums=(0, 1))(W, xs))


def test_fori_loop_with_static_bounds_runs_the_body_once():
    W, h0, _ = inputs()
    n, got = counted(fg.value_and_grad(fori, argnums=(0, 1)), W, h0)
    assert n == 6
    with previous_implementation():
        close(got, fg.value_and_grad(fori, argnums=(0, 1))(W, h0), 0)


def scans(text):
    """`reverse=` of each scan equation in a printed program (nested ones included)."""
    return [line.split("reverse=")[1].split()[0] for line in text.splitlines()
            if "reverse=" in line]


@pytest.mark.parametrize("native", ["off", pytest.param("sync", marks=pytest.mark.skipif(
    build.find_compiler() is None, reason="no C compiler (the numpy tier runs the same check)"))])
def test_jit_program_has_one_forward_scan_and_runs_it_once(native):
    fg.config.update("native", native)
    W, h0, xs = inputs()
    f = fg.jit(fg.value_and_grad(rnn, argnums=(0, 1)))
    text = f.lower(W, h0, xs).as_text()
    assert text.count("= scan[") == 2 and sorted(scans(text)) == ["False", "True"]
    counted(f, W, h0, xs)  # compile
    n, got = counted(f, W, h0, xs)
    assert n == 7
    close(got, fg.value_and_grad(rnn, argnums=(0, 1))(W, h0, xs), 1e-5)
    with previous_implementation():
        old = fg.jit(fg.value_and_grad(lambda *a: rnn(*a), argnums=(0, 1)))
        assert old.lower(W, h0, xs).as_text().count("= scan[") == 3
        close(got, old(W, h0, xs), 1e-5)


@pytest.mark.parametrize("native", ["off", pytest.param("sync", marks=pytest.mark.skipif(
    build.find_compiler() is None, reason="no C compiler (the numpy tier runs the same check)"))])
@pytest.mark.parametrize("how", ["value_and_grad", "grad", "vjp"])
def test_differentiating_a_jitted_function_runs_its_forward_loop_once(native, how):
    # grad(jit(f)): the jitted call runs once, as the known half of its jvp (value and
    # residuals), and the backward pass is the transposed linear half alone
    fg.config.update("native", native)
    W, h0, xs = inputs()
    jf = fg.jit(rnn)
    if how == "vjp":
        def run(W, h0, xs):
            out, back = fg.vjp(jf, W, h0, xs)
            return out, back(fnp.ones_like(out))
    else:
        run = getattr(fg, how)(jf, argnums=(0, 1))
    counted(run, W, h0, xs)  # compile
    n, got = counted(run, W, h0, xs)
    assert n == 7
    ref = (fg.vjp(rnn, W, h0, xs)[1](fnp.ones(())) if how == "vjp"
           else getattr(fg, how)(rnn, argnums=(0, 1))(W, h0, xs))
    close(got[1] if how == "vjp" else got, ref, 1e-5)


def test_make_jaxpr_of_value_and_grad_has_one_forward_scan():
    W, h0, xs = inputs()
    text = str(fg.make_jaxpr(fg.value_and_grad(rnn))(W, h0, xs))
    assert sorted(scans(text)) == ["False", "True"]


def test_debug_callback_in_the_body_fires_once_per_iteration():
    seen = []

    def f(c0, xs):
        def step(c, x):
            fg.debug.callback(lambda v: seen.append(1), x)
            return fnp.sin(c * x), c
        return lax.scan(step, c0, xs)[0]
    fg.grad(f)(0.5, fnp.arange(1.0, 6.0))
    assert len(seen) == 5


def programs():
    """Functions of (W, h0, xs) that exercise the split: pytree carries with an integer
    counter, ys only, an operand whose tangent is zero (stop_gradient), a nested scan, a cond
    in the body, a closure over an outer value and a second-order derivative, edge cases."""
    def pytree(W, h0, xs):
        def step(c, x):
            h, n = c["h"], c["n"]
            h = fnp.tanh(h @ W + x) * (n + 1)
            return {"h": h, "n": n + 1}, (fnp.exp(-h).sum(), h[0])
        c, (a, b) = lax.scan(step, {"h": h0, "n": 0}, xs)
        return c["h"].sum() + a.sum() + (b ** 2).sum()

    def ys_only(W, h0, xs):
        return lax.scan(lambda c, x: (c, fnp.sin(x @ W) * h0), (), xs)[1].sum()

    def stopped(W, h0, xs):
        xs = lax.stop_gradient(xs * W.sum())
        return lax.scan(lambda h, x: (fnp.sin(h @ W) + x, h), h0, xs)[1].sum()

    def nested(W, h0, xs):
        def outer(h, x):
            h, _ = lax.scan(lambda g, r: (fnp.cos(g * r) + g @ W, None), h, x)
            return h, h.sum()
        return lax.scan(outer, h0, xs)[1].sum()

    def with_cond(W, h0, xs):
        def step(h, x):
            h = lax.cond(x.sum() > 0, lambda h: fnp.sin(h @ W), lambda h: h * x, h)
            return h, h[0, 0]
        return lax.scan(step, h0, xs)[1].sum()

    def closure(W, h0, xs):
        inner = lambda h0: lax.scan(lambda h, x: (fnp.tanh(h @ W + x), None), h0, xs)[0]
        return fg.grad(lambda h0: inner(h0).sum())(h0).sum()

    def edges(W, h0, xs):  # empty, reversed and unrolled, integer ys, carries without tangent
        step = lambda h, x: (fnp.sin(h @ W) + x, ((h > 0).astype(np.int32), h.sum()))
        empty = lax.scan(step, h0, xs[:0])[0].sum()
        h, (ints, sums) = lax.scan(step, h0, xs, reverse=True, unroll=2)
        c, ys = lax.scan(lambda c, x: ((c[0] + 1.0, fnp.ones_like(c[1])), c[0] * x @ W),
                         (fnp.zeros(()), h0 @ W), xs)
        return empty + h.sum() + ints.sum() * 0.5 + sums.sum() + ys.sum() + c[1].sum()
    return [pytree, ys_only, stopped, nested, with_cond, closure, edges]


@pytest.mark.parametrize("fun", programs(), ids=lambda f: f.__name__)
def test_jitted_value_and_grad_has_one_loop_per_loop_and_direction(fun):
    """Each loop of the function (nested ones included) appears once forward (value and
    residuals together) and once reversed; before, the forward ones appeared again."""
    W, h0, xs = inputs()
    primal = scans(fg.jit(fun).lower(W, h0, xs).as_text())
    vg = fg.jit(fg.value_and_grad(fun, argnums=(0, 1, 2))).lower(W, h0, xs).as_text()
    assert len(scans(vg)) == 2 * len(primal)
    assert scans(vg).count("True") == primal.count("True") + primal.count("False")


@pytest.mark.parametrize("fun", programs(), ids=lambda f: f.__name__)
def test_grads_equal_the_previous_implementation(fun):
    W, h0, xs = inputs()
    vg = fg.value_and_grad(fun, argnums=(0, 1, 2))
    got, jitted = vg(W, h0, xs), fg.jit(vg)(W, h0, xs)
    with previous_implementation():
        want = vg(W, h0, xs)
    close(got, want, 1e-6)
    close(jitted, want, 1e-5)


def test_linearize_jacrev_and_hessian_equal_the_previous_implementation():
    W, h0, xs = inputs(length=3)
    f = lambda W: rnn(W, h0, xs)
    g = lambda W: lax.scan(lambda h, x: (fnp.sin(h @ W + x), h.sum(0)), h0, xs)[1]
    runs = lambda: (fg.linearize(f, W)[1](fnp.ones_like(W)), fg.jacrev(g)(W), fg.hessian(f)(W))
    got = runs()
    with previous_implementation():
        want = runs()
    close(got, want, 1e-5)


def test_check_grads_orders_1_and_2_for_scan_and_fori():
    fg.config.update("enable_x64", True)
    W, h0, xs = inputs(np.float64, length=4)
    check_grads(lambda W, h0, xs: rnn(W, h0, xs, reverse=True), (W, h0, xs), order=2)
    check_grads(fori, (W, h0), order=2)


def test_vmap_of_grad_matches_a_python_loop_and_runs_once():
    W, h0, xs = inputs()
    Ws = np.stack([W, W * 0.5, -W])
    g = fg.grad(rnn)
    n, got = counted(fg.vmap(g, in_axes=(0, None, None)), Ws, h0, xs)
    assert n == 3 * 7
    close(got, np.stack([np.asarray(g(w, h0, xs)) for w in Ws]), 1e-5)


def dynamic_while(W, h0):
    def body(c):
        i, h = c
        return i + 1, counted_sin_p.bind(h @ W) + 0.1
    return lax.while_loop(lambda c: c[0] < 5, body, (0, h0))[1].sum()


@pytest.mark.parametrize("native", ["off", pytest.param("sync", marks=pytest.mark.skipif(
    build.find_compiler() is None, reason="no C compiler (the numpy tier runs the same check)"))])
@pytest.mark.parametrize("how", ["jvp", "jacfwd", "hessian"])
@pytest.mark.parametrize("loop", ["scan", "fori", "while"])
def test_forward_mode_under_jit_runs_the_loop_once(native, how, loop):
    # jit(jvp(f)): the loop's jvp gives the primal outputs too, so the trace's own loop is
    # dead code and the compiled program runs the body once per iteration (eagerly forward
    # mode binds it twice, keeping no residuals; `ad.jvp_replay`)
    fg.config.update("native", native)
    W, h0, xs = inputs()
    g, iters = {"scan": (lambda W: rnn(W, h0, xs), 7), "fori": (lambda W: fori(W, h0), 6),
                "while": (lambda W: dynamic_while(W, h0), 5)}[loop]
    f = lambda W: fnp.cos(g(W))  # the tangent of cos reads the loop's primal output
    t = np.linspace(-1.0, 1.0, W.size).reshape(W.shape).astype(W.dtype)
    run = {"jvp": lambda W: fg.jvp(f, (W,), (t,)), "jacfwd": fg.jacfwd(f),
           # reverse mode of a while_loop is an error: its second derivative is fwd-over-fwd
           "hessian": fg.jacfwd(fg.jacfwd(f)) if loop == "while" else fg.hessian(f)}[how]
    jitted = fg.jit(run)
    counted(jitted, W)  # compile
    n, got = counted(jitted, W)
    assert n == iters
    with previous_forward_mode():
        old = fg.jit(lambda W: run(W))
        counted(old, W)
        n_old, want = counted(old, W)
    assert n_old >= 2 * iters  # the counter sees the loops this change removed
    close(got, want, 1e-5)
    close(got, run(W), 1e-4)


@contextlib.contextmanager
def previous_forward_mode():
    """Forward mode reading every primal value from its define-by-run trace, under jit too."""
    saved = ad.jvp_eval
    ad.jvp_eval = lambda *a, recompute=False, **k: saved(*a, **k)
    try:
        yield
    finally:
        ad.jvp_eval = saved
