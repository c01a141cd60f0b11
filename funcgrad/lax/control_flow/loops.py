"""`while_loop`, `fori_loop` and `map`.

`while_p` takes `cond consts + body consts + init` and the params
  cond_jaxpr, body_jaxpr:     const-free programs (consts, carry) -> pred / carry,
  cond_nconsts, body_nconsts: how the operands split.
`while_loop` hoists loop-invariant equations out of both programs. Its trip count is
data-dependent, so it supports forward mode (jvp: a while loop over the body's jvp program,
which gives the primal outputs too: `ad.jvp_primal_rules`) and batching (a batched predicate
runs until every example is done, freezing finished examples with `select_n`), but not
reverse mode: its transpose raises an error pointing to
`scan` and `fori_loop` with static bounds. `fori_loop` with concrete bounds lowers to `scan`
(reverse-differentiable); with traced bounds, to `while_loop`.
"""

import operator

import numpy as np

from funcgrad import dtypes, errors
from funcgrad.core import (
    ClosedJaxpr,
    Jaxpr,
    Primitive,
    Tracer,
    Var,
    current_source,
    eval_jaxpr,
    get_aval,
    set_trace,
    vma_rules,
)
from funcgrad.interpreters import ad, batching
from funcgrad.interpreters import partial_eval as pe
from funcgrad.lax.control_flow.common import (
    as_array,
    as_operand,
    front_dims,
    hoist_invariants,
    leaf_paths,
    mapped,
    nonzero_mask,
    permute,
    same_type,
    split,
    tangent_operands,
    tangents_out,
    to_front,
    trace_tree_fun,
)
from funcgrad.lax.control_flow.scan import scan
from funcgrad.lax.elementwise import add, convert_element_type
from funcgrad.lax.logic import lt, select_n
from funcgrad.lax.parallel import loop_carry_vma
from funcgrad.lax.reductions import reduce_or
from funcgrad.lax.shape import broadcast_in_dim, reshape
from funcgrad.lax.slicing import concatenate, slice_in_dim
from funcgrad.tree_util import first_mismatch, tree_flatten, tree_unflatten

__all__ = ["fori_loop", "map", "while_loop", "while_p"]


def while_loop(cond_fun, body_fun, init_val):
    """`while cond_fun(val): val = body_fun(val)`, as one primitive.

    Supports jvp/jacfwd and vmap; reverse mode (grad, vjp) needs a known trip count: use
    `scan`, or `fori_loop` with Python-int bounds.

    Args:
        cond_fun: `cond_fun(val) -> scalar bool`.
        body_fun: `body_fun(val) -> val` with the structure, shapes and dtypes of `init_val`.
        init_val: a pytree of arrays.

    Returns:
        The final value.

    Raises:
        FuncgradTypeError: `cond_fun` not returning a boolean scalar, or `body_fun` changing
            the structure, a shape or a dtype of the value (both types are named).

    Example:
        >>> while_loop(lambda v: v < 10, lambda v: v * 2, 1)
        Array(16, dtype=int32)
    """
    for name, f in (("cond_fun", cond_fun), ("body_fun", body_fun)):
        if not callable(f):
            raise errors.op_error("while_loop", f"{name} must be callable, got "
                                  f"{type(f).__name__}")
    leaves, tree = tree_flatten(init_val)
    leaves = [as_operand(x) for x in leaves]
    for _ in range(2):  # a second trace after promoting weakly typed initial values
        in_tree = tree_flatten((tree_unflatten(tree, leaves),))[1]
        avals = [get_aval(x) for x in leaves]
        body, b_consts, _, out_tree = trace_tree_fun(body_fun, in_tree, avals, "while_loop")
        if out_tree != tree:
            raise errors.op_error(
                "while_loop", f"body_fun must return a value with the same pytree structure "
                f"as init_val, but init_val is {tree} and body_fun returns {out_tree}: "
                f"{first_mismatch(tree, out_tree)}")
        promoted = _promote(leaves, body.out_avals)
        if promoted is None:
            break
        leaves = promoted
    _check_same(tree, avals, body.out_avals)
    cond, c_consts, _, pred_tree = trace_tree_fun(cond_fun, in_tree, avals, "while_loop")
    _check_pred(pred_tree, cond.out_avals)
    cond, c_consts = hoist_invariants(cond, c_consts, len(c_consts))
    body, b_consts = hoist_invariants(body, b_consts, len(b_consts))
    outs = while_p.bind(*c_consts, *b_consts, *leaves, cond_jaxpr=cond, body_jaxpr=body,
                        cond_nconsts=len(c_consts), body_nconsts=len(b_consts))
    return tree_unflatten(tree, outs)


def _promote(leaves, out_avals):
    new, changed = list(leaves), False
    for i, (x, b) in enumerate(zip(leaves, out_avals)):
        a = get_aval(x)
        if a.weak_type and a.shape == b.shape and a.dtype != b.dtype:
            new[i] = convert_element_type(x, b.dtype, weak_type=b.weak_type)
            changed = True
    return new if changed else None


def _check_same(tree, in_avals, out_avals):
    bad = [f"    {p}: {a.str_short()} in init_val, {b.str_short()} returned by body_fun"
           for p, a, b in zip(leaf_paths(tree, "val"), in_avals, out_avals)
           if not same_type(a, b)]
    if bad:
        raise errors.op_error("while_loop", "body_fun must return a value with the same "
                              "shapes and dtypes as init_val, but:\n" + "\n".join(bad),
                              hint="cast or reshape inside body_fun, or start from an "
                                   "init_val of the final type")


def _check_pred(tree, avals):
    if tree.num_leaves != 1 or avals[0].shape != () or avals[0].dtype != dtypes.bool_:
        got = avals[0].str_short() if tree.num_leaves == 1 else f"a pytree {tree}"
        raise errors.op_error("while_loop", f"cond_fun must return a boolean scalar, but it "
                              f"returned {got}",
                              hint="reduce it with .all() / .any(), or compare to get a bool")


def fori_loop(lower, upper, body_fun, init_val, *, unroll=None):
    """`for i in range(lower, upper): val = body_fun(i, val)`.

    With concrete bounds (Python ints or concrete arrays) this is a `scan` of
    `upper - lower` steps, so it supports reverse mode, and `unroll` is `scan`'s (an int or
    a bool; the results do not depend on it); with traced bounds it is a `while_loop`
    (forward mode and vmap only), and an `unroll` other than None, False or 1 is an error,
    as in JAX.

    Example:
        >>> fori_loop(0, 5, lambda i, s: s + i, 0)
        Array(10, dtype=int32)
    """
    if not callable(body_fun):
        raise errors.op_error("fori_loop", f"body_fun must be callable, got "
                              f"{type(body_fun).__name__}")
    for name, b in (("lower", lower), ("upper", upper)):
        aval = get_aval(as_operand(b))
        if aval.shape != () or dtypes.kind(aval.dtype) not in "iu":
            raise errors.op_error("fori_loop", f"{name} must be a scalar integer, got {aval}")
    body_fun = _checked_body(body_fun)
    if not isinstance(lower, Tracer) and not isinstance(upper, Tracer):
        lo, hi = int(lower), int(upper)
        i0 = convert_element_type(as_operand(lo), np.int32)

        def step(carry, _):
            i, val = carry
            return (add(i, 1), body_fun(i, val)), None
        (_, val), _ = scan(step, (i0, init_val), None, length=max(hi - lo, 0),
                           unroll=1 if unroll is None else unroll)
        return val
    if unroll is not None and unroll is not False and unroll != 1:
        raise errors.op_error("fori_loop", f"can only use unroll={unroll!r} if the loop "
                              "bounds are statically known", cls=errors.FuncgradValueError,
                              hint="pass Python ints (or concrete arrays) as lower and upper")
    lo = convert_element_type(as_operand(lower), np.int32)
    hi = convert_element_type(as_operand(upper), np.int32)
    _, _, val = while_loop(lambda c: lt(c[0], c[1]),
                           lambda c: (add(c[0], 1), c[1], body_fun(c[0], c[2])),
                           (lo, hi, init_val))
    return val


def _checked_body(body_fun):
    """`body_fun` raising a fori_loop error (naming `val` paths) when it changes the value's
    structure, a shape or a (non-weak) dtype."""
    def body(i, val):
        out = body_fun(i, val)
        (in_l, in_t), (out_l, out_t) = tree_flatten(val), tree_flatten(out)
        if out_t != in_t:
            raise errors.op_error(
                "fori_loop", f"body_fun must return a value with the same pytree structure as "
                f"init_val, but init_val is {in_t} and body_fun returns {out_t}: "
                f"{first_mismatch(in_t, out_t)}")
        ins, outs = [get_aval(as_operand(x)) for x in in_l], [get_aval(as_operand(x))
                                                              for x in out_l]
        bad = [f"    {p}: {a.str_short()} in init_val, {b.str_short()} returned by body_fun"
               for p, a, b in zip(leaf_paths(in_t, "val"), ins, outs)
               if not same_type(a, b) and not (a.weak_type and a.shape == b.shape)]
        if bad:
            raise errors.op_error("fori_loop", "body_fun must return a value with the same "
                                  "shapes and dtypes as init_val, but:\n" + "\n".join(bad),
                                  hint="cast or reshape inside body_fun")
        return out
    return body


def map(f, xs, *, batch_size=None):
    """`stack([f(x) for x in xs])` over the leading axis of a pytree `xs`, as a `scan`.

    With `batch_size`, `f` runs vectorized (as under `vmap`) on `batch_size` elements per
    step of the scan, and once more on the remainder when the length is not a multiple of
    it; `batch_size=0` is one vectorized call on everything (as in JAX).

    Example:
        >>> map(lambda x: x * 2, fnp.arange(3.0))
        Array([0., 2., 4.], dtype=float32)
        >>> map(lambda x: x * 2, fnp.arange(5.0), batch_size=2)
        Array([0., 2., 4., 6., 8.], dtype=float32)
    """
    if not callable(f):
        raise errors.op_error("map", f"f must be callable, got {type(f).__name__}")
    leaves, in_tree = tree_flatten(xs)
    if batch_size is None or not leaves:
        _, ys = scan(lambda c, x: (c, f(x)), (), xs)
        return ys
    n = _leading_size(leaves)
    batch_size = operator.index(batch_size)
    if batch_size < 0:
        raise errors.op_error("map", f"batch_size must be >= 0, got {batch_size}",
                              cls=errors.FuncgradValueError)
    steps, rest = divmod(n, batch_size) if batch_size else (0, n)
    parts, trees = [], []

    def vectorized(x, size):
        ys, tree = _vectorized(f, x, in_tree, size)
        trees.append(tree)
        return ys
    if steps:
        head = [reshape(slice_in_dim(x, 0, steps * batch_size), (steps, batch_size)
                        + get_aval(x).shape[1:]) for x in leaves]
        _, ys = scan(lambda c, x: (c, vectorized(x, batch_size)), (), head)
        parts.append([reshape(y, (steps * batch_size,) + get_aval(y).shape[2:]) for y in ys])
    if rest:
        parts.append(vectorized([slice_in_dim(x, steps * batch_size, n) for x in leaves],
                                rest))
    ys = parts[0] if len(parts) == 1 else [concatenate(pair, 0) for pair in zip(*parts)]
    return tree_unflatten(trees[0], ys)


def _leading_size(leaves):
    avals = [get_aval(as_operand(x)) for x in leaves]
    sizes = {a.shape[0] if a.ndim else None for a in avals}
    if len(sizes) != 1 or None in sizes:
        raise errors.op_error("map", "every leaf of xs needs the same leading axis, got "
                              + ", ".join(a.str_short() for a in avals),
                              cls=errors.FuncgradValueError)
    return sizes.pop()


def _vectorized(f, leaves, in_tree, size):
    """(output leaves, output tree) of `f` vectorized over axis 0 of `leaves`, as `vmap`
    does it (lax cannot import vmap): trace one example, then `batching.batch_eval` in the
    current trace."""
    example = [get_aval(as_operand(x)) for x in leaves]
    example = [a.update(shape=a.shape[1:]) for a in example]
    flat_tree = tree_flatten(tuple(range(len(leaves))))[1]
    program, consts, _, out_tree = trace_tree_fun(lambda *x: f(tree_unflatten(in_tree, x)),
                                                  flat_tree, example, "map")
    dims = [batching.not_mapped] * len(consts) + [0] * len(leaves)
    with batching.batch_axis(None, size):
        outs, out_dims = batching.batch_eval(program.jaxpr, program.consts,
                                             list(consts) + list(leaves), dims)
    return [batching.bdim_at_front(o, d, size) for o, d in zip(outs, out_dims)], out_tree


# --- the primitive ------------------------------------------------------------------------------

def _while_abstract(*avals, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    c_consts, b_consts, carry = split(avals, cond_nconsts, body_nconsts)
    if (not _all_same(c_consts + carry, cond_jaxpr.in_avals)
            or not _all_same(b_consts + carry, body_jaxpr.in_avals)
            or not _all_same(carry, body_jaxpr.out_avals)
            or len(cond_jaxpr.out_avals) != 1 or cond_jaxpr.out_avals[0].shape != ()):
        raise errors.FuncgradInternalError(
            f"while: operands {list(avals)} do not match cond {cond_jaxpr.in_avals} and body "
            f"{body_jaxpr.in_avals} -> {body_jaxpr.out_avals}")
    return list(carry)


def _all_same(avals, want):
    return len(avals) == len(want) and all(same_type(a, b) for a, b in zip(avals, want))


def _while_impl(*args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    c_consts, b_consts, carry = split([as_operand(a) for a in args], cond_nconsts,
                                      body_nconsts)
    avals = [get_aval(c) for c in carry]
    with set_trace(None):
        while bool(eval_jaxpr(cond_jaxpr.jaxpr, [], *c_consts, *carry)[0]):
            outs = eval_jaxpr(body_jaxpr.jaxpr, [], *b_consts, *carry)
            carry = [as_array(o, a) for o, a in zip(outs, avals)]
    return carry


def _while_jvp(primals, outs, tangents, **params):
    return _while_jvp_primal(primals, tangents, **params)[1]


def _while_jvp_primal(primals, tangents, *, cond_jaxpr, body_jaxpr, cond_nconsts,
                      body_nconsts):
    ncc, nbc = cond_nconsts, body_nconsts
    c_consts, b_consts, carry = split(primals, ncc, nbc)
    _, t_bc, t_k = split(tangents, ncc, nbc)
    bc_nz, carry_nz = nonzero_mask(t_bc), nonzero_mask(t_k)
    for _ in range(len(carry) + 1):
        jvp, out_nz = ad.jvp_jaxpr(body_jaxpr, bc_nz + carry_nz, carry_nz)
        grown = [a or b for a, b in zip(carry_nz, out_nz)]
        if grown == carry_nz:
            break
        carry_nz = grown
    prog, jconsts = pe.closure_convert(jvp)
    nk, n_tc, n_tk = len(carry), sum(bc_nz), sum(carry_nz)
    j, bc = list(range(len(jconsts))), [len(jconsts) + i for i in range(nbc)]
    k = [len(jconsts) + nbc + i for i in range(nk)]
    t0 = len(jconsts) + nbc + nk
    tc, tk = list(range(t0, t0 + n_tc)), list(range(t0 + n_tc, t0 + n_tc + n_tk))
    body = permute(prog, j + bc + tc + k + tk)
    c = cond_jaxpr.jaxpr
    cond = ClosedJaxpr(Jaxpr([], list(c.invars) + [Var(a) for a, nz in
                                                   zip(body_jaxpr.out_avals, carry_nz) if nz],
                             c.outvars, c.eqns), [])
    res = while_p.bind(*c_consts, *jconsts, *b_consts, *tangent_operands(t_bc, bc_nz),
                       *carry, *tangent_operands(t_k, carry_nz), cond_jaxpr=cond,
                       body_jaxpr=body, cond_nconsts=ncc,
                       body_nconsts=len(jconsts) + nbc + n_tc)
    return res[:nk], tangents_out(res[nk:], carry_nz, [get_aval(o) for o in res[:nk]])


def _while_transpose(cts, *args, **params):
    raise errors.FuncgradTypeError(
        "reverse-mode differentiation (grad, vjp, jacrev) of while_loop is not supported: "
        "its number of iterations is only known at run time, so the values of each iteration "
        "cannot be stored for the backward pass.\n"
        f"{errors.where(current_source())}\n"
        "  hint: use lax.scan, or lax.fori_loop with Python-int (static) bounds, which lowers "
        "to scan; forward mode (jvp, jacfwd) of while_loop works.")


def _while_batch(args, dims, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    size = batching.batch_size(args, dims)
    cc_b, bc_b, carry_b = split(mapped(dims), cond_nconsts, body_nconsts)
    nk = len(carry_b)
    for _ in range(nk + 2):
        cond, pred_d = batching.batch_jaxpr(cond_jaxpr, front_dims(cc_b + carry_b), size)
        pred_b = mapped(pred_d)
        if pred_b[0]:
            carry_b = [True] * nk
        body, out_d = batching.batch_jaxpr(body_jaxpr, front_dims(bc_b + carry_b), size,
                                           carry_b)
        grown = [a or b for a, b in zip(carry_b, mapped(out_d))]
        if grown == carry_b:
            break
        carry_b = grown
    c_consts, b_consts, carry = split([to_front(x, d) for x, d in zip(args, dims)],
                                      cond_nconsts, body_nconsts)
    k_dims = split(dims, cond_nconsts, body_nconsts)[2]
    carry = [batching.bdim_at_front(x, d if d is None else 0, size) if b else x
             for x, d, b in zip(carry, k_dims, carry_b)]
    if pred_b[0]:
        return _while_batched_pred(c_consts, b_consts, carry, cc_b, bc_b, size, cond_jaxpr,
                                   body_jaxpr)
    cond, cc = pe.closure_convert(cond)
    body, bc = pe.closure_convert(body)
    outs = while_p.bind(*cc, *c_consts, *bc, *b_consts, *carry, cond_jaxpr=cond,
                        body_jaxpr=body, cond_nconsts=len(cc) + len(c_consts),
                        body_nconsts=len(bc) + len(b_consts))
    return outs, [0 if b else None for b in carry_b]


def _while_batched_pred(c_consts, b_consts, carry, cc_b, bc_b, size, cond_jaxpr, body_jaxpr):
    """Run until no example's predicate holds; finished examples keep their values."""
    nk, ncc = len(carry), len(c_consts)
    cdims = [0 if b else None for b in cc_b] + [0] * nk
    bdims = [0 if b else None for b in bc_b] + [0] * nk

    def pred(cc, k):
        (p,), (d,) = batching.batch_eval(cond_jaxpr.jaxpr, [], cc + k, cdims)
        return batching.bdim_at_front(p, d, size)

    def cond_fun(*xs):
        return [reduce_or(pred(list(xs[:ncc]), list(xs[ncc:])), (0,))]

    def body_fun(*xs):
        cc, bc, k = split(xs, ncc, len(b_consts))
        p = pred(cc, k)
        new, n_dims = batching.batch_eval(body_jaxpr.jaxpr, [], bc + k, bdims)
        out = []
        for old, v, d in zip(k, new, n_dims):
            v = batching.bdim_at_front(v, d, size)
            shape = get_aval(v).shape
            which = p if len(shape) == 1 else broadcast_in_dim(p, shape, (0,))
            out.append(select_n(which, old, v))
        return out
    c_avals, b_avals = [get_aval(x) for x in c_consts], [get_aval(x) for x in b_consts]
    k_avals = [get_aval(x) for x in carry]
    cond, cc = pe.closure_convert(cond_fun, c_avals + k_avals, "vmap")
    body, bc = pe.closure_convert(body_fun, c_avals + b_avals + k_avals, "vmap")
    outs = while_p.bind(*cc, *c_consts, *bc, *c_consts, *b_consts, *carry, cond_jaxpr=cond,
                        body_jaxpr=body, cond_nconsts=len(cc) + ncc,
                        body_nconsts=len(bc) + ncc + len(b_consts))
    return outs, [0] * nk


while_p = Primitive("while", multiple_results=True)
while_p.def_impl(_while_impl, raw=False)
while_p.def_abstract_eval(_while_abstract)
ad.jvp_rules[while_p] = _while_jvp
ad.jvp_primal_rules[while_p] = _while_jvp_primal
ad.transpose_rules[while_p] = _while_transpose
batching.batch_rules[while_p] = _while_batch
vma_rules[while_p] = lambda builder, args, avals, *, body_jaxpr, body_nconsts, **_: (
    None, loop_carry_vma("while", body_jaxpr, body_nconsts, None, avals))
