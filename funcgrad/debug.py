"""Debugging inside transformed code: `debug.print` and `debug.callback`.

Both are primitives with a side effect (`effectful = True`, so dead-code elimination keeps
them): they run eagerly, are recorded by `jit`/`grad` traces and run again, with the
values, whenever the compiled program runs. Derivative programs drop them (the forward pass
already printed). Each has one dummy `bool[]` output so that every equation has an output.
Pytree arguments are flattened; array leaves are traced, other leaves (strings, Python
numbers) are kept as static values. This module imports funcgrad.core and interpreters.
"""

import builtins

import numpy as np

from funcgrad.core import Array, ArrayBase, Primitive, ShapedArray
from funcgrad.interpreters import ad, batching
from funcgrad.tree_util import tree_flatten

__all__ = ["callback", "debug_callback_p", "debug_print_p", "print"]


def _split(args, kwargs):
    """Array leaves (traced) and the static rest: (dynamic leaves, params)."""
    leaves, tree = tree_flatten((args, kwargs))
    dynamic = [x for x in leaves if isinstance(x, (ArrayBase, np.ndarray))]
    static = tuple((i, _hashable(x)) for i, x in enumerate(leaves)
                   if not isinstance(x, (ArrayBase, np.ndarray)))
    return dynamic, {"_tree": tree, "_static": static}


def _hashable(x):
    try:
        hash(x)
        return x
    except TypeError:
        return repr(x)


def _rebuild(values, _tree, _static):
    """(args, kwargs) from the dynamic values and the static leaves."""
    static = dict(_static)
    it = iter(values)
    leaves = [static[i] if i in static else next(it) for i in range(_tree.num_leaves)]
    return _tree.unflatten(leaves)


def _effect_primitive(name, run):
    """A primitive that calls `run(*values, **params)` for its side effect."""
    p = Primitive(name)
    p.effectful = True

    def impl(*vals, **params):
        run(*vals, **params)
        return np.zeros((), np.bool_)
    p.def_impl(impl)
    p.def_abstract_eval(lambda *avals, **params: ShapedArray((), np.dtype(np.bool_)))
    ad.defjvp_zero(p)
    batching.batch_rules[p] = lambda args, dims, **params: (p.bind(*args, **params), None)
    return p


# --- print ------------------------------------------------------------------------------------
def print(fmt, *args, **kwargs):
    """Print `fmt.format(*args, **kwargs)` with the values of `args`, also inside `jit`.

    Unlike Python's `print` inside a jitted function (which runs once, at trace time, and
    shows tracers), this prints the values every time the function runs.

    Example:
        >>> jit(lambda x: debug.print("x = {}", x) or x * 2)(fnp.arange(3.0))
        x = [0. 1. 2.]
    """
    dynamic, params = _split(args, kwargs)
    debug_print_p.bind(*dynamic, fmt=fmt, **params)


def _print_run(*vals, fmt, _tree, _static):
    args, kwargs = _rebuild(vals, _tree, _static)
    builtins.print(fmt.format(*args, **kwargs))


debug_print_p = _effect_primitive("debug_print", _print_run)


# --- callback ---------------------------------------------------------------------------------
def callback(fun, *args, **kwargs):
    """Call `fun(*args, **kwargs)` for its side effect with concrete Arrays, also inside `jit`.

    `fun`'s return value is ignored.

    Example:
        >>> seen = []
        >>> jit(lambda x: debug.callback(seen.append, x) or x)(fnp.ones(2)); seen
        [Array([1., 1.], dtype=float32)]
    """
    dynamic, params = _split(args, kwargs)
    debug_callback_p.bind(*dynamic, callback=fun, **params)


def _callback_run(*vals, callback, _tree, _static):
    args, kwargs = _rebuild([Array(v) for v in vals], _tree, _static)
    callback(*args, **kwargs)


debug_callback_p = _effect_primitive("debug_callback", _callback_run)
