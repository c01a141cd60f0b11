"""`jit`: trace a function once per input signature, compile it, cache it, call it fast.

A jitted function's cache is keyed on (pytree structure, shapes, dtypes, weak types, static
argument values, enable_x64); the backend is fixed per jitted function. Every call computes
its key once (`Jitted._key`) and takes one path (`Jitted._call`): a hit runs the cached
executable; a miss traces the function abstractly into a jaxpr whose closed-over arrays
become leading inputs (closure conversion), compiles it through `funcgrad.compiler.pipeline`
and runs it the same way. Under another trace (grad, vmap, an outer jit) the call is
recorded as one `jit` equation (`call.jit_p`) that the transforms keep compiled.
This module owns the user-facing API only; the cache (bounded by `config.jit_cache_size`),
donation and the counters live in `compiler/jit_cache.py`, the primitive in
`compiler/call.py`.
"""

import functools
import types
import warnings
from collections import namedtuple
from typing import Any, NamedTuple

import numpy as np

from funcgrad import backends, dtypes, errors
from funcgrad.abstract_eval import ShapeDtypeStruct
from funcgrad.compiler import call
from funcgrad.compiler.jit_args import (
    check_compiler_options,
    device_backend,
    donated_args,
    ints,
    signature_of,
    static_args,
    strs,
)
from funcgrad.compiler.jit_cache import (
    _KWARGS,
    _cache_for,
    _Entry,
    _key_diff,
    call_donating,
    check_donation,
    log,
    reraise,
    run,
    warn_unusable_donations,
    watchers,
)
from funcgrad.config import config
from funcgrad.core import (
    Array,
    ArrayBase,
    ShapedArray,
    Tracer,
    Var,
    current_trace,
    new_builder,
    placement,
    to_array,
)
from funcgrad.core.trace import _trace_ctx
from funcgrad.interpreters.partial_eval import closure_convert
from funcgrad.tree_util import (
    HashableNodes,
    PyTreeDef,
    SequenceKey,
    _flatten,
    keystr,
    tree_flatten,
    tree_flatten_with_path,
)

__all__ = ["CacheInfo", "Compiled", "Jitted", "Lowered", "RetraceWarning", "jit"]

_cfg = config._values
_trace_now = _trace_ctx.get  # `current_trace` without its Python call (the hot path's)
_FAST = True  # no option forces the slow path (disable_jit, debug_nans)
_X64 = False
_SCALARS = (bool, int, float, complex)


_CANONICAL = frozenset()  # numpy dtypes a plain ndarray argument may have on the hot path


def _on_config_change(name, value):
    global _FAST, _X64, _CANONICAL
    _FAST = not (_cfg["disable_jit"] or _cfg["debug_nans"] or _cfg["debug_infs"])
    _X64 = bool(_cfg["enable_x64"])
    _CANONICAL = frozenset(d for d in dtypes._SHORT if dtypes.canonicalize(d) == d)


config.on_change(_on_config_change)
_on_config_change(None, None)


class RetraceWarning(UserWarning):
    """A jitted function keeps being traced again (its cache keeps missing)."""


CacheInfo = namedtuple("CacheInfo", "hits misses traces size last_miss")


def jit(fun=None, static_argnums=None, static_argnames=None, donate_argnums=None, backend=None,
        *, in_shardings=None, out_shardings=None, donate_argnames=None, keep_unused=False,
        device=None, inline=False, compiler_options=None):
    """Compile `fun` on first call per input signature; later calls reuse the compiled code.

    Args:
        fun: a function of arrays (and pytrees of arrays) returning arrays.
        static_argnums: positions of arguments passed as Python values (hashable); each
            new value traces and compiles again. `static_argnames`: the same by name.
        donate_argnums: positions of arguments whose buffers the compiled code may reuse for
            its outputs. A donated Array cannot be used after the call (using it raises
            `DonatedArrayError`); a donated argument returned unchanged passes its buffer
            through; a donated buffer that is shared (a view, a NumPy array) is copied first.
            `donate_argnames`: the same by name (also for arguments passed by keyword).
        backend: "cpu" (default: fused kernels in C when a C compiler is found, see
            `config.native`, else numpy), "numpy" (always the numpy code generator) or
            "cuda" (needs CuPy and a GPU to run; `.lower(...).compile().as_text()` shows its
            CUDA source anywhere), or a backend added with
            `funcgrad.backends.register_backend`.
        in_shardings, out_shardings: how the arguments and results are laid out over
            devices (a `funcgrad.sharding` sharding, a `PartitionSpec` over the mesh of
            `set_mesh`, or a pytree prefix of them; None: as they come). Arguments are placed
            (a committed one laid out otherwise is an error, as in JAX), results placed.
        keep_unused: JAX may drop unused arguments from its compiled call unless True;
            funcgrad passes every argument, so both values behave the same.
        device: a `Device` (`fg.devices()`) to run on instead of `backend` (not both): its
            platform picks the backend, and array arguments and results are placed on it.
        inline: under another trace (an outer `jit`, `vmap`, `make_jaxpr`) record the
            function's operations in place instead of one `jit` equation, as in JAX.
        compiler_options: XLA's options (a dict with str keys); funcgrad's compilers take
            none, so they are checked for their type and otherwise have no effect.

    Returns:
        A `Jitted` function with `.lower(*args)`, `.trace_count` and `.cache_info()`. It
        keeps the traces of the `config.jit_cache_size` (64) most recently used signatures.

    Raises:
        FuncgradValueError: for an unknown backend or static/donated argument conflicts.

    Example:
        >>> f = jit(lambda x: fnp.sin(x) * 2)
        >>> f(fnp.zeros(3))
        Array([0., 0., 0.], dtype=float32)
        >>> print(f.lower(fnp.zeros(3)).as_text())
        { lambda ; a:f32[3]. let
            b:f32[3] = sin a
            c:f32[3] = mul b 2.0:f32[]
          in (c,) }
    """
    options = dict(static_argnums=static_argnums, static_argnames=static_argnames,
                   donate_argnums=donate_argnums, backend=backend,
                   donate_argnames=donate_argnames, keep_unused=keep_unused, device=device,
                   inline=inline, compiler_options=compiler_options)
    if fun is None:
        return functools.partial(jit, in_shardings=in_shardings, out_shardings=out_shardings,
                                 **options)
    jitted = Jitted(fun, **options)
    if in_shardings is None and out_shardings is None:
        return jitted
    from funcgrad.sharding.jit_shardings import with_shardings
    return with_shardings(jitted, in_shardings, out_shardings)


class _CallInfo(NamedTuple):
    """How a call's arguments split: the dynamic pytree, static positions, kwargs or not."""

    dyn: Any
    static_pos: list
    with_kwargs: bool


class Jitted:
    """A jitted function (see `jit`). Calling it runs compiled code."""

    def __init__(self, fun, static_argnums=None, static_argnames=None, donate_argnums=None,
                 backend=None, donate_argnames=None, keep_unused=False, device=None,
                 inline=False, compiler_options=None):
        if not callable(fun):
            raise errors.FuncgradTypeError(f"jit: expected a function, got {type(fun).__name__}"
                                           f"\n{errors.where()}")
        functools.update_wrapper(self, fun, updated=())
        self._fun = fun
        self._name = getattr(fun, "__name__", type(fun).__name__)
        self._device, backend = device_backend(device, backend, self._name)
        self._backend = call.check_backend(backend)
        self._inline = bool(inline)
        check_compiler_options(compiler_options, self._name)
        self._takes_buffers = backends.capabilities(self._backend).takes_donated_buffers
        self._signature = signature_of(fun)
        self._static_nums, self._static_names = static_args(
            self._signature, ints(static_argnums, "static_argnums"),
            strs(static_argnames), self._name)
        self._static_labels = {i: self._arg_label(i) for i in self._static_nums if i >= 0}
        self._static_label_list = tuple(self._static_labels.get(i) for i in self._static_nums)
        self._donate, self._donate_names = donated_args(
            self._signature, ints(donate_argnums, "donate_argnums"), strs(donate_argnames),
            self._name)
        both = sorted(set(self._donate) & set(self._static_nums))
        if both:
            raise errors.FuncgradValueError(
                f"jit({self._name}): argument(s) {both} are both static and donated; static "
                f"arguments are Python values and cannot be donated\n{errors.where()}")
        both = sorted(self._donate_names & self._static_names)
        if both:
            raise errors.FuncgradValueError(
                f"jit({self._name}): argument(s) {both} are both static and donated\n"
                f"{errors.where()}")
        self._cache = _cache_for(fun, (self._static_nums, self._static_names, self._donate,
                                       self._donate_names, self._backend))
        # no option that takes `__call__` off its hot path (a device, inline)
        self._plain = self._device is None and not self._inline
        self._dyn_positions = {}  # number of positional arguments -> the non-static ones

    def __repr__(self):
        return f"<jitted function {self._name}>"

    def __get__(self, obj, objtype=None):
        return self if obj is None else types.MethodType(self, obj)

    # --- calling ----------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        if self._plain and _FAST:  # the hot path: `_call`'s, without two Python calls
            key, leaves, vals = self._key(args, kwargs)
            if vals is None or _trace_now() is not None:
                return self._bind(key, leaves, args, kwargs)
            try:
                entry = self._cache.entries[key]
            except (KeyError, TypeError):
                return self._call(key, leaves, vals, args, kwargs)
            entry.hits += 1
            exe = entry.exe
            if exe is None or entry.tiered is not None or watchers:
                return self._run(entry, leaves, vals, args, kwargs)
            if entry.donate:
                return call_donating(entry, leaves, vals, lambda: self._names_of(args, kwargs))
            try:  # the executable reports its own failures; anything else is wrapped
                outs = exe(*entry.const_vals, *vals)
            except Exception as e:
                reraise(e, exe, self._name)
            return entry.build_outputs(outs)
        if not _FAST and _cfg["disable_jit"]:
            return self._fun(*args, **kwargs)
        if self._inline and current_trace() is not None and not current_trace().compute_known:
            return self._fun(*args, **kwargs)  # inline=True under an abstract trace
        if self._device is not None:
            args, kwargs = placement.place(f"jit({self._name})", (args, kwargs), self._device,
                                           "device")
            key, leaves, vals = self._key(args, kwargs)
            return placement.place(f"jit({self._name})", self._call(
                key, leaves, vals, args, kwargs), self._device, "device")
        key, leaves, vals = self._key(args, kwargs)
        return self._call(key, leaves, vals, args, kwargs)

    def _call(self, key, leaves, vals, args, kwargs):
        """The one path of a call, hit or miss: run the cached trace for `key` eagerly, or
        record it as one `jit` equation under another trace (or debug_nans). (`__call__`
        inlines its hit.)"""
        if vals is None or not _FAST or current_trace() is not None:
            return self._bind(key, leaves, args, kwargs)
        try:
            entry = self._cache.entries[key]
        except (KeyError, TypeError):
            entry = self._lookup(key, args, kwargs)
            if not entry.cacheable:  # it closes over tracers: the bind reports them
                return self._bind_entry(entry, leaves, args, kwargs)
        else:
            entry.hits += 1
        return self._run(entry, leaves, vals, args, kwargs)

    def _run(self, entry, leaves, vals, args, kwargs):
        """Run the cached trace `entry` eagerly on `vals` (the values of `leaves`)."""
        exe = entry.exe
        if exe is None:
            exe = entry.keep(call.executable(entry.jaxpr, self._backend, entry.donated,
                                             self._name))
        elif entry.tiered is not None:
            exe = entry.settle()
        if entry.donate:
            return call_donating(entry, leaves, vals, lambda: self._names_of(args, kwargs))
        try:  # the executable reports its own failures; anything else is wrapped
            outs = run(exe, [*entry.const_vals, *vals], self._name) if watchers else \
                exe(*entry.const_vals, *vals)
        except Exception as e:
            reraise(e, exe, self._name)
        return entry.build_outputs(outs)

    def _bind(self, key, leaves, args, kwargs):
        if _cfg["disable_jit"]:  # a `Compiled` called with jit disabled
            return self._fun(*args, **kwargs)
        if current_trace() is None and ShapeDtypeStruct in map(type, leaves):
            name = self._names_of(args, kwargs)[list(map(type, leaves)).index(ShapeDtypeStruct)]
            raise errors.FuncgradTypeError(
                f"jit({self._name}): argument `{name}` is a ShapeDtypeStruct, which has no "
                f"values to compute with\n{errors.where()}\n  hint: use it with "
                f"jit({self._name}).lower(...) or eval_shape; call with arrays.")
        return self._bind_entry(self._lookup(key, args, kwargs), leaves, args, kwargs)

    def _bind_entry(self, entry, leaves, args, kwargs):
        if entry.donate and current_trace() is None:  # debug_nans: checked, not donated
            check_donation(entry, leaves, lambda: self._names_of(args, kwargs))
        outs = call.bind([*entry.consts, *leaves], entry.bind_params)
        return entry.out_tree.unflatten(outs)

    def _key(self, args, kwargs):
        """`(key, leaves, values)` of a call, computed once: the cache key `(structure,
        enable_x64, statics, (shape, dtype, weak_type) per leaf...)`, the array leaves, and
        their numpy values (None when a leaf is a tracer and has none)."""
        nums = self._static_nums
        if not nums and not kwargs:
            dyn, statics = args, ()
        elif not kwargs and nums[0] >= 0 and nums[-1] < len(args):
            dyn, statics = self._split_positional(args)
        else:
            info, statics = self._split(args, kwargs)
            dyn = info.dyn
        leaves = []
        key, vals = [_flatten(dyn, leaves), _X64, statics], []
        add_key, add_val = key.append, vals.append
        traced = False
        for x in leaves:
            t = type(x)
            if t is Array:
                v = x._value
                add_val(v)
                add_key((v.shape, v.dtype, x.weak_type))
            elif t is np.ndarray and x.dtype in _CANONICAL:  # used as is, as to_array would
                add_val(x)
                add_key((x.shape, x.dtype, False))
            else:
                got = _other_leaf(x)
                if got is None:
                    self._bad_leaf(self._split(args, kwargs)[0], len(vals), x)
                add_key(got[0])
                add_val(got[1])
                traced = traced or got[1] is None
        return tuple(key), leaves, None if traced else vals

    def _split(self, args, kwargs):
        """(`_CallInfo`, static part of the key) of a call."""
        nums, n = self._static_nums, len(args)
        if not kwargs and nums and nums[0] >= 0 and nums[-1] < n:
            dyn, statics = self._split_positional(args)
            return _CallInfo(dyn, nums, False), statics
        static_pos = sorted({i % n for i in nums if -n <= i < n}) if n else []
        statics = [(self._arg_label(i), args[i]) for i in static_pos]
        dyn_kwargs = {}
        for k, v in kwargs.items():
            if k in self._static_names:
                statics.append((k, v))
            else:
                dyn_kwargs[k] = v
        statics = tuple((label, type(v), v) for label, v in statics)
        dyn_args = tuple(a for i, a in enumerate(args) if i not in static_pos) if static_pos \
            else args
        if dyn_kwargs:
            return _CallInfo((dyn_args, dyn_kwargs), static_pos, True), statics + (_KWARGS,)
        return _CallInfo(dyn_args, static_pos, False), statics

    def _split_positional(self, args):
        """(dynamic arguments, statics) of a call passing every static argument by position
        (the common case, on the hot path)."""
        nums, n = self._static_nums, len(args)
        dyn = self._dyn_positions.get(n)
        if dyn is None:
            dyn = self._dyn_positions[n] = tuple(i for i in range(n) if i not in nums)
        values = tuple(map(args.__getitem__, nums))  # (no comprehension: one Python call less)
        return (tuple(map(args.__getitem__, dyn)),
                tuple(zip(self._static_label_list, map(type, values), values)))

    def _lookup(self, key, args, kwargs):
        """The cache entry for `key`, tracing the function on a miss."""
        cache = self._cache
        try:
            entry = cache.entries.get(key)
        except TypeError:  # an unhashable static argument, or aux data that do not hash
            for static in self._split(args, kwargs)[1]:
                if static is not _KWARGS:
                    _check_hashable(self._name, static[0], static[2])
            key = (HashableNodes(key[0]),) + key[1:]  # (a dict as aux data: JAX takes it)
            entry = cache.entries.get(key)
        if entry is not None:
            entry.hits += 1
            return entry
        cache.misses += 1
        info = self._split(args, kwargs)[0]
        names = self._leaf_names(info)
        reason = cache.explain(key, names)
        if _cfg["explain_cache_misses"]:
            log(f"jit: tracing `{self._name}` again (cache miss): {reason}")
        entry = self._trace(key, info, names, args, kwargs)
        cache.traces += 1
        cache.recent.append((key, names))
        cache.last_miss = reason
        if entry.cacheable:
            cache.add(key, entry)
        if cache.traces > _cfg["retrace_warn_after"] and not cache.warned:
            cache.warned = True
            self._warn_retrace(cache.traces, reason)
        return entry

    def _warn_retrace(self, traces, reason):
        frame = errors.user_frame() or ("<unknown>", 0, "")
        warnings.warn_explicit(
            f"jit: `{self._name}` has been traced {traces} times "
            f"(config.retrace_warn_after={_cfg['retrace_warn_after']}); tracing and compiling "
            f"again is slow. The latest re-trace was caused by: {reason}\n"
            "  hint: keep argument shapes and dtypes fixed (pad or drop a short last batch), "
            "pass changing Python numbers as arrays, and keep static arguments fixed; "
            "`.cache_info()` shows the counts.", RetraceWarning, frame[0], frame[1])

    # --- tracing ----------------------------------------------------------------------------
    def _trace(self, key, info, names, args, kwargs):
        sig = key[3:]
        with call.gc_paused(), new_builder(f"jit({self._name})") as b:
            b.compiled = True  # `ad.jvp_replay` may rebind a loop: the copy left is dead code
            ins = PyTreeDef(key[0], len(sig)).unflatten([b.new_input(ShapedArray(*s))
                                                         for s in sig])
            full_args, full_kwargs = _merge(ins, info, args, kwargs)
            try:
                out = self._fun(*full_args, **full_kwargs)
            except errors.ConcretizationTypeError as e:
                self._explain_concretization(e, b, names)
                raise
            out_leaves, out_tree = tree_flatten(out)
            self._check_outputs(out, out_leaves)
            closed, consts = closure_convert(*b.to_jaxpr(out_leaves))
        donated = (False,) * len(consts) + self._donated_leaves(info, len(sig))
        entry = _Entry(closed, consts, out_tree, donated, self._name, self._backend,
                       self._takes_buffers)
        if entry.donate:
            warn_unusable_donations(closed, donated, [""] * len(consts) + names, self._name)
        return entry

    def _check_outputs(self, out, out_leaves):
        for x in out_leaves:
            if not isinstance(x, (ArrayBase, np.ndarray, np.generic) + _SCALARS):
                path = next(p for p, y in tree_flatten_with_path(out)[0] if y is x)
                raise errors.FuncgradTypeError(
                    f"jit({self._name}): the function returned a {type(x).__name__} at output "
                    f"{keystr(path) or '(the whole output)'}; a jitted function must return "
                    f"arrays (or pytrees of arrays)\n{errors.where()}\n"
                    "  hint: return Python values from a separate, un-jitted function.")

    def _explain_concretization(self, e, builder, names):
        """Add to the error which arguments the concrete value depended on."""
        tracer = _failed_tracer(e)
        if tracer is None or tracer._trace is not builder:
            return
        deps = [names[i] for i in _depends_on(builder, tracer.atom)][:6]
        tops = tuple(sorted({_top_name(n) for n in deps}))
        e.args = (f"{e.args[0]}\n  while tracing `{self._name}` for jit, this value depends on "
                  f"argument(s) {', '.join(f'`{a}`' for a in deps)}, which jit traces as "
                  f"abstract arrays. If Python control flow needs their values, mark them "
                  f"static: jit({self._name}, static_argnames={tops!r}).",)

    # --- which leaves are donated (the rest of donation is in jit_cache) -------------------
    def _donated_leaves(self, info, num_leaves):
        """One bool per leaf: does it belong to a donated argument (a donated position, or a
        keyword argument named in `donate_argnames`)?"""
        if not self._donate and not self._donate_names:
            return (False,) * num_leaves
        dyn_args = info.dyn[0] if info.with_kwargs else info.dyn
        n = len(dyn_args) + len(info.static_pos)
        donate = {i % n for i in self._donate if -n <= i < n}
        positions = [i for i in range(n) if i not in info.static_pos]
        mask = []
        for pos, a in zip(positions, dyn_args):
            mask += [pos in donate] * len(tree_flatten(a)[0])
        if info.with_kwargs:  # a dict's leaves come in sorted key order
            for k, v in sorted(info.dyn[1].items()):
                mask += [k in self._donate_names] * len(tree_flatten(v)[0])
        return tuple(mask) + (False,) * (num_leaves - len(mask))

    # --- naming arguments -------------------------------------------------------------------
    def _names_of(self, args, kwargs):
        return self._leaf_names(self._split(args, kwargs)[0])

    def _arg_label(self, pos):
        params = self._signature.parameters.values() if self._signature else ()
        positional = [p for p in params
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if pos < len(positional):
            return positional[pos].name
        varargs = [p.name for p in params if p.kind == p.VAR_POSITIONAL]
        return f"{varargs[0]}[{pos - len(positional)}]" if varargs else f"args[{pos}]"

    def _leaf_names(self, info):
        """A readable name per leaf of a call: `batch['x']`, `params[0]`, `n`."""
        dyn_args = info.dyn[0] if info.with_kwargs else info.dyn
        positions = [i for i in range(len(dyn_args) + len(info.static_pos))
                     if i not in info.static_pos]
        names, labels = [], [self._arg_label(i) for i in positions]
        for path, _ in tree_flatten_with_path(info.dyn)[0]:
            if info.with_kwargs:
                head, path = path[0], path[1:]
                if head == SequenceKey(1):
                    names.append(f"{path[0].key}{keystr(path[1:])}")
                    continue
            names.append(f"{labels[path[0].idx]}{keystr(path[1:])}")
        return names

    def _bad_leaf(self, info, i, x):
        name = self._leaf_names(info)[i]
        what = f"{type(x).__name__} ({errors.short_repr(x, 40)})"
        if isinstance(x, np.ndarray):
            what = f"NumPy array of unsupported dtype {x.dtype}"
        raise errors.FuncgradTypeError(
            f"jit({self._name}): argument `{name}` is a {what}, not an array; jit traces every "
            f"argument leaf as an array\n{errors.where()}\n"
            f"  hint: pass non-array values as static arguments, e.g. "
            f"jit({self._name}, static_argnames=({_top_name(name)!r},)) (static values must "
            "be hashable), or convert them with fnp.asarray.")

    # --- introspection ----------------------------------------------------------------------
    @property
    def trace_count(self):
        """How many times the function has been traced."""
        return self._cache.traces

    def cache_info(self):
        """`CacheInfo(hits, misses, traces, size, last_miss)`; `last_miss` explains why the
        latest call missed the cache (which argument's shape, dtype or static value changed)."""
        c = self._cache
        return CacheInfo(c.hits, c.misses, c.traces, len(c.entries), c.last_miss)

    def explain_last_miss(self):
        """Why the latest trace happened, e.g. "argument `x`: f32[128,784] -> f32[100,784]"."""
        return self._cache.last_miss

    def clear_cache(self):
        """Forget every trace; its compiled code and generated source go with it."""
        self._cache.clear()

    def lower(self, *args, **kwargs):
        """Trace for these arguments: a `Lowered` whose `.as_text()` is the optimized IR."""
        key = self._key(args, kwargs)[0]
        return Lowered(self, self._lookup(key, args, kwargs), key)

    def profile(self, *args, repeat=10, warmup=1, trace=None, show=False, **kwargs):
        """Time one step per kernel and library call: `lower(*args).compile().profile(...)`
        (see `Compiled.profile`)."""
        return self.lower(*args, **kwargs).compile().profile(
            *args, repeat=repeat, warmup=warmup, trace=trace, show=show, **kwargs)


def _top_name(name):
    """The parameter name in a leaf name: `batch` for `batch['x']`."""
    return name.split("[")[0].split(".")[0]


def _merge(ins, info, args, kwargs):
    """The full (args, kwargs) of a call from the traced dynamic part and the statics."""
    dyn_args, dyn_kwargs = ins if info.with_kwargs else (ins, {})
    it = iter(dyn_args)
    full_args = [args[i] if i in info.static_pos else next(it) for i in range(len(args))]
    return full_args, {k: dyn_kwargs.get(k, v) for k, v in kwargs.items()}


# --- lowering ---------------------------------------------------------------------------------

class Lowered:
    """A traced jitted function for one input signature (`jitted.lower(*args)`)."""

    def __init__(self, jitted, entry, key):
        self._jitted, self._entry, self._key = jitted, entry, key

    @property
    def jaxpr(self):
        """The traced program (closed-over arrays are its leading inputs)."""
        return self._entry.jaxpr

    def as_text(self):
        """The optimized IR, as printed by the compiler's `optimize`."""
        from funcgrad.compiler import pipeline
        return str(pipeline.optimize(self._entry.jaxpr))

    def compile(self):
        """Compile (or fetch the compiled code): a `Compiled`."""
        e, j = self._entry, self._jitted
        return Compiled(self, call.executable(e.jaxpr, j._backend, e.donated, j._name))

    def memory_analysis(self):
        """The compiler's predicted memory use (peak, temporaries, arguments, outputs)."""
        return self.compile().memory_analysis()

    def as_dot(self, name=None):
        """The optimized IR as a Graphviz DOT graph (`funcgrad.viz.to_dot`)."""
        from funcgrad import viz
        return viz.to_dot(self, name=name)

    def as_svg(self, name=None):
        """The optimized IR drawn as SVG (needs Graphviz; `funcgrad.viz.to_svg`)."""
        from funcgrad import viz
        return viz.to_svg(self, name=name)


class Compiled:
    """Compiled code for one input signature (`jitted.lower(*args).compile()`)."""

    def __init__(self, lowered, exe):
        self._lowered, self._exe = lowered, exe

    def as_text(self):
        """The generated source (Python/numpy or CUDA C)."""
        return self._exe.as_text()

    def ir_text(self):
        """The optimized IR the code was generated from."""
        return self._exe.ir_text()

    def memory_analysis(self):
        """The compiler's memory plan summary."""
        return self._exe.memory_analysis()

    def as_dot(self, name=None):
        """The compiled program as a Graphviz DOT graph: fused kernels as clusters, library
        calls, buffers and the memory plan (`funcgrad.viz.to_dot`)."""
        from funcgrad import viz
        return viz.to_dot(self, name=name)

    def as_svg(self, name=None):
        """The compiled program drawn as SVG (needs Graphviz; `funcgrad.viz.to_svg`)."""
        from funcgrad import viz
        return viz.to_svg(self, name=name)

    def profile(self, *args, repeat=10, warmup=1, trace=None, show=False, **kwargs):
        """Run the program `warmup + repeat` times with a timer around every kernel and
        library call (an instrumented copy of the program: the plain one is unchanged).

        Args:
            *args, **kwargs: the arguments this `Compiled` was built for.
            repeat: timed steps; the table gives medians per step.
            trace: a path to write a Chrome/Perfetto trace JSON to.
            show: print the table.

        Returns:
            A `funcgrad.profiler.ProfileResult`.

        Example:
            >>> prof = jit(f).lower(x).compile().profile(x, repeat=20, trace="f.json")
            >>> print(prof.table())
        """
        from funcgrad import profiler
        low = self._lowered
        j, entry = low._jitted, low._entry
        key, _, vals = j._key(args, kwargs)
        if key != low._key or vals is None:
            diffs = _key_diff(low._key, key, j._names_of(args, kwargs)) if key != low._key \
                else ["its arguments are traced values, not arrays"]
            raise errors.FuncgradTypeError(
                f"jit({j._name}).profile: this Compiled was built for other arguments: "
                f"{'; '.join(diffs)}\n{errors.where()}")
        result = profiler.profile_executable(
            self._exe, [*entry.const_vals, *vals], repeat=repeat, warmup=warmup,
            copy_args=bool(entry.donate), name=j._name)
        if trace is not None:
            result.to_chrome_trace(trace)
        if show:
            print(result.table())
        return result

    def __call__(self, *args, **kwargs):
        low = self._lowered
        j = low._jitted
        key, leaves, vals = j._key(args, kwargs)
        if key != low._key:
            diffs = _key_diff(low._key, key, j._names_of(args, kwargs))
            raise errors.FuncgradTypeError(
                f"jit({j._name}): this Compiled was built for other arguments: "
                f"{'; '.join(diffs)}\n{errors.where()}")
        return j._call(key, leaves, vals, args, kwargs)


# --- keys -------------------------------------------------------------------------------------

def _other_leaf(x):
    """`(signature, value)` of a leaf that is not an Array or a canonical ndarray: a tracer or
    a `ShapeDtypeStruct` (no value), a Python scalar or another NumPy value (converted); None
    for a non-array."""
    if isinstance(x, Tracer):
        a = x.aval
        return (a.shape, a.dtype, a.weak_type) + (() if a.vma is None else (a.vma,)), None
    if type(x) is ShapeDtypeStruct:  # (`jitted.lower(ShapeDtypeStruct(...))`)
        a = x.aval
        return (a.shape, a.dtype, a.weak_type), None
    if type(x) in _SCALARS or isinstance(x, (np.ndarray, np.generic)):
        try:
            a = to_array(x)
        except TypeError:
            return None
        return (a.shape, a.dtype, a.weak_type), a._value
    return None


def _check_hashable(name, label, value):
    try:
        hash(value)
    except TypeError as e:
        raise errors.FuncgradTypeError(
            f"jit({name}): static argument `{label}` has an unhashable value of type "
            f"{type(value).__name__} ({e}); static arguments must be hashable because they "
            f"are part of the cache key\n{errors.where()}\n"
            "  hint: use a tuple instead of a list, a frozen dataclass, or pass arrays as "
            "non-static arguments.") from None


# --- explaining concretization errors -----------------------------------------------------------

def _failed_tracer(e):
    """The tracer whose concrete value was requested (found in the traceback)."""
    code, tracer = Tracer._concrete.__code__, None
    tb = e.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code is code:
            tracer = tb.tb_frame.f_locals.get("self")
        tb = tb.tb_next
    return tracer


def _depends_on(builder, var):
    """Indices of the builder's inputs that `var` depends on."""
    producer = {v: eqn for eqn in builder.eqns for v in eqn.outvars}
    inputs = {v: i for i, v in enumerate(builder.invars)}
    found, stack, seen = set(), [var], set()
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        if v in inputs:
            found.add(inputs[v])
        elif v in producer:
            stack += [a for a in producer[v].invars if type(a) is Var]
    return sorted(found)

