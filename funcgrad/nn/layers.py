"""The standard layers: Linear, Conv2d, pooling, normalization, Dropout, Embedding, Flatten.

Each layer follows the `Module` protocol (see `funcgrad.nn`): hyper-parameters in the object,
`init(key, x) -> (params, state)`, `apply(params, state, x, train=False, key=None) ->
(y, new_state)`. Images are NCHW with OIHW kernels (an unbatched CHW image also works, e.g.
under `vmap`). Default weight init is JAX/Flax's: `lecun_normal` (truncated normal, variance
1/fan_in) for weights, zeros for biases. Imports `module`, `initializers`, `functions`.
"""

import numpy as np

import funcgrad.numpy as fnp
from funcgrad import dtypes, lax, random
from funcgrad.errors import FuncgradTypeError
from funcgrad.nn import initializers
from funcgrad.nn.module import Module, check_float, check_rank, layer_error

__all__ = [
    "AvgPool2d", "BatchNorm", "Conv2d", "Dropout", "Embedding", "Flatten", "LayerNorm",
    "Linear", "MaxPool2d",
]


def _pair(v, what):
    t = (v, v) if isinstance(v, (int, np.integer)) else tuple(v)
    if len(t) != 2 or not all(isinstance(i, (int, np.integer)) and i > 0 for i in t):
        raise ValueError(f"{what} must be a positive int or a pair of them, got {v!r}")
    return tuple(int(i) for i in t)


def _padding(padding):
    """'SAME'/'VALID', an int, a pair of ints, or a pair of (low, high) pairs."""
    if isinstance(padding, str):
        if padding.upper() not in ("SAME", "VALID"):
            raise ValueError(f"padding must be 'SAME', 'VALID' or ints, got {padding!r}")
        return padding.upper()
    if isinstance(padding, (int, np.integer)):
        return ((int(padding),) * 2,) * 2
    padding = tuple(padding)
    if len(padding) == 2 and all(isinstance(p, (int, np.integer)) for p in padding):
        return tuple((int(p), int(p)) for p in padding)
    return tuple(tuple(int(i) for i in p) for p in padding)


def _split_key(layer, key):
    if key is None:
        raise layer_error(layer, "init needs a PRNG key for its random parameters, got None",
                          hint="pass funcgrad.random.PRNGKey(seed)")
    return random.split(key)


def _batched(x):
    """An unbatched CHW image as a batch of one (and the function undoing it)."""
    if x.ndim == 3:
        return x[None], lambda y: y[0]
    return x, lambda y: y


class Linear(Module):
    """`y = x @ w + b` over the last axis; params `{'w': (in, out), 'b': (out,)}`.

    Args:
        out_features: the output size.
        use_bias: add a bias (default True).
        w_init: weight initializer (default `initializers.lecun_normal()`, JAX/Flax's choice).
        b_init: bias initializer (default `initializers.zeros`).

    Example:
        >>> layer = Linear(3)
        >>> params, state = layer.init(random.PRNGKey(0), fnp.ones((1, 4)))
        >>> params['w'].shape, layer.apply(params, state, fnp.ones((2, 4)))[0].shape
        ((4, 3), (2, 3))
    """

    uses_key = False

    def __init__(self, out_features, use_bias=True, w_init=None, b_init=None):
        self.out_features = int(out_features)
        self.use_bias = use_bias
        self.w_init = w_init or initializers.lecun_normal()
        self.b_init = b_init or initializers.zeros

    def _check(self, x, in_features=None):
        x = check_float(self, x)
        check_rank(self, x, range(1, 64), "an input with at least one dimension")
        if in_features is not None and x.shape[-1] != in_features:
            raise layer_error(self, f"expected input with last dimension {in_features}, got "
                              f"{tuple(x.shape)}")
        return x

    def init(self, key, x):
        x = self._check(x)
        kw, kb = _split_key(self, key)
        params = {"w": self.w_init(kw, (x.shape[-1], self.out_features), x.dtype)}
        if self.use_bias:
            params["b"] = self.b_init(kb, (self.out_features,), x.dtype)
        return params, {}

    def apply(self, params, state, x, train=False, key=None):
        x = self._check(x, params["w"].shape[0])
        y = fnp.matmul(x, params["w"])
        return (y + params["b"] if self.use_bias else y), state


class Conv2d(Module):
    """2-D convolution of NCHW images with an OIHW kernel (`lax.conv_general_dilated`).

    Args:
        out_channels: output channels O.
        kernel_size: int or (kh, kw).
        stride: int or pair.
        padding: 'SAME' (default), 'VALID', an int, a pair, or ((lo, hi), (lo, hi)).
        dilation: kernel (atrous) dilation, int or pair.
        groups: feature groups (in and out channels must be divisible by it).
        use_bias: add a per-channel bias.
        w_init: kernel initializer (default `lecun_normal(in_axis=1, out_axis=0)`, so the
            fan-in is (C / groups) * kh * kw); b_init: bias initializer (zeros).

    Params: `{'w': (O, C // groups, kh, kw), 'b': (O,)}`.

    Example:
        >>> conv = Conv2d(8, 3)
        >>> params, _ = conv.init(random.PRNGKey(0), fnp.ones((1, 3, 16, 16)))
        >>> conv.apply(params, {}, fnp.ones((2, 3, 16, 16)))[0].shape
        (2, 8, 16, 16)
    """

    uses_key = False

    def __init__(self, out_channels, kernel_size, stride=1, padding="SAME", dilation=1,
                 groups=1, use_bias=True, w_init=None, b_init=None):
        self.out_channels = int(out_channels)
        self.kernel_size = _pair(kernel_size, "kernel_size")
        self.stride = _pair(stride, "stride")
        self.padding = _padding(padding)
        self.dilation = _pair(dilation, "dilation")
        self.groups = int(groups)
        if self.out_channels % self.groups:
            raise ValueError(f"Conv2d: out_channels {out_channels} is not divisible by groups "
                             f"{groups}")
        self.use_bias = use_bias
        self.w_init = w_init or initializers.lecun_normal(in_axis=1, out_axis=0)
        self.b_init = b_init or initializers.zeros

    def _check(self, x, in_channels=None):
        x = check_float(self, x)
        check_rank(self, x, (3, 4), "an NCHW input (or an unbatched CHW image)")
        c = x.shape[-3]
        if in_channels is not None and c != in_channels:
            raise layer_error(self, f"expected input with {in_channels} channels (axis 1 of "
                              f"NCHW), got shape {tuple(x.shape)}")
        if c % self.groups:
            raise layer_error(self, f"input channels {c} (shape {tuple(x.shape)}) are not "
                              f"divisible by groups={self.groups}")
        return x

    def init(self, key, x):
        x = self._check(x)
        kw, kb = _split_key(self, key)
        shape = (self.out_channels, x.shape[-3] // self.groups, *self.kernel_size)
        params = {"w": self.w_init(kw, shape, x.dtype)}
        if self.use_bias:
            params["b"] = self.b_init(kb, (self.out_channels,), x.dtype)
        return params, {}

    def apply(self, params, state, x, train=False, key=None):
        w = params["w"]
        x, unbatch = _batched(self._check(x, w.shape[1] * self.groups))
        y = lax.conv_general_dilated(x, w.astype(x.dtype), self.stride, self.padding,
                                     rhs_dilation=self.dilation,
                                     feature_group_count=self.groups)
        if self.use_bias:
            y = y + params["b"].reshape(1, -1, 1, 1)
        return unbatch(y), state


class _Pool2d(Module):
    uses_key = False

    def __init__(self, window, stride=None, padding="VALID"):
        self.window = _pair(window, "window")
        self.stride = self.window if stride is None else _pair(stride, "stride")
        self.padding = _padding(padding)

    def init(self, key, x):
        check_rank(self, fnp.asarray(x), (3, 4), "an NCHW input (or an unbatched CHW image)")
        return {}, {}

    def _pool(self, reduce, x):
        x = check_float(self, x)
        check_rank(self, x, (3, 4), "an NCHW input (or an unbatched CHW image)")
        x, unbatch = _batched(x)
        pad = self.padding if isinstance(self.padding, str) else ((0, 0),) * 2 + self.padding
        return unbatch(reduce(x, (1, 1, *self.window), (1, 1, *self.stride), pad))


class MaxPool2d(_Pool2d):
    """Max pooling over (kh, kw) windows of NCHW images (`lax.reduce_window_max`).

    Args:
        window: int or (kh, kw).
        stride: int or pair (default: the window).
        padding: 'VALID' (default), 'SAME', an int or a pair (padding counts as -inf).

    Example:
        >>> MaxPool2d(2).apply({}, {}, fnp.ones((1, 3, 8, 8)))[0].shape
        (1, 3, 4, 4)
    """

    def apply(self, params, state, x, train=False, key=None):
        return self._pool(lax.reduce_window_max, x), state


class AvgPool2d(_Pool2d):
    """Average pooling over (kh, kw) windows of NCHW images: window sum / (kh * kw), so
    padded positions count as zeros (PyTorch's `count_include_pad=True`, Flax's default).

    Example:
        >>> AvgPool2d(2).apply({}, {}, fnp.ones((1, 3, 8, 8)))[0].shape
        (1, 3, 4, 4)
    """

    def apply(self, params, state, x, train=False, key=None):
        y = self._pool(lax.reduce_window_sum, x)
        return y / np.prod(self.window).astype(y.dtype), state


class Flatten(Module):
    """Flatten all axes from `start_axis` (default 1: keep the batch axis) on.

    Example:
        >>> Flatten().apply({}, {}, fnp.ones((2, 3, 4)))[0].shape
        (2, 12)
    """

    uses_key = False

    def __init__(self, start_axis=1):
        self.start_axis = int(start_axis)

    def init(self, key, x):
        return {}, {}

    def apply(self, params, state, x, train=False, key=None):
        x = fnp.asarray(x)
        if x.ndim < self.start_axis:
            raise layer_error(self, f"start_axis={self.start_axis} needs an input with at "
                              f"least {self.start_axis} dimensions, got {tuple(x.shape)}")
        return x.reshape(*x.shape[:self.start_axis], -1), state


class BatchNorm(Module):
    """Batch normalization over all axes except the channel `axis`.

    `train=True` normalizes with the batch statistics (biased variance) and returns the
    updated running averages `new = momentum * old + (1 - momentum) * batch` (Flax's
    convention: momentum=0.9 here is PyTorch's momentum=0.1); `train=False` uses the running
    averages and returns the state unchanged.

    Args:
        momentum: running-average decay.
        eps: added to the variance.
        axis: the channel axis (1 for NCHW images and (N, C) features; -1 for channels-last).
        use_scale, use_bias: learn `scale` (init 1) and `bias` (init 0).

    Params `{'scale': (C,), 'bias': (C,)}`; state `{'mean': (C,), 'var': (C,)}`.

    Example:
        >>> bn = BatchNorm()
        >>> params, state = bn.init(None, fnp.ones((4, 3)))
        >>> y, state = bn.apply(params, state, fnp.arange(12.).reshape(4, 3), train=True)
        >>> state['mean'].round(2).tolist()
        [0.45, 0.55, 0.65]
    """

    uses_key = False

    def __init__(self, momentum=0.9, eps=1e-5, axis=1, use_scale=True, use_bias=True):
        self.momentum = momentum
        self.eps = eps
        self.axis = axis
        self.use_scale = use_scale
        self.use_bias = use_bias

    def _check(self, x, channels=None):
        x = check_float(self, x)
        if not -x.ndim <= self.axis < x.ndim or x.ndim < 2:
            raise layer_error(self, f"channel axis {self.axis} needs an input with a batch "
                              f"axis and that axis, got shape {tuple(x.shape)}")
        if channels is not None and x.shape[self.axis] != channels:
            raise layer_error(self, f"expected {channels} channels on axis {self.axis}, got "
                              f"shape {tuple(x.shape)}")
        return x

    def init(self, key, x):
        x = self._check(x)
        c = x.shape[self.axis]
        params = {}
        if self.use_scale:
            params["scale"] = fnp.ones((c,), x.dtype)
        if self.use_bias:
            params["bias"] = fnp.zeros((c,), x.dtype)
        return params, {"mean": fnp.zeros((c,), x.dtype), "var": fnp.ones((c,), x.dtype)}

    def apply(self, params, state, x, train=False, key=None):
        x = self._check(x, state["mean"].shape[0])
        axis = self.axis % x.ndim
        axes = tuple(i for i in range(x.ndim) if i != axis)
        shape = [1] * x.ndim
        shape[axis] = x.shape[axis]
        if train:
            mean = fnp.mean(x, axis=axes)
            var = fnp.mean(fnp.square(x - mean.reshape(shape)), axis=axes)
            m = self.momentum
            new_state = {k: m * state[k] + (1 - m) * lax.stop_gradient(v)
                         for k, v in (("mean", mean), ("var", var))}
        else:
            mean, var, new_state = state["mean"], state["var"], state
        y = (x - mean.reshape(shape)) * lax.rsqrt(var.reshape(shape) + self.eps)
        if self.use_scale:
            y = y * params["scale"].reshape(shape)
        if self.use_bias:
            y = y + params["bias"].reshape(shape)
        return y, new_state


class LayerNorm(Module):
    """Layer normalization over the trailing `axis` (int or tuple of axes).

    Args:
        eps: added to the variance (1e-5, as PyTorch and Needle).
        axis: the normalized axes (default -1); params have their shape.
        use_scale, use_bias: learn `scale` (init 1) and `bias` (init 0).

    Example:
        >>> ln = LayerNorm()
        >>> params, _ = ln.init(None, fnp.ones((2, 4)))
        >>> ln.apply(params, {}, fnp.array([[1., 2., 3., 4.]]))[0].mean().round(4).tolist()
        0.0
    """

    uses_key = False

    def __init__(self, eps=1e-5, axis=-1, use_scale=True, use_bias=True):
        self.eps = eps
        self.axis = axis
        self.use_scale = use_scale
        self.use_bias = use_bias

    def _axes(self, x):
        axes = (self.axis,) if isinstance(self.axis, int) else tuple(self.axis)
        if not all(-x.ndim <= a < x.ndim for a in axes):
            raise layer_error(self, f"axis {self.axis} is out of range for an input of shape "
                              f"{tuple(x.shape)}")
        return tuple(sorted(a % x.ndim for a in axes))

    def init(self, key, x):
        x = check_float(self, x)
        shape = tuple(x.shape[a] for a in self._axes(x))
        params = {}
        if self.use_scale:
            params["scale"] = fnp.ones(shape, x.dtype)
        if self.use_bias:
            params["bias"] = fnp.zeros(shape, x.dtype)
        return params, {}

    def apply(self, params, state, x, train=False, key=None):
        x = check_float(self, x)
        axes = self._axes(x)
        got = tuple(x.shape[a] for a in axes)
        want = next(iter(params.values())).shape if params else got
        if tuple(want) != got:
            raise layer_error(self, f"expected input with normalized shape {tuple(want)} on "
                              f"axes {axes}, got shape {tuple(x.shape)}")
        shape = [x.shape[i] if i in axes else 1 for i in range(x.ndim)]
        mean = fnp.mean(x, axis=axes, keepdims=True)
        var = fnp.mean(fnp.square(x - mean), axis=axes, keepdims=True)
        y = (x - mean) * lax.rsqrt(var + self.eps)
        if self.use_scale:
            y = y * params["scale"].reshape(shape)
        if self.use_bias:
            y = y + params["bias"].reshape(shape)
        return y, state


class Dropout(Module):
    """Inverted dropout: in training, zero each element with probability `rate` and scale
    the rest by `1 / (1 - rate)`; the identity in evaluation (`train=False`).

    Training needs an explicit PRNG key (`apply(..., train=True, key=k)`; containers derive
    one per child); a missing key is an error naming the layer's path.

    Example:
        >>> drop = Dropout(0.5)
        >>> y, _ = drop.apply({}, {}, fnp.ones(1000), train=True, key=random.PRNGKey(0))
        >>> sorted(set(y.tolist()))
        [0.0, 2.0]
    """

    def __init__(self, rate):
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"Dropout: rate must be in [0, 1], got {rate}")
        self.rate = rate

    def init(self, key, x):
        return {}, {}

    def apply(self, params, state, x, train=False, key=None):
        x = fnp.asarray(x)
        if not train or self.rate == 0.0:
            return x, state
        if key is None:
            raise layer_error(self, "train=True needs a PRNG key, got key=None",
                              cls=FuncgradTypeError,
                              hint="pass key=funcgrad.random.PRNGKey(...) (a fresh one per "
                                   "step) to apply, or train=False for evaluation")
        if self.rate == 1.0:
            return fnp.zeros_like(x), state
        keep = 1.0 - self.rate
        mask = random.bernoulli(key, keep, x.shape)
        return fnp.where(mask, x / keep, fnp.zeros_like(x)), state


class Embedding(Module):
    """A lookup table: integer ids (any shape) -> vectors; params `{'embedding': (num, dim)}`.

    Args:
        num_embeddings: the vocabulary size.
        features: the vector size.
        embedding_init: default Flax's `variance_scaling(1.0, 'fan_in', 'normal',
            out_axis=0)` (standard deviation 1/sqrt(features)).

    `attend(params, x)` computes `x @ embedding.T`, the tied output projection (weight
    sharing: gradients from both uses add up in `params['embedding']`).

    Example:
        >>> emb = Embedding(10, 4)
        >>> params, _ = emb.init(random.PRNGKey(0), fnp.zeros((2,), int))
        >>> emb.apply(params, {}, fnp.array([[1, 2, 3]]))[0].shape
        (1, 3, 4)
    """

    uses_key = False

    def __init__(self, num_embeddings, features, embedding_init=None):
        self.num_embeddings = int(num_embeddings)
        self.features = int(features)
        self.embedding_init = embedding_init or initializers.variance_scaling(
            1.0, "fan_in", "normal", out_axis=0)

    def init(self, key, x=None):
        if key is None:
            raise layer_error(self, "init needs a PRNG key, got None")
        return {"embedding": self.embedding_init(key, (self.num_embeddings, self.features))}, {}

    def apply(self, params, state, x, train=False, key=None):
        x = fnp.asarray(x)
        if dtypes.kind(x.dtype) not in "iu":
            raise layer_error(self, f"expected integer ids, got {x.dtype} with shape "
                              f"{tuple(x.shape)}", cls=FuncgradTypeError,
                              hint="convert ids with x.astype(funcgrad.numpy.int32)")
        return fnp.take(params["embedding"], x, axis=0), state

    def attend(self, params, x):
        """Logits `x @ embedding.T` of shape (..., num_embeddings) for queries (..., dim)."""
        x = check_float(self, x)
        if x.shape[-1] != self.features:
            raise layer_error(self, f"attend expects queries with last dimension "
                              f"{self.features}, got {tuple(x.shape)}")
        return fnp.matmul(x, params["embedding"].T)
