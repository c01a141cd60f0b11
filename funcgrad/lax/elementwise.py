"""Elementwise primitives: unary math, binary arithmetic, comparisons, logic, bitwise,
`select_n`, `clamp`, `convert_element_type`.

Each primitive is one block: wrapper, rules, `foo_p`, one registration per table.
Binary operands share a dtype and a shape, except that rank-0 operands broadcast.
"""

import numpy as np

from funcgrad.core import Primitive
from funcgrad.interpreters import ad, batching
from funcgrad.interpreters.ad import defjvp, defjvp_zero
from funcgrad.lax.utils import binop, match_scalars, unop


def unbroadcast(ct, aval):
    """Sum a cotangent down to a rank-0 operand's shape (undoing its broadcast)."""
    from funcgrad.lax.reductions import reduce_sum
    from funcgrad.core import get_aval
    if aval.shape == () and get_aval(ct).shape != ():
        ct = reduce_sum(ct, tuple(range(get_aval(ct).ndim)))
    return ct


# --- add ----------------------------------------------------------------------------------
def add(x, y):
    """Elementwise x + y (same dtype; equal shapes or rank-0 operands)."""
    return add_p.bind(*match_scalars(x, y))


def _add_transpose(ct, x, y):
    return [unbroadcast(ct, x.aval) if ad.is_undefined(x) else None,
            unbroadcast(ct, y.aval) if ad.is_undefined(y) else None]


add_p = binop("add", np.add)
ad.deflinear(add_p, _add_transpose)


# --- sub ----------------------------------------------------------------------------------
def sub(x, y):
    """Elementwise x - y."""
    return sub_p.bind(*match_scalars(x, y))


def _sub_transpose(ct, x, y):
    return [unbroadcast(ct, x.aval) if ad.is_undefined(x) else None,
            unbroadcast(neg(ct), y.aval) if ad.is_undefined(y) else None]


sub_p = binop("sub", np.subtract)
ad.deflinear(sub_p, _sub_transpose)


# --- mul ----------------------------------------------------------------------------------
def mul(x, y):
    """Elementwise x * y."""
    return mul_p.bind(*match_scalars(x, y))


def _mul_transpose(ct, x, y):
    if ad.is_undefined(x):
        return [unbroadcast(mul(ct, y), x.aval), None]
    return [None, unbroadcast(mul(x, ct), y.aval)]


mul_p = binop("mul", np.multiply)
defjvp(mul_p, lambda t, x, y, out: mul(t, y), lambda t, x, y, out: mul(x, t))
ad.transpose_rules[mul_p] = _mul_transpose


# --- neg ----------------------------------------------------------------------------------
def neg(x):
    """Elementwise -x."""
    return neg_p.bind(x)


neg_p = unop("neg", np.negative, kinds="iufc")
ad.deflinear(neg_p, lambda ct, x: [neg(ct)])


# --- sin / cos ------------------------------------------------------------------------------
def sin(x):
    """Elementwise sine."""
    return sin_p.bind(x)


sin_p = unop("sin", np.sin)
defjvp(sin_p, lambda t, x, out: mul(t, cos(x)))


def cos(x):
    """Elementwise cosine."""
    return cos_p.bind(x)


cos_p = unop("cos", np.cos)
defjvp(cos_p, lambda t, x, out: neg(mul(t, sin(x))))


# --- exp / log --------------------------------------------------------------------------------
def exp(x):
    """Elementwise e**x."""
    return exp_p.bind(x)


exp_p = unop("exp", np.exp)
defjvp(exp_p, lambda t, x, out: mul(t, out))


def log(x):
    """Elementwise natural logarithm."""
    return log_p.bind(x)


log_p = unop("log", np.log)
defjvp(log_p, lambda t, x, out: div(t, x))


# --- div ----------------------------------------------------------------------------------
def div(x, y):
    """Elementwise x / y (integer division rounds toward zero, as in lax)."""
    return div_p.bind(*match_scalars(x, y))


def _div_impl(x, y):
    if x.dtype.kind in "iu":
        return np.trunc(np.true_divide(x, y)).astype(x.dtype) if x.size else x.copy()
    return np.true_divide(x, y)


def _div_transpose(ct, x, y):
    return [unbroadcast(div(ct, y), x.aval), None]


div_p = binop("div", _div_impl)
defjvp(div_p, lambda t, x, y, out: div(t, y),
       lambda t, x, y, out: neg(mul(t, div(out, y))))
ad.transpose_rules[div_p] = _div_transpose


# --- comparisons -------------------------------------------------------------------------------
def gt(x, y):
    """Elementwise x > y (bool)."""
    return gt_p.bind(*match_scalars(x, y))


gt_p = binop("gt", np.greater, kinds="biuf", out_dtype=lambda dt: np.dtype(bool))
defjvp_zero(gt_p)


# --- convert_element_type ---------------------------------------------------------------------
def convert_element_type(x, new_dtype, weak_type=False):
    """Cast `x` to `new_dtype` (canonicalized); float->int truncates toward zero."""
    from funcgrad import dtypes
    return convert_element_type_p.bind(x, new_dtype=dtypes.canonicalize(new_dtype),
                                       weak_type=bool(weak_type))


def _convert_abstract(x, *, new_dtype, weak_type):
    from funcgrad.core import ShapedArray
    return ShapedArray(x.shape, new_dtype, weak_type)


def _convert_impl(x, *, new_dtype, weak_type):
    if x.dtype.kind == "c" and new_dtype.kind != "c":
        x = x.real
    if x.dtype.kind == "f" and new_dtype.kind in "iu":
        with np.errstate(invalid="ignore"):
            return np.trunc(x).astype(new_dtype)
    return x.astype(new_dtype)


def _convert_jvp(primals, out, tangents, *, new_dtype, weak_type):
    from funcgrad import dtypes
    from funcgrad.core import get_aval
    if not (dtypes.is_inexact(new_dtype) and dtypes.is_inexact(get_aval(primals[0]).dtype)):
        return ad.Zero(get_aval(out))
    return convert_element_type_p.bind(tangents[0], new_dtype=new_dtype, weak_type=weak_type)


def _convert_transpose(ct, x, *, new_dtype, weak_type):
    return [convert_element_type_p.bind(ct, new_dtype=x.aval.dtype, weak_type=x.aval.weak_type)]


convert_element_type_p = Primitive("convert_element_type")
convert_element_type_p.def_impl(_convert_impl)
convert_element_type_p.def_abstract_eval(_convert_abstract)
ad.jvp_rules[convert_element_type_p] = _convert_jvp
ad.transpose_rules[convert_element_type_p] = _convert_transpose
batching.defvectorized(convert_element_type_p)
