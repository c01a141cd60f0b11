"""The layer protocol (`Module`), its error paths, and the containers that thread keys and state.

A layer holds hyper-parameters only; parameters and state are pytrees passed in and out:

    params, state = layer.init(key, sample_input)
    y, new_state = layer.apply(params, state, x, train=False, key=None)

Containers (`Sequential`, `Residual`) give child `i` the key `fold_in(key, i)` and thread the
children's states, so users never hand-thread either. Errors raised inside a child (a
`FuncgradError`) are annotated on the way out with the child's path in the model, e.g.
`Sequential[2] Linear: expected input with last dimension 64, got (8, 32)`. This module
imports only funcgrad's public array layer and `funcgrad.random`.
"""

import abc
import contextlib

import funcgrad.numpy as fnp
from funcgrad import dtypes, random
from funcgrad.errors import FuncgradError, FuncgradTypeError, FuncgradValueError, op_error
from funcgrad.nn import functions as F

__all__ = [
    "ELU", "GELU", "Activation", "Identity", "Lambda", "LeakyReLU", "LogSoftmax", "Module",
    "ReLU", "ReLU6", "Residual", "SiLU", "Sequential", "Sigmoid", "Softmax", "Softplus", "Tanh",
    "check_float", "child_key", "layer_error", "scope",
]


# --- errors that name the layer's path in the model -------------------------------------------
def _path_info(err):
    return err.__dict__.get("_fg_layer_path")


def layer_error(layer, message, cls=FuncgradValueError, hint=None):
    """A funcgrad error for bad input to `layer` ("Linear: expected ..."); containers prefix
    the layer's path in the model as the error passes through them.

    Args:
        layer: the `Module` (or a name) that rejects its input.
        message: what was expected and what was given (shapes, dtypes).
        cls: the error class (`FuncgradValueError` for shapes, `FuncgradTypeError` for dtypes).
        hint: an optional fix.

    Returns:
        The exception, ready to `raise`.

    Example:
        >>> raise layer_error(Linear(3), "expected input with last dimension 4, got (2, 5)")
        Traceback (most recent call last):
        FuncgradValueError: Linear: expected input with last dimension 4, got (2, 5) ...
    """
    name = layer if isinstance(layer, str) else layer.name
    err = op_error(name, message, cls=cls, hint=hint)
    err._fg_layer_path = {"leaf": name, "path": "", "message": err.args[0][len(name) + 2:]}
    return err


@contextlib.contextmanager
def scope(parent, segment, child):
    """Run a child of `parent` (reached by `segment`, e.g. "[2]" or ".inner"): funcgrad errors
    leaving the block get the child's path, as `Parent[2] Child: message`."""
    try:
        yield
    except FuncgradError as e:
        info = _path_info(e)
        if info is None:
            message = str(e.args[0]) if e.args else ""
            info = e._fg_layer_path = {"leaf": child.name, "path": "", "message": message}
        info["path"] = segment + info["path"]
        e.args = (f"{parent.name}{info['path']} {info['leaf']}: {info['message']}",
                  *e.args[1:])
        raise


def child_key(key, index):
    """The key of child `index`: `fold_in(key, index)`, or None when `key` is None.

    Example: ``child_key(None, 3)`` is ``None``.
    """
    return None if key is None else random.fold_in(key, index)


# --- the protocol -----------------------------------------------------------------------------
class Module(abc.ABC):
    """Base class of layers: hyper-parameters only, pure `init` and `apply`.

    Subclasses implement `init(key, *inputs) -> (params, state)` and
    `apply(params, state, *inputs, train=False, key=None) -> (output, new_state)`.
    `uses_key` tells containers whether the layer draws random numbers when applied
    (a container skips deriving keys for children that do not).
    """

    uses_key = True

    @property
    def name(self):
        return type(self).__name__

    @abc.abstractmethod
    def init(self, key, *inputs):
        """`(params, state)` for example `inputs`."""

    @abc.abstractmethod
    def apply(self, params, state, *inputs, train=False, key=None):
        """`(output, new_state)`: a pure function of its arguments."""

    def __repr__(self):
        fields = ", ".join(f"{k}={_field_repr(v)}" for k, v in vars(self).items()
                           if not k.startswith("_"))
        return f"{self.name}({fields})"


def _field_repr(v):
    if callable(v) and not isinstance(v, Module):
        return getattr(v, "__qualname__", repr(v))
    return repr(v)


def check_float(layer, x):
    """`x` as an array, or a `FuncgradTypeError` naming the layer when it is not floating."""
    x = fnp.asarray(x)
    if dtypes.kind(x.dtype) not in "fc":
        raise layer_error(layer, f"expected a floating-point input, got {x.dtype} with shape "
                          f"{tuple(x.shape)}", cls=FuncgradTypeError,
                          hint="convert it, e.g. x.astype(funcgrad.numpy.float32)")
    return x


def check_rank(layer, x, ranks, what):
    if x.ndim not in ranks:
        raise layer_error(layer, f"expected {what}, got shape {tuple(x.shape)}")


# --- stateless function layers ----------------------------------------------------------------
class Lambda(Module):
    """A parameter-free layer applying `fn(x)`.

    Example:
        >>> Lambda(lambda x: 2 * x).apply({}, {}, fnp.ones(2))[0].tolist()
        [2.0, 2.0]
    """

    uses_key = False

    def __init__(self, fn, name=None):
        self.fn = fn
        self._name = name or getattr(fn, "__name__", "Lambda")

    @property
    def name(self):
        return self._name

    def init(self, key, x):
        return {}, {}

    def apply(self, params, state, x, train=False, key=None):
        return self.fn(x), state


class Activation(Module):
    """Base of the parameter-free activation layers: applies `fn(x, **options)`."""

    uses_key = False
    fn = None
    defaults = {}

    def __init__(self, **options):
        unknown = set(options) - set(self.defaults)
        if unknown:
            raise TypeError(f"{self.name} got unexpected arguments {sorted(unknown)}; it "
                            f"accepts {sorted(self.defaults)}")
        self.options = {**self.defaults, **options}

    def init(self, key, x):
        return {}, {}

    def apply(self, params, state, x, train=False, key=None):
        return type(self).fn(x, **self.options), state

    def __repr__(self):
        return f"{self.name}({', '.join(f'{k}={v!r}' for k, v in self.options.items())})"


class ReLU(Activation):
    """`nn.relu` as a layer. Example: ``Sequential(Linear(8), ReLU())``."""
    fn = staticmethod(F.relu)


class ReLU6(Activation):
    """`nn.relu6` as a layer."""
    fn = staticmethod(F.relu6)


class GELU(Activation):
    """`nn.gelu` as a layer (`approximate=True` by default, as JAX)."""
    fn, defaults = staticmethod(F.gelu), {"approximate": True}


class Tanh(Activation):
    """`nn.tanh` as a layer."""
    fn = staticmethod(F.tanh)


class Sigmoid(Activation):
    """`nn.sigmoid` as a layer."""
    fn = staticmethod(F.sigmoid)


class SiLU(Activation):
    """`nn.silu` (swish) as a layer."""
    fn = staticmethod(F.silu)


class Softplus(Activation):
    """`nn.softplus` as a layer."""
    fn = staticmethod(F.softplus)


class ELU(Activation):
    """`nn.elu` as a layer (`alpha=1.0`)."""
    fn, defaults = staticmethod(F.elu), {"alpha": 1.0}


class LeakyReLU(Activation):
    """`nn.leaky_relu` as a layer (`negative_slope=0.01`)."""
    fn, defaults = staticmethod(F.leaky_relu), {"negative_slope": 1e-2}


class Softmax(Activation):
    """`nn.softmax` along `axis` (default -1) as a layer."""
    fn, defaults = staticmethod(F.softmax), {"axis": -1}


class LogSoftmax(Activation):
    """`nn.log_softmax` along `axis` (default -1) as a layer."""
    fn, defaults = staticmethod(F.log_softmax), {"axis": -1}


class Identity(Lambda):
    """The identity layer (no parameters)."""

    def __init__(self):
        super().__init__(lambda x: x, "Identity")

    def __repr__(self):
        return "Identity()"


# --- containers -------------------------------------------------------------------------------
def _check_len(container, what, tree, n):
    if not isinstance(tree, (list, tuple)) or len(tree) != n:
        got = f"{type(tree).__name__} of length {len(tree)}" if isinstance(
            tree, (list, tuple)) else type(tree).__name__
        raise layer_error(container, f"{what} must be a list with one entry per layer ({n}), "
                          f"got {got}", hint=f"use the {what} returned by init")


class Sequential(Module):
    """Layers applied in order; params and state are lists with one entry per layer.

    Child `i` gets the key `fold_in(key, i)` (in `init` and, when it draws random numbers,
    in `apply`), and its own state; the new states are collected.

    Example:
        >>> model = Sequential(Linear(16), ReLU(), Linear(3))
        >>> params, state = model.init(random.PRNGKey(0), fnp.ones((1, 4)))
        >>> model.apply(params, state, fnp.ones((8, 4)))[0].shape
        (8, 3)
    """

    def __init__(self, *layers):
        if len(layers) == 1 and isinstance(layers[0], (list, tuple)):
            layers = tuple(layers[0])
        for i, layer in enumerate(layers):
            if not isinstance(layer, Module):
                raise TypeError(f"Sequential: layer {i} is a {type(layer).__name__}, not a "
                                "funcgrad.nn.Module (wrap functions in nn.Lambda)")
        self.layers = tuple(layers)

    @property
    def uses_key(self):
        return any(layer.uses_key for layer in self.layers)

    def __len__(self):
        return len(self.layers)

    def __getitem__(self, i):
        return self.layers[i]

    def init(self, key, x):
        params, states = [], []
        for i, layer in enumerate(self.layers):
            with scope(self, f"[{i}]", layer):
                p, s = layer.init(child_key(key, i), x)
                if i + 1 < len(self.layers):
                    x, _ = layer.apply(p, s, x)
            params.append(p)
            states.append(s)
        return params, states

    def apply(self, params, state, x, train=False, key=None):
        _check_len(self, "params", params, len(self.layers))
        _check_len(self, "state", state, len(self.layers))
        new_states = []
        for i, (layer, p, s) in enumerate(zip(self.layers, params, state)):
            k = child_key(key, i) if layer.uses_key else None
            with scope(self, f"[{i}]", layer):
                x, s = layer.apply(p, s, x, train=train, key=k)
            new_states.append(s)
        return x, new_states

    def __repr__(self):
        inner = ",\n".join("  " + repr(layer).replace("\n", "\n  ") for layer in self.layers)
        return f"Sequential(\n{inner}\n)"


class Residual(Module):
    """`inner(x) + shortcut(x)` (shortcut: the identity when None).

    Params and state are dicts `{'inner': ..., 'shortcut': ...}` (no 'shortcut' entry for
    the identity); `inner` gets the key `fold_in(key, 0)`, `shortcut` `fold_in(key, 1)`.

    Example:
        >>> block = Residual(Sequential(Linear(4), ReLU()))
        >>> params, state = block.init(random.PRNGKey(0), fnp.ones((2, 4)))
        >>> block.apply(params, state, fnp.ones((2, 4)))[0].shape
        (2, 4)
    """

    def __init__(self, inner, shortcut=None):
        for what, layer in (("inner", inner), ("shortcut", shortcut)):
            if layer is not None and not isinstance(layer, Module):
                raise TypeError(f"Residual: {what} must be a funcgrad.nn.Module, got "
                                f"{type(layer).__name__}")
        self.inner = inner
        self.shortcut = shortcut

    @property
    def uses_key(self):
        return any(c.uses_key for c in self._children().values())

    def _children(self):
        c = {"inner": self.inner}
        if self.shortcut is not None:
            c["shortcut"] = self.shortcut
        return c

    def init(self, key, x):
        params, states = {}, {}
        for i, (name, child) in enumerate(self._children().items()):
            with scope(self, f".{name}", child):
                params[name], states[name] = child.init(child_key(key, i), x)
        return params, states

    def apply(self, params, state, x, train=False, key=None):
        outs, new_state = [], {}
        for i, (name, child) in enumerate(self._children().items()):
            if name not in params or name not in state:
                raise layer_error(self, f"params and state need an entry {name!r}; got keys "
                                  f"{sorted(params)} and {sorted(state)}")
            k = child_key(key, i) if child.uses_key else None
            with scope(self, f".{name}", child):
                y, new_state[name] = child.apply(params[name], state[name], x, train=train,
                                                 key=k)
            outs.append(y)
        y, skip = outs if len(outs) == 2 else (outs[0], x)
        if tuple(y.shape) != tuple(fnp.shape(skip)):
            raise layer_error(self, f"the inner branch gives shape {tuple(y.shape)} but the "
                              f"shortcut gives {tuple(fnp.shape(skip))}",
                              hint="pass a shortcut layer that maps the input to that shape")
        return y + skip, new_state
