"""Tests for funcgrad.tree_util: round trips, registry, key paths and mismatch messages."""

import dataclasses
import doctest
import pickle
from collections import OrderedDict, defaultdict, namedtuple
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from funcgrad import _pytree, tree_util
from funcgrad.tree_util import (
    DictKey,
    FlattenedIndexKey,
    GetAttrKey,
    PyTreeDef,
    SequenceKey,
    TreeStructureError,
    all_leaves,
    first_mismatch,
    keystr,
    register_dataclass,
    register_pytree_node,
    register_pytree_with_keys,
    tree_all,
    tree_flatten,
    tree_flatten_with_path,
    tree_leaves,
    tree_map,
    tree_map_with_path,
    tree_reduce,
    tree_structure,
    tree_transpose,
    tree_unflatten,
    treedef_is_leaf,
)

Point = namedtuple("Point", ["x", "y"])
OtherPoint = namedtuple("OtherPoint", ["x", "y"])


class Box:
    """A registered node whose aux data (a label) is part of the structure."""

    def __init__(self, label, items):
        self.label, self.items = label, items

    def __eq__(self, other):
        return type(other) is Box and (self.label, self.items) == (other.label, other.items)


register_pytree_node(Box, lambda b: (b.items, b.label), lambda label, items: Box(label, items))


class KeyedBox:
    def __init__(self, a, b):
        self.a, self.b = a, b


register_pytree_with_keys(
    KeyedBox,
    lambda k: (((GetAttrKey("a"), k.a), (GetAttrKey("b"), k.b)), None),
    lambda _, children: KeyedBox(*children),
)


@register_dataclass
@dataclasses.dataclass
class Dense:
    w: Any
    b: Any
    activation: str = dataclasses.field(default="relu", metadata={"static": True})


@register_dataclass(data_fields=["params"], meta_fields=["name"])
@dataclasses.dataclass(frozen=True)
class Named:
    params: Any
    name: str


leaf_values = st.one_of(
    st.integers(), st.floats(allow_nan=False), st.text(max_size=3), st.booleans()
)


def _containers(children):
    return st.one_of(
        st.lists(children, max_size=4),
        st.lists(children, max_size=4).map(tuple),
        st.dictionaries(st.text(max_size=3), children, max_size=4),
        st.builds(Point, children, children),
    )


trees = st.recursive(st.one_of(leaf_values, st.none()), _containers, max_leaves=24)


# Round trips


@settings(max_examples=300, deadline=None)
@given(trees)
def test_round_trip(tree):
    leaves, treedef = tree_flatten(tree)
    assert treedef.num_leaves == len(leaves)
    rebuilt = tree_unflatten(treedef, leaves)
    assert rebuilt == tree
    assert tree_structure(rebuilt) == treedef
    assert hash(tree_structure(rebuilt)) == hash(treedef)
    assert tree_leaves(tree) == leaves


@settings(max_examples=200, deadline=None)
@given(trees)
def test_planned_unflatten_matches_unflatten(tree):
    leaves, treedef = tree_flatten(tree)
    fresh = [object() for _ in leaves]  # compared by identity
    assert _pytree._unflattener(treedef._nodes)(fresh) == treedef.unflatten(fresh)


@settings(max_examples=200, deadline=None)
@given(trees)
def test_paths_match_leaves_and_structure(tree):
    pairs, treedef = tree_flatten_with_path(tree)
    assert [x for _, x in pairs] == tree_leaves(tree)
    assert treedef == tree_structure(tree)
    assert len({p for p, _ in pairs}) == len(pairs)


@settings(max_examples=200, deadline=None)
@given(trees, trees)
def test_first_mismatch_is_none_exactly_when_equal(a, b):
    ta, tb = tree_structure(a), tree_structure(b)
    assert (first_mismatch(ta, tb) is None) == (ta == tb)
    if ta == tb:
        assert hash(ta) == hash(tb)


def test_dict_children_in_sorted_key_order():
    leaves, treedef = tree_flatten({"b": 2, "a": 1, "c": {"z": 4, "y": 3}})
    assert leaves == [1, 2, 3, 4]
    assert repr(treedef) == "PyTreeDef({'a': *, 'b': *, 'c': {'y': *, 'z': *}})"


def test_non_comparable_dict_keys_have_a_deterministic_order():
    first = tree_flatten({1: "int", "x": "str", (2,): "tuple"})
    second = tree_flatten({(2,): "tuple", "x": "str", 1: "int"})
    assert first == second
    assert tree_unflatten(first[1], first[0]) == {1: "int", "x": "str", (2,): "tuple"}


def test_none_is_a_node_without_leaves():
    leaves, treedef = tree_flatten({"a": None, "b": [None, 1]})
    assert leaves == [1]
    assert tree_unflatten(treedef, [5]) == {"a": None, "b": [None, 5]}
    assert tree_structure(None) != tree_structure(1)
    assert tree_leaves(None) == []


def test_single_leaf_tree():
    leaves, treedef = tree_flatten(3.0)
    assert leaves == [3.0] and treedef_is_leaf(treedef)
    assert tree_unflatten(treedef, ["x"]) == "x"
    assert repr(treedef) == "PyTreeDef(*)"


def test_unregistered_subclasses_are_leaves():
    class MyDict(dict):
        pass

    assert tree_leaves([MyDict(a=1)]) == [MyDict(a=1)]


def test_namedtuple_round_trip_and_type_in_structure():
    leaves, treedef = tree_flatten(Point(1, (2, 3)))
    assert leaves == [1, 2, 3]
    assert tree_unflatten(treedef, [4, 5, 6]) == Point(4, (5, 6))
    assert type(tree_unflatten(treedef, leaves)) is Point
    assert repr(treedef) == "PyTreeDef(Point(x=*, y=(*, *)))"
    assert tree_structure(Point(1, 2)) != tree_structure(OtherPoint(1, 2))
    assert tree_structure(Point(1, 2)) != tree_structure((1, 2))


def test_ordered_dict_keeps_insertion_order():
    tree = OrderedDict([("b", 1), ("a", 2)])
    leaves, treedef = tree_flatten(tree)
    assert leaves == [1, 2]
    rebuilt = tree_unflatten(treedef, leaves)
    assert type(rebuilt) is OrderedDict and list(rebuilt) == ["b", "a"]
    assert treedef != tree_structure(OrderedDict([("a", 2), ("b", 1)]))
    assert treedef != tree_structure({"b": 1, "a": 2})


def test_defaultdict_round_trip():
    tree = defaultdict(list, {"b": 1, "a": 2})
    leaves, treedef = tree_flatten(tree)
    assert leaves == [2, 1]
    rebuilt = tree_unflatten(treedef, leaves)
    assert type(rebuilt) is defaultdict and rebuilt.default_factory is list
    assert rebuilt == tree


# Registered classes and dataclasses


def test_registered_class_round_trip_and_aux_in_structure():
    tree = Box("left", [1, (2, 3)])
    leaves, treedef = tree_flatten(tree)
    assert leaves == [1, 2, 3]
    assert tree_unflatten(treedef, leaves) == tree
    assert treedef != tree_structure(Box("right", [1, (2, 3)]))
    assert repr(treedef) == "PyTreeDef(CustomNode(Box['left'], [*, (*, *)]))"


def test_registered_class_with_keys_gives_paths():
    pairs, _ = tree_flatten_with_path(KeyedBox(1, [2]))
    assert [keystr(p) for p, _ in pairs] == [".a", ".b[0]"]


def test_registered_class_without_keys_uses_flattened_index():
    pairs, _ = tree_flatten_with_path(Box("l", [1, 2]))
    assert [p for p, _ in pairs] == [(FlattenedIndexKey(0),), (FlattenedIndexKey(1),)]


def test_dataclass_fields_and_static_metadata():
    layer = Dense(w=1.0, b=2.0, activation="tanh")
    leaves, treedef = tree_flatten(layer)
    assert leaves == [1.0, 2.0]
    assert tree_unflatten(treedef, [3.0, 4.0]) == Dense(3.0, 4.0, "tanh")
    assert treedef != tree_structure(Dense(1.0, 2.0, "relu"))
    pairs, _ = tree_flatten_with_path({"layer": layer})
    assert [keystr(p) for p, _ in pairs] == ["['layer'].w", "['layer'].b"]


def test_dataclass_explicit_fields_frozen():
    tree = Named(params={"w": 1}, name="enc")
    assert tree_leaves(tree) == [1]
    assert tree_map(lambda x: x * 10, tree) == Named(params={"w": 10}, name="enc")


def test_register_dataclass_rejects_fields_not_covering_init():
    @dataclasses.dataclass
    class Bad:
        a: int
        b: int

    with pytest.raises(ValueError, match="init field"):
        register_dataclass(Bad, data_fields=["a"], meta_fields=[])


def test_duplicate_registration_raises():
    with pytest.raises(ValueError, match="Duplicate"):
        register_pytree_node(Box, lambda b: ((), None), lambda aux, c: Box(None, []))
    with pytest.raises(ValueError, match="Duplicate"):
        register_pytree_node(dict, lambda d: ((), None), lambda aux, c: {})


def test_type_seen_as_leaf_then_registered_becomes_a_node():
    class Late:
        def __init__(self, v):
            self.v = v

    assert tree_structure([Late(1)]) == tree_structure([0])
    register_pytree_node(Late, lambda x: ((x.v,), None), lambda _, c: Late(*c))
    assert tree_leaves([Late((1, 2))]) == [1, 2]


# is_leaf


def test_is_leaf_stops_descent():
    tree = {"a": (1, 2), "b": [3, (4, 5)]}
    leaves, treedef = tree_flatten(tree, is_leaf=lambda x: isinstance(x, tuple))
    assert leaves == [(1, 2), 3, (4, 5)]
    assert tree_unflatten(treedef, leaves) == tree
    assert tree_leaves(None, is_leaf=lambda x: x is None) == [None]


# tree_map and friends


def test_tree_map_multiple_trees():
    a = {"w": (1, 2), "b": [3]}
    b = {"w": (10, 20), "b": [30]}
    c = {"w": (100, 200), "b": [300]}
    assert tree_map(lambda x, y, z: x + y + z, a, b, c) == {"w": (111, 222), "b": [333]}


def test_tree_map_first_tree_is_a_prefix():
    assert tree_map(lambda x, y: (x, y), [1, 2], [(3, 4), {"k": 5}]) == [(1, (3, 4)), (2, {"k": 5})]


def test_tree_map_is_leaf_applies_to_first_tree():
    pairs = [(1, 2), (3, 4)]
    out = tree_map(lambda p, s: p[0] * s, pairs, [10, 100], is_leaf=lambda x: type(x) is tuple)
    assert out == [10, 300]


def test_tree_map_with_path():
    out = tree_map_with_path(
        lambda p, x, y: f"{keystr(p)}={x + y}", {"a": [1], "b": 2}, {"a": [3], "b": 4}
    )
    assert out == {"a": ["['a'][0]=4"], "b": "['b']=6"}


def test_tree_reduce_all_and_all_leaves():
    assert tree_reduce(lambda a, b: a * b, {"a": 2, "b": (3, 4)}) == 24
    assert tree_reduce(lambda a, b: a + b, [], 7) == 7
    assert tree_all({"a": True, "b": [1, 2]}) and not tree_all([True, (0,)])
    assert tree_all(None)
    assert all_leaves([1, "s", 2.0]) and not all_leaves([1, [2]])


def test_tree_transpose():
    tree = {"a": (1, 2), "b": (3, 4)}
    outer, inner = tree_structure({"a": 0, "b": 0}), tree_structure((0, 0))
    assert tree_transpose(outer, inner, tree) == ({"a": 1, "b": 3}, {"a": 2, "b": 4})
    assert tree_transpose(outer, None, tree) == ({"a": 1, "b": 3}, {"a": 2, "b": 4})


def test_children_and_node_data():
    treedef = tree_structure({"a": 1, "b": (2, 3)})
    assert treedef.children() == [tree_structure(0), tree_structure((0, 0))]
    assert treedef.node_data() == (dict, ("a", "b"))
    assert tree_structure(0).node_data() is None
    assert treedef.num_nodes == 5


# Key paths


def test_keystr_jax_style():
    tree = {"a": [Point(x=1, y=2)]}
    pairs, _ = tree_flatten_with_path(tree)
    assert [keystr(p) for p, _ in pairs] == ["['a'][0].x", "['a'][0].y"]
    assert pairs[0][0] == (DictKey("a"), SequenceKey(0), GetAttrKey("x"))
    assert keystr(pairs[0][0], simple=True, separator="/") == "a/0/x"
    assert keystr(()) == ""


# Mismatch messages


def _tree_map_error(a, b):
    with pytest.raises(TreeStructureError) as info:
        tree_map(lambda *xs: xs[0], a, b)
    return str(info.value)


def test_tree_map_mismatch_names_first_differing_path():
    a = {"a": 1, "b": (1, (2, 3))}
    b = {"a": 1, "b": (1, [2, 3, 4])}
    assert _tree_map_error(a, b) == (
        "tree_map: structures differ at path ['b'][1]: "
        "expected a tuple of 2 children, got a list of 3 children"
    )


def test_tree_map_mismatch_is_a_value_error_and_reports_the_earliest_path():
    a = {"a": (1, 2), "b": [1]}
    b = {"a": [1, 2], "b": (1,)}
    with pytest.raises(ValueError, match=r"at path \['a'\]: expected a tuple"):
        tree_map(lambda x, y: x, a, b)


def test_tree_map_mismatch_dict_keys_and_leaf_types():
    message = _tree_map_error({"w": 1, "b": 2}, {"w": 1, "c": 2})
    assert message.endswith(
        "at the root: expected a dict with keys ['b', 'w'], got a dict with keys ['c', 'w'] "
        "(missing ['b'], unexpected ['c'])"
    )
    message = _tree_map_error({"w": (1, 2)}, {"w": 3.0})
    assert message.endswith(
        "at path ['w']: expected a tuple of 2 children, got a leaf of type float"
    )
    assert "expected None, got a leaf of type int" in _tree_map_error([None], [1])


def test_tree_map_mismatch_names_which_tree_when_several():
    with pytest.raises(TreeStructureError, match=r"\(tree 2 vs tree 0\)"):
        tree_map(lambda *xs: 0, [1, [2, 3]], [1, [2, 3]], [1, (2, 3)])


def test_mismatch_message_does_not_dump_the_tree():
    big = {f"layer{i}": {"w": (1, 2), "b": 3} for i in range(50)}
    other = {**big, "layer7": {"w": [1, 2], "b": 3}}
    message = _tree_map_error(big, other)
    assert message == (
        "tree_map: structures differ at path ['layer7']['w']: "
        "expected a tuple of 2 children, got a list of 2 children"
    )
    deeper = {**big, "layer7": {"w": (1, 2), "b": (3,)}}
    tree_map(lambda x, y: x, big, deeper)  # a leaf of the first tree may hold a subtree
    assert first_mismatch(tree_structure(big), tree_structure(deeper)) == (
        "at path ['layer7']['b']: expected a leaf, got a tuple of 1 child"
    )


def test_first_mismatch_messages():
    def mismatch(a, b):
        return first_mismatch(tree_structure(a), tree_structure(b))

    assert mismatch({"a": 1}, {"a": {"x": 1}}) == (
        "at path ['a']: expected a leaf, got a dict with keys ['x']"
    )
    assert mismatch([Point(1, 2)], [OtherPoint(1, 2)]) == (
        "at path [0]: expected a namedtuple Point of 2 children, "
        "got a namedtuple OtherPoint of 2 children"
    )
    assert mismatch({"n": Point(1, (2,))}, {"n": Point(1, (2, 3))}) == (
        "at path ['n'].y: expected a tuple of 1 child, got a tuple of 2 children"
    )
    assert mismatch(None, 1) == "at the root: expected None, got a leaf"
    assert mismatch(Box("l", [1]), Box("r", [1])) == (
        "at the root: expected a Box node of 1 child with aux data 'l', "
        "got a Box node of 1 child with aux data 'r'"
    )
    assert mismatch({"a": (1, 2)}, {"a": (1, 2)}) is None


def test_flatten_up_to_error():
    with pytest.raises(TreeStructureError, match=r"flatten_up_to: structures differ at path \[1\]"):
        tree_structure([1, (2, 3)]).flatten_up_to([1, 2])


# PyTreeDef as a cache key


def test_treedef_hash_and_eq():
    a = tree_structure({"a": 1, "b": (2, 3)})
    b = tree_structure({"b": ("x", "y"), "a": "z"})
    assert a == b and hash(a) == hash(b)
    assert {a: "hit"}[b] == "hit"
    assert a != tree_structure({"a": 1, "c": (2, 3)})
    assert a != tree_structure({"a": 1, "b": [2, 3]})
    assert tree_structure([1, 2]) != tree_structure((1, 2))
    assert tree_structure([None]) != tree_structure([1])
    assert a != "not a treedef"


def test_treedef_is_immutable_and_picklable():
    treedef = tree_structure({"a": [1, Point(2, 3)], "b": None})
    with pytest.raises(AttributeError):
        treedef._node = None
    restored = pickle.loads(pickle.dumps(treedef))
    assert restored == treedef and hash(restored) == hash(treedef)
    assert restored.num_leaves == 3


def test_unflatten_wrong_leaf_count():
    treedef = tree_structure({"a": 1, "b": (2, 3)})
    with pytest.raises(ValueError, match="has 3 leaves, got 2"):
        tree_unflatten(treedef, [1, 2])
    with pytest.raises(ValueError, match="has 3 leaves, got 4"):
        treedef.unflatten(iter([1, 2, 3, 4]))


def test_unflatten_accepts_any_iterable():
    treedef = tree_structure([0, (0, 0)])
    assert treedef.unflatten(x for x in range(3)) == [0, (1, 2)]
    assert isinstance(treedef, PyTreeDef)


def test_docstring_examples():
    for module in (tree_util, _pytree):
        result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
        assert result.failed == 0 and result.attempted > 0


# Depth: every walk uses explicit stacks, so nesting is limited by memory only

DEEP = 3000  # three times Python's default recursion limit


def _nested(leaf, depth):
    """`depth` containers around `leaf`, cycling through list, tuple, dict and namedtuple."""
    for i in range(depth):
        leaf = [leaf, 1] if i % 4 == 0 else (leaf,) if i % 4 == 1 else \
            {"k": leaf} if i % 4 == 2 else Point(leaf, None)
    return leaf


def _same(a, b):
    """`a == b` for trees too deep for Python's recursive `==`: same structure, same leaves."""
    (leaves_a, def_a), (leaves_b, def_b) = tree_flatten(a), tree_flatten(b)
    return def_a == def_b and all(x is y or x == y for x, y in zip(leaves_a, leaves_b))


def test_deep_trees_flatten_unflatten_and_map():
    tree = _nested(0, DEEP)
    leaves, treedef = tree_flatten(tree)
    assert leaves == [0] + [1] * (DEEP // 4)
    assert treedef.num_nodes == DEEP + len(leaves) + DEEP // 4  # containers, leaves, Nones
    assert _same(tree_unflatten(treedef, leaves), tree)
    mapped = tree_map(lambda x: x + 1, tree)
    assert tree_structure(mapped) == treedef and tree_leaves(mapped) == [1] + [2] * (DEEP // 4)
    assert tree_leaves(tree_map(lambda x, y: x + y, tree, tree)) == [0] + [2] * (DEEP // 4)
    assert tree_leaves(tree, is_leaf=lambda x: x is None) == [0] + [1, None] * (DEEP // 4)
    fresh = [object() for _ in leaves]
    assert _same(_pytree._unflattener(treedef._nodes)(fresh), treedef.unflatten(fresh))


def test_deep_trees_paths_structures_and_messages():
    tree = _nested(0, DEEP)
    treedef = tree_structure(tree)
    pairs, with_path = tree_flatten_with_path(tree)
    assert with_path == treedef and len(pairs[0][0]) == DEEP
    assert tree_structure(_nested(5, DEEP)) == treedef
    assert hash(tree_structure(_nested(5, DEEP))) == hash(treedef)
    assert treedef.flatten_up_to(tree) == tree_leaves(tree)
    shallower = tree_structure(_nested("x", DEEP - 1))
    assert shallower != treedef and first_mismatch(treedef, shallower).startswith("at the root")
    deeper = _nested((0, 0), DEEP)  # differs from `tree` at the innermost leaf only
    message = first_mismatch(treedef, tree_structure(deeper))
    assert message.endswith("expected a leaf, got a tuple of 2 children")
    assert message.count("[0]") == DEEP // 2  # the list and tuple levels
    with pytest.raises(TreeStructureError, match="expected a tuple of 2 children, got a leaf"):
        tree_map(lambda x, y: x, deeper, tree)
    text = repr(treedef)
    assert text.startswith("PyTreeDef(Point(x=") and text.count("*") == treedef.num_leaves
    assert pickle.loads(pickle.dumps(treedef)) == treedef
    first, second = treedef.children()
    assert first.num_leaves == treedef.num_leaves and second == tree_structure(None)
