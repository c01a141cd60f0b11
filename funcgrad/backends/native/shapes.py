"""Shape and indexing operations of a loop body as C copies, so the loop stays one C loop:
`reshape`/`squeeze` (a memcpy), `transpose`, `broadcast_in_dim`, static `slice`, `pad`,
`concatenate`, `dynamic_slice`, `dynamic_update_slice` (start indices clamped as the numpy
implementation does) and a `scatter`/`scatter-add` of one slice at one index (what
`x.at[i].set(v)` and `.add` trace to; out of bounds drops the update, mode=clip clamps).

    /* dynamic_slice (1, 3, 3) */
    void fg_loop0_b_k3(const float *restrict x, const int *restrict s0, ..., float *restrict o)

Each class takes the equation and a C name and has `source()`; its C function takes the
equation's operands then its result. `IN_LOOPS` maps primitives to these and to the linear
algebra routines of `linalg.py`. Imports lax and the native tables only.
"""

import math

import numpy as np

from funcgrad.backends.native import linalg, ops
from funcgrad.lax.indexing import GatherScatterMode, scatter_add_p, scatter_p
from funcgrad.lax.shape import broadcast_in_dim_p, reshape_p, squeeze_p, transpose_p
from funcgrad.lax.slicing import (
    concatenate_p,
    dynamic_slice_p,
    dynamic_update_slice_p,
    pad_p,
    slice_p,
)


class Copy:
    """A `reshape` or `squeeze` in a loop body: the data copied to the new shape's buffer."""

    def __init__(self, eqn, cname):
        self.eqn, self.cname = eqn, cname
        aval = eqn.invars[0].aval
        if 0 in aval.shape:
            raise ops.Unsupported(f"{eqn.prim.name} of an empty array")
        self.t = ops.storage(np.dtype(aval.dtype).name)
        self.nbytes = math.prod(aval.shape) * np.dtype(aval.dtype).itemsize

    def source(self):
        return (f"/* {self.eqn.prim.name} */\nvoid {self.cname}(const {self.t} *restrict x, "
                f"{self.t} *restrict o) {{\n    memcpy(o, x, {self.nbytes});\n}}\n")


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


class Scatter(Copy):
    """`scatter`/`scatter-add` of one slice `operand[i0, .., ik-1] = updates` (indices of
    shape (k,), updates the operand's trailing axes): out of bounds drops it (clip clamps)."""

    def __init__(self, eqn, cname):
        super().__init__(eqn, cname)
        op, ix, up = (v.aval for v in eqn.invars)
        window, inserted, index_map = eqn.params["dimension_numbers"]
        k = ix.shape[0] if ix.ndim == 1 else -1
        if (k < 1 or tuple(inserted) != tuple(range(k)) or tuple(index_map) != tuple(range(k))
                or tuple(window) != tuple(range(up.ndim)) or up.shape != op.shape[k:]
                or np.dtype(ix.dtype).kind != "i" or 0 in up.shape):
            raise ops.Unsupported("a scatter other than one slice at one index")
        self.k, self.it = k, ops.storage(np.dtype(ix.dtype).name)

    def source(self):
        shape, k = self.eqn.invars[0].aval.shape, self.k
        size = math.prod(shape[k:])
        clip = self.eqn.params["mode"] is GatherScatterMode.CLIP
        lines, terms = [], []
        for a, (n, st) in enumerate(zip(shape[:k], _strides(shape)[:k])):
            lines.append(f"long long _s{a} = (long long)ix[{a}];")
            if clip:
                lines.append(f"_s{a} = _s{a} < 0 ? 0 : _s{a} > {n - 1} ? {n - 1} : _s{a};")
            else:
                lines.append(f"if (_s{a} < 0 || _s{a} >= {n}) return;  /* dropped */")
            terms.append(f"_s{a} * {st}")
        op = "+=" if self.eqn.prim is scatter_add_p else "="
        lines = ([f"memcpy(o, x, {self.nbytes});"] + lines
                 + [f"const long long _base = {' + '.join(terms)};",
                    f"for (long long e = 0; e < {size}; ++e) o[_base + e] {op} u[e];"])
        head = (f"/* {self.eqn.prim.name} one slice */\nvoid {self.cname}(const {self.t} "
                f"*restrict x, const {self.it} *restrict ix, const {self.t} *restrict u, "
                f"{self.t} *restrict o) {{")
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


IN_LOOPS = {**linalg.ROUTINES, reshape_p: Copy, squeeze_p: Copy, transpose_p: Transpose,
            broadcast_in_dim_p: Broadcast, slice_p: Slice, pad_p: Pad,
            dynamic_slice_p: DynamicSlice, dynamic_update_slice_p: DynamicUpdateSlice,
            scatter_p: Scatter, scatter_add_p: Scatter, concatenate_p: Concatenate}
