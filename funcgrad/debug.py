"""Debugging inside transformed code: `debug.print` and `debug.callback` (and the pictures of
shardings, `visualize_array_sharding`/`visualize_sharding`, from `funcgrad.sharding`).

Both are primitives with a side effect (`effectful = True`, so dead-code elimination keeps
them): they run eagerly, are recorded by `jit`/`grad` traces and run again, with the
values, whenever the compiled program runs. Derivative programs drop them (the forward pass
already printed). Each has one dummy `bool[]` output so that every equation has an output.
Pytree arguments are flattened; array leaves are traced, other leaves (strings, Python
numbers) are kept as static values. An exception raised by a callback (or by formatting a
value) is the user's: it propagates as itself, marked with `errors.mark_user_error` and a note
naming the callback and its line. `print` checks its format when it is called: only plain
positional or keyword fields (no attribute access or indexing), with specs that format the
values' dtypes. This module imports funcgrad.errors, core, interpreters and tree_util.
"""

import builtins
import string

import numpy as np

from funcgrad import errors
from funcgrad.core import Array, ArrayBase, Primitive, ShapedArray
from funcgrad.interpreters import ad, batching
from funcgrad.tree_util import tree_flatten

__all__ = ["callback", "debug_callback_p", "debug_print_p", "inspect_array_sharding", "print",
           "visualize_array_sharding", "visualize_sharding"]


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
    """A primitive that calls `run(*values, **params)` for its side effect.

    Under `vmap` it runs once per example, as in JAX: the batching rule records the operands'
    batch axes in `_batched` (one tuple of axes per vmap, innermost first), and the impl calls
    `run` on each example's slices at run time (so the traced program stays one equation
    whatever the batch size, also under jit)."""
    p = Primitive(name)
    p.effectful = True
    p.widens_narrow = False  # the user's function sees bfloat16 values as bfloat16

    def impl(*vals, _batched=(), **params):
        _per_example(run, vals, _batched, params)
        return np.zeros((), np.bool_)
    p.def_impl(impl)
    p.def_abstract_eval(lambda *avals, **params: ShapedArray((), np.dtype(np.bool_)))
    ad.defjvp_zero(p)

    def batch_rule(args, dims, _batched=(), **params):
        return p.bind(*args, _batched=_batched + (tuple(dims),), **params), batching.not_mapped
    batching.batch_rules[p] = batch_rule
    return p


def _per_example(run, vals, levels, params):
    """`run` on every example of the outermost vmap level in `levels`, in order, each with
    the values of that example (unbatched operands as they are), and so on inwards."""
    if not levels:
        run(*vals, **params)
        return
    dims = levels[-1]
    size = next(v.shape[d] for v, d in zip(vals, dims) if d is not None)
    for i in range(size):
        example = [v if d is None else v[(slice(None),) * d + (i,)] for v, d in zip(vals, dims)]
        _per_example(run, example, levels[:-1], params)


def _run_user_code(what, where, fn, *args, **kwargs):
    """`fn(*args, **kwargs)`; an exception it raises propagates as itself, marked as the
    user's (funcgrad reports no bug for it) with a note naming `what` and its line."""
    try:
        fn(*args, **kwargs)
    except Exception as e:
        errors.mark_user_error(e, f"raised in {what}, called at {errors.format_frame(where)}")
        raise


# --- print ------------------------------------------------------------------------------------
class _Formatter(string.Formatter):
    """`str.format` restricted to what debug.print needs: fields name a positional or keyword
    argument (no `.attr` or `[key]`, which would walk objects); an array with a format spec is
    formatted element by element."""

    def get_field(self, field_name, args, kwargs):
        if not (field_name.isdigit() or field_name.isidentifier()):
            raise ValueError(f"field {{{field_name}}} uses attribute access or indexing; "
                             "only {}, {0} or {name} fields are allowed")
        key = int(field_name) if field_name.isdigit() else field_name
        return self.get_value(key, args, kwargs), key

    def format_field(self, value, format_spec):
        if format_spec and isinstance(value, np.ndarray) and value.ndim:
            return np.array2string(value, separator=" ", formatter={
                "all": lambda v: format(v, format_spec)})
        return format(value, format_spec)

    def check_unused_args(self, used_args, args, kwargs):
        unused = [i for i in range(len(args)) if i not in used_args]
        unused += [k for k in kwargs if k not in used_args]
        if unused:  # (as JAX: often an f-string passed as the format)
            raise ValueError(f"unused arguments {unused}; an f-string formats too early: "
                             "pass a plain format with {} fields")


_FORMATTER = _Formatter()


def _check_format(fmt, args, kwargs, where):
    """Format `fmt` once with stand-ins of the arguments' shapes and dtypes (trace time)."""
    if not isinstance(fmt, str):
        raise errors.op_error("debug.print", f"the format must be a string, got "
                              f"{type(fmt).__name__} {errors.short_repr(fmt)}")

    def stand_in(x):
        if not isinstance(x, (ArrayBase, np.ndarray)):
            return x
        return np.zeros((1,) * len(x.shape), x.dtype) if x.shape else np.zeros((), x.dtype)
    from funcgrad.tree_util import tree_map
    args, kwargs = tree_map(stand_in, (args, kwargs))
    try:
        _FORMATTER.vformat(fmt, args, kwargs)
    except (ValueError, IndexError, KeyError, TypeError, AttributeError) as e:
        cls = errors.FuncgradTypeError if isinstance(e, TypeError) else errors.FuncgradValueError
        raise cls(f"debug.print: cannot format {errors.short_repr(fmt)} with "
                  f"{len(args)} positional and {sorted(kwargs) or 'no'} keyword arguments "
                  f"({type(e).__name__}: {e})\n{errors.where(where)}\n"
                  "  hint: use {} / {0} / {name} fields with str.format specs such as "
                  "{:.3f}; pass every value the format names") from None


def print(fmt=None, *args, ordered=False, partitioned=False, skip_format_check=False,
          **kwargs):
    """Print `fmt.format(*args, **kwargs)` with the values of `args`, also inside `jit`.

    Unlike Python's `print` inside a jitted function (which runs once, at trace time, and
    shows tracers), this prints the values every time the function runs; under `vmap`, once
    per example with that example's values (as JAX). As in JAX, the options may come first:
    `debug.print(ordered=True)("x = {}", x)`. funcgrad runs every effect in program order, so
    `ordered` holds always; `partitioned` (print local shards) has no effect on one process.
    `skip_format_check` leaves the format unchecked until it runs (a format without fields
    then prints the values after it).

    Example:
        >>> jit(lambda x: debug.print("x = {}", x) or x * 2)(fnp.arange(3.0))
        x = [0. 1. 2.]
    """
    def _print(fmt, *args, **kwargs):
        where = errors.user_frame(3)
        if not skip_format_check:
            _check_format(fmt, args, kwargs, where)
        dynamic, params = _split(args, kwargs)
        debug_print_p.bind(*dynamic, fmt=fmt, _where=where, **params)
    return _two_call_form("debug.print", "format must be a string", _print, fmt, args, kwargs)


def _two_call_form(name, first_is, run, first, args, kwargs):
    """JAX's two call forms: `name(first, *args, **kwargs)` runs now; `name(**options)` (no
    `first`, no arguments) returns the function that takes `first, *args, **kwargs`."""
    if first is not None:
        run(first, *args, **kwargs)
        return None
    if args or kwargs:
        raise errors.op_error(name, f"the {first_is}, got None", cls=errors.FuncgradTypeError,
                              hint=f"options alone ({name}(ordered=True)) return the function "
                              "that takes the arguments")
    return run


def _print_run(*vals, fmt, _tree, _static, _where=None):
    args, kwargs = _rebuild(vals, _tree, _static)
    if not any(field is not None for _, field, _, _ in string.Formatter().parse(fmt)):
        text = " ".join([fmt, *map(str, args)])  # (JAX's, for an unchecked format)
    else:
        text = None
    _run_user_code("debug.print", _where, lambda: builtins.print(
        _FORMATTER.vformat(fmt, args, kwargs) if text is None else text))


debug_print_p = _effect_primitive("debug_print", _print_run)


# --- callback ---------------------------------------------------------------------------------
def callback(callback=None, *args, ordered=False, partitioned=False, **kwargs):
    """Call `callback(*args, **kwargs)` for its side effect with concrete Arrays, also inside
    `jit`; under `vmap`, once per example with that example's values (as JAX). The return
    value is ignored. As in JAX, the options may come first:
    `debug.callback(ordered=True)(fn, x)`; funcgrad runs every effect in program order, so
    `ordered` holds always, and `partitioned` has no effect on one process.

    Example:
        >>> seen = []
        >>> jit(lambda x: debug.callback(seen.append, x) or x)(fnp.ones(2)); seen
        [Array([1., 1.], dtype=float32)]
    """
    def _callback(fun, *args, **kwargs):
        where = errors.user_frame(3)
        if not callable(fun):
            raise errors.op_error("debug.callback", f"the callback must be callable, got "
                                  f"{type(fun).__name__} {errors.short_repr(fun)}")
        dynamic, params = _split(args, kwargs)
        debug_callback_p.bind(*dynamic, callback=fun, _where=where, **params)
    return _two_call_form("debug.callback", "callback must be callable", _callback, callback,
                          args, kwargs)


def _callback_run(*vals, callback, _tree, _static, _where=None):
    # copies: under jit a value's buffer is reused once the program is done with it, and
    # the callback may keep what it gets
    args, kwargs = _rebuild([Array(v.copy()) for v in vals], _tree, _static)
    name = getattr(callback, "__qualname__", type(callback).__name__)
    _run_user_code(f"the debug.callback {name}", _where, callback, *args, **kwargs)


debug_callback_p = _effect_primitive("debug_callback", _callback_run)


# --- pictures of shardings (funcgrad.sharding.visualize) ---------------------------------------

def visualize_array_sharding(arr, **kwargs):
    """Print which device holds which block of the concrete array `arr` (text).

    Example:
        >>> fg.debug.visualize_array_sharding(fnp.ones(4))
        ┌───────────┐
        │   CPU 0   │
        └───────────┘
    """
    from funcgrad.sharding import visualize
    visualize.visualize_array_sharding(arr, **kwargs)


def visualize_sharding(shape, sharding, *, use_color=True, scale=1.0, min_width=9, max_width=80,
                       color_map=None):
    """Print which device holds which block of an array of `shape` laid out as `sharding`."""
    from funcgrad.sharding import visualize
    visualize.visualize_sharding(shape, sharding, use_color=use_color, scale=scale,
                                 min_width=min_width, max_width=max_width, color_map=color_map)


def inspect_array_sharding(value, *, callback):
    """Call `callback(sharding)` for each array of pytree `value` (None for traced ones)."""
    from funcgrad.sharding import visualize
    visualize.inspect_array_sharding(value, callback=callback)


from funcgrad.debugger import breakpoint, log  # noqa: E402  (they build on the primitives above)

__all__ += ["breakpoint", "log"]
