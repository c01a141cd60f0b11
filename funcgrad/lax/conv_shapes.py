"""Shape arithmetic of convolutions and windows, and `conv_transpose`, with JAX's names.

`conv_shape_tuple`, `conv_general_shape_tuple`, `conv_transpose_shape_tuple` and
`reduce_window_shape_tuple` compute output shapes without tracing (the example libraries'
stax needs them); `conv_transpose` is a `conv_general_dilated` with the input dilated by the
strides (no primitive of its own, so its derivatives and batching are conv's). Imports
lax.convolution and lax.shape only.
"""

from funcgrad import errors
from funcgrad.core import get_aval
from funcgrad.lax.convolution import (
    _dilate_dim,
    conv_dimension_numbers,
    conv_general_dilated,
    conv_general_permutations,
    padtype_to_pads,
)
from funcgrad.lax.shape import rev, transpose
from funcgrad.lax.utils import static_ints

__all__ = ["conv_general_shape_tuple", "conv_shape_tuple", "conv_transpose",
           "conv_transpose_shape_tuple", "reduce_window_shape_tuple"]


def _ints(op, xs):
    return static_ints(op, xs, "a shape, window, stride or dilation entry")


def _stride_shape(padded, window, strides, op):
    if any(p < w for p, w in zip(padded, window)):
        raise errors.op_error(op, f"the padded input {tuple(padded)} is smaller than the window "
                                  f"{tuple(window)}", cls=errors.FuncgradValueError)
    return tuple((p - w) // s + 1 for p, w, s in zip(padded, window, strides))


def conv_shape_tuple(lhs_shape, rhs_shape, strides, pads, batch_group_count=1):
    """The output shape of an NC... / OI... convolution.

    Example:
        >>> conv_shape_tuple((1, 3, 8, 8), (4, 3, 3, 3), (1, 1), 'SAME')
        (1, 4, 8, 8)
    """
    op = "conv_shape_tuple"
    lhs_shape, rhs_shape = _ints(op, lhs_shape), _ints(op, rhs_shape)
    strides = _ints(op, strides)
    if isinstance(pads, str):
        pads = padtype_to_pads(lhs_shape[2:], rhs_shape[2:], strides, pads)
    if len(pads) != len(lhs_shape) - 2:
        raise errors.op_error(op, f"padding {pads} needs one (low, high) pair per spatial axis "
                                  f"of {lhs_shape}", cls=errors.FuncgradValueError)
    padded = [d + lo + hi for d, (lo, hi) in zip(lhs_shape[2:], pads)]
    space = _stride_shape(padded, rhs_shape[2:], strides, op)
    return (lhs_shape[0] // batch_group_count, rhs_shape[0]) + space


def _permuted(lhs_shape, rhs_shape, dimension_numbers):
    lhs_perm, rhs_perm, out_perm = conv_general_permutations(dimension_numbers)
    return ([lhs_shape[i] for i in lhs_perm], [rhs_shape[i] for i in rhs_perm], out_perm)


def _unpermute(shape, out_perm):
    out = [0] * len(shape)
    for i, p in enumerate(out_perm):
        out[p] = shape[i]
    return tuple(out)


def conv_general_shape_tuple(lhs_shape, rhs_shape, window_strides, padding, dimension_numbers):
    """The output shape of `conv_general_dilated` (no dilation) for string dimension numbers.

    Example:
        >>> conv_general_shape_tuple((1, 8, 8, 3), (3, 3, 3, 4), (2, 2), 'SAME',
        ...                          ('NHWC', 'HWIO', 'NHWC'))
        (1, 4, 4, 4)
    """
    lhs_t, rhs_t, out_perm = _permuted(lhs_shape, rhs_shape, dimension_numbers)
    return _unpermute(conv_shape_tuple(lhs_t, rhs_t, window_strides, padding), out_perm)


def _conv_transpose_padding(k, s, padding):
    """(low, high) padding of the dilated input that makes a conv the transpose of a strided
    conv with kernel size `k` and stride `s` (TensorFlow's / JAX's convention)."""
    mode = padding.upper()
    if mode == "SAME":
        pad_len = k + s - 2
        pad_a = k - 1 if s > k - 1 else -(-pad_len // 2)
    elif mode == "VALID":
        pad_len = k + s - 2 + max(k - s, 0)
        pad_a = k - 1
    else:
        raise errors.op_error("conv_transpose", f"padding must be 'SAME', 'VALID' or (low, "
                                                f"high) pairs, got {errors.short_repr(padding)}",
                              cls=errors.FuncgradValueError)
    return pad_a, pad_len - pad_a


def conv_transpose_shape_tuple(lhs_shape, rhs_shape, window_strides, padding,
                               dimension_numbers):
    """The output shape of `conv_transpose`.

    Example:
        >>> conv_transpose_shape_tuple((1, 4, 4, 3), (3, 3, 3, 8), (2, 2), 'SAME',
        ...                            ('NHWC', 'HWIO', 'NHWC'))
        (1, 8, 8, 8)
    """
    lhs_t, rhs_t, out_perm = _permuted(lhs_shape, rhs_shape, dimension_numbers)
    strides = _ints("conv_transpose_shape_tuple", window_strides)
    if isinstance(padding, str):
        padding = [_conv_transpose_padding(k, s, padding) for k, s in zip(rhs_t[2:], strides)]
    space = [(i - 1) * s - k + 2 + lo + hi
             for i, k, s, (lo, hi) in zip(lhs_t[2:], rhs_t[2:], strides, padding)]
    return _unpermute((lhs_t[0], rhs_t[0]) + tuple(space), out_perm)


def reduce_window_shape_tuple(operand_shape, window_dimensions, window_strides, padding,
                              base_dilation=None, window_dilation=None):
    """The output shape of `reduce_window` for explicit (low, high) padding pairs.

    Example:
        >>> reduce_window_shape_tuple((1, 8, 8, 3), (1, 2, 2, 1), (1, 2, 2, 1), ((0, 0),) * 4)
        (1, 4, 4, 3)
    """
    op = "reduce_window_shape_tuple"
    shape, window = _ints(op, operand_shape), _ints(op, window_dimensions)
    if base_dilation is not None:
        shape = [_dilate_dim(d, r) for d, r in zip(shape, _ints(op, base_dilation))]
    if window_dilation is not None:
        window = [_dilate_dim(d, r) for d, r in zip(window, _ints(op, window_dilation))]
    padded = [d + lo + hi for d, (lo, hi) in zip(shape, padding)]
    return _stride_shape(padded, window, _ints(op, window_strides), op)


_DEFAULT_DN = {2: ("NC", "IO", "NC"), 3: ("NHC", "HIO", "NHC"), 4: ("NHWC", "HWIO", "NHWC"),
               5: ("NHWDC", "HWDIO", "NHWDC")}


def conv_transpose(lhs, rhs, strides, padding, rhs_dilation=None, dimension_numbers=None,
                   transpose_kernel=False, precision=None, preferred_element_type=None,
                   use_consistent_padding=False):
    """Transposed convolution ("deconvolution"), as `jax.lax.conv_transpose`.

    Args:
        lhs, rhs: input and kernel; by default channels-last (NHWC / HWIO / NHWC).
        strides: the upsampling factor per spatial axis.
        padding: 'SAME', 'VALID' or one (low, high) pair per spatial axis: the padding of
            the transposed convolution, or with `use_consistent_padding` that of the forward
            convolution this one transposes (PyTorch's convention; strings always are).
        transpose_kernel: flip the kernel spatially and swap its I/O axes, so the result is
            the gradient of `conv_general_dilated` with this kernel (as in JAX).

    Example:
        >>> conv_transpose(fnp.ones((1, 2, 1)), fnp.ones((3, 1, 1)), (2,), 'VALID').shape
        (1, 5, 1)
    """
    la, ra = get_aval(lhs), get_aval(rhs)
    if la.ndim != ra.ndim or la.ndim < 2:
        raise errors.op_error("conv_transpose", f"lhs {la} and kernel {ra} need the same rank "
                                                ">= 2", cls=errors.FuncgradValueError)
    dimension_numbers = dimension_numbers or _DEFAULT_DN.get(la.ndim)
    dn = conv_dimension_numbers(la.shape, ra.shape, dimension_numbers)
    strides = _ints("conv_transpose", strides)
    rhs_dilation = (1,) * (la.ndim - 2) if rhs_dilation is None else rhs_dilation
    k_sp = [_dilate_dim(ra.shape[d], r) for d, r in zip(dn.rhs_spec[2:], rhs_dilation)]
    if isinstance(padding, str):
        padding = [_conv_transpose_padding(k, s, padding) for k, s in zip(k_sp, strides)]
    elif use_consistent_padding:
        padding = [(k - int(lo) - 1, k - int(hi) - 1) for k, (lo, hi) in zip(k_sp, padding)]
    if transpose_kernel:
        rhs = rev(rhs, tuple(dn.rhs_spec[2:]))
        perm = list(range(ra.ndim))
        perm[dn.rhs_spec[0]], perm[dn.rhs_spec[1]] = dn.rhs_spec[1], dn.rhs_spec[0]
        rhs = transpose(rhs, tuple(perm))
    return conv_general_dilated(lhs, rhs, (1,) * (la.ndim - 2), padding, strides, rhs_dilation,
                                dn, precision=precision,
                                preferred_element_type=preferred_element_type)
