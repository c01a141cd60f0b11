"""The numpy renderer's tables: how one primitive becomes one numpy expression.

`elementwise_rule(op)` is the rule of a fused kernel's scalar op (a fusible primitive's
name): `rule(args, dtypes, params, consts)` returns `(expression, kind)` or None (`consts[i]`
is the value of a constant operand, else None), with `{out}` where the output buffer goes
(`, out=b3`, or nothing). The rule is `ELEMENTWISE[prim]`, keyed by the primitive, or by
default the numpy ufunc that is the primitive's eager implementation: the table lists only
the primitives computed otherwise, and `UNFUSED` those that have no expression, with why
(a kernel calls their eager implementation). Kinds: "ufunc" (writes into `out=`, may run in
place), "ufunc!" (the same, but must be given an `out=` buffer), "fresh" (allocates),
"alias" (a view of an operand). `CALLS[prim](r, eqn, args)` does the same for equations run
outside kernels, with kinds "out" (writes into `out=` that is not an operand), "fresh" or
"view". A primitive in neither table runs through its eager implementation as a library
call bound into the program. Extensions add expressions with `def_expression`.
"""

import math

import numpy as np

from funcgrad import dtypes, lax
from funcgrad.compiler import escape
from funcgrad.core import Primitive, ReduceOp


def ufunc(fn):
    """The rule computing with the numpy ufunc `fn` (`np.add(a0, a1{out})`)."""
    name = _numpy_name(fn)
    return lambda args, dts, p, consts=None: (f"np.{name}({', '.join(args)}{{out}})", "ufunc")


def fresh(fn):
    """The rule computing with the numpy function `fn`, which takes no `out=` (`np.sinc`)."""
    name = _numpy_name(fn)
    return lambda args, dts, p, consts=None: (f"np.{name}({', '.join(args)})", "fresh")


def _numpy_name(fn):
    name = getattr(fn, "__name__", None)
    if name is None or getattr(np, name, None) is not fn:
        raise ValueError(f"{fn!r} is not a function of the numpy namespace")
    return name


def _impl_ufunc(prim):
    """The numpy ufunc that is `prim`'s eager implementation (through `functools.wraps`
    wrappers), or None."""
    fn = prim.impl_rule
    while hasattr(fn, "__wrapped__"):
        fn = fn.__wrapped__
    if isinstance(fn, np.ufunc) and getattr(np, fn.__name__, None) is fn:
        return fn
    return None


def _float_ufunc(fn):
    """`ufunc(fn)` for float and complex operands only (numpy's integer semantics differ)."""
    rule = ufunc(fn)
    return lambda args, dts, p, consts=None: (
        rule(args, dts, p) if dtypes.kind(dts[0]) in "fc" else None)


def _real_ufunc(fn):
    """`ufunc(fn)` for real operands; complex ones run the eager impl (it adds the Array API's
    special cases that numpy's complex loop misses)."""
    rule = ufunc(fn)
    return lambda args, dts, p, consts=None: (
        rule(args, dts, p) if dtypes.kind(dts[0]) == "f" else None)


INTEGER_POW_MAX = 64  # larger exponents call np.power


def _integer_pow(args, dts, p, consts=None):
    # x ** y by repeated squaring, in the order `cstyle._integer_pow` multiplies (and XLA):
    # x**3 is x * x**2, bit for bit what the C backends compute; y < 0 is 1 / x**-y.
    y, x = p["y"], args[0]
    if abs(y) > INTEGER_POW_MAX:
        ok = y >= 1 or dtypes.kind(dts[0]) in "fc"
        return (f"np.power({x}, {y}{{out}})", "ufunc") if ok else None
    if y < 0 and dtypes.kind(dts[0]) not in "fc":
        return None
    if y == 0:
        return f"np.ones_like({x})", "fresh"
    result, base, e = None, x, abs(y)
    while e:
        if e & 1:
            result = base if result is None else f"np.multiply({result}, {base})"
        e >>= 1
        if e:
            base = f"np.square({base})"
    if y < 0:
        return f"np.divide(1, {result}{{out}})", "ufunc"
    if result == x:
        return f"np.positive({x}{{out}})", "ufunc"
    return result[:-1] + "{out})", "ufunc"


def _rsqrt(args, dts, p, consts=None):
    if dtypes.kind(dts[0]) != "f":
        return None
    return f"np.divide(1.0, np.sqrt({args[0]}{{out}}){{out}})", "ufunc"


def _is_plus_zero(c):
    return c is not None and c == 0 and not np.signbit(c)


def _select_n(args, dts, p, consts=None):
    if len(args) != 3 or dtypes.kind(dts[0]) != "b":
        return None
    consts = consts or [None] * 3
    dt = dts[1] if consts[1] is None else dts[2]
    if (dtypes.kind(dt) == "f" and dt.itemsize in (2, 4, 8)
            and (consts[1] is None) != (consts[2] is None)):
        # which ? x : +0.0 as a bit mask: exact (it selects bits), and unlike np.where
        # branch-free, so about 15x faster on random masks (ReLU)
        i = f"np.int{dt.itemsize * 8}"
        which = f"{args[0]}.view(np.int8)"
        if _is_plus_zero(consts[1]):  # cases[1] where which, else +0.0
            mask, x = f"np.negative({which}, dtype={i})", args[2]
        elif _is_plus_zero(consts[2]):  # +0.0 where which, else cases[0]
            mask, x = f"np.subtract({which}, 1, dtype={i})", args[1]
        else:
            return f"np.where({args[0]}, {args[2]}, {args[1]})", "fresh"
        return f"np.bitwise_and({x}.view({i}), {mask}{{out}}.view({i}))", "ufunc!"
    return f"np.where({args[0]}, {args[2]}, {args[1]})", "fresh"


def _clamp(args, dts, p, consts=None):
    lo, x, hi = args
    return f"np.minimum(np.maximum({x}, {lo}{{out}}), {hi}{{out}})", "ufunc"


def _convert(args, dts, p, consts=None):
    src, dst = dts[0], np.dtype(p["new_dtype"])
    if dtypes.kind(src) == "c":
        return None
    if dtypes.kind(src) == "f" and dtypes.kind(dst) == "b":
        return f"np.not_equal({args[0]}, 0{{out}})", "ufunc"
    if dtypes.kind(src) == "f" and dtypes.kind(dst) in "iu":
        return _float_to_int(args[0], dst)
    return f"{args[0]}.astype({dtype_text(dst)})", "fresh"


def _float_to_int(x, dst):
    # As lax.elementwise.float_to_int (XLA's rule): toward zero, saturating, NaN -> 0. Up to
    # 32 bits the clip runs in a float type holding the bounds exactly and casts into `out`.
    info = dtypes.iinfo(dst)
    if dst.num >= 256:  # int4 & co. (ml_dtypes): numpy's ufuncs do not write them
        return (f"np.clip(np.where({x} == {x}, np.trunc({x}), 0), {info.min}, {info.max})"
                f".astype({dtype_text(dst)})"), "fresh"
    wide = dst.itemsize == 8
    f = "np.float32" if dst.itemsize < 4 else "np.float64"
    hi = repr(float(np.nextafter(2.0 ** (64 - (info.min < 0)), 0))) if wide else info.max
    out = "" if wide else "{out}, casting='unsafe'"
    if info.min == 0:  # fmax maps NaN to 0
        inside = f"np.fmin(np.fmax({x}, {f}(0)), {f}({hi}){out})"
    else:
        inside = f"np.clip(np.where({x} == {x}, {x}, 0), {f}({info.min}), {f}({hi}){out})"
    if not wide:
        return inside, "ufunc!"
    top = repr(2.0 ** (64 if info.min == 0 else 63))
    return (f"np.where({x} >= np.float64({top}), np.{dst.name}({info.max}), "
            f"{inside}.astype(np.{dst.name}))"), "fresh"


def _conj(args, dts, p, consts=None):
    # a real operand is left to the eager implementation: its complex result has imag -0.0
    return (f"np.conjugate({args[0]}{{out}})", "ufunc") if dtypes.kind(dts[0]) == "c" else None


def _part(fn):
    """`np.real`/`np.imag`: a view of a complex operand's part."""
    name = _numpy_name(fn)
    return lambda args, dts, p, consts=None: (f"np.{name}({args[0]})", "alias")


def _round(args, dts, p, consts=None):
    # ties away from zero (method 0) needs trunc, a comparison and a select: left to the
    # eager implementation
    return (f"np.rint({args[0]}{{out}})", "ufunc") if p["rounding_method"] == 1 else None


def _population_count(args, dts, p, consts=None):
    if consts and consts[0] is not None:
        return None
    u = f"np.uint{dts[0].itemsize * 8}"  # counts uint8 values, cast into the int `out`
    return f"np.bitwise_count({args[0]}.view({u}){{out}})", "ufunc!"


def _shift(fn):
    """A shift of unsigned operands by a constant amount in [0, bits): the plain ufunc (XLA's
    rule for amounts past the bit width needs the eager implementation's mask)."""
    rule = ufunc(fn)

    def shift(args, dts, p, consts=None):
        amount = consts[1] if consts else None
        if dtypes.kind(dts[0]) != "u" or amount is None or np.ndim(amount) != 0:
            return None
        if not 0 <= int(amount) < dts[0].itemsize * 8:
            return None
        return rule(args, dts, p)
    return shift


ELEMENTWISE = {
    lax.shift_left_p: _shift(np.left_shift), lax.shift_right_logical_p: _shift(np.right_shift),
    lax.div_p: _float_ufunc(np.divide), lax.rem_p: _float_ufunc(np.fmod),
    lax.integer_pow_p: _integer_pow, lax.rsqrt_p: _rsqrt, lax.select_n_p: _select_n,
    lax.clamp_p: _clamp, lax.convert_element_type_p: _convert, lax.conj_p: _conj,
    lax.real_p: _part(np.real), lax.imag_p: _part(np.imag), lax.round_p: _round,
    lax.population_count_p: _population_count,
    lax.expm1_p: _real_ufunc(np.expm1), lax.tanh_p: _real_ufunc(np.tanh),
}

_NO_UFUNC = "no numpy ufunc computes it (scipy is not a dependency)"
_MASKED = "XLA's rule for shift amounts past the bit width needs a mask and a select"
UNFUSED = {
    lax.erf_p: _NO_UFUNC, lax.erfc_p: _NO_UFUNC, lax.erf_inv_p: _NO_UFUNC,
    lax.lgamma_p: _NO_UFUNC, lax.digamma_p: _NO_UFUNC,
    lax.logistic_p: "the overflow-free form picks one of two expressions per element",
    lax.shift_right_arithmetic_p: _MASKED,
}


def elementwise_rule(op):
    """The rule of kernel op `op` (a fusible primitive's name), or None (its eager
    implementation is called)."""
    prim = Primitive.fusible_named(op)
    if prim is None or prim.kind != "elementwise":
        return None
    rule = ELEMENTWISE.get(prim)
    if rule is None and prim not in UNFUSED:
        fn = _impl_ufunc(prim)
        rule = None if fn is None else ufunc(fn)
    return rule


def def_expression(prim, rule):
    """Give the fusible elementwise primitive `prim` (one defined outside the package, say)
    the numpy rule `rule(args, dtypes, params, consts)` (`ufunc(np.fn)`, `fresh(np.fn)` or
    a function; see the module docstring)."""
    if prim.kind != "elementwise" or not prim.fusible:
        raise ValueError(f"{prim.name}: only a fusible elementwise primitive has a kernel "
                         f"expression (declared kind {prim.kind!r}, fusible={prim.fusible})")
    ELEMENTWISE[prim] = rule


_KEEPS_DTYPE = (np.dtype("float32"), np.dtype("float64"))  # else add/multiply widen


def reduce_expr(op, arg, axes, dtype):
    """`np.add.reduce(x, axis=(1,), ...{out})` for a kernel's reduction output: the ufunc of
    its `ReduceOp` (`op`, a name), in the output's dtype. A bfloat16 (float8, int4...) one
    reduces the operand widened (`dtypes.compute_dtype`) and rounds the result once: a new
    array (`np.add.reduce(x.astype(np.float32), axis=1).astype(...)`), as numpy would round a
    reduction into an `out=` of another dtype more than once (per buffered chunk)."""
    rec = ReduceOp.named(op)
    ax = str(axes[0]) if len(axes) == 1 else str(tuple(axes))
    fold = f"np.{rec.ufunc.__name__}.reduce"
    wide = dtypes.compute_dtype(dtype)
    if wide != dtype:
        return (f"np.asarray({fold}({arg}.astype({dtype_text(wide)}), axis={ax}))"
                f".astype({dtype_text(dtype)})")
    keep = rec.selects or dtype in _KEEPS_DTYPE
    dt = "" if keep else f", dtype={dtype_text(dtype)}"
    return f"{fold}({arg}, axis={ax}{dt}{{out}})"


# --- calls ----------------------------------------------------------------------------------

def _shape(s):
    return f"({s[0]},)" if len(s) == 1 else str(tuple(s))


def reshape_args(s):
    """Arguments of `.reshape`: `(128, 512)`, `((5,))`... and `(())` for a scalar."""
    return "(())" if len(s) == 0 else f"(({s[0]},))" if len(s) == 1 else str(tuple(s))


def _perm_expr(x, perm, ndim):
    if perm == tuple(range(ndim)):
        return x
    if ndim == 2:
        return f"{x}.T"
    return f"{x}.transpose{tuple(perm)}"


def _matmul_operand(x, shape, batch, first, second):
    """`x` transposed to (batch, first, second) and, when needed, reshaped to 2 or 3 axes."""
    perm = tuple(batch) + tuple(first) + tuple(second)
    expr = _perm_expr(x, perm, len(shape))
    size = lambda axes: math.prod(shape[a] for a in axes)
    flat = ((size(batch),) if batch else ()) + (size(first), size(second))
    if len(batch) <= 1 and len(first) == 1 and len(second) == 1:
        return expr, False
    return f"{expr}.reshape{flat}", True


def _dot_general(r, eqn, args):
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    x, y = eqn.invars
    out = eqn.outvars[0].aval
    pref = eqn.params.get("preferred_element_type")
    if (x.aval.dtype != out.dtype or y.aval.dtype != out.dtype or dtypes.kind(out.dtype) == "b"
            or (pref is not None and np.dtype(pref) != out.dtype)):
        return None
    lf = [i for i in range(x.aval.ndim) if i not in lc and i not in lb]
    rf = [i for i in range(y.aval.ndim) if i not in rc and i not in rb]
    lhs, l_re = _matmul_operand(args[0], x.aval.shape, lb, lf, lc)
    rhs, r_re = _matmul_operand(args[1], y.aval.shape, rb, rc, rf)
    if not (l_re or r_re):
        return f"np.matmul({lhs}, {rhs}{{out}})", "out"
    return f"np.matmul({lhs}, {rhs}).reshape{reshape_args(out.shape)}", "fresh"


def _reshape(r, eqn, args):
    return f"{args[0]}.reshape{reshape_args(eqn.outvars[0].aval.shape)}", "view"


def _transpose(r, eqn, args):
    perm = tuple(eqn.params["permutation"])
    return _perm_expr(args[0], perm, len(perm)), "view"


def _broadcast_in_dim(r, eqn, args):
    x = eqn.invars[0].aval
    shape, dims = eqn.outvars[0].aval.shape, eqn.params["broadcast_dimensions"]
    n = len(shape)
    src = args[0]
    if tuple(dims) != tuple(range(n - x.ndim, n)) and x.ndim:
        expanded = [1] * (n - dims[0])
        for i, d in enumerate(dims):
            expanded[d - dims[0]] = x.shape[i]
        src = f"{src}.reshape{reshape_args(expanded)}"
    return f"np.broadcast_to({src}, {_shape(shape)})", "view"


class _Padder:
    """`pad` with no negative or interior padding: a filled array with the operand set into
    it (the bound eager implementation costs 3.9 us per call on a scalar, this 1.2 us)."""

    def __init__(self, shape, dtype, index):
        self.shape, self.dtype, self.index = shape, dtype, index

    def __call__(self, x, value):
        out = np.full(self.shape, value, self.dtype)
        out[self.index] = x
        return out


def _pad(r, eqn, args):
    config = eqn.params["padding_config"]
    x, out = eqn.invars[0].aval, eqn.outvars[0].aval
    if any(lo < 0 or hi < 0 or interior for lo, hi, interior in config) or x.dtype != out.dtype:
        return None
    index = tuple(slice(lo, lo + n) for (lo, _, _), n in zip(config, x.shape))
    fn = r.constant(_Padder(tuple(out.shape), out.dtype, index), "_pad")
    return f"{fn}({args[0]}, {args[1]})", "fresh"


CALLS = {lax.dot_general_p: _dot_general, lax.reshape_p: _reshape, lax.squeeze_p: _reshape,
         lax.transpose_p: _transpose, lax.broadcast_in_dim_p: _broadcast_in_dim,
         lax.pad_p: _pad}


def _expanded(inp, S):
    """The shape of a kernel input's view with broadcast axes of size 1, leading ones
    dropped (numpy aligns shapes on the right)."""
    mapped = [ax for ax in inp.axes if ax >= 0]
    if not mapped:
        return ()
    start = min(mapped)
    shape = [1] * (len(S) - start)
    for size, ax in zip(inp.shape, inp.axes):
        if ax >= 0:
            shape[ax - start] = size
    return tuple(shape)


def _in_order(inp):
    order = [ax for ax in inp.axes if ax >= 0]
    return order == sorted(order)


def _as_is(inp, S):
    """True when numpy's broadcasting reads the input correctly without a reshape."""
    n = len(S)
    return inp.is_direct(S) or (_in_order(inp) and len(inp.shape) <= n
                                and _pad(inp.shape, n) == _pad(_expanded(inp, S), n))


def _pad(shape, n):
    return (1,) * (n - len(shape)) + tuple(shape)


def view_shape(inp, S):
    """The shape of the numpy expression `view_text` renders for a kernel input."""
    return tuple(inp.shape) if _as_is(inp, S) else _expanded(inp, S)


def view_text(name, inp, S):
    """Source of the numpy view of kernel input `inp` (base array `name`) over `S`: at most
    a transpose and a reshape, nothing when numpy's broadcasting already lines it up."""
    if _as_is(inp, S):
        return name
    mapped = [(ax, size) for ax, size in zip(inp.axes, inp.shape) if ax >= 0]
    expanded = list(_expanded(inp, S))
    if _in_order(inp):
        return f"{name}.reshape{reshape_args(expanded)}"
    order = [ax for ax, _ in mapped]
    perm = tuple(sorted(range(len(order)), key=lambda i: order[i]))
    expr = name
    if len(mapped) != len(inp.shape):
        expr = f"{expr}.reshape{reshape_args([size for _, size in mapped])}"
    expr = _perm_expr(expr, perm, len(order))
    if expanded != [size for _, size in sorted(mapped)]:
        expr = f"{expr}.reshape{reshape_args(expanded)}"
    return expr


def ident(name):
    """A primitive name as part of a Python identifier (`scatter-add` -> `scatter_add`)."""
    return escape.identifier(name)


def _float_text(v):
    if v != v:
        return "np.nan"
    if v in (float("inf"), float("-inf")):
        return "np.inf" if v > 0 else "-np.inf"
    return repr(v)  # exact, and keeps the sign of -0.0


def literal(value, dtype, typed):
    """Source text of a scalar constant: a Python literal, or `np.float32(...)` if `typed`.
    Every dtype renders as valid source: nan/inf (also in complex parts), -0.0, float16
    (its exact value as a float), the full range of 64-bit integers, bools."""
    dtype = np.dtype(dtype)
    v = np.asarray(value, dtype).item()
    if isinstance(v, complex):
        text = f"complex({_float_text(v.real)}, {_float_text(v.imag)})"
    elif isinstance(v, float):
        text = _float_text(v)
    elif isinstance(v, (bool, int)):
        text = repr(v)
    else:
        raise TypeError(f"no source form for a constant of dtype {dtype}: {type(v).__name__}")
    return f"{dtype_text(dtype)}({text})" if typed and dtype.num < 256 else (
        f"{dtype_text(dtype)}.type({text})" if typed else text)


def dtype_text(dtype):
    """Source of a numpy dtype: `np.float32`, and `np.dtype('bfloat16')` for the ml_dtypes
    types, which numpy knows by name but not as attributes."""
    dtype = np.dtype(dtype)
    return f"np.{dtype.name}" if dtype.num < 256 else f"np.dtype({dtype.name!r})"
