"""Primitives, tracers and the one current-trace context.

`Primitive.bind` is the single entry point of every operation. With no current trace
it runs the primitive eagerly on numpy values. Under a `Builder` trace it records an
equation; when the builder computes known values (the define-by-run traces of grad)
it also binds the primitive one level up, so a tracer knows its value there.
Values from enclosing traces or concrete arrays are lifted as constvars (captures).
"""

import contextlib
import contextvars
import itertools
import os
import sys
import weakref

import numpy as np

from funcgrad import dtypes, errors
from funcgrad.config import config
from funcgrad.core.array import Array, ArrayBase, _device_types, to_array
from funcgrad.core.ir import ClosedJaxpr, Eqn, Jaxpr, Literal, ShapedArray, Var
from funcgrad.core.nesting import nests
from funcgrad.core.ops import ops
from funcgrad.core.reduce_op import ReduceOp

_trace_ctx = contextvars.ContextVar("funcgrad_trace", default=None)
_source_override = contextvars.ContextVar("funcgrad_source", default=None)
_known_for = contextvars.ContextVar("funcgrad_known_for", default=None)
_impl_known_for = contextvars.ContextVar("funcgrad_impl_known_for", default=None)
_name_stack = contextvars.ContextVar("funcgrad_name_stack", default="")  # "outer/inner/"
_eval_now = contextvars.ContextVar("funcgrad_eval_now", default=False)


def current_trace():
    """The trace that `bind` records into now, or None when running eagerly."""
    return _trace_ctx.get()


@contextlib.contextmanager
def set_trace(trace):
    """Make `trace` (a `Builder` or None for eager) current inside the block."""
    token = _trace_ctx.set(trace)
    try:
        yield trace
    finally:
        _trace_ctx.reset(token)


def computing_known_for():
    """The define-by-run `Builder` whose known value is being computed now (or None).

    Higher-order eager impls use it to learn that their result feeds a differentiation
    (e.g. custom_vjp runs `fwd` instead of the function to keep its residuals).
    """
    return _impl_known_for.get()


class source_context:  # noqa: N801  (used like a function: `with source_context(src):`)
    """Attribute equations made inside the block (e.g. by a backward pass) to `source`.

    A small class rather than a generator context manager: transforms enter it once per
    equation, so its cost is part of every eager grad.
    """

    __slots__ = ("source", "token")

    def __init__(self, source):
        self.source = source

    def __enter__(self):
        self.token = _source_override.set(self.source)

    def __exit__(self, *exc):
        _source_override.reset(self.token)


def current_source():
    return _source_override.get() or _named(errors.user_frame(2))


@contextlib.contextmanager
def name_scope(name):
    """Prefix `name/` to the function name of the source of every equation recorded inside
    (`model.py:12 (block/loss)`): generated code, profiles and pictures show it."""
    token = _name_stack.set(f"{_name_stack.get()}{name}/")
    try:
        yield
    finally:
        _name_stack.reset(token)


def _named(frame):
    names = _name_stack.get()
    if not names or frame is None:
        return frame
    return (frame[0], frame[1], names + frame[2])


@contextlib.contextmanager
def eval_concrete():
    """Inside the block, a primitive applied to values that are all concrete (no tracer) runs
    now, even under a trace (`funcgrad.ensure_compile_time_eval`)."""
    token = _eval_now.set(True)
    try:
        yield
    finally:
        _eval_now.reset(token)


class Primitive:
    """An operation of the IR with rules registered per transform.

    The shape/dtype rule and eager implementation are registered here; transforms keep
    their own rule tables (`ad.jvp_rules`, `batching.batch_rules`, ...). What the compiler
    asks of a primitive it declares itself (`declare`; the family factories of
    `funcgrad.lax.utils` do it for their primitives):

    - `kind`: "elementwise", "reduction", "view" (layout only), "library" (the default: run
      as a library call) or "higher-order" (holds sub-programs; `def_impl(fn, raw=False)`
      makes a primitive of the default kind higher-order);
    - `dtype_kinds`: the numpy kind letters of the operands it accepts ("fc"), or None;
    - `fusible`: a kernel may compute it (elementwise, reduction) or read an operand
      through it (view);
    - `reduce_op`: a fusible reduction's op (a `ReduceOp`: what every backend needs to
      compute it in a kernel);
    - `view_axes`: a fusible view's rule `(operand shape, out shape, **params)` -> operand
      axis -> output axis (-1: a dropped unit axis), or None where it is no such relabeling;
    - `rank0_operands`: each operand may be rank-0 and broadcasts (lax's binary ops);
    - `effectful`: it has a side effect (dead-code elimination keeps it);
    - `identity`: it returns its one operand unchanged (the simplifier drops it).

    Example:
        >>> sin_p = Primitive("sin")
        >>> sin_p.def_impl(np.sin); sin_p.def_abstract_eval(lambda x: x)
        >>> sin_p.declare("elementwise", dtype_kinds="fc", fusible=True)
    """

    KINDS = ("elementwise", "reduction", "view", "library", "higher-order")
    kind = "library"
    dtype_kinds = None
    fusible = False
    reduce_op = None
    view_axes = None
    rank0_operands = False
    effectful = False
    # its raw impl gets bfloat16/float8 operands as float32 and int4 & co. as int32 (their
    # results are rounded to the output dtype once): False for one that must see the narrow
    # dtype itself (bitcast_convert_type, nextafter, callbacks)
    widens_narrow = True
    identity = False  # returns its one operand unchanged: the compiler's simplifier drops it
    calls_body = False  # applies its `jaxpr` param to its operands: compiles as a plain call
    _fusible = weakref.WeakValueDictionary()  # name -> the fusible primitive of that name

    def __init__(self, name, multiple_results=False):
        self.name = name
        self.multiple_results = multiple_results
        self.impl_rule = None
        self.raw_impl = True
        self.abstract_rule = None

    def __repr__(self):
        return self.name

    def declare(self, kind, *, dtype_kinds=None, fusible=False, reduce_op=None,
                view_axes=None, rank0_operands=False):
        """Declare what the primitive is (see the class docstring); returns it.

        A fusible primitive's name must be unique among fusible primitives: kernel specs
        name their ops by primitive name (`Primitive.fusible_named`)."""
        if kind not in self.KINDS:
            raise ValueError(f"{self.name}: kind must be one of {self.KINDS}, got {kind!r}")
        if fusible and kind not in ("elementwise", "reduction", "view"):
            raise ValueError(f"{self.name}: a {kind} primitive cannot be fusible")
        if fusible and kind == "reduction" and not isinstance(reduce_op, ReduceOp):
            raise ValueError(f"{self.name}: a fusible reduction declares its reduce_op (a "
                             f"ReduceOp), got {reduce_op!r}")
        if fusible and kind == "view" and view_axes is None:
            raise ValueError(f"{self.name}: a fusible view declares its view_axes rule")
        if fusible:
            other = Primitive._fusible.get(self.name)
            if other is not None and other is not self:
                raise ValueError(f"a fusible primitive named {self.name!r} exists already; "
                                 "kernels name their ops by primitive name")
            Primitive._fusible[self.name] = self
        self.kind, self.dtype_kinds, self.fusible = kind, dtype_kinds, bool(fusible)
        self.reduce_op, self.view_axes = reduce_op, view_axes
        self.rank0_operands = bool(rank0_operands)
        return self

    @staticmethod
    def fusible_named(name):
        """The fusible primitive called `name` (a kernel instruction's op), or None."""
        return Primitive._fusible.get(name)

    @staticmethod
    def all_fusible():
        """Every fusible primitive alive, by name."""
        return [p for _, p in sorted(Primitive._fusible.items())]

    def def_impl(self, fn, raw=True):
        """`fn(*numpy_values, **params)` (raw) or `fn(*arrays, **params)` returning Arrays;
        a primitive with a non-raw impl (sub-programs) is higher-order unless declared."""
        self.impl_rule, self.raw_impl = fn, raw
        if not raw and "kind" not in vars(self):
            self.kind = "higher-order"
        return fn

    def def_abstract_eval(self, fn):
        """`fn(*avals, **params)` returning the output aval (or a list of them)."""
        self.abstract_rule = fn
        return fn

    def abstract_eval(self, *avals, **params):
        return self.abstract_rule(*avals, **params)

    def bind(self, *args, **params):
        trace = _trace_ctx.get()
        if trace is None or (_eval_now.get() and not any(isinstance(a, Tracer) for a in args)):
            return eager_bind(self, args, params)
        return trace.process(self, args, params)


def bind_at(trace, prim, args, params):
    """Bind `prim` in `trace` (None: eagerly) without changing the current trace."""
    if trace is None:
        return eager_bind(prim, args, params)
    return trace.process(prim, args, params)


_aval_cache = {}
config.on_change(lambda name, value: _aval_cache.clear())


def eager_bind(prim, args, params):
    if not prim.raw_impl:
        for a in args:
            if isinstance(a, Tracer):
                _leaked(a, prim)
        known_for = _known_for.get()
        if _trace_ctx.get() is None and known_for is None and _impl_known_for.get() is None:
            return prim.impl_rule(*args, **params)
        # Computing a known value below a builder: the impl runs eagerly, and only it (not the
        # binds nested inside it) learns which builder its result is for.
        tokens = (_trace_ctx.set(None), _known_for.set(None), _impl_known_for.set(known_for))
        try:
            return prim.impl_rule(*args, **params)
        finally:
            _impl_known_for.reset(tokens[2]), _known_for.reset(tokens[1])
            _trace_ctx.reset(tokens[0])
    vals, key, narrow, raw = [], [prim], False, None
    for a in args:
        if type(a) is not Array:
            if isinstance(a, Tracer):
                _leaked(a, prim)
            if type(a) is np.ndarray:
                raw = [a] if raw is None else raw + [a]
            a = _operand(prim, a)
        v = a._value
        vals.append(v)
        dt = v.dtype
        key.append((v.shape, dt, a.weak_type))
        if dt.num >= 256:  # an ml_dtypes type (bfloat16, float8, int4...)
            narrow = True
    if params:
        key.extend(params.items())
    key = tuple(key)
    try:
        out_aval = _aval_cache.get(key)
    except TypeError:  # an unhashable parameter: no caching
        out_aval = None
    cacheable = out_aval is not None or _hashable(key)
    if out_aval is None:
        avals = [ShapedArray(*k) for k in key[1:len(vals) + 1]]
        out_aval = prim.abstract_rule(*avals, **params)
        if cacheable:
            if len(_aval_cache) > 20000:
                _aval_cache.clear()
            _aval_cache[key] = out_aval
    try:
        out = prim.impl_rule(*(widened(prim, vals) if narrow else vals), **params)
    except Exception as e:
        if errors.is_user_error(e):  # raised by user code the impl called (debug.callback)
            raise
        outs = out_aval if prim.multiple_results else [out_aval]
        if errors.out_of_memory(e, outs):
            raise errors.memory_error(prim.name, outs, errors.user_frame(2)) from None
        if any(type(v) in _device_types for v in vals):  # operands on a GPU
            from funcgrad.devices import run_on_devices
            out = run_on_devices(prim, vals, params, e)
        else:
            raise errors.FuncgradInternalError(
                f"{prim.name}: the eager implementation failed on inputs "
                f"{[(v.shape, v.dtype) for v in vals]} ({type(e).__name__}: "
                f"{e}); this is a funcgrad bug\n{errors.where(errors.user_frame(2))}") from e
    if raw is not None:
        out = _unaliased(out, raw, prim.multiple_results)
    if prim.multiple_results:
        res = [_wrap(o, a) for o, a in zip(out, out_aval)]
    else:
        res = _wrap(out, out_aval)
    if config._values["debug_nans"] or config._values["debug_infs"]:
        _check_nans(prim, res)
    return res


def widened(prim, vals):
    """Operands `vals` (numpy arrays) as `prim`'s raw impl takes them: bfloat16 and the
    float8s widened to float32, int4 & co. to int32/uint32 (exactly), unless the primitive
    handles the narrow dtypes itself (`widens_narrow`). The caller casts the results to the
    output dtypes: one rounding per operation, as XLA computes them on the CPU."""
    if not prim.widens_narrow:
        return vals
    out = []
    for v in vals:
        dt = getattr(v, "dtype", None)
        out.append(v.astype(dtypes.compute_dtype(dt)) if dt is not None and dt.num >= 256
                   else v)
    return out


def _unaliased(out, raw, multiple):
    """An eager result that shares no memory with the NumPy arrays `raw` the caller passed
    (a view op's result would be a view of one): the caller may write to them later, and a
    funcgrad array is immutable (JAX copies its inputs too)."""
    def own(o):
        if isinstance(o, np.ndarray) and any(np.may_share_memory(o, r) for r in raw):
            return o.copy()
        return o
    return [own(o) for o in out] if multiple else own(out)


def _cached_abstract_eval(prim, avals, params):
    """`prim.abstract_eval`, memoized on (primitive, operand types, params) like eager binds."""
    key = [prim]
    for a in avals:
        key.append((a.shape, a.dtype, a.weak_type))
    if params:
        key.extend(params.items())
    key = tuple(key)
    try:
        out = _aval_cache.get(key)
    except TypeError:  # an unhashable parameter (e.g. a callable holding a list)
        return prim.abstract_eval(*avals, **params)
    if out is None:
        out = prim.abstract_eval(*avals, **params)
        if len(_aval_cache) > 20000:
            _aval_cache.clear()
        _aval_cache[key] = out
    return out


def _hashable(key):
    try:
        hash(key)
        return True
    except TypeError:
        return False


def _wrap(v, aval):
    if type(v) is not np.ndarray or v.dtype != aval.dtype:
        provider = _device_types.get(type(v))
        v = np.asarray(v, aval.dtype) if provider is None else provider.asarray(v, aval.dtype)
    return Array(v, aval.weak_type)


def _check_nans(prim, res):
    """debug_nans/debug_infs: a FloatingPointError when an output of `prim` has a NaN/inf."""
    for r in res if isinstance(res, list) else [res]:
        bad = nonfinite(r._value) if dtypes.is_inexact(r.dtype) else None
        if bad is not None:
            src = _source_override.get() or errors.user_frame(3)
            raise FloatingPointError(
                f"debug_{bad}s: primitive {prim.name} produced {NONFINITE[bad]} "
                f"(output {r.aval})\n{errors.where(src)}")


NONFINITE = {"nan": "a NaN", "inf": "an inf"}


def nonfinite(value):
    """"nan" or "inf" when the checks asked for (`config.debug_nans`, `debug_infs`) find one in
    the numpy value `value`, else None."""
    if config._values["debug_nans"] and np.isnan(value).any():
        return "nan"
    if config._values["debug_infs"] and np.isinf(value).any():
        return "inf"
    return None


def _operand(prim, x):
    """A non-Array operand of `prim` (Python scalar, numpy array, list) as an Array; bad input
    (a string, None, a ragged list, a too-large int) is an error naming `prim`."""
    try:
        return to_array(x)
    except errors.TracerArrayConversionError:  # a list holding traced values
        raise errors.op_error(
            prim.name, f"a {type(x).__name__} holding traced values is not an operand of a lax "
            "operation", hint="stack it first (funcgrad.numpy.stack or funcgrad.numpy.array), "
            "or call the funcgrad.numpy function, which stacks such lists") from None
    except (TypeError, ValueError, OverflowError) as e:
        big = isinstance(e, OverflowError)
        raise errors.op_error(
            prim.name, f"cannot use {type(x).__name__} {errors.short_repr(x)} as an array "
            f"operand ({e})", cls=errors.FuncgradOverflowError if big else errors.FuncgradTypeError,
            hint="pass a value that fits the dtype" if big else
            "pass arrays, Python numbers or (nested, rectangular) lists of numbers") from None


def _leaked(tracer, prim):
    raise errors.TracerLeakError(
        f"{prim.name}: used a traced value {tracer.aval} created by a `{tracer._trace.name}` "
        f"transformation that has already finished (a tracer leak).\n"
        f"{errors.where(errors.user_frame(3))}\n"
        "  hint: return values from transformed functions instead of storing them in globals"
        " or object attributes; pass them as arguments to use them later.")


def get_aval(x):
    """The `ShapedArray` of an array, tracer or Python scalar."""
    t = type(x)
    if t is Array:
        return x.aval
    if isinstance(x, Tracer):
        return x.aval
    return to_array(x).aval


def is_concrete(x):
    """True when `x` has a value that Python can inspect now."""
    return not isinstance(x, Tracer) or x.val is not None and is_concrete(x.val)


def concrete_value(x):
    """The numpy value of `x`, following tracers to their known values, or None."""
    while isinstance(x, Tracer):
        x = x.val
        if x is None:
            return None
    return to_array(x)._value


# ufunc -> the funcgrad function of the operator that calls it (numpy.add -> funcgrad.numpy.add),
# filled by funcgrad.numpy.methods: `ndarray + tracer` runs as `numpy.add(ndarray, tracer)`.
numpy_operators = {}
_numpy_call = contextvars.ContextVar("funcgrad_numpy_call", default=None)
_NUMPY_DIR = os.path.dirname(np.__file__) + os.sep


def _numpy_caller():
    """The public name of the NumPy Python function converting a tracer now (`numpy.sum` given
    a list of tracers), or "numpy.asarray" when C code (np.asarray, np.array) does it."""
    f, name = sys._getframe(2), "numpy.asarray"
    while f is not None and f.f_code.co_filename.startswith(_NUMPY_DIR):
        parts = f.f_globals.get("__name__", "numpy").split(".")  # numpy._core.fromnumeric
        public = len(parts) > 2 and not parts[1].startswith("_") and parts[1] != "lib"
        name = f"numpy.{parts[1] + '.' if public else ''}{f.f_code.co_name}"
        f = f.f_back
    return name


def _array_conversion_error(tracer, function):
    return errors.array_conversion_error(
        function, tracer.aval.str_short(), tracer._trace.name,
        errors.user_frame(1, outside=(_NUMPY_DIR,)))


class Tracer(ArrayBase):
    """A value inside a trace: its aval, the IR variable (or literal) it stands for and,
    when the trace computes known values, its value one level up (else None)."""

    __slots__ = ("_trace", "aval", "atom", "val", "__weakref__")

    def __init__(self, trace, aval, var, val=None):
        self._trace = trace
        self.aval = aval
        self.atom = var  # not `var`: that is the numpy method x.var()
        self.val = val

    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)
    ndim = property(lambda self: len(self.aval.shape))
    size = property(lambda self: self.aval.size)
    weak_type = property(lambda self: self.aval.weak_type)

    def __repr__(self):
        v = "" if self.val is None else f" = {self.val!r}"
        return f"Traced<{self.aval.str_short()}>with<{self._trace.name}>{v}"

    def _concrete(self, what):
        v = concrete_value(self)
        if v is None:
            raise errors.ConcretizationTypeError(
                f"{what} needs a concrete value, but got a traced value {self.aval} inside "
                f"`{self._trace.name}`.\n{errors.where(errors.user_frame(3))}\n"
                "  hint: Python control flow (if/while/bool/int) cannot depend on values "
                "traced by jit/vmap/make_jaxpr. Use funcgrad.lax.cond / lax.switch / "
                "lax.while_loop / fnp.where, or mark the argument static with "
                "jit(..., static_argnums=...).")
        return v

    def __bool__(self):
        return bool(self._concrete("bool() / an `if` or `while` on an array"))

    def __int__(self):
        return int(self._concrete("int()"))

    def __float__(self):
        return float(self._concrete("float()"))

    def __complex__(self):
        return complex(self._concrete("complex()"))

    def __index__(self):
        return self._concrete("using an array as an index (__index__)").__index__()

    def item(self):
        return self._concrete(".item()").item()

    def tolist(self):
        return self._concrete(".tolist()").tolist()

    # NumPy on a traced value (`numpy.sin(x)`, `np.asarray(x)`) raises, as in JAX: under eager
    # grad the known value would make a constant, so the derivative would be silently zero.
    # funcgrad's own code reads a known value with `concrete_value`, never with numpy.
    def __array__(self, dtype=None, copy=None):
        raise _array_conversion_error(self, _numpy_call.get() or _numpy_caller())

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        # `ndarray + x` reaches here as numpy.add(ndarray, x): the operators' ufuncs compute
        # with funcgrad (`numpy_operators`); any other ufunc, method or `out=` raises.
        fn = numpy_operators.get(ufunc) if method == "__call__" and not kwargs else None
        if fn is None:
            name = ufunc.__name__ if method == "__call__" else f"{ufunc.__name__}.{method}"
            raise _array_conversion_error(self, f"numpy.{name}")
        return fn(*inputs)

    def __array_function__(self, func, types, args, kwargs):
        # NumPy's own implementation runs (`numpy.sum(x)` calls `x.sum()`); a conversion to an
        # ndarray inside it raises naming `func`.
        name = f"{func.__module__}.{func.__name__}"
        implementation = getattr(func, "_implementation", None)
        if implementation is None:
            raise _array_conversion_error(self, name)
        token = _numpy_call.set(_numpy_call.get() or name)
        try:
            return implementation(*args, **kwargs)
        finally:
            _numpy_call.reset(token)

    def __len__(self):
        if not self.aval.shape:
            raise TypeError("len() of a 0-d array")
        return self.aval.shape[0]

    def __hash__(self):
        raise TypeError(f"traced values are unhashable ({self!r}); static arguments must be "
                        "hashable Python values")


_builder_ids = itertools.count()
_LIFT = type("_Lift", (), {"name": "lifting a value into a trace"})()

# Typing by mesh axes (`ShapedArray.vma`, see funcgrad.lax.parallel): a builder with a typed
# input or capture types each equation with `_vma_typing`. A primitive's block may register a
# rule `vma_rules[prim](builder, args, avals, **params)` (loops check their carry); a rule
# returns `(args with invariant operands cast to varying, or None; the outputs' vma)`.
vma_rules = {}
_NO_AXES = frozenset()


def _vma_typing(builder, prim, args, avals, params):
    """`vma_rules[prim]`, else the default: the outputs vary over the union of the operands'
    axes, and an invariant traced operand that meets a varying one is cast by `ops.pvary`
    first. A primitive with `types_vma` types its outputs itself (collectives); one holding
    sub-programs is typed without casts."""
    if getattr(prim, "types_vma", False):
        return None, None
    rule = vma_rules.get(prim)
    if rule is not None:
        return rule(builder, args, avals, **params)
    vmas = [a.vma or _NO_AXES for a in avals]
    union = _NO_AXES.union(*vmas)
    if not union or _holds_programs(params):
        return None, union
    new = None
    for i, (x, v) in enumerate(zip(args, vmas)):
        if v != union and isinstance(x, Tracer):
            new = list(args) if new is None else new
            missing = tuple(sorted(union - v))
            new[i] = builder.process(ops.pvary, [x], {"axis_name": missing})[0]
    return new, union


def _holds_programs(params):
    for v in params.values():
        if isinstance(v, (Jaxpr, ClosedJaxpr)) or (
                isinstance(v, tuple) and v and isinstance(v[0], (Jaxpr, ClosedJaxpr))):
            return True
    return False


class Builder:
    """A trace that records equations into a jaxpr.

    `parent` is the trace one level up (None: eager). With `compute_known`, every
    equation whose inputs have known values also binds the primitive in `parent` and
    the result becomes the output tracer's `val` (define-by-run, as used by grad).
    """

    def __init__(self, parent, compute_known, name):
        self.parent = parent
        self.compute_known = compute_known
        self.name = name
        self.alive = True
        self.eqns = []
        self.invars = []
        self.constvars = []
        self.constvals = []
        self._captured = {}
        self.known = {}  # var -> value one level up, for vars whose value is known
        self.id = next(_builder_ids)
        self.typed = False  # holds values typed by mesh axes (see `vma_rules`)
        self.compiled = False  # jit sets it: the program is compiled, its dead code dropped

    def new_input(self, aval, val=None):
        var = Var(aval)
        self.typed = self.typed or aval.vma is not None
        self.invars.append(var)
        if val is not None:
            self.known[var] = val
        return Tracer(self, aval, var, val)

    def is_ancestor(self, trace):
        t = self.parent
        while t is not None:
            if t is trace:
                return True
            t = t.parent
        return False

    def lift(self, x):
        """A tracer of this builder standing for `x` (captures foreign values)."""
        if isinstance(x, Tracer) and x._trace is self:
            return x
        atom, aval, val = self._atom(x)
        return Tracer(self, aval, atom, val)

    def _atom(self, x, prim=_LIFT):
        if isinstance(x, Tracer):
            if x._trace is self:
                return x.atom, x.aval, x.val
            if not x._trace.alive or not self.is_ancestor(x._trace):
                _leaked(x, _LiftPrim(self.name))
            return self._capture(x, x.aval)
        t = type(x)
        if t is float or t is int or t is bool or t is complex:
            arr = _operand(prim, x)
            v = arr._value
            return Literal(v[()], arr.aval), arr.aval, arr
        if t is not Array:
            x = _operand(prim, x)
        if x._value.ndim == 0:
            return Literal(x._value[()], x.aval), x.aval, x
        return self._capture(x, x.aval)

    def _capture(self, x, aval):
        hit = self._captured.get(id(x))
        if hit is not None:
            return hit[0], aval, x
        var = Var(aval)
        self.typed = self.typed or aval.vma is not None
        self._captured[id(x)] = (var, x)
        self.constvars.append(var)
        self.constvals.append(x)
        self.known[var] = x
        return var, aval, x

    def process(self, prim, args, params):
        atoms, avals, vals = [], [], []
        for a in args:
            if isinstance(a, Tracer) and a._trace is self:
                atoms.append(a.atom), avals.append(a.aval), vals.append(a.val)
            else:
                atom, aval, val = self._atom(a, prim)
                atoms.append(atom), avals.append(aval), vals.append(val)
        out_vma = None
        if self.typed:
            new_args, out_vma = _vma_typing(self, prim, args, avals, params)
            if new_args is not None:  # operands cast to varying first (`pvary`)
                return self.process(prim, new_args, params)
        out_avals = _cached_abstract_eval(prim, avals, params)
        multi = prim.multiple_results
        out_avals_l = out_avals if multi else [out_avals]
        if out_vma is not None:
            out_avals_l = [a if a.vma is not None else a.update(vma=out_vma)
                           for a in out_avals_l]
        out_vals = None
        src = _source_override.get() or _named(errors.user_frame(3))
        if self.compute_known and all(v is not None for v in vals):
            tokens = _known_for.set(self), _source_override.set(src)
            try:
                out_vals = bind_at(self.parent, prim, vals, params)
            finally:
                _source_override.reset(tokens[1]), _known_for.reset(tokens[0])
            out_vals = out_vals if multi else [out_vals]
        outvars = [Var(a) for a in out_avals_l]
        self.eqns.append(Eqn(prim, atoms, outvars, params, src))
        if out_vals is None:
            outs = [Tracer(self, a, v) for a, v in zip(out_avals_l, outvars)]
        else:
            outs = []
            for a, v, val in zip(out_avals_l, outvars, out_vals):
                self.known[v] = val
                outs.append(Tracer(self, a, v, val))
        return outs if multi else outs[0]

    def to_jaxpr(self, outs):
        """Close the trace: a `Jaxpr` with captured values as constvars, and those values."""
        outvars = [self.lift(o).atom for o in outs]
        jaxpr = Jaxpr(list(self.constvars), list(self.invars), outvars, list(self.eqns))
        if config._values["check_jaxprs"]:
            from funcgrad.core.ir import typecheck_jaxpr
            typecheck_jaxpr(jaxpr)
        return jaxpr, list(self.constvals)


class _LiftPrim:
    def __init__(self, name):
        self.name = f"lifting into {name}"


@contextlib.contextmanager
def new_builder(name, compute_known=False, parent=None):
    """Open a `Builder` over the current trace and make it current inside the block."""
    b = Builder(current_trace() if parent is None else parent, compute_known, name)
    try:
        with set_trace(b):
            yield b
    finally:
        b.alive = False


@nests
def trace_to_jaxpr(fun, in_avals, name="make_jaxpr"):
    """Trace `fun(*tracers)` (flat lists in and out) abstractly into a ClosedJaxpr."""
    with new_builder(name) as b:
        ins = [b.new_input(a) for a in in_avals]
        outs = fun(*ins)
        jaxpr, consts = b.to_jaxpr(outs)
    return ClosedJaxpr(jaxpr, consts)


@nests
def eval_jaxpr(jaxpr, consts, *args):
    """Evaluate `jaxpr` by binding each equation in the current trace (re-traceable)."""
    env = {}
    for v, x in zip(jaxpr.constvars, consts):
        env[v] = x
    for v, x in zip(jaxpr.invars, args):
        env[v] = x

    def read(a):
        return a.val if type(a) is Literal else env[a]

    for eqn in jaxpr.eqns:
        with source_context(eqn.source):
            outs = eqn.prim.bind(*[read(a) for a in eqn.invars], **eqn.params)
        if eqn.prim.multiple_results:
            for v, o in zip(eqn.outvars, outs):
                env[v] = o
        else:
            env[eqn.outvars[0]] = outs
    return [read(v) for v in jaxpr.outvars]


def jaxpr_as_fun(closed):
    """A Python function evaluating a ClosedJaxpr (flat args in, flat list out)."""
    return lambda *args: eval_jaxpr(closed.jaxpr, closed.consts, *args)
