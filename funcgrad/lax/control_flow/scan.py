"""`scan`: a loop with a carry and stacked per-iteration outputs, as one primitive.

`scan_p` takes `consts + init carry + xs` and the params
  jaxpr:      a const-free body program (consts, carry, x slices) -> (carry, y slices),
  num_consts, num_carry: how the operands split,
  length:     the trip count (the leading axis of every xs and ys),
  reverse:    iterate from the last slice to the first,
  unroll:     accepted as in JAX; results do not depend on it.
Every bind first hoists the body's loop-invariant equations (those reading only consts) out
of the loop. jvp binds a scan of the body's jvp program (carry tangents found by a
fixpoint), which also gives the primal outputs (`ad.jvp_primal_rules`). Partial evaluation
splits a scan into a known scan that also emits the residuals each iteration needs (stacked
along the trip axis; loop-invariant ones are passed as consts) and an unknown scan reading
them. Transpose runs that known scan forward, then a scan of the transposed linear body in
the opposite direction, accumulating the consts' cotangents in its carry. Under
grad/vjp/linearize the forward loop runs once (`_OnePass`): bound in linearize's
define-by-run trace, a scan runs the known half of its jvp, which gives its value and its
residuals together, and its jvp rule binds only the linear half, whose transpose then has
nothing to recompute.
"""

import operator

import numpy as np

from funcgrad import errors
from funcgrad.core import (
    Array,
    ArrayBase,
    ClosedJaxpr,
    Eqn,
    Jaxpr,
    Primitive,
    Tracer,
    Var,
    current_trace,
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
    batched_aval,
    dce_outputs,
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
)
from funcgrad.lax.elementwise import convert_element_type
from funcgrad.lax.parallel import loop_carry_vma
from funcgrad.lax.shape import reshape
from funcgrad.tree_util import (
    first_mismatch,
    keystr,
    tree_flatten,
    tree_flatten_with_path,
    tree_unflatten,
)

__all__ = ["scan", "scan_p"]


def scan(f, init, xs=None, length=None, reverse=False, unroll=1):
    """Loop `f` over the leading axis of `xs`, threading a carry, as in `jax.lax.scan`.

    Semantics (one primitive, compiled as a real loop under jit):

        carry = init; ys = []
        for x in xs:                  # reversed(xs) with reverse=True
            carry, y = f(carry, x)
            ys.append(y)
        return carry, stack(ys)

    Args:
        f: `f(carry, x) -> (carry, y)`; pytrees everywhere. The carry keeps its structure,
            shapes and dtypes.
        init: the initial carry (a pytree of arrays).
        xs: a pytree of arrays sliced along axis 0, or None (then `length` is required and
            `x` is None).
        length: the number of iterations (checked against the xs when both are given).
        reverse: iterate from the last slice to the first (ys keep their positions).
        unroll: accepted for JAX compatibility; results do not depend on it.

    Returns:
        `(final carry, ys)` with the ys stacked along a new leading axis.

    Raises:
        FuncgradTypeError: a body returning a carry of another structure, shape or dtype than
            `init` (naming the carry path and both types), or not returning a pair.
        FuncgradValueError: xs of different lengths, or no xs and no `length`.

    Example:
        >>> scan(lambda c, x: (c + x, c), 0.0, fnp.arange(4.0))
        (Array(6., dtype=float32), Array([0., 0., 1., 3.], dtype=float32))
    """
    if not callable(f):
        raise errors.op_error("scan", f"f must be callable, got {type(f).__name__}")
    xs_leaves, xs_tree = tree_flatten(xs)
    xs_leaves = [as_operand(x) for x in xs_leaves]
    length = _scan_length(xs, xs_leaves, length)
    init_leaves, init_tree = tree_flatten(init)
    init_leaves = [as_operand(x) for x in init_leaves]
    x_avals = [get_aval(x).update(shape=get_aval(x).shape[1:]) for x in xs_leaves]
    for _ in range(2):  # a second trace after promoting weakly typed initial values
        body, consts, y_tree = _trace_body(f, init_tree, init_leaves, xs_tree, x_avals)
        promoted = _promote_init(init_leaves, body.out_avals[:len(init_leaves)])
        if promoted is None:
            break
        init_leaves = promoted
    _check_carry(init_tree, [get_aval(x) for x in init_leaves], body.out_avals)
    outs = _bind(consts, init_leaves, xs_leaves, body, length=length, reverse=bool(reverse),
                 unroll=_unroll(unroll, length))
    nk = len(init_leaves)
    return tree_unflatten(init_tree, outs[:nk]), tree_unflatten(y_tree, outs[nk:])


def _unroll(unroll, length):
    if isinstance(unroll, bool):
        return max(length, 1) if unroll else 1
    u = operator.index(unroll)
    if u < 1:
        raise errors.op_error("scan", f"unroll must be a positive integer, got {unroll}",
                              errors.FuncgradValueError)
    return u


def _scan_length(xs, leaves, length):
    sizes = []
    for (path, _), x in zip(tree_flatten_with_path(xs)[0], leaves):
        aval = get_aval(x)
        if aval.ndim == 0:
            raise errors.op_error("scan", f"every xs leaf needs a leading axis to scan over, "
                                  f"but xs{keystr(path)} is {aval}",
                                  cls=errors.FuncgradValueError)
        sizes.append((f"xs{keystr(path)}", aval))
    if length is not None:
        try:
            length = operator.index(length)
        except TypeError:
            raise errors.op_error("scan", f"length must be an int, got "
                                  f"{errors.short_repr(length)}") from None
        if not 0 <= length < 2**63:
            raise errors.op_error("scan", f"length must be in [0, 2**63), got {length}",
                                  cls=errors.FuncgradValueError)
    if not sizes and length is None:
        raise errors.op_error("scan", "with xs=None (or no xs leaves) the number of "
                              "iterations must be given as length=...",
                              cls=errors.FuncgradValueError)
    distinct = {a.shape[0] for _, a in sizes} | ({length} if length is not None else set())
    if len(distinct) > 1:
        lines = "\n".join(f"    {p}: {a.str_short()} (length {a.shape[0]})" for p, a in sizes)
        given = f" and length={length}" if length is not None else ""
        raise errors.op_error("scan", f"all xs leaves must have the same leading axis "
                              f"size{given}, got:\n{lines}", cls=errors.FuncgradValueError)
    return length if length is not None else sizes[0][1].shape[0]


def _trace_body(f, init_tree, init_leaves, xs_tree, x_avals):
    nk, store = len(init_leaves), {}

    def flat(*leaves):
        out = f(tree_unflatten(init_tree, list(leaves[:nk])),
                tree_unflatten(xs_tree, list(leaves[nk:])))
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            got = (f"a single array {get_aval(out).str_short()}" if isinstance(out, ArrayBase)
                   else type(out).__name__)
            raise errors.op_error("scan", f"the body function must return a pair (carry, y), "
                                  f"got {got}", hint="return (new_carry, None) when there is "
                                  "nothing to stack")
        c_leaves, c_tree = tree_flatten(out[0])
        if c_tree != init_tree:
            raise errors.op_error(
                "scan", f"the body function must return a carry with the same pytree "
                f"structure as init, but init is {init_tree} and the returned carry is "
                f"{c_tree}: {first_mismatch(init_tree, c_tree)}")
        y_leaves, store["y_tree"] = tree_flatten(out[1])
        return [as_operand(v) for v in c_leaves + y_leaves]
    avals = [get_aval(x) for x in init_leaves] + list(x_avals)
    body, consts = pe.closure_convert(flat, avals, "scan")
    return body, consts, store["y_tree"]


def _promote_init(init_leaves, out_avals):
    """Initial values that are weakly typed Python scalars take the body's carry dtype."""
    new, changed = list(init_leaves), False
    for i, (x, b) in enumerate(zip(init_leaves, out_avals)):
        a = get_aval(x)
        if a.weak_type and a.shape == b.shape and a.dtype != b.dtype:
            new[i] = convert_element_type(x, b.dtype, weak_type=b.weak_type)
            changed = True
    return new if changed else None


def _check_carry(init_tree, in_avals, out_avals):
    paths = leaf_paths(init_tree, "carry")
    bad = [f"    {p}: {a.str_short()} in init, {b.str_short()} returned by the body"
           for p, a, b in zip(paths, in_avals, out_avals) if not same_type(a, b)]
    if bad:
        raise errors.op_error(
            "scan", "the body function must return a carry with the same shapes and dtypes "
            "as init, but:\n" + "\n".join(bad),
            hint="the carry's type is fixed for the whole loop; cast or reshape inside the "
                 "body (e.g. x.astype(init.dtype)), or start from an init of the final type")


def _bind(consts, carry, xs, body, **params):
    """Bind `scan_p` after hoisting the body's loop-invariant equations out of the loop. In
    linearize's define-by-run trace the loop runs once for its value and its residuals."""
    body, consts = hoist_invariants(body, consts, len(consts))
    args = [*consts, *carry, *xs]
    params = dict(params, jaxpr=body, num_consts=len(consts), num_carry=len(carry))
    trace = current_trace()
    if ad.linearizing(trace):
        outs = _OnePass.run(trace, args, params)
        if outs is not None:
            return outs
    return scan_p.bind(*args, **params)


# --- the primitive ------------------------------------------------------------------------------

def _scan_abstract(*avals, jaxpr, num_consts, num_carry, length, reverse, unroll):
    consts, carry, xs = split(avals, num_consts, num_carry)
    want = consts + carry + [x.update(shape=x.shape[1:]) for x in xs]
    if (len(want) != len(jaxpr.in_avals) or not all(map(same_type, want, jaxpr.in_avals))
            or any(x.shape[:1] != (length,) for x in xs)
            or not all(map(same_type, carry, jaxpr.out_avals[:num_carry]))):
        raise errors.FuncgradInternalError(
            f"scan: operands {list(avals)} (length {length}) do not match the body "
            f"{jaxpr.in_avals} -> {jaxpr.out_avals}")
    return list(carry) + [batched_aval(a, length) for a in jaxpr.out_avals[num_carry:]]


def _scan_impl(*args, jaxpr, num_consts, num_carry, length, reverse, unroll):
    consts, carry, xs = split([as_operand(a) for a in args], num_consts, num_carry)
    carry_avals = [get_aval(c) for c in carry]
    y_avals = jaxpr.out_avals[num_carry:]
    ys = [np.empty((length,) + a.shape, a.dtype) for a in y_avals]
    xs = [(x._value, x.weak_type) for x in xs]
    with set_trace(None):
        for i in range(length - 1, -1, -1) if reverse else range(length):
            slices = [Array(v[i, ...], w) for v, w in xs]
            outs = eval_jaxpr(jaxpr.jaxpr, [], *consts, *carry, *slices)
            carry = [as_array(o, a) for o, a in zip(outs[:num_carry], carry_avals)]
            for buf, y in zip(ys, outs[num_carry:]):
                buf[i] = getattr(y, "_value", y)
    return carry + [Array(y, a.weak_type) for y, a in zip(ys, y_avals)]


def _jvp_body(jaxpr, nc, nk, nonzeros):
    """The body of the jvp scan for operand tangents `nonzeros`: (jvp consts, consts, const
    tangents; carry, carry tangents; xs, xs tangents) -> (carry, carry tangents, ys, ys
    tangents). Returns it, its consts, the mask with carry tangents grown to a fixpoint and
    the ys tangent mask."""
    ny = len(jaxpr.out_avals) - nk
    const_nz, carry_nz, xs_nz = split(nonzeros, nc, nk)
    for _ in range(nk + 1):
        jvp, out_nz = ad.jvp_jaxpr(jaxpr, const_nz + carry_nz + xs_nz, carry_nz + [False] * ny)
        grown = [a or b for a, b in zip(carry_nz, out_nz[:nk])]
        if grown == carry_nz:
            break
        carry_nz = grown
    prog, jconsts = pe.closure_convert(jvp)
    ys_nz = out_nz[nk:]
    sizes = [len(jconsts), nc, nk, len(xs_nz), sum(const_nz), sum(carry_nz), sum(xs_nz)]
    j, pc, pk, px, tc, tk, tx = _ranges(sizes)
    p_carry, p_ys, t_carry, t_ys = _ranges([nk, ny, sum(carry_nz), sum(ys_nz)])
    body = permute(prog, j + pc + tc + pk + tk + px + tx, p_carry + t_carry + p_ys + t_ys)
    return body, jconsts, const_nz + carry_nz + xs_nz, ys_nz


def _jvp_operands(jconsts, primals, tangents, nz, nc, nk):
    (c, k, x), (t_c, t_k, t_x), (m_c, m_k, m_x) = (split(v, nc, nk) for v in
                                                   (primals, tangents, nz))
    return (jconsts + c + tangent_operands(t_c, m_c), k + tangent_operands(t_k, m_k),
            x + tangent_operands(t_x, m_x))


def _scan_jvp(primals, outs, tangents, *, jaxpr, num_consts, num_carry, length, reverse,
              unroll):
    one_pass = ad.take_residuals(outs[0]) if outs else None
    if one_pass is not None and one_pass.covers(nonzero_mask(tangents)):
        return one_pass.tangents(tangents, [get_aval(o) for o in outs])
    return _scan_jvp_primal(primals, tangents, jaxpr=jaxpr, num_consts=num_consts,
                            num_carry=num_carry, length=length, reverse=reverse,
                            unroll=unroll)[1]


def _scan_jvp_primal(primals, tangents, *, jaxpr, num_consts, num_carry, length, reverse,
                     unroll):
    nc, nk = num_consts, num_carry
    body, jconsts, nz, ys_nz = _jvp_body(jaxpr, nc, nk, nonzero_mask(tangents))
    res = _bind(*_jvp_operands(jconsts, primals, tangents, nz, nc, nk), body, length=length,
                reverse=reverse, unroll=unroll)
    carry_nz = split(nz, nc, nk)[1]
    carry, t_carry, ys, t_ys = split(res, nk, sum(carry_nz), len(ys_nz))
    avals = [get_aval(o) for o in carry + ys]
    return carry + ys, (tangents_out(t_carry, carry_nz, avals[:nk])
                        + tangents_out(t_ys, ys_nz, avals[nk:]))


class _OnePass:
    """A scan under linearize, run once: the known half of its jvp (split by `_Split`) runs
    now and gives the primal outputs and the residuals together; `tangents` later binds the
    linear half, a scan of the residuals and the tangents (as JAX's `_scan_partial_eval`)."""

    @classmethod
    def run(cls, b, args, params):
        """The scan's outputs in the define-by-run trace `b`, or None (then bind it plainly)."""
        if not params["jaxpr"].out_avals:
            return None
        mine = [isinstance(a, Tracer) and a._trace is b for a in args]
        vals = [a.val if m else a for a, m in zip(args, mine)]
        nz = [m and ad.differentiable(get_aval(a)) for a, m in zip(args, mine)]
        if not any(nz) or any(v is None for v in vals):
            return None
        with set_trace(b.parent):  # one level up: hoisting and the known half run there
            one = cls(params, nz, vals)
            primal_outs = one.forward() if one.split is not None else None
        if primal_outs is None:
            return None
        outs = ad.record_known(b, scan_p, args, params, primal_outs)
        ad.keep_residuals(b, primal_outs[0], one)
        return outs

    def __init__(self, params, nz, vals):
        p, self.vals = params, vals
        nc, nk = self.nc, self.nk = p["num_consts"], p["num_carry"]
        self.loop = dict(length=p["length"], reverse=p["reverse"], unroll=p["unroll"])
        body, jconsts, self.nz, self.ys_nz = _jvp_body(p["jaxpr"], nc, nk, nz)
        self.ny = len(self.ys_nz)
        # Invariants of the known consts leave the loop first, so residuals computed from
        # them alone are passed once (as consts), not stacked per iteration.
        body, self.kconsts = hoist_invariants(body, jconsts + vals[:nc], len(jconsts) + nc)
        m_c, m_k, m_x = split(self.nz, nc, nk)
        n_k, n_x = nk, len(vals) - nc - nk
        unknowns = ([False] * len(self.kconsts) + [True] * sum(m_c) + [False] * n_k
                    + [True] * sum(m_k) + [False] * n_x + [True] * sum(m_x))
        s = _Split(body, len(self.kconsts) + sum(m_c), n_k + sum(m_k), unknowns)
        primal_known = not any(s.carry_u[:nk]) and not any(s.ys_u[:self.ny])
        self.split = s if primal_known else None

    def forward(self):
        """Bind the known half: the scan's primal outputs (its residuals are kept)."""
        s, nk, ny = self.split, self.nk, self.ny
        _, k, x = split(self.vals, self.nc, nk)
        outs = _bind(self.kconsts, k, x, s.known, **self.loop)
        carry, ys, stacked = split(outs, s.n_known_carry, s.n_known_ys)
        self.residuals = s.residuals(self.kconsts, stacked, x)
        self.known_t_ys = ys[ny:]
        return carry[:nk] + ys[:ny]

    def covers(self, nonzeros):
        return all(n <= m for n, m in zip(nonzeros, self.nz))

    def tangents(self, tangents, out_avals):
        """The scan's tangent outputs: the linear half bound on the residuals and tangents."""
        s, nk, ny = self.split, self.nk, self.ny
        (t_c, t_k, t_x), (m_c, m_k, m_x) = split(tangents, self.nc, nk), split(self.nz,
                                                                              self.nc, nk)
        u_c, u_k, u_x = (tangent_operands(t, m) for t, m in ((t_c, m_c), (t_k, m_k),
                                                             (t_x, m_x)))
        const_res, xs_res = self.residuals
        outs = _bind(const_res + u_c, u_k, xs_res + u_x, s.unknown, **self.loop)
        known, unknown = iter(self.known_t_ys), iter(outs[len(u_k):])
        t_ys = [next(unknown) if u else next(known) for u in s.ys_u[ny:]]
        return (tangents_out(outs[:len(u_k)], m_k, out_avals[:nk])
                + tangents_out(t_ys, self.ys_nz, out_avals[nk:]))


def _ranges(sizes):
    out, i = [], 0
    for n in sizes:
        out.append(list(range(i, i + n)))
        i += n
    return out


MAX_RESIDUAL_RANK = 16  # a stacked residual of higher rank is stored flat (`_store_flat`)


class _Split:
    """A scan body split by partial evaluation for operands marked `unknowns`.

    `known` maps (known consts, known carry, known xs) to (known carry, known ys, stacked
    residuals); `unknown` maps (const residuals, unknown consts; unknown carry; stacked
    residuals, xs residuals, unknown xs) to (unknown carry, unknown ys). A carry is unknown
    when its initial value is or when the body makes it so (a fixpoint).
    """

    def __init__(self, jaxpr, nc, nk, unknowns):
        const_u, carry_u, xs_u = split(list(unknowns), nc, nk)
        ny = len(jaxpr.out_avals) - nk
        for _ in range(nk + 1):
            known, unknown, out_u, num_res = pe.partial_eval_jaxpr(
                jaxpr, const_u + carry_u + xs_u, carry_u + [False] * ny)
            grown = [a or b for a, b in zip(carry_u, out_u[:nk])]
            if grown == carry_u:
                break
            carry_u = grown
        self.const_u, self.carry_u, self.xs_u, self.ys_u = const_u, carry_u, xs_u, out_u[nk:]
        kj = known.jaxpr
        n_kc, n_kk = nc - sum(const_u), nk - sum(carry_u)
        n_kout = len(kj.outvars) - num_res
        k_consts, k_xs = kj.invars[:n_kc], kj.invars[n_kc + n_kk:]
        self.kinds, stacked = [], []  # per residual: ("const" | "xs" | "stacked", index)
        for r in kj.outvars[n_kout:]:
            if r in k_consts:
                self.kinds.append(("const", k_consts.index(r)))
            elif r in k_xs:
                self.kinds.append(("xs", k_xs.index(r)))
            else:
                self.kinds.append(("stacked", len(stacked)))
                stacked.append(r)
        self.n_known_carry, self.n_known_ys, self.n_stacked = n_kk, n_kout - n_kk, len(stacked)
        self.known = ClosedJaxpr(Jaxpr([], kj.invars, kj.outvars[:n_kout] + stacked, kj.eqns),
                                 [])
        by_kind = {k: [i for i, (kind, _) in enumerate(self.kinds) if kind == k]
                   for k in ("const", "stacked", "xs")}
        n_uc, n_uk = sum(const_u), sum(carry_u)
        uc, uk, ux = _ranges([n_uc, n_uk, len(unknown.in_avals) - num_res - n_uc - n_uk])
        shift = lambda idx: [num_res + i for i in idx]
        order = (by_kind["const"] + shift(uc) + shift(uk) + by_kind["stacked"] + by_kind["xs"]
                 + shift(ux))
        self.unknown = permute(unknown, order)
        self.num_const_res, self.num_xs_res = len(by_kind["const"]), num_res - len(
            by_kind["const"])
        self.unknown_num_consts = len(by_kind["const"]) + n_uc
        self.stacked_avals = [r.aval for r in stacked]
        deep = [i for i, a in enumerate(self.stacked_avals) if a.ndim >= MAX_RESIDUAL_RANK]
        if deep:
            self._store_flat(deep, n_kout, self.unknown_num_consts + n_uk)

    def _store_flat(self, deep, n_kout, first_stacked):
        """The known body emits residuals `deep` (by stacked index) flattened to one axis and
        the unknown body (whose stacked residual inputs start at `first_stacked`) restores
        their shape: each level of nested scans stacks a residual once more, and NumPy arrays
        have at most 64 axes (a scan nested 100 deep under grad)."""
        shapes = {i: self.stacked_avals[i].shape for i in deep}
        sizes = {i: int(np.prod(shape, dtype=np.int64)) for i, shape in shapes.items()}
        known, unknown = self.known, self.unknown

        def known_body(*ins):
            outs = eval_jaxpr(known.jaxpr, known.consts, *ins)
            return [reshape(o, (sizes[k - n_kout],)) if k - n_kout in shapes else o
                    for k, o in enumerate(outs)]

        def unknown_body(*ins):
            ins = [reshape(x, shapes[k - first_stacked]) if k - first_stacked in shapes else x
                   for k, x in enumerate(ins)]
            return eval_jaxpr(unknown.jaxpr, unknown.consts, *ins)
        for i in deep:
            self.stacked_avals[i] = self.stacked_avals[i].update(shape=(sizes[i],))
        in_avals = list(unknown.in_avals)
        in_avals[first_stacked:first_stacked + len(self.stacked_avals)] = self.stacked_avals
        self.known, c1 = pe.closure_convert(known_body, known.in_avals, "scan")
        self.unknown, c2 = pe.closure_convert(unknown_body, in_avals, "scan")
        if c1 or c2:
            raise errors.FuncgradInternalError("scan: partial evaluation captured constants")

    def residuals(self, k_consts, stacked, k_xs):
        """(const residual operands, xs residual operands) in the unknown body's order."""
        const_res = [k_consts[i] for kind, i in self.kinds if kind == "const"]
        xs_res = [stacked[i] for kind, i in self.kinds if kind == "stacked"]
        xs_res += [k_xs[i] for kind, i in self.kinds if kind == "xs"]
        return const_res, xs_res

    def known_operands(self, consts, carry, xs):
        return ([c for c, u in zip(consts, self.const_u) if not u],
                [c for c, u in zip(carry, self.carry_u) if not u],
                [x for x, u in zip(xs, self.xs_u) if not u])

    def unknown_operands(self, consts, carry, xs):
        return ([c for c, u in zip(consts, self.const_u) if u],
                [c for c, u in zip(carry, self.carry_u) if u],
                [x for x, u in zip(xs, self.xs_u) if u])


def _scan_partial_eval(eqn, in_unknowns):
    p = eqn.params
    nc, nk, length = p["num_consts"], p["num_carry"], p["length"]
    s = _Split(p["jaxpr"], nc, nk, in_unknowns)
    consts, carry, xs = split(eqn.invars, nc, nk)
    out_carry, out_ys = split(eqn.outvars, nk)
    k_c, k_k, k_x = s.known_operands(consts, carry, xs)
    stacked = [Var(batched_aval(a, length)) for a in s.stacked_avals]
    known_outs = ([v for v, u in zip(out_carry, s.carry_u) if not u]
                  + [v for v, u in zip(out_ys, s.ys_u) if not u] + stacked)
    known_eqn = Eqn(scan_p, k_c + k_k + k_x, known_outs,
                    dict(p, jaxpr=s.known, num_consts=len(k_c), num_carry=len(k_k)),
                    eqn.source) if known_outs else None
    const_res, xs_res = s.residuals(k_c, stacked, k_x)
    u_c, u_k, u_x = s.unknown_operands(consts, carry, xs)
    unknown_outs = ([v for v, u in zip(out_carry, s.carry_u) if u]
                    + [v for v, u in zip(out_ys, s.ys_u) if u])
    unknown_eqn = Eqn(scan_p, const_res + u_c + u_k + xs_res + u_x, unknown_outs,
                      dict(p, jaxpr=s.unknown, num_consts=s.unknown_num_consts,
                           num_carry=len(u_k)), eqn.source) if unknown_outs else None
    return known_eqn, unknown_eqn, s.carry_u + s.ys_u


def _scan_transpose(cts, *args, jaxpr, num_consts, num_carry, length, reverse, unroll):
    nc, nk = num_consts, num_carry
    s = _Split(jaxpr, nc, nk, [ad.is_undefined(a) for a in args])
    consts, carry, xs = split(args, nc, nk)
    k_c, k_k, k_x = s.known_operands(consts, carry, xs)
    stacked = []
    if s.n_stacked:
        used = [True] * s.n_known_carry + [False] * s.n_known_ys + [True] * s.n_stacked
        outs = _bind(k_c, k_k, k_x, dce_outputs(s.known, used), length=length,
                     reverse=reverse, unroll=unroll)
        stacked = outs[len(k_k):]
    const_res, xs_res = s.residuals(k_c, stacked, k_x)
    ct_carry, ct_ys = split(cts, nk)
    ct_carry = [ad.instantiate(c) for c, u in zip(ct_carry, s.carry_u) if u]
    ct_ys = [c for c, u in zip(ct_ys, s.ys_u) if u]
    ys_nz = nonzero_mask(ct_ys)
    body, t_consts = _transposed_body(s, ys_nz)
    n_uc = sum(s.const_u)
    acc = [ad.instantiate(ad.Zero(a)) for a in s.unknown.in_avals[s.num_const_res:][:n_uc]]
    outs = _bind(t_consts + const_res, acc + ct_carry,
                 xs_res + [c for c, nz in zip(ct_ys, ys_nz) if nz], body, length=length,
                 reverse=not reverse, unroll=unroll)
    g_c, g_k, g_x = (iter(g) for g in split(outs, n_uc, len(ct_carry)))
    res = [next(g_c) if ad.is_undefined(a) else None for a in consts]
    for a, u in zip(carry, s.carry_u):
        g = next(g_k) if u else None
        res.append(g if ad.is_undefined(a) else None)
    return res + [next(g_x) if ad.is_undefined(a) else None for a in xs]


def _transposed_body(s, ys_nz):
    """(const residuals; const ct accumulators, carry cts; xs residuals, nonzero ys cts) ->
    (accumulators, carry cts, xs cts): one reverse iteration of the transposed body."""
    u = s.unknown
    n_rc, n_uc, n_uk = s.num_const_res, sum(s.const_u), sum(s.carry_u)
    n_rx = s.num_xs_res
    rc, uc, uk, rx, ux = split(u.in_avals, n_rc, n_uc, n_uk, n_rx)
    y_avals = u.out_avals[n_uk:]

    def fun(*args):
        res_c, acc, ct_k, res_x, ct_y = split(args, n_rc, n_uc, n_uk, n_rx)
        undefined = lambda avals: [ad.UndefinedPrimal(a) for a in avals]
        targs = res_c + undefined(uc) + undefined(uk) + res_x + undefined(ux)
        got = ad.backward_pass(u.jaxpr, {}, ct_k + tangents_out(ct_y, ys_nz, y_avals), [],
                               targs)
        _, g_c, g_k, _, g_x = split(got, n_rc, n_uc, n_uk, n_rx)
        acc = [ad.add_tangents(a, g) for a, g in zip(acc, g_c)]
        return [ad.instantiate(g) for g in acc + g_k + g_x]
    avals = rc + uc + uk + rx + [a for a, nz in zip(y_avals, ys_nz) if nz]
    return pe.closure_convert(fun, avals, "transpose")


def _scan_batch(args, dims, *, jaxpr, num_consts, num_carry, length, reverse, unroll):
    nc, nk = num_consts, num_carry
    size = batching.batch_size(args, dims)
    ny = len(jaxpr.out_avals) - nk
    const_b, carry_b, xs_b = split(mapped(dims), nc, nk)
    for _ in range(nk + 1):
        body, out_d = batching.batch_jaxpr(jaxpr, front_dims(const_b + carry_b + xs_b), size,
                                           carry_b + [False] * ny)
        out_b = mapped(out_d)
        grown = [a or b for a, b in zip(carry_b, out_b[:nk])]
        if grown == carry_b:
            break
        carry_b = grown
    body, bconsts = pe.closure_convert(body)
    (c, k, x), (dc, dk, dx) = split(args, nc, nk), split(dims, nc, nk)
    c = [batching.moveaxis(v, d, 0) if d is not None else v for v, d in zip(c, dc)]
    k = [batching.bdim_at_front(v, d, size) if b else v for v, d, b in zip(k, dk, carry_b)]
    x = [batching.moveaxis(v, d, 1) if d is not None else v for v, d in zip(x, dx)]
    outs = _bind(bconsts + c, k, x, body, length=length, reverse=reverse, unroll=unroll)
    out_dims = [0 if b else None for b in carry_b] + [1 if b else None for b in out_b[nk:]]
    return outs, out_dims


scan_p = Primitive("scan", multiple_results=True)
scan_p.def_impl(_scan_impl, raw=False)
scan_p.def_abstract_eval(_scan_abstract)
ad.jvp_rules[scan_p] = _scan_jvp
ad.jvp_primal_rules[scan_p] = _scan_jvp_primal
ad.transpose_rules[scan_p] = _scan_transpose
batching.batch_rules[scan_p] = _scan_batch
pe.partial_eval_rules[scan_p] = _scan_partial_eval
vma_rules[scan_p] = lambda builder, args, avals, *, jaxpr, num_consts, num_carry, **_: (
    None, loop_carry_vma("scan", jaxpr, num_consts, num_carry, avals))
