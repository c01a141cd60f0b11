"""Image resampling, as JAX's `jax.image`: `resize`, `scale_and_translate`, `ResizeMethod`.

Each spatial axis is resampled by a matrix of kernel weights (input positions x output
positions) contracted with the image, as JAX does, so the results are JAX's to rounding and
every method is differentiable in the image (and, for `scale_and_translate`, in `scale` and
`translation`). Nearest neighbour is a gather. Written with `funcgrad.numpy` only.
"""

import enum
import string

import numpy as np

import funcgrad.numpy as fnp
from funcgrad import dtypes, errors
from funcgrad.lax.precision import Precision

__all__ = ["ResizeMethod", "resize", "scale_and_translate"]


class ResizeMethod(enum.Enum):
    """Image resize methods (JAX's): NEAREST, LINEAR, LANCZOS3, LANCZOS5, CUBIC (Keys),
    CUBIC_PYTORCH (OpenCV's/PyTorch's cubic, edge pixels repeated without antialiasing),
    AREA (the mean over each output pixel's area).

    Example:
        >>> ResizeMethod.from_string("bilinear")
        <ResizeMethod.LINEAR: 1>
    """

    NEAREST = 0
    LINEAR = 1
    LANCZOS3 = 2
    LANCZOS5 = 3
    CUBIC = 4
    CUBIC_PYTORCH = 5
    AREA = 6

    @staticmethod
    def from_string(s):
        """The method named `s` (JAX's names and aliases: "bilinear", "tricubic", ...)."""
        method = _NAMES.get(s)
        if method is None:
            raise errors.FuncgradValueError(f'Unknown resize method "{s}" (methods: '
                                            f'{", ".join(_NAMES)})\n{errors.where()}')
        return method


_NAMES = {"nearest": ResizeMethod.NEAREST, "linear": ResizeMethod.LINEAR,
          "bilinear": ResizeMethod.LINEAR, "trilinear": ResizeMethod.LINEAR,
          "triangle": ResizeMethod.LINEAR, "lanczos3": ResizeMethod.LANCZOS3,
          "lanczos5": ResizeMethod.LANCZOS5, "cubic": ResizeMethod.CUBIC,
          "bicubic": ResizeMethod.CUBIC, "tricubic": ResizeMethod.CUBIC,
          "cubic-pytorch": ResizeMethod.CUBIC_PYTORCH,
          "bicubic-pytorch": ResizeMethod.CUBIC_PYTORCH, "area": ResizeMethod.AREA}


# --- kernels: weight of an input pixel at distance x (in output-pixel units) ------------------

def _lanczos(radius, x):
    y = radius * fnp.sin(np.pi * x) * fnp.sin(np.pi * x / radius)
    out = fnp.where(x > 1e-3, y / fnp.where(x != 0, np.pi ** 2 * x ** 2, 1), 1)
    return fnp.where(x > radius, 0., out)


def _keys_cubic(x):
    out = ((1.5 * x - 2.5) * x) * x + 1.
    out = fnp.where(x >= 1., ((-0.5 * x + 2.5) * x - 4.) * x + 2., out)
    return fnp.where(x >= 2., 0., out)


def _opencv_cubic(x):
    a = -0.75
    out = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    out = fnp.where(x >= 1.0, ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a, out)
    return fnp.where(x >= 2.0, 0.0, out)


def _triangle(x):
    return fnp.maximum(0, 1 - fnp.abs(x))


_AREA = object()
_KERNELS = {  # method -> (radius, kernel)
    ResizeMethod.LINEAR: (1, _triangle),
    ResizeMethod.LANCZOS3: (3, lambda x: _lanczos(3., x)),
    ResizeMethod.LANCZOS5: (5, lambda x: _lanczos(5., x)),
    ResizeMethod.CUBIC: (2, _keys_cubic),
    ResizeMethod.CUBIC_PYTORCH: (2, _opencv_cubic),
    ResizeMethod.AREA: (1, _AREA),
}


def _normalized(weights):
    """Columns divided by their sums (a column summing to about zero becomes zero)."""
    total = fnp.sum(weights, axis=0, keepdims=True)
    keep = fnp.abs(total) > 1000. * float(np.finfo(np.float32).eps)
    return fnp.where(keep, weights / fnp.where(total != 0, total, 1), 0)


def weight_matrix(input_size, output_size, scale, translation, kernel, antialias,
                  edge_padding, radius):
    """The `(input_size, output_size)` resampling weights of one axis (JAX's
    `compute_weight_mat`): output pixel j samples the input at `(j + 0.5 - translation) /
    scale - 0.5`; `antialias` widens the kernel by `1 / scale` when shrinking;
    `edge_padding` repeats the edge pixels instead of giving outside samples no weight."""
    dtype = fnp.result_type(scale, translation)
    inv_scale = 1. / scale
    kernel_scale = fnp.maximum(inv_scale, 1.) if antialias else 1.
    sample_f = (fnp.arange(output_size, dtype=dtype) + 0.5) * inv_scale \
        - translation * inv_scale - 0.5
    k = radius if edge_padding else 0
    expanded = fnp.arange(-k, input_size + k, dtype=dtype)
    if kernel is _AREA:
        left = fnp.arange(output_size, dtype=dtype) * inv_scale - translation * inv_scale
        right, left_in = left + inv_scale, fnp.arange(input_size, dtype=dtype)
        weights = fnp.maximum(0.0, fnp.minimum(right[None, :], left_in[:, None] + 1.0)
                              - fnp.maximum(left[None, :], left_in[:, None]))
    else:
        weights = kernel(fnp.abs(sample_f[None, :] - expanded[:, None]) / kernel_scale)
    if edge_padding:
        rows = fnp.clip(expanded.astype(fnp.int32), 0, input_size - 1)
        cols = fnp.broadcast_to(fnp.arange(output_size), (expanded.shape[0], output_size))
        mat = fnp.zeros((input_size, output_size), dtype).at[rows[:, None], cols].add(weights)
        return _normalized(mat)
    inside = (sample_f >= -0.5) & (sample_f <= input_size - 0.5)
    return fnp.where(inside[None, :], _normalized(weights), 0)


def _scale_and_translate(x, shape, spatial_dims, scale, translation, kernel, antialias,
                         precision, edge_padding, radius):
    letters = string.ascii_letters
    for i, d in enumerate(spatial_dims):
        w = weight_matrix(x.shape[d], shape[d], scale[i], translation[i], kernel, antialias,
                          edge_padding, radius).astype(x.dtype)
        ins = letters[:x.ndim]
        out = ins[:d] + letters[x.ndim] + ins[d + 1:]
        x = fnp.einsum(f"{ins},{ins[d]}{letters[x.ndim]}->{out}", x, w, precision=precision)
    return x


def _method(method):
    if isinstance(method, ResizeMethod):
        return method
    if isinstance(method, str):
        return ResizeMethod.from_string(method)
    raise errors.FuncgradTypeError(f"resize: method must be a string or a ResizeMethod, got "
                                   f"{errors.short_repr(method)}\n{errors.where()}")


def _check_shape(name, image, shape):
    shape = tuple(int(s) for s in shape)
    if len(shape) != fnp.ndim(image):
        raise errors.FuncgradValueError(
            f"{name}: shape must have length equal to the number of dimensions of x; "
            f"{shape} vs {fnp.shape(image)}\n{errors.where(errors.user_frame(3))}")
    return shape


def _inexact(x):
    x = fnp.asarray(x)
    return x if dtypes.kind(x.dtype) in "fc" else x.astype(fnp.result_type(x.dtype, 1.0))


def scale_and_translate(image, shape, spatial_dims, scale, translation, method,
                        antialias=True, precision=Precision.HIGHEST):
    """Resample `image` into an array of `shape`: along each axis in `spatial_dims`, output
    position `y` samples the input at `(y - translation) / scale` (pixel centres at half
    integers), weighted by the `method`'s kernel, as JAX's `scale_and_translate`.

    Args:
        image: an array.
        shape: the output shape (the other axes keep their sizes).
        spatial_dims: the axes resampled.
        scale, translation: one value per spatial axis (arrays; differentiable).
        method: a `ResizeMethod` or its name, except nearest.
        antialias: widen the kernel when shrinking (no aliasing), as JAX.
        precision: the precision of the contractions (JAX's default HIGHEST).

    Returns:
        The resampled image (a floating dtype).

    Example:
        >>> scale_and_translate(fnp.arange(4.0), (4,), (0,), fnp.array([1.0]),
        ...                     fnp.array([1.0]), "linear")
        Array([0., 0., 1., 2.], dtype=float32)
    """
    shape = _check_shape("scale_and_translate", image, shape)
    method = _method(method)
    if method is ResizeMethod.NEAREST:
        raise errors.FuncgradValueError("scale_and_translate: Nearest neighbor resampling is "
                                        f"not currently supported\n{errors.where()}")
    if method is ResizeMethod.CUBIC_PYTORCH and antialias:
        method = ResizeMethod.CUBIC
    radius, kernel = _KERNELS[method]
    image = _inexact(image)
    scale, translation = fnp.asarray(scale), fnp.asarray(translation)
    dtype = fnp.result_type(scale, translation, 1.0)
    scale, translation = scale.astype(dtype), translation.astype(dtype)
    spatial_dims = [d % image.ndim for d in spatial_dims]
    return _scale_and_translate(image, shape, spatial_dims, scale, translation, kernel,
                                antialias, precision, method is ResizeMethod.CUBIC_PYTORCH,
                                radius)


def _resize_nearest(x, shape):
    for d in range(x.ndim):
        m, n = x.shape[d], shape[d]
        if m == n:
            continue
        offsets = np.floor((np.arange(n, dtype=np.float32) + 0.5) * np.float32(m)
                           / np.float32(n)).astype(np.int32)
        x = fnp.take(x, offsets, axis=d)
    return x


def resize(image, shape, method, antialias=True, precision=Precision.HIGHEST):
    """Resize `image` to `shape` (every axis may change; batch and channel axes keep their
    size), as JAX's `jax.image.resize`.

    Args:
        image: an array.
        shape: the output shape, one size per axis of `image`.
        method: "nearest", "linear" ("bilinear", "trilinear"), "cubic" ("bicubic",
            "tricubic"), "lanczos3", "lanczos5", "cubic-pytorch" or "area", or a
            `ResizeMethod`.
        antialias: when shrinking, widen the kernel so every input pixel contributes
            (no aliasing); no effect when growing.
        precision: the precision of the contractions.

    Returns:
        The resized image: the input's dtype for nearest, a floating dtype otherwise.

    Example:
        >>> resize(fnp.array([0.0, 1.0]), (4,), "linear")
        Array([0.  , 0.25, 0.75, 1.  ], dtype=float32)
    """
    shape = _check_shape("resize", image, shape)
    method = _method(method)
    if method is ResizeMethod.NEAREST:
        return _resize_nearest(fnp.asarray(image), shape)
    image = _inexact(image)
    spatial_dims = [d for d in range(image.ndim) if image.shape[d] != shape[d]]
    if method is ResizeMethod.CUBIC_PYTORCH and antialias:
        method = ResizeMethod.CUBIC
    radius, kernel = _KERNELS[method]
    scale = [1.0 if shape[d] == 0 else shape[d] / image.shape[d] for d in spatial_dims]
    return _scale_and_translate(image, shape, spatial_dims, scale, [0.] * len(spatial_dims),
                                kernel, antialias, precision,
                                method is ResizeMethod.CUBIC_PYTORCH, radius)
