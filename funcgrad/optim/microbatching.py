"""`microbatch`: evaluates a function of a large batch as a loop over microbatches and
accumulates the results (sum, mean, running mean or concatenation), to bound memory; as
optax 0.2.8's `optax.microbatch` / `optax.microbatching`.

Microbatch `i` holds the examples `i, i + n, i + 2n, ...` of the batch (`n` microbatches),
as optax reshapes the batch axis in Fortran order. Imports `funcgrad.numpy`, `funcgrad.lax`
and `funcgrad.tree_util`.
"""

import dataclasses
import enum
import functools
from collections.abc import Callable, Sequence
from typing import Any

import funcgrad.numpy as fnp
from funcgrad import lax
from funcgrad.errors import FuncgradValueError
from funcgrad.tree_util import tree_leaves, tree_map

__all__ = ["AccumulationType", "Accumulator", "microbatch", "reshape_batch_axis"]


@dataclasses.dataclass(frozen=True)
class Accumulator:
    """How results are combined: `init(first value)`, `update(carry, value, index)`,
    `finalize(carry)`, and `aggregate(values)` over a stacked axis."""

    init: Callable[[Any], Any]
    update: Callable[[Any, Any, Any], Any]
    finalize: Callable[[Any], Any]
    aggregate: Callable[[Any], Any]


class AccumulationType(enum.Enum):
    """The built-in accumulations."""

    MEAN = enum.auto()
    SUM = enum.auto()
    RUNNING_MEAN = enum.auto()
    CONCAT = enum.auto()


def reshape_batch_axis(tree: Any, microbatch_size: int, axis: int = 0) -> Any:
    """Splits the batch `axis` of every leaf into `(num_microbatches, microbatch_size)`, in
    Fortran order (microbatch `i` gets examples `i, i + n, ...`)."""
    def reshape_leaf(x):
        return x.reshape(x.shape[:axis] + (-1, microbatch_size) + x.shape[axis + 1:],
                         order="F")
    return tree_map(reshape_leaf, tree)


def _floating_zeros(name):
    def init(x):
        if not fnp.issubdtype(x.dtype, fnp.floating):
            raise FuncgradValueError(f"microbatch: the {name} accumulation needs floating-point "
                                     f"values, got {x.dtype}")
        return fnp.zeros_like(x)
    return init


def _leafwise(init, update, finalize, aggregate):
    return Accumulator(lambda v: tree_map(init, v),
                       lambda c, v, i: tree_map(lambda a, b: update(a, b, i), c, v),
                       lambda c: tree_map(finalize, c), lambda v: tree_map(aggregate, v))


def _builtin(kind, num_microbatches):
    add = lambda carry, value, _: carry + value  # noqa: E731
    if kind is AccumulationType.SUM:
        return _leafwise(fnp.zeros_like, add, lambda x: x, functools.partial(fnp.sum, axis=0))
    if kind is AccumulationType.MEAN:
        return _leafwise(_floating_zeros("MEAN"), add, lambda c: c / num_microbatches,
                         functools.partial(fnp.mean, axis=0))
    if kind is AccumulationType.RUNNING_MEAN:
        def running(carry, value, index):
            p = index / (index + 1)
            return carry * p + value * (1 - p)
        return _leafwise(_floating_zeros("RUNNING_MEAN"), running, lambda x: x,
                         functools.partial(fnp.mean, axis=0))
    if kind is AccumulationType.CONCAT:
        return _leafwise(lambda v: fnp.zeros((num_microbatches,) + v.shape, v.dtype),
                         lambda c, v, i: c.at[i].set(v),
                         lambda c: c.reshape((-1,) + c.shape[2:], order="F"), lambda x: x)
    raise FuncgradValueError(f"microbatch: unknown accumulator {kind!r}")


def _canonicalize(accumulator, num_microbatches):
    """One Accumulator for an Accumulator, an AccumulationType or a tree of them."""
    if isinstance(accumulator, Accumulator):
        return accumulator
    if isinstance(accumulator, AccumulationType):
        return _builtin(accumulator, num_microbatches)
    accs = tree_map(lambda a: _canonicalize(a, num_microbatches), accumulator,
                    is_leaf=lambda x: isinstance(x, (Accumulator, AccumulationType)))
    leaf = lambda x: isinstance(x, Accumulator)  # noqa: E731
    return Accumulator(
        lambda v: tree_map(lambda a, x: a.init(x), accs, v, is_leaf=leaf),
        lambda c, v, i: tree_map(lambda a, cc, x: a.update(cc, x, i), accs, c, v, is_leaf=leaf),
        lambda c: tree_map(lambda a, cc: a.finalize(cc), accs, c, is_leaf=leaf),
        lambda v: tree_map(lambda a, x: a.aggregate(x), accs, v, is_leaf=leaf))


def microbatch(fun: Callable[..., Any], argnums: int | Sequence[int], microbatch_size,
               accumulator=AccumulationType.SUM, *, argnames: str | Sequence[str] = (),
               in_axes: int | Sequence[int] = 0, num_real_microbatches=None
               ) -> Callable[..., Any]:
    """`fun` evaluated microbatch by microbatch over the batch arguments `argnums` /
    `argnames` (batch axis `in_axes`), the results accumulated by `accumulator`.

    Example:
        >>> grad_sum = microbatch(funcgrad.grad(loss), argnums=1, microbatch_size=8)
        >>> g = grad_sum(params, batch)          # the sum of the per-microbatch gradients
    """
    if microbatch_size is None:
        return fun
    argnums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    argnames = (argnames,) if isinstance(argnames, str) else tuple(argnames)
    in_axes = ((in_axes,) * (len(argnums) + len(argnames)) if isinstance(in_axes, int)
               else tuple(in_axes))

    def microbatched(*args, **kwargs):
        batch_args = [args[i] for i in argnums] + [kwargs[n] for n in argnames]
        sizes = {x.shape[ax] for ax, sub in zip(in_axes, batch_args) for x in tree_leaves(sub)}
        if len(sizes) != 1:
            raise FuncgradValueError(f"microbatch: batch arguments must have one batch size, "
                                     f"got {sorted(sizes)}")
        batch_size = sizes.pop()
        if batch_size % microbatch_size:
            raise FuncgradValueError(f"microbatch: batch size {batch_size} is not divisible "
                                     f"by microbatch_size {microbatch_size}")
        args, kwargs = list(args), dict(kwargs)
        for i, ax in zip(argnums, in_axes):
            args[i] = reshape_batch_axis(args[i], microbatch_size, ax)
        for n, ax in zip(argnames, in_axes[len(argnums):]):
            kwargs[n] = reshape_batch_axis(kwargs[n], microbatch_size, ax)
        acc = _canonicalize(accumulator, batch_size // microbatch_size)

        def f(index):
            a, kw = list(args), dict(kwargs)
            for i, ax in zip(argnums, in_axes):
                a[i] = tree_map(lambda x, ax=ax: fnp.take(x, index, axis=ax), a[i])
            for n, ax in zip(argnames, in_axes[len(argnums):]):
                kw[n] = tree_map(lambda x, ax=ax: fnp.take(x, index, axis=ax), kw[n])
            return fun(*a, **kw)

        first = f(0)  # gives the carry its shapes (optax uses jax.eval_shape)
        body = lambda i, c: acc.update(c, f(i), i)  # noqa: E731
        if num_real_microbatches is None:  # the first microbatch is already computed
            start = acc.update(acc.init(first), first, 0)
            carry = lax.fori_loop(1, batch_size // microbatch_size, body, start)
        else:
            carry = lax.fori_loop(0, num_real_microbatches, body, acc.init(first))
        return acc.finalize(carry)

    return microbatched
