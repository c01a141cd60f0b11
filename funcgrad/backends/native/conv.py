"""`conv_general_dilated` as a C routine: the `ConvPlan` of `lax/conv_plan.py` run in C.

The plan (im2col packing into one BLAS gemm per group, cut into chunks) is the numpy
implementation's; here the packing of the input windows (A), of the kernel when it is not a
view (B) and the copy of a temporary product into the output (C) are C loops over the
plan's axes, with static sizes and strides, and the products are calls of the `gemm` numpy's
matmul calls (`fg_sgemm`/`fg_dgemm`: the piece `blas.BLAS`, set by `build.load`, as loops get
them) with the arguments numpy's matmul passes for the same plan (`ConvPlan.gemm_args`), so
the result has the numpy implementation's bits:

    /* conv_general_dilated float32: 1 group of gemm 4096x32x144, A packed (m, k) */
    int fg_la3(const float *restrict lhs, const float *restrict rhs, float *restrict out) {
        float *a = malloc(589824 * sizeof(float));
        ...
        fg_sgemm(101, 111, 111, 4096, 32, 144, 1, a, 144, rhs, 32, 0, out, 32);

A window element outside the input (padding) or between its elements (lhs dilation) is 0;
validity is decided once per run of the innermost axis (a spatial run copies the part in
range and zeroes the rest). The routine returns nonzero when it cannot allocate its
buffers (`status`). Plans numpy would not run through gemm (a dimension below 2, integer or
complex numbers) and programs without numpy's BLAS keep the numpy implementation.
Imports lax and the native tables only.
"""

import math

import numpy as np

from funcgrad.backends.native import blas, cnode, ops
from funcgrad.lax import conv_plan
from funcgrad.lax.convolution import conv_general_dilated_p

# the narrow floats by the C type they are stored as ("fg_half", "fg_bf16")
_NARROW_BY_STORAGE = {ops.storage(name): f for name, f in ops.NARROW.items()}


def _cstrides(shape):
    return [math.prod(shape[k + 1:]) for k in range(len(shape))]


class Conv(ops.EqnRoutine):
    """`conv_general_dilated(lhs, rhs)` by its plan (see the module docstring)."""

    status = True  # nonzero: its buffers could not be allocated
    needs = (cnode.STDLIB, blas.BLAS)  # malloc, numpy's gemm

    def __init__(self, eqn, cname):
        self.eqn, self.cname = eqn, cname
        lhs, rhs = (v.aval for v in eqn.invars)
        out = eqn.outvars[0].aval
        self.conv = conv_plan.plan_of(lhs.shape, rhs.shape, rhs.dtype, out.shape, out.dtype,
                                      **eqn.params)
        if not self.conv.blas or math.prod(out.shape) == 0:
            raise ops.Unsupported("a convolution numpy does not run through BLAS gemm")
        if not blas.functions():
            raise ops.Unsupported("no BLAS gemm in this process (numpy's OpenBLAS)")
        self.p = self.conv.phases[0]  # the phase being printed
        self.t_in = [ops.storage(np.dtype(a.dtype).name) for a in (lhs, rhs)]
        self.t_out = ops.storage(np.dtype(out.dtype).name)
        self.t = ops.storage(self.p.compute.name)
        self.gemm = "fg_sgemm" if self.p.compute.name == "float32" else "fg_dgemm"

    # --- value conversions -------------------------------------------------------------
    def _load(self, t, expr):
        """`expr` (stored as C type `t`) as the compute type."""
        narrow = _NARROW_BY_STORAGE.get(t)
        if narrow is not None:  # float16, bfloat16: widened exactly
            return f"{narrow.load}({expr})"
        return expr if t == self.t else f"({self.t}){expr}"

    def _store(self, expr):
        """A compute-type value `expr` as the output's stored type."""
        narrow = _NARROW_BY_STORAGE.get(self.t_out)
        if narrow is not None:  # float16, bfloat16: rounded once, to nearest even
            return f"{narrow.store}({expr})"
        return expr if self.t_out == self.t else f"({self.t_out}){expr}"

    def _chunked(self, group, j):
        return self.p.chunk == group and j == 0

    def source(self):
        lines = self._buffers()
        if self.conv.zero:  # outputs no kernel tap meets
            size = math.prod(self.conv.out_shape) * self.conv.out_dtype.itemsize
            lines.append(f"memset(out, 0, {size});")
        titles = []
        for p in self.conv.phases:
            self.p = p
            titles.append(self._title(p))
            lines += self._phase(p)
        lines += self._frees() + ["return 0;"]
        head = (f"int {self.cname}(const {self.t_in[0]} *restrict lhs, const {self.t_in[1]} "
                f"*restrict rhs, {self.t_out} *restrict out) {{")
        title = (f"/* conv_general_dilated {self.p.compute.name}: "
                 + (f"{len(titles)} phases: " if len(titles) > 1 else "")
                 + "; ".join(titles) + " */")
        return "\n".join([title, head] + ["    " + ln for ln in lines] + ["}"]) + "\n"

    @staticmethod
    def _title(p):
        chunks = p.chunks()
        m, k = p.chunk_dims(chunks[0][1])
        return (f"{p.groups} group(s) of gemm {m}x{p.og}x{k}"
                f"{f', {len(chunks)} chunks along {p.chunk}' if p.chunk else ''}, A packed "
                f"{'(k, m)' if p.a_trans else '(m, k)'}, B "
                f"{'packed' if p.b_mode == 'pack' else 'the rhs'}, C "
                f"{'the output' if p.c_direct else 'unpacked'}")

    def _phase(self, p):
        """The loop over one phase's chunks: pack, multiply, unpack."""
        if p.chunk:
            size = (p.m_axes if p.chunk == "m" else p.k_axes)[0].size
            lines = [f"for (long long c0 = 0; c0 < {size}; c0 += {p.step}) {{",
                     f"    const long long cn = {size} - c0 < {p.step} ? {size} - c0 : "
                     f"{p.step};"]
        else:
            lines = ["{", "    const long long c0 = 0, cn = 0;", "    (void)c0; (void)cn;"]
        body = self._pack_a()
        if p.b_mode == "pack":
            body += self._pack_b()
        body += self._products()
        if not p.c_direct and p.chunk == "m":
            body += self._unpack()
        lines += ["    " + ln for ln in body] + ["}"]
        if not p.c_direct and p.chunk != "m":
            lines += ["{"] + ["    " + ln for ln in self._unpack()] + ["}"]
        return lines

    # --- buffers -----------------------------------------------------------------------
    def _buffers(self):
        sizes = {}
        for p in self.conv.phases:
            m, k = p.chunk_dims(p.chunks()[0][1])
            need = {"a": p.groups * m * k}
            if p.b_mode == "pack":
                need["b"] = p.groups * k * p.n
            if not p.c_direct:
                need["t"] = p.groups * (p.m if p.chunk == "k" else m) * p.n
            if p.chunk == "k":
                need["t2"] = p.groups * m * p.n
            for name, size in need.items():
                sizes[name] = max(sizes.get(name, 0), size)
        self.bufs = list(sizes.items())
        t = self.t
        lines = [f"{t} *{n} = malloc({size} * sizeof({t}));" for n, size in self.bufs]
        fail = " || ".join(f"!{n}" for n, _ in self.bufs)
        return lines + [f"if ({fail}) {{"] + ["    " + ln for ln in self._frees()] + [
            "    return 1;", "}"]

    def _frees(self):
        return [f"free({n});" for n, _ in self.bufs]

    # --- A: the input's windows ------------------------------------------------------------
    def _pack_a(self):
        p = self.p
        axes = p.storage()
        chunk_at = -1
        if p.chunk:
            chunk_at = (len(p.k_axes) if p.a_trans else 0) if p.chunk == "m" else (
                0 if p.a_trans else len(p.m_axes))
        sizes = ["cn" if j == chunk_at else str(a.size) for j, a in enumerate(axes)]
        lst = _cstrides(p.lhs_shape)
        gsize = " * ".join(sizes) or "1"
        lines = [f"for (long long g = 0; g < {p.groups}; ++g) {{",
                 f"    const long long s_g = g * {p.lhs_group_offset(lst)};",
                 f"    {self.t} *const a_g = a + g * ({gsize});"]
        known = {}  # spatial dim -> (loop variable, coefficient) of the first of its axes
        src, dst, ind = "s_g", "0", "    "
        for j, ax in enumerate(axes):
            var = f"i{j}"
            value = f"(c0 + {var})" if j == chunk_at else var
            if j == len(axes) - 1:
                lines += [ind + ln for ln in self._innermost(
                    ax, var, value, known, src, f"({dst}) * {sizes[j]}", sizes[j])]
                break
            lines.append(ind + f"for (long long {var} = 0; {var} < {sizes[j]}; ++{var}) {{")
            ind += "    "
            lines.append(ind + f"const long long d{j} = ({dst}) * {sizes[j]} + {var};")
            dst = f"d{j}"
            if ax.kind in "nc":
                st = lst[p.lhs_axis(ax.kind)]
                lines.append(ind + f"const long long s{j} = {src} + {value} * {st};")
                src = f"s{j}"
                continue
            coef = self._coef(ax)
            if ax.dim not in known:
                known[ax.dim] = (value, coef)
                continue
            lines += [ind + ln for ln in self._position(ax.dim, known[ax.dim], value, coef)]
            inner = " * ".join(sizes[j + 1:])
            lines += [ind + f"if (!v{ax.dim}) {{ memset(a_g + d{j} * {inner}, 0, {inner} * "
                            f"sizeof({self.t})); continue; }}",
                      ind + f"const long long s{j} = {src} + (q{ax.dim} / "
                            f"{p.lhs_dilation[ax.dim]}) * {lst[p.lhs_axis('k', ax.dim)]};"]
            src = f"s{j}"
        closes = len(axes) - 1
        lines += ["    " * k + "}" for k in range(closes, 0, -1)] + ["}"]
        return lines

    def _coef(self, ax):
        return self.p.window_strides[ax.dim] if ax.kind == "y" else self.p.rhs_dilation[ax.dim]

    def _position(self, d, first, value, coef):
        """`q{d}`, the dilated input position of spatial dim `d`, and `v{d}`, whether it
        holds an input element."""
        p = self.p
        n = p.lhs_shape[p.lhs_axis("k", d)]
        top = (n - 1) * p.lhs_dilation[d]
        fv, fc = first
        dil = p.lhs_dilation[d]
        check = f"q{d} >= 0 && q{d} <= {top}" + (f" && q{d} % {dil} == 0" if dil != 1 else "")
        return [f"const long long q{d} = {fv} * {fc} + {value} * {coef} - ({p.lo[d]});",
                f"const int v{d} = {check};"]

    def _innermost(self, ax, var, value, known, src, row, size):
        """The innermost storage axis (loop variable `var`, index `value`): one run of A,
        starting at element `row` of the group's A, copied from the input at `src` (the
        outer axes' offset). Only an axis of batch or features can be the chunked one here
        (when there are no spatial axes)."""
        p, t_l = self.p, self.t_in[0]
        lst = _cstrides(p.lhs_shape)
        lines = [f"{self.t} *const r = a_g + {row};"]
        if ax.kind in "nc":
            st = lst[p.lhs_axis(ax.kind)]
            return lines + [f"for (long long {var} = 0; {var} < {size}; ++{var}) "
                            f"r[{var}] = {self._load(t_l, f'lhs[{src} + {value} * {st}]')};"]
        coef = self._coef(ax)
        fv, fc = known[ax.dim]
        n = p.lhs_shape[p.lhs_axis("k", ax.dim)]
        dil, st = p.lhs_dilation[ax.dim], lst[p.lhs_axis("k", ax.dim)]
        base = f"{fv} * {fc} - ({p.lo[ax.dim]})"
        lines.append(f"const long long b = {base};")
        if dil != 1:
            top = (n - 1) * dil
            return lines + [
                f"for (long long {var} = 0; {var} < {size}; ++{var}) {{",
                f"    const long long q = b + {var} * {coef};",
                f"    r[{var}] = (q >= 0 && q <= {top} && q % {dil} == 0) ? "
                f"{self._load(t_l, f'lhs[{src} + (q / {dil}) * {st}]')} : 0;", "}"]
        copy = (f"r[{var}] = {self._load(t_l, f'lhs[{src} + (b + {var} * {coef}) * {st}]')};")
        last = f"b + {coef} * ({size} - 1)"
        return lines + [
            f"if (b >= 0 && {last} <= {n - 1}) {{  /* the whole run inside the input */",
            f"    for (long long {var} = 0; {var} < {size}; ++{var}) {copy}",
            "    continue;", "}",
            f"long long lo = b >= 0 ? 0 : (-b + {coef - 1}) / {coef};",
            f"long long hi = b > {n - 1} ? 0 : ({n - 1} - b) / {coef} + 1;",
            f"if (hi > {size}) hi = {size};",
            "if (lo > hi) lo = hi;",
            f"for (long long {var} = 0; {var} < lo; ++{var}) r[{var}] = 0;",
            f"for (long long {var} = lo; {var} < hi; ++{var}) "
            f"r[{var}] = {self._load(t_l, f'lhs[{src} + (b + {var} * {coef}) * {st}]')};",
            f"for (long long {var} = hi; {var} < {size}; ++{var}) r[{var}] = 0;"]

    # --- B: the kernel, when it is no view -----------------------------------------------
    def _pack_b(self):
        p = self.p
        axes = p.k_axes
        st_o = p.rhs_o_stride()
        lines = [f"for (long long g = 0; g < {p.groups}; ++g) {{"]
        ind, src, dst = "    ", f"{p.rhs_off} + g * {p.og * st_o}", "g"
        for j, ax in enumerate(axes):
            size = "cn" if self._chunked("k", j) else str(ax.size)
            value = f"(c0 + j{j})" if self._chunked("k", j) else f"j{j}"
            lines.append(ind + f"for (long long j{j} = 0; j{j} < {size}; ++j{j}) {{")
            ind += "    "
            dst = f"({dst}) * {size} + j{j}"
            src = f"{src} + {value} * {p.rhs_stride(ax)}"
        lines.append(ind + f"const long long d = ({dst}) * {p.n}, s = {src};")
        load = self._load(self.t_in[1], f"rhs[s + o * {st_o}]")
        lines.append(ind + f"for (long long o = 0; o < {p.og}; ++o) b[d + o] = {load};")
        if p.n > p.og:  # a zero column: numpy's matmul calls gemv for a single one
            lines.append(ind + f"for (long long o = {p.og}; o < {p.n}; ++o) b[d + o] = 0;")
        lines += ["    " * k + "}" for k in range(len(axes), -1, -1)]
        return lines

    # --- the products ----------------------------------------------------------------------
    def _products(self):
        p = self.p
        ta, tb, _, n, _, _, ldb, ldc = p.gemm_args(p.step)
        m, k = self._dims()
        lda = m if p.a_trans else k
        loop = f"for (long long g = 0; g < {p.groups}; ++g)"

        def gemm(c, ldc):
            return (f"    {self.gemm}(101, {ta}, {tb}, {m}, {n}, {k}, 1, a + g * ({m}) * ({k}), "
                    f"{lda}, {self._b_ptr()}, {ldb}, 0, {c}, {ldc});")
        if p.chunk != "k":
            return [loop, gemm(self._c_ptr(), ldc)]
        # the chunks after the first: a partial product, added in chunk order
        add = [loop, f"    for (long long r = 0; r < {m}; ++r)",
               f"        for (long long o = 0; o < {n}; ++o)",
               f"            ({self._c_ptr()})[r * {ldc} + o] += t2[(g * ({m}) + r) * {n} + o];"]
        return (["if (c0 == 0) {", "    " + loop, "    " + gemm(self._c_ptr(), ldc),
                 "} else {", "    " + loop, "    " + gemm(f"t2 + g * ({m}) * {n}", n)]
                + ["    " + ln for ln in add] + ["}"])

    def _dims(self):
        """C expressions of the chunk's gemm m and k."""
        p = self.p
        m, k = str(p.m), str(p.k)
        if p.chunk == "m":
            m = f"{p.m // p.m_axes[0].size} * cn"
        elif p.chunk == "k":
            k = f"{p.k // p.k_axes[0].size} * cn"
        return m, k

    def _b_ptr(self):
        p = self.p
        if p.b_mode == "pack":
            return f"b + g * ({self._dims()[1]}) * {p.n}"
        offset = f"c0 * {p.rhs_stride(p.k_axes[0])} + " if p.chunk == "k" else ""
        return f"rhs + {p.rhs_off} + {offset}g * {p.og * p.rhs_o_stride()}"

    def _c_ptr(self):
        p = self.p
        if p.c_direct:
            offset = f"c0 * {p.out_stride(p.m_axes[0])} + " if p.chunk == "m" else ""
            return f"out + {p.out_off} + {offset}g * {p.og}"
        m, _ = self._dims()
        rows = str(p.m) if p.chunk == "k" else m
        return f"t + g * ({rows}) * {p.n}"

    # --- C: a temporary product into the output --------------------------------------------
    def _unpack(self):
        p = self.p
        st_o = p.out_o_stride()
        lines = [f"for (long long g = 0; g < {p.groups}; ++g) {{"]
        ind, dst, src = "    ", f"{p.out_off} + g * {p.og * st_o}", "g"
        for j, ax in enumerate(p.m_axes):
            size = "cn" if self._chunked("m", j) else str(ax.size)
            value = f"(c0 + j{j})" if self._chunked("m", j) else f"j{j}"
            lines.append(ind + f"for (long long j{j} = 0; j{j} < {size}; ++j{j}) {{")
            ind += "    "
            src = f"({src}) * {size} + j{j}"
            dst = f"{dst} + {value} * {p.out_stride(ax)}"
        lines.append(ind + f"const long long s = ({src}) * {p.n}, d = {dst};")
        lines.append(ind + f"for (long long o = 0; o < {p.og}; ++o) out[d + o * {st_o}] = "
                           f"{self._store('t[s + o]')};")
        lines += ["    " * k + "}" for k in range(len(p.m_axes), -1, -1)]
        return lines


ROUTINES = {conv_general_dilated_p: Conv}
