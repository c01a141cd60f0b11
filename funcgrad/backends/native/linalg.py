"""Small linear algebra as C routines: `lu` (at most `SMALL_MAX` rows and columns),
`triangular_solve` and `cholesky` (at most `LARGE_MAX`), batched over the leading axes,
row-major, float32/float64 (the shape operations of loop bodies are in `shapes.py`).

They let a loop body holding `fnp.linalg.solve` run as one C loop (`loops.py`), and replace
the numpy implementation's per-column Python loop (lu) and LAPACK's call overhead for small
matrices at top level (`program.py`); larger matrices keep LAPACK through numpy. Each
routine is a class with `cname`, `source()`, `operands` ((dtype, size) per pointer, inputs
first) and `n_in`:

    /* lu 4x4 */
    void fg_lu0(const float *restrict x, float *restrict lu, int *restrict piv,
                int *restrict perm) { ... }

`lu` is the numpy implementation's algorithm step for step (the first largest |a_ij| is the
pivot, as argmax, a NaN winning; whole rows swap; the column divides by the pivot, a zero
pivot by 1; the trailing update is a product then a difference), so for m >= n it gives the
same pivots and the same bits. `triangular_solve` substitutes (numpy calls LAPACK's general
solver on the triangle: results agree within a few ulp times n). `cholesky` is the
right-looking algorithm reading the lower triangle, float32 computed in double (within a
few ulp times n, often closer to the exact factor than float32 LAPACK); a matrix that is not
positive definite (a pivot <= 0) is all NaN, as the numpy implementation makes it, and a NaN
entry propagates into the factor as in the OpenBLAS `potrf` numpy ships (upper triangle 0).
Imports lax and the native tables only.
"""

import math

import numpy as np

from funcgrad.backends.native import ops
from funcgrad.lax import linalg_decomp as decomp

SMALL_MAX = 32  # lu: rows and columns at most (the numpy implementation's unblocked part)
LARGE_MAX = 128  # cholesky, triangular_solve: above, LAPACK through numpy is faster


class _Routine(ops.EqnRoutine):
    """Shared: the operand table and the batch loop of a routine over `eqn`'s avals."""

    MAX = SMALL_MAX

    def __init__(self, eqn, cname):
        self.eqn, self.cname = eqn, cname
        dts = {np.dtype(v.aval.dtype).name for v in eqn.invars}
        if len(dts) != 1 or not dts <= {"float32", "float64"}:
            raise ops.Unsupported(f"{eqn.prim.name} in C takes float32/float64 operands")
        self.dt = dts.pop()
        self.t = ops.storage(self.dt)
        self.f = "f" if self.dt == "float32" else ""  # fabsf / sqrtf
        x = eqn.invars[0].aval
        if x.ndim < 2 or max(x.shape[-2:]) > self.MAX:
            raise ops.Unsupported(f"{eqn.prim.name} of a matrix over {self.MAX} rows")
        if any(0 in v.aval.shape for v in eqn.invars):
            raise ops.Unsupported(f"{eqn.prim.name} of an empty array (numpy does it)")
        self.batch = math.prod(x.shape[:-2])


    def _function(self, title, params, per_matrix):
        """`void cname(params) { for each matrix of the batch: per_matrix }`; `params` are
        (C type, name, elements per matrix) and each name is offset to the matrix."""
        sig = ", ".join(f"{'const ' if k < self.n_in else ''}{t} *restrict {n}"
                        for k, (t, n, _) in enumerate(params))
        lines = [f"/* {title} */", f"void {self.cname}({sig}) {{",
                 f"    for (long long _b = 0; _b < {self.batch}; ++_b) {{"]
        for k, (t, n, size) in enumerate(params):
            const = "const " if k < self.n_in else ""
            lines.append(f"        {const}{t} *{n}_m = {n} + _b * {size};")
        lines += ["        " + ln for ln in per_matrix] + ["    }", "}"]
        return "\n".join(lines) + "\n"


class Lu(_Routine):
    """`lu_p`: (lu, pivots, permutation) of (..., m, n), as `linalg_decomp._lu_impl`."""

    def source(self):
        m, n = self.eqn.invars[0].aval.shape[-2:]
        k, t, f = min(m, n), self.t, self.f
        body = [f"memcpy(a_m, x_m, {m * n * np.dtype(self.dt).itemsize});",
                f"for (int i = 0; i < {m}; ++i) pm_m[i] = i;",
                f"for (int j = 0; j < {k}; ++j) {{",
                f"    int p = j; {t} best = fabs{f}(a_m[j * {n} + j]);",
                f"    for (int i = j + 1; i < {m}; ++i) {{  /* argmax: first max, NaN wins */",
                f"        const {t} v = fabs{f}(a_m[i * {n} + j]);",
                "        if (v > best || (v != v && best == best)) { best = v; p = i; }",
                "    }",
                "    pv_m[j] = p;",
                "    if (p != j) {",
                f"        for (int c = 0; c < {n}; ++c) {{",
                f"            const {t} s = a_m[j * {n} + c];",
                f"            a_m[j * {n} + c] = a_m[p * {n} + c]; a_m[p * {n} + c] = s;",
                "        }",
                "        const int s = pm_m[j]; pm_m[j] = pm_m[p]; pm_m[p] = s;",
                "    }",
                f"    const {t} d = a_m[j * {n} + j] == 0 ? 1 : a_m[j * {n} + j];",
                f"    for (int i = j + 1; i < {m}; ++i) a_m[i * {n} + j] /= d;",
                f"    for (int i = j + 1; i < {m}; ++i) {{",
                f"        const {t} l = a_m[i * {n} + j];",
                f"        for (int c = j + 1; c < {n}; ++c) "
                f"a_m[i * {n} + c] -= l * a_m[j * {n} + c];",
                "    }", "}"]
        params = [(t, "x", m * n), (t, "a", m * n), ("int", "pv", k), ("int", "pm", m)]
        return self._function(f"lu {m}x{n}", params, body)


class TriangularSolve(_Routine):
    """`triangular_solve_p` by substitution, every flag (`conjugate_a` is a no-op on reals).
    Each solved entry updates the rest at once (`x_r -= e_ri x_i`), the inner loop running
    along contiguous memory where the layout allows, so it vectorizes."""

    MAX = LARGE_MAX
    MAX_RHS = 1 << 16  # elements of one b: above, LAPACK's blocked solve keeps them in cache

    def __init__(self, eqn, cname):
        super().__init__(eqn, cname)
        if math.prod(eqn.invars[1].aval.shape[-2:]) > self.MAX_RHS:
            raise ops.Unsupported("triangular_solve with over 65536 right-hand-side entries")

    def source(self):
        p = self.eqn.params
        a_aval, b_aval = (v.aval for v in self.eqn.invars)
        m, rows, cols = a_aval.shape[-1], *b_aval.shape[-2:]
        left = p["left_side"]
        # the system E x = b on each right-hand side: E = op(a) (left) or op(a)^T (right)
        direct = left != p["transpose_a"]
        lower = (p["lower"] != p["transpose_a"]) == left

        def e(i, j):
            return f"a_m[{i} * {m} + {j}]" if direct else f"a_m[{j} * {m} + {i}]"

        def x(i, c):  # entry i of right-hand side c
            return (f"x_m[(long long){i} * {cols} + {c}]" if left
                    else f"x_m[{c} * {cols} + {i}]")
        order = f"int i = 0; i < {m}; ++i" if lower else f"int i = {m - 1}; i >= 0; --i"
        rest = f"int r = i + 1; r < {m}; ++r" if lower else "int r = 0; r < i; ++r"
        t, nrhs = self.t, cols if left else rows
        body = [f"memcpy(x_m, b_m, {rows * cols * np.dtype(self.dt).itemsize});"]
        if left:  # rows of x: the inner loop runs along the right-hand sides
            body += [f"for ({order}) {{"]
            if not p["unit_diagonal"]:
                body += [f"    const {t} d = {e('i', 'i')};",
                         f"    for (long long c = 0; c < {nrhs}; ++c) {x('i', 'c')} /= d;"]
            if nrhs == 1:  # one right-hand side: the update runs along x itself (SIMD)
                body += [f"    const {t} v = {x('i', 0)};", "    #pragma omp simd",
                         f"    for ({rest}) {x('r', 0)} -= {e('r', 'i')} * v;", "}"]
            else:
                scale = None if p["unit_diagonal"] else f"/= {e('i', 'i')}"
                body = body[:1] + self._blocked(m, nrhs, lower, scale, e, x)
        elif nrhs > 1 and rows * cols <= self.TRANSPOSED_MAX:
            # x transposed into w (the right-hand sides innermost), solved as on the left
            # with each row scaled by the diagonal's reciprocal, as the loop below does
            w = lambda i, c: f"w[(long long){i} * {nrhs} + {c}]"  # noqa: E731
            body = [f"{t} w[{rows * cols}];",
                    f"for (long long c = 0; c < {nrhs}; ++c)",
                    f"    for (int i = 0; i < {m}; ++i) {w('i', 'c')} = b_m[c * {cols} + i];"]
            scale = None
            if not p["unit_diagonal"]:
                body += [f"{t} rd[{m}];",
                         f"for (int i = 0; i < {m}; ++i) rd[i] = 1 / {e('i', 'i')};"]
                scale = "*= rd[i]"
            body += self._blocked(m, nrhs, lower, scale, e, w)
            body += [f"for (long long c = 0; c < {nrhs}; ++c)",
                     f"    for (int i = 0; i < {m}; ++i) {x('i', 'c')} = {w('i', 'c')};"]
        else:  # one right-hand side (a row of x) at a time: the inner loop runs along it
            if not p["unit_diagonal"]:  # reciprocals once (a division per entry is slow)
                body += [f"{t} rd[{m}];",
                         f"for (int i = 0; i < {m}; ++i) rd[i] = 1 / {e('i', 'i')};"]
            body += [f"for (long long c = 0; c < {nrhs}; ++c)", f"    for ({order}) {{"]
            if not p["unit_diagonal"]:
                body += [f"        {x('i', 'c')} *= rd[i];"]
            body += [f"        const {t} v = {x('i', 'c')};", "        #pragma omp simd",
                     f"        for ({rest}) {x('r', 'c')} -= {e('r', 'i')} * v;", "    }"]
        params = [(t, "a", m * m), (t, "b", rows * cols), (t, "x", rows * cols)]
        return self._function(f"triangular_solve {m}x{m}, b {rows}x{cols}", params, body)

    BLOCK = 4  # solved rows applied to the rest together (one pass over each row per block)
    TRANSPOSED_MAX = 1 << 14  # entries of a right-side b solved transposed (on the stack)

    def _blocked(self, m, nrhs, lower, scale, e, x):
        """Rows of x (`x(i, c)`: entry c of row i) solved `BLOCK` at a time, each row `i`
        first scaled by `x(i, c) {scale}` (None: unit diagonal): the block's rows are
        finished among themselves, then each remaining row takes their `BLOCK` updates in
        one pass (loads and stores of x cut by `BLOCK`). Every entry still takes its updates
        one by one, in the unblocked order, so the result is the same bit for bit."""
        t, B = self.t, self.BLOCK
        if lower:  # block [i0, i1), the rest below it
            lines = [f"for (int i0 = 0; i0 < {m}; i0 += {B}) {{",
                     f"    const int i1 = i0 + {B} < {m} ? i0 + {B} : {m};",
                     "    for (int i = i0; i < i1; ++i) {"]
            inner, rest, order = "int r = i + 1; r < i1; ++r", f"int r = i1; r < {m}; ++r", 1
        else:  # block (i1, i0], the rest above it, solved from the last row up
            lines = [f"for (int i0 = {m - 1}; i0 >= 0; i0 -= {B}) {{",
                     f"    const int i1 = i0 - {B} > -1 ? i0 - {B} : -1;",
                     "    for (int i = i0; i > i1; --i) {"]
            inner, rest, order = "int r = i1 + 1; r < i; ++r", "int r = 0; r <= i1; ++r", -1
        if scale is not None:
            lines += [f"        for (long long c = 0; c < {nrhs}; ++c) {x('i', 'c')} {scale};"]
        update = lambda r, i, f: f"{x(r, 'c')} -= {f} * {x(i, 'c')};"  # noqa: E731
        lines += [f"        for ({inner}) {{", f"            const {t} f = {e('r', 'i')};",
                  "            #pragma omp simd",
                  f"            for (long long c = 0; c < {nrhs}; ++c) {update('r', 'i', 'f')}",
                  "        }", "    }"]
        # the rest (empty after a last, partial block, so all BLOCK pivots exist)
        pivots = [f"i0 {'+' if order > 0 else '-'} {k}" if k else "i0" for k in range(B)]
        lines += [f"    for ({rest}) {{"]
        lines += [f"        const {t} f{k} = {e('r', f'({q})')};" for k, q in enumerate(pivots)]
        lines += ["        #pragma omp simd", f"        for (long long c = 0; c < {nrhs}; ++c) {{",
                  f"            {t} v = {x('r', 'c')};"]
        lines += [f"            v -= f{k} * {x(f'({q})', 'c')};" for k, q in enumerate(pivots)]
        lines += [f"            {x('r', 'c')} = v;", "        }", "    }", "}"]
        return lines


class Cholesky(_Routine):
    """`cholesky_p`: right-looking on an upper factor `U` (rows contiguous, so the trailing
    update vectorizes), transposed into the lower factor at the end; float32 is computed in
    double (as accurate as LAPACK's blocked float32, or more); all NaN where a pivot <= 0."""

    MAX = LARGE_MAX

    def source(self):
        n, t = self.eqn.invars[0].aval.shape[-1], self.t
        u = lambda i, j: f"w[{i} * {n} + {j}]"  # noqa: E731
        wide = t == "float"
        body = ([f"double w[{n * n}];  /* U in double */"] if wide else ["double *w = l_m;"])
        body += [f"for (int i = 0; i < {n}; ++i)  /* U = the lower triangle of x, transposed */",
                 f"    for (int j = 0; j < {n}; ++j) {u('i', 'j')} = j < i ? 0 : x_m[j * {n} + i];",
                 # pivots 4 at a time: the block's rows finished among themselves, then each
                 # row below takes the 4 updates in one pass, each entry in the unblocked
                 # order (the same bits as one pivot at a time)
                 f"for (int j0 = 0; j0 < {n}; j0 += 4) {{",
                 f"    const int j1 = j0 + 4 < {n} ? j0 + 4 : {n};",
                 "    for (int j = j0; j < j1; ++j) {",
                 f"        const double s = {u('j', 'j')};",
                 "        if (s <= 0) {  /* not positive definite: all NaN (NaN propagates) */",
                 f"            for (int e = 0; e < {n * n}; ++e) l_m[e] = NAN;",
                 "            goto next;",
                 "        }",
                 "        const double d = sqrt(s);",
                 f"        {u('j', 'j')} = d;",
                 f"        for (int k = j + 1; k < {n}; ++k) {u('j', 'k')} /= d;",
                 "        for (int i = j + 1; i < j1; ++i) {",
                 f"            const double g = {u('j', 'i')};",
                 f"            for (int k = i; k < {n}; ++k) {u('i', 'k')} -= g * {u('j', 'k')};",
                 "        }", "    }",
                 # rows below the block (none below a last, partial block)
                 f"    for (int i = j1; i < {n}; ++i) {{",
                 f"        const double g0 = {u('j0', 'i')}, g1 = {u('(j0 + 1)', 'i')};",
                 f"        const double g2 = {u('(j0 + 2)', 'i')}, g3 = {u('(j0 + 3)', 'i')};",
                 "        #pragma omp simd",
                 f"        for (int k = i; k < {n}; ++k) {{",
                 f"            double v = {u('i', 'k')};",
                 f"            v -= g0 * {u('j0', 'k')};",
                 f"            v -= g1 * {u('(j0 + 1)', 'k')};",
                 f"            v -= g2 * {u('(j0 + 2)', 'k')};",
                 f"            v -= g3 * {u('(j0 + 3)', 'k')};",
                 f"            {u('i', 'k')} = v;",
                 "        }", "    }", "}"]
        if wide:
            body += [f"for (int i = 0; i < {n}; ++i)  /* L = U^T, rounded */",
                     f"    for (int j = 0; j < {n}; ++j) "
                     f"l_m[i * {n} + j] = j > i ? 0 : (float){u('j', 'i')};"]
        else:
            body += [f"for (int i = 0; i < {n}; ++i)  /* L = U^T */",
                     f"    for (int j = i + 1; j < {n}; ++j) {{",
                     f"        {u('j', 'i')} = {u('i', 'j')}; {u('i', 'j')} = 0;", "    }"]
        body.append("next:;")
        return self._function(f"cholesky {n}x{n}", [(t, "x", n * n), (t, "l", n * n)], body)


ROUTINES = {decomp.lu_p: Lu, decomp.triangular_solve_p: TriangularSolve,
            decomp.cholesky_p: Cholesky}
