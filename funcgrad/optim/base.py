"""The optimizer protocol: `GradientTransformation(init, update)`, `chain`, `apply_updates`,
parameter masks and the structure checks shared by every transform.

As in optax, a transformation is a pair of pure functions over pytrees:
`state = init(params)` and `updates, state = update(updates, state, params=None)`. States are
NamedTuples (so `funcgrad.io` can save and rebuild them). This module imports only
`funcgrad.numpy`, `funcgrad.lax`, `funcgrad.tree_util` and `funcgrad.errors`; it must not
import `funcgrad.nn`.
"""

import re
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np

import funcgrad.numpy as fnp
from funcgrad import lax, tree_util
from funcgrad.errors import FuncgradTypeError, FuncgradValueError, op_error

__all__ = [
    "EmptyState", "GradientTransformation", "GradientTransformationExtraArgs", "MaskedNode",
    "OptState", "Params", "ScalarOrSchedule", "Schedule", "StatefulSchedule",
    "TransformInitFn", "TransformUpdateExtraArgsFn", "TransformUpdateFn", "Updates",
    "apply_updates", "chain", "check_structure", "identity", "incremental_update",
    "init_empty_state", "path_mask", "periodic_update",
    "resolve_mask", "set_to_zero", "stateless", "stateless_with_tree_map", "tree_paths",
    "with_extra_args_support",
]

# Type aliases, as optax's: documentation for signatures, not checked at run time.
ArrayTree = Any  # an array, or nested lists, tuples, dicts and NamedTuples of arrays
OptState = ArrayTree  # an optimizer state
Params = ArrayTree  # the parameters
Updates = Params  # gradients or updates: the structure of the parameters
Schedule = Callable[[Any], Any]  # step count -> scalar
ScalarOrSchedule = float | Any | Schedule


@runtime_checkable
class StatefulSchedule(Protocol):
    """A schedule with a state: `init() -> state`, `update(state, **extra_args) -> state`,
    `__call__(state, **extra_args) -> value` (see `inject_hyperparams`)."""

    def init(self) -> Any:
        """The initial state."""

    def update(self, state: Any, **extra_args) -> Any:
        """The state after one step."""

    def __call__(self, state: Any, **extra_args) -> Any:
        """The value at `state`."""


class TransformInitFn(Protocol):
    """The `init` of a transformation: `params -> state`."""

    def __call__(self, params: Params) -> OptState:
        """The initial state for `params`."""


class TransformUpdateFn(Protocol):
    """The `update` of a transformation: `(updates, state, params=None) -> (updates, state)`."""

    def __call__(self, updates: Updates, state: OptState,
                 params: Params | None = None) -> tuple[Updates, OptState]:
        """The transformed updates and the new state."""


class TransformUpdateExtraArgsFn(Protocol):
    """An `update` that also takes keyword arguments (`value=`, `grad=`, `value_fn=`, ...)
    and ignores the ones it does not need."""

    def __call__(self, updates: Updates, state: OptState, params: Params | None = None,
                 **extra_args: Any) -> tuple[Updates, OptState]:
        """The transformed updates and the new state."""


class GradientTransformation(NamedTuple):
    """A pure optimizer: `init(params) -> state`, `update(updates, state, params=None)`.

    `update` returns `(new_updates, new_state)`; add the updates to the parameters with
    `apply_updates`. Both functions work eagerly and under `jit` (with the state passed as an
    argument).

    Example:
        >>> opt = chain(scale_by_adam(), scale(-1e-3))
        >>> state = opt.init(params)
        >>> updates, state = opt.update(grads, state, params)
        >>> params = apply_updates(params, updates)
    """

    init: TransformInitFn
    update: TransformUpdateFn


class GradientTransformationExtraArgs(GradientTransformation):
    """A `GradientTransformation` whose `update` also takes keyword arguments:
    `update(updates, state, params=None, **extra_args)`.

    Each transformation reads the extra arguments it needs (`value=` for `polyak_sgd`,
    `value=, grad=, value_fn=` for the line searches) and ignores the others; `chain` passes
    them to every member. `with_extra_args_support` lifts a plain transformation.

    Example:
        >>> opt = chain(sgd(1.0), scale_by_polyak())
        >>> updates, state = opt.update(grads, state, params, value=loss)
    """

    update: TransformUpdateExtraArgsFn


class EmptyState(NamedTuple):
    """The state of a transformation that keeps none."""


def init_empty_state(params: Params) -> EmptyState:
    """The `init` of a stateless transformation: `EmptyState()` whatever the params."""
    del params
    return EmptyState()


class MaskedNode(NamedTuple):
    """Stands for a masked-out leaf inside `masked`: a pytree node without leaves."""


def identity() -> GradientTransformation:
    """The transformation that leaves updates unchanged (and keeps no state)."""
    return GradientTransformation(init_empty_state,
                                  lambda updates, state, params=None: (updates, state))


def set_to_zero() -> GradientTransformation:
    """Maps every update to zeros: the parameters it applies to stay fixed (see `freeze`).

    Example:
        >>> set_to_zero().update({'w': fnp.ones(2)}, EmptyState())[0]
        {'w': Array([0., 0.], dtype=float32)}
    """
    def update(updates, state, params=None):
        return tree_util.tree_map(fnp.zeros_like, updates), state
    return GradientTransformation(init_empty_state, update)


def stateless(f: Callable[[Updates, Params | None], Updates]) -> GradientTransformation:
    """A transformation without state from `f(updates, params) -> updates` (params may be None).

    Example:
        >>> opt = stateless(lambda g, p: tree_map(lambda x: 2 * x, g))
    """
    def update(updates, state, params=None):
        return f(updates, params), EmptyState()
    return GradientTransformation(init_empty_state, update)


def stateless_with_tree_map(f: Callable[[Any, Any], Any]) -> GradientTransformation:
    """Like `stateless`, with `f(update_leaf, param_leaf)` mapped over the leaves (the param
    leaf is None when no params are passed).

    Example:
        >>> opt = stateless_with_tree_map(lambda g, p: g + 0.1 * p)
    """
    def update(updates, state, params=None):
        if params is None:
            return tree_util.tree_map(lambda u: f(u, None), updates), EmptyState()
        return tree_util.tree_map(f, updates, params), EmptyState()
    return GradientTransformation(init_empty_state, update)


def with_extra_args_support(tx: GradientTransformation) -> GradientTransformationExtraArgs:
    """`tx` as a `GradientTransformationExtraArgs` that ignores extra keyword arguments
    (returned unchanged when it already takes them)."""
    if isinstance(tx, GradientTransformationExtraArgs):
        return tx

    def update(updates, state, params=None, **extra_args):
        return tx.update(updates, state, params)
    return GradientTransformationExtraArgs(tx.init, update)


def chain(*args: GradientTransformation) -> GradientTransformationExtraArgs:
    """Applies the transformations `args` one after the other; the state is the tuple of
    their states.

    Keyword arguments given to `update` (`value=`, ...) reach every member that takes them.

    Example:
        >>> opt = chain(clip_by_global_norm(1.0), scale_by_adam(), scale(-1e-3))
        >>> [type(s).__name__ for s in opt.init({'w': fnp.zeros(2)})]
        ['EmptyState', 'ScaleByAdamState', 'EmptyState']
    """
    for i, t in enumerate(args):
        if not isinstance(t, GradientTransformation):
            raise FuncgradTypeError(
                f"chain: argument {i} is a {type(t).__name__}, not a GradientTransformation "
                "(did you pass the factory, e.g. `scale_by_adam` instead of `scale_by_adam()`?)")
    transforms = tuple(with_extra_args_support(t) for t in args)

    def init(params):
        return tuple(t.init(params) for t in transforms)

    def update(updates, state, params=None, **extra_args):
        if not isinstance(state, tuple) or len(state) != len(transforms):
            raise FuncgradValueError(
                f"chain update: expected the state of {len(transforms)} chained transforms "
                f"(the tuple returned by init), got {type(state).__name__}")
        new_state = []
        for t, s in zip(transforms, state):
            updates, s = t.update(updates, s, params, **extra_args)
            new_state.append(s)
        return updates, tuple(new_state)

    return GradientTransformationExtraArgs(init, update)


def check_structure(who: str, expected: Any, got: Any, expected_name: str, got_name: str):
    """Raises a `FuncgradValueError` naming the first path where `got`'s structure differs.

    Args:
        who: the operation, e.g. "adam update".
        expected, got: the two pytrees.
        expected_name, got_name: how the message calls them ("params", "updates").
    """
    a, b = tree_util.tree_structure(expected), tree_util.tree_structure(got)
    if a == b:
        return
    message = tree_util.first_mismatch(a, b)
    raise op_error(who, f"the {got_name} do not have the structure of the {expected_name}: "
                        f"{message}", cls=FuncgradValueError,
                   hint=f"pass {got_name} with the same pytree structure as the {expected_name} "
                        "given to init")


def apply_updates(params: Any, updates: Any) -> Any:
    """`params + updates` leafwise, keeping each parameter's dtype (as optax).

    Raises:
        FuncgradValueError: if the two trees differ; the message names the first path.

    Example:
        >>> apply_updates({'w': fnp.ones(2)}, {'w': fnp.full(2, -0.5)})
        {'w': Array([0.5, 0.5], dtype=float32)}
    """
    check_structure("apply_updates", params, updates, "params", "updates")
    return tree_util.tree_map(_add_keep_dtype, params, updates)


def incremental_update(new_tensors: Params, old_tensors: Params, step_size) -> Params:
    """`step_size * new + (1 - step_size) * old` leafwise: a soft (Polyak) update of a target
    network.

    Example:
        >>> incremental_update({'w': fnp.ones(2)}, {'w': fnp.zeros(2)}, 0.1)
        {'w': Array([0.1, 0.1], dtype=float32)}
    """
    return tree_util.tree_map(
        lambda new, old: None if new is None else step_size * new + (1.0 - step_size) * old,
        new_tensors, old_tensors, is_leaf=lambda x: x is None)


def periodic_update(new_tensors: Params, old_tensors: Params, steps, update_period) -> Params:
    """`new_tensors` when `steps` is a multiple of `update_period`, else `old_tensors` (a hard
    target-network update; works under `jit` with a traced `steps`).

    Example:
        >>> periodic_update({'w': fnp.ones(2)}, {'w': fnp.zeros(2)}, 10, 5)
        {'w': Array([1., 1.], dtype=float32)}
    """
    return lax.cond(fnp.mod(steps, update_period) == 0, lambda: new_tensors,
                    lambda: old_tensors)


def _add_keep_dtype(p, u):
    if p is None:
        return None
    out = fnp.add(p, u)
    dtype = getattr(p, "dtype", None)
    return out if dtype is None or out.dtype == dtype else out.astype(dtype)


# ---------------------------------------------------------------------------------------------
# Masks by parameter path


def tree_paths(tree: Any) -> list[str]:
    """The path of every leaf as a `/`-separated string ("layers/0/w"), in flattening order."""
    pairs, _ = tree_util.tree_flatten_with_path(tree)
    return [tree_util.keystr(p, simple=True, separator="/") for p, _ in pairs]


def _glob_regex(pattern: str) -> re.Pattern:
    # `**` matches any number of whole path segments (zero included); `*` and `?` stay
    # within one segment.
    segments = pattern.split("/")
    regex = ""
    for i, seg in enumerate(segments):
        last = i == len(segments) - 1
        if seg == "**":
            regex += ".*" if last else "(?:[^/]+/)*"
            continue
        regex += "".join("[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c)
                         for c in seg)
        regex += "" if last else "/"
    return re.compile(regex + r"\Z")


def path_mask(patterns: str | tuple[str, ...] | list[str]) -> Callable[[Any], Any]:
    """A mask function from glob patterns over leaf paths (see `tree_paths`).

    `*` matches within one path segment, `**` any number of segments. A leaf is True (the
    masked transformation applies to it) when its path matches one of the patterns.

    Example:
        >>> path_mask("**/w")({'layer0': {'w': 1, 'b': 2}, 'w': 3})
        {'layer0': {'b': False, 'w': True}, 'w': True}
    """
    if isinstance(patterns, str):
        patterns = (patterns,)
    regexes = [_glob_regex(p) for p in patterns]

    def mask_fn(tree):
        pairs, treedef = tree_util.tree_flatten_with_path(tree)
        paths = (tree_util.keystr(p, simple=True, separator="/") for p, _ in pairs)
        return treedef.unflatten([any(r.match(s) for r in regexes) for s in paths])

    return mask_fn


def resolve_mask(who: str, mask: Any, tree: Any) -> Any:
    """The bool pytree that `mask` (a bool pytree, a callable or glob patterns) gives for `tree`."""
    if isinstance(mask, (str, list)) and all(isinstance(m, str) for m in
                                              ([mask] if isinstance(mask, str) else mask)):
        mask = path_mask(mask)
    mask_tree = mask(tree) if callable(mask) else mask
    check_structure(who, tree, mask_tree, "params", "mask")
    for leaf in tree_util.tree_leaves(mask_tree):
        if not isinstance(leaf, (bool, np.bool_)):
            raise op_error(who, f"mask leaves must be Python bools, got {type(leaf).__name__}",
                           cls=FuncgradTypeError)
    return mask_tree
