"""Bit-level elementwise primitives: `clz` (count leading zeros), `mulhi` (the high half of
an integer product) and `reduce_precision` (rounding a float to fewer exponent and mantissa
bits, as XLA's ReducePrecision).

One block per primitive, as in `elementwise.py`; their eager implementations are numpy on the
bit patterns, and kernels call them (not fusible). Imports core, interpreters and lax utils.
"""

import numpy as np

from funcgrad import dtypes, errors
from funcgrad.core import ShapedArray
from funcgrad.interpreters.ad import defjvp_zero, deflinear
from funcgrad.lax.utils import binop, check_kind, np_operands, static_int, unop

__all__ = ["clz", "clz_p", "mulhi", "mulhi_p", "reduce_precision", "reduce_precision_p"]


def _unsigned(x):
    x = np.asarray(x)
    return x.view(np.dtype(f"u{x.dtype.itemsize}")) if x.dtype.kind == "i" else x


# --- clz --------------------------------------------------------------------------------------
def clz(x):
    """Elementwise number of leading zero bits of an integer `x` (its bit width for 0).

    Example:
        >>> clz(fnp.array([1, 0, -1], fnp.int32))
        Array([31, 32,  0], dtype=int32)
    """
    return clz_p.bind(x)


def _clz_impl(x):
    # a compiled program's literal may come as a Python int: the default int's width
    x = np.asarray(x, dtypes.scalar_dtype(x)[0]) if type(x) is int else np.asarray(x)
    u = _unsigned(x).copy()
    bits = 8 * x.dtype.itemsize
    n = np.zeros(u.shape, np.int64)
    shift = bits // 2
    while shift:  # binary search for the highest set bit
        top = (u >> u.dtype.type(bits - shift)) == 0
        n += np.where(top, shift, 0)
        u = np.where(top, u << u.dtype.type(shift), u)
        shift //= 2
    return np.where(_unsigned(x) == 0, bits, n).astype(x.dtype)


clz_p = unop("clz", _clz_impl, kinds="iu", fusible=False)
defjvp_zero(clz_p)


# --- mulhi ------------------------------------------------------------------------------------
def mulhi(x, y, /):
    """Elementwise high half of the full-width product of two integers of one dtype (the
    bits a `mul` drops).

    Example:
        >>> mulhi(fnp.array([2 ** 30], fnp.int32), fnp.array([8], fnp.int32))
        Array([2], dtype=int32)
    """
    return mulhi_p.bind(x, y)


def _mulhi_unsigned64(a, b):
    mask = np.uint64(0xFFFFFFFF)
    a0, a1, b0, b1 = a & mask, a >> np.uint64(32), b & mask, b >> np.uint64(32)
    lo = a0 * b0
    mid1 = a1 * b0 + (lo >> np.uint64(32))
    mid2 = a0 * b1 + (mid1 & mask)
    return a1 * b1 + (mid1 >> np.uint64(32)) + (mid2 >> np.uint64(32))


def _mulhi_impl(x, y):
    x, y = np.broadcast_arrays(*np_operands(x, y))
    dt = x.dtype
    bits = 8 * dt.itemsize
    with np.errstate(over="ignore"):
        if bits < 64:
            wide = np.dtype(f"{dt.kind}{2 * dt.itemsize}")
            return ((x.astype(wide) * y.astype(wide)) >> bits).astype(dt)
        hi = _mulhi_unsigned64(_unsigned(x), _unsigned(y))
        if dt.kind == "i":  # two's complement: subtract the other factor for a negative one
            hi = hi - np.where(x < 0, _unsigned(y), 0).astype(np.uint64) \
                - np.where(y < 0, _unsigned(x), 0).astype(np.uint64)
        return hi.view(dt)


mulhi_p = binop("mulhi", _mulhi_impl, kinds="iu", fusible=False)
defjvp_zero(mulhi_p)


# --- reduce_precision -------------------------------------------------------------------------
def reduce_precision(operand, exponent_bits, mantissa_bits):
    """`operand` rounded (to nearest, ties to even) to a float format with `exponent_bits`
    exponent and `mantissa_bits` mantissa bits, kept in its own dtype; values beyond the
    format's range become +-inf, below it +-0, as XLA's ReducePrecision.

    Example:
        >>> reduce_precision(fnp.array([1.0 + 2 ** -10]), 8, 7)  # bfloat16's format
        Array([1.], dtype=float32)
    """
    e = static_int("reduce_precision", exponent_bits, "exponent_bits")
    m = static_int("reduce_precision", mantissa_bits, "mantissa_bits")
    if e < 1 or m < 0:
        raise errors.op_error("reduce_precision", f"needs exponent_bits >= 1 and mantissa_bits "
                              f">= 0, got {e} and {m}", cls=errors.FuncgradValueError)
    return reduce_precision_p.bind(operand, exponent_bits=e, mantissa_bits=m)


def _reduce_precision_impl(x, *, exponent_bits, mantissa_bits):
    x = np.asarray(x)
    info = np.finfo(x.dtype)
    src_m, bits = info.nmant, 8 * x.dtype.itemsize
    src_e = bits - 1 - src_m
    ut = np.dtype(f"u{x.dtype.itemsize}").type
    v = x.view(ut).copy()
    with np.errstate(over="ignore"):
        if mantissa_bits < src_m:
            drop = src_m - mantissa_bits
            last = ut(1) << ut(drop)
            bias = (last >> ut(1)) - ut(1) + ((v & last) >> ut(drop))  # ties to even
            v = (v + bias) & ~(last - ut(1))
        if exponent_bits < src_e:
            exp_mask = ((ut(1) << ut(src_e)) - ut(1)) << ut(src_m)
            sign = v & (ut(1) << ut(bits - 1))
            src_bias, red_bias = (1 << (src_e - 1)) - 1, (1 << (exponent_bits - 1)) - 1
            exp = v & exp_mask
            over = exp > (ut(src_bias + red_bias) << ut(src_m))
            under = exp <= (ut(src_bias - red_bias) << ut(src_m))
            v = np.where(over, sign | exp_mask, np.where(under, sign, v))
    out = np.asarray(v, ut).view(x.dtype)
    return np.where(np.isnan(x), x, out)  # NaN stays NaN (even without mantissa bits)


reduce_precision_p = unop("reduce_precision", _reduce_precision_impl, kinds="f",
                          fusible=False)


def _reduce_precision_abstract(x, *, exponent_bits, mantissa_bits):
    check_kind("reduce_precision", x, "f")
    return ShapedArray(x.shape, x.dtype, x.weak_type)


reduce_precision_p.def_abstract_eval(_reduce_precision_abstract)  # the bits are required
# JAX's rule: the tangent (and the cotangent) are rounded the same way
deflinear(reduce_precision_p,
          lambda ct, x, **params: [reduce_precision_p.bind(ct, **params)])
