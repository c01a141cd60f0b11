"""Contractions: `dot_general` (XLA's DotGeneral) and the `dot` / `batch_matmul` wrappers.

Output layout is XLA's: batch dims, then the lhs free dims, then the rhs free dims. The
eager implementation routes to BLAS (`np.dot` / `np.matmul`) so eager MLPs stay fast.
This module imports only the core, the interpreters and other `funcgrad.lax` wrappers.
"""

import functools
import types

import numpy as np

from funcgrad import dtypes, errors, lax
from funcgrad.core import Primitive, ShapedArray, get_aval
from funcgrad.core.placement import place
from funcgrad.interpreters import ad, batching
from funcgrad.lax.precision import canonicalize_precision
from funcgrad.lax.utils import quiet, static_ints

__all__ = ["batch_matmul", "dot", "dot_general", "dot_general_p"]


def _ints(xs):
    return static_ints("dot_general", xs, "dimension_numbers")


def _free_dims(ndim, contract, batch):
    return [d for d in range(ndim) if d not in contract and d not in batch]


def _canon_dtype(dt):
    return None if dt is None else dtypes.canonicalize(dt)


# --- dot_general ----------------------------------------------------------------------------
def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None, *,
                out_sharding=None):
    """General tensor contraction with XLA's DotGeneral semantics.

    Args:
        lhs, rhs: arrays of the same dtype.
        dimension_numbers: `((lhs_contract, rhs_contract), (lhs_batch, rhs_batch))`.
        precision: None, a `lax.Precision`, a string such as "highest" or a pair of them
            (validated; numpy always computes in full precision).
        preferred_element_type: optional output (and accumulation) dtype.
        out_sharding: None or one device (`core.placement`).

    Returns:
        An array of shape batch + lhs free + rhs free.

    Raises:
        TypeError: naming both shapes when contracting or batch sizes differ.

    Example:
        >>> dot_general(fnp.ones((2, 3)), fnp.ones((3, 4)), (((1,), (0,)), ((), ()))).shape
        (2, 4)
    """
    (lc, rc), (lb, rb) = dimension_numbers
    dn = ((_ints(lc), _ints(rc)), (_ints(lb), _ints(rb)))
    out = dot_general_p.bind(lhs, rhs, dimension_numbers=dn, precision=_hashable(precision),
                             preferred_element_type=_canon_dtype(preferred_element_type))
    return place("dot_general", out, out_sharding)


def _hashable(precision):
    return canonicalize_precision(precision, "dot_general")  # validated; hashable


def _dot_general_abstract(lhs, rhs, *, dimension_numbers, precision, preferred_element_type):
    return _dot_general_aval(lhs, rhs, dimension_numbers, preferred_element_type)


@functools.lru_cache(maxsize=1024)
def _dot_general_aval(lhs, rhs, dimension_numbers, preferred_element_type):
    (lc, rc), (lb, rb) = dimension_numbers

    def fail(msg, cls=errors.FuncgradTypeError):
        raise errors.op_error("dot_general", f"{msg}: lhs {lhs}, rhs {rhs}, "
                              f"dimension_numbers={dimension_numbers}", cls=cls)
    for name, x, c, b in (("lhs", lhs, lc, lb), ("rhs", rhs, rc, rb)):
        dims = c + b
        if any(not 0 <= d < x.ndim for d in dims) or len(set(dims)) != len(dims):
            fail(f"{name} contracting/batch dimensions must be distinct axes of the {name}",
                 errors.FuncgradValueError)
    if len(lc) != len(rc) or len(lb) != len(rb):
        fail("lhs and rhs must have as many contracting (and batch) dimensions")
    if [lhs.shape[d] for d in lb] != [rhs.shape[d] for d in rb]:
        fail(f"batch dimension sizes differ ({[lhs.shape[d] for d in lb]} vs "
             f"{[rhs.shape[d] for d in rb]})")
    if [lhs.shape[d] for d in lc] != [rhs.shape[d] for d in rc]:
        fail(f"contracting dimension sizes differ ({[lhs.shape[d] for d in lc]} vs "
             f"{[rhs.shape[d] for d in rc]})")
    if lhs.dtype != rhs.dtype:
        raise errors.op_error("dot_general", f"operands must have the same dtype, got lhs {lhs} "
                              f"and rhs {rhs}", hint="convert with .astype() or use "
                              "funcgrad.numpy, which promotes dtypes")
    shape = (tuple(lhs.shape[d] for d in lb)
             + tuple(lhs.shape[d] for d in _free_dims(lhs.ndim, lc, lb))
             + tuple(rhs.shape[d] for d in _free_dims(rhs.ndim, rc, rb)))
    dt = preferred_element_type or lhs.dtype
    return ShapedArray(shape, dt, lhs.weak_type and rhs.weak_type)


def _dot_general_impl(lhs, rhs, *, dimension_numbers, precision, preferred_element_type):
    if preferred_element_type is not None:
        # computed in float32 for a bfloat16 result (rounded once by the caller)
        wide = dtypes.compute_dtype(np.dtype(preferred_element_type))
        lhs, rhs = lhs.astype(wide, copy=False), rhs.astype(wide, copy=False)
    (lc, rc), (lb, rb) = dimension_numbers
    if not lb:
        if lc == (lhs.ndim - 1,) and rc == (0,) and lhs.ndim <= 2 and rhs.ndim <= 2:
            return np.dot(lhs, rhs)
        if lhs.ndim == 2 and rhs.ndim == 2 and lc == (1,) and rc == (1,):
            return np.dot(lhs, rhs.T)
        if lhs.ndim == 2 and rhs.ndim == 2 and lc == (0,) and rc == (0,):
            return np.dot(lhs.T, rhs)
        return np.tensordot(lhs, rhs, (lc, rc))
    lf, rf = _free_dims(lhs.ndim, lc, lb), _free_dims(rhs.ndim, rc, rb)
    size = lambda x, ds: int(np.prod([x.shape[d] for d in ds], dtype=np.int64))  # noqa: E731
    a = lhs.transpose(lb + tuple(lf) + lc).reshape(size(lhs, lb), size(lhs, lf), size(lhs, lc))
    b = rhs.transpose(rb + rc + tuple(rf)).reshape(size(rhs, rb), size(rhs, rc), size(rhs, rf))
    out_shape = ([lhs.shape[d] for d in lb] + [lhs.shape[d] for d in lf]
                 + [rhs.shape[d] for d in rf])
    return np.matmul(a, b).reshape(out_shape)


def _ranges_like(*xs):
    start = 0
    for x in xs:
        yield tuple(range(start, start + len(x)))
        start += len(x)


def _transpose_lhs(ct, x_aval, y, dimension_numbers, swap_ans=False):
    # JAX's _dot_general_transpose_lhs: contract ct with y over y's free (and batch) dims.
    (x_contract, y_contract), (x_batch, y_batch) = dimension_numbers
    y_ndim = get_aval(y).ndim
    x_kept = _free_dims(x_aval.ndim, x_contract, x_batch)
    y_kept = _free_dims(y_ndim, y_contract, y_batch)
    if swap_ans:
        ans_batch, ans_y, _ = _ranges_like(x_batch, y_kept, x_kept)
    else:
        ans_batch, _, ans_y = _ranges_like(x_batch, x_kept, y_kept)
    dims = ((ans_y, tuple(y_kept)), (ans_batch, tuple(y_batch)))
    x_contract_sorted_by_y = [x_contract[i] for i in np.argsort(y_contract)]
    out_axes = np.argsort(list(x_batch) + x_kept + x_contract_sorted_by_y)
    ct_dt = get_aval(ct).dtype
    if get_aval(y).dtype != ct_dt:
        y = lax.convert_element_type(y, ct_dt)
    out = dot_general(ct, y, dims)
    if list(out_axes) != list(range(len(out_axes))):
        out = lax.transpose(out, tuple(int(a) for a in out_axes))
    if get_aval(out).dtype != x_aval.dtype:
        out = lax.convert_element_type(out, x_aval.dtype)
    return out


def _dot_general_transpose(ct, lhs, rhs, *, dimension_numbers, precision,
                           preferred_element_type):
    (lc, rc), (lb, rb) = dimension_numbers
    if ad.is_undefined(lhs):
        return [_transpose_lhs(ct, lhs.aval, rhs, dimension_numbers), None]
    swapped = ((rc, lc), (rb, lb))
    return [None, _transpose_lhs(ct, rhs.aval, lhs, swapped, swap_ans=True)]


def _shift(dims, by=1):
    return tuple(d + by for d in dims)


def _dot_general_batch(args, dims, *, dimension_numbers, **params):
    (lc, rc), (lb, rb) = dimension_numbers
    lhs, rhs = args
    ld, rd = dims
    if ld is not batching.not_mapped and rd is not batching.not_mapped:
        lhs, rhs = batching.moveaxis(lhs, ld, 0), batching.moveaxis(rhs, rd, 0)
        dn = ((_shift(lc), _shift(rc)), ((0,) + _shift(lb), (0,) + _shift(rb)))
        return dot_general_p.bind(lhs, rhs, dimension_numbers=dn, **params), 0
    if ld is not batching.not_mapped:
        lhs = batching.moveaxis(lhs, ld, 0)
        dn = ((_shift(lc), rc), (_shift(lb), rb))
        return dot_general_p.bind(lhs, rhs, dimension_numbers=dn, **params), len(lb)
    rhs = batching.moveaxis(rhs, rd, 0)
    dn = ((lc, _shift(rc)), (lb, _shift(rb)))
    n_lhs_free = get_aval(lhs).ndim - len(lc) - len(lb)
    return dot_general_p.bind(lhs, rhs, dimension_numbers=dn, **params), len(lb) + n_lhs_free


dot_general_p = Primitive("dot_general")
dot_general_p.def_impl(quiet(_dot_general_impl))
dot_general_p.def_abstract_eval(_dot_general_abstract)
ad.defjvp(dot_general_p,
          lambda t, x, y, *, out, **p: dot_general_p.bind(t, y, **p),
          lambda t, x, y, *, out, **p: dot_general_p.bind(x, t, **p))
ad.transpose_rules[dot_general_p] = _dot_general_transpose
batching.batch_rules[dot_general_p] = _dot_general_batch


# --- dot / batch_matmul ---------------------------------------------------------------------
def dot(lhs, rhs, *, dimension_numbers=None, precision=None, preferred_element_type=None,
        out_sharding=None):
    """Vector/matrix product of rank-1 or rank-2 operands (lax.dot).

    Contracts the last axis of `lhs` with the first axis of `rhs`; with `dimension_numbers`
    it is `dot_general` (as in JAX).

    Raises:
        TypeError: naming both shapes when the ranks or the contracted sizes do not fit.

    Example:
        >>> dot(fnp.ones((2, 3)), fnp.ones(3))
        Array([3., 3.], dtype=float32)
    """
    if dimension_numbers is not None:
        return dot_general(lhs, rhs, dimension_numbers, precision, preferred_element_type,
                           out_sharding=out_sharding)
    la, ra = get_aval(lhs), get_aval(rhs)
    if not (1 <= la.ndim <= 2 and 1 <= ra.ndim <= 2):
        raise errors.op_error("dot", f"expects vector or matrix operands, got lhs {la} and "
                              f"rhs {ra}", hint="give dimension_numbers, or use "
                              "funcgrad.numpy.matmul for batched operands")
    if la.shape[-1] != ra.shape[0]:
        raise errors.op_error("dot", f"incompatible shapes for a matrix product: lhs {la} and "
                              f"rhs {ra} (contracting sizes {la.shape[-1]} and {ra.shape[0]})")
    return dot_general(lhs, rhs, (((la.ndim - 1,), (0,)), ((), ())), precision,
                       preferred_element_type, out_sharding=out_sharding)


def batch_matmul(lhs, rhs, precision=None, *, preferred_element_type=None):
    """Batched matrix product: leading axes are batch axes, the last two are multiplied.

    Example:
        >>> batch_matmul(fnp.ones((5, 2, 3)), fnp.ones((5, 3, 4))).shape
        (5, 2, 4)
    """
    la, ra = get_aval(lhs), get_aval(rhs)
    if la.ndim < 2 or la.ndim != ra.ndim or la.shape[:-2] != ra.shape[:-2] or (
            la.shape[-1] != ra.shape[-2]):
        raise errors.op_error("batch_matmul", f"expects operands of equal rank >= 2 with equal "
                              f"batch shapes and matching inner sizes, got lhs {la} and rhs "
                              f"{ra}")
    batch = tuple(range(la.ndim - 2))
    return dot_general(lhs, rhs, (((la.ndim - 1,), (ra.ndim - 2,)), (batch, batch)),
                       precision, preferred_element_type)


# --- the decompositions: `funcgrad.lax.linalg.cholesky` etc., as `jax.lax.linalg` -----------
def _export_decompositions():
    from funcgrad.lax import linalg_decomp, linalg_eig, linalg_schur
    for module in (linalg_decomp, linalg_eig, linalg_schur):
        for name in module.__all__:
            obj = getattr(module, name)
            globals()[name] = (errors.api_boundary(obj, f"lax.linalg.{name}")
                               if isinstance(obj, types.FunctionType) else obj)


_export_decompositions()
