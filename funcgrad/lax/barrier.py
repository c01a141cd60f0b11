"""`optimization_barrier`: the identity on a pytree of arrays that the compiler does not look
through (JAX's). Values computed from its outputs are never merged with values computed from
its inputs, so a checkpointed block's recomputation stays a recomputation under `jit`.

`optimization_barrier_p` has one output per operand and is no `identity` primitive: the
simplifier keeps it, and CSE sees its outputs as new values. Its derivative, transpose and
batching rule are barriers too.
"""

from funcgrad.core import Primitive
from funcgrad.interpreters import ad, batching
from funcgrad.tree_util import tree_flatten, tree_unflatten

__all__ = ["optimization_barrier", "optimization_barrier_p"]


def optimization_barrier(operand):
    """`operand` (a pytree of arrays) unchanged, with the compiler's optimizations kept from
    crossing: nothing computed from the result is merged with or moved before it.

    Example:
        >>> optimization_barrier((fnp.ones(2), 3.0))
        (Array([1., 1.], dtype=float32), Array(3., dtype=float32))
    """
    leaves, tree = tree_flatten(operand)
    return tree_unflatten(tree, optimization_barrier_p.bind(*leaves) if leaves else [])


def _barrier_jvp(primals, outs, tangents):
    nz = [type(t) is not ad.Zero for t in tangents]
    t_outs = iter(optimization_barrier_p.bind(*[t for t, z in zip(tangents, nz) if z]))
    return [next(t_outs) if z else t for t, z in zip(tangents, nz)]


def _barrier_transpose(cts, *args):
    nz = [type(c) is not ad.Zero for c in cts]
    got = iter(optimization_barrier_p.bind(*[c for c, z in zip(cts, nz) if z]))
    return [next(got) if z else None for z in nz]


optimization_barrier_p = Primitive("optimization_barrier", multiple_results=True)
optimization_barrier_p.def_impl(lambda *xs: list(xs))  # (device arrays stay where they are)
optimization_barrier_p.def_abstract_eval(lambda *avals: list(avals))
ad.jvp_rules[optimization_barrier_p] = _barrier_jvp
ad.transpose_rules[optimization_barrier_p] = _barrier_transpose
batching.batch_rules[optimization_barrier_p] = lambda args, dims: (
    optimization_barrier_p.bind(*args), list(dims))
