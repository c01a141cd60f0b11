"""`cond` and `switch`: one `cond` primitive that runs one of several branch programs.

`cond_p` takes an int32 scalar index (clamped into range) and the branches' common operands;
its param `branches` is a tuple of const-free programs, one per branch, that all take the
values every branch closed over first, then the operands. Eagerly only the branch taken
runs. jvp binds a cond of the branches' jvp programs; transpose binds a cond of the
transposed branches (each runs its known part, then transposes its linear part); partial
evaluation splits it into a known cond emitting residuals and an unknown cond; vmap with a
batched index evaluates every branch and selects with `select_n`.
"""

import numpy as np

from funcgrad import dtypes, errors
from funcgrad.core import (
    ClosedJaxpr,
    Eqn,
    Jaxpr,
    Primitive,
    Var,
    eval_jaxpr,
    get_aval,
)
from funcgrad.interpreters import ad, batching
from funcgrad.interpreters import partial_eval as pe
from funcgrad.lax.control_flow.common import (
    as_operand,
    eval_eagerly,
    front_dims,
    join_consts,
    leaf_paths,
    mapped,
    nonzero_mask,
    same_type,
    tangent_operands,
    tangents_out,
    to_front,
    trace_tree_fun,
    zeros,
)
from funcgrad.lax.elementwise import convert_element_type
from funcgrad.lax.logic import clamp, ne, select_n
from funcgrad.lax.shape import broadcast_in_dim
from funcgrad.tree_util import first_mismatch, tree_flatten, tree_unflatten

__all__ = ["cond", "cond_p", "switch"]


_NO_OPERAND = object()  # `operand=` not given


def cond(pred, true_fun, false_fun, *operands, operand=_NO_OPERAND):
    """`true_fun(*operands)` if `pred` else `false_fun(*operands)`, as one primitive.

    Both branches are traced; they must return the same pytree structure, shapes and dtypes.
    Eagerly only the branch taken runs; under vmap with a batched `pred` both run and the
    results are selected per example.

    Args:
        pred: a scalar boolean (an integer is compared with 0).
        true_fun, false_fun: functions of `*operands` returning pytrees of arrays.
        *operands: pytrees of arrays passed to the branch taken.
        operand: JAX's older spelling of one operand (then no positional ones).

    Returns:
        The output of the branch taken.

    Raises:
        FuncgradTypeError: a non-scalar or non-boolean `pred`, or branches whose outputs
            differ in structure, shape or dtype (both are shown).

    Example:
        >>> x = fnp.asarray(-2.0)
        >>> cond(x > 0, lambda x: x, lambda x: -x, x)
        Array(2., dtype=float32)
    """
    _check_callables("cond", {"true_fun": true_fun, "false_fun": false_fun})
    operands = _operands("cond", operands, operand)
    p = as_operand(pred)
    aval = get_aval(p)
    if aval.shape != () or dtypes.kind(aval.dtype) not in "biu":
        raise errors.op_error("cond", f"pred must be a scalar boolean, got {aval}",
                              hint="reduce it to a scalar (e.g. .any() / .all()), or use "
                                   "fnp.where for an elementwise choice")
    if dtypes.kind(aval.dtype) != "b":
        p = ne(p, 0)
    index = convert_element_type(p, np.int32)
    return _cond(index, (false_fun, true_fun), operands, "cond", ("false_fun", "true_fun"))


def switch(index, branches, *operands, operand=_NO_OPERAND):
    """`branches[index](*operands)` with `index` clamped into `[0, len(branches) - 1]`.

    Args:
        index: a scalar integer.
        branches: a sequence of functions of `*operands`, all returning the same pytree
            structure, shapes and dtypes.
        *operands: pytrees of arrays passed to the branch taken.
        operand: JAX's older spelling of one operand (then no positional ones).

    Returns:
        The output of the branch taken.

    Example:
        >>> switch(5, [lambda x: x, lambda x: 2 * x, lambda x: 3 * x], 1.0)  # clamped to 2
        Array(3., dtype=float32)
    """
    branches = tuple(branches)
    if not branches:
        raise errors.op_error("switch", "needs at least one branch", errors.FuncgradValueError)
    _check_callables("switch", {f"branches[{i}]": b for i, b in enumerate(branches)})
    operands = _operands("switch", operands, operand)
    idx = as_operand(index)
    aval = get_aval(idx)
    if aval.shape != () or dtypes.kind(aval.dtype) not in "iu":
        raise errors.op_error("switch", f"index must be a scalar integer, got {aval}")
    if len(branches) == 1:
        return branches[0](*operands)
    if aval.dtype != np.int32:
        idx = convert_element_type(idx, np.int32)
    idx = clamp(0, idx, len(branches) - 1)
    names = tuple(f"branches[{i}]" for i in range(len(branches)))
    return _cond(idx, branches, operands, "switch", names)


def _operands(op, operands, operand):
    if operand is _NO_OPERAND:
        return operands
    if operands:
        raise errors.op_error(op, "if the 'operand' keyword is passed then no positional "
                              f"operands can be passed, got {len(operands)}")
    return (operand,)


def _check_callables(op, funs):
    for name, f in funs.items():
        if not callable(f):
            raise errors.op_error(op, f"{name} must be callable, got {type(f).__name__}")


def _cond(index, funs, operands, op, names):
    leaves, in_tree = tree_flatten(operands)
    leaves = [as_operand(x) for x in leaves]
    avals = [get_aval(x) for x in leaves]
    traced = [trace_tree_fun(f, in_tree, avals, op) for f in funs]
    casts = _weak_casts(op, names, traced, len(funs) - 1 if op == "cond" else 0)
    if casts is not None:
        traced = [trace_tree_fun(_casting(f, casts), in_tree, avals, op) for f in funs]
    programs, consts = join_consts([(t[0], t[1]) for t in traced])
    outs = cond_p.bind(index, *consts, *leaves, branches=tuple(programs))
    return tree_unflatten(traced[0][3], outs)


def _weak_casts(op, names, traced, ref):
    """Check the branches' outputs agree (against branch `ref`); the (dtype, weak) to cast
    each output to where only weakly typed Python scalars differ, or None if none does."""
    tree0 = traced[ref][3]
    others = [(n, t) for k, (n, t) in enumerate(zip(names, traced)) if k != ref]
    for name, t in others:
        if t[3] != tree0:
            raise errors.op_error(
                op, f"{names[ref]} and {name} must return the same pytree structure, but "
                f"{names[ref]} returns {tree0} and {name} returns {t[3]}: "
                f"{first_mismatch(tree0, t[3])}",
                hint="return the same containers from every branch")
    targets = [_common_type(leaf) for leaf in zip(*[t[0].out_avals for t in traced])]
    bad, paths = [], leaf_paths(tree0, "output")
    for name, t in others:
        for k, (a, b) in enumerate(zip(traced[ref][0].out_avals, t[0].out_avals)):
            if not same_type(a, b) and targets[k] is None:
                bad.append(f"    {paths[k]}: {a.str_short()} in {names[ref]}, "
                           f"{b.str_short()} in {name}")
    if bad:
        raise errors.op_error(op, "the branches must return the same shapes and dtypes, but:\n"
                              + "\n".join(bad), hint="cast or reshape the outputs so that "
                              "every branch returns identical types")
    return tuple(targets) if any(t is not None for t in targets) else None


def _common_type(avals):
    """(dtype, weak) for outputs that differ only in weakly typed dtypes, else None."""
    if all(same_type(a, avals[0]) for a in avals) or \
            any(a.shape != avals[0].shape for a in avals):
        return None
    dt, weak = dtypes.promote_types(*[(a.dtype, a.weak_type) for a in avals])
    return (dt, weak) if all(a.weak_type or a.dtype == dt for a in avals) else None


def _casting(f, targets):
    def cast(*args):
        leaves, tree = tree_flatten(f(*args))
        return tree_unflatten(tree, [
            x if t is None or get_aval(as_operand(x)).dtype == t[0]
            else convert_element_type(as_operand(x), t[0], weak_type=t[1])
            for x, t in zip(leaves, targets)])
    return cast


# --- the primitive ------------------------------------------------------------------------------

def _cond_abstract(index, *avals, branches):
    if index.shape != () or index.dtype != dtypes.int32:
        raise errors.FuncgradInternalError(f"cond: index must be an int32 scalar, got {index}")
    for b in branches:
        if len(b.in_avals) != len(avals) or not all(map(same_type, b.in_avals, avals)):
            raise errors.FuncgradInternalError(
                f"cond: operands {list(avals)} do not match a branch taking {b.in_avals}")
    outs = zip(*[b.out_avals for b in branches])
    return [o[0].update(weak_type=all(a.weak_type for a in o)) for o in outs]


def _cond_impl(index, *args, branches):
    i = min(max(int(index), 0), len(branches) - 1)
    return eval_eagerly(branches[i], args)


def _cond_jvp(primals, outs, tangents, *, branches):
    index, args = primals[0], primals[1:]
    nz = nonzero_mask(tangents[1:])
    n_out = len(branches[0].out_avals)
    jvps = [ad.jvp_jaxpr(b, nz, False) for b in branches]
    out_nz = [any(m) for m in zip(*[j[1] for j in jvps])]
    jvps = [j if j[1] == out_nz else ad.jvp_jaxpr(b, nz, out_nz) for j, b in zip(jvps, branches)]
    programs, consts = join_consts([pe.closure_convert(j) for j, _ in jvps])
    res = cond_p.bind(index, *consts, *args, *tangent_operands(tangents[1:], nz),
                      branches=tuple(programs))
    return tangents_out(res[n_out:], out_nz, branches[0].out_avals)


def _cond_transpose(cts, index, *args, branches):
    if ad.is_undefined(index):
        raise errors.FuncgradInternalError("cond: transposing with respect to the index")
    undef = [ad.is_undefined(a) for a in args]
    in_avals, out_avals = branches[0].in_avals, branches[0].out_avals
    ct_nz = nonzero_mask(cts)
    known_avals = [a for a, u in zip(in_avals, undef) if not u]
    ct_avals = [a for a, nz in zip(out_avals, ct_nz) if nz]

    def transposed(branch):
        def fun(*xs):
            it = iter(xs[:len(known_avals)])
            targs = [ad.UndefinedPrimal(a) if u else next(it) for a, u in zip(in_avals, undef)]
            got = ad.transpose_mixed(branch, targs, tangents_out(xs[len(known_avals):], ct_nz,
                                                                 out_avals))
            return [ad.instantiate(g) for g in got]
        return pe.closure_convert(fun, known_avals + ct_avals, "transpose")
    programs, consts = join_consts([transposed(b) for b in branches])
    known = [a for a, u in zip(args, undef) if not u]
    res = iter(cond_p.bind(index, *consts, *known, *[c for c, nz in zip(cts, ct_nz) if nz],
                           branches=tuple(programs)))
    return [None] + [next(res) if u else None for u in undef]


def _cond_batch(args, dims, *, branches):
    (index, *ops), (idx_dim, *op_dims) = args, dims
    size = batching.batch_size(args, dims)
    if idx_dim is not batching.not_mapped:
        return _cond_as_select(to_front(index, idx_dim), ops, op_dims, branches, size)
    in_dims = front_dims(mapped(op_dims))
    ops = [to_front(x, d) for x, d in zip(ops, op_dims)]
    batched = [batching.batch_jaxpr(b, in_dims, size) for b in branches]
    out_b = [any(m) for m in zip(*[mapped(d) for _, d in batched])]
    batched = [b if mapped(b[1]) == out_b else batching.batch_jaxpr(br, in_dims, size, out_b)
               for b, br in zip(batched, branches)]
    programs, consts = join_consts([pe.closure_convert(b) for b, _ in batched])
    outs = cond_p.bind(index, *consts, *ops, branches=tuple(programs))
    return outs, front_dims(out_b)


def _cond_as_select(index, ops, op_dims, branches, size):
    """A batched index: every branch runs on the whole batch; `select_n` picks per example."""
    per_branch = []
    for b in branches:
        outs, o_dims = batching.batch_eval(b.jaxpr, [], list(ops), list(op_dims))
        per_branch.append([batching.bdim_at_front(o, d, size) for o, d in zip(outs, o_dims)])
    res = []
    for cases in zip(*per_branch):
        shape = get_aval(cases[0]).shape
        which = index if len(shape) == 1 else broadcast_in_dim(index, shape, (0,))
        res.append(select_n(which, *cases))
    return res, [0] * len(res)


def _cond_partial_eval(eqn, in_unknowns):
    branches = eqn.params["branches"]
    n_out = len(eqn.outvars)
    if in_unknowns[0]:
        return None, eqn, [True] * n_out
    unk = list(in_unknowns[1:])
    out_u = [any(m) for m in zip(*[pe.partial_eval_jaxpr(b, unk, False)[2] for b in branches])]
    splits = [_BranchSplit(b, unk, out_u) for b in branches]
    res_avals = [s.computed_avals for s in splits]
    args, index = eqn.invars[1:], eqn.invars[0]
    known_args = [x for x, u in zip(args, unk) if not u]
    forwarded = sorted({i for s in splits for i in s.forwarded})
    res_vars = [Var(a) for avals in res_avals for a in avals]
    known_outs = [v for v, u in zip(eqn.outvars, out_u) if not u] + res_vars
    known_eqn = None
    if known_outs:
        programs = tuple(s.known_branch(k, res_avals) for k, s in enumerate(splits))
        known_eqn = Eqn(cond_p, [index] + known_args, known_outs, dict(branches=programs),
                        eqn.source)
    unknown_outs = [v for v, u in zip(eqn.outvars, out_u) if u]
    unknown_eqn = None
    if unknown_outs:
        programs = tuple(s.unknown_branch(k, res_avals, forwarded) for k, s in enumerate(splits))
        unknown_eqn = Eqn(cond_p, [index] + [known_args[i] for i in forwarded] + res_vars
                          + [x for x, u in zip(args, unk) if u], unknown_outs,
                          dict(branches=programs), eqn.source)
    return known_eqn, unknown_eqn, out_u


class _BranchSplit:
    """One branch split by partial evaluation. Residuals that are known inputs of the branch
    are `forwarded` (by index among the known inputs): the unknown cond reads those operands
    itself, so the known cond outputs only the residuals it computes (`computed_avals`); a
    cond whose residuals are all operands needs no known cond (a scan then stacks nothing)."""

    def __init__(self, branch, unk, out_u):
        self.known, self.unknown, _, num_res = pe.partial_eval_jaxpr(branch, unk, out_u)
        kj = self.known.jaxpr
        self.n_known = len(kj.outvars) - num_res
        self.res = kj.outvars[self.n_known:]
        position = {v: i for i, v in enumerate(kj.invars)}
        self.forwarded = [position[r] for r in self.res if r in position]
        self.computed = [i for i, r in enumerate(self.res) if r not in position]
        self.computed_avals = [self.res[i].aval for i in self.computed]

    def known_branch(self, k, res_avals):
        known, n_known, computed = self.known, self.n_known, self.computed

        def fun(*ins):
            outs = eval_jaxpr(known.jaxpr, known.consts, *ins)
            res = []
            for j, avals in enumerate(res_avals):
                res += ([outs[n_known + i] for i in computed] if j == k
                        else [zeros(a) for a in avals])
            return list(outs[:n_known]) + res
        program, consts = pe.closure_convert(fun, known.in_avals, "cond")
        if consts:
            raise errors.FuncgradInternalError("cond: partial evaluation captured constants")
        return program

    def unknown_branch(self, k, res_avals, forwarded):
        j, kj = self.unknown.jaxpr, self.known.jaxpr
        res_in = dict(zip(self.res, j.invars[:len(self.res)]))  # residual -> unknown's input
        invars = [res_in[kj.invars[i]] if kj.invars[i] in res_in else Var(kj.invars[i].aval)
                  for i in forwarded]
        for i, avals in enumerate(res_avals):
            invars += ([res_in[self.res[c]] for c in self.computed] if i == k
                       else [Var(a) for a in avals])
        return ClosedJaxpr(Jaxpr([], invars + list(j.invars[len(self.res):]), j.outvars,
                                 j.eqns), [])


cond_p = Primitive("cond", multiple_results=True)
cond_p.def_impl(_cond_impl, raw=False)
cond_p.def_abstract_eval(_cond_abstract)
ad.jvp_rules[cond_p] = _cond_jvp
ad.transpose_rules[cond_p] = _cond_transpose
batching.batch_rules[cond_p] = _cond_batch
pe.partial_eval_rules[cond_p] = _cond_partial_eval
