"""`funcgrad.tree`: JAX's `jax.tree` namespace, short names for `funcgrad.tree_util`.

Every function here *is* its `tree_util` counterpart (one home): `tree.map is
tree_util.tree_map`. Imports only `funcgrad.tree_util`.

    >>> import funcgrad as fg
    >>> fg.tree.map(lambda x: x * 2, {'a': 1, 'b': (2, 3)})
    {'a': 2, 'b': (4, 6)}
"""

from funcgrad import tree_util as _tu

all = _tu.tree_all  # noqa: A001  (JAX's names, shadowing builtins inside this module only)
broadcast = _tu.tree_broadcast
flatten = _tu.tree_flatten
flatten_with_path = _tu.tree_flatten_with_path
leaves = _tu.tree_leaves
leaves_with_path = _tu.tree_leaves_with_path
map = _tu.tree_map  # noqa: A001
map_with_path = _tu.tree_map_with_path
reduce = _tu.tree_reduce
structure = _tu.tree_structure
transpose = _tu.tree_transpose
unflatten = _tu.tree_unflatten

__all__ = ["all", "broadcast", "flatten", "flatten_with_path", "leaves", "leaves_with_path",
           "map", "map_with_path", "reduce", "structure", "transpose", "unflatten"]


def __getattr__(name):
    raise AttributeError(f"module 'funcgrad.tree' has no attribute {name!r}; it has "
                         f"{', '.join(__all__)} (and funcgrad.tree_util has the tree_* names)")
