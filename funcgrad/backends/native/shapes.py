"""Shape and indexing operations of a loop body as C copies, so the loop stays one C loop:
`reshape`/`squeeze` and `bitcast_convert_type` (a memcpy), `transpose`, `rev`, `broadcast_in_dim`,
static `slice`, `pad`, `concatenate`, `dynamic_slice`, `dynamic_update_slice` (start indices
clamped as the numpy implementation does), `gather` (`x[idx]`, `take`, `take_along_axis`:
starts clamped, or with mode=fill windows out of bounds filled) and `scatter`/`scatter-add`
(`x.at[idx].set/add`, a gather's gradient: windows out of bounds dropped, mode=clip clamps),
each in the numpy implementation's element order, so a loop body that looks up embeddings
(or draws random numbers) stays C.

    /* dynamic_slice (1, 3, 3) */
    void fg_loop0_b_k3(const float *restrict x, const int *restrict s0, ..., float *restrict o)

Each class takes the equation and a C name and has `source()`; its C function takes the
equation's operands then its result. `IN_LOOPS` maps primitives to these and to the linear
algebra routines of `linalg.py`. Imports lax and the native tables only.
"""

import math

import numpy as np

from funcgrad.backends.native import along_axis, linalg, ops, windows
from funcgrad.lax.indexing import GatherScatterMode, gather_p, scatter_add_p, scatter_p
from funcgrad.lax.logic import bitcast_convert_type_p
from funcgrad.lax.shape import broadcast_in_dim_p, reshape_p, rev_p, squeeze_p, transpose_p
from funcgrad.lax.slicing import (
    concatenate_p,
    dynamic_slice_p,
    dynamic_update_slice_p,
    pad_p,
    slice_p,
)


class Copy(ops.EqnRoutine):
    """A `reshape`, `squeeze` or `bitcast_convert_type` (random bits to floats, as
    `random.uniform` makes them) in a loop body: the bytes copied into the result's buffer."""

    def __init__(self, eqn, cname):
        self.eqn, self.cname = eqn, cname
        aval = eqn.invars[0].aval
        if 0 in aval.shape:
            raise ops.Unsupported(f"{eqn.prim.name} of an empty array")
        self.t = ops.storage(np.dtype(aval.dtype).name)
        self.out_t = ops.storage(np.dtype(eqn.outvars[0].aval.dtype).name)  # same width
        self.nbytes = math.prod(aval.shape) * np.dtype(aval.dtype).itemsize

    def source(self):
        return (f"/* {self.eqn.prim.name} */\nvoid {self.cname}(const {self.t} *restrict x, "
                f"{self.out_t} *restrict o) {{\n    memcpy(o, x, {self.nbytes});\n}}\n")


class _Affine(Copy):
    """A shape operation whose output element `(i0, i1, ...)` is input element
    `offset + sum(i_k * strides[k])`: nested loops over the output."""

    def affine(self, title, out_shape, strides, offset=0):
        head = (f"/* {title} */\nvoid {self.cname}(const {self.t} *restrict x, "
                f"{self.t} *restrict o) {{")
        lines = ["long long _o = 0;"]
        for k, size in enumerate(out_shape):
            lines.append("    " * k + f"for (long long i{k} = 0; i{k} < {size}; ++i{k})")
        src = " + ".join([str(offset)] * bool(offset) + [
            f"i{k} * {st}" for k, st in enumerate(strides) if st]) or "0"
        lines.append("    " * len(out_shape) + f"o[_o++] = x[{src}];")
        return "\n".join([head] + ["    " + ln for ln in lines] + ["}"]) + "\n"

    @property
    def in_strides(self):
        shape = self.eqn.invars[0].aval.shape
        return [math.prod(shape[k + 1:]) for k in range(len(shape))]


class Transpose(_Affine):
    """A `transpose` in a loop body (row-major both)."""

    def source(self):
        shape, perm = self.eqn.invars[0].aval.shape, self.eqn.params["permutation"]
        return self.affine(f"transpose {perm}", [shape[a] for a in perm],
                           [self.in_strides[a] for a in perm])


class Rev(_Affine):
    """A `rev` in a loop body: the reversed axes read from their far end, stride negated."""

    def source(self):
        shape, dims = self.eqn.invars[0].aval.shape, tuple(self.eqn.params["dimensions"])
        st = self.in_strides
        strides = [-s if k in dims else s for k, s in enumerate(st)]
        offset = sum((shape[k] - 1) * st[k] for k in dims)
        return self.affine(f"rev {list(dims)}", shape, strides, offset)


class Broadcast(_Affine):
    """A `broadcast_in_dim` in a loop body: stride 0 along new and size-1 axes."""

    def source(self):
        shape, out = self.eqn.invars[0].aval.shape, self.eqn.outvars[0].aval.shape
        strides = [0] * len(out)
        for j, d in enumerate(self.eqn.params["broadcast_dimensions"]):
            strides[d] = self.in_strides[j] if shape[j] != 1 else 0
        return self.affine(f"broadcast_in_dim {shape} -> {out}", out, strides)


class Slice(_Affine):
    """A static `slice` (with strides) in a loop body."""

    def source(self):
        p, st = self.eqn.params, self.in_strides
        steps = p["strides"] or (1,) * len(st)
        offset = sum(s * k for s, k in zip(p["start_indices"], st))
        return self.affine(f"slice {tuple(p['start_indices'])}", self.eqn.outvars[0].aval.shape,
                           [k * d for k, d in zip(st, steps)], offset)


class Pad(Copy):
    """A `pad` in a loop body: the padding value everywhere, then the operand placed at
    `lo + i * (interior + 1)`; negative padding (cropping) stays numpy."""

    def __init__(self, eqn, cname):
        super().__init__(eqn, cname)
        if any(lo < 0 or hi < 0 for lo, hi, _ in eqn.params["padding_config"]):
            raise ops.Unsupported("pad with negative padding")

    def source(self):
        shape, out = self.eqn.invars[0].aval.shape, self.eqn.outvars[0].aval.shape
        cfg = self.eqn.params["padding_config"]
        ost = [math.prod(out[k + 1:]) for k in range(len(out))]
        offset = sum(lo * s for (lo, _, _), s in zip(cfg, ost))
        dst = " + ".join([str(offset)] + [f"i{k} * {s * (it + 1)}"
                                          for k, ((_, _, it), s) in enumerate(zip(cfg, ost))])
        lines = [f"for (long long e = 0; e < {math.prod(out)}; ++e) o[e] = v[0];",
                 "long long _i = 0;"]
        for k, size in enumerate(shape):
            lines.append("    " * k + f"for (long long i{k} = 0; i{k} < {size}; ++i{k})")
        lines.append("    " * len(shape) + f"o[{dst}] = x[_i++];")
        head = (f"/* pad {tuple(cfg)} */\nvoid {self.cname}(const {self.t} *restrict x, "
                f"const {self.t} *restrict v, {self.t} *restrict o) {{")
        return "\n".join([head] + ["    " + ln for ln in lines] + ["}"]) + "\n"


def _loops(shape, var="i"):
    """Nested C `for` headers over `shape` (indices i0, i1, ...) and the body's indent."""
    lines = [" " * 4 * k + f"for (long long {var}{k} = 0; {var}{k} < {n}; ++{var}{k})"
             for k, n in enumerate(shape)]
    return lines, " " * 4 * len(shape)


def _strides(shape):
    return [math.prod(shape[k + 1:]) for k in range(len(shape))]


def _index_types(eqn, first):
    """The C types of the scalar index operands from `first` on (signed integers only)."""
    types = []
    for v in eqn.invars[first:]:
        dt = np.dtype(v.aval.dtype)
        if dt.kind != "i" or v.aval.shape != ():
            raise ops.Unsupported(f"{eqn.prim.name} with index {v.aval} in C")
        types.append(ops.storage(dt.name))
    return types


def _clamped_base(shape, sizes, strides, lo_only=False):
    """C lines computing `_base`, the flat offset of the window at the start indices s0,
    s1, ... clamped to [0, n - k] per axis (as `slicing._clamped_starts`)."""
    lines, terms = [], []
    for k, (n, w, st) in enumerate(zip(shape, sizes, strides)):
        lines.append(f"long long _s{k} = (long long)s{k}[0];")
        lines.append(f"_s{k} = _s{k} < 0 ? 0 : _s{k} > {n - w} ? {n - w} : _s{k};")
        terms.append(f"_s{k} * {st}")
    return lines + [f"const long long _base = {' + '.join(terms) or '0'};"]


class DynamicSlice(Copy):
    """`dynamic_slice`: the window at the clamped start indices."""

    def __init__(self, eqn, cname):
        super().__init__(eqn, cname)
        self.idx = _index_types(eqn, 1)

    def source(self):
        shape, sizes = self.eqn.invars[0].aval.shape, self.eqn.params["slice_sizes"]
        st = _strides(shape)
        idx = "".join(f"const {t} *restrict s{k}, " for k, t in enumerate(self.idx))
        loops, ind = _loops(sizes)
        src = " + ".join(["_base"] + [f"i{k} * {s}" for k, s in enumerate(st)])
        lines = (_clamped_base(shape, sizes, st) + ["long long _o = 0;"] + loops
                 + [ind + f"o[_o++] = x[{src}];"])
        head = (f"/* dynamic_slice {tuple(sizes)} */\nvoid {self.cname}(const {self.t} "
                f"*restrict x, {idx}{self.t} *restrict o) {{")
        return "\n".join([head] + ["    " + ln for ln in lines] + ["}"]) + "\n"


class DynamicUpdateSlice(Copy):
    """`dynamic_update_slice`: the operand copied, the update written at the clamped starts."""

    def __init__(self, eqn, cname):
        super().__init__(eqn, cname)
        self.idx = _index_types(eqn, 2)
        if 0 in eqn.invars[1].aval.shape:
            raise ops.Unsupported("dynamic_update_slice of an empty update")

    def source(self):
        shape, sizes = self.eqn.invars[0].aval.shape, self.eqn.invars[1].aval.shape
        st = _strides(shape)
        idx = "".join(f"const {t} *restrict s{k}, " for k, t in enumerate(self.idx))
        loops, ind = _loops(sizes)
        dst = " + ".join(["_base"] + [f"i{k} * {s}" for k, s in enumerate(st)])
        lines = ([f"memcpy(o, x, {self.nbytes});"] + _clamped_base(shape, sizes, st)
                 + ["long long _u = 0;"] + loops + [ind + f"o[{dst}] = u[_u++];"])
        head = (f"/* dynamic_update_slice {tuple(sizes)} */\nvoid {self.cname}(const {self.t} "
                f"*restrict x, const {self.t} *restrict u, {idx}{self.t} *restrict o) {{")
        return "\n".join([head] + ["    " + ln for ln in lines] + ["}"]) + "\n"


def _index_loads(eqn, index_map, shape, sizes, clip, drop):
    """C lines reading one index vector `iv` into clamped starts `_s<d>` (an operand axis d
    of `index_map`), with `drop` the statement run when a window is out of bounds and not
    `clip` (gathers fill it, scatters skip it), as `indexing._index_plan` decides."""
    lines = []
    for k, d in enumerate(index_map):
        hi = shape[d] - sizes[d]
        lines.append(f"long long _s{d} = (long long)iv[{k}];")
        if not clip:
            lines.append(f"if (_s{d} < 0 || _s{d} > {hi}) {drop}")
        lines.append(f"_s{d} = _s{d} < 0 ? 0 : _s{d} > {hi} ? {hi} : _s{d};")
    return lines


def _index_vector(ctype, batch, k):
    """The C line pointing `iv` at the index vector of batch position (b0, b1, ...)."""
    flat = " + ".join(f"b{j} * {st}" for j, st in enumerate(_strides(batch))) or "0"
    return f"const {ctype} *iv = ix + ({flat}) * {k};"


def _block(loops, ind, body):
    """`body` once per batch position, in a `do { } while (0)` so `break` skips the rest."""
    return (loops + [ind + "do {"] + [ind + "    " + ln for ln in body]
            + [ind + "} while (0);"])


def _index_type(eqn, indices):
    dt = np.dtype(indices.dtype)
    if dt.kind not in "iu" or indices.ndim < 1:
        raise ops.Unsupported(f"{eqn.prim.name} with indices {indices} in C")
    return ops.storage(dt.name)


class Gather(Copy):
    """`gather` in general (what `x[idx]`, `take` and `take_along_axis` trace to): per index
    vector (the last axis of the indices), a window at the start it names, clamped to fit, or
    with mode=fill a window out of bounds filled with `fill_value` (NaN, the integer minimum
    or True by default), as the numpy implementation; batch and window axes placed in the
    output by `offset_dims`."""

    def __init__(self, eqn, cname):
        self.eqn, self.cname = eqn, cname
        x, ix = (v.aval for v in eqn.invars)
        out = eqn.outvars[0].aval
        if x.ndim == 0 or 0 in x.shape or 0 in out.shape:
            raise ops.Unsupported("gather of a scalar or an empty array")
        self.t, self.it = ops.storage(np.dtype(x.dtype).name), _index_type(eqn, ix)
        self.clip = eqn.params["mode"] is not GatherScatterMode.FILL_OR_DROP
        if not self.clip and np.dtype(x.dtype).name in ops.NARROW:
            raise ops.Unsupported(f"a {np.dtype(x.dtype).name} gather with a fill value")

    def _fill(self):
        from funcgrad.lax.indexing import _default_fill
        dt = np.dtype(self.eqn.invars[0].aval.dtype)
        fill = self.eqn.params["fill_value"]
        value = _default_fill(dt) if fill is None else fill
        if dt.kind == "f" and np.isnan(value):
            return "(float)NAN" if dt.name == "float32" else "(double)NAN"
        return ops.literal(value, dt.name)

    def source(self):
        x, ix = (v.aval for v in self.eqn.invars)
        out = self.eqn.outvars[0].aval.shape
        offset_dims, collapsed, index_map = self.eqn.params["dimension_numbers"][:3]
        sizes = self.eqn.params["slice_sizes"]
        window = [d for d in range(x.ndim) if d not in collapsed]
        batch_axes = [a for a in range(len(out)) if a not in offset_dims]
        xs, os_ = _strides(x.shape), _strides(out)
        batch, K = ix.shape[:-1], ix.shape[-1]
        loops, ind = _loops(batch, "b")
        body = [_index_vector(self.it, batch, K)]
        body += _index_loads(self.eqn, index_map, x.shape, sizes, self.clip, "_ok = 0;")
        base = " + ".join([f"_s{d} * {xs[d]}" for d in index_map] or ["0"])
        obase = " + ".join([f"b{j} * {os_[a]}" for j, a in enumerate(batch_axes)] or ["0"])
        wl, wind = _loops([sizes[d] for d in window], "w")
        src = " + ".join(["_base"] + [f"w{j} * {xs[d]}" for j, d in enumerate(window)])
        dst = " + ".join(["_obase"] + [f"w{j} * {os_[a]}" for j, a in enumerate(offset_dims)])
        value = f"x[{src}]" if self.clip else f"_ok ? x[{src}] : {self._fill()}"
        body = (["int _ok = 1;"] * (not self.clip) + body
                + [f"const long long _base = {base}, _obase = {obase};"] + wl
                + [wind + f"o[{dst}] = {value};"])
        head = (f"/* gather {tuple(sizes)} */\nvoid {self.cname}(const {self.t} *restrict x, "
                f"const {self.it} *restrict ix, {self.t} *restrict o) {{")
        lines = _block(loops, ind, body)
        return "\n".join([head] + ["    " + ln for ln in lines] + ["}"]) + "\n"


class Scatter(Copy):
    """`scatter`/`scatter-add` in general (`x.at[idx].set/add`, a gather's transpose): the
    operand copied, then per index vector its window of updates written or added at the
    start it names, in the numpy implementation's order (so repeated indices add in the same
    order and the last write wins); out of bounds drops the window, mode=clip clamps it."""

    def __init__(self, eqn, cname):
        super().__init__(eqn, cname)
        op, ix, up = (v.aval for v in eqn.invars)
        if op.ndim == 0 or 0 in up.shape:
            raise ops.Unsupported("a scatter into a scalar or of no updates")
        self.it = _index_type(eqn, ix)
        dt = np.dtype(op.dtype)
        if eqn.prim is scatter_add_p and (dt.kind == "b" or dt.name in ops.NARROW):
            raise ops.Unsupported(f"a {dt.name} scatter-add in C")
        # signed integers add as unsigned, so overflow wraps as numpy's does (not C's UB)
        self.wrap = f"unsigned {self.t.replace('signed ', '')}" if dt.kind == "i" else None

    def source(self):
        from funcgrad.lax.indexing import _window_sizes
        op, ix, up = (v.aval for v in self.eqn.invars)
        window_dims, inserted, index_map = self.eqn.params["dimension_numbers"][:3]
        sizes = _window_sizes(op.ndim, inserted, window_dims, up.shape)
        clip = self.eqn.params["mode"] is GatherScatterMode.CLIP
        window = [d for d in range(op.ndim) if d not in inserted]
        batch_axes = [a for a in range(up.ndim) if a not in window_dims]
        xs, us = _strides(op.shape), _strides(up.shape)
        batch, K = ix.shape[:-1], ix.shape[-1]
        loops, ind = _loops(batch, "b")
        body = [_index_vector(self.it, batch, K)]
        body += _index_loads(self.eqn, index_map, op.shape, sizes, clip, "break;")
        base = " + ".join([f"_s{d} * {xs[d]}" for d in index_map] or ["0"])
        ubase = " + ".join([f"b{j} * {us[a]}" for j, a in enumerate(batch_axes)] or ["0"])
        wl, wind = _loops([sizes[d] for d in window], "w")
        dst = " + ".join(["_base"] + [f"w{j} * {xs[d]}" for j, d in enumerate(window)])
        src = " + ".join(["_ubase"] + [f"w{j} * {us[a]}" for j, a in enumerate(window_dims)])
        if self.eqn.prim is not scatter_add_p:
            store = f"o[{dst}] = u[{src}];"
        elif self.wrap:
            store = f"o[{dst}] = ({self.t})(({self.wrap})o[{dst}] + ({self.wrap})u[{src}]);"
        else:
            store = f"o[{dst}] += u[{src}];"
        body += [f"const long long _base = {base}, _ubase = {ubase};"] + wl + [wind + store]
        head = (f"/* {self.eqn.prim.name} {tuple(sizes)} */\nvoid {self.cname}(const {self.t} "
                f"*restrict x, const {self.it} *restrict ix, const {self.t} *restrict u, "
                f"{self.t} *restrict o) {{")
        lines = [f"memcpy(o, x, {self.nbytes});"] + _block(loops, ind, body)
        return "\n".join([head] + ["    " + ln for ln in lines] + ["}"]) + "\n"


class Concatenate(Copy):
    """`concatenate`: per block of the leading axes, each operand's contiguous run in turn."""

    def __init__(self, eqn, cname):
        super().__init__(eqn, cname)
        if any(0 in v.aval.shape for v in eqn.invars):
            raise ops.Unsupported("concatenate of an empty array")

    def source(self):
        axis, out = self.eqn.params["dimension"], self.eqn.outvars[0].aval.shape
        runs = [math.prod(v.aval.shape[axis:]) for v in self.eqn.invars]
        size = np.dtype(self.eqn.outvars[0].aval.dtype).itemsize
        lines = [f"for (long long b = 0; b < {math.prod(out[:axis])}; ++b) {{"]
        offset = 0
        for k, run in enumerate(runs):
            lines.append(f"    memcpy(o + b * {sum(runs)} + {offset}, x{k} + b * {run}, "
                         f"{run * size});")
            offset += run
        ins = "".join(f"const {self.t} *restrict x{k}, " for k in range(len(runs)))
        head = f"/* concatenate axis {axis} */\nvoid {self.cname}({ins}{self.t} *restrict o) {{"
        return "\n".join([head] + ["    " + ln for ln in lines + ["}"]] + ["}"]) + "\n"


# At top level too (`program.ROUTINES`): numpy's scatter-add (`np.add.at`) takes about 8 ns
# an element, the C loop under 1 (a GPT step's embedding gradient, 131k elements: 1.0 ms).
# The others stay numpy's there (views, or one fast numpy call such as `take`).
AT_TOP_LEVEL = {scatter_p: Scatter, scatter_add_p: Scatter}

IN_LOOPS = {**linalg.ROUTINES, **windows.ROUTINES, **along_axis.ROUTINES,
            reshape_p: Copy, squeeze_p: Copy, bitcast_convert_type_p: Copy,
            transpose_p: Transpose, rev_p: Rev,
            broadcast_in_dim_p: Broadcast, slice_p: Slice, pad_p: Pad,
            dynamic_slice_p: DynamicSlice, dynamic_update_slice_p: DynamicUpdateSlice,
            gather_p: Gather, scatter_p: Scatter, scatter_add_p: Scatter,
            concatenate_p: Concatenate}
