"""Every decision about a CUDA kernel, made in Python: a `KernelSpec` becomes a `KernelPlan`.

The plan is the kernel's layout (`backends/layout.py`, shared with the native renderer: the
iteration space and each operand's element strides over it) plus the CUDA decisions: the
index width (int32 when every offset and loop counter provably fits, else int64), the
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

import dataclasses
import hashlib
import math
from dataclasses import dataclass

from funcgrad.backends.layout import KernelLayout, dims_and_groups, extent, layout_kernel
from funcgrad.compiler import escape

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
class KernelPlan(KernelLayout):
    """A `KernelSpec`'s layout (`layout.KernelLayout`: dims, operands, reductions) with all
    launch and indexing decisions made (see the module doc)."""

    name: str
    strategy: str
    index: str
    vec: int
    block: int
    splits: int = 1

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


def plan_kernel(spec, device=H200, name=None):
    """Make every decision for `spec` (a `KernelSpec`) on `device`; returns a `KernelPlan`."""
    lay = layout_kernel(spec)
    dims, groups = dims_and_groups(lay)
    operands = lay.inputs + lay.outputs
    if lay.reductions:
        strategy, splits = _strategy(dims, groups, [o.strides for o in lay.inputs], lay.rows,
                                     lay.k, device)
        vec = 1
    else:
        strategy, splits = "elementwise", 1
        vec = 4 if _vectorizable(dims, operands) else 1
    extents = [extent(dims, o.strides) for o in operands]
    extents += [lay.rows * splits, max(lay.n, 1)]
    index = "int64" if max(extents) + INT32_MARGIN >= 2 ** 31 else "int32"
    if vec == 4:
        lay = dataclasses.replace(
            lay, inputs=tuple(_vec(o) for o in lay.inputs),
            outputs=tuple(_vec(o) for o in lay.outputs))
    decisions = (strategy, splits, index, vec, BLOCK)
    return KernelPlan(**{f.name: getattr(lay, f.name) for f in dataclasses.fields(lay)},
                      name=name or _c_name(spec, decisions), strategy=strategy, index=index,
                      vec=vec, block=BLOCK, splits=splits)


def _vec(operand):
    """`operand` read as 4-vectors (when contiguous along the innermost dim)."""
    return dataclasses.replace(operand, vec=bool(operand.strides) and operand.strides[-1] == 1)


def _vectorizable(dims, operands):
    if not dims or dims[-1] % 4 or math.prod(dims) < VEC_MIN_ELEMENTS:
        return False
    if not all(o.dtype in VEC_DTYPES for o in operands):
        return False
    for o in operands:
        s = o.strides
        if s[-1] not in (0, 1) or (s[-1] == 1 and any(x % 4 for x in s[:-1])):
            return False
    return True


def _strategy(dims, groups, in_strides, rows, k, device):
    """(base strategy, splits) for a reduction of `rows` rows of `k` elements."""
    contiguous = False
    if in_strides:  # the largest input decides whether rows are contiguous in memory
        main = max(in_strides, key=lambda s: extent(dims, s))
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
