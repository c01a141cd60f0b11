"""A fused kernel's layout, for every backend that prints loops: a `KernelSpec` becomes a
`KernelLayout`, the iteration space every C-like renderer walks.

The layout moves the reduced axes last, drops unit axes, merges neighbouring axes of the same
group (kept or reduced) where every operand allows it, and gives each operand its element
strides over the result (0: broadcast along that axis). Reductions name their accumulator
dtype (their `ReduceOp`'s `accumulate`). The native C renderer prints the layout as nested
loops (`native/kernel.py`); the CUDA planner (`cuda/plan.py`) adds its launch decisions on
top. This module imports no backend.

    layout = layout_kernel(spec)     # outer (kept) dims, inner (reduced) dims, operands
"""

import math
from dataclasses import dataclass

from funcgrad.core import ReduceOp


@dataclass(frozen=True)
class Operand:
    """An array a kernel reads or writes elementwise: element strides over the layout's dims
    (`outer + inner`); `vec`: read as 4-vectors in a vectorized CUDA kernel."""

    name: str
    dtype: str
    strides: tuple
    vec: bool = False


@dataclass(frozen=True)
class Reduction:
    """Output `out` = reduction `op` (a `ReduceOp`'s name) of body value `value` over the
    inner dims, accumulated in dtype `acc` (the op's `accumulate`)."""

    out: str
    value: str
    op: str
    dtype: str
    acc: str


@dataclass(frozen=True)
class KernelLayout:
    """A `KernelSpec`'s iteration space: `outer` (kept) and `inner` (reduced) dims, the
    operands' strides over them, and the reductions."""

    spec: object
    outer: tuple
    inner: tuple
    inputs: tuple
    outputs: tuple
    reductions: tuple

    @property
    def rows(self):
        return math.prod(self.outer)

    @property
    def k(self):
        return math.prod(self.inner)

    @property
    def n(self):
        return self.rows * self.k


def row_major(shape):
    """Element strides of a contiguous array of `shape` (0 along unit axes)."""
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


def extent(dims, strides):
    """Elements spanned by an operand of `strides` over `dims`."""
    return 1 + sum((d - 1) * abs(s) for d, s in zip(dims, strides))


def layout_kernel(spec):
    """The `KernelLayout` of `spec` (a fusion `KernelSpec`); see the module doc."""
    S = tuple(spec.iter_shape)
    red = set(spec.reduce_axes)
    order = [a for a in range(len(S)) if a not in red] + sorted(red)
    elem_outs = [o for o in spec.outputs if o.reduce is None]
    raw = [inp.strides(S) for inp in spec.inputs] + [row_major(S)] * len(elem_outs)
    raw = [[s[a] for a in order] for s in raw]
    dims, groups, strides = _collapse([S[a] for a in order], [a in red for a in order], raw)
    names = [inp.name for inp in spec.inputs] + [o.name for o in elem_outs]
    dtypes = [inp.dtype for inp in spec.inputs] + [o.dtype for o in elem_outs]
    operands = [Operand(nm, dt, tuple(s)) for nm, dt, s in zip(names, dtypes, strides)]
    n_in = len(spec.inputs)
    reductions = tuple(Reduction(o.name, o.value, o.reduce, o.dtype,
                                 ReduceOp.named(o.reduce).accumulate(o.dtype))
                       for o in spec.outputs if o.reduce is not None)
    return KernelLayout(spec, tuple(d for d, g in zip(dims, groups) if not g),
                        tuple(d for d, g in zip(dims, groups) if g), tuple(operands[:n_in]),
                        tuple(operands[n_in:]), reductions)


def dims_and_groups(layout):
    """The layout's dims (`outer + inner`) and, per dim, whether it is reduced."""
    return (list(layout.outer) + list(layout.inner),
            [False] * len(layout.outer) + [True] * len(layout.inner))
