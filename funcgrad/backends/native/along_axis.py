"""Operations along one axis as C routines, so a loop body holding one stays a C loop (greedy
decoding's `argmax`, a running `cumsum`): `argmax`/`argmin` (the first extremal index, a NaN
winning, as `np.argmax`) and `cumsum`/`cumprod`/`cummax`/`cummin` (one pass in order, as
numpy's `accumulate`, from the end when `reverse`; integer sums and products wrap) and
`sort` by one key (stable, NaNs last, as numpy's stable sort; so `sort`, `argsort` and
`random.permutation` in a loop body) and `top_k` (stable descending, a NaN largest: top-k
sampling in a decoding loop), on rows of up to `Sort.MAX_N` elements. (`reduce_prod` is a
fused reduction: its kernels are C.)

The operand is viewed as [outer, n, inner] around the axis; each routine loops over outer and
inner and walks the axis:

    /* cumsum axis 1 of (4, 6) */
    void fg_loop0_b_k2(const float *restrict x, float *restrict o) {

Each is an `ops.EqnRoutine` with `cname` and `source()`, as `linalg.py`'s routines are;
`shapes.IN_LOOPS` holds them. Imports lax and the native tables only.
"""

import math

import numpy as np

from funcgrad.backends.native import ops
from funcgrad.lax.reductions import (
    argmax_p,
    argmin_p,
    cummax_p,
    cummin_p,
    cumprod_p,
    cumsum_p,
)
from funcgrad.lax.sorting import sort_p, top_k_p


class _AlongAxis(ops.EqnRoutine):
    """Shared: the [outer, n, inner] view, the operand table and the loops around the axis."""

    def __init__(self, eqn, cname, axis):
        self.eqn, self.cname = eqn, cname
        x = eqn.invars[0].aval
        dt = np.dtype(x.dtype)
        if dt.name == "float16" or dt.kind not in "biuf" or 0 in x.shape:
            raise ops.Unsupported(f"{eqn.prim.name} of {x} in C")
        self.dt, self.t = dt, ops.storage(dt.name)
        self.outer, self.n = math.prod(x.shape[:axis]), x.shape[axis]
        self.inner = math.prod(x.shape[axis + 1:])
        self.title = f"{eqn.prim.name} axis {axis} of {tuple(x.shape)}"


    def _function(self, out_type, walk):
        """`walk`: C lines over k along the axis, reading x[at(k)], with `_i`, `_j` set."""
        lines = [f"/* {self.title} */",
                 f"void {self.cname}(const {self.t} *restrict x, {out_type} *restrict o) {{",
                 f"    for (long long _i = 0; _i < {self.outer}; ++_i)",
                 f"        for (long long _j = 0; _j < {self.inner}; ++_j) {{"]
        lines += ["            " + ln for ln in walk] + ["        }", "}"]
        return "\n".join(lines) + "\n"

    def at(self, k):
        return f"(_i * {self.n} + ({k})) * {self.inner} + _j"


class ArgExtremum(_AlongAxis):
    """`argmax`/`argmin`: the first extremal index along the axis (a NaN wins)."""

    def __init__(self, eqn, cname):
        super().__init__(eqn, cname, eqn.params["axes"][0])
        self.it = ops.storage(np.dtype(eqn.params["index_dtype"]).name)

    def source(self):
        better = ">" if self.eqn.prim is argmax_p else "<"
        walk = [f"{self.t} _bv = x[{self.at(0)}];", "long long _best = 0;",
                f"for (long long k = 1; k < {self.n}; ++k) {{",
                f"    const {self.t} _v = x[{self.at('k')}];",
                f"    if (_bv == _bv && (_v {better} _bv || _v != _v)) {{ _bv = _v; _best = k; }}",
                "}", f"o[_i * {self.inner} + _j] = ({self.it})_best;"]
        return self._function(self.it, walk)


class Cumulative(_AlongAxis):
    """`cumsum`/`cumprod`/`cummax`/`cummin` along the axis, in order (see the module)."""

    def __init__(self, eqn, cname):
        super().__init__(eqn, cname, eqn.params["axis"])
        prim = eqn.prim
        if prim in (cumsum_p, cumprod_p) and self.dt.kind == "b":
            raise ops.Unsupported(f"{prim.name} of booleans in C")

    def _step(self):
        prim, t = self.eqn.prim, self.t
        if prim in (cummax_p, cummin_p):
            return f"_acc = fg_{'max' if prim is cummax_p else 'min'}(_acc, _v);"
        op = "+" if prim is cumsum_p else "*"
        if self.dt.kind in "iu":  # in unsigned arithmetic, so overflow wraps as numpy's
            u = "unsigned long long" if self.dt.itemsize == 8 else "unsigned int"
            return f"_acc = ({t})(({u})_acc {op} ({u})_v);"
        return f"_acc = _acc {op} _v;"

    def source(self):
        n = self.n
        if self.eqn.params["reverse"]:
            first, loop = n - 1, f"for (long long k = {n - 2}; k >= 0; --k) {{"
        else:
            first, loop = 0, f"for (long long k = 1; k < {n}; ++k) {{"
        walk = [f"{self.t} _acc = x[{self.at(first)}];", f"o[{self.at(first)}] = _acc;", loop,
                f"    const {self.t} _v = x[{self.at('k')}];", "    " + self._step(),
                f"    o[{self.at('k')}] = _acc;", "}"]
        return self._function(self.t, walk)


class Sort(_AlongAxis):
    """`sort` by its first operand (`fnp.sort`, `argsort` as a sort of (x, iota), a
    permutation): a stable bottom-up merge sort of the indices along the axis, NaNs last, as
    numpy's stable sort orders; every operand is then gathered in that order."""

    MAX_N = 4096  # the index buffers live on the stack (2 x 32 KiB)

    def __init__(self, eqn, cname, axis=None):
        super().__init__(eqn, cname, eqn.params["dimension"] if axis is None else axis)
        if eqn.params.get("num_keys", 1) != 1:
            raise ops.Unsupported("a sort by several keys in C")
        if self.n > self.MAX_N:
            raise ops.Unsupported(f"a sort of {self.n} elements in a loop body")
        for v in eqn.invars:
            dt = np.dtype(v.aval.dtype)
            if dt.name == "float16" or dt.kind not in "biuf":
                raise ops.Unsupported(f"{eqn.prim.name} of {v.aval} in C")

    def sorted_indices(self, before):
        """Lines leaving in `_p` the indices along the axis in a stable order of the key
        `x0`; `before(a, b)` is the C test "element a goes strictly before element b"."""
        n = self.n
        take_right = before(f"x0[{self.at('_p[_b]')}]", f"x0[{self.at('_p[_a]')}]")
        return [f"long long _p[{n}], _t[{n}];",
                f"for (long long k = 0; k < {n}; ++k) _p[k] = k;",
                f"for (long long _w = 1; _w < {n}; _w *= 2) {{",
                f"    for (long long _lo = 0; _lo < {n}; _lo += 2 * _w) {{",
                f"        const long long _m = _lo + _w < {n} ? _lo + _w : {n};",
                f"        const long long _h = _lo + 2 * _w < {n} ? _lo + 2 * _w : {n};",
                "        long long _a = _lo, _b = _m, _k = _lo;",
                "        while (_a < _m && _b < _h)",
                f"            _t[_k++] = {take_right} ? _p[_b++] : _p[_a++];",
                "        while (_a < _m) _t[_k++] = _p[_a++];",
                "        while (_b < _h) _t[_k++] = _p[_b++];",
                "    }",
                "    memcpy(_p, _t, sizeof(_p));",
                "}"]

    def ascending(self, a, b):  # NaNs last, as numpy
        return f"({a} < {b} || ({a} == {a} && {b} != {b}))" if self.dt.kind == "f" \
            else f"({a} < {b})"

    def routine(self, outs, walk):
        """The C function over every row: inputs `x0...`, then `outs` ((C type, name))."""
        params = [f"const {ops.storage(np.dtype(v.aval.dtype).name)} *restrict x{m}"
                  for m, v in enumerate(self.eqn.invars)]
        params += [f"{t} *restrict {name}" for t, name in outs]
        lines = [f"/* {self.title} */", f"void {self.cname}({', '.join(params)}) {{",
                 f"    for (long long _i = 0; _i < {self.outer}; ++_i)",
                 f"        for (long long _j = 0; _j < {self.inner}; ++_j) {{"]
        lines += ["            " + ln for ln in walk] + ["        }", "}"]
        return "\n".join(lines) + "\n"

    def source(self):
        walk = self.sorted_indices(self.ascending)
        for m in range(len(self.eqn.invars)):
            walk.append(f"for (long long k = 0; k < {self.n}; ++k) "
                        f"o{m}[{self.at('k')}] = x{m}[{self.at('_p[k]')}];")
        outs = [(ops.storage(np.dtype(v.aval.dtype).name), f"o{m}")
                for m, v in enumerate(self.eqn.invars)]
        return self.routine(outs, walk)


class TopK(Sort):
    """`top_k` along the last axis: the stable descending order (a NaN largest, ties by the
    lower index), as the numpy implementation; values and int32 indices of the first k."""

    def __init__(self, eqn, cname):
        super().__init__(eqn, cname, eqn.invars[0].aval.ndim - 1)
        self.k = eqn.params["k"]

    def source(self):
        def descending(a, b):
            return (f"({a} > {b} || ({a} != {a} && {b} == {b}))" if self.dt.kind == "f"
                    else f"({a} > {b})")
        walk = self.sorted_indices(descending)
        walk.append(f"for (long long k = 0; k < {self.k}; ++k) {{ "
                    f"o0[_i * {self.k} + k] = x0[{self.at('_p[k]')}]; "
                    f"o1[_i * {self.k} + k] = (int)_p[k]; }}")
        return self.routine([(self.t, "o0"), ("int", "o1")], walk)


ROUTINES = {argmax_p: ArgExtremum, argmin_p: ArgExtremum, cumsum_p: Cumulative,
            cumprod_p: Cumulative, cummax_p: Cumulative, cummin_p: Cumulative,
            sort_p: Sort, top_k_p: TopK}
