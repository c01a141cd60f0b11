"""`stax`: JAX's minimal neural-network library, on funcgrad (`jax.example_libraries.stax`).

A layer is a pair `(init_fun, apply_fun)`: `init_fun(rng, input_shape) -> (output_shape,
params)` and `apply_fun(params, inputs, **kwargs) -> outputs`; combinators (`serial`,
`parallel`, `FanOut`, ...) build layers from layers. Initializers are funcgrad.nn's, the
activations funcgrad.nn's functions; convolutions and pooling are lax's.

    >>> init_fun, apply_fun = serial(Dense(4), Relu, Dense(2), LogSoftmax)
    >>> out_shape, params = init_fun(random.PRNGKey(0), (-1, 3))
    >>> out_shape
    (-1, 2)
"""

import functools
import math

import funcgrad.numpy as fnp
from funcgrad import errors, lax, nn, random
from funcgrad.nn.initializers import glorot_normal, normal, ones, zeros

__all__ = [
    "AvgPool", "BatchNorm", "Conv", "Conv1DTranspose", "ConvTranspose", "Dense", "Dropout",
    "Elu", "Exp", "FanInConcat", "FanInSum", "FanOut", "Flatten", "Gelu", "GeneralConv",
    "GeneralConvTranspose", "Identity", "LeakyRelu", "LogSoftmax", "MaxPool", "Relu", "Selu",
    "Sigmoid", "Softmax", "Softplus", "SumPool", "Tanh", "elementwise", "parallel", "serial",
    "shape_dependent", "standardize",
]


def Dense(out_dim, W_init=glorot_normal(), b_init=normal()):
    """A fully connected layer: `inputs @ W + b`."""
    def init_fun(rng, input_shape):
        k1, k2 = random.split(rng)
        w, b = W_init(k1, (input_shape[-1], out_dim)), b_init(k2, (out_dim,))
        return input_shape[:-1] + (out_dim,), (w, b)

    def apply_fun(params, inputs, **kwargs):
        w, b = params
        return fnp.dot(inputs, w) + b
    return init_fun, apply_fun


def _conv_layer(shape_tuple, conv, dimension_numbers, out_chan, filter_shape, strides,
                padding, W_init, b_init):
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    strides = strides or (1,) * len(filter_shape)
    W_init = W_init or glorot_normal(rhs_spec.index("I"), rhs_spec.index("O"))

    def init_fun(rng, input_shape):
        it = iter(filter_shape)
        kernel_shape = [out_chan if c == "O" else input_shape[lhs_spec.index("C")] if c == "I"
                        else next(it) for c in rhs_spec]
        out_shape = shape_tuple(input_shape, kernel_shape, strides, padding, dimension_numbers)
        bias_shape = [out_chan if c == "C" else 1 for c in out_spec]
        k1, k2 = random.split(rng)
        return out_shape, (W_init(k1, kernel_shape), b_init(k2, bias_shape))

    def apply_fun(params, inputs, **kwargs):
        w, b = params
        return conv(inputs, w, strides, padding, dimension_numbers) + b
    return init_fun, apply_fun


def GeneralConv(dimension_numbers, out_chan, filter_shape, strides=None, padding="VALID",
                W_init=None, b_init=normal(1e-6)):
    """A convolution with the layouts `dimension_numbers = (lhs_spec, rhs_spec, out_spec)`."""
    one = (1,) * len(filter_shape)
    conv = lambda x, w, strides, padding, dn: lax.conv_general_dilated(
        x, w, strides, padding, one, one, dimension_numbers=dn)
    return _conv_layer(lax.conv_general_shape_tuple, conv, dimension_numbers, out_chan,
                       filter_shape, strides, padding, W_init, b_init)


Conv = functools.partial(GeneralConv, ("NHWC", "HWIO", "NHWC"))


def GeneralConvTranspose(dimension_numbers, out_chan, filter_shape, strides=None,
                         padding="VALID", W_init=None, b_init=normal(1e-6)):
    """A transposed convolution (`lax.conv_transpose`) with the given layouts."""
    conv = lambda x, w, strides, padding, dn: lax.conv_transpose(
        x, w, strides, padding, dimension_numbers=dn)
    return _conv_layer(lax.conv_transpose_shape_tuple, conv, dimension_numbers, out_chan,
                       filter_shape, strides, padding, W_init, b_init)


Conv1DTranspose = functools.partial(GeneralConvTranspose, ("NHC", "HIO", "NHC"))
ConvTranspose = functools.partial(GeneralConvTranspose, ("NHWC", "HWIO", "NHWC"))


def standardize(x, axis=-1, mean=None, variance=None, epsilon=1e-5):
    """(x - mean) / sqrt(variance + epsilon), the statistics over `axis` unless given."""
    mean = fnp.mean(x, axis, keepdims=True) if mean is None else mean
    if variance is None:
        variance = fnp.mean(fnp.square(x), axis, keepdims=True) - fnp.square(mean)
    return (x - mean) * lax.rsqrt(variance + epsilon)


def BatchNorm(axis=(0, 1, 2), epsilon=1e-5, center=True, scale=True, beta_init=zeros,
              gamma_init=ones):
    """Batch normalization over `axis` with the batch's statistics (stax keeps no state)."""
    axis = (axis,) if isinstance(axis, int) else tuple(axis)

    def init_fun(rng, input_shape):
        shape = tuple(d for i, d in enumerate(input_shape) if i not in axis)
        k1, k2 = random.split(rng)
        beta = beta_init(k1, shape) if center else ()
        gamma = gamma_init(k2, shape) if scale else ()
        return input_shape, (beta, gamma)

    def apply_fun(params, x, **kwargs):
        beta, gamma = params
        ed = tuple(None if i in axis else slice(None) for i in range(x.ndim))
        z = standardize(x, axis, epsilon=epsilon)
        if center:
            z = z * gamma[ed] if scale else z
            return z + beta[ed]
        return z * gamma[ed] if scale else z
    return init_fun, apply_fun


def elementwise(fun, **fun_kwargs):
    """A parameterless layer applying `fun(inputs, **fun_kwargs)`."""
    def init_fun(rng, input_shape):
        return input_shape, ()

    def apply_fun(params, inputs, **kwargs):
        return fun(inputs, **fun_kwargs)
    return init_fun, apply_fun


Tanh = elementwise(fnp.tanh)
Relu = elementwise(nn.relu)
Exp = elementwise(fnp.exp)
LogSoftmax = elementwise(nn.log_softmax, axis=-1)
Softmax = elementwise(nn.softmax, axis=-1)
Softplus = elementwise(nn.softplus)
Sigmoid = elementwise(nn.sigmoid)
Elu = elementwise(nn.elu)
LeakyRelu = elementwise(nn.leaky_relu)
Selu = elementwise(nn.selu)
Gelu = elementwise(nn.gelu)


def _pooling_layer(reducer, init_val, rescaler=None):
    def PoolingLayer(window_shape, strides=None, padding="VALID", spec=None):
        strides = strides or (1,) * len(window_shape)
        rescale = rescaler(window_shape, strides, padding) if rescaler else None
        non_spatial = (0, len(window_shape) + 1) if spec is None else (
            spec.index("N"), spec.index("C"))
        window, strides_full = tuple(window_shape), tuple(strides)
        for i in sorted(non_spatial):
            window = window[:i] + (1,) + window[i:]
            strides_full = strides_full[:i] + (1,) + strides_full[i:]

        def init_fun(rng, input_shape):
            pads = lax.padtype_to_pads(input_shape, window, strides_full, padding)
            return lax.reduce_window_shape_tuple(input_shape, window, strides_full, pads), ()

        def apply_fun(params, inputs, **kwargs):
            out = lax.reduce_window(inputs, init_val, reducer, window, strides_full, padding)
            return rescale(out, inputs, spec) if rescale else out
        return init_fun, apply_fun
    return PoolingLayer


def _normalize_by_window_size(dims, strides, padding):
    def rescale(outputs, inputs, spec):
        non_spatial = (0, inputs.ndim - 1) if spec is None else (spec.index("N"),
                                                                 spec.index("C"))
        spatial = tuple(inputs.shape[i] for i in range(inputs.ndim) if i not in non_spatial)
        sizes = lax.reduce_window(fnp.ones(spatial, inputs.dtype), 0.0, lax.add, dims, strides,
                                  padding)
        for i in sorted(non_spatial):
            sizes = fnp.expand_dims(sizes, i)
        return outputs / sizes
    return rescale


MaxPool = _pooling_layer(lax.max, -math.inf)
SumPool = _pooling_layer(lax.add, 0.0)
AvgPool = _pooling_layer(lax.add, 0.0, _normalize_by_window_size)


def _flatten_init(rng, input_shape):
    return (input_shape[0], math.prod(input_shape[1:])), ()


Flatten = (_flatten_init, lambda params, inputs, **kwargs: fnp.reshape(inputs,
                                                                        (inputs.shape[0], -1)))
Identity = (lambda rng, input_shape: (input_shape, ()), lambda params, inputs, **kwargs: inputs)


def FanOut(num):
    """A layer copying its input `num` times (into a list)."""
    return (lambda rng, input_shape: ([input_shape] * num, ()),
            lambda params, inputs, **kwargs: [inputs] * num)


FanInSum = (lambda rng, input_shape: (input_shape[0], ()),
            lambda params, inputs, **kwargs: functools.reduce(fnp.add, inputs))


def FanInConcat(axis=-1):
    """A layer concatenating its list of inputs along `axis`."""
    def init_fun(rng, input_shape):
        ax = axis % len(input_shape[0])
        size = sum(shape[ax] for shape in input_shape)
        return input_shape[0][:ax] + (size,) + input_shape[0][ax + 1:], ()

    def apply_fun(params, inputs, **kwargs):
        return fnp.concatenate(inputs, axis)
    return init_fun, apply_fun


def Dropout(rate, mode="train"):
    """Dropout where `rate` is the probability to *keep* a unit (JAX stax's convention); needs
    `rng=` when `mode == 'train'`, is the identity otherwise."""
    def init_fun(rng, input_shape):
        return input_shape, ()

    def apply_fun(params, inputs, **kwargs):
        rng = kwargs.get("rng")
        if mode != "train":
            return inputs
        if rng is None:
            raise errors.FuncgradValueError(
                "stax.Dropout: apply_fun needs a PRNG key as rng=... in train mode, e.g. "
                f"apply_fun(params, inputs, rng=random.PRNGKey(0))\n{errors.where()}")
        keep = random.bernoulli(rng, rate, inputs.shape)
        return fnp.where(keep, inputs / rate, 0)
    return init_fun, apply_fun


def serial(*layers):
    """The layers applied one after another (keys for `rng=` are split per layer)."""
    init_funs, apply_funs = zip(*layers) if layers else ((), ())

    def init_fun(rng, input_shape):
        params = []
        for init in init_funs:
            rng, layer_rng = random.split(rng)
            input_shape, param = init(layer_rng, input_shape)
            params.append(param)
        return input_shape, params

    def apply_fun(params, inputs, **kwargs):
        rng = kwargs.pop("rng", None)
        rngs = random.split(rng, len(layers)) if rng is not None else (None,) * len(layers)
        for fun, param, r in zip(apply_funs, params, rngs):
            inputs = fun(param, inputs, rng=r, **kwargs)
        return inputs
    return init_fun, apply_fun


def parallel(*layers):
    """Each layer applied to its own element of a list of inputs."""
    init_funs, apply_funs = zip(*layers) if layers else ((), ())

    def init_fun(rng, input_shape):
        rngs = random.split(rng, len(layers))
        return tuple(zip(*[init(r, s) for init, r, s in zip(init_funs, rngs, input_shape)]))

    def apply_fun(params, inputs, **kwargs):
        rng = kwargs.pop("rng", None)
        rngs = random.split(rng, len(layers)) if rng is not None else (None,) * len(layers)
        return [f(p, x, rng=r, **kwargs) for f, p, x, r in zip(apply_funs, params, inputs, rngs)]
    return init_fun, apply_fun


def shape_dependent(make_layer):
    """A layer built from the input shape by `make_layer(shape) -> (init_fun, apply_fun)`."""
    def init_fun(rng, input_shape):
        return make_layer(input_shape)[0](rng, input_shape)

    def apply_fun(params, inputs, **kwargs):
        return make_layer(inputs.shape)[1](params, inputs, **kwargs)
    return init_fun, apply_fun
