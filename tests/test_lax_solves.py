"""lax.custom_linear_solve and lax.custom_root (issue 28, item 8): values against NumPy,
derivatives by implicit differentiation through solvers that are not differentiable
themselves (a `while_loop`), checked against the analytic derivatives with check_grads in
float64; vmap against a loop; jit against eager; aux outputs, pytrees and the errors."""

import numpy as np
import pytest
from transform_checks import check_all, check_jit, close

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import lax

R = np.random.default_rng(28)


def _loop_solve(a):
    """A solver of a x = b that reverse mode could not go through: one `while_loop` step."""
    def solve(_, b):
        return lax.while_loop(lambda s: s[1] < 1, lambda s: (fnp.linalg.solve(a, b), s[1] + 1),
                              (fnp.zeros_like(b), 0))[0]
    return solve


def _solve(a, b):
    return lax.custom_linear_solve(lambda x: a @ x, b, _loop_solve(a),
                                   lambda _, c: _loop_solve(a.T)(None, c))


def _cg(mv, b):
    """Conjugate gradients for a 2x2 system (two steps are exact), with the step count."""
    def body(s):
        x, r, p, i = s
        ap = mv(p)
        alpha = (r @ r) / (p @ ap)
        x2, r2 = x + alpha * p, r - alpha * ap
        return x2, r2, r2 + (r2 @ r2) / (r @ r) * p, i + 1
    x, _, _, i = lax.while_loop(lambda s: s[3] < 2, body, (fnp.zeros_like(b), b, b, 0))
    return x, i


def test_custom_linear_solve_values_derivatives_batching_jit():
    a = R.normal(size=(4, 4)) + 4 * np.eye(4)
    b = R.normal(size=4)
    fg.config.update("enable_x64", True)
    try:
        close(_solve(a, b), np.linalg.solve(a, b), 1e-12, 1e-12)
        # forward and reverse mode in a and b, twice: the tangent solve transposes to
        # transpose_solve, never through the while_loop
        check_all(_solve, (a, b), grad=(0, 1), order=2, batch=())
        ta, tb = R.normal(size=(4, 4)), R.normal(size=4)
        want = fg.jvp(fnp.linalg.solve, (a, b), (ta, tb))[1]
        close(fg.jvp(_solve, (a, b), (ta, tb))[1], want, 1e-10, 1e-12)
    finally:
        fg.config.update("enable_x64", False)
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    check_all(_solve, (a32, b32), want=np.linalg.solve(a, b), rtol=1e-4, atol=1e-5,
              batch=(0, 1))
    check_all(_solve, (a32, b32), batch=(1,))  # only b batched: a is broadcast
    loss = lambda a, b: fnp.sum(_solve(a, b) ** 2)
    got = fg.vmap(fg.grad(loss, argnums=(0, 1)))(np.stack([a32, a32 + np.eye(4, dtype='f4')]),
                                                 np.stack([b32, 2 * b32]))
    for k, (ak, bk) in enumerate([(a32, b32), (a32 + np.eye(4, dtype='f4'), 2 * b32)]):
        want = fg.grad(lambda a, b: fnp.sum(fnp.linalg.solve(a, b) ** 2), argnums=(0, 1))(ak, bk)
        close((got[0][k], got[1][k]), want, 1e-4, 1e-5)


def test_custom_linear_solve_symmetric_aux_and_pytrees():
    a = fnp.array([[2.0, 1.0], [1.0, 3.0]])
    b = fnp.array([3.0, 5.0])
    x, steps = lax.custom_linear_solve(lambda v: a @ v, b, _cg, symmetric=True, has_aux=True)
    close(x, np.array([0.8, 1.4]), 1e-5)
    assert int(steps) == 2
    close(fg.jit(lambda b: lax.custom_linear_solve(lambda v: a @ v, b, _cg, symmetric=True,
                                                   has_aux=True))(b), (x, steps), 1e-6)
    g = fg.grad(lambda b: lax.custom_linear_solve(lambda v: a @ v, b, _cg, symmetric=True,
                                                  has_aux=True)[0].sum())(b)
    close(g, np.linalg.solve(np.asarray(a).T, np.ones(2)), 1e-5)  # JAX: [0.4, 0.2]

    def mv(x):
        return {"p": 2 * x["p"], "q": 3 * x["q"]}

    def sol(_, y):
        return {"p": y["p"] / 2, "q": y["q"] / 3}
    rhs = {"p": fnp.ones(2), "q": fnp.ones(3)}
    close(lax.custom_linear_solve(mv, rhs, sol, symmetric=True),
          {"p": np.full(2, 0.5), "q": np.full(3, 1 / 3)})
    check_jit(lambda r: lax.custom_linear_solve(mv, r, sol, symmetric=True), (rhs,))


def test_custom_linear_solve_errors():
    a = fnp.array([[2.0, 1.0], [1.0, 3.0]])
    b = fnp.array([3.0, 5.0])
    direct = lambda _, c: fnp.linalg.solve(a, c)
    f = lambda b: lax.custom_linear_solve(lambda v: a @ v, b, direct)
    close(fg.jvp(f, (b,), (b,))[1], np.array([0.8, 1.4]), 1e-5)  # forward mode needs no transpose
    with pytest.raises(fg.errors.FuncgradTypeError, match="transpose_solve required"):
        fg.grad(lambda b: f(b).sum())(b)
    with pytest.raises(fg.errors.FuncgradError, match="output shapes must match"):
        lax.custom_linear_solve(lambda v: v[:1], b, direct)


def _newton(f, x0):
    return lax.while_loop(lambda s: s[1] < 30,
                          lambda s: (s[0] - f(s[0]) / (2 * s[0]), s[1] + 1), (x0, 0))[0]


def _root_sqrt(a):
    return lax.custom_root(lambda x: x * x - a, fnp.ones_like(a), _newton,
                           lambda g, y: y / g(1.0))


def test_custom_root_scalar_implicit_derivatives():
    x = np.array(2.5)
    close(_root_sqrt(x.astype(np.float32)), np.sqrt(2.5), 1e-6)
    fg.config.update("enable_x64", True)
    try:
        check_all(_root_sqrt, (x,), want=np.sqrt(x), grad=(0,), order=2, batch=(0,))
        close(fg.grad(fg.grad(_root_sqrt))(x), -0.25 * x ** -1.5, 1e-10)
    finally:
        fg.config.update("enable_x64", False)


def test_custom_root_vector_with_aux_and_closure():
    # the root of x -> m x + sin(x) - c in x, differentiated in m and c (closed over)
    def solve(f, x0):
        def body(s):
            x, i = s
            jac = fg.jacfwd(f)(x)
            return x - fnp.linalg.solve(jac, f(x)), i + 1
        x, i = lax.while_loop(lambda s: s[1] < 25, body, (x0, 0))
        return x, i

    def root(m, c):
        f = lambda x: m @ x + fnp.sin(x) - c
        return lax.custom_root(f, fnp.zeros_like(c), solve,
                               lambda g, y: fnp.linalg.solve(fg.jacfwd(g)(y), y), has_aux=True)

    m = 3 * np.eye(3) + 0.1 * R.normal(size=(3, 3))
    c = R.normal(size=3)
    fg.config.update("enable_x64", True)
    try:
        x, steps = root(m, c)
        close(np.asarray(m) @ np.asarray(x) + np.sin(x), c, 1e-12, 1e-12)
        assert int(steps) == 25
        check_all(lambda m, c: root(m, c)[0], (m, c), grad=(0, 1), batch=(0, 1), rtol=1e-8,
                  atol=1e-10)
    finally:
        fg.config.update("enable_x64", False)
