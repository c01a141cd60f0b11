"""Convolutions and windowed reductions with XLA's semantics.

`conv_general_dilated` (XLA Conv: strides, padding, lhs/rhs dilation, feature and batch
groups, any layout), `reduce_window_{sum,max,min}` and the `select_and_gather_add` /
`select_and_scatter_add` pair behind max-pooling derivatives. A convolution's
implementation is its `conv_plan.ConvPlan` (the input's windows packed into BLAS gemm calls,
which the native tier's C routine repeats bit for bit); the windowed reductions fold one
window axis at a time (`fold_windows`); the selections pad and dilate with numpy and take a
strided `sliding_window_view`. This module imports only the core, the interpreters and other
`funcgrad.lax` wrappers.
"""

import operator
from typing import NamedTuple

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from funcgrad import dtypes, errors, lax
from funcgrad.core import Primitive, ShapedArray, concrete_value, get_aval
from funcgrad.core.placement import place
from funcgrad.interpreters import ad, batching
from funcgrad.lax import conv_plan, pooling
from funcgrad.lax.precision import canonicalize_precision
from funcgrad.lax.utils import quiet, static_ints

__all__ = [
    "ConvDimensionNumbers", "conv", "conv_dimension_numbers", "conv_general_dilated",
    "conv_general_dilated_p", "conv_general_permutations", "conv_with_general_padding",
    "padtype_to_pads", "reduce_window", "reduce_window_max", "reduce_window_max_p",
    "reduce_window_min", "reduce_window_min_p", "reduce_window_sum", "reduce_window_sum_p",
    "select_and_gather_add_p", "select_and_scatter_add_p",
]


class ConvDimensionNumbers(NamedTuple):
    """Axis positions: lhs_spec = (batch, feature, spatial...), rhs_spec = (out feature,
    in feature, spatial...), out_spec = (batch, feature, spatial...)."""

    lhs_spec: tuple
    rhs_spec: tuple
    out_spec: tuple


def _ints(xs, name="conv_general_dilated"):
    return static_ints(name, xs, "a window, stride, dilation or dimension-number entry")


def _dilate_dim(d, r):
    return 0 if d == 0 else 1 + r * (d - 1)


def _stride_dim(d, window, stride):
    return max(0, (d - window) // stride + 1)


def conv_general_permutations(dimension_numbers):
    """Axis permutations for string specs such as ('NHWC', 'HWIO', 'NHWC')."""
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    charpairs = (("N", "C"), ("O", "I"), ("N", "C"))
    for spec, (a, b) in zip(dimension_numbers, charpairs):
        if spec.count(a) != 1 or spec.count(b) != 1 or len(spec) != len(set(spec)):
            raise errors.op_error("conv_general_dilated", f"dimension_numbers spec "
                                                          f"{errors.short_repr(spec)} "
                                  f"must contain {errors.short_repr(a)} and "
                                  f"{errors.short_repr(b)} once and no repeated letters")
    if not (set(lhs_spec) - {"N", "C"} == set(rhs_spec) - {"O", "I"}
            == set(out_spec) - {"N", "C"}):
        raise errors.op_error("conv_general_dilated", f"dimension_numbers {dimension_numbers} "
                              "must name the same spatial axes in lhs, rhs and out")

    def getperm(spec, charpair):
        spatial = [i for i, c in enumerate(spec) if c not in charpair]
        if spec is not rhs_spec:
            spatial = sorted(spatial, key=lambda i: rhs_spec.index(spec[i]))
        return (spec.index(charpair[0]), spec.index(charpair[1])) + tuple(spatial)
    return tuple(getperm(s, c) for s, c in zip(dimension_numbers, charpairs))


def conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers):
    """A `ConvDimensionNumbers` from None (NCHW/OIHW/NCHW), a string triple or int triples."""
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        return dimension_numbers
    ndim = len(lhs_shape)
    if len(rhs_shape) != ndim or ndim < 2:
        raise errors.op_error("conv_general_dilated", f"lhs and rhs must have the same rank "
                              f">= 2, got shapes {tuple(lhs_shape)} and {tuple(rhs_shape)}")
    if dimension_numbers is None:
        iota = tuple(range(ndim))
        return ConvDimensionNumbers(iota, iota, iota)
    if len(dimension_numbers) == 3 and all(isinstance(s, str) for s in dimension_numbers):
        if any(len(s) != ndim for s in dimension_numbers):
            raise errors.op_error("conv_general_dilated", f"dimension_numbers "
                                  f"{dimension_numbers} must have {ndim} letters each for "
                                  f"operands of shapes {tuple(lhs_shape)}, {tuple(rhs_shape)}")
        return ConvDimensionNumbers(*conv_general_permutations(tuple(dimension_numbers)))
    if len(dimension_numbers) == 3:
        return ConvDimensionNumbers(*(_ints(s) for s in dimension_numbers))
    raise errors.op_error("conv_general_dilated", f"cannot read dimension_numbers "
                          f"{errors.short_repr(dimension_numbers)}",
                          hint="use None, ('NCHW', 'OIHW', 'NCHW') style strings, or a "
                               "ConvDimensionNumbers")


def padtype_to_pads(in_shape, window_shape, window_strides, padding):
    """Explicit (lo, hi) pairs for the padding strings 'SAME', 'SAME_LOWER' and 'VALID'."""
    mode = padding.upper()
    if mode in ("SAME", "SAME_LOWER"):
        out = [-(-i // s) for i, s in zip(in_shape, window_strides)]
        pads = [max((o - 1) * s + w - i, 0)
                for o, s, w, i in zip(out, window_strides, window_shape, in_shape)]
        if mode == "SAME":
            return tuple((p // 2, p - p // 2) for p in pads)
        return tuple((p - p // 2, p // 2) for p in pads)
    if mode == "VALID":
        return ((0, 0),) * len(in_shape)
    raise errors.op_error("padding", f"unknown padding {errors.short_repr(padding)}; use "
                                     f"'SAME', 'SAME_LOWER', "
                          "'VALID' or a sequence of (low, high) pairs",
                          cls=errors.FuncgradValueError)


def _pairs(padding):
    return tuple((int(lo), int(hi)) for lo, hi in padding)


# --- numpy helpers for the eager implementations --------------------------------------------
def _dilate_pad(x, value, padding, dilation):
    """`x` with `value` between elements (dilation) and around it (padding; negative crops)."""
    if all(d == 1 for d in dilation) and all(lo == 0 and hi == 0 for lo, hi in padding):
        return x
    dshape = [_dilate_dim(n, d) for n, d in zip(x.shape, dilation)]
    lo_p = [max(lo, 0) for lo, _ in padding]
    hi_p = [max(hi, 0) for _, hi in padding]
    out = np.full([lo + n + hi for lo, n, hi in zip(lo_p, dshape, hi_p)], value, x.dtype)
    out[tuple(slice(lo, lo + n, d) for lo, n, d in zip(lo_p, dshape, dilation))] = x
    return out[tuple(slice(max(-lo, 0), n - max(-hi, 0))
                     for (lo, hi), n in zip(padding, out.shape))]


def _undilate_unpad(y, padding, dilation, shape):
    """The adjoint of `_dilate_pad` (to an array of `shape`): read back the original slots."""
    y = np.pad(y, [(max(-lo, 0), max(-hi, 0)) for lo, hi in padding])
    return y[tuple(slice(max(lo, 0), max(lo, 0) + _dilate_dim(n, d), d)
                   for (lo, _), n, d in zip(padding, shape, dilation))]


def _windows(x, axes, window, strides, window_dilation):
    """A view of `x` with shape x.shape (with `axes` replaced by output sizes) + window."""
    eff = [_dilate_dim(w, d) for w, d in zip(window, window_dilation)]
    v = sliding_window_view(x, eff, axis=axes)
    index = [slice(None)] * x.ndim + [slice(None, None, d) for d in window_dilation]
    for a, s in zip(axes, strides):
        index[a] = slice(None, None, s)
    return v[tuple(index)]


# --- conv_general_dilated -------------------------------------------------------------------
def conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=None,
                         rhs_dilation=None, dimension_numbers=None, feature_group_count=1,
                         batch_group_count=1, precision=None, preferred_element_type=None,
                         out_sharding=None):
    """General N-d convolution (XLA Conv), cross-correlation as in every DL framework.

    Args:
        lhs: input, e.g. (N, C, H, W) with the default dimension numbers.
        rhs: kernel, e.g. (O, I, KH, KW), with I = C / feature_group_count.
        window_strides: one stride per spatial axis.
        padding: 'SAME', 'SAME_LOWER', 'VALID' or one (low, high) pair per spatial axis.
        lhs_dilation, rhs_dilation: input (transposed-conv) and kernel (atrous) dilation.
        dimension_numbers: None (NCHW/OIHW/NCHW), a string triple such as
            ('NHWC', 'HWIO', 'NHWC'), or a `ConvDimensionNumbers`.
        feature_group_count: grouped / depthwise convolution.
        batch_group_count: groups over the lhs batch (used by gradients of grouped convs).
        precision: None, a `lax.Precision`, a string such as 'highest' or a pair (validated;
            numpy computes in full precision).
        preferred_element_type: optional output dtype.
        out_sharding: None or one device (`core.placement`).

    Example:
        >>> conv_general_dilated(fnp.ones((1, 1, 4, 4)), fnp.ones((1, 1, 3, 3)), (1, 1),
        ...                      'VALID').shape
        (1, 1, 2, 2)
    """
    la, ra = get_aval(lhs), get_aval(rhs)
    dn = conv_dimension_numbers(la.shape, ra.shape, dimension_numbers)
    nsp = la.ndim - 2
    lhs_dilation = (1,) * nsp if lhs_dilation is None else _ints(lhs_dilation)
    rhs_dilation = (1,) * nsp if rhs_dilation is None else _ints(rhs_dilation)
    window_strides = _ints(window_strides)
    if isinstance(padding, str):
        in_sp = [la.shape[d] for d in dn.lhs_spec[2:]]
        k_sp = [_dilate_dim(ra.shape[d], r) for d, r in zip(dn.rhs_spec[2:], rhs_dilation)]
        if len(window_strides) != nsp:
            raise errors.op_error("conv_general_dilated", f"window_strides {window_strides} "
                                  f"needs {nsp} entries for lhs {la}")
        padding = padtype_to_pads(in_sp, k_sp, window_strides, padding)
    pet = None if preferred_element_type is None else dtypes.canonicalize(
        preferred_element_type)
    out = conv_general_dilated_p.bind(
        lhs, rhs, window_strides=window_strides, padding=_pairs(padding),
        lhs_dilation=lhs_dilation, rhs_dilation=rhs_dilation, dimension_numbers=dn,
        feature_group_count=int(feature_group_count), batch_group_count=int(batch_group_count),
        precision=canonicalize_precision(precision, "conv_general_dilated"),
        preferred_element_type=pet)
    return place("conv_general_dilated", out, out_sharding)


def conv(lhs, rhs, window_strides, padding, precision=None, preferred_element_type=None):
    """`conv_general_dilated` in NCHW/OIHW layout without dilation."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_with_general_padding(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                              precision=None, preferred_element_type=None):
    """`conv_general_dilated` in NCHW/OIHW layout."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                                precision=precision,
                                preferred_element_type=preferred_element_type)


def _conv_abstract(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                   dimension_numbers, feature_group_count, batch_group_count, precision,
                   preferred_element_type):
    def fail(msg, cls=errors.FuncgradTypeError):
        raise errors.op_error("conv_general_dilated", f"{msg}; lhs {lhs}, rhs {rhs}, "
                              f"dimension_numbers {tuple(dimension_numbers)}", cls=cls)
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    nd = lhs.ndim
    if rhs.ndim != nd or nd < 2:
        fail("lhs and rhs must have the same rank >= 2")
    if any(sorted(s) != list(range(nd)) for s in dimension_numbers):
        fail("each dimension_numbers spec must be a permutation of the axes",
             errors.FuncgradValueError)
    nsp = nd - 2
    for name, v in (("window_strides", window_strides), ("lhs_dilation", lhs_dilation),
                    ("rhs_dilation", rhs_dilation), ("padding", padding)):
        if len(v) != nsp:
            fail(f"{name} {v} needs one entry per spatial axis ({nsp})", errors.FuncgradValueError)
    if any(s < 1 for s in window_strides + lhs_dilation + rhs_dilation):
        fail("strides and dilations must be positive", errors.FuncgradValueError)
    fgc, bgc = feature_group_count, batch_group_count
    if fgc < 1 or bgc < 1 or (fgc > 1 and bgc > 1):
        fail(f"feature_group_count={fgc} and batch_group_count={bgc} must be positive and "
             "at most one of them > 1", errors.FuncgradValueError)
    n, c = lhs.shape[lhs_spec[0]], lhs.shape[lhs_spec[1]]
    o, i = rhs.shape[rhs_spec[0]], rhs.shape[rhs_spec[1]]
    if c % fgc or c // fgc != i:
        fail(f"the lhs feature size {c} divided by feature_group_count={fgc} must equal the "
             f"rhs input feature size {i}")
    if o % fgc or o % bgc or n % bgc:
        fail(f"the rhs output feature size {o} must be a multiple of the group counts and the "
             f"lhs batch size {n} of batch_group_count={bgc}")
    if lhs.dtype != rhs.dtype:
        fail("lhs and rhs must have the same dtype")
    padded = [_dilate_dim(lhs.shape[d], r) + lo + hi
              for d, r, (lo, hi) in zip(lhs_spec[2:], lhs_dilation, padding)]
    if any(p < 0 for p in padded):
        fail(f"negative padding {padding} is larger than the input", errors.FuncgradValueError)
    out_sp = [_stride_dim(p, _dilate_dim(rhs.shape[d], r), s)
              for p, d, r, s in zip(padded, rhs_spec[2:], rhs_dilation, window_strides)]
    canon = (n // bgc, o) + tuple(out_sp)
    shape = [0] * nd
    for k, ax in enumerate(out_spec):
        shape[ax] = canon[k]
    return ShapedArray(tuple(shape), preferred_element_type or lhs.dtype,
                       lhs.weak_type and rhs.weak_type)


def _conv_impl(lhs, rhs, **params):
    # bfloat16 & co. arrive unwidened (`widens_narrow`): the plan packs them into float32 as
    # it packs float16, so eager and the native routine run the same gemm calls
    out = _conv_abstract(get_aval(lhs), get_aval(rhs), **params)
    p = conv_plan.plan_of(lhs.shape, rhs.shape, rhs.dtype, out.shape, out.dtype, **params)
    return conv_plan.run_numpy(p, lhs, rhs)


def _spec_t(spec):
    return (spec[1], spec[0]) + tuple(spec[2:])


def _reshape_axis_into(src, dst, x):
    # `dst` indexes the axes of `x` after `src` is removed; src becomes the major factor
    shape = get_aval(x).shape
    perm = [i for i in range(len(shape)) if i != src]
    perm.insert(dst, src)
    new_shape = [shape[i] for i in range(len(shape)) if i != src]
    new_shape[dst] *= shape[src]
    return lax.reshape(lax.transpose(x, tuple(perm)), tuple(new_shape))


def _reshape_axis_out_of(src, size1, x):
    shape = list(get_aval(x).shape)
    shape[src:src + 1] = [size1, shape[src] // size1]
    return lax.reshape(x, tuple(shape))


def _vjp_lhs_padding(in_shape, window, strides, out_shape, padding, lhs_dil, rhs_dil):
    lhs_d = [_dilate_dim(n, d) for n, d in zip(in_shape, lhs_dil)]
    rhs_d = [_dilate_dim(n, d) for n, d in zip(window, rhs_dil)]
    out_d = [_dilate_dim(n, d) for n, d in zip(out_shape, strides)]
    before = [k - lo - 1 for k, (lo, _) in zip(rhs_d, padding)]
    after = [a + k - 1 - o - b for a, k, o, b in zip(lhs_d, rhs_d, out_d, before)]
    return tuple(zip(before, after))


def _vjp_rhs_padding(in_shape, window, strides, out_shape, padding, lhs_dil, rhs_dil):
    lhs_d = [_dilate_dim(n, d) for n, d in zip(in_shape, lhs_dil)]
    rhs_d = [_dilate_dim(n, d) for n, d in zip(window, rhs_dil)]
    out_d = [_dilate_dim(n, d) for n, d in zip(out_shape, strides)]
    return tuple((lo, o - a + k - lo - 1)
                 for (lo, _), o, a, k in zip(padding, out_d, lhs_d, rhs_d))


def _spatial(shape, spec):
    return [shape[d] for d in spec[2:]]


def _conv_transpose_lhs(ct, rhs, lhs_aval, *, window_strides, padding, lhs_dilation,
                        rhs_dilation, dimension_numbers, feature_group_count,
                        batch_group_count, precision, preferred_element_type):
    # conv of ct with the flipped kernel, dilating ct by the forward strides
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    rhs_shape = get_aval(rhs).shape
    fgc = feature_group_count
    if fgc > 1 or batch_group_count > 1:
        groups = max(fgc, batch_group_count)
        rhs = _reshape_axis_out_of(rhs_spec[0], groups, rhs)
        rhs = _reshape_axis_into(rhs_spec[0], rhs_spec[1], rhs)
        fgc = groups
    pads = _vjp_lhs_padding(_spatial(lhs_aval.shape, lhs_spec), _spatial(rhs_shape, rhs_spec),
                            window_strides, _spatial(get_aval(ct).shape, out_spec), padding,
                            lhs_dilation, rhs_dilation)
    rhs = lax.rev(rhs, tuple(rhs_spec[2:]))
    if get_aval(rhs).dtype != get_aval(ct).dtype:
        rhs = lax.convert_element_type(rhs, get_aval(ct).dtype)
    out = conv_general_dilated(
        ct, rhs, lhs_dilation, pads, window_strides, rhs_dilation,
        ConvDimensionNumbers(out_spec, _spec_t(rhs_spec), lhs_spec), fgc, 1, precision)
    if batch_group_count > 1:
        out = _reshape_axis_out_of(lhs_spec[1], batch_group_count, out)
        out = _reshape_axis_into(lhs_spec[1], lhs_spec[0], out)
    return out


def _conv_transpose_rhs(ct, lhs, rhs_aval, *, window_strides, padding, lhs_dilation,
                        rhs_dilation, dimension_numbers, feature_group_count,
                        batch_group_count, precision, preferred_element_type):
    # conv of lhs (batch and feature swapped) with ct as the kernel
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    if get_aval(ct).size == 0:
        return lax.full(rhs_aval.shape, 0, rhs_aval.dtype)
    fgc, bgc = batch_group_count, feature_group_count
    pads = _vjp_rhs_padding(_spatial(get_aval(lhs).shape, lhs_spec),
                            _spatial(rhs_aval.shape, rhs_spec), window_strides,
                            _spatial(get_aval(ct).shape, out_spec), padding, lhs_dilation,
                            rhs_dilation)
    if get_aval(lhs).dtype != get_aval(ct).dtype:
        lhs = lax.convert_element_type(lhs, get_aval(ct).dtype)
    dn = ConvDimensionNumbers(_spec_t(lhs_spec), _spec_t(out_spec), _spec_t(rhs_spec))
    return conv_general_dilated(lhs, ct, rhs_dilation, pads, lhs_dilation, window_strides, dn,
                                fgc, bgc, precision)


def _conv_transpose(ct, lhs, rhs, **params):
    if ad.is_undefined(lhs):
        out = _conv_transpose_lhs(ct, rhs, lhs.aval, **params)
        return [_cast(out, lhs.aval.dtype), None]
    return [None, _cast(_conv_transpose_rhs(ct, lhs, rhs.aval, **params), rhs.aval.dtype)]


def _cast(x, dtype):
    return x if get_aval(x).dtype == dtype else lax.convert_element_type(x, dtype)


def _conv_batch(args, dims, *, dimension_numbers, feature_group_count, batch_group_count,
                **params):
    lhs, rhs = args
    ld, rd = dims
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    fgc, bgc = feature_group_count, batch_group_count
    if (ld is not None and get_aval(lhs).shape[ld] == 0) or (
            rd is not None and get_aval(rhs).shape[rd] == 0):  # nothing to fold into groups
        la, ra = (get_aval(x).update(shape=tuple(s for i, s in enumerate(get_aval(x).shape)
                                                 if i != d)) for x, d in ((lhs, ld), (rhs, rd)))
        example = _conv_abstract(la, ra, dimension_numbers=dimension_numbers,
                                 feature_group_count=fgc, batch_group_count=bgc, **params)
        return lax.full((0,) + example.shape, 0, example.dtype), 0

    def bind(x, w, f, b):
        return conv_general_dilated_p.bind(x, w, dimension_numbers=dimension_numbers,
                                           feature_group_count=f, batch_group_count=b, **params)
    if ld is not None and rd is not None:
        size = get_aval(lhs).shape[ld]
        if bgc > 1:
            new_lhs, bgc = _reshape_axis_into(ld, lhs_spec[0], lhs), bgc * size
        else:
            new_lhs, fgc = _reshape_axis_into(ld, lhs_spec[1], lhs), fgc * size
        out = bind(new_lhs, _reshape_axis_into(rd, rhs_spec[0], rhs), fgc, bgc)
        return _reshape_axis_out_of(out_spec[1], size, out), out_spec[1]
    if ld is not None:
        size = get_aval(lhs).shape[ld]
        if bgc == 1:
            out = bind(_reshape_axis_into(ld, lhs_spec[0], lhs), rhs, fgc, bgc)
            return _reshape_axis_out_of(out_spec[0], size, out), out_spec[0]
        new_lhs = _reshape_axis_out_of(lhs_spec[0] + int(ld <= lhs_spec[0]), bgc, lhs)
        new_lhs = _reshape_axis_into(ld + int(lhs_spec[0] < ld), lhs_spec[0] + 1, new_lhs)
        new_lhs = _reshape_axis_into(lhs_spec[0], lhs_spec[0], new_lhs)
        out = bind(new_lhs, rhs, fgc, bgc)
        return _reshape_axis_out_of(out_spec[0], size, out), out_spec[0]
    size = get_aval(rhs).shape[rd]
    if fgc == 1 and bgc == 1:
        out = bind(lhs, _reshape_axis_into(rd, rhs_spec[0], rhs), fgc, bgc)
        return _reshape_axis_out_of(out_spec[1], size, out), out_spec[1]
    # groups must stay outermost in the output features: factor them out, fold the batch
    # into the per-group features, and put the groups back
    groups = max(fgc, bgc)
    new_rhs = _reshape_axis_out_of(rhs_spec[0] + int(rd <= rhs_spec[0]), groups, rhs)
    new_rhs = _reshape_axis_into(rd + int(rhs_spec[0] < rd), rhs_spec[0] + 1, new_rhs)
    new_rhs = _reshape_axis_into(rhs_spec[0], rhs_spec[0], new_rhs)
    out = bind(lhs, new_rhs, fgc, bgc)
    out = _reshape_axis_out_of(out_spec[1], groups, out)
    out = _reshape_axis_out_of(out_spec[1] + 1, size, out)
    return _reshape_axis_into(out_spec[1], out_spec[1] + 1, out), out_spec[1]


conv_general_dilated_p = Primitive("conv_general_dilated")
conv_general_dilated_p.def_impl(quiet(_conv_impl))
conv_general_dilated_p.widens_narrow = False
conv_general_dilated_p.def_abstract_eval(_conv_abstract)
ad.defjvp(conv_general_dilated_p,
          lambda t, x, w, *, out, **p: conv_general_dilated_p.bind(t, w, **p),
          lambda t, x, w, *, out, **p: conv_general_dilated_p.bind(x, t, **p))
ad.transpose_rules[conv_general_dilated_p] = _conv_transpose
batching.batch_rules[conv_general_dilated_p] = _conv_batch


# --- windowed reductions: shared rules ----------------------------------------------------------
def _identity(kind, dtype):
    if kind == "sum":
        return np.zeros((), dtype)[()]
    if dtypes.kind(dtype) == "f":
        return dtype.type(-np.inf if kind == "max" else np.inf)
    if dtypes.kind(dtype) == "b":
        return kind == "min"
    info = dtypes.iinfo(dtype)
    return dtype.type(info.min if kind == "max" else info.max)


def _window_params(operand_shape, window_dimensions, window_strides, padding, base_dilation,
                   window_dilation):
    nd = len(operand_shape)
    ones = (1,) * nd
    if isinstance(padding, str):
        padding = padtype_to_pads(operand_shape, window_dimensions,
                                  window_strides or ones, padding)
    ints = lambda xs: _ints(xs, "reduce_window")  # noqa: E731
    return dict(window_dimensions=ints(window_dimensions),
                window_strides=ones if window_strides is None else ints(window_strides),
                padding=_pairs(padding),
                base_dilation=ones if base_dilation is None else ints(base_dilation),
                window_dilation=ones if window_dilation is None else ints(window_dilation))


def _window_out_shape(name, x, window_dimensions, window_strides, padding, base_dilation,
                      window_dilation):
    nd = x.ndim
    for what, v in (("window_dimensions", window_dimensions), ("window_strides",
                    window_strides), ("padding", padding), ("base_dilation", base_dilation),
                    ("window_dilation", window_dilation)):
        if len(v) != nd:
            raise errors.op_error(name, f"{what} {v} needs one entry per axis of the operand "
                                  f"{x}", cls=errors.FuncgradValueError)
    if any(w < 0 for w in window_dimensions) or any(
            s < 1 for s in window_strides + base_dilation + window_dilation):
        raise errors.op_error(name, "window sizes must be >= 0 and strides/dilations >= 1, got "
                              f"window {window_dimensions}, strides {window_strides}",
                              cls=errors.FuncgradValueError)
    padded = [_dilate_dim(n, b) + lo + hi
              for n, b, (lo, hi) in zip(x.shape, base_dilation, padding)]
    if any(p < 0 for p in padded):
        raise errors.op_error(name, f"negative padding {padding} is larger than the operand "
                              f"{x}", cls=errors.FuncgradValueError)
    return tuple(_stride_dim(p, _dilate_dim(w, d), s) for p, w, d, s in
                 zip(padded, window_dimensions, window_dilation, window_strides))


def _window_view(x, value, window_dimensions, window_strides, padding, base_dilation,
                 window_dilation):
    xp = _dilate_pad(x, value, padding, base_dilation)
    return _windows(xp, tuple(range(x.ndim)), window_dimensions, window_strides,
                    window_dilation)


def _window_batch(prim):
    """Batch a window op by giving the batch axis (moved to the front) a window of 1."""
    def rule(args, dims, *, window_dimensions, window_strides, padding, base_dilation,
             window_dilation, **params):
        size = next(get_aval(x).shape[d] for x, d in zip(args, dims) if d is not None)
        args = [batching.bdim_at_front(x, d, size) for x, d in zip(args, dims)]
        out = prim.bind(*args, window_dimensions=(1,) + window_dimensions,
                        window_strides=(1,) + window_strides, padding=((0, 0),) + padding,
                        base_dilation=(1,) + base_dilation,
                        window_dilation=(1,) + window_dilation, **params)
        return out, 0
    return rule


def fold_windows(x, ufunc, ident, *, window_dimensions, window_strides, padding,
                 base_dilation, window_dilation):
    """The windowed reduction of numpy `x` by `ufunc` (np.add, np.maximum, np.minimum), one
    axis at a time from the last: along each axis, a window's taps fold left in order into
    its first. The native tier's routine (`backends/native/windows.py`) folds in this order,
    so both give the same bits."""
    xp = _dilate_pad(x, ident, padding, base_dilation)
    for d in reversed(range(x.ndim)):
        w, s, r = window_dimensions[d], window_strides[d], window_dilation[d]
        n = _stride_dim(xp.shape[d], _dilate_dim(w, r), s)
        taps = [xp[(slice(None),) * d + (slice(j * r, j * r + (n - 1) * s + 1, s),)]
                for j in range(w)]
        if w == 1:
            xp = taps[0]
            continue
        acc = np.array(taps[0])
        for tap in taps[1:]:
            ufunc(acc, tap, out=acc)
        xp = acc
    return np.ascontiguousarray(xp)


def _reduce_window_prim(kind, ufunc, kinds):
    name = f"reduce_window_{kind}"
    p = Primitive(name)

    def abstract(x, **params):
        if dtypes.kind(x.dtype) not in kinds:
            raise errors.op_error(name, f"does not accept operand {x}")
        return ShapedArray(_window_out_shape(name, x, **params), x.dtype, x.weak_type)

    def impl(x, **params):
        out_shape = _window_out_shape(name, get_aval(x), **params)
        ident = _identity(kind, x.dtype)
        if 0 in out_shape or 0 in params["window_dimensions"]:
            return np.full(out_shape, ident, x.dtype)
        return fold_windows(x, ufunc, ident, **params)
    p.def_impl(quiet(impl))
    p.def_abstract_eval(abstract)
    batching.batch_rules[p] = _window_batch(p)
    return p


# --- reduce_window_sum ----------------------------------------------------------------------
def reduce_window_sum(operand, window_dimensions, window_strides=None, padding="VALID",
                      base_dilation=None, window_dilation=None):
    """Sum over sliding windows (average pooling without the division).

    Example:
        >>> reduce_window_sum(fnp.arange(4.), (2,), (2,))
        Array([1., 5.], dtype=float32)
    """
    params = _window_params(get_aval(operand).shape, window_dimensions, window_strides,
                            padding, base_dilation, window_dilation)
    return reduce_window_sum_p.bind(operand, **params)


def _reduce_window_sum_transpose(ct, operand, *, window_dimensions, window_strides, padding,
                                 base_dilation, window_dilation):
    # every input element receives the sum of the cotangents of the windows that hold it
    shape = operand.aval.shape
    pads = _vjp_lhs_padding(shape, window_dimensions, window_strides, get_aval(ct).shape,
                            padding, base_dilation, window_dilation)
    out = reduce_window_sum_p.bind(ct, window_dimensions=window_dimensions,
                                   window_strides=base_dilation, padding=pads,
                                   base_dilation=window_strides,
                                   window_dilation=window_dilation)
    return [out]


reduce_window_sum_p = _reduce_window_prim("sum", np.add, "iufc")
ad.deflinear(reduce_window_sum_p, _reduce_window_sum_transpose)


# --- reduce_window_max / reduce_window_min ------------------------------------------------------
def reduce_window_max(operand, window_dimensions, window_strides=None, padding="VALID",
                      base_dilation=None, window_dilation=None):
    """Maximum over sliding windows (max pooling); padding counts as -inf.

    Example:
        >>> reduce_window_max(fnp.array([1., 3., 2., 0.]), (2,), (2,))
        Array([3., 2.], dtype=float32)
    """
    params = _window_params(get_aval(operand).shape, window_dimensions, window_strides,
                            padding, base_dilation, window_dilation)
    return reduce_window_max_p.bind(operand, **params)


def reduce_window_min(operand, window_dimensions, window_strides=None, padding="VALID",
                      base_dilation=None, window_dilation=None):
    """Minimum over sliding windows; padding counts as +inf.

    Example:
        >>> reduce_window_min(fnp.array([1., 3., 2., 0.]), (2,), (2,))
        Array([1., 0.], dtype=float32)
    """
    params = _window_params(get_aval(operand).shape, window_dimensions, window_strides,
                            padding, base_dilation, window_dilation)
    return reduce_window_min_p.bind(operand, **params)


def _chooser_jvp(kind):
    # the tangent of the selected (first extremal) element of every window: a masked block
    # sum when the windows tile the operand (pooling.py), else select_and_gather_add
    def rule(primals, out, tangents, **params):
        layout = pooling.blocked(get_aval(primals[0]).shape, **params)
        if layout and dtypes.kind(get_aval(primals[0]).dtype) == "f":
            return pooling.chooser_jvp(tangents[0], primals[0], layout, kind)
        return select_and_gather_add_p.bind(tangents[0], primals[0], select_prim=kind,
                                            **params)
    return rule


reduce_window_max_p = _reduce_window_prim("max", np.maximum, "biuf")
ad.jvp_rules[reduce_window_max_p] = _chooser_jvp("max")

reduce_window_min_p = _reduce_window_prim("min", np.minimum, "biuf")
ad.jvp_rules[reduce_window_min_p] = _chooser_jvp("min")


# --- select_and_gather_add / select_and_scatter_add ---------------------------------------
# select_and_gather_add(t, x): per window, t at the position of the first max (min) of x.
# select_and_scatter_add(s, x): its transpose in s, adding s into those positions.

def _selected(operand, select_prim, out_shape, **params):
    """Per output position, the flat index within its window of the selected element."""
    ident = _identity(select_prim, operand.dtype)
    v = _window_view(operand, ident, **params).reshape(out_shape + (-1,))
    return np.argmax(v, axis=-1) if select_prim == "max" else np.argmin(v, axis=-1)


def _select_abstract(name, gathers):
    def rule(t, x, *, select_prim, **params):
        out = _window_out_shape(name, x, **params)
        if (t.shape != x.shape) if gathers else (t.shape != out):
            raise errors.FuncgradInternalError(f"{name}: bad operand shapes {t} and {x}")
        return ShapedArray(out if gathers else x.shape, t.dtype, t.weak_type)
    return rule


def _select_and_gather_add_impl(t, x, *, select_prim, **params):
    out_shape = _window_out_shape("select_and_gather_add", get_aval(x), **params)
    if 0 in out_shape or 0 in params["window_dimensions"]:
        return np.zeros(out_shape, t.dtype)
    arg = _selected(x, select_prim, out_shape, **params)
    tv = _window_view(t, 0, **params).reshape(out_shape + (-1,))
    return np.take_along_axis(tv, arg[..., None], axis=-1)[..., 0]


def _select_and_scatter_add_impl(s, x, *, select_prim, **params):
    out_shape = _window_out_shape("select_and_scatter_add", get_aval(x), **params)
    if 0 in out_shape or 0 in params["window_dimensions"]:
        return np.zeros(x.shape, s.dtype)
    arg = np.unravel_index(_selected(x, select_prim, out_shape, **params),
                           params["window_dimensions"])
    nd = x.ndim
    coords = []
    for d in range(nd):
        o = np.arange(out_shape[d]).reshape([-1 if i == d else 1 for i in range(nd)])
        coords.append(o * params["window_strides"][d] + arg[d] * params["window_dilation"][d])
    padded_shape = [_dilate_dim(n, b) + lo + hi for n, b, (lo, hi) in
                    zip(x.shape, params["base_dilation"], params["padding"])]
    padded = np.zeros(padded_shape, s.dtype)
    np.add.at(padded, tuple(coords), s)
    return _undilate_unpad(padded, params["padding"], params["base_dilation"], x.shape)


def _select_and_gather_add_transpose(ct, t, x, **params):
    return [select_and_scatter_add_p.bind(ct, x, **params), None]


def _select_and_scatter_add_transpose(ct, s, x, **params):
    return [select_and_gather_add_p.bind(ct, x, **params), None]


def _linear_in_first(prim):
    def rule(primals, out, tangents, **params):
        if type(tangents[0]) is ad.Zero:
            return ad.Zero(get_aval(out))
        return prim.bind(tangents[0], primals[1], **params)
    return rule


select_and_gather_add_p = Primitive("select_and_gather_add")
select_and_gather_add_p.def_impl(quiet(_select_and_gather_add_impl))
select_and_gather_add_p.def_abstract_eval(_select_abstract("select_and_gather_add", True))
ad.jvp_rules[select_and_gather_add_p] = _linear_in_first(select_and_gather_add_p)
ad.transpose_rules[select_and_gather_add_p] = _select_and_gather_add_transpose
batching.batch_rules[select_and_gather_add_p] = _window_batch(select_and_gather_add_p)

select_and_scatter_add_p = Primitive("select_and_scatter_add")
select_and_scatter_add_p.def_impl(quiet(_select_and_scatter_add_impl))
select_and_scatter_add_p.def_abstract_eval(_select_abstract("select_and_scatter_add", False))
ad.jvp_rules[select_and_scatter_add_p] = _linear_in_first(select_and_scatter_add_p)
ad.transpose_rules[select_and_scatter_add_p] = _select_and_scatter_add_transpose
batching.batch_rules[select_and_scatter_add_p] = _window_batch(select_and_scatter_add_p)


# --- reduce_window (the generic entry point) ------------------------------------------------------
def _monoid(computation):
    table = {operator.add: "sum", np.add: "sum", np.maximum: "max", np.minimum: "min",
             max: "max", min: "min"}
    for name, kind in (("add", "sum"), ("max", "max"), ("min", "min")):
        fn = getattr(lax, name, None)
        if fn is not None:
            table[fn] = kind
    return table.get(computation)


def reduce_window(operand, init_value, computation, window_dimensions, window_strides=None,
                  padding="VALID", base_dilation=None, window_dilation=None):
    """Reduce sliding windows of `operand` with `computation` (lax.add, lax.max or lax.min);
    `window_strides` default to 1 (as in JAX).

    `init_value` must be a concrete scalar: 0 for lax.add; for lax.max / lax.min any value
    (the identity -inf / +inf gives plain max / min pooling).

    Example:
        >>> reduce_window(fnp.arange(4.), -fnp.inf, lax.max, (2,), (1,), 'VALID')
        Array([1., 2., 3.], dtype=float32)
    """
    kind = _monoid(computation)
    if kind is None:
        raise errors.op_error("reduce_window", f"unsupported computation "
                                               f"{errors.short_repr(computation)}",
                              hint="use lax.add, lax.max or lax.min (reduce_window_sum / "
                                   "reduce_window_max / reduce_window_min)")
    init = concrete_value(init_value)
    if init is None or np.ndim(init) != 0:
        raise errors.op_error("reduce_window", "init_value must be a concrete scalar, got "
                              f"{errors.short_repr(init_value)}")
    wrapper = {"sum": reduce_window_sum, "max": reduce_window_max, "min": reduce_window_min}
    out = wrapper[kind](operand, window_dimensions, window_strides, padding, base_dilation,
                        window_dilation)
    dtype = get_aval(operand).dtype
    if init == _identity(kind, dtype):
        return out
    if kind == "sum":
        raise errors.op_error("reduce_window", f"lax.add needs init_value 0, got "
                                               f"{errors.short_repr(init)}",
                              cls=errors.FuncgradValueError)
    init_arr = lax.convert_element_type(init_value, dtype)
    return lax.max(out, init_arr) if kind == "max" else lax.min(out, init_arr)
