"""Products of funcgrad.numpy: dot, matmul (`@`), einsum, outer, inner, tensordot, vdot, kron,
vecdot (`funcgrad.numpy.linalg`, the numpy.linalg namespace, is `linalg.py`).

Every product lowers to one `lax.dot_general` (plus transposes, broadcasts and reductions
where NumPy's layout needs them). `einsum` parses its subscripts here and contracts the
operands pairwise from left to right.
"""

from math import prod

import numpy as np

from funcgrad import dtypes, errors, lax
from funcgrad.core import Array, placement
from funcgrad.numpy._util import (
    asarray_operand,
    broadcast_shapes,
    broadcast_to_shape,
    canonical_axis,
    promote,
    shape_of,
)

__all__ = ["dot", "einsum", "inner", "kron", "matmul", "outer", "tensordot", "vdot", "vecdot"]

_dot_general_bind = lax.dot_general_p.bind
# dimension numbers of matmul (= dot) for operands of rank (1 or 2, 1 or 2)
_DN = {(2, 2): (((1,), (0,)), ((), ())), (2, 1): (((1,), (0,)), ((), ())),
       (1, 2): (((0,), (0,)), ((), ())), (1, 1): (((0,), (0,)), ((), ()))}


def _fast_product(a, b):
    """matmul (= dot) of two Arrays in one dot_general bind when they are vectors or matrices
    of one inexact dtype with matching inner sizes; None to take the general path."""
    va, vb = a._value, b._value
    dn = _DN.get((va.ndim, vb.ndim))
    if (dn is None or va.dtype != vb.dtype or dtypes.kind(va.dtype) not in "fc"
            or va.shape[-1] != vb.shape[0]):
        return None
    return _dot_general_bind(a, b, dimension_numbers=dn, precision=None,
                             preferred_element_type=None)


def _dot_general(a, b, lc, rc, lb=(), rb=(), precision=None, preferred_element_type=None):
    return lax.dot_general(a, b, ((tuple(lc), tuple(rc)), (tuple(lb), tuple(rb))), precision,
                           preferred_element_type)


# --- matmul / dot -------------------------------------------------------------------------------

def matmul(a, b, *, precision=None, preferred_element_type=None, out_sharding=None):
    """Matrix product with NumPy's rules (the `@` operator).

    Args:
        a, b: arrays of rank >= 1. A 1-D `a` is a row vector, a 1-D `b` a column vector
            (the added axis is removed from the result); axes before the last two are batch
            axes and broadcast against each other.

    Returns:
        `a @ b`, of the promoted dtype.

    Raises:
        FuncgradTypeError: naming both shapes when the inner sizes differ.

    Example:
        >>> (fnp.ones((5, 2, 3)) @ fnp.ones((3, 4))).shape
        (5, 2, 4)
    """
    if out_sharding is not None:  # None or one device: core.placement
        out = matmul(a, b, precision=precision, preferred_element_type=preferred_element_type)
        return placement.place("matmul", out, out_sharding)
    if (type(a) is Array and type(b) is Array and precision is None
            and preferred_element_type is None):
        out = _fast_product(a, b)
        if out is not None:
            return out
    a, b = promote("matmul", (a, b), broadcast=False)
    sa, sb = shape_of(a), shape_of(b)
    na, nb = len(sa), len(sb)
    if na == 0 or nb == 0:
        raise errors.op_error("matmul", f"operands must be at least 1-D, got shapes {sa} and "
                              f"{sb}", hint="use multiply (*) for scalars",
                              cls=errors.FuncgradValueError)
    ka, kb = sa[-1], sb[0] if nb == 1 else sb[-2]
    if ka != kb:
        raise errors.op_error("matmul", f"shapes {sa} and {sb} are incompatible: the last axis "
                              f"of a ({ka}) must equal the {'only' if nb == 1 else '2nd-last'} "
                              f"axis of b ({kb})")
    kw = dict(precision=precision, preferred_element_type=preferred_element_type)
    if nb <= 2:
        return _dot_general(a, b, (na - 1,), (0,), **kw)
    if na == 1:
        return _dot_general(a, b, (0,), (nb - 2,), **kw)
    batch = broadcast_shapes("matmul", sa[:-2], sb[:-2])
    if na == 2:
        out = _dot_general(a, b, (1,), (nb - 2,), **kw)
        nbb = nb - 2
        return lax.transpose(out, tuple(range(1, nbb + 1)) + (0, nbb + 1))
    a = broadcast_to_shape(a, batch + sa[-2:])
    b = broadcast_to_shape(b, batch + sb[-2:])
    nd = len(batch) + 2
    bd = tuple(range(len(batch)))
    return _dot_general(a, b, (nd - 1,), (nd - 2,), bd, bd, **kw)


def dot(a, b, *, precision=None, preferred_element_type=None, out_sharding=None):
    """NumPy's dot: a product over the last axis of `a` and the second-to-last of `b` (the
    only axis for 1-D `b`); scalars multiply.

    Example:
        >>> fnp.dot(fnp.ones((2, 3)), fnp.ones(3))
        Array([3., 3.], dtype=float32)
    """
    if out_sharding is not None:  # None or one device: core.placement
        out = dot(a, b, precision=precision, preferred_element_type=preferred_element_type)
        return placement.place("dot", out, out_sharding)
    if (type(a) is Array and type(b) is Array and precision is None
            and preferred_element_type is None):
        out = _fast_product(a, b)
        if out is not None:
            return out
    a, b = promote("dot", (a, b), broadcast=False)
    sa, sb = shape_of(a), shape_of(b)
    if not sa or not sb:
        from funcgrad.numpy.math import multiply
        return multiply(a, b)
    rc = 0 if len(sb) == 1 else len(sb) - 2
    if sa[-1] != sb[rc]:
        raise errors.op_error("dot", f"shapes {sa} and {sb} not aligned: {sa[-1]} (axis "
                              f"{len(sa) - 1}) != {sb[rc]} (axis {rc})")
    return _dot_general(a, b, (len(sa) - 1,), (rc,), precision=precision,
                        preferred_element_type=preferred_element_type)


def vdot(a, b, *, precision=None, preferred_element_type=None):
    """Dot product of the flattened arrays, conjugating `a` when complex."""
    from funcgrad.numpy.math import conjugate
    from funcgrad.numpy.shape import ravel
    a, b = promote("vdot", (a, b), broadcast=False)
    a, b = ravel(conjugate(a)), ravel(b)
    if shape_of(a) != shape_of(b):
        raise errors.op_error("vdot", f"operands must have the same size, got {shape_of(a)} and "
                              f"{shape_of(b)}", cls=errors.FuncgradValueError)
    return _dot_general(a, b, (0,), (0,), precision=precision,
                        preferred_element_type=preferred_element_type)


def vecdot(x1, x2, /, *, axis=-1, precision=None, preferred_element_type=None):
    """Vector dot product along `axis` (conjugating `x1`), broadcasting the other axes."""
    from funcgrad.numpy.math import conjugate, multiply
    from funcgrad.numpy.reductions import sum as sum_
    x1, x2 = promote("vecdot", (x1, x2), broadcast=False)
    s1, s2 = shape_of(x1), shape_of(x2)
    a1, a2 = canonical_axis("vecdot", axis, len(s1)), canonical_axis("vecdot", axis, len(s2))
    if s1[a1] != s2[a2]:
        raise errors.op_error("vecdot", f"axis {axis} has size {s1[a1]} in x1 {s1} but "
                              f"{s2[a2]} in x2 {s2}")
    # the promoted dtype, as the Array API says (sum alone widens small integers)
    return sum_(multiply(conjugate(x1), x2), axis=axis, dtype=preferred_element_type or x1.dtype)


def inner(a, b, *, precision=None, preferred_element_type=None):
    """Inner product over the last axes of `a` and `b` (scalars multiply)."""
    a, b = promote("inner", (a, b), broadcast=False)
    sa, sb = shape_of(a), shape_of(b)
    if not sa or not sb:
        from funcgrad.numpy.math import multiply
        return multiply(a, b)
    if sa[-1] != sb[-1]:
        raise errors.op_error("inner", f"shapes {sa} and {sb}: last axes differ "
                              f"({sa[-1]} != {sb[-1]})")
    return _dot_general(a, b, (len(sa) - 1,), (len(sb) - 1,), precision=precision,
                        preferred_element_type=preferred_element_type)


def outer(a, b, out=None):
    """Outer product of the flattened `a` and `b`: result[i, j] = a[i] * b[j]."""
    from funcgrad.numpy.math import multiply
    a, b = asarray_operand("outer", a), asarray_operand("outer", b)
    return multiply(lax.reshape(a, (prod(shape_of(a)), 1)), lax.reshape(b, (prod(shape_of(b)),)))


def tensordot(a, b, axes=2, *, precision=None, preferred_element_type=None,
              out_sharding=None):
    """Sum products over `axes`: an int N (last N of `a` with first N of `b`) or a pair of
    axis sequences.

    Example:
        >>> fnp.tensordot(fnp.ones((2, 3, 4)), fnp.ones((3, 4, 5))).shape
        (2, 5)
    """
    if out_sharding is not None:  # None or one device: core.placement
        out = tensordot(a, b, axes, precision=precision,
                        preferred_element_type=preferred_element_type)
        return placement.place("tensordot", out, out_sharding)
    a, b = promote("tensordot", (a, b), broadcast=False)
    sa, sb = shape_of(a), shape_of(b)
    if isinstance(axes, (int, np.integer)):
        n = int(axes)
        if n < 0 or n > min(len(sa), len(sb)):
            raise errors.op_error("tensordot", f"axes={n} is out of range for shapes {sa} and "
                                  f"{sb}", cls=errors.FuncgradValueError)
        la, lb = tuple(range(len(sa) - n, len(sa))), tuple(range(n))
    else:
        try:
            xa, xb = axes
        except (TypeError, ValueError):
            raise errors.op_error("tensordot", f"axes must be an int or a pair of sequences, "
                                  f"got {errors.short_repr(axes)}") from None
        xa = (xa,) if isinstance(xa, (int, np.integer)) else tuple(xa)
        xb = (xb,) if isinstance(xb, (int, np.integer)) else tuple(xb)
        la = tuple(canonical_axis("tensordot", x, len(sa)) for x in xa)
        lb = tuple(canonical_axis("tensordot", x, len(sb)) for x in xb)
        if len(la) != len(lb):
            raise errors.op_error("tensordot", f"axes {axes} name {len(la)} axes of a but "
                                  f"{len(lb)} of b", cls=errors.FuncgradValueError)
    if [sa[i] for i in la] != [sb[i] for i in lb]:
        raise errors.op_error("tensordot", f"shape mismatch for sum: axes {la} of {sa} and "
                              f"{lb} of {sb}")
    return _dot_general(a, b, la, lb, precision=precision,
                        preferred_element_type=preferred_element_type)


def kron(a, b):
    """Kronecker product: blocks a[i, j] * b."""
    from funcgrad.numpy.math import multiply
    a, b = promote("kron", (a, b), broadcast=False)
    sa, sb = shape_of(a), shape_of(b)
    nd = max(len(sa), len(sb))
    sa, sb = (1,) * (nd - len(sa)) + sa, (1,) * (nd - len(sb)) + sb
    a = lax.reshape(a, tuple(x for d in sa for x in (d, 1)))
    b = lax.reshape(b, tuple(x for d in sb for x in (1, d)))
    return lax.reshape(multiply(a, b), tuple(x * y for x, y in zip(sa, sb)))


# --- einsum -------------------------------------------------------------------------------------

def einsum(subscripts, /, *operands, out=None, optimize="auto", precision=None,
           preferred_element_type=None, out_sharding=None):
    """Einstein summation over the operands' labelled axes.

    Supports "..." ellipses (broadcast), implicit output ("ij,jk" sums the repeated labels
    and orders the rest alphabetically, ellipsis first), repeated labels within one operand
    (diagonals, "ii->i"), size-1 axes broadcasting against larger ones, and the interleaved
    form einsum(x, [0, 1], y, [1, 2], [0, 2]). Operands are contracted pairwise from left
    to right, each pair with one dot_general (labels used only once are summed first).

    Args:
        subscripts: e.g. "ij,jk->ik" (matmul), "bij,bjk->bik" or "ii" (trace).
        *operands: arrays, one per comma-separated term; promoted to a common dtype.
        optimize: accepted for NumPy/JAX compatibility; the order is always left to right.
        precision, preferred_element_type: passed to each dot_general.

    Returns:
        An array with the output labels' axes.

    Raises:
        FuncgradValueError: naming the subscripts and shapes when they disagree.

    Example:
        >>> fnp.einsum("...ij,jk->...ik", fnp.ones((5, 2, 3)), fnp.ones((3, 4))).shape
        (5, 2, 4)
    """
    if out_sharding is not None:  # None or one device: core.placement
        res = einsum(subscripts, *operands, out=out, optimize=optimize, precision=precision,
                     preferred_element_type=preferred_element_type)
        return placement.place("einsum", res, out_sharding)
    if out is not None:
        raise errors.op_error("einsum", "the `out` argument is not supported",
                              cls=errors.FuncgradValueError)
    if not isinstance(subscripts, str):
        subscripts, operands = _interleaved(subscripts, operands)
    ops = promote("einsum", operands, broadcast=False) if operands else []
    shapes = [shape_of(x) for x in ops]
    in_labels, out_labels, sizes = _parse_einsum(subscripts, shapes)
    terms = [_prepare_operand(x, labels, sizes) for x, labels in zip(ops, in_labels)]
    kw = dict(precision=precision, preferred_element_type=preferred_element_type)
    while len(terms) > 1:
        (a, la), (b, lb) = terms[0], terms[1]
        needed = set(out_labels).union(*[set(lab) for _, lab in terms[2:]])
        a, la = _sum_out(a, la, needed | set(lb))
        b, lb = _sum_out(b, lb, needed | set(la))
        batch = [x for x in la if x in lb and x in needed]
        contract = [x for x in la if x in lb and x not in needed]
        res = _dot_general(a, b, [la.index(x) for x in contract],
                           [lb.index(x) for x in contract], [la.index(x) for x in batch],
                           [lb.index(x) for x in batch], **kw)
        labels = batch + [x for x in la if x not in lb] + [x for x in lb if x not in la]
        terms = [(res, labels)] + terms[2:]
    x, labels = terms[0]
    x, labels = _sum_out(x, labels, set(out_labels))
    perm = tuple(labels.index(x) for x in out_labels)
    if preferred_element_type is not None and len(ops) == 1:
        x = lax.convert_element_type(x, preferred_element_type)
    return lax.transpose(x, perm) if perm != tuple(range(len(perm))) else x


def _einsum_error(message):
    return errors.op_error("einsum", message, cls=errors.FuncgradValueError)


def _interleaved(first, rest):
    args = (first,) + tuple(rest)
    out = None
    if len(args) % 2:
        args, out = args[:-1], args[-1]
    ops, subs = list(args[0::2]), list(args[1::2])

    def letters(sub):
        s = ""
        for x in sub:
            if x is Ellipsis:
                s += "..."
            elif isinstance(x, (int, np.integer)) and 0 <= x < 52:
                s += "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"[int(x)]
            else:
                raise _einsum_error(f"subscript {errors.short_repr(x)} must be an int in [0, "
                                    f"52) or Ellipsis")
        return s
    spec = ",".join(letters(s) for s in subs) + ("" if out is None else "->" + letters(out))
    return spec, ops


def _term_labels(term, ndim, ell_rank, where):
    """Labels of one term: letters, plus '.k' for the k-th (global) ellipsis axis."""
    if term.count("...") > 1 or "." in term.replace("...", ""):
        raise _einsum_error(f"invalid subscripts {errors.short_repr(term)} ({where})")
    if not all(c.isalpha() for c in term.replace("...", "")):
        raise _einsum_error(f"subscripts must be letters, got {errors.short_repr(term)} ({where})")
    if "..." not in term:
        if ndim is not None and len(term) != ndim:
            raise _einsum_error(f"{where} has {ndim} dimensions but subscripts "
                                f"{errors.short_repr(term)} name "
                                f"{len(term)}")
        return list(term)
    left, right = term.split("...")
    n_ell = ell_rank if ndim is None else ndim - len(left) - len(right)
    if n_ell < 0:
        raise _einsum_error(f"{where} has {ndim} dimensions but subscripts "
                            f"{errors.short_repr(term)} name "
                            f"{len(left) + len(right)}")
    return list(left) + [f".{ell_rank - n_ell + k}" for k in range(n_ell)] + list(right)


def _parse_einsum(subscripts, shapes):
    spec = subscripts.replace(" ", "")
    if spec.count("->") > 1:
        raise _einsum_error(f"subscripts {errors.short_repr(subscripts)} have more than one '->'")
    ins, arrow, out = spec.partition("->")
    terms = ins.split(",")
    if len(terms) != len(shapes):
        raise _einsum_error(f"subscripts {errors.short_repr(subscripts)} name {len(terms)} "
                            f"operands but "
                            f"{len(shapes)} were given")
    ell_rank = max([len(s) - len(t.replace("...", "")) for t, s in zip(terms, shapes)
                    if "..." in t] or [0])
    in_labels = [_term_labels(t, len(s), ell_rank, f"operand {i}")
                 for i, (t, s) in enumerate(zip(terms, shapes))]
    sizes = {}
    for i, (labels, s) in enumerate(zip(in_labels, shapes)):
        for lab, d in zip(labels, s):
            prev = sizes.get(lab, 1)
            if d != 1 and prev != 1 and d != prev:
                raise _einsum_error(f"size of label {errors.short_repr(lab)} is {prev} in one "
                                    f"operand but {d} in "
                                    f"operand {i} (shapes {', '.join(map(str, shapes))})")
            sizes[lab] = max(prev, d) if d != 1 else prev
    ell = [f".{k}" for k in range(ell_rank)]
    if arrow:
        out_labels = _term_labels(out, None, ell_rank, "output")
        if ell_rank and "..." not in out:
            raise _einsum_error("output has more dimensions than subscripts given, but no "
                                "'...' to broadcast the extra dimensions")
        known = set().union(*map(set, in_labels)) if in_labels else set()
        for lab in out_labels:
            if lab not in known:
                raise _einsum_error(f"output label {errors.short_repr(lab)} does not appear in "
                                    f"the inputs")
        if len(set(out_labels)) != len(out_labels):
            raise _einsum_error(f"output subscripts {errors.short_repr(out)} repeat a label")
    else:
        counts = {}
        for labels in in_labels:
            for lab in labels:
                counts[lab] = counts.get(lab, 0) + 1
        out_labels = ell + sorted(lab for lab, c in counts.items()
                                  if c == 1 and not lab.startswith("."))
    return in_labels, out_labels, sizes


def _prepare_operand(x, labels, sizes):
    """Drop size-1 axes broadcast against larger ones, and take repeated-label diagonals."""
    from funcgrad.numpy.shape import diagonal
    s = shape_of(x)
    drop = [i for i, lab in enumerate(labels) if s[i] == 1 and sizes[lab] != 1]
    if drop:
        x = lax.reshape(x, tuple(d for i, d in enumerate(s) if i not in drop))
        labels = [lab for i, lab in enumerate(labels) if i not in drop]
    while len(set(labels)) != len(labels):
        lab = next(lab for lab in labels if labels.count(lab) > 1)
        i = labels.index(lab)
        j = labels.index(lab, i + 1)
        x = diagonal(x, 0, i, j)
        labels = [m for k, m in enumerate(labels) if k not in (i, j)] + [lab]
    return x, labels


def _sum_out(x, labels, keep):
    axes = tuple(i for i, lab in enumerate(labels) if lab not in keep)
    if not axes:
        return x, labels
    return lax.reduce_sum(x, axes), [lab for lab in labels if lab in keep]
