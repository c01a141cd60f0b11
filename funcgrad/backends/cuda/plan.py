"""Every decision about a CUDA kernel, made in Python: a `KernelSpec` becomes a `KernelPlan`.

The plan fixes the iteration space (reduced axes moved last, unit axes dropped, adjacent axes
merged where every operand allows it), each operand's element strides over it (0: broadcast),
the index width (int32 when every offset and loop counter provably fits, else int64), the
vector width (4 for contiguous 4-byte and 1-byte elementwise kernels), the block size and the
reduction strategy:

    thread_per_row   one thread per output row: short rows (K <= 8) and rows whose reduced
                     axis is not the innermost in memory (column sums: coalesced across rows)
    warp_per_row     one warp per row, shuffles only: rows of 9..1024 contiguous elements
    block_per_row    one block per row, warp shuffles then shared memory: long rows
    + split          few rows: each row is cut into `splits` chunks reduced in parallel
                     into partial results (pass 1), then one thread per row combines them

Launch geometry (`grid`) is a pure function of the plan and a `DeviceInfo`. Renderers only
print what the plan says. This module imports no GPU library.
"""

import hashlib
import math
from dataclasses import dataclass

import numpy as np

from funcgrad.compiler import escape
from funcgrad.compiler.fusion import KernelSpec

INT32_MARGIN = 1 << 24  # headroom for grid-stride counters past the last element
MAX_THREADS = 1 << 24  # grid * block never exceeds this (keeps the margin valid)
BLOCK = 256
WARP = 32
VEC_MIN_ELEMENTS = 4096
VEC_DTYPES = {"float32", "int32", "uint32", "bool", "uint8", "int8"}
THREAD_ROW_MAX_K = 8
WARP_ROW_MAX_K = 1024
SPLIT_MIN_CHUNK = {"thread_per_row": 64, "warp_per_row": 1024, "block_per_row": 4096}
MAX_SPLITS = 4096
LANES = {"thread_per_row": 1, "warp_per_row": WARP, "block_per_row": BLOCK}


@dataclass(frozen=True)
class DeviceInfo:
    """What launch decisions need to know about a GPU."""

    arch: int = 90  # compute capability as major * 10 + minor
    sm_count: int = 132
    max_threads_per_sm: int = 2048

    @property
    def resident_threads(self):
        return self.sm_count * self.max_threads_per_sm


H200 = DeviceInfo(90, 132, 2048)


@dataclass(frozen=True)
class Operand:
    """An array a kernel reads or writes elementwise: element strides over the plan's dims
    (`outer + inner`); `vec`: read as 4-vectors in a vectorized kernel."""

    name: str
    dtype: str
    strides: tuple
    vec: bool = False


@dataclass(frozen=True)
class Reduction:
    """Output `out` = reduction `op` of body value `value` over the inner dims, accumulated
    in dtype `acc`."""

    out: str
    value: str
    op: str
    dtype: str
    acc: str


@dataclass(frozen=True)
class KernelPlan:
    """A `KernelSpec` with all launch and indexing decisions made (see the module doc)."""

    name: str
    spec: KernelSpec
    strategy: str
    outer: tuple
    inner: tuple
    inputs: tuple
    outputs: tuple
    reductions: tuple
    index: str
    vec: int
    block: int
    splits: int = 1

    @property
    def rows(self):
        return math.prod(self.outer)

    @property
    def k(self):
        return math.prod(self.inner)

    @property
    def n(self):
        return self.rows * self.k

    @property
    def chunk(self):
        """Elements of a row that one split reduces."""
        return -(-self.k // self.splits)

    @property
    def kernel_names(self):
        """The entry points, in launch order (a split reduction has a second pass)."""
        return (self.name,) + ((self.name + "_final",) if self.splits > 1 else ())

    def grid(self, device, final=False):
        """Blocks to launch on `device` for the main kernel (or the split's final pass)."""
        cap = max(1, min(device.sm_count * (device.max_threads_per_sm // self.block) * 4,
                         MAX_THREADS // self.block))
        if final:
            return min(max(1, -(-self.rows // self.block)), cap)
        vrows = self.rows * self.splits
        if self.strategy == "elementwise":
            work = -(-self.n // self.vec)
        elif self.strategy == "thread_per_row":
            work = vrows
        elif self.strategy == "warp_per_row":
            work = vrows * WARP
        else:
            work = vrows * self.block
        return min(max(1, -(-work // self.block)), cap)


def _row_major(shape):
    out, stride = [0] * len(shape), 1
    for i in reversed(range(len(shape))):
        out[i] = stride if shape[i] != 1 else 0
        stride *= shape[i]
    return tuple(out)


def _collapse(dims, groups, strides):
    """Drop unit dims and merge neighbours of the same group (outer/inner) that are
    contiguous for every operand. Returns (dims, groups, strides per operand)."""
    keep = [i for i, d in enumerate(dims) if d != 1]
    dims = [dims[i] for i in keep]
    groups = [groups[i] for i in keep]
    strides = [[s[i] for i in keep] for s in strides]
    d = len(dims) - 2
    while d >= 0:
        if groups[d] == groups[d + 1] and all(s[d] == s[d + 1] * dims[d + 1] for s in strides):
            dims[d] *= dims[d + 1]
            del dims[d + 1], groups[d + 1]
            for s in strides:
                s[d] = s[d + 1]
                del s[d + 1]
        d -= 1
    return dims, groups, strides


def _extent(dims, strides):
    return 1 + sum((d - 1) * abs(s) for d, s in zip(dims, strides))


def _acc_dtype(dtype):
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return "float32" if dt.itemsize < 4 else dt.name
    if dt.kind == "b":
        return "int32"
    if dt.itemsize < 4:
        return "int32" if dt.kind == "i" else "uint32"
    return dt.name


def plan_kernel(spec, device=H200, name=None):
    """Make every decision for `spec` (a `KernelSpec`) on `device`; returns a `KernelPlan`."""
    S = tuple(spec.iter_shape)
    red = set(spec.reduce_axes)
    order = [a for a in range(len(S)) if a not in red] + sorted(red)
    dims = [S[a] for a in order]
    groups = [a in red for a in order]
    elem_outs = [o for o in spec.outputs if o.reduce is None]
    out_strides = _row_major(S)
    raw = [inp.strides(S) for inp in spec.inputs] + [out_strides] * len(elem_outs)
    raw = [[s[a] for a in order] for s in raw]
    dims, groups, strides = _collapse(dims, groups, raw)
    outer = tuple(d for d, g in zip(dims, groups) if not g)
    inner = tuple(d for d, g in zip(dims, groups) if g)
    names = [inp.name for inp in spec.inputs] + [o.name for o in elem_outs]
    dtypes = [inp.dtype for inp in spec.inputs] + [o.dtype for o in elem_outs]
    n_in = len(spec.inputs)
    reductions = tuple(Reduction(o.name, o.value, o.reduce, o.dtype, _acc_dtype(o.dtype))
                       for o in spec.outputs if o.reduce is not None)
    rows, k = math.prod(outer), math.prod(inner)
    if reductions:
        strategy, splits = _strategy(spec, dims, groups, strides[:n_in], rows, k, device)
        vec = 1
    else:
        strategy, splits = "elementwise", 1
        vec = 4 if _vectorizable(dims, strides, dtypes) else 1
    extents = [_extent(dims, s) for s in strides] + [rows * splits, max(rows * k, 1)]
    index = "int64" if max(extents) + INT32_MARGIN >= 2 ** 31 else "int32"
    ops = [Operand(nm, dt, tuple(s), vec == 4 and bool(s) and s[-1] == 1)
           for nm, dt, s in zip(names, dtypes, strides)]
    decisions = (strategy, splits, index, vec, BLOCK)
    return KernelPlan(name or _c_name(spec, decisions), spec, strategy, outer, inner,
                      tuple(ops[:n_in]), tuple(ops[n_in:]), reductions, index, vec, BLOCK,
                      splits)


def _vectorizable(dims, strides, dtypes):
    if not dims or dims[-1] % 4 or math.prod(dims) < VEC_MIN_ELEMENTS:
        return False
    if not all(dt in VEC_DTYPES for dt in dtypes):
        return False
    for s in strides:
        if s[-1] not in (0, 1) or (s[-1] == 1 and any(x % 4 for x in s[:-1])):
            return False
    return True


def _strategy(spec, dims, groups, in_strides, rows, k, device):
    """(base strategy, splits) for a reduction of `rows` rows of `k` elements."""
    contiguous = False
    if in_strides:  # the largest input decides whether rows are contiguous in memory
        main = max(in_strides, key=lambda s: _extent(dims, s))
        inner_strides = [s for s, g in zip(main, groups) if g]
        contiguous = bool(inner_strides) and inner_strides[-1] == 1
    if not contiguous or k <= THREAD_ROW_MAX_K:
        base = "thread_per_row"
    elif k <= WARP_ROW_MAX_K:
        base = "warp_per_row"
    else:
        base = "block_per_row"
    parallel = rows * LANES[base]
    splits = 1
    if parallel * 2 < device.resident_threads:
        splits = min(-(-device.resident_threads // parallel), k // SPLIT_MIN_CHUNK[base],
                     MAX_SPLITS)
    return base, max(1, splits)


def _c_name(spec, decisions):
    """`fg_<spec name>_<hash of the spec and the decisions>`: a valid, unique C name."""
    stem = escape.identifier(spec.name)
    digest = hashlib.sha256(f"{spec.key()}{decisions}".encode()).hexdigest()
    return f"fg_{stem}_{digest[:8]}"
