"""Window operations as C routines: `select_and_scatter_add`, the gradient of max/min
pooling over windows that overlap or pad (tiling windows need none: `lax/pooling.py`).

Per output window in row-major order, the first extremal element of `x` (as `np.argmax`: a
NaN wins, padding and the holes of base dilation count as the identity, -inf for max) gets
that window's cotangent added, so repeated selections add in the numpy implementation's
order (its `np.add.at`) and the result has the same bits, without a scatter through numpy:

    /* select_and_scatter_add max window (1, 3, 3, 1) strides (1, 2, 2, 1) */
    void fg_win0(const float *restrict s, const float *restrict x, float *restrict o) {

Each routine is an `ops.EqnRoutine` with `cname` and `source()`, as `linalg.py`'s are,
so `program.py` calls it at top level and `loops.py` inside a C loop. Imports lax and the
native tables only.
"""

import math

import numpy as np

from funcgrad.backends.native import ops
from funcgrad.lax.convolution import select_and_scatter_add_p


def _strides(shape):
    return [math.prod(shape[k + 1:]) for k in range(len(shape))]


class SelectAndScatterAdd(ops.EqnRoutine):
    """`select_and_scatter_add(s, x)` (see the module docstring)."""

    def __init__(self, eqn, cname):
        self.eqn, self.cname = eqn, cname
        s, x = (v.aval for v in eqn.invars)
        self.ts = ops.storage(np.dtype(s.dtype).name)
        self.tx = ops.storage(np.dtype(x.dtype).name)
        if np.dtype(s.dtype).kind != "f" or "float16" in (s.dtype, x.dtype) or (
                np.dtype(x.dtype).kind not in "fiu"):
            raise ops.Unsupported("select_and_scatter_add in C takes float32/float64 "
                                  "cotangents and a float or integer operand")
        if x.ndim == 0 or 0 in s.shape or 0 in x.shape or 0 in eqn.params["window_dimensions"]:
            raise ops.Unsupported("select_and_scatter_add of a scalar or an empty array")


    def _identity(self, dtype):
        kind = self.eqn.params["select_prim"]
        if dtype.kind == "f":
            return f"{'-' if kind == 'max' else ''}({self.tx})INFINITY"
        info = np.iinfo(dtype)
        return ops.literal(info.min if kind == "max" else info.max, dtype.name)

    def source(self):
        p = self.eqn.params
        s, x = (v.aval for v in self.eqn.invars)
        out, nx = s.shape, x.shape
        xs = _strides(nx)
        wins = p["window_dimensions"]
        better = ">" if p["select_prim"] == "max" else "<"
        ident = self._identity(np.dtype(x.dtype))
        checks, flat = [], []
        for d, (n, st, wd, (lo, _), b) in enumerate(zip(nx, p["window_strides"],
                                                         p["window_dilation"], p["padding"],
                                                         p["base_dilation"])):
            q = " + ".join([f"o{d}" + (f" * {st}" if st != 1 else ""),
                            f"w{d}" + (f" * {wd}" if wd != 1 else "")])
            checks.append((f"const long long q{d} = {q}{f' - ({lo})' if lo else ''};",
                           f"q{d} >= 0 && q{d} < {(n - 1) * b + 1}"
                           + (f" && q{d} % {b} == 0" if b != 1 else "")))
            flat.append(f"(q{d}{f' / {b}' if b != 1 else ''}) * {xs[d]}")
        ind = "    " * len(out)  # the body of the innermost output loop
        wind = ind + "    " * len(wins)  # of the innermost window loop
        lines = [f"memset(o, 0, {math.prod(nx) * np.dtype(s.dtype).itemsize});",
                 "long long _o = 0;"]
        lines += ["    " * k + f"for (long long o{k} = 0; o{k} < {n}; ++o{k})"
                  for k, n in enumerate(out)]
        lines[-1] += " {"
        lines += [ind + "long long _best = -1;", ind + f"{self.tx} _bv = 0;",
                  ind + "int _first = 1;"]
        lines += [ind + "    " * k + f"for (long long w{k} = 0; w{k} < {n}; ++w{k})"
                  for k, n in enumerate(wins)]
        lines[-1] += " {"
        lines += [wind + c for c, _ in checks]
        lines += [wind + f"const int _in = {' && '.join(c for _, c in checks)};",
                  wind + f"const long long _at = _in ? {' + '.join(flat)} : -1;",
                  wind + f"const {self.tx} _v = _in ? x[_at] : {ident};",
                  wind + f"if (_first || (_bv == _bv && (_v {better} _bv || _v != _v))) {{",
                  wind + "    _bv = _v; _best = _at; _first = 0;", wind + "}"]
        lines += [ind + "    " * (len(wins) - 1) + "}", ind + "if (_best >= 0) o[_best] += s[_o];",
                  ind + "++_o;", "    " * (len(out) - 1) + "}"]
        head = (f"/* select_and_scatter_add {p['select_prim']} window {tuple(wins)} strides "
                f"{tuple(p['window_strides'])} */\nvoid {self.cname}(const {self.ts} "
                f"*restrict s, const {self.tx} *restrict x, {self.ts} *restrict o) {{")
        return "\n".join([head] + ["    " + ln for ln in lines] + ["}"]) + "\n"


ROUTINES = {select_and_scatter_add_p: SelectAndScatterAdd}
