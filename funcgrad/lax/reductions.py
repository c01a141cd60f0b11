"""Reductions: reduce_sum/max/min/prod/and/or, argmax/argmin, and the cumulative reductions
cumsum/cumprod/cummax/cummin/cumlogsumexp.

Axes are distinct non-negative ints, as in JAX's lax. Sums and products keep the operand's
dtype and reject bool (funcgrad.numpy converts first). The derivatives of the cumulative
reductions solve a first-order linear recurrence with a log-depth (Hillis-Steele) scan of
lax slices, so they are exact, differentiable again and transposable.
"""

import numpy as np

from funcgrad import dtypes, errors
from funcgrad.core import Primitive, ReduceOp, ShapedArray, get_aval
from funcgrad.core.placement import place
from funcgrad.interpreters import ad, batching
from funcgrad.lax.elementwise import add_p, max_p, min_p, mul_p
from funcgrad.lax.shape import broadcast_in_dim, full_like, reshape, rev, transpose
from funcgrad.lax.utils import check_kind, quiet, static_int, static_ints


def _check_axes(name, x, axes):
    if any(not 0 <= a < x.ndim for a in axes) or len(set(axes)) != len(axes):
        raise errors.op_error(name, f"axes {axes} out of range for operand {x}",
                              cls=errors.FuncgradValueError)


def _reduced_aval(name, x, axes, dtype=None, weak_type=None):
    _check_axes(name, x, axes)
    shape = tuple(s for i, s in enumerate(x.shape) if i not in axes)
    return ShapedArray(shape, dtype or x.dtype, x.weak_type if weak_type is None else weak_type)


def _reduction(name, impl, kinds, reduce_op=None):
    """A primitive reducing its operand over `axes` with `impl(x, axes)`; one with a
    `reduce_op` (a `ReduceOp`) may end a fused kernel."""
    p = Primitive(name)
    p.def_impl(quiet(lambda x, *, axes: impl(x, axes)))

    def abstract(x, *, axes):
        check_kind(name, x, kinds)
        return _reduced_aval(name, x, axes)
    p.def_abstract_eval(abstract)
    batching.defreducer(p)
    return p.declare("reduction", dtype_kinds=kinds, fusible=reduce_op is not None,
                     reduce_op=reduce_op)


def _axes(name, axes):
    return static_ints(name, axes, "axes")


def _lowest(dt):
    return dtypes.lowest(dt)


def _highest(dt):
    return dtypes.highest(dt)


def _widened(dtype):
    """What a kernel accumulates `dtype` in: float16, bfloat16 and the float8 types in float32
    (as numpy's float16 loops, as XLA on the CPU), bools and small integers (int4 too) in
    32-bit integers, every other dtype in itself."""
    dt = np.dtype(dtype)
    kind = dtypes.kind(dt)
    if kind == "f":
        return "float32" if dt.itemsize < 4 else dt.name
    if kind == "b":
        return "int32"
    if dt.itemsize < 4:
        return "int32" if kind == "i" else "uint32"
    return dt.name


# --- reduce_sum -------------------------------------------------------------------------------
def reduce_sum(operand, axes, *, out_sharding=None):
    """Sum of `operand` over `axes` (distinct non-negative ints); integer dtypes wrap around.
    `out_sharding`: None or one device (`core.placement`).

    Example:
        >>> reduce_sum(fnp.ones((2, 3)), (1,))
        Array([3., 3.], dtype=float32)
    """
    out = reduce_sum_p.bind(operand, axes=_axes("reduce_sum", axes))
    return place("reduce_sum", out, out_sharding)


def _reduce_sum_transpose(ct, x, *, axes):
    shape = x.aval.shape
    kept = tuple(i for i in range(len(shape)) if i not in axes)
    return [broadcast_in_dim(ct, shape, kept)]


SUM = ReduceOp("sum", add_p, np.add, lambda dt: 0, _widened, openmp="+", pairwise=True)
reduce_sum_p = _reduction("reduce_sum", lambda x, axes: np.sum(x, axis=axes, dtype=x.dtype),
                          "iufc", SUM)
ad.deflinear(reduce_sum_p, _reduce_sum_transpose)


# --- reduce_max / reduce_min ------------------------------------------------------------------
def reduce_max(operand, axes):
    """Maximum of `operand` over `axes` (-inf, or the dtype's minimum, over an empty axis).

    The derivative is averaged over the locations that attain the maximum (JAX's rule).

    Example:
        >>> reduce_max(fnp.array([1., 3., 2.]), (0,))
        Array(3., dtype=float32)
    """
    return reduce_max_p.bind(operand, axes=_axes("reduce_max", axes))


def _reduce_chooser_jvp(primals, out, tangents, *, axes):
    # t_out = sum(t * at_extremum) / count(at_extremum)
    from funcgrad import lax
    x, t = primals[0], tangents[0]
    shape = get_aval(x).shape
    kept = tuple(i for i in range(len(shape)) if i not in axes)
    at = lax.eq(x, broadcast_in_dim(out, shape, kept))
    at = lax.convert_element_type(at, get_aval(t).dtype)
    return lax.div(reduce_sum(lax.mul(t, at), axes), reduce_sum(at, axes))


MAX = ReduceOp("max", max_p, np.maximum, _lowest, _widened, openmp="max", selects=True)
reduce_max_p = _reduction(
    "reduce_max", lambda x, axes: np.max(x, axis=axes, initial=_lowest(x.dtype)), "biuf", MAX)
ad.jvp_rules[reduce_max_p] = _reduce_chooser_jvp


def reduce_min(operand, axes):
    """Minimum of `operand` over `axes` (+inf, or the dtype's maximum, over an empty axis).

    Example:
        >>> reduce_min(fnp.array([1., 3., 2.]), (0,))
        Array(1., dtype=float32)
    """
    return reduce_min_p.bind(operand, axes=_axes("reduce_min", axes))


MIN = ReduceOp("min", min_p, np.minimum, _highest, _widened, openmp="min", selects=True)
reduce_min_p = _reduction(
    "reduce_min", lambda x, axes: np.min(x, axis=axes, initial=_highest(x.dtype)), "biuf", MIN)
ad.jvp_rules[reduce_min_p] = _reduce_chooser_jvp


# --- reduce_prod ------------------------------------------------------------------------------
def reduce_prod(operand, axes):
    """Product of `operand` over `axes` (1 over an empty axis).

    Example:
        >>> reduce_prod(fnp.array([2., 3.]), (0,))
        Array(6., dtype=float32)
    """
    return reduce_prod_p.bind(operand, axes=_axes("reduce_prod", axes))


def _reduce_prod_jvp(primals, out, tangents, *, axes):
    # sum_i t_i prod_{j != i} x_j is the last entry of cumprod's tangent along the reduced
    # axes flattened into one: no division, so zeros are handled exactly
    x, t = primals[0], tangents[0]
    shape = get_aval(x).shape
    kept = tuple(i for i in range(len(shape)) if i not in axes)
    n = int(np.prod([shape[a] for a in axes], dtype=np.int64))
    if n == 0:
        return ad.Zero(get_aval(out))
    flat = lambda v: reshape(transpose(v, tuple(axes) + kept), (n,) + get_aval(out).shape)
    xf, tf = flat(x), flat(t)
    tan = _cumprod_tangent(xf, cumprod(xf, 0), tf, 0)
    return reshape(_slice_axis(tan, n - 1, n, 0), get_aval(out).shape)


PROD = ReduceOp("prod", mul_p, np.multiply, lambda dt: 1, _widened, openmp="*")
reduce_prod_p = _reduction(
    "reduce_prod", lambda x, axes: np.prod(x, axis=axes, dtype=x.dtype), "iufc", PROD)
ad.jvp_rules[reduce_prod_p] = _reduce_prod_jvp


# --- reduce_and / reduce_or / reduce_xor: logical on bools, bitwise on integers -------------
def reduce_and(operand, axes):
    """AND of `operand` over `axes`: logical for bool, bitwise for integers (True, or all
    bits set, over an empty axis).

    Example:
        >>> reduce_and(fnp.array([6, 3]), (0,))
        Array(2, dtype=int32)
    """
    return reduce_and_p.bind(operand, axes=_axes("reduce_and", axes))


reduce_and_p = _reduction("reduce_and", lambda x, axes: np.bitwise_and.reduce(x, axis=axes),
                          "biu")
ad.defjvp_zero(reduce_and_p)


def reduce_or(operand, axes):
    """OR of `operand` over `axes`: logical for bool, bitwise for integers (False, or 0, over
    an empty axis).

    Example:
        >>> reduce_or(fnp.array([4, 1]), (0,))
        Array(5, dtype=int32)
    """
    return reduce_or_p.bind(operand, axes=_axes("reduce_or", axes))


reduce_or_p = _reduction("reduce_or", lambda x, axes: np.bitwise_or.reduce(x, axis=axes), "biu")
ad.defjvp_zero(reduce_or_p)


def reduce_xor(operand, axes):
    """XOR of `operand` over `axes`: parity for bool, bitwise for integers (False, or 0,
    over an empty axis).

    Example:
        >>> reduce_xor(fnp.array([6, 3]), (0,))
        Array(5, dtype=int32)
    """
    return reduce_xor_p.bind(operand, axes=_axes("reduce_xor", axes))


reduce_xor_p = _reduction("reduce_xor", lambda x, axes: np.bitwise_xor.reduce(x, axis=axes),
                          "biu")
ad.defjvp_zero(reduce_xor_p)


# --- argmax / argmin --------------------------------------------------------------------------
def argmax(operand, axis, index_dtype):
    """Index of the first maximum of `operand` along `axis` (a NaN counts as the maximum).

    Example:
        >>> argmax(fnp.array([1., 3., 3.]), 0, fnp.int32)
        Array(1, dtype=int32)
    """
    return argmax_p.bind(operand, axes=(static_int("argmax", axis, "axis"),),
                       index_dtype=dtypes.canonicalize(index_dtype))


def _argminmax(name, np_fn):
    p = Primitive(name)
    p.def_impl(lambda x, *, axes, index_dtype: np_fn(x, axis=axes[0]).astype(index_dtype))

    def abstract(x, *, axes, index_dtype):
        check_kind(name, x, "biuf")
        if dtypes.kind(index_dtype) not in "iu":
            raise errors.op_error(name, f"index_dtype must be an integer dtype, got "
                                  f"{index_dtype}")
        aval = _reduced_aval(name, x, axes, index_dtype, weak_type=False)
        if x.shape[axes[0]] == 0:
            raise errors.op_error(name, f"needs a non-empty axis {axes[0]} in operand {x}",
                                  cls=errors.FuncgradValueError)
        return aval
    p.def_abstract_eval(abstract)
    ad.defjvp_zero(p)
    batching.defreducer(p)
    return p.declare("reduction", dtype_kinds="biuf")


argmax_p = _argminmax("argmax", np.argmax)


def argmin(operand, axis, index_dtype):
    """Index of the first minimum of `operand` along `axis` (a NaN counts as the minimum).

    Example:
        >>> argmin(fnp.array([3., 1., 1.]), 0, fnp.int32)
        Array(1, dtype=int32)
    """
    return argmin_p.bind(operand, axes=(static_int("argmin", axis, "axis"),),
                       index_dtype=dtypes.canonicalize(index_dtype))


argmin_p = _argminmax("argmin", np.argmin)


# --- cumulative reductions: shared machinery --------------------------------------------------
def _cumulative(name, accumulate, kinds):
    """A primitive `name(x, axis, reverse)` running `accumulate(x, axis)` along `axis`."""
    p = Primitive(name)

    def impl(x, *, axis, reverse):
        if not reverse:
            return accumulate(x, axis)
        return np.flip(accumulate(np.flip(x, axis), axis), axis)
    p.def_impl(quiet(impl))

    def abstract(x, *, axis, reverse):
        check_kind(name, x, kinds)
        if not 0 <= axis < x.ndim:
            raise errors.op_error(name, f"axis {axis} is out of range for operand {x}",
                                  cls=errors.FuncgradValueError)
        return x
    p.def_abstract_eval(abstract)

    def batch(args, dims, *, axis, reverse):
        d = dims[0]
        return p.bind(args[0], axis=axis + (d <= axis), reverse=reverse), d
    batching.batch_rules[p] = batch
    return p


def _slice_axis(v, start, limit, axis):
    from funcgrad.lax.slicing import slice_in_dim
    return slice_in_dim(v, start, limit, axis=axis)


def _previous(v, axis):
    """`v` shifted by one along `axis`: entry i is v[i - 1] (entry 0 is v[0])."""
    from funcgrad.lax.slicing import concatenate
    n = get_aval(v).shape[axis]
    return concatenate([_slice_axis(v, 0, 1, axis), _slice_axis(v, 0, n - 1, axis)], axis)


def _linear_scan(a, b, axis):
    """y with y[i] = a[i] * y[i - 1] + b[i] and y[-1] = 0 (a[0] is unused), in log2(n) steps:
    each step composes the segment ending at i - k with the one ending at i."""
    from funcgrad import lax
    from funcgrad.lax.slicing import concatenate
    n, k = get_aval(b).shape[axis], 1
    while k < n:
        a_late = _slice_axis(a, k, n, axis)
        b_new = lax.add(lax.mul(a_late, _slice_axis(b, 0, n - k, axis)), _slice_axis(b, k, n, axis))
        a_new = lax.mul(a_late, _slice_axis(a, 0, n - k, axis))
        b = concatenate([_slice_axis(b, 0, k, axis), b_new], axis)
        a = concatenate([_slice_axis(a, 0, k, axis), a_new], axis)
        k *= 2
    return b


def _cumulative_jvp(tangent):
    """A jvp rule from `tangent(x, out, t, axis)`, the tangent of a forward accumulation."""
    def rule(primals, out, tangents, *, axis, reverse):
        x, t = primals[0], tangents[0]
        if get_aval(x).shape[axis] == 0:
            return t
        if not reverse:
            return tangent(x, out, t, axis)
        flip = lambda v: rev(v, (axis,))
        return flip(tangent(flip(x), flip(out), flip(t), axis))
    return rule


# --- cumsum -----------------------------------------------------------------------------------
def cumsum(operand, axis=0, reverse=False):
    """Running sum of `operand` along `axis` (from the end when `reverse`).

    Example:
        >>> cumsum(fnp.array([1., 2., 3.]), reverse=True)
        Array([6., 5., 3.], dtype=float32)
    """
    return cumsum_p.bind(operand, axis=static_int("cumsum", axis, "axis"), reverse=bool(reverse))


cumsum_p = _cumulative("cumsum", lambda x, axis: np.cumsum(x, axis, dtype=x.dtype), "iufc")
ad.deflinear(cumsum_p, lambda ct, x, *, axis, reverse: [cumsum(ct, axis, not reverse)])


# --- cumprod ----------------------------------------------------------------------------------
def cumprod(operand, axis=0, reverse=False):
    """Running product of `operand` along `axis` (from the end when `reverse`).

    Example:
        >>> cumprod(fnp.array([1., 2., 3.]))
        Array([1., 2., 6.], dtype=float32)
    """
    return cumprod_p.bind(operand, axis=static_int("cumprod", axis, "axis"), reverse=bool(reverse))


def _cumprod_tangent(x, out, t, axis):
    # out[i] = x[i] out[i-1]  =>  dout[i] = x[i] dout[i-1] + t[i] out[i-1]  (out[-1] = 1)
    from funcgrad import lax
    from funcgrad.lax.slicing import concatenate
    n = get_aval(x).shape[axis]
    ones = full_like(_slice_axis(out, 0, 1, axis), 1)
    before = concatenate([ones, _slice_axis(out, 0, n - 1, axis)], axis)
    return _linear_scan(x, lax.mul(t, before), axis)


cumprod_p = _cumulative("cumprod", lambda x, axis: np.cumprod(x, axis, dtype=x.dtype), "iufc")
ad.jvp_rules[cumprod_p] = _cumulative_jvp(_cumprod_tangent)


# --- cummax / cummin --------------------------------------------------------------------------
def cummax(operand, axis=0, reverse=False):
    """Running maximum of `operand` along `axis` (from the end when `reverse`).

    The derivative of entry i follows reduce_max's rule on the prefix: it averages the
    tangents of the entries up to i that attain the running maximum.

    Example:
        >>> cummax(fnp.array([1., 3., 2.]))
        Array([1., 3., 3.], dtype=float32)
    """
    return cummax_p.bind(operand, axis=static_int("cummax", axis, "axis"), reverse=bool(reverse))


def _cumextremum_tangent(x, out, t, axis):
    # entries attaining out[i] lie in the current run of equal out values (a plateau):
    # segmented sums restart where out changes; divide by the count of such entries
    from funcgrad import lax
    dt = get_aval(t).dtype
    hit = lax.convert_element_type(lax.eq(x, out), dt)
    same = lax.convert_element_type(lax.eq(out, _previous(out, axis)), dt)
    count = _linear_scan(same, hit, axis)
    count = lax.add(count, lax.convert_element_type(lax.eq(count, 0), dt))  # NaN: no hits
    return lax.div(_linear_scan(same, lax.mul(t, hit), axis), count)


cummax_p = _cumulative("cummax", lambda x, axis: np.maximum.accumulate(x, axis), "biuf")
ad.jvp_rules[cummax_p] = _cumulative_jvp(_cumextremum_tangent)


def cummin(operand, axis=0, reverse=False):
    """Running minimum of `operand` along `axis` (from the end when `reverse`); its
    derivative follows cummax's rule.

    Example:
        >>> cummin(fnp.array([2., 1., 3.]))
        Array([2., 1., 1.], dtype=float32)
    """
    return cummin_p.bind(operand, axis=static_int("cummin", axis, "axis"), reverse=bool(reverse))


cummin_p = _cumulative("cummin", lambda x, axis: np.minimum.accumulate(x, axis), "biuf")
ad.jvp_rules[cummin_p] = _cumulative_jvp(_cumextremum_tangent)


# --- cumlogsumexp -----------------------------------------------------------------------------
def cumlogsumexp(operand, axis=0, reverse=False):
    """Running log(sum(exp(x))) of a float `operand` along `axis`, computed stably.

    Example:
        >>> cumlogsumexp(fnp.array([0., 0.]))
        Array([0.       , 0.6931472], dtype=float32)
    """
    return cumlogsumexp_p.bind(operand, axis=static_int("cumlogsumexp", axis, "axis"),
                               reverse=bool(reverse))


def _cumlogsumexp_tangent(x, out, t, axis):
    # dout[i] = sum_{j<=i} t[j] exp(x[j] - out[i])
    #         = exp(out[i-1] - out[i]) dout[i-1] + t[i] exp(x[i] - out[i])
    from funcgrad import lax
    finite = lax.select_n(lax.eq(out, -np.inf), out, full_like(out, 0))  # all -inf so far
    decay = lax.exp(lax.sub(_previous(out, axis), finite))
    return _linear_scan(decay, lax.mul(t, lax.exp(lax.sub(x, finite))), axis)


cumlogsumexp_p = _cumulative("cumlogsumexp", lambda x, axis: np.logaddexp.accumulate(x, axis),
                             "f")
ad.jvp_rules[cumlogsumexp_p] = _cumulative_jvp(_cumlogsumexp_tangent)


__all__ = [
    "argmax", "argmax_p", "argmin", "argmin_p", "cumlogsumexp", "cumlogsumexp_p", "cummax",
    "cummax_p", "cummin", "cummin_p", "cumprod", "cumprod_p", "cumsum", "cumsum_p",
    "reduce_and", "reduce_and_p", "reduce_max", "reduce_max_p", "reduce_min", "reduce_min_p",
    "reduce_or", "reduce_or_p", "reduce_prod", "reduce_prod_p", "reduce_sum", "reduce_sum_p",
    "reduce_xor", "reduce_xor_p",
]
