"""funcgrad.tree: JAX's `jax.tree` names, each the very tree_util function (one home), with
JAX's argument names; tree_broadcast and tree_leaves_with_path; a missing name lists what
exists."""

import inspect

import pytest

import funcgrad as fg
from funcgrad import tree, tree_util
from funcgrad.tree_util import TreeStructureError, keystr

JAX_TREE_NAMES = ["all", "broadcast", "flatten", "flatten_with_path", "leaves",
                  "leaves_with_path", "map", "map_with_path", "reduce", "structure", "transpose",
                  "unflatten"]


def test_names_are_the_tree_util_functions():
    assert sorted(tree.__all__) == JAX_TREE_NAMES
    for name in JAX_TREE_NAMES:
        assert getattr(tree, name) is getattr(tree_util, "tree_" + name)
    assert fg.tree is tree


def test_jax_argument_names():
    assert list(inspect.signature(tree.transpose).parameters) == [
        "outer_treedef", "inner_treedef", "pytree_to_transpose"]
    assert list(inspect.signature(tree.map).parameters) == ["f", "tree", "rest", "is_leaf"]
    assert list(inspect.signature(tree.reduce).parameters) == [
        "function", "tree", "initializer", "is_leaf"]
    assert list(inspect.signature(tree.broadcast).parameters) == [
        "prefix_tree", "full_tree", "is_leaf"]


def test_behaviour():
    t = {"a": [1, 2], "b": (3,)}
    assert tree.map(lambda x, y: x + y, t, t) == {"a": [2, 4], "b": (6,)}
    assert tree.map_with_path(lambda p, x: keystr(p), t) == {"a": ["['a'][0]", "['a'][1]"],
                                                             "b": ("['b'][0]",)}
    assert [keystr(p) for p, _ in tree.leaves_with_path(t)] == ["['a'][0]", "['a'][1]",
                                                               "['b'][0]"]
    assert tree.reduce(lambda a, b: a * b, t) == 6 and tree.reduce(max, t, 10) == 10
    assert tree.all(t) and not tree.all({"a": 0})
    leaves, treedef = tree.flatten(t)
    assert tree.unflatten(treedef, leaves) == t and tree.structure(t) == treedef
    outer, inner = tree.structure([0, 0]), tree.structure({"x": 0, "y": 0})
    swapped = tree.transpose(outer, inner, pytree_to_transpose=[{"x": 1, "y": 2},
                                                                {"x": 3, "y": 4}])
    assert swapped == {"x": [1, 3], "y": [2, 4]}
    assert tree.broadcast([1, {"k": 2}], [(0, 0), {"k": [0, 0]}]) == [(1, 1), {"k": [2, 2]}]
    assert tree.broadcast(5, {"a": (0, 0)}) == {"a": (5, 5)}
    with pytest.raises(TreeStructureError, match="tree_broadcast"):
        tree.broadcast([1, 2], [0])


def test_unknown_name_lists_what_exists():
    with pytest.raises(AttributeError, match="map_with_path"):
        tree.tree_map  # noqa: B018
