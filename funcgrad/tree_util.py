"""Pytrees: flattening nested containers to leaves and back, the node registry, tree_map.

Owns `PyTreeDef` (the hashable structure used as a jit cache key), key paths and the
structure-mismatch messages shared by jit, optimizers and checkpoint loading through
`first_mismatch(treedef_a: PyTreeDef, treedef_b: PyTreeDef) -> str | None`.
Depends only on the Python standard library; must not import numpy or any other funcgrad module.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, NamedTuple

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
    "tree_flatten",
    "tree_flatten_with_path",
    "tree_leaves",
    "tree_map",
    "tree_map_with_path",
    "tree_reduce",
    "tree_structure",
    "tree_transpose",
    "tree_unflatten",
    "treedef_is_leaf",
]

_NoneType = type(None)
# A node is `None` for a leaf, else `(node_type, aux_data, children)` with `children` a tuple
# of nodes. Nested tuples give C-speed hashing and equality for the jit cache.
_NONE_NODE = (_NoneType, None, ())


class TreeStructureError(ValueError):
    """Raised when two pytrees that must share a structure do not."""


# ---------------------------------------------------------------------------------------------
# Key entries and key paths


@dataclasses.dataclass(frozen=True, slots=True)
class DictKey:
    """Path entry for a mapping child: prints as `['a']`."""

    key: Hashable

    def __str__(self) -> str:
        return f"[{self.key!r}]"


@dataclasses.dataclass(frozen=True, slots=True)
class SequenceKey:
    """Path entry for a tuple or list child: prints as `[0]`."""

    idx: int

    def __str__(self) -> str:
        return f"[{self.idx}]"


@dataclasses.dataclass(frozen=True, slots=True)
class GetAttrKey:
    """Path entry for a namedtuple field or dataclass attribute: prints as `.name`."""

    name: str

    def __str__(self) -> str:
        return f".{self.name}"


@dataclasses.dataclass(frozen=True, slots=True)
class FlattenedIndexKey:
    """Path entry for a child of a registered node without keys: prints as `[0]`."""

    key: int

    def __str__(self) -> str:
        return f"[{self.key}]"


def _simple_key(entry: Any) -> str:
    for field in ("key", "idx", "name"):
        if hasattr(entry, field):
            return str(getattr(entry, field))
    return str(entry)


def keystr(keys: Sequence[Any], *, simple: bool = False, separator: str = "") -> str:
    """Renders a key path as a string.

    Args:
      keys: a key path, e.g. from `tree_flatten_with_path`.
      simple: if True, render each entry as its bare key (`a`, `0`, `field`).
      separator: placed between entries (most useful with `simple=True`).

    Returns:
      The path in JAX style; the empty path gives `''`.

    Example:
      >>> keystr((DictKey('a'), SequenceKey(0), GetAttrKey('w')))
      "['a'][0].w"
      >>> keystr((DictKey('a'), SequenceKey(0)), simple=True, separator='/')
      'a/0'
    """
    render = _simple_key if simple else str
    return separator.join(render(k) for k in keys)


# ---------------------------------------------------------------------------------------------
# The registry


class _NodeType(NamedTuple):
    flatten: Callable[[Any], tuple[Iterable[Any], Hashable]]
    unflatten: Callable[[Hashable, Iterable[Any]], Any]
    flatten_with_keys: Callable[[Any], tuple[Iterable[tuple[Any, Any]], Hashable]] | None
    child_keys: Callable[[Hashable, int], Sequence[Any]] | None  # keys known from aux alone


_registry: dict[type, _NodeType] = {}
_BUILTIN_NODES = (tuple, list, dict, _NoneType)
# Types already found to be leaves, so the hot path spends one set lookup on each leaf.
# `_register` removes the type it registers; the set is cleared if classes made on the fly
# pile up in it.
_leaf_types: set[type] = {int, float, complex, bool, str, bytes}
_MAX_LEAF_TYPES = 4096


def _register(cls, flatten, unflatten, flatten_with_keys=None, child_keys=None) -> None:
    if cls in _BUILTIN_NODES or cls in _registry:
        raise ValueError(f"Duplicate pytree node registration for {cls.__qualname__}.")
    _registry[cls] = _NodeType(flatten, unflatten, flatten_with_keys, child_keys)
    _leaf_types.discard(cls)


def register_pytree_node(
    nodetype: type,
    flatten_func: Callable[[Any], tuple[Iterable[Any], Hashable]],
    unflatten_func: Callable[[Hashable, Iterable[Any]], Any],
) -> None:
    """Registers a class as a pytree node (instances are containers, not leaves).

    Args:
      nodetype: the class; only exact instances match (subclasses are separate).
      flatten_func: `x -> (children, aux_data)`; `aux_data` becomes part of the treedef,
        so it must be hashable and compare with `==` (no arrays).
      unflatten_func: `(aux_data, children) -> x`.

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
    _register(nodetype, flatten_func, unflatten_func)


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


def _mapping_keys(aux, n):
    return [DictKey(k) for k in aux]


_register(
    OrderedDict,
    lambda x: (list(x.values()), tuple(x)),
    lambda keys, values: OrderedDict(zip(keys, values)),
    child_keys=_mapping_keys,
)


def _defaultdict_flatten(x):
    keys = _sorted_keys(x)
    return [x[k] for k in keys], (x.default_factory, keys)


_register(
    defaultdict,
    _defaultdict_flatten,
    lambda aux, values: defaultdict(aux[0], zip(aux[1], values)),
    child_keys=lambda aux, n: _mapping_keys(aux[1], n),
)


# ---------------------------------------------------------------------------------------------
# Flattening


def _fallback_order(key):
    return (type(key).__module__, type(key).__qualname__, repr(key))


def _sorted_keys(d) -> tuple:
    try:
        return tuple(sorted(d))
    except TypeError:  # keys of mixed, non-comparable types
        return tuple(sorted(d, key=_fallback_order))


def _is_namedtuple(t: type) -> bool:
    return issubclass(t, tuple) and hasattr(t, "_fields")


def _other_parts(x, t):
    """`_shallow` for a type that is not tuple, list, dict or None."""
    node_type = _registry.get(t)
    if node_type is not None:
        children, aux = node_type.flatten(x)
        if type(children) is not list and type(children) is not tuple:
            children = list(children)
        return t, aux, children
    if _is_namedtuple(t):
        return t, None, x
    if len(_leaf_types) >= _MAX_LEAF_TYPES:
        _leaf_types.clear()
    _leaf_types.add(t)
    return None


def _shallow(x):
    """One level of flattening: `(node_type, aux, children)`, or None for a leaf."""
    t = type(x)
    if t is tuple or t is list:
        return t, None, x
    if t is dict:
        keys = _sorted_keys(x)
        return dict, keys, [x[k] for k in keys]
    if x is None:
        return _NONE_NODE
    return None if t in _leaf_types else _other_parts(x, t)


def _flatten(x, leaves):
    """Appends the leaves of `x` to `leaves` and returns its node. The hot path of jit."""
    t = type(x)
    if t is tuple or t is list:
        aux, children = None, x
    elif t is dict:
        aux = _sorted_keys(x)
        children = [x[k] for k in aux]
    elif t in _leaf_types:
        leaves.append(x)
        return None
    elif x is None:
        return _NONE_NODE
    else:
        parts = _other_parts(x, t)
        if parts is None:
            leaves.append(x)
            return None
        t, aux, children = parts
    nodes = []
    for c in children:  # leaf children inline: saves a call per leaf
        if type(c) in _leaf_types:
            leaves.append(c)
            nodes.append(None)
        else:
            nodes.append(_flatten(c, leaves))
    return (t, aux, tuple(nodes))


def _flatten_is_leaf(x, leaves, is_leaf):
    if is_leaf(x):
        leaves.append(x)
        return None
    parts = _shallow(x)
    if parts is None:
        leaves.append(x)
        return None
    t, aux, children = parts
    return (t, aux, tuple([_flatten_is_leaf(c, leaves, is_leaf) for c in children]))


def _flatten_any(x, leaves, is_leaf):
    return _flatten(x, leaves) if is_leaf is None else _flatten_is_leaf(x, leaves, is_leaf)


def _child_keys(t, aux, n) -> Sequence[Any]:
    if t is tuple or t is list:
        return [SequenceKey(i) for i in range(n)]
    if t is dict:
        return [DictKey(k) for k in aux]
    node_type = _registry.get(t)
    if node_type is not None:
        if node_type.child_keys is not None:
            return node_type.child_keys(aux, n)
        return [FlattenedIndexKey(i) for i in range(n)]
    if _is_namedtuple(t):
        return [GetAttrKey(f) for f in t._fields]
    return []  # None


def _flatten_with_path(x, path, out, is_leaf):
    if is_leaf is not None and is_leaf(x):
        out.append((path, x))
        return None
    node_type = _registry.get(type(x))
    if node_type is not None and node_type.flatten_with_keys is not None:
        pairs, aux = node_type.flatten_with_keys(x)
        pairs = list(pairs)
        t, keys, children = type(x), [k for k, _ in pairs], [c for _, c in pairs]
    else:
        shallow = _shallow(x)
        if shallow is None:
            out.append((path, x))
            return None
        t, aux, children = shallow
        keys = _child_keys(t, aux, len(children))
    nodes = [_flatten_with_path(c, path + (k,), out, is_leaf) for k, c in zip(keys, children)]
    return (t, aux, tuple(nodes))


def _unflatten(node, leaves):
    """Builds the tree of a non-leaf `node`, taking its leaves from the iterator `leaves`."""
    t, aux, children = node
    values = [next(leaves) if c is None else _unflatten(c, leaves) for c in children]
    if t is tuple:
        return tuple(values)
    if t is list:
        return values
    if t is dict:
        return dict(zip(aux, values))
    if t is _NoneType:
        return None
    node_type = _registry.get(t)
    if node_type is not None:
        return node_type.unflatten(aux, values)
    return t(*values)  # namedtuple


def _count_leaves(node) -> int:
    if node is None:
        return 1
    return sum(_count_leaves(c) for c in node[2])


# ---------------------------------------------------------------------------------------------
# Describing structures in messages

_MAX_KEYS_SHOWN = 8


def _keys_str(keys) -> str:
    shown = ", ".join(repr(k) for k in list(keys)[:_MAX_KEYS_SHOWN])
    extra = len(keys) - _MAX_KEYS_SHOWN
    return f"[{shown}, ... (+{extra} more)]" if extra > 0 else f"[{shown}]"


def _mapping_keys_of(t, aux):
    """The keys of a dict, OrderedDict or defaultdict node; None for other node types."""
    if t is dict or t is OrderedDict:
        return aux
    return aux[1] if t is defaultdict else None


def _describe(t, aux, n) -> str:
    if t is _NoneType:
        return "None"
    keys = _mapping_keys_of(t, aux)
    if keys is not None:
        return f"{'an' if t is OrderedDict else 'a'} {t.__name__} with keys {_keys_str(keys)}"
    children = f"{n} {'child' if n == 1 else 'children'}"
    if t is tuple or t is list:
        return f"a {t.__name__} of {children}"
    if t not in _registry:
        return f"a namedtuple {t.__qualname__} of {children}"
    return f"a {t.__qualname__} node of {children} with aux data {aux!r}"


def _describe_node(node) -> str:
    return "a leaf" if node is None else _describe(node[0], node[1], len(node[2]))


def _describe_value(x) -> str:
    shallow = _shallow(x)
    if shallow is None:
        return f"a leaf of type {type(x).__qualname__}"
    return _describe(shallow[0], shallow[1], len(shallow[2]))


def _dict_key_diff(expected, got) -> str:
    missing = [k for k in expected if k not in got]
    extra = [k for k in got if k not in expected]
    parts = [f"missing {_keys_str(missing)}"] if missing else []
    parts += [f"unexpected {_keys_str(extra)}"] if extra else []
    return f" ({', '.join(parts)})" if parts else ""


def _mismatch_text(path, expected_node, got_shallow, got_text) -> str:
    where = f"at path {keystr(path)}" if path else "at the root"
    text = f"{where}: expected {_describe_node(expected_node)}, got {got_text}"
    if expected_node is not None and got_shallow is not None:
        t = expected_node[0]
        keys = _mapping_keys_of(t, expected_node[1])
        if keys is not None and got_shallow[0] is t:
            text += _dict_key_diff(keys, _mapping_keys_of(t, got_shallow[1]))
    return text


def _first_mismatch(a, b, path):
    if a == b:
        return None
    if a is None or b is None or a[0] is not b[0] or a[1] != b[1] or len(a[2]) != len(b[2]):
        return _mismatch_text(path, a, b, _describe_node(b))
    keys = _child_keys(a[0], a[1], len(a[2]))
    for key, child_a, child_b in zip(keys, a[2], b[2]):
        message = _first_mismatch(child_a, child_b, path + (key,))
        if message is not None:
            return message
    return None


def first_mismatch(treedef_a: PyTreeDef, treedef_b: PyTreeDef) -> str | None:
    """Describes the first place (in flattening order) where two tree structures differ.

    Callers prefix their own context, e.g. `f"jit: argument structures differ {msg}"`.

    Args:
      treedef_a: the expected structure.
      treedef_b: the structure found.

    Returns:
      None if the structures are equal, else `"at path <keystr>: expected <a>, got <b>"`
      (or `"at the root: ..."`).

    Example:
      >>> first_mismatch(tree_structure({'b': (1, 2)}), tree_structure({'b': [1, 2, 3]}))
      "at path ['b']: expected a tuple of 2 children, got a list of 3 children"
    """
    return _first_mismatch(treedef_a._node, treedef_b._node, ())


def _flatten_up_to(node, x, path, out):
    """Appends the subtrees of `x` at `node`'s leaves to `out`; returns an error or None."""
    if node is None:
        out.append(x)
        return None
    t, aux, children = node
    shallow = _shallow(x)
    if (
        shallow is None
        or shallow[0] is not t
        or shallow[1] != aux
        or len(shallow[2]) != len(children)
    ):
        return _mismatch_text(path, node, shallow, _describe_value(x))
    keys = _child_keys(t, aux, len(children))
    for key, child, sub in zip(keys, children, shallow[2]):
        message = _flatten_up_to(child, sub, path + (key,), out)
        if message is not None:
            return message
    return None


# ---------------------------------------------------------------------------------------------
# PyTreeDef


def _repr_node(node) -> str:
    if node is None:
        return "*"
    t, aux, children = node
    parts = [_repr_node(c) for c in children]
    if t is tuple:
        return f"({parts[0]},)" if len(parts) == 1 else f"({', '.join(parts)})"
    if t is list:
        return f"[{', '.join(parts)}]"
    if t is _NoneType:
        return "None"
    keys = _mapping_keys_of(t, aux)
    if keys is not None:
        body = "{" + ", ".join(f"{k!r}: {p}" for k, p in zip(keys, parts)) + "}"
        if t is dict:
            return body
        return f"OrderedDict({body})" if t is OrderedDict else f"defaultdict({aux[0]!r}, {body})"
    if t not in _registry:
        fields = ", ".join(f"{f}={p}" for f, p in zip(t._fields, parts))
        return f"{t.__name__}({fields})"
    return f"CustomNode({t.__name__}[{aux!r}], [{', '.join(parts)}])"


class PyTreeDef:
    """The structure of a pytree: everything but its leaves. Immutable and hashable.

    Two treedefs are equal when their container types, dict keys, namedtuple types and
    registered aux data are equal; the hash is computed once and cached.

    Example:
      >>> tree_structure({'a': 1, 'b': (2, 3)})
      PyTreeDef({'a': *, 'b': (*, *)})
    """

    __slots__ = ("_hash", "_node", "_num_leaves")

    def __init__(self, node, num_leaves: int | None = None):
        object.__setattr__(self, "_node", node)
        if num_leaves is None:
            num_leaves = _count_leaves(node)
        object.__setattr__(self, "_num_leaves", num_leaves)
        object.__setattr__(self, "_hash", None)

    def __setattr__(self, name, value):
        raise AttributeError("PyTreeDef is immutable")

    def __delattr__(self, name):
        raise AttributeError("PyTreeDef is immutable")

    def __reduce__(self):
        return PyTreeDef, (self._node, self._num_leaves)

    def __eq__(self, other):
        if not isinstance(other, PyTreeDef):
            return NotImplemented
        return self is other or self._node == other._node

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            h = hash(self._node)
            object.__setattr__(self, "_hash", h)
        return h

    def __repr__(self) -> str:
        return f"PyTreeDef({_repr_node(self._node)})"

    @property
    def num_leaves(self) -> int:
        """The number of leaves."""
        return self._num_leaves

    @property
    def num_nodes(self) -> int:
        """The number of nodes, leaves included."""

        def count(node):
            return 1 if node is None else 1 + sum(count(c) for c in node[2])

        return count(self._node)

    def unflatten(self, leaves: Iterable[Any]) -> Any:
        """Builds a tree of this structure from leaves (see `tree_unflatten`)."""
        if type(leaves) is not list and type(leaves) is not tuple:
            leaves = list(leaves)
        if len(leaves) != self._num_leaves:
            raise ValueError(
                f"tree_unflatten: the structure {_short_repr(self)} has {self._num_leaves} "
                f"leaves, got {len(leaves)}."
            )
        return leaves[0] if self._node is None else _unflatten(self._node, iter(leaves))

    def flatten_up_to(self, tree: Any) -> list[Any]:
        """Flattens `tree` down to this structure, whose leaves may be subtrees of `tree`.

        Raises:
          TreeStructureError: if this structure is not a prefix of `tree`'s.

        Example:
          >>> tree_structure([1, 2]).flatten_up_to([(1, 2), {'a': 3}])
          [(1, 2), {'a': 3}]
        """
        out: list[Any] = []
        message = _flatten_up_to(self._node, tree, (), out)
        if message is not None:
            raise TreeStructureError(f"flatten_up_to: structures differ {message}")
        return out

    def children(self) -> list[PyTreeDef]:
        """The treedefs of the root's children (empty for a leaf or None)."""
        return [] if self._node is None else [PyTreeDef(c) for c in self._node[2]]

    def node_data(self) -> tuple[type, Hashable] | None:
        """`(node_type, aux_data)` of the root, or None for a leaf."""
        return None if self._node is None else (self._node[0], self._node[1])


_LEAF = PyTreeDef(None, 1)
_MAX_REPR = 200


def _short_repr(treedef: PyTreeDef) -> str:
    text = repr(treedef)
    return text if len(text) <= _MAX_REPR else text[: _MAX_REPR - 4] + " ...)"


def treedef_is_leaf(treedef: PyTreeDef) -> bool:
    """True if the treedef is a single leaf (`tree_structure(1.0)`)."""
    return treedef._node is None


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
    node = _flatten_any(tree, leaves, is_leaf)
    return leaves, PyTreeDef(node, len(leaves))


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
        if _flatten(tree, leaves) != treedef._node:  # slow path: prefix or mismatch
            leaves = []
            message = _flatten_up_to(treedef._node, tree, (), leaves)
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


def tree_flatten_with_path(tree: Any, is_leaf: Callable[[Any], bool] | None = None):
    """Like `tree_flatten`, but each leaf comes with its key path.

    Returns:
      `([(path, leaf), ...], treedef)`, each path a tuple of key entries.

    Example:
      >>> pairs, _ = tree_flatten_with_path({'a': [1, 2]})
      >>> [(keystr(p), x) for p, x in pairs]
      [("['a'][0]", 1), ("['a'][1]", 2)]
    """
    pairs: list[tuple[tuple[Any, ...], Any]] = []
    node = _flatten_with_path(tree, (), pairs, is_leaf)
    return pairs, PyTreeDef(node, len(pairs))


def tree_map_with_path(
    f: Callable[..., Any],
    tree: Any,
    *rest: Any,
    is_leaf: Callable[[Any], bool] | None = None,
) -> Any:
    """Like `tree_map`, but `f` is called as `f(path, leaf, *leaves_of_rest)`.

    Example:
      >>> tree_map_with_path(lambda p, x: keystr(p), {'a': (0, 0)})
      {'a': ("['a'][0]", "['a'][1]")}
    """
    pairs, treedef = tree_flatten_with_path(tree, is_leaf)
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
    return all(_flatten_any(x, [], is_leaf) is None for x in iterable)


def tree_transpose(outer_treedef: PyTreeDef, inner_treedef: PyTreeDef | None, tree: Any):
    """Turns an outer tree of inner trees into an inner tree of outer trees.

    Args:
      outer_treedef: the outer structure.
      inner_treedef: the structure at each outer leaf; inferred from the first if None.
      tree: the tree to transpose.

    Raises:
      TreeStructureError: if `tree` does not have the outer-of-inner structure.

    Example:
      >>> tree_transpose(tree_structure([0, 0]), tree_structure((0, 0)), [(1, 2), (3, 4)])
      ([1, 3], [2, 4])
    """
    inners = outer_treedef.flatten_up_to(tree)
    if inner_treedef is None:
        inner_treedef = tree_structure(inners[0]) if inners else _LEAF
    columns = [inner_treedef.flatten_up_to(inner) for inner in inners]
    rows = zip(*columns) if columns else [()] * inner_treedef.num_leaves
    return inner_treedef.unflatten([outer_treedef.unflatten(row) for row in rows])
