"""Activation and normalization functions as in `jax.nn`, stable at extreme float32 inputs.

Every function is written with `funcgrad.numpy`/`lax`, so it runs eagerly and under
`grad`, `jit` and `vmap`. Derivatives at kinks follow JAX: `relu'(0) = 0`, `relu6'` is 0 at
0 and 6. This module must not import the layer or loss modules.

    >>> import funcgrad.numpy as fnp
    >>> softmax(fnp.array([1000.0, 1000.0])).tolist()
    [0.5, 0.5]
"""

import numpy as np

import funcgrad.numpy as fnp
from funcgrad import dtypes, errors, lax

__all__ = [
    "celu", "elu", "gelu", "glu", "hard_sigmoid", "hard_silu", "hard_swish", "hard_tanh",
    "leaky_relu", "log_sigmoid", "log_softmax", "logsumexp", "one_hot", "relu", "relu6",
    "selu", "sigmoid", "silu", "soft_sign", "softmax", "softplus", "standardize", "swish",
    "tanh",
    # the long tail (issue 28)
    "identity", "log1mexp", "logmeanexp", "mish", "sparse_plus", "sparse_sigmoid", "squareplus",
]


def _float(x):
    x = fnp.asarray(x)
    return x if dtypes.kind(x.dtype) in "fc" else x.astype(dtypes.default_float())


def relu(x):
    """max(x, 0), with derivative 0 at 0 (as `jax.nn.relu`).

    Example: ``relu(fnp.array([-1.0, 2.0]))`` is ``[0., 2.]``.
    """
    x = fnp.asarray(x)
    return fnp.where(x > 0, x, fnp.zeros_like(x))


def relu6(x):
    """min(max(x, 0), 6), with derivative 0 at both kinks.

    Example: ``relu6(fnp.array([-1.0, 3.0, 9.0]))`` is ``[0., 3., 6.]``.
    """
    x = fnp.asarray(x)
    return fnp.where(x >= 6, fnp.full_like(x, 6), relu(x))


def sigmoid(x):
    """The logistic function 1 / (1 + exp(-x)), stable for any float input.

    Example: ``sigmoid(0.0)`` is ``0.5``.
    """
    return lax.logistic(_float(x))


def log_sigmoid(x):
    """log(sigmoid(x)) = -softplus(-x), finite for very negative `x`.

    Example: ``log_sigmoid(-1000.0)`` is ``-1000.0``.
    """
    return -softplus(-_float(x))


def softplus(x):
    """log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|)), with derivative sigmoid(x) everywhere
    (0.5 at 0: the `-|x|` is written as a select so that its slope at 0 is the right one).

    Example: ``softplus(1000.0)`` is ``1000.0``.
    """
    x = _float(x)
    pos = x > 0
    return fnp.where(pos, x, fnp.zeros_like(x)) + fnp.log1p(fnp.exp(fnp.where(pos, -x, x)))


def soft_sign(x):
    """x / (|x| + 1).

    Example: ``soft_sign(1.0)`` is ``0.5``.
    """
    x = _float(x)
    return x / (fnp.abs(x) + 1)


def silu(x):
    """x * sigmoid(x) (also called swish).

    Example: ``silu(0.0)`` is ``0.0``.
    """
    x = _float(x)
    return x * sigmoid(x)


swish = silu


def hard_sigmoid(x):
    """relu6(x + 3) / 6.

    Example: ``hard_sigmoid(0.0)`` is ``0.5``.
    """
    return relu6(_float(x) + 3.0) / 6.0


def hard_silu(x):
    """x * hard_sigmoid(x) (also called hard_swish).

    Example: ``hard_silu(3.0)`` is ``3.0``.
    """
    x = _float(x)
    return x * hard_sigmoid(x)


hard_swish = hard_silu


def tanh(x):
    """The hyperbolic tangent.

    Example: ``tanh(0.0)`` is ``0.0``.
    """
    return fnp.tanh(_float(x))


def hard_tanh(x):
    """x clipped to [-1, 1].

    Example: ``hard_tanh(fnp.array([-3.0, 0.5]))`` is ``[-1., 0.5]``.
    """
    x = _float(x)
    return fnp.where(x > 1, fnp.ones_like(x), fnp.where(x < -1, -fnp.ones_like(x), x))


def elu(x, alpha=1.0):
    """x for x > 0, alpha * (exp(x) - 1) otherwise (no overflow in the unused branch).

    Example: ``elu(-1000.0)`` is ``-1.0``.
    """
    x = _float(x)
    safe = fnp.where(x > 0, fnp.zeros_like(x), x)
    return fnp.where(x > 0, x, alpha * fnp.expm1(safe))


def celu(x, alpha=1.0):
    """max(x, 0) + alpha * (exp(min(x, 0) / alpha) - 1) (no overflow for large x).

    Example: ``celu(1.0)`` is ``1.0``.
    """
    x = _float(x)
    return fnp.maximum(x, 0.0) + alpha * fnp.expm1(fnp.minimum(x, 0.0) / alpha)


def selu(x):
    """Scaled ELU with the self-normalizing constants of Klambauer et al. (2017).

    Example: ``selu(0.0)`` is ``0.0``.
    """
    alpha, scale = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
    return scale * elu(x, alpha)


def leaky_relu(x, negative_slope=1e-2):
    """x for x >= 0, negative_slope * x otherwise.

    Example: ``leaky_relu(-2.0)`` is ``-0.02``.
    """
    x = _float(x)
    return fnp.where(x >= 0, x, negative_slope * x)


def gelu(x, approximate=True):
    """The Gaussian error linear unit; `approximate=True` (JAX's default) uses the tanh form
    ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``, else ``x * Phi(x)`` with erf.

    Example: ``gelu(0.0)`` is ``0.0``.
    """
    x = _float(x)
    if approximate:
        c = np.sqrt(2 / np.pi).astype(x.dtype)
        return x * (0.5 * (1.0 + fnp.tanh(c * (x + 0.044715 * (x ** 3)))))
    return x * (lax.erfc(-x / np.sqrt(2).astype(x.dtype)) / 2)


def glu(x, axis=-1):
    """Gated linear unit: the first half of `x` along `axis` times sigmoid of the second.

    Example: ``glu(fnp.array([2.0, 0.0]))`` is ``[1.]``.
    """
    x = _float(x)
    a, b = fnp.split(x, 2, axis=axis)
    return a * sigmoid(b)


def _reduction_axes(x, axis):
    if axis is None:
        return tuple(range(x.ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    return tuple(a % x.ndim if x.ndim else a for a in axes)


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False, where=None):
    """log(sum(b * exp(a))) over `axis`, shifting by the (stop-gradient) maximum.

    Args:
        a: the input.
        axis: int, tuple or None (all axes).
        b: optional scale factors broadcastable to `a` (may be negative).
        keepdims: keep the reduced axes with size 1.
        return_sign: also return the sign of the sum (then the log is of |sum|).
        where: optional boolean mask of the elements to include.

    Returns:
        The reduced array (and the sign, with `return_sign`). A negative sum without
        `return_sign` gives NaN, as in JAX.

    Example:
        >>> float(logsumexp(fnp.array([1000.0, 1000.0])))  # 1000 + log 2
        1000.6931762695312
    """
    a = _float(a)
    if b is not None:
        a, b = fnp.broadcast_arrays(a, _float(b).astype(a.dtype))
        a = fnp.where(b != 0, a, -fnp.inf)
    axes = _reduction_axes(a, axis)
    amax = fnp.max(a, axis=axes, keepdims=True, where=where, initial=-fnp.inf)
    amax = lax.stop_gradient(fnp.where(fnp.isfinite(amax), amax, fnp.zeros_like(amax)))
    e = fnp.exp(a - amax)
    if b is not None:
        e = e * b
    s = fnp.sum(e, axis=axes, keepdims=keepdims, where=where)
    amax = amax if keepdims else fnp.squeeze(amax, axis=axes)
    sign = fnp.sign(s)
    out = fnp.log(fnp.abs(s)) + amax
    if return_sign:
        return out, sign
    if b is not None:
        out = fnp.where(sign < 0, fnp.full_like(out, np.nan), out)
    return out


def log_softmax(x, axis=-1, where=None):
    """x - logsumexp(x) along `axis`, stable at extreme inputs; masked entries give -inf.

    Example:
        >>> log_softmax(fnp.array([0.0, -1000.0])).tolist()
        [0.0, -1000.0]
    """
    x = _float(x)
    axes = _reduction_axes(x, axis)
    xmax = fnp.max(x, axis=axes, keepdims=True, where=where, initial=-fnp.inf)
    x_safe = x if where is None else fnp.where(where, x, -fnp.inf)
    shifted = x_safe - lax.stop_gradient(xmax)
    out = shifted - fnp.log(fnp.sum(fnp.exp(shifted), axis=axes, keepdims=True, where=where))
    return out if where is None else fnp.where(where, out, -fnp.inf)


def softmax(x, axis=-1, where=None):
    """exp(x) / sum(exp(x)) along `axis`, stable at extreme inputs; masked entries give 0.

    Example:
        >>> softmax(fnp.array([100.0, 100.0, 101.0])).round(4).tolist()
        [0.2119, 0.2119, 0.5761]
    """
    x = _float(x)
    axes = _reduction_axes(x, axis)
    xmax = fnp.max(x, axis=axes, keepdims=True, where=where, initial=-fnp.inf)
    x_safe = x if where is None else fnp.where(where, x, -fnp.inf)
    e = fnp.exp(x_safe - lax.stop_gradient(xmax))
    out = e / fnp.sum(e, axis=axes, keepdims=True, where=where)
    return out if where is None else fnp.where(where, out, fnp.zeros_like(out))


def standardize(x, axis=-1, mean=None, variance=None, epsilon=1e-5, where=None, *,
                algorithm="fast"):
    """(x - mean) / sqrt(variance + epsilon), statistics over `axis` unless given.

    The variance is JAX's: `algorithm="fast"` computes `mean(x^2) - mean(x)^2` (clipped at 0:
    it may cancel), `"stable"` the two-pass `mean((x - mean(x))^2)`.

    Example:
        >>> standardize(fnp.array([1.0, 3.0])).round(3).tolist()
        [-1.0, 1.0]
    """
    if algorithm not in ("fast", "stable"):
        raise errors.FuncgradValueError(f"standardize: unknown algorithm {algorithm!r}; "
                                        f"expected 'fast' or 'stable'\n{errors.where()}")
    x = _float(x)
    axes = _reduction_axes(x, axis)
    if mean is None:
        mean = fnp.mean(x, axis=axes, keepdims=True, where=where)
    if variance is None and algorithm == "stable":
        variance = fnp.mean(fnp.square(x - mean), axis=axes, keepdims=True, where=where)
    elif variance is None:
        variance = fnp.maximum(fnp.mean(fnp.square(x), axis=axes, keepdims=True, where=where)
                               - fnp.square(mean), 0)
    return (x - mean) * lax.rsqrt(variance + epsilon)


def one_hot(x, num_classes, dtype=None, axis=-1):
    """One-hot encoding of integer `x` with `num_classes` classes along a new `axis`.
    Out-of-range (and negative) indices give all-zero rows, as in JAX.

    Example:
        >>> one_hot(fnp.array([0, 2]), 3).tolist()
        [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
    """
    x = fnp.asarray(x)
    dtype = dtypes.as_dtype(dtype) if dtype is not None else dtypes.default_float()
    out_ndim = x.ndim + 1
    axis = axis + out_ndim if axis < 0 else axis
    lhs = fnp.expand_dims(x, axis)
    shape = [1] * out_ndim
    shape[axis] = num_classes
    rhs = fnp.arange(num_classes, dtype=x.dtype).reshape(shape)
    return (lhs == rhs).astype(dtype)


# --- the long tail (issue 28) -----------------------------------------------------------------
def identity(x):
    """`x` itself, as an array.

    Example: ``identity(2.0)`` is ``Array(2., dtype=float32, weak_type=True)``.
    """
    return fnp.asarray(x)


def mish(x):
    """x * tanh(softplus(x)) (Misra, 2019).

    Example: ``mish(fnp.array([0.0]))`` is ``[0.]``.
    """
    x = _float(x)
    return x * fnp.tanh(softplus(x))


def squareplus(x, b=4):
    """(x + sqrt(x**2 + b)) / 2, a smooth ReLU (So, 2021).

    Example: ``squareplus(0.0)`` is ``1.0``.
    """
    x = _float(x)
    return (x + fnp.sqrt(fnp.square(x) + b)) / 2


def sparse_plus(x):
    """0 for x <= -1, x for x >= 1, (x + 1)**2 / 4 in between (Martins et al.'s sparse
    softplus).

    Example: ``sparse_plus(fnp.array([-2.0, 0.0, 2.0]))`` is ``[0., 0.25, 2.]``.
    """
    x = _float(x)
    return fnp.where(x <= -1.0, 0.0, fnp.where(x >= 1.0, x, (x + 1.0) ** 2 / 4)).astype(x.dtype)


def sparse_sigmoid(x):
    """clip((x + 1) / 2, 0, 1), the derivative of `sparse_plus`.

    Example: ``sparse_sigmoid(fnp.array([-2.0, 0.0, 2.0]))`` is ``[0., 0.5, 1.]``.
    """
    x = _float(x)
    return 0.5 * fnp.clip(x + 1.0, 0.0, 2.0)


def log1mexp(x):
    """log(1 - exp(-x)) for x > 0, accurate near 0 and for large x (Maechler's switch at
    log 2; each branch sees only inputs where it is finite, so derivatives are too).

    Example: ``log1mexp(fnp.array([1e-8, 50.0]))`` is about ``[-18.42, -1.9e-22]``.
    """
    x = _float(x)
    c = np.log(2.0)
    small = x < c
    xs, xl = fnp.where(small, x, c), fnp.where(small, c, x)
    return fnp.where(small, fnp.log(-fnp.expm1(-xs)), fnp.log1p(-fnp.exp(-xl)))


def logmeanexp(x, axis=None, where=None, keepdims=False):
    """log(mean(exp(x))) over `axis` (only the entries `where` holds), stably.

    Example: ``logmeanexp(fnp.array([0.0, 0.0]))`` is ``0.0``.
    """
    x = _float(x)
    lse = logsumexp(x, axis=axis, keepdims=keepdims, where=where)
    axes = _reduction_axes(x, axis)
    if where is None:  # the count is static
        return lse - np.log(float(np.prod([x.shape[a] for a in axes])))
    mask = fnp.broadcast_to(fnp.where(where, 1.0, 0.0).astype(x.dtype), x.shape)
    return lse - fnp.log(fnp.sum(mask, axis=axes, keepdims=keepdims))
