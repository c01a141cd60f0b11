"""NumPy indexing on funcgrad arrays: `x[idx]`, `x.at[idx].set/add/...` and the index functions
(take, take_along_axis, sort, argsort, nonzero, ...), with JAX's semantics.

An index expression is parsed once into a static `_Plan` (`_parse_index`). Basic entries (ints,
slices, None, ...) become lax.slice/rev/reshape; advanced entries (integer arrays, concrete
boolean masks, traced integers) become one gather, or one scatter for `.at`. Installs
`__getitem__` and `.at` on `ArrayBase` at import. Imports lax and funcgrad.core only (and
funcgrad.numpy lazily, for `divide`/`power`); never applies numpy to tracers.
"""

import math
import operator
from typing import NamedTuple

import numpy as np

from funcgrad import dtypes, errors, lax
from funcgrad.core import Array, ArrayBase, Tracer, concrete_value
from funcgrad.numpy import _util

__all__ = ["put_along_axis", "take", "take_along_axis"]

_I32 = np.dtype(np.int32)
_MODES = (None, "promise_in_bounds", "clip", "fill", "drop")


FuncgradIndexError = errors.FuncgradIndexError


def _index_error(message, hint=None):
    return errors.op_error("indexing", message, cls=FuncgradIndexError, hint=hint)


def _asarray(x):
    return _util.asarray_operand("indexing", x)


def _const(value, dtype):
    return Array(np.asarray(value, dtype))


def _prod(shape):
    return math.prod(int(s) for s in shape)


# --- parsing an index expression ------------------------------------------------------------

class _Plan(NamedTuple):
    entries: tuple     # (kind, payload): none | slice (start, stop, step, len) | int | dyn | adv
    xshape: tuple      # x's shape with a size-1 axis inserted for each scalar-bool index
    adv_shape: tuple   # broadcast shape of the advanced indices; None for basic indexing
    contiguous: bool   # advanced indices adjacent: their dims stay in place, else go first
    out_shape: tuple


def _static_slice(s):
    for v in (s.start, s.stop, s.step):
        if v is not None and not isinstance(v, (int, np.integer)):
            if isinstance(v, Tracer):
                raise _index_error(
                    f"slice bounds must be static, got slice({errors.short_repr(s.start)}, "
                    f"{errors.short_repr(s.stop)}, {errors.short_repr(s.step)})",
                    hint="to index a static-size window at a traced position use "
                         "funcgrad.lax.dynamic_slice or dynamic_update_slice")
            operator.index(v)
    return s


def _list_to_numpy(seq):
    """A list index as a numpy array; one holding traced values is stacked (a tracer)."""
    try:
        arr = np.asarray(seq) if len(seq) else np.zeros(0, np.intp)
    except errors.TracerArrayConversionError:
        return _util.stack_sequence("indexing", seq)
    except ValueError:
        arr = np.asarray(seq, dtype=object)
    if arr.dtype == object:
        raise errors.op_error("indexing", f"unsupported index {errors.short_repr(seq)}",
                              hint="use a tuple, x[tuple(seq)], for multidimensional indexing")
    return arr


def _classify(i):
    """(kind, value): none | ellipsis | slice | bool0 | int | dyn | array | mask."""
    if i is None:
        return "none", None
    if i is Ellipsis:
        return "ellipsis", None
    if isinstance(i, slice):
        return "slice", _static_slice(i)
    if isinstance(i, (bool, np.bool_)):
        return "bool0", bool(i)
    if isinstance(i, (int, np.integer)):
        return "int", int(i)
    if isinstance(i, (list, tuple)):
        i = _list_to_numpy(i)
    if isinstance(i, Tracer):
        dt = i.aval.dtype
        if dt == np.bool_:
            i = _concrete_mask(i)
        elif dtypes.is_integer(dt):
            return ("dyn" if i.ndim == 0 else "array"), i
    elif isinstance(i, Array):
        i = i._value
    if isinstance(i, (np.ndarray, np.generic)):
        if i.dtype == np.bool_:
            return ("bool0", bool(i)) if i.ndim == 0 else ("mask", np.asarray(i))
        if dtypes.kind(i.dtype) in "iu":
            return ("int", int(i)) if i.ndim == 0 else ("array", np.asarray(i))
    dt = getattr(i, "dtype", type(i).__name__)
    raise errors.op_error(
        "indexing", f"indexer must have integer or boolean type, got {dt} ({errors.short_repr(i)})",
        hint="convert float index arrays with .astype(int)")


def _concrete_mask(mask):
    v = concrete_value(mask)
    if v is None:
        raise errors.op_error(
            "indexing", f"a boolean mask of shape {mask.shape} ({mask.aval}) is a traced value, "
            "so the shape of the result would depend on its values",
            cls=errors.ConcretizationTypeError,
            hint="keep the shape with fnp.where(mask, x, 0), or fix the number of selected "
                 "elements with fnp.nonzero(mask, size=N) and index with the result")
    return v


_plan_cache = {}


def _static_key(idx):
    """A hashable key for an index made only of ints, int/None slices, None and `...`
    (the common basic indices, whose plans are cached), or None."""
    key = []
    for it in idx if type(idx) is tuple else (idx,):
        t = type(it)
        if t is int or it is None or it is Ellipsis:
            key.append(it)
        elif t is slice and all(type(v) is int or v is None
                                for v in (it.start, it.stop, it.step)):
            key.append((it.start, it.stop, it.step))
        else:
            return None
    return type(idx) is tuple, tuple(key)


def _parse_index(shape, idx, strict, force_adv):
    """A `_Plan` for `x[idx]`; `strict` raises on static out-of-range ints, `force_adv`
    turns ints and traced scalars into advanced indices (for gather/scatter modes)."""
    key = _static_key(idx)
    if key is None:
        return _parse_index_uncached(shape, idx, strict, force_adv)
    key = (shape, key, strict, force_adv)
    plan = _plan_cache.get(key)
    if plan is None:
        plan = _parse_index_uncached(shape, idx, strict, force_adv)
        if len(_plan_cache) > 4096:
            _plan_cache.clear()
        _plan_cache[key] = plan
    return plan


def _parse_index_uncached(shape, idx, strict, force_adv):
    items = [_classify(i) for i in (idx if isinstance(idx, tuple) else (idx,))]
    kinds = [k for k, _ in items]
    consumed = sum(v.ndim if k == "mask" else k in ("slice", "int", "dyn", "array")
                   for k, v in items)
    if kinds.count("ellipsis") > 1:
        raise _index_error("an index can only have a single ellipsis ('...')")
    if consumed > len(shape):
        raise _index_error(f"too many indices: array of shape {shape} is {len(shape)}-"
                           f"dimensional, but {consumed} were indexed")
    has_adv = any(k in ("array", "mask", "bool0") for k in kinds) or (
        force_adv and any(k in ("int", "dyn") for k in kinds))
    entries, xshape, adv_pos = [], [], []
    src = pos = 0

    def take_dim(entry, advanced):
        nonlocal src, pos
        entries.append(entry)
        xshape.append(shape[src])
        if advanced:
            adv_pos.append(pos)
        src += 1
        pos += 1

    for kind, v in items:
        if kind == "none":
            entries.append(("none", None))
            pos += 1
        elif kind == "ellipsis":
            for _ in range(len(shape) - consumed):
                take_dim(("slice", _slice_params(slice(None), shape[src])), False)
            pos += 1
        elif kind == "slice":
            take_dim(("slice", _slice_params(v, shape[src])), False)
        elif kind == "int":
            i = _check_int(v, shape, src, strict)
            take_dim(("adv", np.asarray(i)) if has_adv else ("int", i), has_adv)
        elif kind in ("dyn", "array"):
            take_dim(("adv" if has_adv else kind, v), has_adv)
        elif kind == "mask":
            want = tuple(shape[src:src + v.ndim])
            # a size-0 mask axis selects nothing from any axis (as JAX; NumPy: size 1 only)
            if len(want) != v.ndim or any(k not in (n, 0) for k, n in zip(v.shape, want)):
                raise _index_error(f"boolean index of shape {v.shape} does not match the "
                                   f"indexed dimensions {want} of the array of shape {shape}")
            for a in np.nonzero(v):
                take_dim(("adv", a), True)
        else:  # bool0: a new size-1 axis indexed by arange(0 or 1)
            entries.append(("adv", np.arange(int(v))))
            xshape.append(1)
            adv_pos.append(pos)
            pos += 1
    while src < len(shape):
        take_dim(("slice", _slice_params(slice(None), shape[src])), False)
    adv_shape = _broadcast_index_shapes(entries) if has_adv else None
    contiguous = all(b - a == 1 for a, b in zip(adv_pos, adv_pos[1:]))
    return _Plan(tuple(entries), tuple(xshape), adv_shape, contiguous,
                 _out_shape(entries, adv_shape, contiguous))


def _slice_params(s, n):
    try:
        start, stop, step = s.indices(n)
    except ValueError as e:
        raise errors.op_error("indexing", f"invalid slice {s}: {e}",
                              cls=errors.FuncgradValueError) from None
    return start, stop, step, len(range(start, stop, step))


def _check_int(i, shape, axis, strict):
    """A static int index made non-negative. Out of range, `strict` clamps it into the axis
    (JAX's rule for reads: `arange(3.)[5]` is the last element, negative indices wrap first);
    otherwise it is returned as is (updates drop it, gather/scatter modes handle it)."""
    n = shape[axis]
    if -n <= i < n:
        return i + n if i < 0 else i
    if strict:
        if n == 0:
            raise _index_error(f"index {i} is out of bounds for axis {axis} with size 0 "
                               f"(array shape {shape})")
        return min(max(i + n if i < 0 else i, 0), n - 1)
    return i


def _broadcast_index_shapes(entries):
    shapes = [tuple(np.shape(p)) if isinstance(p, np.ndarray) else p.shape
              for k, p in entries if k == "adv"]
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise _index_error("shape mismatch: indexing arrays could not be broadcast together "
                           f"with shapes {', '.join(map(str, shapes))}") from None


def _out_shape(entries, adv_shape, contiguous):
    out, placed = [], adv_shape is not None and not contiguous
    for kind, p in entries:
        if kind == "none":
            out.append(1)
        elif kind == "slice":
            out.append(p[3])
        elif kind == "adv" and not placed:
            out.extend(adv_shape)
            placed = True
    return tuple(adv_shape) + tuple(out) if adv_shape is not None and not contiguous else tuple(out)


# --- index arrays ---------------------------------------------------------------------------

def _normalize(index, n):
    """`index` as int32 with negative values wrapped by the axis size `n`."""
    wrap = dtypes.kind(index.dtype) == "i"
    if isinstance(index, np.ndarray):
        a = np.where(index < 0, index + n, index) if wrap else index
        if a.dtype.itemsize > 4 or a.dtype == np.uint32:  # saturate instead of wrapping
            a = np.minimum(np.maximum(a, -2**31), 2**31 - 1)
        return a.astype(_I32, copy=False)
    if index.dtype != _I32:
        index = lax.convert_element_type(index, _I32)
    if not wrap:
        return index
    return lax.select_n(lax.lt(index, _const(0, _I32)), index, lax.add(index, _const(n, _I32)))


def _stack_indices(comps, shape):
    """An int32 array `shape + (len(comps),)` whose k-th slice broadcasts comps[k] = (a, dims),
    axis j of `a` landing on axis dims[j] of `shape`."""
    shape = tuple(shape)
    if all(isinstance(a, np.ndarray) for a, _ in comps):
        out = np.empty(shape + (len(comps),), _I32)
        for k, (a, dims) in enumerate(comps):
            placed = [1] * len(shape)
            for j, d in enumerate(dims):
                placed[d] = a.shape[j]
            out[..., k] = a.reshape(placed)
        return Array(out)
    parts = [lax.broadcast_in_dim(Array(a) if isinstance(a, np.ndarray) else a,
                                  shape + (1,), dims) for a, dims in comps]
    return parts[0] if len(parts) == 1 else lax.concatenate(parts, len(shape))


def _adv_dims(plan):
    """x-axes of the advanced entries with each payload's axes placed in the index batch shape."""
    nb = len(plan.adv_shape)
    return [(d, p, tuple(range(nb - np.ndim(p), nb)))
            for d, (k, p) in enumerate(e for e in plan.entries if e[0] != "none") if k == "adv"]


# --- x[idx] ---------------------------------------------------------------------------------

def getitem(x, idx):
    """`x[idx]` with NumPy's semantics and JAX's out-of-bounds rule (clamp), for static ints
    as for index arrays: `fnp.arange(3.)[5]` is 2.0 and `[-5]` is 0.0, as in JAX.

    Basic indices (ints, slices, None, ...) lower to slice/rev/reshape; integer arrays,
    concrete boolean masks and traced integers to one gather. Differs from JAX where NumPy
    is clearer: a non-tuple list is an index array, as in NumPy (JAX raises).

    Args:
        x: the array or tracer.
        idx: an int, slice, None, Ellipsis, integer array or list, boolean mask with a
            concrete value, traced integer, or a tuple of these.

    Returns:
        The selected array (a new array; funcgrad arrays are immutable).

    Raises:
        FuncgradIndexError: an int index into an axis of size 0, too many indices, a mask
            of the wrong shape, index arrays that do not broadcast together.
        FuncgradTypeError: float or other non-integer indices.
        ConcretizationTypeError: a boolean mask whose value is traced.

    Example:
        >>> fnp.arange(6).reshape(2, 3)[:, ::-1]
        Array([[2, 1, 0],
               [5, 4, 3]], dtype=int32)
    """
    return _rewriting_take(x, idx)


def _check_mode(mode, op):
    if not (mode in _MODES or not isinstance(mode, str)):
        raise errors.op_error(op, f"unknown mode {errors.short_repr(mode)}; expected one of "
                                  f"{_MODES[1:]}",
                              cls=errors.FuncgradValueError)


def _rewriting_take(x, idx, mode=None, fill_value=None, indices_are_sorted=False,
                    unique_indices=False):
    x = _asarray(x)
    _check_mode(mode, "x.at[...].get")
    _check_fill(fill_value, x)
    plan = _parse_index(x.shape, idx, strict=mode is None, force_adv=mode is not None)
    if plan.xshape != x.shape:
        x = lax.reshape(x, plan.xshape)
    x = _basic_slices(x, plan)
    if plan.adv_shape is not None:
        x = _gather(x, plan, mode=mode, fill_value=fill_value,
                    indices_are_sorted=indices_are_sorted, unique_indices=unique_indices)
    return x if x.shape == plan.out_shape else lax.reshape(x, plan.out_shape)


def _check_fill(fill_value, x):
    """A static `fill_value` must be a number that the operand's dtype holds: a complex
    fill for a real array (or any non-number) is an error, never a silently dropped part."""
    if not isinstance(fill_value, (bool, int, float, complex, str, np.generic, np.ndarray)):
        return  # None, or an Array/tracer: lax's gather converts it
    kind = dtypes.kind(np.asarray(fill_value).dtype)
    if kind not in "biufc" or (kind == "c" and dtypes.kind(x.dtype) != "c"):
        raise errors.op_error("take", f"fill_value {errors.short_repr(fill_value)} does not "
                                      f"fit the array's dtype {x.dtype}",
                              cls=errors.FuncgradTypeError,
                              hint="pass a real number for a real array")


def _basic_slices(x, plan):
    """Apply the slices, static ints (kept as size-1 axes) and traced scalar ints of `plan`."""
    starts, limits, strides, revs, dyn = [], [], [], [], []
    for d, (kind, p) in enumerate(e for e in plan.entries if e[0] != "none"):
        n = x.shape[d]
        lo, hi, st = 0, n, 1
        if kind == "int":
            lo, hi = p, p + 1
        elif kind == "dyn":
            dyn.append((d, p))
        elif kind == "slice":
            start, _, step, length = p
            last = start + (length - 1) * step
            lo, hi, st = (start, last + 1, step) if step > 0 else (last, start + 1, -step)
            if length == 0:
                lo, hi, st = 0, 0, 1
            if step < 0 and length > 1:
                revs.append(d)
        starts.append(lo), limits.append(hi), strides.append(st)
    if starts != [0] * x.ndim or limits != list(x.shape) or strides != [1] * x.ndim:
        x = lax.slice(x, starts, limits, None if strides == [1] * x.ndim else strides)
    if revs:
        x = lax.rev(x, tuple(revs))
    if dyn:
        start, sizes = [0] * x.ndim, list(x.shape)
        for d, p in dyn:
            start[d], sizes[d] = _normalize(p, x.shape[d]), 1
        x = lax.dynamic_slice(x, start, sizes, allow_negative_indices=False)
    return x


def _gather(x, plan, **kw):
    adv = _adv_dims(plan)
    nb, axes = len(plan.adv_shape), [d for d, _, _ in adv]
    rest = [s for d, s in enumerate(x.shape) if d not in axes]
    p = axes[0] if plan.contiguous else 0
    out_shape = tuple(rest[:p]) + tuple(plan.adv_shape) + tuple(rest[p:])
    if _prod(plan.adv_shape) and any(x.shape[d] == 0 for d in axes):
        raise _index_error(f"index is out of bounds for an axis of size 0 (array shape "
                           f"{x.shape})")
    if _prod(out_shape) == 0:
        return lax.full(out_shape, 0, x.dtype)
    indices = _stack_indices([(_normalize(a, x.shape[d]), dims) for d, a, dims in adv],
                             plan.adv_shape)
    offset = tuple(range(p)) + tuple(range(p + nb, nb + len(rest)))
    dnums = lax.GatherDimensionNumbers(offset_dims=offset, collapsed_slice_dims=tuple(axes),
                                       start_index_map=tuple(axes))
    sizes = tuple(1 if d in axes else s for d, s in enumerate(x.shape))
    return lax.gather(x, indices, dnums, sizes, **kw)


# --- x.at[idx] ------------------------------------------------------------------------------

def _broadcast_to(y, shape, what):
    """`y` broadcast to `shape` by NumPy's rules (leading size-1 axes of `y` may be dropped)."""
    ys = tuple(y.shape)
    while len(ys) > len(shape) and ys[0] == 1:
        ys = ys[1:]
    lead = len(shape) - len(ys)
    if lead < 0 or any(a not in (1, b) for a, b in zip(ys, shape[lead:])):
        raise errors.op_error(what, f"cannot broadcast values of shape {tuple(y.shape)} to "
                              f"the indexed shape {tuple(shape)}",
                              cls=errors.FuncgradValueError)
    if ys != tuple(y.shape):
        y = lax.reshape(y, ys)
    if ys == tuple(shape):
        return y
    return lax.broadcast_in_dim(y, tuple(shape), tuple(range(lead, len(shape))))


def _scatter_update(x, idx, values, op, mode=None, indices_are_sorted=False,
                    unique_indices=False):
    """`x` with `op` ("set", "add", "mul", "min", "max") applied at `x[idx]`."""
    what = f"x.at[...].{op}"
    x = _asarray(x)
    _check_mode(mode, what)
    plan = _parse_index(x.shape, idx, strict=False, force_adv=mode is not None)
    if mode is None and _static_out_of_range(plan):
        return x  # JAX drops updates at out-of-range indices (here, every one of them)
    y = _util.asarray_operand(what, values, x.dtype)
    if y.dtype != x.dtype or y.weak_type != x.weak_type:
        y = lax.convert_element_type(y, x.dtype, weak_type=x.weak_type)
    y = _broadcast_to(y, plan.out_shape, what)
    if _prod(plan.out_shape) == 0:
        return x
    xe = x if plan.xshape == x.shape else lax.reshape(x, plan.xshape)
    basic = plan.adv_shape is None and all(
        k in ("none", "int") or k == "slice" and p[2] in (1, -1) for k, p in plan.entries)
    if basic:
        out = _update_slice(xe, plan, y, op)
    else:
        out = _scatter(xe, plan, y, op, mode=mode, indices_are_sorted=indices_are_sorted,
                       unique_indices=unique_indices)
    return out if plan.xshape == x.shape else lax.reshape(out, x.shape)


def _static_out_of_range(plan):
    axes = [e for e in plan.entries if e[0] != "none"]
    return any(k == "int" and not 0 <= p < n for (k, p), n in zip(axes, plan.xshape))


_SCATTER = {"set": "scatter", "add": "scatter_add", "mul": "scatter_mul", "min": "scatter_min",
            "max": "scatter_max"}


def _update_slice(x, plan, y, op):
    """Ints and slices of step +-1: slice, combine, dynamic_update_slice (no scatter)."""
    starts, sizes, revs = [], [], []
    for d, (kind, p) in enumerate(e for e in plan.entries if e[0] != "none"):
        if kind == "int":
            starts.append(p), sizes.append(1)
            continue
        start, _, step, length = p
        starts.append(start if step == 1 else start - length + 1)
        sizes.append(length)
        if step == -1 and length > 1:
            revs.append(d)
    y = lax.reshape(y, sizes) if tuple(y.shape) != tuple(sizes) else y
    y = lax.rev(y, tuple(revs)) if revs else y
    whole = tuple(sizes) == tuple(x.shape)
    if op != "set":
        old = x if whole else lax.slice(x, starts, [s + n for s, n in zip(starts, sizes)])
        y = getattr(lax, op)(old, y)  # lax.add / mul / min / max
    return y if whole else lax.dynamic_update_slice(x, y, starts)


def _scatter(x, plan, y, op, **kw):
    batch = [("b", j) for j in range(len(plan.adv_shape or ()))]
    tags = [] if plan.contiguous else list(batch)   # one per output axis of x[idx]
    d, placed = 0, not plan.contiguous
    for kind, p in plan.entries:
        if kind == "none":
            tags.append(("none", None))
            continue
        if kind == "slice":
            tags.append(("win" if p[2] == 1 else "sb", d))
        elif kind == "adv" and not placed:
            tags.extend(batch)
            placed = True
        d += 1
    kept = [(t, s) for t, s in zip(tags, plan.out_shape) if t[0] != "none"]
    y = lax.reshape(y, tuple(s for _, s in kept))
    scatter_axes = [t for t, _ in kept if t[0] != "win"]
    spos = {t: i for i, t in enumerate(scatter_axes)}
    sshape = tuple(s for t, s in kept if t[0] != "win")
    adv = {d: dims for d, _, dims in _adv_dims(plan)} if plan.adv_shape is not None else {}
    comps, sdims, inserted = [], [], []
    for d, (kind, p) in enumerate(e for e in plan.entries if e[0] != "none"):
        n = x.shape[d]
        if kind == "adv":
            comps.append((_normalize(p, n), tuple(spos[("b", j)] for j in adv[d])))
        elif kind in ("int", "dyn"):
            comps.append((_normalize(np.asarray(p) if kind == "int" else p, n), ()))
        elif p[2] != 1:
            comps.append((np.arange(p[0], p[1], p[2], dtype=_I32), (spos[("sb", d)],)))
        elif (p[0], p[3]) != (0, n):  # a window at a static offset
            comps.append((np.asarray(p[0], _I32), ()))
            sdims.append(d)
            continue
        else:
            continue
        sdims.append(d)
        inserted.append(d)
    indices = _stack_indices(comps, sshape)
    dnums = lax.ScatterDimensionNumbers(
        update_window_dims=tuple(i for i, (t, _) in enumerate(kept) if t[0] == "win"),
        inserted_window_dims=tuple(inserted), scatter_dims_to_operand_dims=tuple(sdims))
    return getattr(lax, _SCATTER[op])(x, indices, y, dnums, **kw)


class _IndexUpdateHelper:
    """The `x.at` object: `x.at[idx]` gives an `_IndexUpdateRef`."""

    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array

    def __getitem__(self, index):
        return _IndexUpdateRef(self.array, index)

    def __repr__(self):
        return f"_IndexUpdateHelper({self.array!r})"


class _IndexUpdateRef:
    """`x.at[idx]`: functional updates of `x` at `idx`, as JAX's `x.at[idx]`.

    `mode` follows JAX: None/"promise_in_bounds" (out-of-bounds updates are dropped, gets
    clamp), "clip", "drop" and "fill" ("drop" for updates; for `get`, out-of-bounds reads
    give `fill_value`). Repeated indices all apply (`add` accumulates).

    Example:
        >>> fnp.zeros(3).at[fnp.array([0, 0, 2])].add(1.0)
        Array([2., 0., 1.], dtype=float32)
    """

    __slots__ = ("array", "index")

    def __init__(self, array, index):
        self.array, self.index = array, index

    def __repr__(self):
        return f"_IndexUpdateRef({self.array!r}, {self.index!r})"

    def get(self, *, indices_are_sorted=False, unique_indices=False, mode=None,
            fill_value=None):
        """`x[idx]`, with `mode` and `fill_value` for out-of-bounds indices."""
        return _rewriting_take(self.array, self.index, mode, fill_value, indices_are_sorted,
                               unique_indices)

    def _update(self, values, op, mode, indices_are_sorted, unique_indices):
        return _scatter_update(self.array, self.index, values, op, mode, indices_are_sorted,
                               unique_indices)

    def set(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        """`x[idx] = values` (values cast to x's dtype and broadcast to x[idx]'s shape)."""
        return self._update(values, "set", mode, indices_are_sorted, unique_indices)

    def add(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        """`x[idx] += values`; repeated indices accumulate."""
        return self._update(values, "add", mode, indices_are_sorted, unique_indices)

    def subtract(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        """`x[idx] -= values`; repeated indices accumulate."""
        return self.add(lax.neg(_asarray(values)), indices_are_sorted=indices_are_sorted,
                        unique_indices=unique_indices, mode=mode)

    def multiply(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        """`x[idx] *= values`; repeated indices multiply."""
        return self._update(values, "mul", mode, indices_are_sorted, unique_indices)

    mul = multiply

    def divide(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        """`x[idx] /= values`, as `x / ones.at[idx].multiply(values)` (true division)."""
        from funcgrad import numpy as fnp
        ones = lax.full(self.array.shape, 1, self.array.dtype)
        return fnp.divide(self.array, _scatter_update(
            ones, self.index, values, "mul", mode, indices_are_sorted, unique_indices))

    def power(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        """`x[idx] **= values`, as `x ** ones.at[idx].multiply(values)`."""
        from funcgrad import numpy as fnp
        ones = lax.full(self.array.shape, 1, self.array.dtype)
        return fnp.power(self.array, _scatter_update(
            ones, self.index, values, "mul", mode, indices_are_sorted, unique_indices))

    def min(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        """`x[idx] = minimum(x[idx], values)`."""
        return self._update(values, "min", mode, indices_are_sorted, unique_indices)

    def max(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        """`x[idx] = maximum(x[idx], values)`."""
        return self._update(values, "max", mode, indices_are_sorted, unique_indices)

    def apply(self, func, *, indices_are_sorted=False, unique_indices=False, mode=None):
        """`x[idx] = func(x[idx])` for an elementwise `func`.

        Differs from JAX/`ufunc.at` for repeated indices: `func` is applied once per
        selected element, not once per occurrence.
        """
        sel = self.get(indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
                       mode="clip" if mode is not None else None)
        return self.set(func(sel), indices_are_sorted=indices_are_sorted,
                        unique_indices=unique_indices, mode=mode)


# --- take / take_along_axis / put_along_axis -----------------------------------------------

def _int_operand(name, x):
    x = _util.asarray_operand(name, x)
    if not dtypes.is_integer(x.dtype):
        raise errors.op_error(name, f"indices must have an integer dtype, got {x.dtype}")
    return x


def _floor_mod(x, n):
    """`x mod n` with the sign of `n` (Python's %), for wrapping indices."""
    r = lax.rem(x, _const(n, x.dtype))
    return lax.select_n(lax.lt(r, _const(0, x.dtype)), r, lax.add(r, _const(n, x.dtype)))


def take(a, indices, axis=None, out=None, mode=None, unique_indices=False,
         indices_are_sorted=False, fill_value=None):
    """Elements of `a` at `indices` along `axis` (the flattened `a` when axis is None).

    As in JAX, out-of-bounds indices give `fill_value` (default NaN / the minimum int)
    with mode=None or "fill"; "clip" clamps and "wrap" wraps. Negative indices count from
    the end.

    Example:
        >>> take(fnp.array([[1., 2., 3.], [4., 5., 6.]]), fnp.array([2, 0]), axis=1)
        Array([[3., 1.],
               [6., 4.]], dtype=float32)
    """
    _util.check_no_out("take", out)
    a = _util.asarray_operand("take", a)
    indices = _int_operand("take", indices)
    if axis is None:
        a, axis = lax.reshape(a, (a.size,)), 0
    axis = _util.canonical_axis("take", axis, a.ndim)
    n = a.shape[axis]
    if mode == "wrap":
        indices, mode = _floor_mod(indices, n), "promise_in_bounds"
    elif mode == "clip":  # numpy and JAX clamp negative indices to 0 here (no wrapping)
        dt = indices.dtype
        indices = lax.clamp(_const(0, dt), indices, _const(max(n - 1, 0), dt))
    elif mode == "raise":
        raise errors.op_error("take", "mode='raise' is not supported (out-of-bounds indices "
                              "cannot raise inside compiled code)",
                              hint="use mode='fill', 'clip' or 'wrap'")
    elif mode not in (None, "fill", "clip"):
        raise errors.op_error("take", f"invalid mode {errors.short_repr(mode)}; use 'fill', "
                                      f"'clip' or 'wrap'",
                              cls=errors.FuncgradValueError)
    if n == 0 and indices.size:
        raise _index_error(f"cannot take {indices.shape} indices from an empty axis {axis} of "
                           f"an array of shape {a.shape}")
    return _rewriting_take(a, (slice(None),) * axis + (indices,), mode or "fill", fill_value,
                           indices_are_sorted, unique_indices)


def _along_axis_index(name, shape, indices, axis):
    """The index tuple (aranges on the other axes) addressing `indices` along `axis`."""
    if len(shape) != indices.ndim:
        raise errors.op_error(name, f"indices and arr must have the same number of dimensions; "
                              f"got {indices.ndim} and {len(shape)}",
                              cls=errors.FuncgradValueError)
    idx = []
    for d, n in enumerate(shape):
        placed = [1] * len(shape)
        placed[d] = n
        idx.append(indices if d == axis else np.arange(n).reshape(placed))
    return tuple(idx)


def take_along_axis(arr, indices, axis=-1, mode=None, fill_value=None, *,
                    wrap_negative_indices=None):
    """`arr` indexed by `indices` along `axis` (the other axes broadcast), as NumPy's.

    Out-of-bounds indices give `fill_value` (mode=None or "fill") or clamp (mode="clip").
    Negative indices count from the end unless `wrap_negative_indices` is False (then they
    are out of bounds); None wraps them except with mode="promise_in_bounds" (JAX's rule).

    Example:
        >>> x = fnp.array([[5, 3, 4], [2, 7, 6]])
        >>> take_along_axis(x, argsort(x, axis=1), axis=1)
        Array([[3, 4, 5],
               [2, 6, 7]], dtype=int32)
    """
    a = _util.asarray_operand("take_along_axis", arr)
    indices = _int_operand("take_along_axis", indices)
    if axis is None:
        if indices.ndim != 1:
            raise errors.op_error("take_along_axis", "indices must be 1-D when axis=None, got "
                                  f"shape {indices.shape}", cls=errors.FuncgradValueError)
        a, axis = lax.reshape(a, (a.size,)), 0
    axis = _util.canonical_axis("take_along_axis", axis, a.ndim)
    if not (mode != "promise_in_bounds" if wrap_negative_indices is None
            else wrap_negative_indices):
        out_of_bounds = 0 if mode in ("clip", "promise_in_bounds") else a.shape[axis]
        indices = lax.select_n(lax.lt(indices, lax.full_like(indices, 0)), indices,
                               lax.full_like(indices, out_of_bounds))
    idx = _along_axis_index("take_along_axis", a.shape, indices, axis)
    if a.shape[axis] == 0:
        shape = list(a.shape)
        shape[axis] = 1
        return lax.full(_util.broadcast_shapes("take_along_axis", tuple(shape),
                                               indices.shape), 0, a.dtype)
    return _rewriting_take(a, idx, mode or "fill", fill_value)


def put_along_axis(arr, indices, values, axis, inplace=True, *, mode=None):
    """`arr` with `values` put at `indices` along `axis` (a new array: pass inplace=False).

    Example:
        >>> put_along_axis(fnp.zeros((2, 2)), fnp.array([[1], [0]]), 9., 1, inplace=False)
        Array([[0., 9.],
               [9., 0.]], dtype=float32)
    """
    if inplace:
        raise errors.op_error("put_along_axis", "funcgrad arrays are immutable, so the update "
                              "cannot happen in place", cls=errors.FuncgradValueError,
                              hint="pass inplace=False and use the returned array")
    a = _util.asarray_operand("put_along_axis", arr)
    indices = _int_operand("put_along_axis", indices)
    shape = a.shape
    if axis is None:
        a, axis = lax.reshape(a, (a.size,)), 0
    axis = _util.canonical_axis("put_along_axis", axis, a.ndim)
    idx = _along_axis_index("put_along_axis", a.shape, indices, axis)
    out = _scatter_update(a, idx, values, "set", mode)
    return out if out.shape == shape else lax.reshape(out, shape)

ArrayBase.__getitem__ = getitem
ArrayBase.at = property(_IndexUpdateHelper, doc="Functional index updates: `x.at[idx].set(v)`.")
