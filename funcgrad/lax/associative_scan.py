"""Folds of a user's associative function: `associative_scan` (the parallel prefix scan, JAX's
odd/even recursion: O(n) work in O(log n) levels of whole-array operations) and `reduce`
(XLA's Reduce with any computation: the monoids become `reduce_sum`/`reduce_max`/..., any
other computation a log-depth tree of pairwise combinations).

Both are compositions of lax operations and of the user's function, so their derivatives and
batching rules are those of the pieces. Imports lax siblings, core and the base modules.
"""

import math

import numpy as np

from funcgrad import errors
from funcgrad.core import ArrayBase, concrete_value, get_aval, to_array
from funcgrad.core.trace import trace_to_jaxpr
from funcgrad.interpreters import batching
from funcgrad.lax import elementwise, logic, reductions
from funcgrad.lax.shape import broadcast_in_dim, canonicalize_axis, full, reshape, rev, transpose
from funcgrad.lax.slicing import concatenate, pad, slice_in_dim
from funcgrad.lax.utils import static_ints
from funcgrad.tree_util import tree_flatten, tree_unflatten

__all__ = ["associative_scan", "reduce"]


def _operand(x):
    return x if isinstance(x, ArrayBase) else to_array(x)


# --- associative_scan -------------------------------------------------------------------------
def associative_scan(fn, elems, reverse=False, axis=0):
    """All prefix combinations `fn(...fn(fn(e0, e1), e2)..., ek)` along `axis`, in parallel.

    Args:
        fn: an associative function of two pytrees shaped like `elems`, elementwise along
            `axis` (it receives slices of the arrays, as in JAX).
        elems: a pytree of arrays with one size along `axis`.
        reverse: scan from the end.
        axis: the scanned axis.

    Returns:
        A pytree like `elems`; entry k combines elements 0..k (k..n-1 with `reverse`).

    Example:
        >>> associative_scan(lax.add, fnp.arange(5.0))
        Array([ 0.,  1.,  3.,  6., 10.], dtype=float32)
    """
    if not callable(fn):
        raise errors.op_error("associative_scan", f"fn must be callable, got "
                              f"{type(fn).__name__}")
    flat, tree = tree_flatten(elems)
    flat = [_operand(x) for x in flat]
    if not flat:
        return elems
    ranks = {get_aval(x).ndim for x in flat}
    if len(ranks) != 1:
        raise errors.op_error("associative_scan", "every array of elems needs the same rank, "
                              f"got {[get_aval(x) for x in flat]}")
    axis = canonicalize_axis("associative_scan", axis, ranks.pop())
    sizes = {get_aval(x).shape[axis] for x in flat}
    if len(sizes) != 1:
        raise errors.op_error("associative_scan", f"every array of elems needs one size along "
                              f"axis {axis}, got {[get_aval(x) for x in flat]}")

    def combine(a, b):
        out = tree_flatten(fn(tree_unflatten(tree, a), tree_unflatten(tree, b)))[0]
        shapes = [get_aval(_operand(o)).shape for o in out]
        if len(out) != len(a) or shapes != [get_aval(x).shape for x in a]:
            raise errors.op_error("associative_scan", f"fn must return the structure and "
                                  f"shapes of its inputs {[get_aval(x) for x in a]}, got "
                                  f"{shapes}")
        return [_operand(o) for o in out]
    if reverse:
        flat = [rev(x, (axis,)) for x in flat]
    out = _scan(combine, flat, axis)
    if reverse:
        out = [rev(x, (axis,)) for x in out]
    return tree_unflatten(tree, out)


def _scan(combine, elems, axis):
    """The prefix scan: combine neighbours pairwise, scan the pairs (the odd prefixes), then
    complete the even prefixes from them and interleave."""
    n = get_aval(elems[0]).shape[axis]
    if n < 2:
        return elems
    cut = lambda xs, start, stop, stride=1: [slice_in_dim(x, start, stop, stride, axis)
                                             for x in xs]
    odd = _scan(combine, combine(cut(elems, 0, n - 1, 2), cut(elems, 1, n, 2)), axis)
    if n % 2 == 0:
        even = combine(cut(odd, 0, get_aval(odd[0]).shape[axis] - 1), cut(elems, 2, n, 2))
    else:
        even = combine(odd, cut(elems, 2, n, 2))
    even = [concatenate([first, e], axis) for first, e in zip(cut(elems, 0, 1), even)]
    return [_interleave(e, o, axis) for e, o in zip(even, odd)]


def _interleave(a, b, axis):
    """a0 b0 a1 b1 ... along `axis` (a has as many entries as b, or one more)."""
    na, nb = get_aval(a).shape[axis], get_aval(b).shape[axis]
    nd = get_aval(a).ndim
    cfg_a, cfg_b = [(0, 0, 0)] * nd, [(0, 0, 0)] * nd
    cfg_a[axis] = (0, 1 if na == nb else 0, 1)
    cfg_b[axis] = (1, 0 if na == nb else 1, 1)
    dt = get_aval(a).dtype
    zero = full((), False if dt.kind == "b" else 0, dt)
    join = logic.bitwise_or if dt.kind == "b" else elementwise.add
    return join(pad(a, zero, cfg_a), pad(b, zero, cfg_b))


# --- reduce -----------------------------------------------------------------------------------
# the monoids: primitive of the computation -> (reducer, identity of a dtype)
def _monoids():
    return {
        elementwise.add_p: (reductions.reduce_sum, lambda dt: 0),
        elementwise.mul_p: (reductions.reduce_prod, lambda dt: 1),
        elementwise.max_p: (reductions.reduce_max, reductions._lowest),
        elementwise.min_p: (reductions.reduce_min, reductions._highest),
        logic.and_p: (reductions.reduce_and, lambda dt: True if dt.kind == "b" else -1),
        logic.or_p: (reductions.reduce_or, lambda dt: False if dt.kind == "b" else 0),
        logic.xor_p: (reductions.reduce_xor, lambda dt: False if dt.kind == "b" else 0),
    }


def reduce(operands, init_values, computation, dimensions, out_sharding=None):
    """XLA's Reduce: `operands` (an array or a pytree of arrays) folded over `dimensions` with
    `computation`, starting from `init_values` (scalars, one per array).

    `computation(x, y)` takes and returns pytrees of scalars shaped like `operands`; it must
    be associative and commutative (the order of the fold is unspecified, as in XLA). A
    computation that is one of add, mul, max, min, and, or, xor becomes the matching reduce
    primitive; any other is applied as a log-depth tree of pairwise combinations.

    Example:
        >>> reduce(fnp.arange(5.0), 0.0, lax.add, (0,))
        Array(10., dtype=float32)
    """
    if out_sharding is not None:
        raise errors.op_error("reduce", "out_sharding is not supported (one device)")
    flat, tree = tree_flatten(operands)
    inits, init_tree = tree_flatten(init_values)
    if not flat or len(inits) != len(flat):
        raise errors.op_error("reduce", f"operands ({len(flat)} arrays) and init_values "
                              f"({len(inits)}) must have the same structure")
    flat = [_operand(x) for x in flat]
    inits = [_scalar(i, get_aval(x).dtype) for i, x in zip(inits, flat)]
    shape = get_aval(flat[0]).shape
    dims = tuple(sorted(canonicalize_axis("reduce", d, len(shape))
                        for d in static_ints("reduce", dimensions, "dimensions")))
    if any(get_aval(x).shape != shape for x in flat):
        raise errors.op_error("reduce", f"every operand needs one shape, got "
                              f"{[get_aval(x) for x in flat]}")
    closed = _trace_computation(computation, tree, [get_aval(i) for i in inits])
    out = _as_monoid(closed, flat, inits, dims)
    if out is None:
        out = _tree_reduce(closed, flat, inits, dims)
    return tree_unflatten(tree, out)


def _scalar(v, dt):
    v = _operand(v)
    if get_aval(v).shape != ():
        raise errors.op_error("reduce", f"each init value must be a scalar, got {get_aval(v)}")
    return v if get_aval(v).dtype == dt else elementwise.convert_element_type(v, dt)


def _trace_computation(computation, tree, avals):
    k = len(avals)

    def flat_fun(*args):
        out = computation(tree_unflatten(tree, list(args[:k])),
                          tree_unflatten(tree, list(args[k:])))
        outs = [_operand(o) for o in tree_flatten(out)[0]]
        if [get_aval(o).shape for o in outs] != [()] * k:
            raise errors.op_error("reduce", f"computation must return {k} scalar(s) shaped "
                                  f"like operands, got {[get_aval(o) for o in outs]}")
        return outs
    return trace_to_jaxpr(flat_fun, [a.update(weak_type=False) for a in avals] * 2, "reduce")


def _as_monoid(closed, flat, inits, dims):
    """The reduction by a reduce primitive when the computation is one monoid's operation."""
    j = closed.jaxpr
    if len(flat) != 1 or len(j.eqns) != 1 or closed.consts:
        return None
    eqn = j.eqns[0]
    monoid = _monoids().get(eqn.prim)
    if (monoid is None or eqn.params or set(eqn.invars) != set(j.invars)
            or len(eqn.invars) != 2 or list(j.outvars) != list(eqn.outvars)):
        return None
    reducer, identity = monoid
    x, init = flat[0], inits[0]
    dt = get_aval(x).dtype
    if dt.kind == "b" and reducer in (reductions.reduce_sum, reductions.reduce_prod):
        return None
    out = reducer(x, dims)
    known = concrete_value(init)
    if known is None or np.asarray(known) != np.asarray(identity(dt), dt):
        out = eqn.prim.bind(init, out) if get_aval(out).shape == () else eqn.prim.bind(
            broadcast_in_dim(init, get_aval(out).shape, ()), out)
    return [out]


def _tree_reduce(closed, flat, inits, dims):
    shape = get_aval(flat[0]).shape
    kept = tuple(i for i in range(len(shape)) if i not in dims)
    m = math.prod(shape[i] for i in kept)
    n = math.prod(shape[i] for i in dims)
    xs = [reshape(transpose(x, kept + dims), (m, n)) for x in flat]

    def apply(a, b):  # the computation on (m * h,) vectors, elementwise
        outs, out_dims = batching.batch_eval(closed.jaxpr, closed.consts, a + b,
                                             [0] * (len(a) + len(b)))
        size = get_aval(a[0]).shape[0]
        return [o if d == 0 else broadcast_in_dim(_operand(o), (size,), ())
                for o, d in zip(outs, out_dims)]
    extras = []
    while n > 1:
        if n % 2:
            extras.append([reshape(slice_in_dim(x, n - 1, n, 1, 1), (m,)) for x in xs])
            xs, n = [slice_in_dim(x, 0, n - 1, 1, 1) for x in xs], n - 1
        h = n // 2
        lo = [reshape(slice_in_dim(x, 0, h, 1, 1), (m * h,)) for x in xs]
        hi = [reshape(slice_in_dim(x, h, n, 1, 1), (m * h,)) for x in xs]
        xs, n = [reshape(o, (m, h)) for o in apply(lo, hi)], h
    acc = [broadcast_in_dim(i, (m,), ()) for i in inits]
    rest = ([[reshape(x, (m,)) for x in xs]] if n == 1 else []) + extras
    for part in rest:
        acc = apply(acc, part) if m else acc
    return [reshape(a, tuple(shape[i] for i in kept)) for a in acc]
