"""Gradient bucketing: a few large allreduces instead of one per parameter.

Reverse mode inside `shard_map` emits one `psum` per gradient (the transpose of `pvary`,
where a replicated parameter met per-process data), in the order the backward pass finishes
the gradients. This pass, run by `jit` on programs with collectives, rewrites them:

1. drops `pvary` (a run-time no-op once AD is done; kept in programs typed by mesh axes,
   i.e. jitted inside shard_map, where it is an alias);
2. sinks a `psum` below a `reduce_sum`/`reshape`/`transpose`/`squeeze` that is its only
   user, so that a bias gradient is reduced over the batch before it is communicated,
   not after (`psum` is linear: `sum(psum(x)) == psum(sum(x))`);
3. groups the `psum`s of each (axis names, dtype) into buckets of at most
   `config.collective_bucket_bytes` (default 4 MiB) in program order: one `psum` equation
   with several operands, which the backends run as one collective on a packed buffer.
   A bucket is emitted where its last member was, or earlier, right before the first
   equation that reads one of its results or runs another collective.

Program order is the same on every process, so the buckets are too (no readiness order,
no hashing). `bucket_bytes=0` leaves one psum per array; a huge value gives one allreduce
after the backward pass. The pass returns its argument unchanged when it has nothing to do.
"""

from funcgrad.compiler.passes import _Subst, has_effects
from funcgrad.config import config
from funcgrad.core import ClosedJaxpr, Eqn, Jaxpr, Literal, Var

COLLECTIVES = frozenset({"psum", "pmax", "pmin", "all_gather", "psum_scatter", "pvary",
                         "axis_index"})
_SINKABLE = frozenset({"reduce_sum", "reshape", "transpose", "squeeze", "expand_dims"})


def has_collectives(closed):
    return any(e.prim.name in COLLECTIVES for e in closed.jaxpr.eqns)


def bucket_collectives(closed, bucket_bytes=None):
    """`closed` with pvary dropped, psums sunk below reductions and grouped into buckets.

    Args:
        closed: a ClosedJaxpr (after inlining: nested calls are not looked into).
        bucket_bytes: the largest bucket in bytes (None: `config.collective_bucket_bytes`;
            0: no grouping, one psum per array).

    Returns:
        The rewritten ClosedJaxpr, or `closed` itself when it has no collectives.

    Example:
        `g1 = psum a; g2 = psum b; ...` becomes `g1, g2 = psum a b` when a and b fit in
        one bucket and nothing reads g1 between them.
    """
    if not has_collectives(closed):
        return closed
    if bucket_bytes is None:
        bucket_bytes = config.collective_bucket_bytes
    j = closed.jaxpr
    subst = _Subst()
    eqns = []
    for eqn in j.eqns:
        eqn = subst.eqn(eqn)
        if eqn.prim.name == "pvary" and all(a.aval.vma is None for a in eqn.invars):
            subst.update(zip(eqn.outvars, eqn.invars))
            continue
        eqns += _split(eqn) if eqn.prim.name == "psum" else [eqn]
    outvars = [subst.read(v) for v in j.outvars]
    eqns = _sink(eqns, outvars)
    eqns = _bucket(eqns, bucket_bytes)
    return ClosedJaxpr(Jaxpr(list(j.constvars), list(j.invars), outvars, eqns),
                       list(closed.consts))


def _split(eqn):
    """A multi-operand psum as one psum per operand."""
    if len(eqn.invars) == 1:
        return [eqn]
    return [Eqn(eqn.prim, [x], [o], eqn.params, eqn.source)
            for x, o in zip(eqn.invars, eqn.outvars)]


def _sink(eqns, outvars):
    """Move each psum below its only user while that user is a reduction or reshaping.

    A move only touches the psum and its user, so moves commute: they run from a worklist
    over a linked list of the equations (a psum is looked at again only when a move gave
    it a new user), not by rescanning the program after each one."""
    order = list(eqns)  # node -> equation; nodes made by moves are appended
    ids = [-1, *range(len(eqns)), -2]  # -1, -2: the ends
    nxt, prv = dict(zip(ids, ids[1:])), dict(zip(ids[1:], ids))
    uses, psum_at = {}, {}
    for i, e in enumerate(eqns):
        for a in e.invars:
            if type(a) is Var:
                uses.setdefault(a, []).append(i)
        if e.prim.name == "psum":
            psum_at[e.outvars[0]] = i
    for v in outvars:
        if type(v) is Var:
            uses.setdefault(v, []).append(None)
    work = list(psum_at.values())
    while work:
        i = work.pop()
        e = order[i]
        users = uses.get(e.outvars[0], ())
        k = users[0] if len(users) == 1 else None
        if k is None or order[k].prim.name not in _SINKABLE or len(order[k].invars) != 1:
            continue
        u, x = order[k], e.invars[0]
        del uses[e.outvars[0]]  # the psum moves: its result is gone
        mid = Var(u.outvars[0].aval.update(vma=x.aval.vma))
        order[k] = Eqn(u.prim, [x], [mid], u.params, u.source)
        order.append(Eqn(e.prim, [mid], [u.outvars[0]], e.params, e.source))
        r = len(order) - 1
        nxt[prv[i]], prv[nxt[i]] = nxt[i], prv[i]  # unlink the psum, relink it after k
        nxt[r], prv[r], prv[nxt[k]], nxt[k] = nxt[k], k, r, r
        uses[mid] = [r]
        psum_at[u.outvars[0]] = r
        work.append(r)
        if type(x) is Var:
            uses[x] = [k if j == i else j for j in uses[x]]
            if x in psum_at:  # a psum of a psum: the inner one has a new user
                work.append(psum_at[x])
    out, i = [], nxt[-1]
    while i != -2:
        out.append(order[i])
        i = nxt[i]
    return out


def _nbytes(aval):
    return aval.size * aval.dtype.itemsize


def _bucket(eqns, bucket_bytes):
    out, pending, pending_out, size, key = [], [], set(), 0, None

    def flush():
        nonlocal pending, pending_out, size, key
        if pending:
            first = pending[0]
            out.append(Eqn(first.prim, [e.invars[0] for e in pending],
                           [e.outvars[0] for e in pending], first.params, first.source))
        pending, pending_out, size, key = [], set(), 0, None

    for e in eqns:
        if e.prim.name == "psum" and type(e.invars[0]) is not Literal:
            aval = e.invars[0].aval
            k = (e.params["axis_name"], aval.dtype)
            nb = _nbytes(aval)
            if pending and (k != key or size + nb > bucket_bytes
                            or e.invars[0] in pending_out):
                flush()
            pending.append(e)
            pending_out.add(e.outvars[0])
            size += nb
            key = k
            continue
        if pending and (has_effects(e) or e.prim.name in COLLECTIVES
                        or any(a in pending_out for a in e.invars if type(a) is Var)):
            flush()
        out.append(e)
    flush()
    return out
