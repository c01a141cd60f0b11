"""The pytree machinery behind `funcgrad.tree_util`: key entries, the node registry, the flat
structure record, iterative flattening and unflattening, `PyTreeDef` and mismatch messages.

A structure is a tuple of node records in pre-order (a parent before its children, children
left to right): None for a leaf, else `(node_type, aux_data, num_children)`. A flat tuple
hashes and compares at C speed without recursion, so depth is bounded by memory only; every
walk here uses explicit stacks. Import it through `funcgrad.tree_util`, which re-exports
the public names. Depends only on the standard library; must not import other funcgrad modules.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, NamedTuple

from funcgrad._pytree_hash import HashableNodes, nodes_equal, nodes_hash  # noqa: F401

_NoneType = type(None)
_NONE_NODE = (_NoneType, None, 0)  # None is a node without children
_LEAF_NODES = (None,)  # the structure of a single leaf


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


def _mapping_keys(aux, n):
    return [DictKey(k) for k in aux]


def _fallback_order(key):
    return (type(key).__module__, type(key).__qualname__, repr(key))


def _sorted_keys(d) -> tuple:
    try:
        return tuple(sorted(d))
    except TypeError:  # keys of mixed, non-comparable types
        return tuple(sorted(d, key=_fallback_order))


def _defaultdict_flatten(x):
    keys = _sorted_keys(x)
    return [x[k] for k in keys], (x.default_factory, keys)


_register(
    OrderedDict,
    lambda x: (list(x.values()), tuple(x)),
    lambda keys, values: OrderedDict(zip(keys, values)),
    child_keys=_mapping_keys,
)
_register(
    defaultdict,
    _defaultdict_flatten,
    lambda aux, values: defaultdict(aux[0], zip(aux[1], values)),
    child_keys=lambda aux, n: _mapping_keys(aux[1], n),
)


# ---------------------------------------------------------------------------------------------
# Flattening: each variant walks the tree with a stack of child iterators


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
        return _NoneType, None, ()
    return None if t in _leaf_types else _other_parts(x, t)


def _flatten(tree, leaves) -> tuple:
    """Appends the leaves of `tree` to `leaves` and returns its structure. The hot path of jit:
    a sequence of leaves (jit's argument tuple, most often) takes one loop; otherwise leaf
    children are handled inline and each container costs one iterator on the stack."""
    leaf_types = _leaf_types
    t = type(tree)
    if t is tuple or t is list:
        for x in tree:
            if type(x) not in leaf_types:
                break
        else:
            leaves += tree
            return ((t, None, len(tree)),) + (None,) * len(tree)
        nodes = [(t, None, len(tree))]
        it = iter(tree)
    else:
        nodes = []
        it = iter((tree,))
    add_leaf, add_node = leaves.append, nodes.append
    stack = []
    while True:
        for x in it:
            t = type(x)
            if t in leaf_types:
                add_leaf(x)
                add_node(None)
                continue
            if t is tuple or t is list:
                add_node((t, None, len(x)))
                children = x
            elif t is dict:
                try:
                    aux = tuple(sorted(x))
                except TypeError:  # keys of mixed, non-comparable types
                    aux = _sorted_keys(x)
                add_node((dict, aux, len(aux)))
                children = list(map(x.__getitem__, aux))
            elif x is None:
                add_node(_NONE_NODE)
                continue
            else:
                parts = _other_parts(x, t)
                if parts is None:
                    add_leaf(x)
                    add_node(None)
                    continue
                t, aux, children = parts
                add_node((t, aux, len(children)))
            stack.append(it)
            it = iter(children)
            break
        else:
            if not stack:
                return tuple(nodes)
            it = stack.pop()


def _flatten_is_leaf(tree, leaves, is_leaf) -> tuple:
    nodes: list = []
    stack: list = []
    it = iter((tree,))
    while True:
        for x in it:
            parts = None if is_leaf(x) else _shallow(x)
            if parts is None:
                leaves.append(x)
                nodes.append(None)
                continue
            t, aux, children = parts
            nodes.append((t, aux, len(children)))
            if children:
                stack.append(it)
                it = iter(children)
                break
        else:
            if not stack:
                return tuple(nodes)
            it = stack.pop()


def _flatten_any(x, leaves, is_leaf) -> tuple:
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


def _keyed_parts(x, is_leaf):
    """`(record, [(key, child), ...])` of a node, or None for a leaf."""
    if is_leaf is not None and is_leaf(x):
        return None
    node_type = _registry.get(type(x))
    if node_type is not None and node_type.flatten_with_keys is not None:
        pairs, aux = node_type.flatten_with_keys(x)
        pairs = list(pairs)
        return (type(x), aux, len(pairs)), pairs
    shallow = _shallow(x)
    if shallow is None:
        return None
    t, aux, children = shallow
    return (t, aux, len(children)), list(zip(_child_keys(t, aux, len(children)), children))


def _flatten_with_path(tree, out, is_leaf, is_leaf_takes_path=False) -> tuple:
    """Appends `(path, leaf)` pairs to `out` and returns the structure; with
    `is_leaf_takes_path`, `is_leaf` is called as `is_leaf(path, x)` (JAX's option)."""
    at = None if is_leaf is None or not is_leaf_takes_path else (
        lambda path: lambda x: is_leaf(path, x))
    parts = _keyed_parts(tree, is_leaf if at is None else at(()))
    if parts is None:
        out.append(((), tree))
        return _LEAF_NODES
    nodes = [parts[0]]
    stack = [(iter(parts[1]), ())]
    while stack:
        it, prefix = stack[-1]
        for key, x in it:
            path = prefix + (key,)
            parts = _keyed_parts(x, is_leaf if at is None else at(path))
            if parts is None:
                out.append((path, x))
                nodes.append(None)
                continue
            nodes.append(parts[0])
            stack.append((iter(parts[1]), path))
            break
        else:
            stack.pop()
    return tuple(nodes)


# ---------------------------------------------------------------------------------------------
# Unflattening and other bottom-up walks


def _build(t, aux, values):
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


def _fold(nodes, leaves, combine):
    """Bottom-up over a structure: each leaf record takes the next of `leaves` (a list of
    the right length), each node `combine(record, child values)`; returns the root's value.

    The records are read backwards, so a node's children are the top of the value stack."""
    stack: list = []
    i = len(leaves)
    for rec in reversed(nodes):
        if rec is None:
            i -= 1
            stack.append(leaves[i])
            continue
        n = rec[2]
        if n:
            values = stack[-n:]
            del stack[-n:]
            values.reverse()
        else:
            values = []
        stack.append(combine(rec, values))
    return stack[0]


def _unflatten(nodes, leaves):
    """The tree of structure `nodes` holding `leaves` (a list of the right length): `_fold`
    with the builtin containers built inline."""
    if nodes[0] is None:  # a single leaf
        return leaves[0]
    stack: list = []
    i = len(leaves)
    for rec in reversed(nodes):
        if rec is None:
            i -= 1
            stack.append(leaves[i])
            continue
        t, aux, n = rec
        if n:
            values = stack[-n:]
            del stack[-n:]
            values.reverse()
        else:
            values = []
        if t is tuple:
            stack.append(tuple(values))
        elif t is list:
            stack.append(values)
        elif t is dict:
            stack.append(dict(zip(aux, values)))
        else:
            stack.append(_build(t, aux, values))
    return stack[0]


_RUN, _SLICE, _POP = 0, 1, 2  # plan steps: push leaves, build from leaves, build from stack


def _plan(nodes) -> list:
    """Steps `(kind, type, aux, i, j)` that build a tree of structure `nodes` in post-order:
    `_RUN` pushes `leaves[i:j]`; `_SLICE` builds a node whose children are `leaves[i:j]`;
    `_POP` builds a node from the top `i` values of the stack."""
    steps: list = []
    stack: list = []  # [record, children left, leaves before it, steps before it]
    leaf = 0
    for rec in nodes:
        if rec is None:
            if stack and len(steps) > stack[-1][3] and steps[-1][0] == _RUN:
                steps[-1] = (_RUN, None, None, steps[-1][3], leaf + 1)  # extend the run
            else:
                steps.append((_RUN, None, None, leaf, leaf + 1))
            leaf += 1
        elif rec[2] == 0:
            steps.append((_SLICE, rec[0], rec[1], leaf, leaf))
        else:
            stack.append([rec, rec[2], leaf, len(steps)])
            continue
        while stack:  # a subtree is done: close the nodes whose children are all done
            top = stack[-1]
            top[1] -= 1
            if top[1]:
                break
            stack.pop()
            (t, aux, n), first_leaf, begin = top[0], top[2], top[3]
            if len(steps) == begin + 1 and steps[begin][:1] == (_RUN,) \
                    and steps[begin][4] - first_leaf == n:  # n children, n leaves: all leaves
                steps[begin] = (_SLICE, t, aux, first_leaf, first_leaf + n)
            else:
                steps.append((_POP, t, aux, n, 0))
    return steps


def _unflattener(nodes) -> Callable[[list], Any]:
    """A function from a list of leaves to the tree of structure `nodes`, planned once:
    faster than `_unflatten` when one structure is built many times (jit's outputs)."""
    if nodes[0] is None:
        return lambda leaves: leaves[0]
    steps = _plan(nodes)

    def unflatten(leaves):
        stack = []
        for kind, t, aux, i, j in steps:
            if kind == _RUN:
                stack += leaves[i:j]
                continue
            if kind == _SLICE:
                values = leaves[i:j]
            else:
                values = stack[-i:]
                del stack[-i:]
            if t is tuple:
                stack.append(tuple(values))
            elif t is list:
                stack.append(values)
            elif t is dict:
                stack.append(dict(zip(aux, values)))
            else:
                stack.append(_build(t, aux, values))
        return stack[0]
    return unflatten


def _subtree_end(nodes, start) -> int:
    """The index just past the subtree whose record is at `start`."""
    need, i = 1, start
    while need:
        rec = nodes[i]
        need += (0 if rec is None else rec[2]) - 1
        i += 1
    return i


def _path_of(stack) -> tuple:
    """The key path of the current position of a pre-order walk with open nodes `stack`
    (entries `[record, ..., child index]`)."""
    return tuple(_child_keys(*entry[0])[entry[-1]] for entry in stack)


def _advance(stack) -> None:
    """Move a pre-order walk past a finished subtree: bump the parent's child index, closing
    the nodes whose children are all done."""
    while stack:
        top = stack[-1]
        top[-1] += 1
        if top[-1] < top[0][2]:
            return
        stack.pop()


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


def _describe_record(rec) -> str:
    return "a leaf" if rec is None else _describe(*rec)


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


def _mismatch_text(path, expected, got, got_text) -> str:
    """`expected` is a record, `got` a record or a `_shallow` triple (or None for a leaf)."""
    where = f"at path {keystr(path)}" if path else "at the root"
    text = f"{where}: expected {_describe_record(expected)}, got {got_text}"
    if expected is not None and got is not None:
        t = expected[0]
        keys = _mapping_keys_of(t, expected[1])
        if keys is not None and got[0] is t:
            text += _dict_key_diff(keys, _mapping_keys_of(t, got[1]))
    return text


def _first_mismatch(nodes_a, nodes_b) -> str | None:
    """Both structures are walked together while their records agree; the first record that
    differs sits at the same place in both trees."""
    if nodes_a is nodes_b or nodes_a == nodes_b:
        return None
    stack: list = []  # [record, child index] per open node
    for a, b in zip(nodes_a, nodes_b):
        if not (a is b or a == b):
            return _mismatch_text(_path_of(stack), a, b, _describe_record(b))
        if a is not None and a[2]:
            stack.append([a, 0])
        else:
            _advance(stack)
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
      >>> from funcgrad.tree_util import tree_structure
      >>> first_mismatch(tree_structure({'b': (1, 2)}), tree_structure({'b': [1, 2, 3]}))
      "at path ['b']: expected a tuple of 2 children, got a list of 3 children"
    """
    return _first_mismatch(treedef_a._nodes, treedef_b._nodes)


def _flatten_up_to(nodes, tree, out) -> str | None:
    """Appends the subtrees of `tree` at the leaves of `nodes` to `out`; returns an error
    message or None."""
    stack: list = []  # [record, children of the value, child index] per open node
    x = tree
    for rec in nodes:
        if rec is None:
            out.append(x)
        else:
            shallow = _shallow(x)
            if (shallow is None or shallow[0] is not rec[0] or shallow[1] != rec[1]
                    or len(shallow[2]) != rec[2]):
                return _mismatch_text(_path_of(stack), rec, shallow, _describe_value(x))
            if rec[2]:
                stack.append([rec, shallow[2], 0])
                x = shallow[2][0]
                continue
        _advance(stack)
        if stack:
            top = stack[-1]
            x = top[1][top[2]]
    return None


# ---------------------------------------------------------------------------------------------
# PyTreeDef


def _repr_record(rec, parts) -> str:
    t, aux, _ = rec
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
    registered aux data are equal; the hash is computed once and cached. Aux data need not
    hash (a dict works, as in JAX): such a treedef hashes without them.

    Example:
      >>> from funcgrad.tree_util import tree_structure
      >>> tree_structure({'a': 1, 'b': (2, 3)})
      PyTreeDef({'a': *, 'b': (*, *)})
    """

    __slots__ = ("_hash", "_nodes", "_num_leaves")

    def __init__(self, nodes: tuple, num_leaves: int | None = None):
        object.__setattr__(self, "_nodes", nodes)
        if num_leaves is None:
            num_leaves = nodes.count(None)
        object.__setattr__(self, "_num_leaves", num_leaves)
        object.__setattr__(self, "_hash", None)

    def __setattr__(self, name, value):
        raise AttributeError("PyTreeDef is immutable")

    def __delattr__(self, name):
        raise AttributeError("PyTreeDef is immutable")

    def __reduce__(self):
        return PyTreeDef, (self._nodes, self._num_leaves)

    def __eq__(self, other):
        if not isinstance(other, PyTreeDef):
            return NotImplemented
        return self is other or nodes_equal(self._nodes, other._nodes)

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            h = nodes_hash(self._nodes)
            object.__setattr__(self, "_hash", h)
        return h

    def __repr__(self) -> str:
        return f"PyTreeDef({_fold(self._nodes, ['*'] * self._num_leaves, _repr_record)})"

    @property
    def num_leaves(self) -> int:
        """The number of leaves."""
        return self._num_leaves

    @property
    def num_nodes(self) -> int:
        """The number of nodes, leaves included."""
        return len(self._nodes)

    def unflatten(self, leaves: Iterable[Any]) -> Any:
        """Builds a tree of this structure from leaves (see `tree_unflatten`)."""
        if type(leaves) is not list and type(leaves) is not tuple:
            leaves = list(leaves)
        if len(leaves) != self._num_leaves:
            raise ValueError(
                f"tree_unflatten: the structure {_short_repr(self)} has {self._num_leaves} "
                f"leaves, got {len(leaves)}."
            )
        return _unflatten(self._nodes, leaves)

    def flatten_up_to(self, tree: Any) -> list[Any]:
        """Flattens `tree` down to this structure, whose leaves may be subtrees of `tree`.

        Raises:
          TreeStructureError: if this structure is not a prefix of `tree`'s.

        Example:
          >>> from funcgrad.tree_util import tree_structure
          >>> tree_structure([1, 2]).flatten_up_to([(1, 2), {'a': 3}])
          [(1, 2), {'a': 3}]
        """
        out: list[Any] = []
        message = _flatten_up_to(self._nodes, tree, out)
        if message is not None:
            raise TreeStructureError(f"flatten_up_to: structures differ {message}")
        return out

    def children(self) -> list[PyTreeDef]:
        """The treedefs of the root's children (empty for a leaf or None)."""
        nodes, out, i = self._nodes, [], 1
        if nodes[0] is not None:
            for _ in range(nodes[0][2]):
                end = _subtree_end(nodes, i)
                out.append(PyTreeDef(nodes[i:end]))
                i = end
        return out

    def node_data(self) -> tuple[type, Hashable] | None:
        """`(node_type, aux_data)` of the root, or None for a leaf."""
        root = self._nodes[0]
        return None if root is None else (root[0], root[1])


_LEAF = PyTreeDef(_LEAF_NODES, 1)
_MAX_REPR = 200


def _short_repr(treedef: PyTreeDef) -> str:
    text = repr(treedef)
    return text if len(text) <= _MAX_REPR else text[: _MAX_REPR - 4] + " ...)"


def treedef_is_leaf(treedef: PyTreeDef) -> bool:
    """True if the treedef is a single leaf (`tree_structure(1.0)`)."""
    return treedef._nodes[0] is None


# The public classes are documented, pickled and printed under the module that exports them.
for _cls in (DictKey, SequenceKey, GetAttrKey, FlattenedIndexKey, PyTreeDef,
             TreeStructureError):
    _cls.__module__ = "funcgrad.tree_util"
del _cls
