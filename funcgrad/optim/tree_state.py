"""Looking inside optimizer states by name, as optax.tree_utils does: `tree_get(state,
"learning_rate")`, `tree_set(state, learning_rate=...)`, `tree_map_params(opt, f, state)`.

A state is a pytree of NamedTuples, dicts and tuples; a NamedTuple's fields are reached by
their names, and paths through NamedTuples use `NamedTupleKey(tuple_name, field)`. Imports
only `funcgrad.tree_util` and `funcgrad.errors`.
"""

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

from funcgrad import tree_util
from funcgrad.errors import FuncgradValueError

__all__ = ["NamedTupleKey", "tree_get", "tree_get_all_with_path", "tree_map_params",
           "tree_set"]


@dataclasses.dataclass(frozen=True)
class NamedTupleKey:
    """The step of a path into the field `name` of a NamedTuple of class `tuple_name`."""

    tuple_name: str
    name: str

    def __str__(self):
        return f"{self.tuple_name}.{self.name}"


class _ParamsPlaceholder:
    """Stands for the params inside a state built by `init(placeholder)` (no leaves)."""


tree_util.register_pytree_node(_ParamsPlaceholder, lambda x: ((), None),
                               lambda aux, children: _ParamsPlaceholder())


def tree_map_params(initable, f: Callable[..., Any], state: Any, /, *rest: Any,
                    transform_non_params: Callable[..., Any] | None = None,
                    is_leaf: Callable[[Any], bool] | None = None) -> Any:
    """Applies `f` to the parts of an optimizer state that are shaped like the params.

    `initable` is the optimizer (or its `init`); it is called on a placeholder to learn which
    parts of the state hold params-like trees (moments, traces); `f` maps their leaves (with
    the leaves of `rest`), `transform_non_params` (if given) maps the other leaves.

    Example:
        >>> opt = adam(1e-3)
        >>> state = opt.init({'w': fnp.ones(3)})
        >>> halved = tree_map_params(opt, lambda v: v / 2, state)
    """
    placeholder = _ParamsPlaceholder()
    init = initable.init if hasattr(initable, "init") else initable
    with_placeholders = init(placeholder)

    def map_params(maybe_placeholder, value):
        if isinstance(maybe_placeholder, _ParamsPlaceholder):
            return tree_util.tree_map(f, value, *rest, is_leaf=is_leaf)
        if transform_non_params is not None:
            return transform_non_params(value)
        return value

    return tree_util.tree_map(map_params, with_placeholders, state,
                              is_leaf=lambda v: isinstance(v, _ParamsPlaceholder))


def _is_named_tuple(x):
    return isinstance(x, tuple) and hasattr(x, "_fields")


def _has_keys(node, keys):
    if _is_named_tuple(node):
        return any(k in node._fields for k in keys) or type(node).__name__ in keys
    return isinstance(node, dict) and any(k in node for k in keys)


def _leaves_with_named_path(tree, is_leaf=None):
    """Leaves with their paths, NamedTuple fields written as `NamedTupleKey`s."""
    stop = is_leaf or (lambda _: False)
    out = []
    for path, node in tree_util.tree_leaves_with_path(
            tree, is_leaf=lambda x: stop(x) or _is_named_tuple(x)):
        if stop(node) or not _is_named_tuple(node):
            out.append((path, node))
            continue
        for field in node._fields:
            key = NamedTupleKey(type(node).__name__, field)
            out += [((*path, key, *p), v)
                    for p, v in _leaves_with_named_path(getattr(node, field), is_leaf)]
    return out


def _children_with_path(path, node):
    if _is_named_tuple(node):
        return [((*path, NamedTupleKey(type(node).__name__, f)), getattr(node, f))
                for f in node._fields]
    if isinstance(node, dict):
        return [((*path, tree_util.DictKey(k)), v) for k, v in node.items()]
    raise FuncgradValueError(f"tree_get: a subtree must be a dict or a NamedTuple, got "
                             f"{type(node).__name__}")


def _flatten_to_key(path, node, key):
    if _is_named_tuple(node):
        if key == type(node).__name__:
            return path, node
        return (*path, NamedTupleKey(type(node).__name__, key)), getattr(node, key)
    return (*path, tree_util.DictKey(key)), node[key]


def _get_all_with_path(tree, key):
    has_key = functools.partial(_has_keys, keys=(key,))
    subtrees = [(p, s) for p, s in _leaves_with_named_path(tree, is_leaf=has_key) if has_key(s)]
    found = [_flatten_to_key(p, s, key) for p, s in subtrees]
    for path, subtree in subtrees:
        for child_path, child in _children_with_path(path, subtree):
            found += [((*child_path, *p), v) for p, v in _get_all_with_path(child, key)]
    return found


def tree_get_all_with_path(tree: Any, key: Any, filtering=None) -> list[tuple[tuple, Any]]:
    """Every `(path, value)` whose last step is named `key` (a dict key, a NamedTuple field,
    or a NamedTuple class name), optionally kept only where `filtering(path, value)`.

    Example:
        >>> state = adam(1e-3).init({'w': fnp.ones(2)})
        >>> [str(p[-1]) for p, _ in tree_get_all_with_path(state, "count")]
        ['ScaleByAdamState.count', 'ScaleByLearningRateState.count']
    """
    found = _get_all_with_path(tree, key)
    if filtering:
        found = [(p, v) for p, v in found if filtering(p, v)]
    return found


def tree_get(tree: Any, key: Any, default: Any = None, filtering=None) -> Any:
    """The one value named `key` in `tree` (see `tree_get_all_with_path`), or `default`.

    Raises:
        KeyError: if several values are named `key`.
    """
    found = tree_get_all_with_path(tree, key, filtering=filtering)
    if len(found) > 1:
        raise KeyError(f"tree_get: found {len(found)} values named {key!r}; pass `filtering` "
                       "to choose one")
    return found[0][1] if found else default


def _step_name(key):
    if isinstance(key, tree_util.DictKey):
        return key.key
    if isinstance(key, tree_util.GetAttrKey):
        return key.name
    if isinstance(key, tree_util.SequenceKey):
        return key.idx
    if isinstance(key, NamedTupleKey):
        return key.name
    return key.key


def _set_children(node, children):
    if _is_named_tuple(node):
        return node._replace(**children)
    return children


def tree_set(tree: Any, filtering=None, /, **kwargs: Any) -> Any:
    """A copy of `tree` with the values named by the keywords replaced.

    Raises:
        KeyError: if a keyword names nothing in `tree`.

    Example:
        >>> opt = inject_hyperparams(sgd)(learning_rate=0.1)
        >>> state = tree_set(opt.init(params), learning_rate=0.01)
    """
    for key in kwargs:
        if not tree_get_all_with_path(tree, key, filtering):
            raise KeyError(f"tree_set: found no value named {key!r}"
                           + (" matching the filtering" if filtering else ""))
    has_any = functools.partial(_has_keys, keys=tuple(kwargs))

    def replace(path, node):
        if not has_any(node):
            return node
        if (_is_named_tuple(node) and type(node).__name__ in kwargs
                and (filtering is None or filtering(path, node))):
            return kwargs[type(node).__name__]
        children = {}
        for child_path, child in _children_with_path(path, node):
            name = _step_name(child_path[-1])
            if name in kwargs and (filtering is None or filtering(child_path, child)):
                children[name] = kwargs[name]
            elif isinstance(child, (dict, list, tuple)):
                children[name] = replace(child_path, child)
            else:
                children[name] = child
        return _set_children(node, children)

    _, treedef = tree_util.tree_flatten(tree, is_leaf=has_any)
    return treedef.unflatten([replace(p, n)
                              for p, n in _leaves_with_named_path(tree, is_leaf=has_any)])
