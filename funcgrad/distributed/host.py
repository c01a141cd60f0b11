"""Host utilities on concrete values (outside traced code): `broadcast`, `barrier`,
`check_replicated`. Arrays travel through the buffer API, other leaves are pickled.
"""

import numpy as np

from funcgrad import errors
from funcgrad.core import Array, ArrayBase, Tracer
from funcgrad.core.array import host_value
from funcgrad.distributed import runtime
from funcgrad.distributed.mesh import _differing_leaves, _digest, _value_digest
from funcgrad.tree_util import keystr, tree_flatten, tree_flatten_with_path, tree_unflatten

__all__ = ["barrier", "broadcast", "check_replicated"]


def _concrete_leaves(tree, op):
    leaves, treedef = tree_flatten(tree)
    for x in leaves:
        if isinstance(x, Tracer):
            raise errors.FuncgradTypeError(
                f"{op}: got a traced value {x.aval}; {op} works on concrete values outside "
                f"jit/grad/shard_map\n{errors.where()}")
    return leaves, treedef


def broadcast(tree, root=0):
    """Every process gets process `root`'s `tree` (parameters at start-up, a seed...).

    Array leaves keep their type (funcgrad Arrays stay Arrays, NumPy arrays stay NumPy);
    every process must pass arrays of the same shapes and dtypes. Other leaves (Python
    numbers, strings) are pickled.

    Example:
        >>> params = fg.distributed.broadcast(model.init(key, x)[0])
    """
    leaves, treedef = _concrete_leaves(tree, "broadcast")
    comm = runtime.world()
    if comm.size == 1:
        return tree
    kinds = ["array" if isinstance(x, (ArrayBase, np.ndarray)) else "object" for x in leaves]
    shapes = [(np.shape(host_value(x._value)) if isinstance(x, Array) else np.shape(x),
               str(np.asarray(x).dtype) if k == "array" else "") for x, k in zip(leaves, kinds)]
    if not comm.agree(_digest(repr((str(treedef), kinds, shapes)))):
        everyone = comm.allgather_obj(shapes, check=True)
        lines = "\n".join(f"    rank {r}: {s}" for r, s in enumerate(everyone))
        raise errors.FuncgradValueError(
            f"broadcast: the processes passed trees of different structures or shapes:\n"
            f"{lines}\n{errors.where()}")
    out = []
    for x, k in zip(leaves, kinds):
        if k == "object":
            out.append(comm.bcast_obj(x, root))
        elif isinstance(x, Array):
            out.append(Array(comm.bcast_array(host_value(x._value), root), x.weak_type))
        else:
            out.append(comm.bcast_array(x, root))
    return tree_unflatten(treedef, out)


def barrier():
    """Wait until every process reaches this point."""
    runtime.world().barrier()


def check_replicated(tree, what="value"):
    """Raise when `tree` is not the same on every process, naming the leaves that differ.

    Args:
        tree: a pytree of concrete arrays (and Python values).
        what: how to call the tree in the message (e.g. "params").

    Raises:
        FuncgradValueError: `params['w1']: ranks [1] hold a different value than rank 0`.

    Example:
        >>> fg.distributed.check_replicated(params, "params")
    """
    leaves, _ = _concrete_leaves(tree, "check_replicated")
    comm = runtime.world()
    if comm.size == 1:
        return
    paths = [f"{what}{keystr(p)}" for p, _ in tree_flatten_with_path(tree)[0]]
    digests = [_value_digest(host_value(x._value) if isinstance(x, Array) else np.asarray(x))
               for x in leaves]
    if not comm.agree(_digest(" ".join(map(str, digests)))):
        everyone = comm.allgather_obj(digests, check=True)
        raise errors.FuncgradValueError(
            f"check_replicated: {what} differs between processes:\n"
            f"{_differing_leaves(everyone, paths)}\n{errors.where()}")
