"""Checkpoints: `save(path, tree)` / `load(path, like=None)` of any pytree of arrays in one file.

The file is a NumPy `.npz` archive (no pickle): one `.npy` entry per leaf plus `__structure__`,
a JSON record of the tree as a flat preorder list of nodes (version 2; the nested version 1 is
still read): node types (dict, list, tuple, None, namedtuple by module and qualified name),
dict keys, each leaf's kind (funcgrad array, NumPy array or Python scalar), dtype and shape.
An array of an ml_dtypes type (bfloat16, the float8s, int4...), which `.npy` files cannot
name, is stored as its bits (unsigned integers of its width) and recorded by dtype name.
Loading never imports or runs anything a file names: namedtuple types come only from the
caller (`like=`, `types=`) and funcgrad's own loaded modules, and sizes are checked before
anything is allocated (`_io_safety`). Saving writes a temporary file beside the target and
renames it over it. Walks trees with explicit stacks (any depth). Imports numpy,
`funcgrad.numpy`, `core`, `tree_util`, `errors` and `_io_safety`; never `importlib`.
"""

import collections
import functools
import json
import keyword
import os
import sys
import warnings
from collections.abc import Iterable
from typing import Any

import numpy as np

import funcgrad.numpy as fnp
from funcgrad import _io_safety as safety
from funcgrad import dtypes, tree_util
from funcgrad.core import ArrayBase, Tracer
from funcgrad.errors import FuncgradError, FuncgradTypeError, FuncgradValueError

__all__ = ["CheckpointError", "CheckpointWarning", "load", "save"]

FORMAT = "funcgrad-checkpoint"
VERSION = 2
_READABLE_VERSIONS = (1, 2)
_STRUCTURE = "__structure__"
_SCALARS = (bool, int, float, complex)


class CheckpointError(FuncgradValueError):
    """A checkpoint cannot be written, read, or does not match the expected structure."""


class CheckpointWarning(UserWarning):
    """A checkpoint loaded, but some namedtuples came back as stand-ins for their types."""


def _is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def _keys_of(link) -> list:
    """The key path of a linked path `(parent_link, key)` (None is the root)."""
    keys = []
    while link is not None:
        link, key = link
        keys.append(key)
    return keys[::-1]


def _path_text(keys) -> str:
    if len(keys) > 12:
        return (f"{tree_util.keystr(keys[:4])}...({len(keys) - 10} levels)..."
                f"{tree_util.keystr(keys[-6:])}")
    return tree_util.keystr(keys) or "<root>"


# ---------------------------------------------------------------------------------------------
# Saving


def save(path: str | os.PathLike, tree: Any) -> None:
    """Writes `tree` (params, model state, optimizer state... any pytree) to `path`.

    Leaves may be funcgrad arrays, NumPy arrays or Python scalars (bool, int, float,
    complex); containers may be dicts and OrderedDicts (str or int keys; an OrderedDict keeps
    its order), lists, tuples, None and namedtuples (recorded by module and qualified name;
    see `load` for getting their types back). The write is atomic: `path` is replaced only
    once the new file is complete, and temporary files left by killed saves to the same
    `path` are removed. A symlink is followed (its target is replaced, the link stays). The
    name is used as given (no `.npz` is appended).

    Args:
        path: the file to write.
        tree: the pytree to store; any nesting depth.

    Raises:
        CheckpointError: for a leaf or node type that cannot be stored or a tree that contains
            itself (the message names the key path), a missing folder, a `path` that is a
            folder, or when writing fails (the old checkpoint is then untouched).

    Example:
        >>> save("ckpt.npz", {"params": params, "opt_state": opt_state, "epoch": 3})
        >>> restored = load("ckpt.npz", like={"params": params, "opt_state": opt_state,
        ...                                   "epoch": 0})
    """
    nodes, arrays = _describe(tree)
    try:
        text = json.dumps({"format": FORMAT, "version": VERSION, "nodes": nodes})
    except ValueError as e:  # e.g. an int of more than 4300 digits
        raise CheckpointError(f"save: the tree cannot be recorded as JSON: {e}") from None
    arrays[_STRUCTURE] = np.frombuffer(text.encode(), dtype=np.uint8)
    shown, target = _save_target(path)
    safety.remove_stale_temp_files(target)
    tmp = None
    try:
        fd, tmp = safety.make_temp_file(target)
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException as e:
        _remove_quietly(tmp)
        if isinstance(e, OSError):
            raise CheckpointError(f"save: writing {shown!r} failed ({e}); the previous file, if "
                                  "any, is unchanged") from e
        raise


def _remove_quietly(path):
    try:
        if path is not None:
            os.remove(path)
    except OSError:
        pass


def _save_target(path) -> tuple[str, str]:
    """`(path as given, real file to replace)`, after checking the folder exists."""
    shown = _path_str(path, "save")
    try:
        target = os.path.realpath(shown)
        if os.path.isdir(target):
            raise CheckpointError(f"save: {shown!r} is a folder; pass a file name such as "
                                  f"{os.path.join(shown, 'ckpt.npz')!r}")
        folder = os.path.dirname(target)
        if not os.path.isdir(folder):
            raise CheckpointError(f"save: the folder {folder!r} of {shown!r} does not exist; "
                                  "create it first (os.makedirs)")
    except (OSError, ValueError) as e:
        raise CheckpointError(f"save: cannot write to {shown!r}: {e}") from None
    return shown, target


def _path_str(path, who: str) -> str:
    try:
        return os.fsdecode(path)
    except TypeError:
        raise FuncgradTypeError(f"{who}: path must be a str or os.PathLike, got "
                                f"{type(path).__name__}") from None


_CLOSE = object()  # stack marker: the container below it is finished


def _describe(tree) -> tuple[list, dict]:
    """The preorder node records of `tree` and its arrays by entry name."""
    nodes: list[dict] = []
    arrays: dict[str, np.ndarray] = {}
    open_ids: set[int] = set()  # containers on the current path: a repeat is a cycle
    stack: list = [(tree, None)]
    while stack:
        x, link = stack.pop()
        if x is _CLOSE:
            open_ids.discard(link)
            continue
        node, children = _describe_node(x, link, arrays)
        nodes.append(node)
        if children:
            if id(x) in open_ids:
                raise CheckpointError(f"save: the tree contains itself at "
                                      f"{_path_text(_keys_of(link))}")
            open_ids.add(id(x))
            stack.append((_CLOSE, id(x)))
            stack.extend((c, (link, k)) for k, c in reversed(children))
    return nodes, arrays


def _describe_node(x, link, arrays) -> tuple[dict, list]:
    """One node's record and its `(key, child)` pairs."""
    if x is None:
        return {"type": "none"}, []
    if type(x) in _SCALARS:
        value = [x.real, x.imag] if type(x) is complex else x
        return {"type": "scalar", "python": type(x).__name__, "value": value}, []
    if isinstance(x, Tracer):
        raise CheckpointError(f"save: the leaf at {_path_text(_keys_of(link))} is a traced "
                              "value; save outside jit/grad/vmap")
    if isinstance(x, (ArrayBase, np.ndarray, np.generic)):
        return _describe_leaf(x, link, arrays), []
    if type(x) in (dict, collections.OrderedDict):
        return _describe_dict(x, link)
    if type(x) in (list, tuple):
        children = [(tree_util.SequenceKey(i), c) for i, c in enumerate(x)]
        return {"type": type(x).__name__, "length": len(x)}, children
    if _is_namedtuple(x):
        t = type(x)
        return ({"type": "namedtuple", "module": t.__module__, "qualname": t.__qualname__,
                 "fields": list(t._fields)},
                [(tree_util.GetAttrKey(f), getattr(x, f)) for f in t._fields])
    raise CheckpointError(
        f"save: cannot store a {type(x).__module__}.{type(x).__qualname__} at "
        f"{_path_text(_keys_of(link))}; checkpoints hold dicts, lists, tuples, namedtuples, "
        "None, arrays and Python bool/int/float/complex (convert subclasses such as enums)")


def _describe_dict(x, link) -> tuple[dict, list]:
    for k in x:
        if type(k) not in (str, int):
            raise CheckpointError(f"save: dict key {k!r} at {_path_text(_keys_of(link))} is "
                                  "not a str or int")
    ordered = type(x) is collections.OrderedDict  # keeps its order (optax's named_chain)
    keys = list(x) if ordered else sorted(x, key=lambda k: (type(k).__name__, k))
    return ({"type": "ordered_dict" if ordered else "dict",
             "keys": [[type(k).__name__, k] for k in keys]},
            [(tree_util.DictKey(k), x[k]) for k in keys])


def _describe_leaf(x, link, arrays) -> dict:
    value = np.asarray(x)
    keys = _keys_of(link)
    if value.dtype.hasobject:
        raise CheckpointError(f"save: the array at {_path_text(keys)} has dtype object")
    name = f"leaf_{len(arrays)}"
    dtype = value.dtype.str
    if value.dtype.num >= 256:  # bfloat16 & co.: its bits, and the dtype by name
        dtype, value = value.dtype.name, value.view(_bits_dtype(value.dtype))
    arrays[name] = value
    kind = "funcgrad" if isinstance(x, ArrayBase) else "numpy"
    return {"type": "leaf", "kind": kind, "name": name, "path": tree_util.keystr(keys),
            "dtype": dtype, "shape": list(value.shape)}


def _bits_dtype(dtype):
    return np.dtype(f"<u{dtype.itemsize}")


# ---------------------------------------------------------------------------------------------
# Loading


def load(path: str | os.PathLike, like: Any = None, *, types: Iterable[type] = (),
         max_bytes: int | None = None) -> Any:
    """Reads a checkpoint written by `save`, without importing or running anything it names.

    A namedtuple node is rebuilt as its real type only when that type is allowed: found in
    `like`, listed in `types`, or defined at module level in one of funcgrad's own modules
    (optimizer states), matched by module and qualified name. Any other namedtuple loads as
    a stand-in `collections.namedtuple` with the recorded name and fields (attribute access
    and field order work, `isinstance` does not), and a `CheckpointWarning` names the types.

    Args:
        path: the file.
        like: optional pytree the checkpoint must match (e.g. freshly initialised params and
            optimizer state): same structure, and the same shape and dtype at every leaf.
            Its namedtuple types are allowed.
        types: namedtuple classes to allow beyond those in `like`, e.g. `[TrainState]`;
            function-local classes work too.
        max_bytes: the most bytes the file's entries may take once read. Default: 8 times
            the file's size (`save` stores arrays uncompressed, so genuine files need about
            1x); larger only for trusted, recompressed files.

    Returns:
        The tree, with funcgrad arrays, NumPy arrays and Python scalars where they were.

    Raises:
        CheckpointError: if the file is missing, is not a funcgrad checkpoint, is corrupt or
            crafted (entries larger than their headers or `max_bytes`, a damaged structure;
            the message names the key path), or does not match `like` (the first differing
            path).
        FuncgradTypeError: if `path`, `types` or `max_bytes` has the wrong type.

    Example:
        >>> class TrainState(NamedTuple):
        ...     step: int
        >>> save("ckpt.npz", {"state": TrainState(3)})
        >>> load("ckpt.npz", types=[TrainState])
        {'state': TrainState(step=3)}
    """
    shown = _path_str(path, "load")
    allowed = _allowed_types(like, types)
    limit = _check_max_bytes(max_bytes)
    try:
        with safety.SafeArchive(shown, limit) as archive:
            record = _read_record(archive)
            rebuild = _Rebuild(shown, archive, allowed)
            tree = rebuild.run(_record_nodes(record))
    except CheckpointError:
        raise
    except FileNotFoundError:
        raise CheckpointError(f"load: no checkpoint at {shown!r}") from None
    except IsADirectoryError:
        raise CheckpointError(f"load: {shown!r} is a folder, not a checkpoint file") from None
    except (safety.ArchiveError, *safety.READ_ERRORS) as e:
        raise CheckpointError(f"load: {shown!r} is not a readable funcgrad checkpoint (corrupt, "
                              f"crafted or another format): {e}") from None
    if like is not None:
        _check_like(shown, tree, like)
    if rebuild.stand_ins:
        warnings.warn(_stand_in_message(shown, rebuild.stand_ins), CheckpointWarning,
                      stacklevel=2)
    return tree


def _check_max_bytes(max_bytes):
    if max_bytes is None:
        return None
    if type(max_bytes) is not int:
        raise FuncgradTypeError(f"load: max_bytes must be an int or None, got "
                                f"{type(max_bytes).__name__}")
    if max_bytes < 0:
        raise FuncgradValueError(f"load: max_bytes must be >= 0, got {max_bytes}")
    return max_bytes


def _read_record(archive) -> dict:
    data = archive.read(_STRUCTURE)
    if data.dtype != np.uint8 or data.ndim != 1:
        raise safety.ArchiveError(f"its {_STRUCTURE} entry is {data.dtype}{list(data.shape)}, "
                                  "not JSON bytes")
    try:
        record = json.loads(data.tobytes().decode())
    except (ValueError, RecursionError) as e:  # JSONDecodeError, UnicodeDecodeError, digits
        raise safety.ArchiveError(f"its {_STRUCTURE} entry is not valid JSON "
                                  f"({type(e).__name__}: {e})") from None
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise safety.ArchiveError("it is not a funcgrad checkpoint (no format tag)")
    version = record.get("version")
    if type(version) is not int or version not in _READABLE_VERSIONS:
        raise safety.ArchiveError(f"its format version {version!r} is not one this funcgrad "
                                  f"reads ({', '.join(map(str, _READABLE_VERSIONS))}); "
                                  "upgrade funcgrad")
    return record


def _record_nodes(record) -> Iterable:
    if record["version"] == 1:
        return _v1_preorder(record.get("tree"))
    nodes = record.get("nodes")
    if not isinstance(nodes, list):
        raise safety.ArchiveError("its structure record has no list of nodes")
    return nodes


class _Bad(Exception):
    """A damaged node; `_Rebuild` adds the file and the key path."""


def _v1_preorder(tree):
    """The nodes of a version-1 (nested) record in preorder, as version-2 records."""
    stack = [tree]
    while stack:
        node = stack.pop()
        t = node.get("type") if isinstance(node, dict) else None
        if t not in ("dict", "list", "tuple", "namedtuple"):
            yield node
            continue
        children = _field(node, "children", list)
        if t in ("list", "tuple"):
            node = {"type": t, "length": len(children)}
        else:
            names = _field(node, "keys" if t == "dict" else "fields", list)
            if len(names) != len(children):
                raise _Bad(f"the {t} node has {len(names)} "
                           f"{'keys' if t == 'dict' else 'fields'} but {len(children)} children")
        yield node
        stack.extend(reversed(children))


def _field(node, key, kind):
    if not isinstance(node, dict):
        raise _Bad(f"a node is a JSON {type(node).__name__}, not an object")
    value = node.get(key)
    if not isinstance(value, kind) or (kind is int and type(value) is bool):
        got = "missing" if value is None else f"a {type(value).__name__}"
        raise _Bad(f"the {node.get('type')!r} node's {key!r} field is {got}")
    return value


class _Frame:
    """A container being rebuilt: the keys of its children, the values so far, its builder."""

    __slots__ = ("build", "keys", "values")

    def __init__(self, build, keys):
        self.build, self.keys, self.values = build, keys, []


class _Rebuild:
    """Builds a tree from preorder nodes with an explicit stack; `stand_ins` collects the
    namedtuple types that were not allowed, each with the first path it was found at."""

    def __init__(self, shown, archive, allowed):
        self.shown, self.archive, self.allowed = shown, archive, allowed
        self.stand_ins: dict[str, str] = {}
        self.stack = [_Frame(lambda values: values[0], [None])]

    def run(self, nodes):
        stack, result = self.stack, []
        try:
            for node in nodes:
                if not stack:
                    raise _Bad("the structure record has nodes after the end of the tree")
                self.add(node)
                while stack and len(stack[-1].values) == len(stack[-1].keys):
                    done = stack.pop()
                    (stack[-1].values if stack else result).append(done.build(done.values))
            if stack:
                raise _Bad("the structure record ends before the tree is complete")
        except (_Bad, safety.ArchiveError) as e:
            raise CheckpointError(f"load: {self.shown!r} has a damaged entry at {self.where()}: "
                                  f"{e}; the file is corrupt or was not written by "
                                  "funcgrad.io.save") from None
        return result[0]

    def where(self) -> str:
        return _path_text([f.keys[len(f.values)] for f in self.stack[1:]])

    def add(self, node):
        t = _field(node, "type", str)
        if t == "none":
            self.stack[-1].values.append(None)
        elif t == "scalar":
            self.stack[-1].values.append(_scalar(node))
        elif t == "leaf":
            self.stack[-1].values.append(self.leaf(node))
        elif t in ("dict", "ordered_dict"):
            keys = _dict_keys(node)
            build = dict if t == "dict" else collections.OrderedDict
            self.stack.append(_Frame(lambda v: build(zip(keys, v)),
                                     [tree_util.DictKey(k) for k in keys]))
        elif t in ("list", "tuple"):
            n = _field(node, "length", int)
            if n < 0:
                raise _Bad(f"the {t} node has the negative length {n}")
            self.stack.append(_Frame(list if t == "list" else tuple,
                                     _SequenceKeys(n)))
        elif t == "namedtuple":
            cls, fields = self.namedtuple_type(node)
            self.stack.append(_Frame(lambda v: cls(*v),
                                     [tree_util.GetAttrKey(f) for f in fields]))
        else:
            raise _Bad(f"unknown node type {t!r}")

    def leaf(self, node):
        kind, name = _field(node, "kind", str), _field(node, "name", str)
        dtype, shape = _field(node, "dtype", str), _field(node, "shape", list)
        if kind not in ("funcgrad", "numpy"):
            raise _Bad(f"unknown leaf kind {kind!r}")
        if name == _STRUCTURE:
            raise _Bad(f"a leaf refers to the {_STRUCTURE} entry")
        value = self.archive.read(name)
        narrow = dtypes.narrow_type(dtype)  # a name read from the file never reaches np.dtype
        stored = _bits_dtype(narrow).str if narrow is not None else dtype
        if value.dtype.str != stored or list(value.shape) != shape:
            raise _Bad(f"the entry {name!r} holds {value.dtype.str}{list(value.shape)} but the "
                       f"structure records {dtype}{shape}")
        if narrow is not None:
            value = value.view(narrow)
        if kind == "numpy":
            return value
        try:
            return fnp.asarray(value)
        except (FuncgradError, TypeError, ValueError) as e:
            raise _Bad(f"a funcgrad array cannot hold the entry {name!r}: {e}") from None

    def namedtuple_type(self, node):
        module, qualname = _field(node, "module", str), _field(node, "qualname", str)
        fields = tuple(_field(node, "fields", list))
        if not all(isinstance(f, str) for f in fields):
            raise _Bad(f"the namedtuple {module}.{qualname} has non-string field names")
        cls = self.allowed.get((module, qualname)) or _funcgrad_type(module, qualname)
        if cls is None:
            self.stand_ins.setdefault(f"{module}.{qualname}", self.where())
            return _stand_in(qualname, fields), fields
        if cls._fields != fields:
            raise _Bad(f"the namedtuple {module}.{qualname} has the fields {list(cls._fields)}, "
                       f"but the file records {list(fields)} (the class changed since saving)")
        return cls, fields


class _SequenceKeys:
    """`[SequenceKey(0), ..., SequenceKey(n - 1)]` without building it (n comes from a file)."""

    __slots__ = ("n",)

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return tree_util.SequenceKey(i)


def _scalar(node):
    python, value = _field(node, "python", str), node.get("value")
    if python == "complex":
        if (isinstance(value, list) and len(value) == 2
                and all(type(v) in (int, float) for v in value)):
            return complex(*value)
    elif python == "float":
        if type(value) in (int, float):
            return float(value)
    elif python in ("int", "bool"):
        if type(value) is (int if python == "int" else bool):
            return value
    else:
        raise _Bad(f"unknown scalar type {python!r}")
    raise _Bad(f"the {python} scalar holds {type(value).__name__} {str(value)[:40]}")


def _dict_keys(node) -> list:
    keys = []
    for pair in _field(node, "keys", list):
        if not (isinstance(pair, list) and len(pair) == 2 and pair[0] in ("str", "int")
                and type(pair[1]) is (str if pair[0] == "str" else int)):
            raise _Bad(f"the dict node has the malformed key {str(pair)[:60]}")
        keys.append(pair[1])
    if len(set(keys)) != len(keys):
        raise _Bad("the dict node lists a key twice")
    return keys


def _funcgrad_type(module: str, qualname: str):
    """A namedtuple class defined in an already imported funcgrad module, by dict lookups only
    (no import, no attribute hooks), or None."""
    if module != "funcgrad" and not module.startswith("funcgrad."):
        return None
    obj = sys.modules.get(module)
    for part in qualname.split("."):
        namespace = getattr(obj, "__dict__", None)
        obj = namespace.get(part) if isinstance(namespace, (dict, type(type.__dict__))) else None
    if (isinstance(obj, type) and issubclass(obj, tuple) and hasattr(obj, "_fields")
            and obj.__module__ == module and obj.__qualname__ == qualname):
        return obj
    return None


@functools.lru_cache(maxsize=256)
def _stand_in(qualname: str, fields: tuple):
    name = qualname.rsplit(".", 1)[-1]
    if not name.isidentifier() or keyword.iskeyword(name):
        name = "UnknownNamedTuple"
    try:
        return collections.namedtuple(name, fields, module=__name__)
    except ValueError as e:  # invalid or repeated field names
        raise _Bad(f"the namedtuple {qualname} has invalid fields: {e}") from None


def _stand_in_message(shown, stand_ins: dict) -> str:
    listed = "; ".join(f"{name} (first at {where})" for name, where in
                       list(stand_ins.items())[:5])
    more = f" and {len(stand_ins) - 5} more" if len(stand_ins) > 5 else ""
    return (f"load: {shown!r} holds namedtuples of types load may not rebuild: {listed}{more}. "
            "They loaded as stand-in namedtuples with the same fields. To get the real types "
            "back, pass like= a tree that holds them, or types=[TheClass, ...].")


def _allowed_types(like, types) -> dict:
    """`{(module, qualname): class}` of the namedtuples in `like` and in `types`."""
    allowed = {}
    try:
        extra = list(types)
    except TypeError:
        raise FuncgradTypeError(f"load: types= must be a list of namedtuple classes, got "
                                f"{type(types).__name__}") from None
    for cls in extra:
        if not (isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields")):
            raise FuncgradTypeError(f"load: types= holds {cls!r}, which is not a namedtuple "
                                    "class")
        allowed.setdefault((cls.__module__, cls.__qualname__), cls)
    seen, stack = set(), [like]
    while stack:
        x = stack.pop()
        if type(x) not in (dict, list, tuple) and not _is_namedtuple(x) or id(x) in seen:
            continue
        seen.add(id(x))
        if _is_namedtuple(x):
            allowed.setdefault((type(x).__module__, type(x).__qualname__), type(x))
        stack.extend(x.values() if type(x) is dict else x)
    return allowed


# ---------------------------------------------------------------------------------------------
# Matching `like=`


def _check_like(shown, tree, like):
    """Raises a CheckpointError at the first path where `tree` and `like` differ."""
    stack = [(None, like, tree)]
    while stack:
        link, want, got = stack.pop()
        children = _like_children(want)
        if children is None and _like_children(got) is None:
            if np.shape(want) != np.shape(got) or _dtype(want) != _dtype(got):
                raise CheckpointError(
                    f"load: {shown!r} does not match like= at path "
                    f"{_path_text(_keys_of(link))}: expected {_dtype(want)}"
                    f"{list(np.shape(want))}, found {_dtype(got)}{list(np.shape(got))}")
            continue
        if (children is None or type(got) is not type(want)
                or len(_like_children(got)) != len(children)
                or (type(want) is dict and set(want) != set(got))):
            raise CheckpointError(
                f"load: {shown!r} does not have the structure of like= at "
                f"{_path_text(_keys_of(link))}: expected {_describe_kind(want)}, found "
                f"{_describe_kind(got)}{_same_name_note(want, got)}")
        got_children = dict(_like_children(got))
        stack.extend(((link, k), c, got_children[k]) for k, c in reversed(children))


def _like_children(x):
    """`(key, child)` pairs of a container a checkpoint can hold, or None for a leaf."""
    if type(x) is dict:
        try:
            keys = sorted(x, key=lambda k: (type(k).__name__, k))  # the order save uses
        except TypeError:
            keys = list(x)
        return [(tree_util.DictKey(k), x[k]) for k in keys]
    if type(x) in (list, tuple):
        return [(tree_util.SequenceKey(i), c) for i, c in enumerate(x)]
    if _is_namedtuple(x):
        return [(tree_util.GetAttrKey(f), getattr(x, f)) for f in type(x)._fields]
    return [] if x is None else None


def _describe_kind(x) -> str:
    if type(x) is dict:
        keys = sorted(map(repr, x))
        shown = ", ".join(keys[:8]) + (", ..." if len(keys) > 8 else "")
        return f"a dict with keys [{shown}]"
    if type(x) in (list, tuple):
        return f"a {type(x).__name__} of {len(x)}"
    if _is_namedtuple(x):
        return f"a namedtuple {type(x).__module__}.{type(x).__qualname__}"
    if x is None:
        return "None"
    return f"a leaf {type(x).__name__}"


def _same_name_note(want, got) -> str:
    if (_is_namedtuple(want) and _is_namedtuple(got) and type(want) is not type(got)
            and _describe_kind(want) == _describe_kind(got)):
        return " (another class of the same name)"
    return ""


def _dtype(x):
    if type(x) in _SCALARS:
        return type(x).__name__
    if hasattr(x, "dtype"):
        return str(np.dtype(x.dtype))
    raise FuncgradTypeError(f"load: like= holds a {type(x).__name__} leaf; leaves are arrays "
                            "and Python scalars")
