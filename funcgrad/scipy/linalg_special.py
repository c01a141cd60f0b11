"""SciPy's special matrices (`funcgrad.scipy.linalg` re-exports them): `toeplitz`, `hankel`,
`circulant`, `companion`, `convolution_matrix`, `fiedler`, `fiedler_companion`, `leslie`,
`dft`, `hadamard`, `helmert`, `hilbert`, `invhilbert`, `pascal`, `invpascal`.

Those built from arrays gather their entries (so they are differentiable in them, and
`toeplitz`, `hankel`, `circulant`, `fiedler` batch over leading axes, as JAX's); those built
from a size are exact constants (integer arithmetic in Python), in the default float dtype
as JAX's. Imports funcgrad.numpy.
"""

import math
import operator

import numpy as np

import funcgrad.numpy as fnp
from funcgrad import dtypes, errors

__all__ = [
    "circulant", "companion", "convolution_matrix", "dft", "fiedler", "fiedler_companion",
    "hadamard", "hankel", "helmert", "hilbert", "invhilbert", "invpascal", "leslie", "pascal",
    "toeplitz",
]


def _vector(name, x):
    x = fnp.asarray(x)
    if x.ndim < 1:
        raise errors.op_error(name, "needs at least a 1-D array, got a scalar",
                              cls=errors.FuncgradValueError)
    return x


def _join(name, c, r):
    """c and r promoted, broadcast over their leading axes, concatenated (r's first entry
    dropped): the diagonals of a Toeplitz matrix."""
    c, r = _vector(name, c), _vector(name, r)
    dt = fnp.result_type(c, r)
    lead = np.broadcast_shapes(c.shape[:-1], r.shape[:-1])
    c = fnp.broadcast_to(c.astype(dt), lead + c.shape[-1:])
    r = fnp.broadcast_to(r.astype(dt), lead + r.shape[-1:])
    return c, r, fnp.concatenate([fnp.flip(r[..., 1:], -1), c], -1)


def toeplitz(c, r=None):
    """The Toeplitz matrix with first column `c` and first row `r` (default conj(c)); leading
    axes of `c` and `r` batch.

    Example:
        >>> toeplitz(fnp.array([1, 2, 3]), fnp.array([1, 4, 5]))
        Array([[1, 4, 5],
               [2, 1, 4],
               [3, 2, 1]], dtype=int32)
    """
    c = _vector("toeplitz", c)
    c, r, vals = _join("toeplitz", c, fnp.conj(c) if r is None else r)
    m, n = c.shape[-1], r.shape[-1]
    # entry (i, j) is c[i - j] for i >= j and r[j - i] otherwise: vals[n - 1 + i - j]
    idx = (n - 1) + np.arange(m)[:, None] - np.arange(n)[None, :]
    return fnp.take(vals, idx, axis=-1)


def hankel(c, r=None):
    """The Hankel matrix with first column `c` and last row `r` (default zeros, r[0]
    ignored); leading axes batch.

    Example:
        >>> hankel(fnp.array([1, 2, 3]))
        Array([[1, 2, 3],
               [2, 3, 0],
               [3, 0, 0]], dtype=int32)
    """
    c = _vector("hankel", c)
    r = fnp.zeros_like(c) if r is None else _vector("hankel", r)
    dt = fnp.result_type(c, r)
    lead = np.broadcast_shapes(c.shape[:-1], r.shape[:-1])
    c = fnp.broadcast_to(c.astype(dt), lead + c.shape[-1:])
    r = fnp.broadcast_to(r.astype(dt), lead + r.shape[-1:])
    vals = fnp.concatenate([c, r[..., 1:]], -1)
    m, n = c.shape[-1], r.shape[-1]
    return fnp.take(vals, np.arange(m)[:, None] + np.arange(n)[None, :], axis=-1)


def circulant(c):
    """The circulant matrix whose first column is `c` (entry (i, j) = c[(i - j) mod n]);
    leading axes batch.

    Example:
        >>> circulant(fnp.array([1, 2, 3]))
        Array([[1, 3, 2],
               [2, 1, 3],
               [3, 2, 1]], dtype=int32)
    """
    c = _vector("circulant", c)
    n = c.shape[-1]
    return fnp.take(c, (np.arange(n)[:, None] - np.arange(n)[None, :]) % n, axis=-1)


def fiedler(a):
    """The symmetric Fiedler matrix |a[i] - a[j]|; leading axes batch.

    Example:
        >>> fiedler(fnp.array([1.0, 4.0]))
        Array([[0., 3.],
               [3., 0.]], dtype=float32)
    """
    a = _vector("fiedler", a)
    return fnp.abs(a[..., :, None] - a[..., None, :])


def companion(a):
    """The companion matrix of the polynomial with coefficients `a` (highest first): its
    eigenvalues are the polynomial's roots.

    Example:
        >>> companion(fnp.array([1.0, -3.0, 2.0]))
        Array([[ 3., -2.],
               [ 1.,  0.]], dtype=float32)
    """
    a = _vector("companion", a)
    if a.ndim != 1 or a.shape[0] < 2:
        raise errors.op_error("companion", f"a must be 1-D with at least two entries, got "
                              f"shape {a.shape}", cls=errors.FuncgradValueError)
    a = a.astype(fnp.result_type(a, 1.0))
    first = -a[1:] / a[0]
    n = a.shape[0] - 1
    return fnp.concatenate([first[None], fnp.eye(n - 1, n, dtype=a.dtype)], 0)


def convolution_matrix(a, n, mode="full"):
    """The matrix A with `A @ v == convolve(a, v, mode)` for vectors v of length `n`.

    Example:
        >>> convolution_matrix(fnp.array([1.0, 2.0]), 2)
        Array([[1., 0.],
               [2., 1.],
               [0., 2.]], dtype=float32)
    """
    a, n = _vector("convolution_matrix", a), _size("convolution_matrix", n)
    if a.ndim != 1 or not a.shape[0] or n < 1:
        raise errors.op_error("convolution_matrix", f"needs a non-empty 1-D a and n >= 1, got "
                              f"shape {a.shape} and n={n}", cls=errors.FuncgradValueError)
    m = a.shape[0]
    if mode == "full":
        lo, length = 0, m + n - 1
    elif mode == "same":
        length = max(n, m)
        lo = (min(n, m) - 1) // 2
    elif mode == "valid":
        length = max(m, n) - min(m, n) + 1
        lo = min(m, n) - 1
    else:
        raise errors.op_error("convolution_matrix", f"mode must be 'full', 'valid' or 'same', "
                              f"got {errors.short_repr(mode)}", cls=errors.FuncgradValueError)
    padded = fnp.concatenate([fnp.zeros(n - 1, a.dtype), a, fnp.zeros(n - 1, a.dtype)])
    rows = np.arange(lo, lo + length)[:, None] - np.arange(n)[None, :] + (n - 1)
    return fnp.take(padded, rows)


def fiedler_companion(a):
    """The Fiedler companion matrix of the polynomial `a` (pentadiagonal, with the
    polynomial's roots as eigenvalues).

    Example:
        >>> fiedler_companion(fnp.array([1.0, -3.0, 2.0]))
        Array([[ 3., -2.],
               [ 1.,  0.]], dtype=float32)
    """
    a = _vector("fiedler_companion", a)
    if a.ndim != 1:
        raise errors.op_error("fiedler_companion", f"a must be 1-D, got shape {a.shape}",
                              cls=errors.FuncgradValueError)
    a = a.astype(fnp.result_type(a, 1.0))
    if a.shape[0] <= 2:
        return (-(a / a[0])[-1]).reshape(1, 1) if a.shape[0] == 2 else fnp.zeros(
            (0,), a.dtype)
    a = a / a[0]
    n = a.shape[0] - 1
    c = fnp.zeros((n, n), a.dtype)
    c = c.at[np.arange(3, n, 2), np.arange(1, n - 2, 2)].set(1.0)
    c = c.at[np.arange(2, n, 2), np.arange(1, n - 1, 2)].set(-a[3::2])
    c = c.at[np.arange(0, n - 2, 2), np.arange(2, n, 2)].set(1.0)
    c = c.at[np.arange(0, n - 1, 2), np.arange(1, n, 2)].set(-a[2::2])
    return c.at[0, 0].set(-a[1]).at[1, 0].set(1.0)


def leslie(f, s):
    """The Leslie matrix: fecundities `f` in the first row, survival rates `s` below the
    diagonal.

    Example:
        >>> leslie(fnp.array([0.1, 2.0]), fnp.array([0.5]))
        Array([[0.1, 2. ],
               [0.5, 0. ]], dtype=float32)
    """
    f, s = _vector("leslie", f), _vector("leslie", s)
    if f.ndim != 1 or s.ndim != 1 or s.shape[0] != f.shape[0] - 1:
        raise errors.op_error("leslie", f"f (n,) and s (n - 1,) must be 1-D, got shapes "
                              f"{f.shape} and {s.shape}", cls=errors.FuncgradValueError)
    dt = fnp.result_type(f, s)
    n = f.shape[0]
    below = fnp.concatenate([fnp.diag(s.astype(dt)), fnp.zeros((n - 1, 1), dt)], 1)
    return fnp.concatenate([f.astype(dt)[None], below], 0)


# --- constant matrices of a size --------------------------------------------------------------
_MAX_SIZE = 1 << 15  # an n x n matrix of 2**30 entries: beyond it, an error, not a hang


def _size(name, n):
    try:
        n = operator.index(n)
    except TypeError:
        raise errors.op_error(name, f"n must be an int, got {errors.short_repr(n)}",
                              cls=errors.FuncgradTypeError) from None
    if n < 0 or n > _MAX_SIZE:
        raise errors.op_error(name, f"n must be in [0, {_MAX_SIZE}], got {n}",
                              cls=errors.FuncgradValueError)
    return n


def _float_matrix(rows):
    return fnp.asarray(np.array(rows, dtype=np.float64).reshape(len(rows), -1)
                       ).astype(dtypes.default_float())


def dft(n, scale=None, *, dtype=None):
    """The n x n discrete Fourier transform matrix exp(-2 pi i jk / n), divided by sqrt(n)
    (`scale="sqrtn"`) or n (`scale="n"`).

    Example:
        >>> dft(2).real
        Array([[ 1.,  1.],
               [ 1., -1.]], dtype=float32)
    """
    n = _size("dft", n)
    if scale not in (None, "sqrtn", "n"):
        raise errors.op_error("dft", f"scale must be None, 'sqrtn' or 'n', got "
                                     f"{errors.short_repr(scale)}",
                              cls=errors.FuncgradValueError)
    jk = np.outer(np.arange(n), np.arange(n)) % max(n, 1)
    m = np.exp(-2j * np.pi * jk / max(n, 1))
    m = m / {None: 1, "sqrtn": math.sqrt(n or 1), "n": n or 1}[scale]
    dt = dtype if dtype is not None else np.result_type(dtypes.default_float(), np.complex64)
    return fnp.asarray(m).astype(dt)


def hadamard(n, dtype=int):
    """The n x n Hadamard matrix of Sylvester's construction (n a power of 2).

    Example:
        >>> hadamard(2)
        Array([[ 1,  1],
               [ 1, -1]], dtype=int32)
    """
    n = _size("hadamard", n)
    if n < 1 or n & (n - 1):
        raise errors.op_error("hadamard", f"n must be a positive power of 2, got {n}",
                              cls=errors.FuncgradValueError)
    h = np.array([[1]])
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return fnp.asarray(h).astype(dtype)


def helmert(n, full=False):
    """The Helmert matrix of order n (orthonormal rows; without the first, constant row
    unless `full`).

    Example:
        >>> helmert(2, full=True).round(4)
        Array([[ 0.7071,  0.7071],
               [ 0.7071, -0.7071]], dtype=float32)
    """
    n = _size("helmert", n)
    h = np.tril(np.ones((n, n)), -1) - np.diag(np.arange(n))
    d = np.arange(n) * np.arange(1, n + 1)
    if n:
        h[0], d[0] = 1, n
    h = h / np.sqrt(np.maximum(d, 1))[:, None]
    return fnp.asarray(h if full else h[1:]).astype(dtypes.default_float())


def hilbert(n):
    """The n x n Hilbert matrix 1 / (i + j + 1).

    Example:
        >>> hilbert(2)
        Array([[1.        , 0.5       ],
               [0.5       , 0.33333334]], dtype=float32)
    """
    n = _size("hilbert", n)
    i = np.arange(n)
    return fnp.asarray(1.0 / (i[:, None] + i[None, :] + 1.0)).astype(dtypes.default_float())


def invhilbert(n):
    """The exact inverse of the n x n Hilbert matrix (integers, in floating point).

    Example:
        >>> invhilbert(2)
        Array([[ 4., -6.],
               [-6., 12.]], dtype=float32)
    """
    n = _size("invhilbert", n)
    c = math.comb
    rows = [[(-1) ** (i + j) * (i + j + 1) * c(n + i, n - j - 1) * c(n + j, n - i - 1)
             * c(i + j, i) ** 2 for j in range(n)] for i in range(n)]
    return _float_matrix(rows) if n else fnp.zeros((0, 0))


def _pascal_lower(n, sign):
    return [[(sign ** (i + j)) * math.comb(i, j) for j in range(n)] for i in range(n)]


def pascal(n, kind=None):
    """The n x n Pascal matrix: "symmetric" (default, C(i + j, i)), "lower" (C(i, j)) or
    "upper".

    Example:
        >>> pascal(3)
        Array([[1., 1., 1.],
               [1., 2., 3.],
               [1., 3., 6.]], dtype=float32)
    """
    n = _size("pascal", n)
    kind = _kind("pascal", kind)
    if kind == "symmetric":
        rows = [[math.comb(i + j, i) for j in range(n)] for i in range(n)]
    else:
        rows = _pascal_lower(n, 1)
        rows = rows if kind == "lower" else [list(r) for r in zip(*rows)]
    return _float_matrix(rows) if n else fnp.zeros((0, 0))


def invpascal(n, kind=None):
    """The exact inverse of `pascal(n, kind)`.

    Example:
        >>> invpascal(3, "lower")
        Array([[ 1.,  0.,  0.],
               [-1.,  1.,  0.],
               [ 1., -2.,  1.]], dtype=float32)
    """
    n = _size("invpascal", n)
    kind = _kind("invpascal", kind)
    low = np.array(_pascal_lower(n, -1), dtype=object).reshape(n, n)
    if kind == "symmetric":  # P = L L^T, so P^-1 = L^-T L^-1
        m = low.T.dot(low)
    else:
        m = low if kind == "lower" else low.T
    return _float_matrix(m.tolist()) if n else fnp.zeros((0, 0))


def _kind(name, kind):
    kind = "symmetric" if kind is None else kind
    if kind not in ("symmetric", "lower", "upper"):
        raise errors.op_error(name, f"kind must be 'symmetric', 'lower' or 'upper', got "
                              f"{errors.short_repr(kind)}", cls=errors.FuncgradValueError)
    return kind
