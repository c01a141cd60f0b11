"""NumPy's polynomial functions on coefficient arrays (highest power first): `polyval`,
`polyadd`, `polysub`, `polymul`, `polydiv`, `polyder`, `polyint`, `polyfit`, `poly`,
`roots`, `vander`.

Compositions of funcgrad.numpy and linalg (`lstsq`, `eigvals`), differentiable in the
coefficients and points. As JAX: shapes stay static (`polydiv` keeps the remainder's full
length; `roots`/`polymul` strip leading zeros only from concrete values).
"""

import numpy as np

from funcgrad import errors
from funcgrad.core import concrete_value
from funcgrad.numpy._util import asarray_operand, dtype_of, promote, shape_of, static_int
from funcgrad.numpy.calculus import convolve
from funcgrad.numpy.creation import arange, full, ones, zeros
from funcgrad.numpy.logic import where
from funcgrad.numpy.math import add, multiply, negative, sqrt, true_divide
from funcgrad.numpy.reductions import sum
from funcgrad.numpy.shape import atleast_1d, concatenate, diag, flip, stack

__all__ = ["poly", "polyadd", "polyder", "polydiv", "polyfit", "polyint", "polymul",
           "polysub", "polyval", "roots", "vander"]


def polyval(p, x, *, unroll=16):
    """The polynomial with coefficients `p` (highest power first; extra axes of `p`
    broadcast against `x`) at `x`, by Horner's rule.

    Example:
        >>> fnp.polyval(fnp.array([1.0, 0.0, -2.0]), 3.0)  # x**2 - 2
        Array(7., dtype=float32)
    """
    p, x = promote("polyval", [p, x], broadcast=False)
    if not shape_of(p):
        raise errors.op_error("polyval", "p must be at least 1-D", cls=errors.FuncgradValueError)
    y = zeros(np.broadcast_shapes(shape_of(p)[1:], shape_of(x)), dtype_of(x))
    for k in range(shape_of(p)[0]):
        y = add(multiply(y, x), p[k])
    return y


def _pad_front(a, n):
    return a if shape_of(a)[0] >= n else concatenate([zeros(n - shape_of(a)[0], dtype_of(a)),
                                                      a])


def polyadd(a1, a2):
    """The sum of two polynomials (the shorter padded at the front).

    Example:
        >>> fnp.polyadd(fnp.array([1.0, 2.0]), fnp.array([1.0, 0.0, 3.0]))
        Array([1., 1., 5.], dtype=float32)
    """
    a1, a2 = promote("polyadd", [a1, a2], broadcast=False)
    n = max(shape_of(a1)[0], shape_of(a2)[0])
    return add(_pad_front(a1, n), _pad_front(a2, n))


def polysub(a1, a2):
    """The difference of two polynomials.

    Example:
        >>> fnp.polysub(fnp.array([1.0, 2.0]), fnp.array([1.0, 0.0, 3.0]))
        Array([-1.,  1., -1.], dtype=float32)
    """
    a1, a2 = promote("polysub", [a1, a2], broadcast=False)
    return polyadd(a1, negative(a2))


def _trim_front(name, a):
    known = concrete_value(a)
    if known is None:
        raise errors.op_error(name, "trim_leading_zeros needs concrete coefficients",
                              cls=errors.ConcretizationTypeError)
    nz = np.flatnonzero(np.asarray(known))
    return a[int(nz[0]):] if len(nz) else a[:0]


def polymul(a1, a2, *, trim_leading_zeros=False):
    """The product of two polynomials (a full convolution).

    Example:
        >>> fnp.polymul(fnp.array([1.0, 1.0]), fnp.array([1.0, -1.0]))
        Array([ 1.,  0., -1.], dtype=float32)
    """
    a1, a2 = promote("polymul", [a1, a2], inexact=True, broadcast=False)
    if trim_leading_zeros and (shape_of(a1)[0] > 1 or shape_of(a2)[0] > 1):
        a1, a2 = _trim_front("polymul", a1), _trim_front("polymul", a2)
    if not shape_of(a1)[0]:
        a1 = zeros(1, dtype_of(a2))
    if not shape_of(a2)[0]:
        a2 = zeros(1, dtype_of(a1))
    return convolve(a1, a2, mode="full")


def polydiv(u, v, *, trim_leading_zeros=False):
    """`(quotient, remainder)` of polynomial long division of `u` by `v`. The remainder
    keeps `u`'s length (leading entries zero) unless `trim_leading_zeros` (concrete values).

    Example:
        >>> fnp.polydiv(fnp.array([1.0, 0.0, -1.0]), fnp.array([1.0, 1.0]))[0]
        Array([ 1., -1.], dtype=float32)
    """
    u, v = promote("polydiv", [u, v], inexact=True, broadcast=False)
    m, n = shape_of(u)[0] - 1, shape_of(v)[0] - 1
    scale = true_divide(1.0, v[0])
    q = []
    for k in range(m - n + 1):
        d = multiply(scale, u[k])
        q.append(d)
        u = u.at[k:k + n + 1].add(negative(multiply(d, v)))
    quot = stack(q) if q else zeros(1, dtype_of(u))
    if trim_leading_zeros:
        known = concrete_value(u)
        if known is None:
            raise errors.op_error("polydiv", "trim_leading_zeros needs concrete coefficients",
                                  cls=errors.ConcretizationTypeError)
        tol = np.sqrt(np.finfo(dtype_of(u)).eps)
        big = np.flatnonzero(np.abs(np.asarray(known)) > tol)
        u = u[int(big[0]):] if len(big) else u[:0]
    return quot, u


def polyder(p, m=1):
    """The m-th derivative of a polynomial.

    Example:
        >>> fnp.polyder(fnp.array([1.0, 1.0, 1.0]))
        Array([2., 1.], dtype=float32)
    """
    (p,) = promote("polyder", [p], inexact=True, broadcast=False)
    m = static_int("polyder", m, "m")
    if m < 0:
        raise errors.op_error("polyder", "the order of the derivative must be non-negative",
                              cls=errors.FuncgradValueError)
    n = shape_of(p)[0]
    if m == 0:
        return p
    if m >= n:
        return p[:0]
    powers = np.arange(n - 1, -1, -1)[:n - m]  # exponents of the kept coefficients
    coeff = np.prod([powers - j for j in range(m)], axis=0)
    return multiply(p[:n - m], coeff.astype(dtype_of(p)))


def polyint(p, m=1, k=None):
    """The m-th antiderivative of a polynomial, with integration constants `k` (a scalar,
    or one per integration, the first used first).

    Example:
        >>> fnp.polyint(fnp.array([3.0, 2.0]), k=5.0)
        Array([1.5, 2. , 5. ], dtype=float32)
    """
    p, k = promote("polyint", [p, 0 if k is None else k], inexact=True, broadcast=False)
    m = static_int("polyint", m, "m")
    if m < 0:
        raise errors.op_error("polyint", "the order of the integral must be non-negative (see "
                              "polyder)", cls=errors.FuncgradValueError)
    k = atleast_1d(k)
    if shape_of(k)[0] == 1:
        k = full((m,), k[0])
    if shape_of(k) != (m,):
        raise errors.op_error("polyint", "k must be a scalar or a 1-D array of length 1 or m",
                              cls=errors.FuncgradValueError)
    if m == 0:
        return p
    n = shape_of(p)[0]
    grid = np.arange(n + m)[None, :] - np.arange(m)[:, None]
    coeff = np.maximum(1, grid).prod(0)[::-1]
    return true_divide(concatenate([p, k]), coeff.astype(dtype_of(p)))


def vander(x, N=None, increasing=False):  # noqa: N803  (NumPy's name)
    """The Vandermonde matrix of the 1-D `x`: columns x**(N-1), ..., x**0 (reversed with
    `increasing`).

    Example:
        >>> fnp.vander(fnp.array([2.0, 3.0]), 3)
        Array([[4., 2., 1.],
               [9., 3., 1.]], dtype=float32)
    """
    x = asarray_operand("vander", x)
    if len(shape_of(x)) != 1:
        raise errors.op_error("vander", f"x must be 1-D, got shape {shape_of(x)}",
                              cls=errors.FuncgradValueError)
    n = shape_of(x)[0] if N is None else static_int("vander", N, "N")
    if n < 0:
        raise errors.op_error("vander", "N must be non-negative", cls=errors.FuncgradValueError)
    cols, col = [], ones(shape_of(x), dtype_of(x))
    for _ in range(n):
        cols.append(col)
        col = multiply(col, x)
    out = stack(cols, axis=1) if cols else zeros(shape_of(x) + (0,), dtype_of(x))
    return out if increasing else flip(out, 1)


def polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    """The least-squares polynomial of degree `deg` through the points (`x`, `y`) (`y` may
    hold several data sets as columns), optionally weighted by `w`; `full` adds (residuals,
    rank, singular values, rcond), `cov` the coefficients' covariance ("unscaled": without
    the residual variance).

    Example:
        >>> fnp.polyfit(fnp.array([0.0, 1.0, 2.0]), fnp.array([1.0, 3.0, 5.0]), 1).round(4)
        Array([2., 1.], dtype=float32)
    """
    from funcgrad.numpy import linalg
    deg = static_int("polyfit", deg, "deg")
    if deg < 0:
        raise errors.op_error("polyfit", "expected deg >= 0", cls=errors.FuncgradValueError)
    x, y = promote("polyfit", [x, y], inexact=True, broadcast=False)
    if len(shape_of(x)) != 1 or not shape_of(x)[0]:
        raise errors.op_error("polyfit", "expected a non-empty 1-D vector for x",
                              cls=errors.FuncgradTypeError)
    if len(shape_of(y)) not in (1, 2) or shape_of(y)[0] != shape_of(x)[0]:
        raise errors.op_error("polyfit", f"expected a 1-D or 2-D y with x's length, got "
                              f"shapes {shape_of(x)} and {shape_of(y)}",
                              cls=errors.FuncgradTypeError)
    order = deg + 1
    if rcond is None:
        rcond = shape_of(x)[0] * float(np.finfo(dtype_of(x)).eps)
    lhs, rhs = vander(x, order), y
    if w is not None:
        (w,) = promote("polyfit", [w], inexact=True, broadcast=False)
        lhs = multiply(lhs, w[:, None])
        rhs = multiply(rhs, w[:, None] if len(shape_of(rhs)) == 2 else w)
    scale = sqrt(sum(multiply(lhs, lhs), axis=0))
    lhs = true_divide(lhs, scale[None, :])
    c, resids, rank, s = linalg.lstsq(lhs, rhs, rcond)
    c = true_divide(c, scale[:, None] if len(shape_of(c)) > 1 else scale)
    if full:
        return c, resids, rank, s, _scalar(rcond, dtype_of(x))
    if cov:
        base = true_divide(linalg.inv(lhs.T @ lhs), scale[:, None] * scale[None, :])
        if cov == "unscaled":
            fac = ones((), dtype_of(x))
        else:
            if shape_of(x)[0] <= order:
                raise errors.op_error("polyfit", "the number of data points must exceed the "
                                      "order to scale the covariance matrix",
                                      cls=errors.FuncgradValueError)
            fac = true_divide(resids, shape_of(x)[0] - order)
        if len(shape_of(y)) == 1:
            return c, multiply(base, atleast_1d(fac)[None])
        return c, multiply(base[:, :, None], atleast_1d(fac)[None, None, :])
    return c


def _scalar(v, dt):
    return full((), v, dt)


def poly(seq_of_zeros):
    """The coefficients of the monic polynomial with the given roots (or the characteristic
    polynomial of a square matrix).

    Example:
        >>> fnp.poly(fnp.array([1.0, 2.0]))
        Array([ 1., -3.,  2.], dtype=float32)
    """
    (z,) = promote("poly", [seq_of_zeros], inexact=True, broadcast=False)
    z = atleast_1d(z)
    sh = shape_of(z)
    if len(sh) == 2 and sh[0] == sh[1] and sh[0]:
        from funcgrad.numpy import linalg
        z = linalg.eigvals(z)
    if len(shape_of(z)) != 1:
        raise errors.op_error("poly", "input must be 1-D or a non-empty square 2-D array",
                              cls=errors.FuncgradValueError)
    a = ones((1,), dtype_of(z))
    for k in range(shape_of(z)[0]):
        a = convolve(a, stack([ones((), dtype_of(z)), negative(z[k])]), mode="full")
    return a if shape_of(z)[0] else ones((), dtype_of(z))


def roots(p, *, strip_zeros=True):
    """The roots of a polynomial, as the eigenvalues of its companion matrix (complex).
    Leading zeros are stripped from concrete coefficients; with `strip_zeros=False` (which
    works under jit) they give NaN roots instead, as JAX.

    Example:
        >>> fnp.roots(fnp.array([1.0, -3.0, 2.0])).real.sort()
        Array([1., 2.], dtype=float32)
    """
    (p,) = promote("roots", [p], inexact=True, broadcast=False)
    p = atleast_1d(p)
    if len(shape_of(p)) != 1:
        raise errors.op_error("roots", "input must be a rank-1 array",
                              cls=errors.FuncgradValueError)
    cdt = np.result_type(dtype_of(p), np.complex64)
    if shape_of(p)[0] < 2:
        return zeros((0,), cdt)
    if strip_zeros:
        known = concrete_value(p)
        if known is None:
            raise errors.op_error("roots", "stripping leading zeros needs concrete "
                                  "coefficients", cls=errors.ConcretizationTypeError,
                                  hint="pass strip_zeros=False under jit (leading zeros then "
                                       "give NaN roots)")
        nz = np.flatnonzero(np.asarray(known))
        return _companion_roots(p[int(nz[0]) if len(nz) else shape_of(p)[0]:], cdt)
    lead = where((p == 0).all(), shape_of(p)[0], (p == 0).argmin())
    n = shape_of(p)[0]
    shifted = p[(arange(n) + lead) % n]
    shifted = where(lead == n, ones((n,), dtype_of(p)), shifted)
    r = _companion_roots(shifted, cdt)
    from funcgrad import lax
    r = lax.sort((r == 0, r), num_keys=1)[1]  # the zero roots (from the zeros rolled last)
    return where(arange(n - 1) < n - 1 - lead, r, complex(np.nan, np.nan))


def _companion_roots(p, cdt):
    from funcgrad.numpy import linalg
    n = shape_of(p)[0]
    if n < 2:
        return zeros((0,), cdt)
    a = diag(ones((n - 2,), dtype_of(p)), -1)
    a = a.at[0, :].set(negative(true_divide(p[1:], p[0])))
    return linalg.eigvals(a)

