"""custom_jvp and custom_vjp: the user's rules are used by every transform (jvp, grad, nested
grad, vmap, jacobians), residuals are what fwd returns, and bad rules give clear errors."""

import functools

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import errors, lax
from funcgrad.core import Array, Literal
from funcgrad.custom_derivatives import custom_vjp_lin_p
from funcgrad.interpreters import ad
from funcgrad.test_util import check_grads


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


# --- custom_jvp --------------------------------------------------------------------------------

@fg.custom_jvp
def log1pexp(x):
    return fnp.log(1.0 + fnp.exp(x))


@log1pexp.defjvp
def _log1pexp_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return log1pexp(x), t * (1.0 - 1.0 / (1.0 + fnp.exp(x)))


def test_custom_jvp_fixes_a_nan_gradient():
    assert np.isnan(float(fg.grad(lambda x: fnp.log(1.0 + fnp.exp(x)))(100.0)))
    close(fg.grad(log1pexp)(100.0), 1.0)
    close(fg.grad(log1pexp)(0.0), 0.5)
    out, t = fg.jvp(log1pexp, (3.0,), (2.0,))
    close(out, np.log1p(np.exp(3.0)))
    close(t, 2.0 / (1.0 + np.exp(-3.0)))


def test_custom_jvp_rule_is_what_transforms_use():
    @fg.custom_jvp
    def f(x):
        return fnp.sin(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        return f(primals[0]), 3.0 * tangents[0]  # deliberately not cos

    close(f(1.0), np.sin(1.0))
    close(fg.grad(f)(1.0), 3.0)
    close(fg.jvp(f, (1.0,), (1.0,))[1], 3.0)
    xs = fnp.arange(4.0)
    close(fg.vmap(fg.grad(f))(xs), np.full(4, 3.0))
    close(fg.grad(lambda v: fnp.sum(fg.vmap(f)(v)))(xs), np.full(4, 3.0))
    close(fg.jacfwd(f)(xs), 3.0 * np.eye(4))
    close(fg.jacrev(f)(xs), 3.0 * np.eye(4))
    text = str(fg.make_jaxpr(f)(1.0))
    assert "custom_jvp_call" in text and "name=f" in text and "sin" in text


def test_custom_jvp_higher_order_differentiates_the_rule():
    @fg.custom_jvp
    def f(x):
        return x ** 3

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return f(x), 3.0 * x ** 2 * t

    close(fg.grad(fg.grad(f))(2.0), 12.0)
    close(fg.grad(fg.grad(fg.grad(f)))(2.0), 6.0)
    close(fg.hessian(lambda v: fnp.sum(f(v)))(fnp.array([1.0, 2.0])), np.diag([6.0, 12.0]))
    check_grads(f, (1.5,), order=2)


def test_custom_jvp_pytrees_nondiff_argnums_and_kwargs():
    @functools.partial(fg.custom_jvp, nondiff_argnums=(0,))
    def apply(fn, p, x=2.0):
        return {"y": fn(p["a"]) * x, "z": p["b"]}

    @apply.defjvp
    def apply_jvp(fn, primals, tangents):
        p, x = primals
        tp, tx = tangents
        out = apply(fn, p, x)
        return out, {"y": 10.0 * tp["a"] * x + fn(p["a"]) * tx, "z": tp["b"]}

    p = {"a": fnp.array([1.0, 2.0]), "b": fnp.array(3.0)}
    g = fg.grad(lambda p: fnp.sum(apply(fnp.sin, p)["y"]) + apply(fnp.sin, p)["z"])(p)
    close(g["a"], [20.0, 20.0])
    close(g["b"], 1.0)
    gx = fg.grad(lambda x: fnp.sum(apply(fnp.sin, p, x=x)["y"]))(2.0)
    close(gx, np.sin(1.0) + np.sin(2.0))


def test_custom_jvp_nondiff_array_argument_and_closure():
    @functools.partial(fg.custom_jvp, nondiff_argnums=(1,))
    def scale(x, s):
        return x * s

    @scale.defjvp
    def scale_jvp(s, primals, tangents):
        return scale(primals[0], s), tangents[0] * s

    close(fg.grad(lambda x: scale(x, fnp.array(4.0)))(1.0), 4.0)
    # perturbations of the nondiff array flow through the function body
    close(fg.grad(lambda s: scale(3.0, s))(4.0), 3.0)

    def outer(w):
        @fg.custom_jvp
        def f(x):
            return w * fnp.sin(x)

        @f.defjvp
        def f_jvp(primals, tangents):
            (x,), (t,) = primals, tangents
            return fnp.sin(x), t  # closes over nothing traced
        return f(1.0)
    close(fg.grad(outer)(2.0), np.sin(1.0))


def test_custom_jvp_rule_closing_over_a_tracer_is_a_clear_error():
    def outer(w):
        @fg.custom_jvp
        def f(x):
            return x

        @f.defjvp
        def f_jvp(primals, tangents):
            return primals[0], w * tangents[0]
        return f(w)
    with pytest.raises(errors.TracerLeakError, match="custom_jvp rule .*f_jvp.*closes over"):
        fg.grad(outer)(2.0)


def test_custom_jvp_defjvps():
    @fg.custom_jvp
    def f(x, y):
        return fnp.sin(x) * y

    f.defjvps(lambda t, ans, x, y: fnp.cos(x) * t * y, None)
    g = fg.grad(f, argnums=(0, 1))(1.0, 2.0)
    close(g[0], 2.0 * np.cos(1.0))
    close(g[1], 0.0)


def test_custom_jvp_integer_argument_and_output():
    @fg.custom_jvp
    def f(x, n):
        return x * n.astype(fnp.float32), n + 1

    @f.defjvp
    def f_jvp(primals, tangents):
        x, n = primals
        tx, _ = tangents
        return f(x, n), (tx * n.astype(fnp.float32), fnp.zeros_like(n))

    close(fg.grad(lambda x: f(x, fnp.array(3))[0])(1.0), 3.0)


def test_custom_jvp_rule_errors():
    def make(rule):
        @fg.custom_jvp
        def f(x):
            return fnp.sin(x)
        f.defjvp(rule)
        return f

    with pytest.raises(errors.FuncgradTypeError, match="must produce a pair"):
        fg.grad(make(lambda p, t: t[0]))(1.0)
    with pytest.raises(errors.FuncgradTypeError, match="equal container"):
        fg.grad(make(lambda p, t: (fnp.sin(p[0]), (t[0],))))(1.0)
    with pytest.raises(errors.FuncgradTypeError, match="shape f32\\[3\\].*shape f32\\[\\]"):
        fg.grad(make(lambda p, t: (fnp.sin(p[0]), fnp.ones(3))))(1.0)
    with pytest.raises(AttributeError, match="No JVP defined"):
        fg.custom_jvp(lambda x: x)(1.0)


# --- custom_vjp --------------------------------------------------------------------------------

def _make_counted():
    calls = {"fwd": 0, "bwd": 0}

    @fg.custom_vjp
    def f(x, y):
        return fnp.sin(x) * y

    def f_fwd(x, y):
        calls["fwd"] += 1
        return f(x, y), (fnp.cos(x), fnp.sin(x), y)

    def f_bwd(res, g):
        calls["bwd"] += 1
        cos_x, sin_x, y = res
        return g * cos_x * y, g * sin_x

    f.defvjp(f_fwd, f_bwd)
    return f, calls


def test_custom_vjp_grad_uses_fwd_and_bwd_once():
    f, calls = _make_counted()
    close(f(1.0, 2.0), 2.0 * np.sin(1.0))
    assert calls == {"fwd": 0, "bwd": 0}
    g = fg.grad(f, argnums=(0, 1))(1.0, 2.0)
    close(g[0], 2.0 * np.cos(1.0))
    close(g[1], np.sin(1.0))
    assert calls == {"fwd": 1, "bwd": 1}


def test_custom_vjp_linear_equation_holds_fwd_residuals():
    f, _ = _make_counted()
    x = Array(np.float32(0.3))
    y = Array(np.array([1.0, 2.0], np.float32))
    _, lin = ad.linearize_flat(lambda a, b: [f(a, b)], [x, y])
    eqns = [e for e in lin.jaxpr.eqns if e.prim is custom_vjp_lin_p]
    assert len(eqns) == 1
    eqn = eqns[0]
    res_vals = [np.asarray(v.val if isinstance(v, Literal) else lin.known[v])
                for v in eqn.invars[:eqn.params["num_res"]]]
    assert len(res_vals) == 3
    close(res_vals[0], np.cos(0.3))
    close(res_vals[1], np.sin(0.3))
    close(res_vals[2], [1.0, 2.0])
    # only the linear equation and the residuals it holds survive into the linear program
    assert all(e.prim is custom_vjp_lin_p or e.outvars[0] in lin.known for e in lin.jaxpr.eqns)


def test_custom_vjp_grad_runs_fwd_instead_of_the_function():
    f, calls = _make_counted()
    impl = lax.sin_p.impl_rule
    count = [0]

    def counted(*args, **params):
        count[0] += 1
        return impl(*args, **params)
    lax.sin_p.impl_rule = counted
    try:
        fg.grad(f)(1.0, 2.0)
    finally:
        lax.sin_p.impl_rule = impl
    assert calls["fwd"] == 1
    assert count[0] == 2  # fwd's f(x, y) and its residual sin(x); f is not run again


def test_custom_vjp_nested_and_batched():
    f, _ = _make_counted()
    close(fg.grad(fg.grad(f))(1.0, 2.0), -2.0 * np.sin(1.0))
    xs = fnp.array([0.0, 0.5, 1.0])
    close(fg.vmap(fg.grad(f), in_axes=(0, None))(xs, 2.0), 2.0 * np.cos(np.asarray(xs)))
    close(fg.grad(lambda v: fnp.sum(fg.vmap(f, in_axes=(0, None))(v, 2.0)))(xs),
          2.0 * np.cos(np.asarray(xs)))
    close(fg.jacrev(lambda v: f(v, fnp.full(3, 2.0)))(xs), np.diag(2.0 * np.cos(np.asarray(xs))))
    check_grads(f, (0.7, 1.3), order=2, modes=("rev",))


def test_custom_vjp_clip_gradient_example():
    @fg.custom_vjp
    def clip_gradient(x, lo, hi):
        return x

    def fwd(x, lo, hi):
        return x, (lo, hi)

    def bwd(res, g):
        lo, hi = res
        return fnp.clip(g, lo, hi), None, None

    clip_gradient.defvjp(fwd, bwd)
    close(fg.grad(lambda x: 5.0 * clip_gradient(x, -1.0, 1.0))(2.0), 1.0)
    close(fg.grad(lambda x: 0.5 * clip_gradient(x, -1.0, 1.0))(2.0), 0.5)


def test_custom_vjp_nondiff_argnums_and_pytrees():
    @functools.partial(fg.custom_vjp, nondiff_argnums=(0,))
    def apply(n, p):
        return {"s": p["a"] * n, "t": p["b"] ** 2}

    def fwd(n, p):
        return apply(n, p), p["b"]

    def bwd(n, b, g):
        return ({"a": g["s"] * n, "b": 2.0 * b * g["t"]},)

    apply.defvjp(fwd, bwd)
    p = {"a": fnp.array([1.0, 2.0]), "b": fnp.array(3.0)}
    g = fg.grad(lambda p: fnp.sum(apply(4, p)["s"]) + apply(4, p)["t"])(p)
    close(g["a"], [4.0, 4.0])
    close(g["b"], 6.0)


def test_custom_vjp_forward_mode_is_a_clear_error():
    f, _ = _make_counted()
    with pytest.raises(errors.FuncgradTypeError, match="forward-mode.*custom_vjp.*`f`") as e:
        fg.jvp(f, (1.0, 2.0), (1.0, 0.0))
    assert "test_custom_derivatives.py" in str(e.value)
    with pytest.raises(errors.FuncgradTypeError, match="forward-mode"):
        fg.jacfwd(lambda x: f(x, 2.0))(fnp.ones(2))


def test_custom_vjp_bwd_output_is_validated():
    def make(bwd):
        @fg.custom_vjp
        def h(x, w):
            return fnp.sum(x * w["k"])
        h.defvjp(lambda x, w: (h(x, w), (x, w)), bwd)
        return h

    x, w = fnp.ones(3), {"k": fnp.ones(3)}
    h = make(lambda res, g: (res[0] * g, {"k": fnp.ones(2)}))
    with pytest.raises(errors.FuncgradTypeError) as e:
        fg.grad(h, argnums=(0, 1))(x, w)
    msg = str(e.value)
    assert "argument w['k']" in msg and "(3,)" in msg and "(2,)" in msg
    assert "<lambda>" in msg and "test_custom_derivatives.py" in msg
    with pytest.raises(errors.FuncgradTypeError, match="one cotangent per differentiable "
                                                       "argument \\(2: x, w\\)"):
        fg.grad(make(lambda res, g: res[0] * g))(x, w)
    with pytest.raises(errors.FuncgradTypeError, match="structure"):
        fg.grad(make(lambda res, g: (res[0] * g, [fnp.ones(3)])))(x, w)
    g = fg.grad(make(lambda res, g: (None, {"k": g * res[0]})), argnums=(0, 1))(x, w)
    close(g[0], np.zeros(3))
    close(g[1]["k"], np.ones(3))


def test_custom_vjp_fwd_output_is_validated():
    @fg.custom_vjp
    def f(x):
        return x * 2.0
    f.defvjp(lambda x: x * 2.0, lambda r, g: (g,))
    with pytest.raises(errors.FuncgradTypeError, match="fwd rule .* must produce a pair"):
        fg.grad(f)(1.0)
    with pytest.raises(AttributeError, match="No VJP defined"):
        fg.custom_vjp(lambda x: x)(1.0)


def test_custom_vjp_under_jaxpr_and_checkpoint():
    f, _ = _make_counted()
    text = str(fg.make_jaxpr(fg.grad(f))(1.0, 2.0))
    assert "custom_vjp_call" in text
    g = fg.grad(fg.checkpoint(lambda x: f(x, 2.0)))(1.0)
    close(g, 2.0 * np.cos(1.0))


def test_custom_rules_compose_with_jit():
    f, calls = _make_counted()
    s = lambda x: fnp.sum(f(x, fnp.full(2, 2.0)))
    xs = fnp.array([0.1, 0.2])
    want = 2.0 * np.cos(np.asarray(xs))
    close(fg.jit(fg.grad(s))(xs), want)
    close(fg.grad(fg.jit(s))(xs), want)
    close(fg.jit(fg.grad(lambda x: fnp.sum(log1pexp(x))))(fnp.array([100.0])), [1.0])
