"""Checkpoints: `save(path, tree)` / `load(path, like=None)` of any pytree of arrays in one file.

The file is a NumPy `.npz` archive (no pickle): one entry per leaf plus `__structure__`, a
JSON record of the tree: node types (dict, list, tuple, None, namedtuple by module and
qualified name, e.g. optimizer states), dict keys, each leaf's key path, kind (funcgrad
array, NumPy array or Python scalar), dtype and shape. Saving writes a temporary file in the
same folder and renames it over `path` (`os.replace`), so a failed save never leaves a
half-written checkpoint. Imports numpy, `funcgrad.numpy`, `tree_util` and `errors`.
"""

import importlib
import json
import os
import tempfile
import zipfile
from typing import Any

import numpy as np

import funcgrad.numpy as fnp
from funcgrad import tree_util
from funcgrad.core import ArrayBase, Tracer
from funcgrad.errors import FuncgradTypeError, FuncgradValueError

__all__ = ["CheckpointError", "load", "save"]

FORMAT = "funcgrad-checkpoint"
VERSION = 1
_STRUCTURE = "__structure__"


class CheckpointError(FuncgradValueError):
    """A checkpoint cannot be written, read, or does not match the expected structure."""


# ---------------------------------------------------------------------------------------------
# Saving


def save(path: str | os.PathLike, tree: Any) -> None:
    """Writes `tree` (params, model state, optimizer state... any pytree) to `path`.

    Leaves may be funcgrad arrays, NumPy arrays or Python scalars; containers may be dicts
    (str or int keys), lists, tuples, None and namedtuples (found again on load by module and
    qualified name). The write is atomic: `path` is replaced only once the new file is
    complete. The name is used as given (no `.npz` is appended).

    Raises:
        CheckpointError: for a leaf or node type that cannot be stored (the message names its
            path), or when writing fails.

    Example:
        >>> save("ckpt.npz", {"params": params, "opt_state": opt_state, "epoch": 3})
        >>> restored = load("ckpt.npz")
    """
    arrays: dict[str, np.ndarray] = {}
    record = {"format": FORMAT, "version": VERSION, "tree": _describe(tree, (), arrays)}
    arrays[_STRUCTURE] = np.frombuffer(json.dumps(record).encode(), dtype=np.uint8)
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def _path_text(path) -> str:
    return tree_util.keystr(path) or "<root>"


def _describe(x, path, arrays) -> dict:
    if x is None:
        return {"type": "none"}
    if isinstance(x, (bool, int, float, complex)) and not isinstance(x, np.generic):
        return {"type": "scalar", "python": type(x).__name__, "value": _scalar_json(x)}
    if isinstance(x, Tracer):
        raise CheckpointError(f"save: the leaf at {_path_text(path)} is a traced value; save "
                              "outside jit/grad/vmap")
    if isinstance(x, (ArrayBase, np.ndarray, np.generic)):
        return _describe_leaf(x, path, arrays)
    if isinstance(x, dict) and type(x) is dict:
        keys = sorted(x, key=lambda k: (type(k).__name__, k))
        for k in keys:
            if not isinstance(k, (str, int)) or isinstance(k, bool):
                raise CheckpointError(f"save: dict key {k!r} at {_path_text(path)} is not a "
                                      "str or int")
        return {"type": "dict", "keys": [[type(k).__name__, k] for k in keys],
                "children": [_describe(x[k], path + (tree_util.DictKey(k),), arrays)
                             for k in keys]}
    if type(x) in (list, tuple):
        return {"type": type(x).__name__,
                "children": [_describe(c, path + (tree_util.SequenceKey(i),), arrays)
                             for i, c in enumerate(x)]}
    if isinstance(x, tuple) and hasattr(type(x), "_fields"):
        t = type(x)
        return {"type": "namedtuple", "module": t.__module__, "qualname": t.__qualname__,
                "fields": list(t._fields),
                "children": [_describe(getattr(x, f), path + (tree_util.GetAttrKey(f),), arrays)
                             for f in t._fields]}
    raise CheckpointError(
        f"save: cannot store a {type(x).__module__}.{type(x).__qualname__} at "
        f"{_path_text(path)}; checkpoints hold dicts, lists, tuples, namedtuples, None, "
        "arrays and Python scalars")


def _scalar_json(x):
    return [x.real, x.imag] if isinstance(x, complex) else x


def _describe_leaf(x, path, arrays) -> dict:
    value = np.asarray(x)
    if value.dtype == object:
        raise CheckpointError(f"save: the array at {_path_text(path)} has dtype object")
    name = f"leaf_{len(arrays)}"
    arrays[name] = value
    kind = "funcgrad" if isinstance(x, ArrayBase) else "numpy"
    return {"type": "leaf", "kind": kind, "name": name, "path": tree_util.keystr(path),
            "dtype": value.dtype.str, "shape": list(value.shape)}


# ---------------------------------------------------------------------------------------------
# Loading


def load(path: str | os.PathLike, like: Any = None) -> Any:
    """Reads a checkpoint written by `save`.

    Args:
        path: the file.
        like: optional pytree the checkpoint must match (e.g. freshly initialised params and
            optimizer state): same structure, and the same shape and dtype at every leaf.
            It is also how to restore container types this module cannot import.

    Returns:
        The tree, with funcgrad arrays, NumPy arrays and Python scalars where they were.

    Raises:
        CheckpointError: if the file is missing, is not a funcgrad checkpoint or is
            corrupt, or does not match `like` (the message names the first differing path).
    """
    path = os.fspath(path)
    try:
        with np.load(path, allow_pickle=False) as archive:
            record = json.loads(bytes(archive[_STRUCTURE]).decode())
            if record.get("format") != FORMAT:
                raise ValueError("not a funcgrad checkpoint")
            if record.get("version") != VERSION:
                raise ValueError(f"unsupported format version {record.get('version')}")
            arrays = {name: archive[name] for name in archive.files if name != _STRUCTURE}
    except FileNotFoundError:
        raise CheckpointError(f"load: no checkpoint at {path!r}") from None
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, UnicodeDecodeError,
            json.JSONDecodeError) as e:
        raise CheckpointError(f"load: {path!r} is not a readable funcgrad checkpoint (corrupt "
                              f"or another format): {e}") from None
    try:
        tree = _rebuild(record["tree"], arrays, ())
    except (KeyError, TypeError, IndexError) as e:
        raise CheckpointError(f"load: {path!r} has a damaged structure record: {e!r}") from None
    if like is not None:
        _check_like(path, tree, like)
    return tree


def _rebuild(node, arrays, path):
    t = node["type"]
    if t == "none":
        return None
    if t == "scalar":
        v = node["value"]
        return complex(*v) if node["python"] == "complex" else {
            "bool": bool, "int": int, "float": float}[node["python"]](v)
    if t == "leaf":
        value = arrays[node["name"]]
        if value.dtype.str != node["dtype"] or list(value.shape) != node["shape"]:
            raise CheckpointError(f"load: the array at {_path_text(path)} is damaged")
        return fnp.asarray(value) if node["kind"] == "funcgrad" else value
    children = node["children"]
    if t == "dict":
        keys = [int(k) if kind == "int" else str(k) for kind, k in node["keys"]]
        return {k: _rebuild(c, arrays, path + (tree_util.DictKey(k),))
                for k, c in zip(keys, children)}
    if t in ("list", "tuple"):
        items = [_rebuild(c, arrays, path + (tree_util.SequenceKey(i),))
                 for i, c in enumerate(children)]
        return items if t == "list" else tuple(items)
    if t == "namedtuple":
        cls = _find_class(node, path)
        return cls(*[_rebuild(c, arrays, path + (tree_util.GetAttrKey(f),))
                     for f, c in zip(node["fields"], children)])
    raise CheckpointError(f"load: unknown node type {t!r} at {_path_text(path)}")


def _find_class(node, path):
    name = f"{node['module']}.{node['qualname']}"
    try:
        obj = importlib.import_module(node["module"])
        for part in node["qualname"].split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError):
        raise CheckpointError(f"load: cannot import the namedtuple {name} stored at "
                              f"{_path_text(path)}; import the module that defines it") from None
    if not (isinstance(obj, type) and getattr(obj, "_fields", None) == tuple(node["fields"])):
        raise CheckpointError(f"load: {name} at {_path_text(path)} no longer has the fields "
                              f"{node['fields']}")
    return obj


def _check_like(path, tree, like):
    """Raises a CheckpointError at the first path where `tree` and `like` differ."""
    message = tree_util.first_mismatch(tree_util.tree_structure(like),
                                       tree_util.tree_structure(tree))
    if message is not None:
        raise CheckpointError(f"load: {path!r} does not have the structure of like=: {message}")
    pairs, _ = tree_util.tree_flatten_with_path(like)
    for (key_path, want), got in zip(pairs, tree_util.tree_leaves(tree)):
        if np.shape(want) != np.shape(got) or _dtype(want) != _dtype(got):
            raise CheckpointError(
                f"load: {path!r} does not match like= at path {_path_text(key_path)}: expected "
                f"{_dtype(want)}{list(np.shape(want))}, found {_dtype(got)}{list(np.shape(got))}")


def _dtype(x):
    if isinstance(x, (bool, int, float, complex)) and not isinstance(x, np.generic):
        return type(x).__name__
    if hasattr(x, "dtype"):
        return str(np.dtype(x.dtype))
    raise FuncgradTypeError(f"load: like= holds a {type(x).__name__} leaf")
