"""Window operations as C routines, one pass each, with the numpy implementations' bits:
`reduce_window_sum/max/min` (pooling), `window_choice_mask` (the residual of tiling max/min
pooling's derivative, `lax/pooling.py`) and `select_and_scatter_add` (the gradient of
max/min pooling whose windows overlap or pad).

They loop over the output positions; when the innermost axis is a plain one (window 1,
stride 1, no padding or dilation: the channels of NHWC pooling) its positions are one run
of `R` lanes, each tap read and combined as a contiguous vector:

    /* reduce_window_max window (1, 2, 2, 1) strides (1, 2, 2, 1) */
    void fg_la3(const float *restrict x, float *restrict o) {
        float a1[16], a2[16];
        for (long long o0 = 0; o0 < 256; ++o0) ...

A reduction folds one window axis at a time from the last, each axis's taps left to right
into the first (`convolution.fold_windows`, which numpy runs pass by pass); padding and the
holes of base dilation count as the identity (0, -inf, +inf), combined like any element.
The selections take, per window in row-major order, the first extremal element (as
`np.argmax`: a NaN wins; padding counts as the identity), and `select_and_scatter_add` adds
each window's cotangent there in the output's row-major order (the numpy implementation's
`np.add.at`). Each routine is an `ops.EqnRoutine` with `cname` and `source()`, as
`linalg.py`'s are, so `program.py` calls it at top level and `loops.py` inside a C loop.
Imports lax and the native tables only.
"""

import math

import numpy as np

from funcgrad.backends.native import ops
from funcgrad.lax.convolution import (
    reduce_window_max_p,
    reduce_window_min_p,
    reduce_window_sum_p,
    select_and_scatter_add_p,
)
from funcgrad.lax.pooling import choice_mask_p, tiling

RUN_MAX = 4096  # lanes of the innermost run held on the stack per accumulator
# numpy's float16 maximum/minimum keep the first operand on a tie (+0.0 vs -0.0), its
# float32/float64 ones (and fg_max/fg_min) the second
HALF_MINMAX = """#ifndef FG_HALF_MINMAX
#define FG_HALF_MINMAX
static inline float fg_max_half(float a, float b) { return (a >= b || a != a) ? a : b; }
static inline float fg_min_half(float a, float b) { return (a <= b || a != a) ? a : b; }
#endif
"""


def _strides(shape):
    return [math.prod(shape[k + 1:]) for k in range(len(shape))]


def _window_params(p, nd):
    ones = (1,) * nd
    return (p["window_dimensions"], p.get("window_strides", p["window_dimensions"]),
            p.get("padding", ((0, 0),) * nd), p.get("base_dilation", ones),
            p.get("window_dilation", ones))


class _Nest:
    """The loops over the output positions of a window operation on an operand of shape
    `xs` and the C expressions of its taps' positions (see the module docstring)."""

    def __init__(self, xs, outs, params):
        self.xs, self.outs, self.nd = tuple(xs), tuple(outs), len(xs)
        self.win, self.st, self.pad, self.base, self.wdil = _window_params(params, self.nd)
        last = self.nd - 1
        plain = (self.win[last] == 1 and self.st[last] == 1 and self.pad[last] == (0, 0)
                 and self.base[last] == 1 and self.xs[last] == self.outs[last]
                 and self.xs[last] <= RUN_MAX)
        self.run = self.xs[last] if plain else 1
        self.loop_axes = list(range(self.nd - (1 if plain else 0)))
        self.active = [d for d in self.loop_axes if self.win[d] != 1]

    def open(self):
        """The output loops: lines, the indentation inside, the output offset of the run."""
        ost = _strides(self.outs)
        lines = ["    " * k + f"for (long long o{d} = 0; o{d} < {self.outs[d]}; ++o{d})"
                 for k, d in enumerate(self.loop_axes)]
        if lines:
            lines[-1] += " {"
        ind = "    " * (len(self.loop_axes) + (1 if lines else 0))
        off = " + ".join(f"o{d} * {ost[d]}" for d in self.loop_axes) or "0"
        return lines, ind, off

    def close(self):
        return ["    " * (len(self.loop_axes) - 1) + "}"] if self.loop_axes else []

    def position(self, d):
        """(declaration of q{d}, its validity, the operand index along d): the tap `j{d}`
        of output position `o{d}` (j is 0 on an axis whose window is 1)."""
        (lo, _), b, n = self.pad[d], self.base[d], self.xs[d]
        terms = [f"o{d}" + (f" * {self.st[d]}" if self.st[d] != 1 else "")]
        if self.win[d] != 1:
            terms.append(f"j{d}" + (f" * {self.wdil[d]}" if self.wdil[d] != 1 else ""))
        decl = f"const long long q{d} = {' + '.join(terms)}{f' - ({lo})' if lo else ''};"
        ok = f"q{d} >= 0 && q{d} <= {(n - 1) * b}" + (f" && q{d} % {b} == 0" if b != 1 else "")
        return decl, ok, f"q{d}" + (f" / {b}" if b != 1 else "")

    def located(self, axes):
        """Lines declaring the positions along `axes`, `ok` (the tap lies in the operand,
        not in its padding or dilation holes) and `at` (its offset, 0 where it does not)."""
        xst = _strides(self.xs)
        lines, checks, index = [], [], []
        for d in axes:
            decl, ok, idx = self.position(d)
            lines.append(decl)
            checks.append(ok)
            index.append(f"({idx}) * {xst[d]}")
        return lines + [f"const int ok = {' && '.join(checks) or '1'};",
                        f"const long long at = ok ? {' + '.join(index) or '0'} : 0;"]

    def over_taps(self, ind, inner):
        """`inner` (lines, with `j{d}` per window axis) inside loops over every tap of the
        window in row-major order."""
        opens = [f"for (long long j{d} = 0; j{d} < {self.win[d]}; ++j{d}) {{"
                 for d in self.active] or ["{"]  # a block of its own all the same
        lines = []
        for op in opens:
            lines.append(ind + op)
            ind += "    "
        lines += [ind + ln for ln in inner]
        for _ in opens:
            ind = ind[:-4]
            lines.append(ind + "}")
        return lines

    def tap_index(self):
        """The flat row-major index of the tap (j{d} per window axis) in its window."""
        idx = "0"
        for d in self.active:
            idx = f"j{d}" if idx == "0" else f"({idx}) * {self.win[d]} + j{d}"
        return idx


class _Routine(ops.EqnRoutine):
    """Shared: the types and the value conversions of a window routine."""

    def __init__(self, eqn, cname, x_index=0):
        self.eqn, self.cname = eqn, cname
        x = eqn.invars[x_index].aval
        if x.ndim == 0 or 0 in x.shape or any(0 in v.aval.shape for v in eqn.outvars):
            raise ops.Unsupported(f"{eqn.prim.name} of a scalar or an empty array")
        if np.dtype(x.dtype).kind not in "biuf":
            raise ops.Unsupported(f"{eqn.prim.name} of {x.dtype} in C")
        self.dx = np.dtype(x.dtype)
        self.tx = ops.storage(self.dx.name)
        self.cx = ops.ctype(self.dx.name)  # the compute type (float for float16)

    def load(self, expr):
        return f"fg_h2f({expr})" if self.tx == "fg_half" else expr

    def store(self, expr):
        return f"fg_f2h({expr})" if self.tx == "fg_half" else expr

    def identity(self, kind):
        if kind == "sum":
            return ops.literal(0, self.dx.name)
        if self.dx.kind == "f":
            return f"{'-' if kind == 'max' else ''}({self.cx})INFINITY"
        if self.dx.kind == "b":
            return "0" if kind == "max" else "1"
        info = np.iinfo(self.dx)
        return ops.literal(info.min if kind == "max" else info.max, self.dx.name)


class ReduceWindow(_Routine):
    """`reduce_window_sum/max/min(x)` (see the module docstring)."""

    KIND = {reduce_window_sum_p: "sum", reduce_window_max_p: "max", reduce_window_min_p: "min"}

    def __init__(self, eqn, cname):
        super().__init__(eqn, cname)
        self.kind = self.KIND[eqn.prim]
        if self.kind == "sum" and self.dx.kind == "b":
            raise ops.Unsupported("a boolean window sum in C")

    def combine(self, a, b):
        if self.kind != "sum":
            half = "_half" if self.tx == "fg_half" else ""
            return f"fg_{self.kind}{half}({a}, {b})"
        if self.tx == "fg_half":  # numpy rounds each float16 sum
            return f"fg_round_half({a} + {b})"
        if self.dx.kind in "iu":  # wrapping, as numpy's integers
            u = f"unsigned {self.cx}" if self.dx.kind == "i" else self.cx
            u = u.replace("unsigned signed char", "unsigned char")
            return f"({self.cx})(({u}){a} + ({u}){b})"
        return f"{a} + {b}"

    def source(self):
        x, out = self.eqn.invars[0].aval, self.eqn.outvars[0].aval
        nest = _Nest(x.shape, out.shape, self.eqn.params)
        lines, ind, off = nest.open()
        value = f"(ok ? {self.load('x[at + r]')} : {self.identity(self.kind)})"
        if nest.active:
            lines.insert(0, f"{self.cx} {', '.join(f'a{d}[{nest.run}]' for d in nest.active)};")
            lines += self._fold(nest, ind, value)
            result = f"a{nest.active[0]}[r]"
        else:  # windows of one element: a strided copy, padding the identity
            lines += [ind + ln for ln in nest.located(nest.loop_axes)]
            result = value
        lines.append(ind + f"for (long long r = 0; r < {nest.run}; ++r) o[{off} + r] = "
                           f"{self.store(result)};")
        lines += nest.close()
        p = self.eqn.params
        head = (f"/* {self.eqn.prim.name} window {tuple(p['window_dimensions'])} strides "
                f"{tuple(p['window_strides'])} */\nvoid {self.cname}(const {self.tx} "
                f"*restrict x, {self.tx} *restrict o) {{")
        prelude = HALF_MINMAX if self.tx == "fg_half" and self.kind != "sum" else ""
        return prelude + "\n".join([head] + ["    " + ln for ln in lines] + ["}"]) + "\n"

    def _fold(self, nest, ind, value):
        """The nested folds: the last window axis over the operand's taps (`value`), each
        earlier one over the later one's results (`a{d}`)."""
        lines = []
        for d in nest.active:
            lines.append(ind + f"for (long long j{d} = 0; j{d} < {nest.win[d]}; ++j{d}) {{")
            ind += "    "
        lines += [ind + ln for ln in nest.located(nest.loop_axes)]
        src = value
        for d in reversed(nest.active):
            a = f"a{d}"
            lines += [ind + f"if (j{d} == 0) for (long long r = 0; r < {nest.run}; ++r) "
                            f"{a}[r] = {src};",
                      ind + f"else for (long long r = 0; r < {nest.run}; ++r) "
                            f"{a}[r] = {self.combine(f'{a}[r]', src)};"]
            ind = ind[:-4]
            lines.append(ind + "}")
            src = f"{a}[r]"
        return lines


class _Selection(_Routine):
    """Shared: per output position, `sel[r]`, the flat window index of each lane's selected
    element, in row-major tap order (see the module docstring)."""

    def select(self, nest, ind, kind):
        better = ">" if kind == "max" else "<"
        inner = nest.located(nest.loop_axes) + [
            f"const long long tap = {nest.tap_index()};",
            f"for (long long r = 0; r < {nest.run}; ++r) {{",
            f"    const {self.cx} v = ok ? {self.load('x[at + r]')} : {self.identity(kind)};",
            f"    if (tap == 0 || (bv[r] == bv[r] && (v {better} bv[r] || v != v))) "
            "{ bv[r] = v; sel[r] = tap; }", "}"]
        return [ind + f"{self.cx} bv[{nest.run}]; long long sel[{nest.run}];"] + \
            nest.over_taps(ind, inner)


class ChoiceMask(_Selection):
    """`window_choice_mask(x)`: the one-hot mask, in the block layout (the cropped operand's
    memory order), of each tiling window's selected element."""

    def source(self):
        p = self.eqn.params
        x = self.eqn.invars[0].aval
        win, kind = p["window_dimensions"], p["select_prim"]
        layout = tiling(x.shape, win)
        outs = tuple(c // w for c, w in zip(layout.crop, win))
        nest = _Nest(x.shape, outs, dict(window_dimensions=win, window_strides=win))
        lines, ind, _ = nest.open()
        lines += self.select(nest, ind, kind)
        mst = _strides(layout.crop)  # the mask's element (o * w + j) along each axis
        at = " + ".join(f"(o{d} * {win[d]}{f' + j{d}' if win[d] != 1 else ''}) * {mst[d]}"
                        for d in nest.loop_axes) or "0"
        lines += nest.over_taps(ind, [
            f"const long long tap = {nest.tap_index()};",
            f"for (long long r = 0; r < {nest.run}; ++r) m[{at} + r] = sel[r] == tap;"])
        lines += nest.close()
        head = (f"/* window_choice_mask {kind} window {tuple(win)} */\nvoid {self.cname}("
                f"const {self.tx} *restrict x, bool *restrict m) {{")
        return "\n".join([head] + ["    " + ln for ln in lines] + ["}"]) + "\n"


class SelectAndScatterAdd(_Selection):
    """`select_and_scatter_add(s, x)`: each window's cotangent added at its selected
    element, in the output's row-major order."""

    def __init__(self, eqn, cname):
        super().__init__(eqn, cname, x_index=1)
        s = eqn.invars[0].aval
        if np.dtype(s.dtype).name not in ("float32", "float64"):
            raise ops.Unsupported("select_and_scatter_add in C takes float32/float64 "
                                  "cotangents")
        self.ts = ops.storage(np.dtype(s.dtype).name)

    def source(self):
        p = self.eqn.params
        s, x = (v.aval for v in self.eqn.invars)
        nest = _Nest(x.shape, s.shape, p)
        kind = p["select_prim"]
        lines, ind, off = nest.open()
        lines.insert(0, f"memset(o, 0, {math.prod(x.shape) * np.dtype(s.dtype).itemsize});")
        lines += self.select(nest, ind, kind)
        # each lane's selected tap: its window indices, then its element (none: padding)
        inner, rest = [], "sel[r]"
        for d in reversed(nest.active):
            inner.append(f"const long long j{d} = {rest} % {nest.win[d]};")
            rest = f"({rest} / {nest.win[d]})"
        lane = " + r" if nest.run != 1 else ""
        inner += nest.located(nest.loop_axes) + [f"if (ok) o[at{lane}] += s[{off}{lane}];"]
        lines += [ind + f"for (long long r = 0; r < {nest.run}; ++r) {{"]
        lines += [ind + "    " + ln for ln in inner] + [ind + "}"]
        lines += nest.close()
        head = (f"/* select_and_scatter_add {kind} window {tuple(p['window_dimensions'])} "
                f"strides {tuple(p['window_strides'])} */\nvoid {self.cname}(const {self.ts} "
                f"*restrict s, const {self.tx} *restrict x, {self.ts} *restrict o) {{")
        return "\n".join([head] + ["    " + ln for ln in lines] + ["}"]) + "\n"


ROUTINES = {select_and_scatter_add_p: SelectAndScatterAdd, choice_mask_p: ChoiceMask,
            reduce_window_sum_p: ReduceWindow, reduce_window_max_p: ReduceWindow,
            reduce_window_min_p: ReduceWindow}
