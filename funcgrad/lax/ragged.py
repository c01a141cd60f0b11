"""Grouped matrix products: `ragged_dot` and `ragged_dot_general` (with
`RaggedDotDimensionNumbers`), as JAX's (mixture-of-experts layers).

A ragged axis of the left operand is cut into consecutive groups of `group_sizes`; JAX's
reference semantics are computed directly: the ragged operand is expanded along a new group
axis with each group's rows masked in, then one `dot_general` contracts (or keeps) the group
axis. Compositions only: derivatives (in both operands) and batching come from
`dot_general`. Imports lax siblings and core.
"""

from funcgrad import errors
from funcgrad.core import ArrayBase, get_aval, to_array
from funcgrad.lax.linalg import dot_general
from funcgrad.lax.logic import bitwise_and, le, lt, select_n
from funcgrad.lax.reductions import cumsum
from funcgrad.lax.shape import broadcast_in_dim, broadcasted_iota, full
from funcgrad.lax.slicing import concatenate, slice_in_dim

__all__ = ["RaggedDotDimensionNumbers", "ragged_dot", "ragged_dot_general"]


class RaggedDotDimensionNumbers:
    """Which axes a ragged product contracts and batches (`dot_dimension_numbers`, as
    `dot_general`'s), which left axis is ragged, and which right axis holds the groups.

    Example:
        >>> RaggedDotDimensionNumbers((([1], [1]), ([], [])), [0], [0]).lhs_ragged_dimensions
        (0,)
    """

    def __init__(self, dot_dimension_numbers, lhs_ragged_dimensions, rhs_group_dimensions):
        self.dot_dimension_numbers = tuple(tuple(tuple(d) for d in t)
                                           for t in dot_dimension_numbers)
        self.lhs_ragged_dimensions = tuple(lhs_ragged_dimensions)
        self.rhs_group_dimensions = tuple(rhs_group_dimensions)

    def __repr__(self):
        return (f"RaggedDotDimensionNumbers({self.dot_dimension_numbers}, "
                f"{self.lhs_ragged_dimensions}, {self.rhs_group_dimensions})")


_BASIC = RaggedDotDimensionNumbers((([1], [1]), ([], [])), [0], [0])


def _operand(x):
    return x if isinstance(x, ArrayBase) else to_array(x)


def ragged_dot(lhs, rhs, group_sizes, precision=None, preferred_element_type=None,
               group_offset=None, out_sharding=None):
    """Rows of `lhs` [m, k] in consecutive groups of `group_sizes` [g] (summing to m), each
    group multiplied by its own matrix of `rhs` [g, k, n]: the result is [m, n].

    Example:
        >>> lhs = fnp.ones((3, 2))
        >>> rhs = fnp.stack([fnp.ones((2, 1)), 2 * fnp.ones((2, 1))])
        >>> ragged_dot(lhs, rhs, fnp.array([1, 2]))
        Array([[2.],
               [4.],
               [4.]], dtype=float32)
    """
    return ragged_dot_general(lhs, rhs, group_sizes, _BASIC, precision, preferred_element_type,
                              group_offset, out_sharding)


def _expand(x, dim, group_sizes):
    """`x` with a new leading group axis: entry g keeps the positions of group g along
    `dim` and is zero elsewhere."""
    aval = get_aval(x)
    g = get_aval(group_sizes).shape[0]
    shape = (g,) + aval.shape
    big = broadcast_in_dim(x, shape, tuple(range(1, len(shape))))
    gs = group_sizes
    ends = cumsum(gs, 0)
    starts = concatenate([full((1,), 0, get_aval(gs).dtype), slice_in_dim(ends, 0, g - 1)], 0)
    pos = broadcasted_iota(get_aval(gs).dtype, shape, dim + 1)
    lo = broadcast_in_dim(starts, shape, (0,))
    hi = broadcast_in_dim(ends, shape, (0,))
    mask = bitwise_and(le(lo, pos), lt(pos, hi))
    return select_n(mask, full(shape, 0, aval.dtype), big)


def ragged_dot_general(lhs, rhs, group_sizes, ragged_dot_dimension_numbers, precision=None,
                       preferred_element_type=None, group_offset=None, out_sharding=None):
    """The ragged product in its three modes, by where the ragged left axis is: not
    contracted (each group uses its slice of the right operand's group axis; the result has
    no group axis), contracted (the sum runs per group: the result gets a leading group
    axis), or a batch axis (an ordinary batched product).

    Example:
        >>> dn = RaggedDotDimensionNumbers((([1], [1]), ([], [])), [0], [0])
        >>> ragged_dot_general(fnp.ones((3, 2)), fnp.ones((2, 2, 1)), fnp.array([2, 1]),
        ...                    dn).shape
        (3, 1)
    """
    if group_offset is not None:
        raise errors.op_error("ragged_dot_general", "group_offset is not supported (as in "
                              "JAX's reference implementation)", cls=errors.FuncgradValueError)
    if out_sharding is not None:
        raise errors.op_error("ragged_dot_general", "out_sharding is not supported")
    lhs, rhs, gs = _operand(lhs), _operand(rhs), _operand(group_sizes)
    dn = ragged_dot_dimension_numbers
    if get_aval(gs).ndim != 1 or get_aval(gs).dtype.kind not in "iu":
        raise errors.op_error("ragged_dot_general", f"group_sizes must be a 1-D integer array, "
                              f"got {get_aval(gs)}", cls=errors.FuncgradTypeError)
    (l_con, r_con), (l_bat, r_bat) = dn.dot_dimension_numbers
    (rag,) = dn.lhs_ragged_dimensions
    inc = lambda dims: tuple(d + 1 for d in dims)
    kw = {"precision": precision, "preferred_element_type": preferred_element_type}
    if rag in l_bat:
        return dot_general(lhs, rhs, dn.dot_dimension_numbers, **kw)
    if rag in l_con:
        r_rag = r_con[l_con.index(rag)]
        return dot_general(_expand(lhs, rag, gs), _expand(rhs, r_rag, gs),
                           ((inc(l_con), inc(r_con)), ((0,) + inc(l_bat), (0,) + inc(r_bat))),
                           **kw)
    (group_dim,) = dn.rhs_group_dimensions
    if get_aval(rhs).shape[group_dim] != get_aval(gs).shape[0]:
        raise errors.op_error("ragged_dot_general", f"rhs has {get_aval(rhs).shape[group_dim]} "
                              f"groups along axis {group_dim}, group_sizes "
                              f"{get_aval(gs).shape[0]}", cls=errors.FuncgradValueError)
    return dot_general(_expand(lhs, rag, gs), rhs,
                       ((inc(l_con) + (0,), tuple(r_con) + (group_dim,)),
                        (inc(l_bat), tuple(r_bat))), **kw)

