"""`np.matmul` in C, call for call as numpy computes it, so a product has numpy's bits.

The numpy backend computes a `dot_general` outside loops as `np.matmul` of two views
(`backends/numpy/ops.py`); numpy's float32/float64 matmul (`FLOAT_matmul` in numpy's
`umath/matmul.c.src`) then picks, from the core dimensions and the operands' strides, BLAS
`gemm` (or `syrk` for a matrix times its own transpose), `gemv`, `dot` or its own loop, with
transpositions read from the strides, and OpenBLAS's results depend on that choice (a
transposed operand gives other bits). `Matmul` makes the same choice at render time from the
operands' `views.View`s and prints the same calls through the BLAS numpy loaded (`blas.py`):

    /* dot_general 25 x (10x40 @ 40x40): numpy's matmul: gemm NoTrans/NoTrans */
    void fg_mm2(const float *a, const float *b, float *o) {
        for (long long _i = 0; _i < 25; ++_i) {
            const float *ip1 = a + _i * 400, *ip2 = b + _i * 0;  ...
            fg_sgemm(101, 111, 111, 10, 40, 40, 1.0f, ip1, 40, ip2, 40, 0.0f, op, 40);

`a`, `b` and `o` point at the operands' first elements (a view's offset included), so `ip1 ==
ip2` (numpy's test for `syrk`) is tested on the same addresses numpy tests. Imports numpy and
the native tables only.
"""

import math

import numpy as np

from funcgrad.backends.native import blas, cnode, ops
from funcgrad.backends.native.blas import COL_MAJOR, NO_TRANS, ROW_MAJOR, TRANS, UPPER

BLAS_MAXSIZE = (1 << 63) - 2  # numpy's bound for an ILP64 BLAS
_NAME = {NO_TRANS: "NoTrans", TRANS: "Trans"}


def _cdiv(a, b):
    """C's integer division (truncating toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def blasable2d(bs1, bs2, d1, d2, sz):
    """numpy's `is_blasable2d` on byte strides: the second axis contiguous, the first a
    whole number of elements no shorter than the second axis."""
    if bs2 != sz:
        return False
    unit1 = _cdiv(bs1, sz)
    return bs1 % sz == 0 and unit1 >= d2 and unit1 <= BLAS_MAXSIZE


def _blas_stride(stride, sz):
    """numpy's `blas_stride`: a positive whole number of elements, else 0."""
    return stride // sz if stride > 0 and stride % sz == 0 else 0


class Matmul:
    """`np.matmul(a, b)` of operand views `a` (..., m, n) and `b` (..., n, p) of `dtype`
    (float32/float64) into a row-major output; `function()` is its C function `cname(a, b,
    o)` (see the module docstring). Raises `ops.Unsupported` for other dtypes, operands
    whose batch axes differ, or without numpy's BLAS."""

    status = False  # returns nothing (numpy's temporaries, when any, are on the stack)
    STACK_MAX_BYTES = 1 << 16  # the temporaries of non-BLAS-able operands, at most

    def __init__(self, a, b, dtype, cname):
        dt = np.dtype(dtype)
        if dt.name not in ("float32", "float64") or a.dtype != dt or b.dtype != dt:
            raise ops.Unsupported(f"np.matmul of {a.dtype}/{b.dtype} in C")
        if len(a.shape) != len(b.shape) or len(a.shape) not in (2, 3) or \
                a.shape[:-2] != b.shape[:-2]:
            raise ops.Unsupported("np.matmul of operands with other batch axes in C")
        if not blas.functions():
            raise ops.Unsupported("no BLAS in this process (numpy's OpenBLAS)")
        self.a, self.b, self.dt, self.cname = a, b, dt, cname
        self.t = ops.storage(dt.name)
        self.sz = dt.itemsize
        self.pre = "s" if dt.name == "float32" else "d"
        self.one, self.zero = ("1.0f", "0.0f") if self.pre == "s" else ("1.0", "0.0")
        self.m, self.n = a.shape[-2:]
        self.p = b.shape[-1]
        self.batch = a.shape[0] if len(a.shape) == 3 else 1
        self.out_shape = a.shape[:-2] + (self.m, self.p)
        self.method = ""  # what numpy calls, for the comment
        self.temps = []  # (name, elements) of the stack temporaries
        self.body = self._core()

    # --- numpy's FLOAT_matmul ------------------------------------------------------------

    def _core(self):
        sz, dm, dn, dp = self.sz, self.m, self.n, self.p
        is1_m, is1_n = (s * sz for s in self.a.strides[-2:])
        is2_n, is2_p = (s * sz for s in self.b.strides[-2:])
        os_m, os_p = dp * sz, sz  # the output is row-major
        special = dm == 1 or dn == 1 or dp == 1
        zero_dim = dm == 0 or dn == 0 or dp == 0
        i1c, i2c = blasable2d(is1_m, is1_n, dm, dn, sz), blasable2d(is2_n, is2_p, dn, dp, sz)
        i1f, i2f = blasable2d(is1_n, is1_m, dn, dm, sz), blasable2d(is2_p, is2_n, dp, dn, sz)
        i1b, i2b = i1c or i1f, i2c or i2f
        ob = blasable2d(os_m, os_p, dm, dp, sz) or blasable2d(os_p, os_m, dp, dm, sz)
        vector_matrix = dm == 1 and i2b and blasable2d(is1_n, sz, dn, 1, sz)
        matrix_vector = dp == 1 and i1b and blasable2d(is2_n, sz, dn, 1, sz)
        args = ("ip1", is1_m, is1_n, "ip2", is2_n, is2_p, "op", os_m, os_p, dm, dn, dp)
        if zero_dim:
            return self._noblas(*args)
        if special:
            if dm == 1 and dp == 1:
                return self._dot("ip1", is1_n, "ip2", is2_n, "op", dn)
            if dn == 1 and (dp == 1 or dm == 1):
                return self._noblas(*args)
            if vector_matrix:
                return self._gemv("ip2", is2_p, is2_n, "ip1", is1_n, "op", os_p, dp, dn)
            if matrix_vector:
                return self._gemv("ip1", is1_m, is1_n, "ip2", is2_n, "op", os_m, dm, dn)
            return self._noblas(*args)
        return self._matrix_matrix(args, i1b, i2b, ob)

    def _matrix_matrix(self, args, i1b, i2b, ob):
        ip1, is1_m, is1_n, ip2, is2_n, is2_p, op, os_m, os_p, dm, dn, dp = args
        sz = self.sz
        t1, t2, to = abs(is1_m) < abs(is1_n), abs(is2_n) < abs(is2_p), abs(os_m) < abs(os_p)
        lines = []
        if not i1b:  # numpy copies an operand BLAS cannot read (gh-12365)
            ts = (sz, sz * dm) if t1 else (sz * dn, sz)
            lines += self._copy(ip1, is1_m, is1_n, "tmp1", *ts, dm, dn, dm * dn)
            ip1, is1_m, is1_n = "tmp1", *ts
        if not i2b:
            ts = (sz, sz * dn) if t2 else (sz * dp, sz)
            lines += self._copy(ip2, is2_n, is2_p, "tmp2", *ts, dn, dp, dn * dp)
            ip2, is2_n, is2_p = "tmp2", *ts
        out, out_strides = op, (os_m, os_p)
        if not ob:
            os_m, os_p = (sz, sz * dm) if to else (sz * dp, sz)
            self.temps.append(("tmpo", dm * dp))
            op = "tmpo"
        if to:  # matmul(a, b, o) == matmul(b.T, a.T, o.T)
            lines += self._mm(ip2, is2_p, is2_n, ip1, is1_n, is1_m, op, os_p, os_m, dp, dn, dm)
        else:
            lines += self._mm(ip1, is1_m, is1_n, ip2, is2_n, is2_p, op, os_m, os_p, dm, dn, dp)
        if not ob:
            lines += self._copy("tmpo", os_m, os_p, out, *out_strides, dm, dp, 0)
        return lines

    def _mm(self, ip1, is1_m, is1_n, ip2, is2_n, is2_p, op, os_m, os_p, m, n, p):
        """numpy's `matmul_matrixmatrix`: gemm, or syrk when the operands are one matrix
        and its transpose (tested on the addresses at run time, as numpy does)."""
        sz = self.sz
        ldc = _cdiv(os_m, sz)
        if blasable2d(is1_m, is1_n, m, n, sz):
            trans1, lda = NO_TRANS, _cdiv(is1_m, sz)
        else:
            trans1, lda = TRANS, _cdiv(is1_n, sz)
        if blasable2d(is2_n, is2_p, n, p, sz):
            trans2, ldb = NO_TRANS, _cdiv(is2_n, sz)
        else:
            trans2, ldb = TRANS, _cdiv(is2_p, sz)
        one, zero = self.one, self.zero
        gemm = (f"fg_{self.pre}gemm({ROW_MAJOR}, {trans1}, {trans2}, {m}, {p}, {n}, {one}, "
                f"{ip1}, {lda}, {ip2}, {ldb}, {zero}, {op}, {ldc});")
        self.method = f"gemm {_NAME[trans1]}/{_NAME[trans2]}"
        if not (m == p and is1_m == is2_p and is1_n == is2_n and trans1 != trans2):
            return [cnode.Stmt(gemm)]
        ld = lda if trans1 == NO_TRANS else ldb
        syrk = [cnode.Stmt(f"fg_{self.pre}syrk({ROW_MAJOR}, {UPPER}, {trans1}, {p}, {n}, "
                           f"{one}, {ip1}, {ld}, {zero}, {op}, {ldc});"),
                cnode.For("i", 0, p, [cnode.For(
                    "j", "i + 1", p, [cnode.Stmt(f"{op}[j * {ldc} + i] = {op}[i * {ldc} + j];")])])]
        self.method += " (syrk when both operands are one matrix)"
        return [cnode.If(f"{ip1} == {ip2}", syrk, [cnode.Stmt(gemm)])]

    def _gemv(self, ip1, is1_m, is1_n, ip2, is2_n, op, op_m, m, n):
        """numpy's `gemv`: `op[i] = sum_k ip1[i, k] ip2[k]` through BLAS gemv."""
        sz = self.sz
        if blasable2d(is1_m, is1_n, m, n, sz):
            order, lda = COL_MAJOR, _cdiv(is1_m, sz)
        else:
            order, lda = ROW_MAJOR, _cdiv(is1_n, sz)
        self.method = f"gemv {'ColMajor' if order == COL_MAJOR else 'RowMajor'}/Trans"
        return [cnode.Stmt(f"fg_{self.pre}gemv({order}, {TRANS}, {n}, {m}, {self.one}, {ip1}, "
                           f"{lda}, {ip2}, {_cdiv(is2_n, sz)}, {self.zero}, {op}, "
                           f"{_cdiv(op_m, sz)});")]

    def _dot(self, ip1, is1, ip2, is2, op, n):
        """numpy's `FLOAT_dot`: BLAS dot summed in double when both strides are positive
        whole elements, else its own loop in the operands' type."""
        sz, t = self.sz, self.t
        b1, b2 = _blas_stride(is1, sz), _blas_stride(is2, sz)
        if b1 and b2:
            self.method = "dot"
            return [cnode.Stmt(f"{op}[0] = ({t})(double)fg_{self.pre}dot({n}, {ip1}, {b1}, "
                               f"{ip2}, {b2});")]
        self.method = "its own dot loop"
        step = (f"_s += {ip1}[k * {_cdiv(is1, sz)}] * {ip2}[k * {_cdiv(is2, sz)}];")
        return [cnode.Stmt(f"{t} _s = 0;"), cnode.For("k", 0, n, [cnode.Stmt(step)]),
                cnode.Stmt(f"{op}[0] = _s;")]

    def _noblas(self, ip1, is1_m, is1_n, ip2, is2_n, is2_p, op, os_m, os_p, dm, dn, dp):
        """numpy's `matmul_inner_noblas`: each output element summed in order in the
        operands' type."""
        sz, t = self.sz, self.t
        self.method = self.method or "its own loop"
        e = lambda s: _cdiv(s, sz)  # noqa: E731
        a, b = f"{ip1}[m * {e(is1_m)} + k * {e(is1_n)}]", f"{ip2}[k * {e(is2_n)} + p * {e(is2_p)}]"
        step = f"_s += {a} * {b};"
        inner = [cnode.Stmt(f"{t} _s = 0;"), cnode.For("k", 0, dn, [cnode.Stmt(step)]),
                 cnode.Stmt(f"{op}[m * {e(os_m)} + p * {e(os_p)}] = _s;")]
        return [cnode.For("m", 0, dm, [cnode.For("p", 0, dp, inner)])]

    def _copy(self, src, s_m, s_n, dst, d_m, d_n, dm, dn, temp):
        """numpy's `matrix_copy` of a dm x dn matrix (byte strides); `temp`: the elements of
        a new stack temporary `dst` (0: it exists)."""
        if temp:
            self.temps.append((dst, temp))
        e = lambda s: _cdiv(s, self.sz)  # noqa: E731
        copy = f"{dst}[m * {e(d_m)} + k * {e(d_n)}] = {src}[m * {e(s_m)} + k * {e(s_n)}];"
        return [cnode.For("m", 0, dm, [cnode.For("k", 0, dn, [cnode.Stmt(copy)])])]

    # --- the C function ------------------------------------------------------------------

    def function(self):
        t = self.t
        s0, s1 = (v.strides[0] if len(v.shape) == 3 else 0 for v in (self.a, self.b))
        s2 = self.m * self.p
        if sum(n for _, n in self.temps) * self.sz > self.STACK_MAX_BYTES:
            raise ops.Unsupported("np.matmul copying large operands")
        decl = [cnode.Stmt(f"{t} {name}[{max(n, 1)}];") for name, n in self.temps]
        ptrs = cnode.Stmt(f"const {t} *ip1 = a + _i * {s0}, *ip2 = b + _i * {s1}; "
                          f"{t} *op = o + _i * {s2};")
        body = decl + [cnode.For("_i", 0, self.batch, [ptrs] + self.body)]
        batch = f"{self.batch} x (" if len(self.a.shape) == 3 else "("
        title = (f"dot_general {batch}{self.m}x{self.n} @ {self.n}x{self.p}): numpy's matmul: "
                 f"{self.method}")
        return cnode.Function("void", self.cname, [f"const {t} *a", f"const {t} *b", f"{t} *o"],
                              body, title, needs=[blas.BLAS])

    @property
    def flops(self):
        return 2 * self.batch * self.m * self.n * self.p

    @property
    def out_size(self):
        return math.prod(self.out_shape)
