"""custom_jvp/custom_vjp under eager differentiation behave as in JAX: the rule runs once on
concrete primal values (Python control flow and Python loops work), the function itself is not
run again, results are Arrays, and errors name the transform that is running."""

import functools

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import errors
from funcgrad.core import Array
from funcgrad.test_util import check_grads


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


def _counted_jvp():
    calls = []

    @fg.custom_jvp
    def g(x):
        calls.append("g")
        return fnp.sin(x)

    @g.defjvp
    def g_jvp(primals, tangents):
        calls.append("g_jvp")
        (x,), (t,) = primals, tangents
        return g(x), fnp.cos(x) * t
    return g, calls


@pytest.mark.parametrize("transform", [
    lambda g: fg.jvp(g, (1.0,), (1.0,))[1],
    lambda g: fg.grad(g)(1.0),
    lambda g: fg.vjp(g, 1.0)[1](1.0)[0],
    lambda g: fg.jacfwd(g)(1.0),
    lambda g: fg.jacrev(g)(1.0),
    lambda g: fg.linearize(g, 1.0)[1](1.0),
])
def test_custom_jvp_calls_its_rule_once_and_the_function_only_from_it(transform):
    g, calls = _counted_jvp()
    out = transform(g)
    close(out, np.cos(1.0))
    assert isinstance(out, Array)
    assert calls == ["g_jvp", "g"]  # JAX's order: the rule, then g(x) inside it


def test_custom_vjp_runs_fwd_once_and_never_the_function():
    calls = []

    @fg.custom_vjp
    def f(x):
        calls.append("f")
        return fnp.sin(x)

    def f_fwd(x):
        calls.append("f_fwd")
        return fnp.sin(x), fnp.cos(x)

    def f_bwd(c, g):
        calls.append("f_bwd")
        return (c * g,)
    f.defvjp(f_fwd, f_bwd)
    close(fg.grad(f)(3.0), np.cos(3.0))
    assert calls == ["f_fwd", "f_bwd"]
    calls.clear()
    out, f_vjp = fg.vjp(f, 3.0)
    ct = f_vjp(1.0)[0]
    assert isinstance(out, Array) and isinstance(ct, Array)  # was a numpy scalar
    close(ct, np.cos(3.0))
    assert calls == ["f_fwd", "f_bwd"]


def _branchy():
    @fg.custom_jvp
    def g(x):
        if x > 0:
            return x ** 2
        return -x

    @g.defjvp
    def g_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        if x > 0:
            return g(x), 2.0 * x * t
        return g(x), -t
    return g


def test_python_branch_in_custom_jvp_under_eager_grad_and_jvp():
    g = _branchy()
    close(fg.grad(g)(3.0), 6.0)
    close(fg.grad(g)(-3.0), -1.0)
    close(fg.jvp(g, (2.0,), (1.0,)), (4.0, 4.0))
    close(fg.grad(fg.grad(g))(3.0), 2.0)
    fg.config.update("enable_x64", True)
    try:
        check_grads(g, (fnp.array(1.5),), order=2)
        check_grads(g, (fnp.array(-1.5),), order=2)
    finally:
        fg.config.update("enable_x64", False)


def test_python_branch_under_jit_is_still_a_concretization_error():
    g = _branchy()
    pattern = r"custom_jvp\(g\).*\n.*g_jvp(.|\n)*jit"
    with pytest.raises(errors.ConcretizationTypeError, match=pattern):
        fg.jit(fg.grad(g))(3.0)


def test_abstract_body_under_grad_names_grad_not_jit():
    def outer(w):
        @fg.custom_jvp
        def f(x):
            return x * w if w > 0 else x  # closes over the differentiated w

        f.defjvp(lambda p, t: (f(*p), t[0]))
        return f(1.0)
    with pytest.raises(errors.ConcretizationTypeError) as info:
        fg.grad(outer)(2.0)
    msg = str(info.value)
    assert "grad" in msg and "closes over" in msg and "jit/vmap/make_jaxpr" not in msg


# The fixed-point example of JAX's custom derivatives tutorial, with its Python while loop.
def _while_loop(cond_fun, body_fun, init_val):
    val = init_val
    while cond_fun(val):
        val = body_fun(val)
    return val


@functools.partial(fg.custom_vjp, nondiff_argnums=(0,))
def fixed_point(f, a, x_guess):
    def cond_fun(carry):
        x_prev, x = carry
        return fnp.abs(x_prev - x) > 1e-6

    def body_fun(carry):
        _, x = carry
        return x, f(a, x)
    _, x_star = _while_loop(cond_fun, body_fun, (x_guess, f(a, x_guess)))
    return x_star


def _fixed_point_fwd(f, a, x_init):
    x_star = fixed_point(f, a, x_init)
    return x_star, (a, x_star)


def _fixed_point_rev(f, res, x_star_bar):
    a, x_star = res
    _, vjp_a = fg.vjp(lambda a: f(a, x_star), a)
    a_bar, = vjp_a(fixed_point(functools.partial(_rev_iter, f), (a, x_star, x_star_bar),
                               x_star_bar))
    return a_bar, fnp.zeros_like(x_star)


def _rev_iter(f, packed, u):
    a, x_star, x_star_bar = packed
    _, vjp_x = fg.vjp(lambda x: f(a, x), x_star)
    return x_star_bar + vjp_x(u)[0]


def f_newton(a, x):
    return 0.5 * (x + a / x)


fixed_point.defvjp(_fixed_point_fwd, _fixed_point_rev)


def test_tutorial_fixed_point_with_python_while_loop_under_grad():
    def jax_sqrt(x):
        return fixed_point(f_newton, x, x)
    close(jax_sqrt(2.0), np.sqrt(2.0))
    close(fg.grad(jax_sqrt)(2.0), 0.5 / np.sqrt(2.0), tol=1e-4)
    close(fg.grad(fg.grad(jax_sqrt))(2.0), -0.25 * 2.0 ** -1.5, tol=1e-3)


def test_lax_while_loop_inside_custom_jvp_under_grad():
    @fg.custom_jvp
    def sqrt_newton(a):
        return fg.lax.while_loop(lambda x: fnp.abs(x * x - a) > 1e-5, lambda x: 0.5 * (x + a / x),
                                 a)

    @sqrt_newton.defjvp
    def _(primals, tangents):
        (a,), (t,) = primals, tangents
        s = sqrt_newton(a)
        return s, t / (2.0 * s)
    close(fg.grad(sqrt_newton)(9.0), 1.0 / 6.0)
    close(fg.vmap(fg.grad(sqrt_newton))(fnp.array([4.0, 16.0])), [0.25, 0.125])


def test_custom_jvp_mixed_levels_and_pytrees():
    @fg.custom_jvp
    def f(p, y):
        return {"s": p["a"] * y, "n": fnp.array(3)}

    @f.defjvp
    def f_jvp(primals, tangents):
        (p, y), (tp, ty) = primals, tangents
        return f(p, y), {"s": 10.0 * tp["a"] * y + p["a"] * ty, "n": fnp.array(0)}
    p = {"a": fnp.array([1.0, 2.0])}
    # only p is differentiated: y enters as a constant of this level
    g = fg.grad(lambda p: fnp.sum(f(p, 2.0)["s"]))(p)
    close(g["a"], [20.0, 20.0])
    # nested: the outer grad differentiates the inner rule's tangent expression in y
    gy = fg.grad(lambda y: fg.grad(lambda p: fnp.sum(f(p, y)["s"]))(p)["a"][0])(2.0)
    close(gy, 10.0)


def test_jax_keyword_options_at_their_defaults():
    f = fg.custom_jvp(fnp.sin)
    f.defjvp(lambda p, t: (fnp.sin(p[0]), fnp.cos(p[0]) * t[0]), symbolic_zeros=False)
    close(fg.grad(f)(0.5), np.cos(0.5))
    with pytest.raises(ValueError, match="symbolic_zeros=True is not supported"):
        f.defjvp(lambda p, t: (p[0], t[0]), symbolic_zeros=True)
    g = fg.custom_vjp(fnp.sin)
    g.defvjp(lambda x: (fnp.sin(x), fnp.cos(x)), lambda c, ct: (c * ct,), symbolic_zeros=False,
             optimize_remat=False)
    close(fg.grad(g)(0.5), np.cos(0.5))


def test_lax_control_flow_and_python_loops_in_custom_vjp_under_grad():
    @fg.custom_vjp
    def f(x, n):
        y = fg.lax.cond(x > 0, lambda v: v * 2.0, lambda v: -v, x)
        y = fg.lax.fori_loop(0, 3, lambda i, c: c + y, 0.0)  # 3y
        _, ys = fg.lax.scan(lambda c, v: (c, c * v), y, fnp.ones(2))
        return fnp.sum(ys) + n  # 6y + n

    def f_fwd(x, n):
        slope = 12.0 if float(x) > 0 else -6.0  # Python control flow on the concrete value
        return f(x, n), slope

    f.defvjp(f_fwd, lambda slope, g: (slope * g, g))
    close(fg.grad(f)(1.5, 0.0), 12.0)
    close(fg.grad(f, argnums=(0, 1))(-1.0, 2.0), (-6.0, 1.0))
    close(fg.jit(f)(1.5, 1.0), 19.0)
    with pytest.raises(errors.ConcretizationTypeError, match="inside `vmap`"):  # as in JAX
        fg.vmap(fg.grad(f), in_axes=(0, None))(fnp.array([1.0, 2.0]), 0.0)


def test_a_traced_value_reached_through_a_helper_is_differentiated_through_the_body():
    def outer(w):
        scale = lambda v: w * v  # the custom function closes over w through this helper

        @fg.custom_jvp
        def f(x):
            return scale(fnp.sin(x))

        f.defjvp(lambda p, t: (f(*p), t[0]))
        return f(1.0)
    close(fg.grad(outer)(2.0), np.sin(1.0))


def test_a_jvp_rule_calling_its_own_function_on_derived_values():
    # JAX's hyp1f1 pattern: the rule calls f(a + 1, ...). Under eager grad the call inside
    # the rule recurred forever (each a + 0. a new traced value, so the rule ran again).
    @fg.custom_jvp
    def f(a, x):
        return fnp.exp(a * x)

    @f.defjvp
    def f_jvp(primals, tangents):
        a, x = primals
        da, dx = tangents
        return f(a, x), a * f(a + 0.0, x) * dx + x * f(a, x * 1.0) * da

    fg.config.update("enable_x64", True)
    try:
        e = np.exp(1.0)
        np.testing.assert_allclose(fg.grad(f, 1)(2.0, 0.5), 2 * e, rtol=1e-12)
        np.testing.assert_allclose(fg.grad(fg.grad(f, 1), 1)(2.0, 0.5), 4 * e, rtol=1e-12)
        np.testing.assert_allclose(fg.grad(fg.grad(f, 1), 0)(2.0, 0.5), 2 * e, rtol=1e-12)
        np.testing.assert_allclose(fg.jit(fg.grad(f, 1))(2.0, 0.5), 2 * e, rtol=1e-12)
        np.testing.assert_allclose(fg.vmap(fg.grad(f, 1))(fnp.array([1.0, 2.0]), fnp.ones(2)),
                                   [np.exp(1.0), 2 * np.exp(2.0)], rtol=1e-12)
        check_grads(f, (2.0, 0.5), order=2)
    finally:
        fg.config.update("enable_x64", False)
