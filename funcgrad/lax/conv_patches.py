"""Convolutions built from `conv_general_dilated` and `dot_general`: the patch extractor
`conv_general_dilated_patches` (a grouped convolution with an identity kernel, as JAX's) and
the unshared-weights convolution `conv_general_dilated_local` (patches, then a batched
product with one kernel per output position).

Compositions only: derivatives and batching are those of the convolution and the product.
Imports lax siblings and core.
"""

import math

import numpy as np

from funcgrad import errors
from funcgrad.core import ArrayBase, get_aval, to_array
from funcgrad.lax.convolution import (
    ConvDimensionNumbers,
    conv_dimension_numbers,
    conv_general_dilated,
)
from funcgrad.lax.linalg import dot_general
from funcgrad.lax.precision import canonicalize_precision
from funcgrad.lax.shape import transpose

__all__ = ["ConvGeneralDilatedDimensionNumbers", "conv_general_dilated_local",
           "conv_general_dilated_patches"]

# what `dimension_numbers=` of the convolutions accepts (JAX's type alias)
ConvGeneralDilatedDimensionNumbers = tuple[str, str, str] | ConvDimensionNumbers | None


def _operand(x):
    return x if isinstance(x, ArrayBase) else to_array(x)


def _moved(x, src, dst):
    """`x` with axes `src` moved to positions `dst` (numpy's moveaxis, static)."""
    nd = get_aval(x).ndim
    order = [i for i in range(nd) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return transpose(x, tuple(order))


def conv_general_dilated_patches(lhs, filter_shape, window_strides, padding, lhs_dilation=None,
                                 rhs_dilation=None, dimension_numbers=None, precision=None,
                                 preferred_element_type=None):
    """The patches a convolution with a kernel of spatial shape `filter_shape` would see: for
    each output position, the flattened window of every input channel, along the output's
    feature axis (channel-major: C * prod(filter_shape) features).

    Args:
        lhs: the input, laid out as `dimension_numbers` says (default NCHW).
        filter_shape: the spatial window shape.
        window_strides, padding, lhs_dilation, rhs_dilation: as `conv_general_dilated`.

    Example:
        >>> x = fnp.arange(4.0).reshape(1, 1, 2, 2)
        >>> conv_general_dilated_patches(x, (2, 2), (1, 1), "VALID").reshape(4)
        Array([0., 1., 2., 3.], dtype=float32)
    """
    lhs = _operand(lhs)
    aval = get_aval(lhs)
    filter_shape = tuple(int(s) for s in filter_shape)
    dn = conv_dimension_numbers(aval.shape, (1, 1) + filter_shape, dimension_numbers)
    lhs_spec, rhs_spec, _ = dn
    size = math.prod(filter_shape)
    channels = aval.shape[lhs_spec[1]]
    # one identity kernel per channel: output feature c * size + k reads window entry k
    eye = np.eye(size, dtype=aval.dtype).reshape((size, 1) + filter_shape)
    rhs = to_array(np.tile(eye, (channels,) + (1,) * (len(filter_shape) + 1)))
    rhs = _moved(rhs, (0, 1), (rhs_spec[0], rhs_spec[1]))
    return conv_general_dilated(
        lhs, rhs, window_strides, padding, lhs_dilation=lhs_dilation,
        rhs_dilation=rhs_dilation, dimension_numbers=dn, feature_group_count=channels,
        precision=None if precision is None else (precision, None),
        preferred_element_type=preferred_element_type)


def conv_general_dilated_local(lhs, rhs, window_strides, padding, filter_shape,
                               lhs_dilation=None, rhs_dilation=None, dimension_numbers=None,
                               precision=None):
    """A convolution whose kernel differs at every output position (a locally connected
    layer): `rhs` has, in `dimension_numbers`' kernel layout, the output features, the
    input features (C * prod(filter_shape), channel-major) and the output's spatial axes.

    Example:
        >>> x = fnp.ones((1, 1, 3))
        >>> w = fnp.arange(4.0).reshape(1, 2, 2)  # O=1, I=1*2, one kernel per position
        >>> conv_general_dilated_local(x, w, (1,), "VALID", (2,))
        Array([[[2., 4.]]], dtype=float32)
    """
    lhs, rhs = _operand(lhs), _operand(rhs)
    c_precision = canonicalize_precision(precision, "conv_general_dilated_local")
    if c_precision is None:
        lhs_precision = None
    elif isinstance(c_precision, tuple) and len(c_precision) == 2:
        lhs_precision = c_precision[0]
    else:
        raise errors.op_error("conv_general_dilated_local", f"unsupported precision "
                              f"{errors.short_repr(precision)}", cls=errors.FuncgradValueError)
    patches = conv_general_dilated_patches(lhs, filter_shape, window_strides, padding,
                                           lhs_dilation, rhs_dilation, dimension_numbers,
                                           lhs_precision)
    _, rhs_spec, out_spec = conv_dimension_numbers(get_aval(lhs).shape,
                                                   (1, 1) + tuple(filter_shape),
                                                   dimension_numbers)
    lhs_b, rhs_b = list(out_spec[2:]), list(rhs_spec[2:])
    rhs_b = [rhs_b[i] for i in sorted(range(len(rhs_b)), key=lambda k: lhs_b[k])]
    dn = (([out_spec[1]], [rhs_spec[1]]), (sorted(lhs_b), rhs_b))
    out = dot_general(patches, rhs, dn, precision=precision)
    nd = get_aval(out).ndim
    return _moved(out, (nd - 2, nd - 1), (out_spec[0], out_spec[1]))
