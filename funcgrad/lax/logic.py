"""Comparisons, logical/bitwise ops, shifts, `population_count`, `bitcast_convert_type`,
`select_n` and `clamp`.

Each primitive is one block: wrapper, rules, `foo_p`, one registration per table. Operands
share a dtype and a shape, except that rank-0 operands broadcast (as in the other lax
elementwise ops). This module must not import `funcgrad.lax.elementwise` (it imports us).
"""

import numpy as np

from funcgrad import dtypes, errors
from funcgrad.core import Primitive, ShapedArray, get_aval
from funcgrad.interpreters import ad, batching
from funcgrad.interpreters.ad import defjvp_zero
from funcgrad.lax.shape import broadcast_in_dim, full
from funcgrad.lax.utils import binop, check_kind, match_scalars, np_operands, to_bool, unop


def _zeros_like(x):
    a = get_aval(x)
    return full(a.shape, 0, a.dtype)


def _bcast(x, shape):
    """A rank-0 `x` broadcast to `shape` (other values are returned unchanged)."""
    return x if get_aval(x).shape == tuple(shape) else broadcast_in_dim(x, shape, ())


# --- comparisons ------------------------------------------------------------------------------
def eq(x, y):
    """Elementwise x == y (bool). Example: ``eq(1.0, 1.0)`` is ``True``."""
    return eq_p.bind(*match_scalars(x, y))


eq_p = binop("eq", np.equal, kinds="biufc", out_dtype=to_bool)
defjvp_zero(eq_p)


def ne(x, y):
    """Elementwise x != y (bool)."""
    return ne_p.bind(*match_scalars(x, y))


ne_p = binop("ne", np.not_equal, kinds="biufc", out_dtype=to_bool)
defjvp_zero(ne_p)


def lt(x, y):
    """Elementwise x < y (bool; NaN compares false)."""
    return lt_p.bind(*match_scalars(x, y))


lt_p = binop("lt", np.less, kinds="biuf", out_dtype=to_bool)
defjvp_zero(lt_p)


def le(x, y):
    """Elementwise x <= y (bool)."""
    return le_p.bind(*match_scalars(x, y))


le_p = binop("le", np.less_equal, kinds="biuf", out_dtype=to_bool)
defjvp_zero(le_p)


def gt(x, y):
    """Elementwise x > y (bool)."""
    return gt_p.bind(*match_scalars(x, y))


gt_p = binop("gt", np.greater, kinds="biuf", out_dtype=to_bool)
defjvp_zero(gt_p)


def ge(x, y):
    """Elementwise x >= y (bool)."""
    return ge_p.bind(*match_scalars(x, y))


ge_p = binop("ge", np.greater_equal, kinds="biuf", out_dtype=to_bool)
defjvp_zero(ge_p)


# --- logical / bitwise (bool: logical, integers: bitwise) -----------------------------------
def bitwise_and(x, y):
    """Elementwise x & y on bools or integers. Example: ``bitwise_and(6, 3)`` is ``2``."""
    return and_p.bind(*match_scalars(x, y))


and_p = binop("and", np.bitwise_and, kinds="biu")
defjvp_zero(and_p)


def bitwise_or(x, y):
    """Elementwise x | y on bools or integers."""
    return or_p.bind(*match_scalars(x, y))


or_p = binop("or", np.bitwise_or, kinds="biu")
defjvp_zero(or_p)


def bitwise_xor(x, y):
    """Elementwise x ^ y on bools or integers."""
    return xor_p.bind(*match_scalars(x, y))


xor_p = binop("xor", np.bitwise_xor, kinds="biu")
defjvp_zero(xor_p)


def bitwise_not(x):
    """Elementwise ~x (logical not for bools)."""
    return not_p.bind(x)


not_p = unop("not", np.invert, kinds="biu")
defjvp_zero(not_p)

and_, or_, xor, not_ = bitwise_and, bitwise_or, bitwise_xor, bitwise_not


# --- shifts (XLA semantics: a shift amount outside [0, bits) shifts everything out) ---------
def _shift_parts(x, y):
    """(bit width, in-range mask, shift amount clipped into range, in x's dtype)."""
    y = np.asarray(y, x.dtype)
    bits = x.dtype.itemsize * 8
    ok = y.astype(np.dtype(f"u{x.dtype.itemsize}")) < bits
    return bits, ok, np.where(ok, y, 0).astype(x.dtype)


def _as_kind(x, kind):
    return x.view(np.dtype(f"{kind}{x.dtype.itemsize}"))


def shift_left(x, y):
    """Elementwise x << y; amounts >= the bit width (or negative) give 0."""
    return shift_left_p.bind(*match_scalars(x, y))


def _shift_left_impl(x, y):
    x, y = np_operands(x, y)
    _, ok, s = _shift_parts(x, y)
    u = np.left_shift(_as_kind(x, "u"), _as_kind(s, "u"))
    return _as_kind(np.asarray(np.where(ok, u, 0), u.dtype), dtypes.kind(x.dtype))


shift_left_p = binop("shift_left", _shift_left_impl, kinds="iu")
defjvp_zero(shift_left_p)


def shift_right_logical(x, y):
    """Elementwise logical right shift (zeros shifted in, also for signed types).

    Example: ``shift_right_logical(np.uint32(0x80000000), 31)`` is ``1``; a shift by 32 is 0.
    """
    return shift_right_logical_p.bind(*match_scalars(x, y))


def _shift_right_logical_impl(x, y):
    x, y = np_operands(x, y)
    _, ok, s = _shift_parts(x, y)
    u = np.right_shift(_as_kind(x, "u"), _as_kind(s, "u"))
    return _as_kind(np.asarray(np.where(ok, u, 0), u.dtype), dtypes.kind(x.dtype))


shift_right_logical_p = binop("shift_right_logical", _shift_right_logical_impl, kinds="iu")
defjvp_zero(shift_right_logical_p)


def shift_right_arithmetic(x, y):
    """Elementwise arithmetic right shift (sign bit shifted in; unsigned values are read as
    signed, as in XLA); amounts out of range fill with the sign bit."""
    return shift_right_arithmetic_p.bind(*match_scalars(x, y))


def _shift_right_arithmetic_impl(x, y):
    x, y = np_operands(x, y)
    bits, ok, s = _shift_parts(x, y)
    sx = _as_kind(x, "i")
    r = np.where(ok, np.right_shift(sx, _as_kind(s, "i")), np.right_shift(sx, bits - 1))
    return _as_kind(np.asarray(r, sx.dtype), dtypes.kind(x.dtype))


shift_right_arithmetic_p = binop("shift_right_arithmetic", _shift_right_arithmetic_impl,
                                 kinds="iu")
defjvp_zero(shift_right_arithmetic_p)


def population_count(x):
    """Elementwise number of set bits (same dtype as `x`). Example: ``population_count(7)``
    is ``3``."""
    return population_count_p.bind(x)


population_count_p = unop("population_count",
                          lambda x: np.bitwise_count(_as_kind(np.asarray(x), "u")), kinds="iu")
defjvp_zero(population_count_p)


# --- bitcast_convert_type -------------------------------------------------------------------
def bitcast_convert_type(operand, new_dtype):
    """Reinterpret the bits of `operand` as `new_dtype` of the same width.

    Example:
        >>> bitcast_convert_type(fnp.float32(1.0), fnp.uint32)
        Array(1065353216, dtype=uint32)
    """
    return bitcast_convert_type_p.bind(operand, new_dtype=dtypes.canonicalize(new_dtype))


def _bitcast_abstract(x, *, new_dtype):
    if x.dtype.itemsize != new_dtype.itemsize:
        raise errors.op_error("bitcast_convert_type", f"cannot bitcast {x} to {new_dtype}: "
                              f"the widths differ ({x.dtype.itemsize * 8} vs "
                              f"{new_dtype.itemsize * 8} bits)")
    return ShapedArray(x.shape, new_dtype, False)


bitcast_convert_type_p = Primitive("bitcast_convert_type")
bitcast_convert_type_p.def_impl(
    lambda x, *, new_dtype: np.asarray(x).view(new_dtype))
bitcast_convert_type_p.def_abstract_eval(_bitcast_abstract)
defjvp_zero(bitcast_convert_type_p)
batching.defvectorized(bitcast_convert_type_p)
bitcast_convert_type_p.declare("elementwise", dtype_kinds="biufc")  # no kernel expression
bitcast_convert_type_p.widens_narrow = False  # the bits of a bfloat16 are its own


# --- select_n -----------------------------------------------------------------------------------
def select_n(which, *cases):
    """Elementwise `cases[which]`: `which` is bool (two cases: False picks cases[0]) or int32.

    `which` is rank-0 or has the cases' shape; the cases share one shape and dtype.
    Out-of-range int32 indices are clamped.

    Example:
        >>> select_n(fnp.array([True, False]), fnp.zeros(2), fnp.ones(2))
        Array([1., 0.], dtype=float32)
    """
    return select_n_p.bind(which, *match_scalars(*cases))


def _select_n_abstract(which, *cases):
    if not cases:
        raise errors.op_error("select_n", "needs at least one case")
    if which.dtype not in (dtypes.bool_, dtypes.int32):
        raise errors.op_error("select_n", f"`which` must be bool or int32, got {which}")
    if which.dtype == dtypes.bool_ and len(cases) > 2:
        raise errors.op_error("select_n", f"a bool `which` selects among at most 2 cases, "
                              f"got {len(cases)}", hint="use an int32 `which`")
    c0 = cases[0]
    if any(c.shape != c0.shape or c.dtype != c0.dtype for c in cases[1:]):
        raise errors.op_error("select_n", "cases must have the same shape and dtype, got "
                              f"{', '.join(map(str, cases))}")
    if which.shape not in ((), c0.shape):
        raise errors.op_error("select_n", f"`which` {which} must be rank-0 or have the cases' "
                              f"shape {c0}")
    return ShapedArray(c0.shape, c0.dtype, all(c.weak_type for c in cases))


def _select_n_impl(which, *cases):
    which, cases = np.asarray(which), np_operands(*cases)
    if which.dtype == np.bool_:
        return np.where(which, cases[-1], cases[0])
    return np.choose(which, cases, mode="clip")


def _select_n_jvp(primals, out, tangents):
    ts = tangents[1:]
    if all(type(t) is ad.Zero for t in ts):
        return ad.Zero(get_aval(out))
    return select_n(primals[0], *[ad.instantiate(t) for t in ts])


def _select_n_transpose(ct, which, *cases):
    zeros = _zeros_like(ct)
    return [None] + [select_n(which, *[ct if j == i else zeros for j in range(len(cases))])
                     if ad.is_undefined(c) else None for i, c in enumerate(cases)]


select_n_p = Primitive("select_n")
select_n_p.def_impl(_select_n_impl)
select_n_p.def_abstract_eval(_select_n_abstract)
ad.jvp_rules[select_n_p] = _select_n_jvp
ad.transpose_rules[select_n_p] = _select_n_transpose
def _select_n_batch(args, dims):
    size = batching.batch_size(args, dims)
    shape = max((batching.example_shape(x, d) for x, d in zip(args, dims)), key=len)
    full = (size,) + shape

    def to_full(x, d):
        nd = get_aval(x).ndim
        if d is None:
            return broadcast_in_dim(x, full, tuple(range(1, nd + 1)))
        x = batching.moveaxis(x, d, 0)
        return broadcast_in_dim(x, full, tuple(range(nd))) if nd - 1 < len(shape) else x
    which, wd = args[0], dims[0]
    which = which if wd is None and get_aval(which).ndim == 0 else to_full(which, wd)
    return select_n_p.bind(which, *[to_full(c, d) for c, d in zip(args[1:], dims[1:])]), 0


batching.batch_rules[select_n_p] = _select_n_batch
select_n_p.declare("elementwise", dtype_kinds="biufc", fusible=True)


# --- clamp ------------------------------------------------------------------------------------
def clamp(min, x, max):
    """Elementwise min(max(x, min), max), JAX's argument order; `min` and `max` are rank-0 or
    have the shape of `x`. Example: ``clamp(0.0, 3.0, 1.0)`` is ``1.0``."""
    return clamp_p.bind(*match_scalars(min, x, max))


def _clamp_abstract(lo, x, hi):
    for a in (lo, x, hi):
        check_kind("clamp", a, "iuf")
    if lo.dtype != x.dtype or hi.dtype != x.dtype:
        raise errors.op_error("clamp", f"operands must have the same dtype, got min={lo}, "
                              f"x={x}, max={hi}")
    if lo.shape not in ((), x.shape) or hi.shape not in ((), x.shape):
        raise errors.op_error("clamp", f"min and max must be rank-0 or have the shape of x, "
                              f"got min={lo}, x={x}, max={hi}")
    return ShapedArray(x.shape, x.dtype, lo.weak_type and x.weak_type and hi.weak_type)


def _clamp_jvp_fn(pick):
    def fn(t, lo, x, hi, *, out):
        shape = get_aval(out).shape
        return select_n(_bcast(pick(lo, x, hi), shape), _zeros_like(out), _bcast(t, shape))
    return fn


clamp_p = Primitive("clamp")
clamp_p.def_impl(lambda lo, x, hi: np.minimum(np.maximum(x, lo), hi))
clamp_p.def_abstract_eval(_clamp_abstract)
ad.defjvp(clamp_p,
          _clamp_jvp_fn(lambda lo, x, hi: bitwise_and(gt(lo, x), lt(lo, hi))),
          _clamp_jvp_fn(lambda lo, x, hi: bitwise_and(gt(x, lo), lt(x, hi))),
          _clamp_jvp_fn(lambda lo, x, hi: lt(hi, x)))
batching.defbroadcasting(clamp_p)
clamp_p.declare("elementwise", dtype_kinds="iuf", fusible=True)

__all__ = [
    "and_", "and_p", "bitcast_convert_type", "bitcast_convert_type_p", "bitwise_and",
    "bitwise_not", "bitwise_or", "bitwise_xor", "clamp", "clamp_p", "eq", "eq_p", "ge", "ge_p",
    "gt", "gt_p", "le", "le_p", "lt", "lt_p", "ne", "ne_p", "not_", "not_p", "or_", "or_p",
    "population_count", "population_count_p", "select_n", "select_n_p", "shift_left",
    "shift_left_p", "shift_right_arithmetic", "shift_right_arithmetic_p", "shift_right_logical",
    "shift_right_logical_p", "xor", "xor_p",
]
