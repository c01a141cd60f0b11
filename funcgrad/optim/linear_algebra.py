"""optax's linear-algebra helpers: the power iteration (dominant eigenpair of a matrix or a
linear map on pytrees), the inverse p-th root of a symmetric positive matrix (coupled Newton
iterations, as Shampoo uses) and non-negative least squares (accelerated projected gradient).

As optax 0.2.8. Imports `funcgrad.numpy`, `funcgrad.lax`, `funcgrad.random` and
`optim.tree_utils`.
"""

import functools

import funcgrad.numpy as fnp
from funcgrad import lax, random
from funcgrad.errors import FuncgradValueError
from funcgrad.optim import tree_utils as tu

__all__ = ["matrix_inverse_pth_root", "nnls", "power_iteration"]


def _normalize(x):
    return tu.tree_scale(1.0 / tu.tree_norm(x), x)


def _power_cond(error_tolerance, num_iters, loop_vars):
    normalized, unnormalized, eig, i = loop_vars
    residual = tu.tree_norm(tu.tree_sub(unnormalized, tu.tree_scale(eig, normalized)))
    return ~(fnp.abs(residual / eig) < error_tolerance) & (i < num_iters)


def power_iteration(matrix, *, v0=None, num_iters=100, error_tolerance=1e-6,
                    precision=lax.Precision.HIGHEST, key=None):
    """The dominant eigenvalue and its unit eigenvector, by power iteration.

    Args:
        matrix: a square matrix, or a function `v -> M v` on pytrees (then `v0` is needed).
        v0: the starting vector (default: uniform in [-1, 1) drawn from `key`).
        num_iters: the most iterations.
        error_tolerance: stop when `||M v - eig v|| / |eig|` is below it.
        precision: of the matrix products.
        key: for `v0` (default `PRNGKey(0)`).

    Example:
        >>> eig, vec = power_iteration(fnp.array([[2.0, 0.0], [0.0, 1.0]]))
        >>> float(eig)
        2.0
    """
    if callable(matrix):
        mvp = matrix
        if v0 is None:
            raise FuncgradValueError("power_iteration: v0 is needed when matrix is a function")
    else:
        mvp = lambda v: fnp.matmul(matrix, v, precision=precision)  # noqa: E731
        if v0 is None:
            v0 = random.uniform(random.PRNGKey(0) if key is None else key,
                                shape=matrix.shape[-1:], dtype=matrix.dtype, minval=-1.0,
                                maxval=1.0)
    v0 = _normalize(v0)

    def body(loop_vars):
        _, z, _, i = loop_vars
        vec = _normalize(z)
        z = mvp(vec)
        return vec, z, tu.tree_vdot(vec, z), i + 1

    init = (v0, mvp(v0), fnp.asarray(0.0), fnp.asarray(0))
    _, z, eig, _ = lax.while_loop(functools.partial(_power_cond, error_tolerance, num_iters),
                                  body, init)
    return eig, _normalize(z)


def _mat_power(m, p, precision):
    # p in {1, 2, 4, 8}: repeated squaring, chosen at run time as optax does.
    def square(x):
        return fnp.matmul(x, x, precision=precision)
    branches = [lambda x: x, square, lambda x: square(square(x)),
                lambda x: square(square(square(x)))]
    return lax.switch(fnp.asarray(fnp.round(fnp.log2(p)), fnp.int32), branches, m)


def matrix_inverse_pth_root(matrix, p, num_iters=100, ridge_epsilon=1e-6,
                            error_tolerance=1e-6, precision=lax.Precision.HIGHEST):
    """`(matrix + ridge)^(-1/p)` for a symmetric positive semi-definite matrix and p in
    {1, 2, 4, 8}, by coupled Newton iterations; returns `(root, error)`.

    Example:
        >>> root, err = matrix_inverse_pth_root(fnp.array([[4.0, 0.0], [0.0, 16.0]]), 2)
    """
    n = matrix.shape[0]
    alpha = fnp.asarray(-1.0 / p, fnp.float32)
    identity = fnp.eye(n, dtype=fnp.float32)
    max_ev, _ = power_iteration(matrix, num_iters=100, error_tolerance=1e-6,
                                precision=precision)
    ridge_epsilon = ridge_epsilon * fnp.maximum(max_ev, 1e-16)
    if n == 1:
        return (matrix + ridge_epsilon) ** alpha, 0

    def cond(state):
        i, _, _, _, error, run_step = state
        return (i < num_iters) & (error > error_tolerance) & run_step

    def body(state):
        i, mat_m, mat_h, _, error, _ = state
        mat_m_i = (1 - alpha) * identity + alpha * mat_m
        new_m = fnp.matmul(_mat_power(mat_m_i, p, precision), mat_m, precision=precision)
        new_h = fnp.matmul(mat_h, mat_m_i, precision=precision)
        new_error = fnp.max(fnp.abs(new_m - identity))
        return i + 1, new_m, new_h, mat_h, new_error, new_error < error * 1.2

    damped = matrix + ridge_epsilon * identity
    z = (1 + p) / (2 * fnp.linalg.norm(damped))
    mat_m0 = damped * z
    mat_h0 = identity * fnp.power(z, 1.0 / p)
    start = (fnp.asarray(0), mat_m0, mat_h0, mat_h0, fnp.max(fnp.abs(mat_m0 - identity)),
             fnp.asarray(True))
    _, mat_m, mat_h, old_h, _, converged = lax.while_loop(cond, body, start)
    error = fnp.max(fnp.abs(mat_m - identity))
    converged = fnp.asarray(converged, old_h.dtype)
    return fnp.asarray(converged * mat_h + (1 - converged) * old_h, matrix.dtype), error


def nnls(A, b, iters: int, unroll=1, L=None):  # noqa: N803 (optax's names)
    """`argmin_{x >= 0} ||A x - b||**2` by `iters` steps of accelerated projected gradient
    descent (FISTA) with step `1 / L` (default: a bound on the spectral radius of `A^T A`).

    Example:
        >>> x = nnls(fnp.eye(2), fnp.array([1.0, -1.0]), iters=50)
    """
    if A.ndim != 2 or b.ndim not in (1, 2) or b.shape[0] != A.shape[0]:
        raise FuncgradValueError(f"nnls: A must be (m, n) and b (m,) or (m, k); got "
                                 f"{tuple(A.shape)} and {tuple(b.shape)}")
    Q = fnp.swapaxes(A, -1, -2) @ A  # noqa: N806
    q = fnp.swapaxes(A, -1, -2) @ b
    if L is None:
        L = fnp.minimum(fnp.linalg.norm(Q, ord="fro"), fnp.linalg.norm(Q, ord=1)) \
            if Q.size else 0.0
    L = fnp.where(L == 0, 1, L)

    def step(carry, _):
        x, p, c = carry
        cn = (1 + fnp.sqrt(1 + 4 * c ** 2)) / 2
        xn = fnp.clip(p - (Q @ p - q) / L, 0)
        return (xn, xn + ((c - 1) / cn) * (xn - x), cn), None

    x = fnp.zeros(A.shape[-1:] + b.shape[1:], dtype=b.dtype)
    (x, _, _), _ = lax.scan(step, (x, x, fnp.asarray(0.0)), length=iters, unroll=unroll)
    return x
