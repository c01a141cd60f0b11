"""How `conv_general_dilated` computes: input windows packed (im2col) into one GEMM per group.

A convolution with any dimension numbers, strides, padding, dilations and groups is, per
group g (feature or batch groups), the product

    C_g[m, o'] = sum_k A_g[m, k] * B_g[k, o']

where m runs over the output's batch and spatial positions (`m_axes`, in the output's memory
order, so that C is the output itself when its feature axis is innermost), k over the window
positions and the group's input features (`k_axes`, in the kernel's memory order, so that B
is the kernel itself when its output-feature axis is innermost or outermost), A holds the
(dilated, padded) input's window elements and B the kernel. `plan(...)` decides once per
shapes, dtypes and parameters (cached) how A is stored (rows m or rows k: whichever puts the
longest contiguous run of the input innermost, so packing copies runs), whether B and C are
views of the operands or packed/unpacked copies, and how large problems are cut into chunks
of `PACK_BYTES` (along the first m axis: independent row blocks; along the first k axis:
partial products added in chunk order). An input dilated by L (the input gradient of a
strided convolution, `conv_transpose`) would make 1 - 1/L of A zeros: its outputs split
into L phases per dilated axis (y = r + L u), each a dense convolution of the undilated
input with every L-th tap of the kernel (those that meet input elements), written into
every L-th output position; a `Conv` is the list of its phases' plans.

A plan is executed twice over, with the same arithmetic: `run_numpy` (the primitive's
implementation, so eager use and the numpy backend) packs with numpy and multiplies with
`np.matmul`, which calls BLAS `gemm` with arguments read from the operands' strides; the native
backend's C routine (`backends/native/conv.py`) packs in C and calls the same `gemm` of the
same library with the same arguments (`gemm_args`), so both give the same bits. float16,
bfloat16 and the float8s compute in float32 (int4 & co. in int32) and round once at the end.
Imports numpy and funcgrad.dtypes only.
"""

import functools
import itertools
import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numpy.lib.stride_tricks import as_strided

from funcgrad import dtypes

# A packed A chunk is at most PACK_BYTES: larger problems run in chunks (each a gemm call,
# which multi-threaded OpenBLAS pays a synchronization for), a quarter of it when the GEMM
# has at most 2 columns (it reads A once: an L2-sized chunk doubled an input gradient's speed)
PACK_BYTES = 1 << 21
B_CHUNK_MIN_K = 64  # k rows per chunk at least, when chunking k to keep B a view
B_CHUNKS_MAX = 64  # and at most this many chunks (gemm calls)
NO_TRANS, TRANS = 111, 112  # CblasNoTrans, CblasTrans


class Axis(NamedTuple):
    """An axis of A: "n" (output batch), "y" (output position along spatial `dim`), "c"
    (input feature of the group), "k" (window position along spatial `dim`)."""

    kind: str
    dim: int
    size: int


def _dilate(n, d):
    return 0 if n == 0 else 1 + d * (n - 1)


def _cstrides(shape):
    return tuple(math.prod(shape[k + 1:]) for k in range(len(shape)))


@dataclass(frozen=True)
class ConvPlan:
    """What `plan` decided (see the module docstring); strides are in elements of
    C-contiguous operands."""

    lhs_shape: tuple
    rhs_shape: tuple
    out_shape: tuple
    dn: tuple  # (lhs_spec, rhs_spec, out_spec)
    window_strides: tuple
    lo: tuple  # low padding per spatial dim (negative: cropped)
    lhs_dilation: tuple
    rhs_dilation: tuple
    groups: int
    batch_groups: bool  # groups split the batch (else the features)
    og: int  # output features per group
    m_axes: tuple
    k_axes: tuple
    a_trans: bool  # A stored k-major: (groups, k, m)
    b_mode: str  # "n" rhs is B, "t" rhs is B transposed, "pack" B copied
    c_direct: bool  # the GEMM writes the output (else a temporary, then unpacked)
    chunk: str  # "", "m" or "k": which group's first axis is cut
    step: int  # its indices per chunk
    compute: np.dtype
    out_dtype: np.dtype
    rhs_st: tuple  # element strides of the kernel's axes (a phase reads a strided view)
    rhs_off: int  # and the element offset of its first element
    out_st: tuple  # the same for the output
    out_off: int

    @property
    def m(self):
        return math.prod(a.size for a in self.m_axes)

    @property
    def k(self):
        return math.prod(a.size for a in self.k_axes)

    @property
    def n(self):
        """The GEMM's columns: the group's output features, at least 2 (a zero column is
        added to B when there is one: numpy's matmul calls gemv for a single column)."""
        return max(self.og, 2)

    def storage(self):
        """A's axes in memory order (after the group axis)."""
        return self.k_axes + self.m_axes if self.a_trans else self.m_axes + self.k_axes

    def chunks(self):
        """(first, count) of each chunk along the chunked axis (one chunk: (0, 0))."""
        if not self.chunk:
            return [(0, 0)]
        size = (self.m_axes if self.chunk == "m" else self.k_axes)[0].size
        return [(c, min(self.step, size - c)) for c in range(0, size, self.step)]

    def chunk_dims(self, count):
        """(m, k) of the GEMM of a chunk of `count` indices."""
        m, k = self.m, self.k
        if self.chunk == "m":
            m = m // self.m_axes[0].size * count
        elif self.chunk == "k":
            k = k // self.k_axes[0].size * count
        return m, k

    @property
    def blas(self):
        """Whether every GEMM is a BLAS gemm numpy calls (float32/float64, each dimension at
        least 2: numpy's matmul calls gemv, dot or its own loop otherwise)."""
        return self.compute.name in ("float32", "float64") and all(
            min(self.chunk_dims(c)) >= 2 for _, c in self.chunks())

    # --- strides (elements, C-contiguous operands) ------------------------------------
    def lhs_axis(self, kind, dim=-1):
        spec = self.dn[0]
        return spec[0] if kind == "n" else spec[1] if kind == "c" else spec[2 + dim]

    def rhs_stride(self, ax):
        spec = self.dn[1]
        return self.rhs_st[spec[1] if ax.kind == "c" else spec[2 + ax.dim]]

    def rhs_o_stride(self):
        return self.rhs_st[self.dn[1][0]]

    def out_stride(self, ax):
        spec = self.dn[2]
        return self.out_st[spec[0] if ax.kind == "n" else spec[2 + ax.dim]]

    def out_o_stride(self):
        return self.out_st[self.dn[2][1]]

    def lhs_group_offset(self, st):
        """The element offset of group 1 in an lhs with element strides `st`."""
        if self.groups == 1:
            return 0
        if self.batch_groups:
            return self.lhs_shape[self.dn[0][0]] // self.groups * st[self.dn[0][0]]
        return self.lhs_shape[self.dn[0][1]] // self.groups * st[self.dn[0][1]]

    def b_rows(self, count):
        """B's row stride (elements) in a chunk of `count` indices, when its k axes there
        flatten to one stride (else None)."""
        axes = list(self.k_axes)
        if self.chunk == "k":
            axes[0] = axes[0]._replace(size=count)
        return _flat_stride(axes, self.rhs_stride)

    def gemm_args(self, count):
        """(transa, transb, m, n, k, lda, ldb, ldc) of the row-major BLAS gemm of a chunk of
        `count` indices: what numpy's matmul reads from the strides of `run_numpy`'s
        operands (the C routine calls gemm with these)."""
        m, k = self.chunk_dims(count)
        lda = m if self.a_trans else k
        if self.b_mode == "n":
            tb, ldb = NO_TRANS, self.b_rows(count)
        elif self.b_mode == "t":
            tb, ldb = TRANS, self.rhs_o_stride()
        else:
            tb, ldb = NO_TRANS, self.n
        ldc = self.out_rows() if self.c_direct else self.n
        return (TRANS if self.a_trans else NO_TRANS), tb, m, self.n, k, lda, ldb, ldc

    def out_rows(self):
        """The output's row stride for a direct C (its m axes flatten to one stride)."""
        return _flat_stride(self.m_axes, self.out_stride)


def _flat_stride(axes, stride):
    """The one stride of `axes` flattened (outer to inner), or None when they do not
    flatten (axes of one element do not count)."""
    axes = [a for a in axes if a.size != 1]
    for outer, inner in zip(axes, axes[1:]):
        if stride(outer) != stride(inner) * inner.size:
            return None
    return stride(axes[-1]) if axes else 1


def _lhs_run(axes, lhs_stride):
    """The number of consecutive input elements the innermost of `axes` copy."""
    run = 1
    for ax in reversed(axes):
        if ax.size == 1:
            continue
        st = lhs_stride(ax)
        if st != run:
            break
        run *= ax.size
    return run


def _chunk_step(size, inner, most):
    """Indices of an axis of `size` per chunk (each `inner` rows or columns): at most
    `most`, and no chunk of a single row (BLAS dimensions stay >= 2)."""
    q = max(1, min(size, most))
    while q > 1 and 0 < (size % q) * inner < 2:
        q -= 1
    return q


class Conv(NamedTuple):
    """A convolution's plans: one `ConvPlan` per phase (see the module docstring); `zero`:
    some outputs meet no kernel tap (they are 0)."""

    out_shape: tuple
    out_dtype: np.dtype
    phases: tuple
    zero: bool

    @property
    def blas(self):
        return bool(self.phases) and all(p.blas for p in self.phases)

    def gemms(self):
        """(groups, m, k, n) of each phase's product (the equivalent GEMMs)."""
        return [(p.groups, p.m, p.k, p.og) for p in self.phases]


@functools.lru_cache(maxsize=512)
def plan(lhs_shape, rhs_shape, out_shape, dn, window_strides, padding, lhs_dilation,
         rhs_dilation, feature_group_count, batch_group_count, rhs_dtype, out_dtype):
    """The `Conv` of a convolution (operand shapes and dtypes, the primitive's params)."""
    phases, zero = [], False
    for ph in _phases(lhs_shape, rhs_shape, out_shape, dn, window_strides, padding,
                      lhs_dilation, rhs_dilation):
        if 0 in ph["out_shape"]:
            continue
        if 0 in ph["rhs_shape"]:
            zero = True
            continue
        phases.append(_plan_one(lhs_shape, dn, rhs_dilation, feature_group_count,
                                batch_group_count, np.dtype(rhs_dtype), np.dtype(out_dtype),
                                **ph))
    return Conv(tuple(out_shape), np.dtype(out_dtype), tuple(phases), zero or not phases)


def _phases(lhs_shape, rhs_shape, out_shape, dn, window_strides, padding, lhs_dilation,
            rhs_dilation):
    """Per phase: the kernel's and the output's views (shape, element strides, offset),
    the low padding and the input dilation of the dense convolution it is."""
    _, rhs_spec, out_spec = dn
    per_dim = []
    for d in range(len(lhs_shape) - 2):
        big, s, rd, lo = lhs_dilation[d], window_strides[d], rhs_dilation[d], padding[d][0]
        taps, outs = rhs_shape[rhs_spec[2 + d]], out_shape[out_spec[2 + d]]
        if big == 1 or s != 1 or math.gcd(rd, big) != 1:
            per_dim.append([(0, 1, taps, 0, 1, outs, lo, big)])
            continue
        inv = pow(rd, -1, big)
        phases = []
        for r in range(big):  # outputs r + L u meet the taps k0 + L t
            k0 = (lo - r) * inv % big
            phases.append((k0, big, max(0, -(-(taps - k0) // big)), r, big,
                           max(0, -(-(outs - r) // big)), -((r + k0 * rd - lo) // big), 1))
        per_dim.append(phases)
    rst, ost = _cstrides(rhs_shape), _cstrides(out_shape)
    for combo in itertools.product(*per_dim):
        rs, rt, os_, ot = list(rhs_shape), list(rst), list(out_shape), list(ost)
        r_off = o_off = 0
        for d, (k0, kstep, taps, r, ystep, outs, _, _) in enumerate(combo):
            a, b = rhs_spec[2 + d], out_spec[2 + d]
            r_off, o_off = r_off + k0 * rst[a], o_off + r * ost[b]
            rs[a], rt[a], os_[b], ot[b] = taps, rst[a] * kstep, outs, ost[b] * ystep
        yield dict(rhs_shape=tuple(rs), rhs_st=tuple(rt), rhs_off=r_off, out_shape=tuple(os_),
                   out_st=tuple(ot), out_off=o_off, window_strides=tuple(window_strides),
                   lo=tuple(c[6] for c in combo), lhs_dilation=tuple(c[7] for c in combo))


def _plan_one(lhs_shape, dn, rhs_dilation, feature_group_count, batch_group_count,
              rhs_dtype, out_dtype, *, rhs_shape, rhs_st, rhs_off, out_shape, out_st, out_off,
              window_strides, lo, lhs_dilation):
    """The `ConvPlan` of one dense (phase of a) convolution."""
    lhs_spec, rhs_spec, out_spec = dn
    nsp = len(lhs_shape) - 2
    groups = feature_group_count * batch_group_count
    compute = np.dtype("float32") if out_dtype.name == "float16" else dtypes.compute_dtype(
        out_dtype)
    m_axes = [(out_spec[0], Axis("n", -1, out_shape[out_spec[0]]))]
    m_axes += [(out_spec[2 + d], Axis("y", d, out_shape[out_spec[2 + d]])) for d in range(nsp)]
    k_axes = [(rhs_spec[1], Axis("c", -1, rhs_shape[rhs_spec[1]]))]
    k_axes += [(rhs_spec[2 + d], Axis("k", d, rhs_shape[rhs_spec[2 + d]])) for d in range(nsp)]
    m_axes = tuple(a for _, a in sorted(m_axes))
    k_axes = tuple(a for _, a in sorted(k_axes))
    og = rhs_shape[rhs_spec[0]] // groups
    lhs_st = _cstrides(lhs_shape)

    def lhs_stride(ax):
        if ax.kind in "nc":
            return lhs_st[lhs_spec[0] if ax.kind == "n" else lhs_spec[1]]
        if lhs_dilation[ax.dim] != 1:
            return None
        coef = window_strides[ax.dim] if ax.kind == "y" else rhs_dilation[ax.dim]
        return coef * lhs_st[lhs_spec[2 + ax.dim]]
    fields = dict(lhs_shape=lhs_shape, rhs_shape=rhs_shape, out_shape=out_shape, dn=dn,
                  window_strides=window_strides, lo=lo, lhs_dilation=lhs_dilation,
                  rhs_dilation=rhs_dilation, groups=groups, batch_groups=batch_group_count > 1,
                  og=og, m_axes=m_axes, k_axes=k_axes, compute=compute, out_dtype=out_dtype,
                  rhs_st=rhs_st, rhs_off=rhs_off, out_st=out_st, out_off=out_off,
                  a_trans=_lhs_run(m_axes, lhs_stride) > _lhs_run(k_axes, lhs_stride),
                  b_mode="pack", c_direct=False, chunk="", step=0)
    trial = ConvPlan(**fields)
    fields["c_direct"] = (out_dtype == compute and og >= 2 and trial.out_o_stride() == 1
                          and trial.out_rows() is not None)
    fields["chunk"], fields["step"] = _chunking(trial, compute.itemsize)
    trial = ConvPlan(**fields)
    if rhs_dtype == compute and og >= 2:
        rows = trial.b_rows(trial.step if trial.chunk == "k" else k_axes[0].size)
        if rows is not None and trial.rhs_o_stride() == 1:
            fields["b_mode"] = "n"
        elif rows == 1:
            fields["b_mode"] = "t"
    return ConvPlan(**fields)


def _chunking(p, itemsize):
    """(chunk, step): cut k one index at a time when that makes B a view of a large rhs
    (a kernel gradient, whose rhs is the cotangent) in a few chunks; else cut the longer of
    m and k when the packed A exceeds its budget."""
    m, k, g = p.m, p.k, p.groups
    first_k = p.k_axes[0].size
    one = ConvPlan(**{**p.__dict__, "chunk": "k", "step": 1})
    b_bytes = g * k * p.og * itemsize
    budget = PACK_BYTES if p.n > 2 else PACK_BYTES // 4
    if (1 < first_k <= B_CHUNKS_MAX and p.b_rows(first_k) is None
            and b_bytes > PACK_BYTES // 4 and k // first_k >= B_CHUNK_MIN_K
            and one.b_rows(1) is not None):
        return "k", 1
    if g * m * k * itemsize <= budget:
        return "", 0
    axis = "m" if m >= k else "k"
    size = (p.m_axes if axis == "m" else p.k_axes)[0].size
    inner = (m if axis == "m" else k) // size
    per = max(1, budget // (g * (k if axis == "m" else m) * itemsize))
    step = _chunk_step(size, inner, per // max(inner, 1))
    return ("", 0) if step >= size else (axis, step)


def plan_of(lhs_shape, rhs_shape, rhs_dtype, out_shape, out_dtype, *, window_strides,
            padding, lhs_dilation, rhs_dilation, dimension_numbers, feature_group_count,
            batch_group_count, **_):
    """`plan` from the primitive's params (precision and preferred_element_type are read
    from the dtypes)."""
    return plan(tuple(lhs_shape), tuple(rhs_shape), tuple(out_shape),
                tuple(tuple(s) for s in dimension_numbers), window_strides, padding,
                lhs_dilation, rhs_dilation, feature_group_count, batch_group_count,
                np.dtype(rhs_dtype), np.dtype(out_dtype))


# --- numpy execution ------------------------------------------------------------------------
def _dilate_pad(x, padding, dilation):
    """`x` with zeros between elements (dilation) and around it (padding; negative crops)."""
    if all(d == 1 for d in dilation) and all(lo == 0 and hi == 0 for lo, hi in padding):
        return x
    dshape = [_dilate(n, d) for n, d in zip(x.shape, dilation)]
    lo_p = [max(lo, 0) for lo, _ in padding]
    hi_p = [max(hi, 0) for _, hi in padding]
    out = np.zeros([lo + n + hi for lo, n, hi in zip(lo_p, dshape, hi_p)], x.dtype)
    out[tuple(slice(lo, lo + n, d) for lo, n, d in zip(lo_p, dshape, dilation))] = x
    return out[tuple(slice(max(-lo, 0), n - max(-hi, 0))
                     for (lo, hi), n in zip(padding, out.shape))]


def _a_view(p, xpd):
    """A as a strided view of the dilated, padded input: (groups,) + storage sizes."""
    spec, st = p.dn[0], xpd.strides

    def stride(ax):
        if ax.kind in "nc":
            return st[p.lhs_axis(ax.kind)]
        coef = p.window_strides[ax.dim] if ax.kind == "y" else p.rhs_dilation[ax.dim]
        return coef * st[spec[2 + ax.dim]]
    axes = p.storage()
    gst = p.lhs_group_offset(st)
    return as_strided(xpd, (p.groups,) + tuple(a.size for a in axes),
                      (gst,) + tuple(stride(a) for a in axes), writeable=False)


def _chunk_axis(p):
    """The position of the chunked axis in A's view (after the group axis)."""
    first_m = len(p.k_axes) if p.a_trans else 0
    first_k = 0 if p.a_trans else len(p.m_axes)
    return 1 + (first_m if p.chunk == "m" else first_k)


def _cut(view, axis, first, count):
    return view if not count else view[(slice(None),) * axis + (slice(first, first + count),)]


def _b_operand(p, rhs, first, count, itemsize):
    """B of a chunk, (groups, k, og): a view of the (C-contiguous) rhs or a packed copy."""
    _, k = p.chunk_dims(count)
    st_o = p.rhs_o_stride()
    offset = p.rhs_off + (first * p.rhs_stride(p.k_axes[0]) if p.chunk == "k" else 0)
    if p.b_mode != "pack":
        rows = p.b_rows(count) if p.b_mode == "n" else 1
        flat = rhs.reshape(-1)[offset:]
        return as_strided(flat, (p.groups, k, p.og), (p.og * st_o * itemsize,
                                                      rows * itemsize, st_o * itemsize),
                          writeable=False)
    axes = p.k_axes if p.chunk != "k" else ((p.k_axes[0]._replace(size=count),)
                                            + p.k_axes[1:])
    flat = rhs.reshape(-1)[offset:]
    view = as_strided(flat, (p.groups,) + tuple(a.size for a in axes) + (p.og,),
                      (p.og * st_o * rhs.itemsize,)
                      + tuple(p.rhs_stride(a) * rhs.itemsize for a in axes)
                      + (st_o * rhs.itemsize,), writeable=False)
    b = np.zeros((p.groups,) + tuple(a.size for a in axes) + (p.n,), p.compute)
    np.copyto(b[..., :p.og], view, casting="unsafe")
    return b.reshape(p.groups, k, p.n)


def _c_view(p, out, first, count, m):
    """The output as C of a chunk, (groups, m, og) (a direct C only)."""
    isz = out.itemsize
    offset = p.out_off + (first * p.out_stride(p.m_axes[0]) if p.chunk == "m" else 0)
    return as_strided(out.reshape(-1)[offset:], (p.groups, m, p.og),
                      (p.og * isz, p.out_rows() * isz, isz))


def _unpack(p, out, t, first, count):
    """Write the temporary C `t` (groups, m, og) of a chunk into the output."""
    axes = p.m_axes if p.chunk != "m" else ((p.m_axes[0]._replace(size=count),)
                                            + p.m_axes[1:])
    isz = out.itemsize
    offset = p.out_off + (first * p.out_stride(p.m_axes[0]) if p.chunk == "m" else 0)
    st_o = p.out_o_stride()
    view = as_strided(out.reshape(-1)[offset:],
                      (p.groups,) + tuple(a.size for a in axes) + (p.og,),
                      (p.og * st_o * isz,) + tuple(p.out_stride(a) * isz for a in axes)
                      + (st_o * isz,))
    np.copyto(view, t[..., :p.og].reshape(view.shape), casting="unsafe")


def _padding(p, lhs):
    """(low, high) padding and dilation per axis of `lhs`: just what the windows read."""
    pads, dil = [(0, 0)] * lhs.ndim, [1] * lhs.ndim
    for d, ax in enumerate(p.dn[0][2:]):
        n = _dilate(lhs.shape[ax], p.lhs_dilation[d])
        need = (p.out_shape[p.dn[2][2 + d]] - 1) * p.window_strides[d] + _dilate(
            p.rhs_shape[p.dn[1][2 + d]], p.rhs_dilation[d])
        pads[ax], dil[ax] = (p.lo[d], need - p.lo[d] - n), p.lhs_dilation[d]
    return pads, dil


def run_numpy(conv, lhs, rhs):
    """The convolution of numpy arrays `lhs`, `rhs` by the phases of `conv` (see the module
    docstring)."""
    out = np.zeros(conv.out_shape, conv.out_dtype)
    rhs = np.ascontiguousarray(rhs)
    for p in conv.phases:
        _run_phase(p, lhs, rhs, out)
    return out


def _run_phase(p, lhs, rhs, out):
    """One phase into `out`. Each buffer is allocated once per call (a fresh multi-MiB array
    costs its page faults)."""
    if p.k == 0:
        return
    a_full = _a_view(p, _dilate_pad(lhs, *_padding(p, lhs)))
    axis = _chunk_axis(p)
    m0, k0 = p.chunk_dims(p.chunks()[0][1])
    a_buf = np.empty(p.groups * m0 * k0, p.compute)
    c = c_buf = part = None
    for first, count in p.chunks():
        m, k = p.chunk_dims(count)
        src = _cut(a_full, axis, first, count)
        a = a_buf[:src.size].reshape(src.shape)
        np.copyto(a, src, casting="unsafe")
        a = a.reshape(p.groups, k, m).transpose(0, 2, 1) if p.a_trans else a.reshape(
            p.groups, m, k)
        b = _b_operand(p, rhs, first, count, p.compute.itemsize)
        if p.chunk == "k" and first > 0:  # a partial product, added in chunk order
            part = np.empty((p.groups, m0, p.n), p.compute) if part is None else part
            np.matmul(a, b, out=part[:, :m])
            np.add(c, part[:, :m], out=c)
            continue
        if p.c_direct:
            c = _c_view(p, out, first, count, m)
        else:
            if c_buf is None:
                c_buf = np.empty((p.groups, m0, p.n), p.compute)
            c = c_buf[:, :m]
        np.matmul(a, b, out=c)
        if not p.c_direct and p.chunk != "k":
            _unpack(p, out, c, first, count)
    if not p.c_direct and p.chunk == "k":
        _unpack(p, out, c, 0, 0)
