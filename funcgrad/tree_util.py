"""Pytrees: flattening nested containers to leaves and back, the node registry, tree_map.

The public API. The machinery (key entries, registry tables, the flat structure records,
iterative walks, `PyTreeDef` and the structure-mismatch messages shared by jit, optimizers
and checkpoint loading through `first_mismatch(treedef_a, treedef_b) -> str | None`) lives in
`funcgrad._pytree`; every name is re-exported here. Depth is limited by memory only.
Depends only on the Python standard library; must not import numpy or any other funcgrad module.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, TypeVar

from funcgrad._pytree import (  # noqa: F401  (some private names serve jit)
    _LEAF,
    DictKey,
    FlattenedIndexKey,
    GetAttrKey,
    HashableNodes,
    PyTreeDef,
    SequenceKey,
    TreeStructureError,
    _flatten,
    _flatten_any,
    _flatten_up_to,
    _flatten_with_path,
    _fold,
    _register,
    _registry,
    _unflatten,
    _unflattener,
    first_mismatch,
    keystr,
    treedef_is_leaf,
)

__all__ = [
    "DictKey",
    "FlattenedIndexKey",
    "GetAttrKey",
    "PyTreeDef",
    "SequenceKey",
    "TreeStructureError",
    "all_leaves",
    "first_mismatch",
    "keystr",
    "register_dataclass",
    "register_pytree_node",
    "register_pytree_with_keys",
    "tree_all",
    "tree_broadcast",
    "tree_flatten",
    "tree_flatten_with_path",
    "tree_leaves",
    "tree_leaves_with_path",
    "tree_map",
    "tree_map_with_path",
    "tree_reduce",
    "tree_structure",
    "tree_transpose",
    "tree_unflatten",
    "treedef_is_leaf",
]

# ---------------------------------------------------------------------------------------------
# Registering node types


def register_pytree_node(
    nodetype: type,
    flatten_func: Callable[[Any], tuple[Iterable[Any], Hashable]],
    unflatten_func: Callable[[Hashable, Iterable[Any]], Any],
    flatten_with_keys_func: Callable[[Any], tuple[Iterable[tuple[Any, Any]], Hashable]]
    | None = None,
) -> None:
    """Registers a class as a pytree node (instances are containers, not leaves).

    Args:
      nodetype: the class; only exact instances match (subclasses are separate).
      flatten_func: `x -> (children, aux_data)`; `aux_data` becomes part of the treedef,
        so it must be hashable and compare with `==` (no arrays).
      unflatten_func: `(aux_data, children) -> x`.
      flatten_with_keys_func: optional `x -> (((key, child), ...), aux_data)`, giving the
        children's path keys (see `register_pytree_with_keys`).

    Raises:
      ValueError: if `nodetype` is already a pytree node.

    Example:
      >>> class Pair:
      ...     def __init__(self, a, b):
      ...         self.a, self.b = a, b
      >>> register_pytree_node(Pair, lambda p: ((p.a, p.b), None), lambda _, c: Pair(*c))
      >>> tree_leaves(Pair(1, (2, 3)))
      [1, 2, 3]
    """
    _register(nodetype, flatten_func, unflatten_func, flatten_with_keys_func)


def register_pytree_with_keys(
    nodetype: type,
    flatten_with_keys: Callable[[Any], tuple[Iterable[tuple[Any, Any]], Hashable]],
    unflatten_func: Callable[[Hashable, Iterable[Any]], Any],
    flatten_func: Callable[[Any], tuple[Iterable[Any], Hashable]] | None = None,
) -> None:
    """Registers a pytree node whose children carry path keys.

    Paths from `tree_flatten_with_path` use these keys; messages built from treedefs alone
    (`first_mismatch`) use `FlattenedIndexKey` for this node, since keys are not stored.

    Args:
      nodetype: the class.
      flatten_with_keys: `x -> (((key, child), ...), aux_data)`.
      unflatten_func: `(aux_data, children) -> x`.
      flatten_func: optional faster `x -> (children, aux_data)`; derived if omitted.

    Example:
      >>> class KeyedPair:
      ...     def __init__(self, a, b):
      ...         self.a, self.b = a, b
      >>> register_pytree_with_keys(
      ...     KeyedPair, lambda p: (((GetAttrKey('a'), p.a), (GetAttrKey('b'), p.b)), None),
      ...     lambda _, c: KeyedPair(*c))
      >>> keystr(tree_flatten_with_path(KeyedPair(1, 2))[0][1][0])
      '.b'
    """
    if flatten_func is None:

        def flatten_func(x):
            pairs, aux = flatten_with_keys(x)
            return [child for _, child in pairs], aux

    _register(nodetype, flatten_func, unflatten_func, flatten_with_keys)


def _dataclass_fields(cls, data_fields, meta_fields, drop_fields):
    if data_fields is None and meta_fields is None:
        fields = [f for f in dataclasses.fields(cls) if f.init and f.name not in drop_fields]
        data = [f.name for f in fields if not f.metadata.get("static", False)]
        meta = [f.name for f in fields if f.metadata.get("static", False)]
        return tuple(data), tuple(meta)
    data, meta = tuple(data_fields or ()), tuple(meta_fields or ())
    if dataclasses.is_dataclass(cls):
        init = {f.name for f in dataclasses.fields(cls) if f.init} - set(drop_fields)
        given = set(data) | set(meta)
        if given != init or len(given) != len(data) + len(meta):
            raise ValueError(
                f"register_dataclass({cls.__qualname__}): data_fields and meta_fields must "
                f"name each init field exactly once; init fields {sorted(init)}, "
                f"got data {list(data)} and meta {list(meta)}."
            )
    return data, meta


def register_dataclass(
    nodetype: type | None = None,
    data_fields: Sequence[str] | None = None,
    meta_fields: Sequence[str] | None = None,
    drop_fields: Sequence[str] = (),
):
    """Registers a dataclass as a pytree node; usable as a decorator, with or without args.

    Data fields are children; meta fields go into the aux data (so they must be hashable).
    With neither list given, fields with `metadata={'static': True}` are meta and the other
    init fields are data. Unflattening calls the class's `__init__` with keyword arguments.

    Args:
      nodetype: the class (omit to get a decorator).
      data_fields: names of the fields that are children.
      meta_fields: names of the fields stored in the treedef.
      drop_fields: init fields left out of both (they take their defaults on unflatten).

    Returns:
      `nodetype`, or a decorator when `nodetype` is None.

    Raises:
      ValueError: if the fields do not cover the init fields exactly, or on re-registration.

    Example:
      >>> @register_dataclass(data_fields=['w'], meta_fields=['act'])
      ... @dataclasses.dataclass
      ... class Layer:
      ...     w: Any
      ...     act: str
      >>> tree_flatten(Layer(1.0, 'relu'))[0]
      [1.0]
    """
    if nodetype is None:
        return functools.partial(
            register_dataclass,
            data_fields=data_fields,
            meta_fields=meta_fields,
            drop_fields=drop_fields,
        )
    data, meta = _dataclass_fields(nodetype, data_fields, meta_fields, drop_fields)

    def flatten(x):
        return [getattr(x, n) for n in data], tuple([getattr(x, n) for n in meta])

    def flatten_with_keys(x):
        return [(GetAttrKey(n), getattr(x, n)) for n in data], tuple(getattr(x, n) for n in meta)

    def unflatten(aux, children):
        return nodetype(**dict(zip(meta, aux)), **dict(zip(data, children)))

    data_keys = tuple(GetAttrKey(n) for n in data)
    _register(nodetype, flatten, unflatten, flatten_with_keys, lambda aux, n: data_keys)
    return nodetype



# ---------------------------------------------------------------------------------------------
# The public functions


def tree_flatten(tree: Any, is_leaf: Callable[[Any], bool] | None = None):
    """Flattens a pytree into its leaves and its structure.

    Containers are tuple, list, dict (children in sorted key order; keys of mixed types
    that cannot be compared are ordered by `(type module, type name, repr(key))`),
    OrderedDict and defaultdict, namedtuple, None (a node with no children) and
    registered classes. Anything else, including unregistered subclasses of dict or
    list, is a leaf.

    Args:
      tree: the pytree.
      is_leaf: optional predicate called on each subtree first; True makes it a leaf.

    Returns:
      `(leaves, treedef)` with leaves in depth-first order.

    Example:
      >>> tree_flatten({'b': (2, 3), 'a': 1})
      ([1, 2, 3], PyTreeDef({'a': *, 'b': (*, *)}))
    """
    leaves: list[Any] = []
    nodes = _flatten_any(tree, leaves, is_leaf)
    return leaves, PyTreeDef(nodes, len(leaves))


def tree_unflatten(treedef: PyTreeDef, leaves: Iterable[Any]) -> Any:
    """Builds a pytree of structure `treedef` from `leaves`.

    Raises:
      ValueError: if the number of leaves differs from `treedef.num_leaves`.

    Example:
      >>> tree_unflatten(tree_structure({'a': 0, 'b': (0, 0)}), [1, 2, 3])
      {'a': 1, 'b': (2, 3)}
    """
    return treedef.unflatten(leaves)


def tree_leaves(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> list[Any]:
    """The leaves of a pytree in flattening order.

    Example:
      >>> tree_leaves([1, (2, None), {'x': 3}])
      [1, 2, 3]
    """
    leaves: list[Any] = []
    _flatten_any(tree, leaves, is_leaf)
    return leaves


def tree_structure(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> PyTreeDef:
    """The treedef of a pytree.

    Example:
      >>> tree_structure((1, [2, 3]))
      PyTreeDef((*, [*, *]))
    """
    return tree_flatten(tree, is_leaf)[1]


def _leaves_of_rest(treedef: PyTreeDef, rest: Sequence[Any], who: str) -> list[list[Any]]:
    """Leaves of each tree in `rest`, cut at the leaves of `treedef` (a prefix of each)."""
    out = []
    for position, tree in enumerate(rest, start=1):
        leaves: list[Any] = []
        if _flatten(tree, leaves) != treedef._nodes:  # slow path: prefix or mismatch
            leaves = []
            message = _flatten_up_to(treedef._nodes, tree, leaves)
            if message is not None:
                which = f" (tree {position} vs tree 0)" if len(rest) > 1 else ""
                raise TreeStructureError(f"{who}: structures differ {message}{which}")
        out.append(leaves)
    return out


def tree_map(
    f: Callable[..., Any],
    tree: Any,
    *rest: Any,
    is_leaf: Callable[[Any], bool] | None = None,
) -> Any:
    """Applies `f` leafwise over one or more trees of the same structure.

    As in JAX, the structure of `tree` must be a prefix of each tree in `rest`: where
    `tree` has a leaf, the others may hold a whole subtree, which is passed to `f`.

    Args:
      f: called as `f(leaf, *leaves_of_rest)`.
      tree: the tree that gives the output structure; `is_leaf` applies to it alone.
      *rest: more trees.
      is_leaf: optional predicate marking subtrees of `tree` as leaves.

    Returns:
      A tree of `tree`'s structure holding the results.

    Raises:
      TreeStructureError: (a ValueError) naming the first path where a tree differs.

    Example:
      >>> tree_map(lambda x, y: x + y, {'a': 1, 'b': (2, 3)}, {'a': 10, 'b': (20, 30)})
      {'a': 11, 'b': (22, 33)}
    """
    leaves, treedef = tree_flatten(tree, is_leaf)
    if not rest:
        return treedef.unflatten([f(x) for x in leaves])
    others = _leaves_of_rest(treedef, rest, "tree_map")
    return treedef.unflatten([f(*xs) for xs in zip(leaves, *others)])


def tree_flatten_with_path(tree: Any, is_leaf: Callable[..., bool] | None = None,
                           is_leaf_takes_path: bool = False):
    """Like `tree_flatten`, but each leaf comes with its key path (`is_leaf` is called as
    `is_leaf(path, x)` when `is_leaf_takes_path`).

    Returns:
      `([(path, leaf), ...], treedef)`, each path a tuple of key entries.

    Example:
      >>> pairs, _ = tree_flatten_with_path({'a': [1, 2]})
      >>> [(keystr(p), x) for p, x in pairs]
      [("['a'][0]", 1), ("['a'][1]", 2)]
    """
    pairs: list[tuple[tuple[Any, ...], Any]] = []
    nodes = _flatten_with_path(tree, pairs, is_leaf, is_leaf_takes_path)
    return pairs, PyTreeDef(nodes, len(pairs))


def tree_leaves_with_path(tree: Any, is_leaf: Callable[..., bool] | None = None,
                          is_leaf_takes_path: bool = False):
    """The `(path, leaf)` pairs of `tree`, as `tree_flatten_with_path(tree)[0]`.

    Example:
      >>> [(keystr(p), x) for p, x in tree_leaves_with_path({'a': (1, 2)})]
      [("['a'][0]", 1), ("['a'][1]", 2)]
    """
    return tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)[0]


def tree_broadcast(prefix_tree: Any, full_tree: Any,
                   is_leaf: Callable[[Any], bool] | None = None) -> Any:
    """Broadcasts `prefix_tree` to the structure of `full_tree`: each leaf of `prefix_tree` is
    repeated over the subtree of `full_tree` at its place (as `jax.tree.broadcast`).

    Raises:
      TreeStructureError: if `prefix_tree`'s structure is not a prefix of `full_tree`'s.

    Example:
      >>> tree_broadcast([1, 2], [(0, 0), {'a': 0}])
      [(1, 1), {'a': 2}]
    """
    leaves, treedef = tree_flatten(prefix_tree, is_leaf)
    subtrees = _leaves_of_rest(treedef, [full_tree], "tree_broadcast")[0]
    return treedef.unflatten([tree_map(lambda _, x=x: x, sub, is_leaf=is_leaf)
                              for x, sub in zip(leaves, subtrees)])


def tree_map_with_path(
    f: Callable[..., Any],
    tree: Any,
    *rest: Any,
    is_leaf: Callable[..., bool] | None = None,
    is_leaf_takes_path: bool = False,
) -> Any:
    """Like `tree_map`, but `f` is called as `f(path, leaf, *leaves_of_rest)` (and `is_leaf`
    as `is_leaf(path, x)` when `is_leaf_takes_path`).

    Example:
      >>> tree_map_with_path(lambda p, x: keystr(p), {'a': (0, 0)})
      {'a': ("['a'][0]", "['a'][1]")}
    """
    pairs, treedef = tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)
    others = _leaves_of_rest(treedef, rest, "tree_map_with_path")
    return treedef.unflatten([f(p, x, *xs) for (p, x), *xs in zip(pairs, *others)])


_NO_INITIAL = object()


def tree_reduce(
    function: Callable[[Any, Any], Any],
    tree: Any,
    initializer: Any = _NO_INITIAL,
    is_leaf: Callable[[Any], bool] | None = None,
) -> Any:
    """Reduces the leaves of a tree with a binary function, left to right.

    Example:
      >>> tree_reduce(lambda a, b: a + b, {'a': 1, 'b': (2, 3)})
      6
    """
    leaves = tree_leaves(tree, is_leaf)
    if initializer is _NO_INITIAL:
        return functools.reduce(function, leaves)
    return functools.reduce(function, leaves, initializer)


def tree_all(tree: Any, *, is_leaf: Callable[[Any], bool] | None = None) -> bool:
    """True if every leaf is truthy (True for a tree with no leaves).

    Example:
      >>> tree_all({'a': True, 'b': (1, 0)})
      False
    """
    return all(tree_leaves(tree, is_leaf))


def all_leaves(iterable: Iterable[Any], is_leaf: Callable[[Any], bool] | None = None) -> bool:
    """True if each element of `iterable` is a leaf.

    Example:
      >>> all_leaves([1.0, 'a']), all_leaves([1.0, (2.0,)])
      (True, False)
    """
    return all(_flatten_any(x, [], is_leaf)[0] is None for x in iterable)


def tree_transpose(outer_treedef: PyTreeDef, inner_treedef: PyTreeDef | None,
                   pytree_to_transpose: Any):
    """Turns an outer tree of inner trees into an inner tree of outer trees.

    Args:
      outer_treedef: the outer structure.
      inner_treedef: the structure at each outer leaf; inferred from the first if None.
      pytree_to_transpose: the tree to transpose (JAX's name for this argument).

    Raises:
      TreeStructureError: if `pytree_to_transpose` does not have the outer-of-inner structure.

    Example:
      >>> tree_transpose(tree_structure([0, 0]), tree_structure((0, 0)), [(1, 2), (3, 4)])
      ([1, 3], [2, 4])
    """
    inners = outer_treedef.flatten_up_to(pytree_to_transpose)
    if inner_treedef is None:
        inner_treedef = tree_structure(inners[0]) if inners else _LEAF
    columns = [inner_treedef.flatten_up_to(inner) for inner in inners]
    rows = zip(*columns) if columns else [()] * inner_treedef.num_leaves
    return inner_treedef.unflatten([outer_treedef.unflatten(row) for row in rows])


# ---------------------------------------------------------------------------------------------
# Classes as nodes: decorators, static classes and `Partial`


def register_pytree_node_class(cls: type) -> type:
    """Registers a class whose instances flatten with `self.tree_flatten()` (returning
    `(children, aux_data)`) and unflatten with the classmethod
    `cls.tree_unflatten(aux_data, children)`; returns `cls`, so it works as a decorator.

    Example:
      >>> @register_pytree_node_class
      ... class Pair:
      ...     def __init__(self, a, b):
      ...         self.a, self.b = a, b
      ...     def tree_flatten(self):
      ...         return (self.a, self.b), None
      ...     @classmethod
      ...     def tree_unflatten(cls, aux, children):
      ...         return cls(*children)
      >>> tree_leaves(Pair(1, (2, 3)))
      [1, 2, 3]
    """
    register_pytree_node(cls, lambda x: x.tree_flatten(), cls.tree_unflatten)
    return cls


def register_pytree_with_keys_class(cls: type) -> type:
    """`register_pytree_node_class` for a class whose `tree_flatten_with_keys()` returns
    `(((key, child), ...), aux_data)`, giving its children's path keys; a `tree_flatten`
    method, if the class has one, is the faster flatten. Returns `cls`.

    Example:
      >>> @register_pytree_with_keys_class
      ... class Named:
      ...     def __init__(self, w):
      ...         self.w = w
      ...     def tree_flatten_with_keys(self):
      ...         return ((GetAttrKey('w'), self.w),), None
      ...     @classmethod
      ...     def tree_unflatten(cls, aux, children):
      ...         return cls(*children)
      >>> keystr(tree_flatten_with_path(Named(1))[0][0][0])
      '.w'
    """
    flatten = (lambda x: x.tree_flatten()) if hasattr(cls, "tree_flatten") else None
    register_pytree_with_keys(cls, lambda x: x.tree_flatten_with_keys(), cls.tree_unflatten,
                              flatten)
    return cls


def register_static(cls: type) -> type:
    """Registers `cls` as a pytree node with no leaves: an instance is part of the tree's
    structure, so `jit` treats it as a static value (it must be hashable). Returns `cls`.

    Example:
      >>> @register_static
      ... class Mode(str):
      ...     pass
      >>> tree_leaves([1, Mode("add")])
      [1]
    """
    register_pytree_with_keys(cls, lambda x: ((), x), lambda x, _: x)
    return cls


class _HashableCallableShim:
    """A callable compared and hashed by the callable it holds (a `functools.partial` given
    to `Partial`, so that `functools.partial` does not merge it into the new one)."""

    def __init__(self, fun):
        self.fun = fun

    def __call__(self, *args, **kw):
        return self.fun(*args, **kw)

    def __hash__(self):
        return hash(self.fun)

    def __eq__(self, other):
        return self.fun == (other.fun if isinstance(other, _HashableCallableShim) else other)


class Partial(functools.partial):
    """`functools.partial` as a pytree: the bound arguments are its children (their leaves
    are traced), the function is static. So a partially applied function can be passed to
    and returned from transformed functions (`jit(lambda f, x: f(x))(Partial(fnp.add, 1),
    2)`), as JAX's `Partial`.

    Example:
      >>> divide_7 = Partial(divmod, 7)
      >>> divide_7(2), tree_leaves(divide_7)
      ((3, 1), [7])
    """

    def __new__(cls, func, *args, **kw):
        if isinstance(func, functools.partial):  # keep its arguments out of this pytree
            original = func
            func = _HashableCallableShim(original)
            out = super().__new__(cls, func, *args, **kw)
            func.func, func.args = original.func, original.args
            func.keywords = original.keywords
            return out
        return super().__new__(cls, func, *args, **kw)


register_pytree_node(Partial, lambda p: ((p.args, p.keywords), p.func),
                     lambda func, xs: Partial(func, *xs[0], **xs[1]))

__all__ += ["Partial", "register_pytree_node_class", "register_pytree_with_keys_class",
            "register_static"]

# The types of a key path, as JAX's (for annotations): one entry (`DictKey`, `SequenceKey`,
# `GetAttrKey`, `FlattenedIndexKey`, ...) and the tuple `tree_flatten_with_path` gives.
KeyEntry = TypeVar("KeyEntry", bound=Any)
KeyPath = tuple[KeyEntry, ...]
__all__ += ["KeyEntry", "KeyPath"]
