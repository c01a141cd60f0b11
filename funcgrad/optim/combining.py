"""Combining transformations: `named_chain`, `partition` (optax's `multi_transform`: one
transformation per group of parameters), `freeze`, `selective_transform`, `measure_with_ema`.

As in optax 0.2.8. These build on `masked` and `ema`, which live in `optim.transforms`; that
module also re-exports the names defined here (optax.transforms holds both), so it is
imported when a transformation is built, not when this module loads.
"""

import collections
from collections.abc import Callable, Hashable, Mapping
from typing import Any, NamedTuple

from funcgrad.errors import FuncgradValueError
from funcgrad.optim.base import (
    GradientTransformation,
    GradientTransformationExtraArgs,
    chain,
    set_to_zero,
    stateless,
    with_extra_args_support,
)
from funcgrad.tree_util import tree_leaves, tree_map

__all__ = [
    "MultiTransformState", "PartitionState", "freeze", "measure_with_ema", "multi_transform",
    "named_chain", "partition", "selective_transform",
]


def _transforms():
    # optim.transforms re-exports this module, so it cannot be imported at the top.
    from funcgrad.optim import transforms
    return transforms


def named_chain(*args: tuple[str, GradientTransformation]) -> GradientTransformationExtraArgs:
    """`chain` with a name for each member; the state is an ordered dict by name.

    Example:
        >>> opt = named_chain(("clip", clip_by_global_norm(1.0)), ("adam", adam(1e-3)))
        >>> list(opt.init({'w': fnp.ones(2)}))
        ['clip', 'adam']
    """
    names = [name for name, _ in args]
    if len(names) != len(set(names)):
        raise FuncgradValueError(f"named_chain: the names must be unique, got {names}")
    members = [(name, with_extra_args_support(t)) for name, t in args]

    def init(params):
        return collections.OrderedDict((name, t.init(params)) for name, t in members)

    def update(updates, state, params=None, **extra_args):
        new_state = collections.OrderedDict()
        for name, t in members:
            updates, new_state[name] = t.update(updates, state[name], params, **extra_args)
        return updates, new_state

    return GradientTransformationExtraArgs(init, update)


class PartitionState(NamedTuple):
    inner_states: Mapping[Hashable, Any]  # {label: MaskedState of that label's transform}


MultiTransformState = PartitionState


def partition(transforms: Mapping[Hashable, GradientTransformation], param_labels, *,
              mask_compatible_extra_args: bool = False) -> GradientTransformationExtraArgs:
    """One transformation per group of parameters: `param_labels` gives each leaf a label
    (a pytree of labels like the params, or a function of the params returning one), and
    `transforms[label]` updates the leaves with that label.

    Args:
        transforms: {label: transformation}.
        param_labels: the labels, or `params -> labels`.
        mask_compatible_extra_args: passed to `masked` (extra arguments shaped like the
            params are masked too).

    Raises:
        FuncgradValueError: (at init) if a label has no transformation.

    Example:
        >>> opt = partition({'adam': adam(1e-3), 'frozen': set_to_zero()},
        ...                 {'encoder': 'frozen', 'head': 'adam'})
    """
    transforms = {k: with_extra_args_support(v) for k, v in transforms.items()}
    masked_kwargs = {"mask_compatible_extra_args": True} if mask_compatible_extra_args else {}

    def group_masked(labels, group, tx):
        mask = tree_map(lambda label: label == group, labels)
        return _transforms().masked(tx, mask, **masked_kwargs)

    def init(params):
        labels = param_labels(params) if callable(param_labels) else param_labels
        label_set = set(tree_leaves(labels))
        if not label_set.issubset(transforms):
            raise FuncgradValueError(
                f"partition: some parameters have no transformation: labels "
                f"{sorted(map(str, label_set))}, transforms {sorted(map(str, transforms))}")
        return PartitionState({group: group_masked(labels, group, tx).init(params)
                               for group, tx in transforms.items()})

    def update(updates, state, params=None, **extra_args):
        labels = param_labels(updates) if callable(param_labels) else param_labels
        new_inner = {}
        for group, tx in transforms.items():
            updates, new_inner[group] = group_masked(labels, group, tx).update(
                updates, state.inner_states[group], params, **extra_args)
        return updates, PartitionState(new_inner)

    return GradientTransformationExtraArgs(init, update)


multi_transform = partition


def freeze(mask) -> GradientTransformation:
    """Zero updates where `mask` is True (those parameters stay fixed), the updates unchanged
    elsewhere: `masked(set_to_zero(), mask)`.

    Example:
        >>> opt = chain(freeze({'encoder': True, 'head': False}), adam(1e-3))
    """
    return _transforms().masked(set_to_zero(), mask)


def selective_transform(optimizer: GradientTransformation, *,
                        freeze_mask) -> GradientTransformation:
    """`optimizer` on the leaves where `freeze_mask` is False, zero updates where it is True.

    Example:
        >>> opt = selective_transform(adam(1e-3), freeze_mask={'encoder': True, 'head': False})
    """
    def label_fn(params):
        return tree_map(lambda m: "freeze" if m else "train", freeze_mask)
    return partition({"train": optimizer, "freeze": set_to_zero()}, param_labels=label_fn)


def measure_with_ema(measure: Callable[[Any], Any], decay, debias: bool = True,
                     accumulator_dtype=None) -> GradientTransformationExtraArgs:
    """Replaces the updates by an exponential moving average of `measure(updates)` (use it
    inside `monitor`).

    Example:
        >>> opt = chain(monitor({"norm_ema": measure_with_ema(tree_norm, 0.9)}), adam(1e-3))
    """
    base_ema = _transforms().ema(decay, debias, accumulator_dtype)
    measurement_ema = base_ema._replace(init=lambda params: base_ema.init(measure(params)))
    return chain(stateless(lambda updates, _: measure(updates)), measurement_ema)
