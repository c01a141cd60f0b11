"""Adversarial tests for funcgrad.io (issue #15): crafted, corrupted and carelessly used
checkpoint files either load the right tree or raise CheckpointError; loading never imports
anything a file names; sizes are checked before allocation; saves follow symlinks, clean up
after killed writers and handle any depth."""

import io as pyio
import json
import os
import signal
import struct
import subprocess
import sys
import tempfile
import textwrap
import uuid
import warnings
import zipfile
from typing import NamedTuple

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_io import assert_same  # tests/ is on sys.path, as for cuda_canonical

import funcgrad.numpy as fnp
from funcgrad import io, optim
from funcgrad.core import Array

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))




def write_raw(path, record, arrays=None):
    """A checkpoint-shaped .npz with any `__structure__` (a JSON-able record or raw text)."""
    text = record if isinstance(record, str) else json.dumps(record)
    with open(path, "wb") as f:
        np.savez(f, **(arrays or {}), __structure__=np.frombuffer(text.encode(), np.uint8))


def v2(*nodes):
    return {"format": "funcgrad-checkpoint", "version": 2, "nodes": list(nodes)}


def leaf(name="leaf_0", dtype="<f4", shape=(3,), kind="numpy"):
    return {"type": "leaf", "kind": kind, "name": name, "path": "", "dtype": dtype,
            "shape": list(shape)}


NONE = {"type": "none"}
ZEROS = {"leaf_0": np.zeros(3, np.float32)}


def npy_bytes(header, data=b""):
    buf = pyio.BytesIO()
    np.lib.format.write_array_header_1_0(buf, header)
    return buf.getvalue() + data


def write_zip(path, entries, compression=zipfile.ZIP_STORED):
    with zipfile.ZipFile(path, "w", compression) as z:
        for name, data in entries.items():
            z.writestr(name, data)


def structure_entry(record):
    return npy_bytes({"descr": "|u1", "fortran_order": False,
                      "shape": (len(json.dumps(record).encode()),)}, json.dumps(record).encode())


def patch_central_directory(raw, name, offset, value):
    """`raw` with the 4-byte field at `offset` of `name`'s central-directory record set."""
    raw = bytearray(raw)
    at = raw.find(b"PK\x01\x02")
    while at >= 0:
        n, extra, comment = struct.unpack("<HHH", raw[at + 28:at + 34])
        if raw[at + 46:at + 46 + n].decode() == name:
            raw[at + offset:at + offset + 4] = struct.pack("<I", value)
            return bytes(raw)
        at = raw.find(b"PK\x01\x02", at + 46 + n + extra + comment)
    raise AssertionError(f"{name} not in the archive")


# ---------------------------------------------------------------------------------------------
# Finding 4: keys/fields and children that differ in length


@pytest.mark.parametrize("node, words", [
    ({"type": "dict", "keys": [["str", "a"], ["str", "b"]], "children": [NONE]},
     "2 keys but 1 children"),
    ({"type": "namedtuple", "module": "m", "qualname": "T", "fields": ["a"],
      "children": [NONE, NONE]}, "1 fields but 2 children"),
])
def test_version_1_keys_and_children_of_different_lengths_are_errors(tmp_path, node, words):
    record = {"format": "funcgrad-checkpoint", "version": 1,
              "tree": {"type": "list", "children": [NONE, node]}}
    write_raw(tmp_path / "c.npz", record)
    with pytest.raises(io.CheckpointError, match=rf"c\.npz.* at \[1\]: .*{words}"):
        io.load(tmp_path / "c.npz")


def test_version_2_children_missing_after_a_dict_is_an_error(tmp_path):
    write_raw(tmp_path / "c.npz", v2({"type": "dict", "keys": [["str", "a"], ["str", "b"]]},
                                     NONE))
    with pytest.raises(io.CheckpointError, match=r"at \['b'\]: .*ends before"):
        io.load(tmp_path / "c.npz")


# ---------------------------------------------------------------------------------------------
# Finding 6: load never imports a module a checkpoint names


@pytest.fixture
def booby_trapped_module(tmp_path, monkeypatch):
    """A module on sys.path that writes a marker file when imported: `(name, marker)`."""
    name = f"funcgrad_trap_{uuid.uuid4().hex}"
    marker = tmp_path / "imported.txt"
    folder = tmp_path / "site"
    folder.mkdir()
    (folder / f"{name}.py").write_text(textwrap.dedent(f"""
        from typing import NamedTuple
        open({str(marker)!r}, "w").write("imported")
        class State(NamedTuple):
            a: object
    """))
    monkeypatch.syspath_prepend(str(folder))
    return name, marker


@pytest.mark.parametrize("version", [1, 2])
def test_load_does_not_import_a_module_the_checkpoint_names(tmp_path, booby_trapped_module,
                                                            version):
    name, marker = booby_trapped_module
    node = {"type": "namedtuple", "module": name, "qualname": "State", "fields": ["a"]}
    scalar = {"type": "scalar", "python": "int", "value": 1}
    if version == 1:
        record = {"format": "funcgrad-checkpoint", "version": 1,
                  "tree": dict(node, children=[scalar])}
    else:
        record = v2(node, scalar)
    write_raw(tmp_path / "c.npz", record)
    with pytest.warns(io.CheckpointWarning, match=rf"{name}\.State.*like=.*types="):
        back = io.load(tmp_path / "c.npz")
    assert not marker.exists()
    assert name not in sys.modules
    assert back.a == 1 and back._fields == ("a",) and type(back).__name__ == "State"


@pytest.mark.parametrize("module, qualname", [
    ("unittest.__main__", "main"), ("os", "system"), ("funcgrad.never_a_module", "State"),
    ("funcgrad.io", "CheckpointError"), ("funcgrad.optim", "__class__.__base__"),
])
def test_named_modules_stay_unimported_and_non_namedtuples_are_never_built(tmp_path, module,
                                                                           qualname):
    was_loaded = module in sys.modules
    write_raw(tmp_path / "c.npz", v2({"type": "namedtuple", "module": module,
                                      "qualname": qualname, "fields": []}))
    with pytest.warns(io.CheckpointWarning):
        back = io.load(tmp_path / "c.npz")
    assert type(back).__module__ == "funcgrad.io" and back == ()
    assert (module in sys.modules) == was_loaded


def test_types_and_like_allow_a_namedtuple_without_importing(tmp_path, booby_trapped_module):
    name, marker = booby_trapped_module

    class State(NamedTuple):
        a: object

    State.__module__, State.__qualname__ = name, "State"  # as if defined in that module
    io.save(tmp_path / "c.npz", State(np.ones(2)))
    for back in (io.load(tmp_path / "c.npz", types=[State]),
                 io.load(tmp_path / "c.npz", like=State(np.zeros(2)))):
        assert type(back) is State
    assert not marker.exists() and name not in sys.modules


def make_local_state():
    class LocalState(NamedTuple):
        step: object
        w: object

    return LocalState


def test_function_local_namedtuples_load_as_their_type_with_like_or_types(tmp_path):
    LocalState = make_local_state()
    assert "<locals>" in LocalState.__qualname__
    tree = {"s": LocalState(3, np.arange(2.0))}
    io.save(tmp_path / "l.npz", tree)
    assert type(io.load(tmp_path / "l.npz", like=tree)["s"]) is LocalState
    assert type(io.load(tmp_path / "l.npz", types=[LocalState])["s"]) is LocalState
    with pytest.warns(io.CheckpointWarning, match="LocalState"):
        assert type(io.load(tmp_path / "l.npz")["s"]) is not LocalState
    other = make_local_state()  # same name, another class: like= says which one is meant
    like = {"s": other(0, np.zeros(2))}
    assert type(io.load(tmp_path / "l.npz", like=like)["s"]) is other
    with pytest.raises(io.CheckpointError, match="another class of the same name"):
        io.load(tmp_path / "l.npz", like=like, types=[LocalState])


def test_optimizer_states_load_as_their_types_without_like(tmp_path):
    params = {"w": fnp.ones(3)}
    state = optim.adamw(1e-3).init(params)
    io.save(tmp_path / "o.npz", state)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_same(io.load(tmp_path / "o.npz"), state)


def test_bad_types_argument_is_a_type_error(tmp_path):
    io.save(tmp_path / "o.npz", 1)
    with pytest.raises(TypeError, match="namedtuple class"):
        io.load(tmp_path / "o.npz", types=[dict])
    with pytest.raises(TypeError, match="list of namedtuple classes"):
        io.load(tmp_path / "o.npz", types=3)


# ---------------------------------------------------------------------------------------------
# Finding 9: crafted records, sizes, zip bombs


@pytest.mark.parametrize("record, words", [
    (v2({"type": "bogus"}), "unknown node type 'bogus'"),
    (v2(["not", "an", "object"]), "not an object"),
    (v2({"type": "scalar", "python": "int", "value": "3"}), "int scalar holds str"),
    (v2({"type": "scalar", "python": "exec", "value": 1}), "unknown scalar type"),
    (v2({"type": "scalar", "python": "complex", "value": [1]}), "complex scalar"),
    (v2({"type": "dict", "keys": [["str", 1]]}), "malformed key"),
    (v2({"type": "dict", "keys": [["int", "1"]]}), "malformed key"),
    (v2({"type": "dict", "keys": [["str", "a"], ["str", "a"]]}, NONE, NONE), "key twice"),
    (v2({"type": "dict"}), "'keys' field is missing"),
    (v2({"type": "list", "length": -1}), "negative length"),
    (v2({"type": "list", "length": True}), "'length' field is a bool"),
    (v2({"type": "list", "length": 10**12}), "ends before"),
    (v2(leaf(kind="pickle")), "unknown leaf kind"),
    (v2(leaf(shape=(4,))), r"holds <f4\[3\] but the structure records <f4\[4\]"),
    (v2(leaf(dtype="<f8")), "structure records <f8"),
    (v2(leaf(name="leaf_9")), "'leaf_9' .*missing"),
    (v2(leaf(name="__structure__")), "refers to the __structure__"),
    (v2({"type": "list", "length": 2}, leaf(), leaf()), "'leaf_0' is used twice"),
    (v2({"type": "namedtuple", "module": "m", "qualname": "T", "fields": [1]}), "non-string"),
    (v2({"type": "namedtuple", "module": "m", "qualname": "T", "fields": ["a", "a"]}, NONE,
        NONE), "invalid fields"),
    (v2({"type": "namedtuple", "module": "funcgrad.optim.base", "qualname": "MaskedNode",
         "fields": ["x"]}, NONE), "class changed since saving"),
    (v2(), "ends before"),
    (v2(NONE, NONE), "after the end"),
    ({"format": "funcgrad-checkpoint", "version": 2, "nodes": {}}, "no list of nodes"),
    ({"format": "funcgrad-checkpoint", "version": 3, "nodes": []}, "version 3"),
    ({"format": "funcgrad-checkpoint", "version": True, "nodes": []}, "version True"),
    ({"format": "funcgrad-checkpoint", "version": 1}, "not an object"),
    ({"format": "something else"}, "not a funcgrad checkpoint"),
    ([1, 2], "not a funcgrad checkpoint"),
    ("[" * 100_000, "not valid JSON"),
    ('{"format": "funcgrad-checkpoint", "version": 2, "nodes": [' + "9" * 5000 + "]}",
     "not valid JSON"),
    ("\udcff", "not valid JSON"),
])
def test_crafted_structure_records_are_clear_errors(tmp_path, record, words):
    try:
        write_raw(tmp_path / "c.npz", record, ZEROS)
    except UnicodeEncodeError:  # a lone surrogate: write invalid UTF-8 directly
        with open(tmp_path / "c.npz", "wb") as f:
            np.savez(f, __structure__=np.frombuffer(b"\xff\xfe", np.uint8))
    with pytest.raises(io.CheckpointError, match=rf"c\.npz.*{words}"):
        io.load(tmp_path / "c.npz")


def test_a_funcgrad_leaf_of_a_dtype_funcgrad_lacks_is_an_error(tmp_path):
    write_raw(tmp_path / "c.npz", v2(leaf(dtype="|S3", kind="funcgrad")),
              {"leaf_0": np.array([b"abc"] * 3)})
    with pytest.raises(io.CheckpointError, match="funcgrad array cannot hold"):
        io.load(tmp_path / "c.npz")


@pytest.mark.parametrize("header, data, words", [
    ({"descr": "<f4", "fortran_order": False, "shape": (10**12,)}, b"", "declares <f4"),
    ({"descr": "<f4", "fortran_order": False, "shape": (10**6, 10**6, 10**6)}, b"\0" * 12,
     "declares"),
    ({"descr": "<f4", "fortran_order": False, "shape": (-3,)}, b"\0" * 12, "negative shape"),
    ({"descr": "|O", "fortran_order": False, "shape": (3,)}, b"\0" * 24, "Python objects"),
    ({"descr": "<f4", "fortran_order": False, "shape": (4,)}, b"\0" * 12, r"declares <f4\[4\]"),
])
def test_entry_headers_are_checked_before_allocating(tmp_path, header, data, words):
    record = v2(leaf(shape=header["shape"]))
    write_zip(tmp_path / "c.npz", {"leaf_0.npy": npy_bytes(header, data),
                                   "__structure__.npy": structure_entry(record)})
    with pytest.raises(io.CheckpointError, match=words):
        io.load(tmp_path / "c.npz", max_bytes=2**62)


def test_zip_bombs_are_rejected_before_decompressing(tmp_path):
    n = 2**23
    record = v2(leaf(dtype="|u1", shape=(n,)))
    entries = {"leaf_0.npy": npy_bytes({"descr": "|u1", "fortran_order": False, "shape": (n,)},
                                       bytes(n)),
               "__structure__.npy": structure_entry(record)}
    bomb = tmp_path / "bomb.npz"
    write_zip(bomb, entries, zipfile.ZIP_DEFLATED)
    assert os.path.getsize(bomb) < n // 200
    with pytest.raises(io.CheckpointError, match=r"bomb\.npz.*limit.*max_bytes="):
        io.load(bomb)
    assert io.load(bomb, max_bytes=2 * n).shape == (n,)  # trusted: it is a valid file
    raw = bomb.read_bytes()
    (tmp_path / "ratio.npz").write_bytes(patch_central_directory(raw, "leaf_0.npy", 24, 2**32 - 1))
    with pytest.raises(io.CheckpointError, match="beyond what deflate can do"):
        io.load(tmp_path / "ratio.npz", max_bytes=2**62)


def test_stored_entries_must_claim_their_stored_size(tmp_path):
    io.save(tmp_path / "c.npz", {"w": np.ones(3)})
    raw = patch_central_directory((tmp_path / "c.npz").read_bytes(), "leaf_0.npy", 24, 2**31)
    (tmp_path / "bad.npz").write_bytes(raw)
    with pytest.raises(io.CheckpointError, match="claims 2147483648 bytes but stores"):
        io.load(tmp_path / "bad.npz", max_bytes=2**62)


def test_max_bytes_limits_what_a_genuine_file_may_take(tmp_path):
    io.save(tmp_path / "c.npz", {"w": np.ones(1000)})
    with pytest.raises(io.CheckpointError, match="more than the limit of 100 bytes"):
        io.load(tmp_path / "c.npz", max_bytes=100)
    assert io.load(tmp_path / "c.npz", max_bytes=10**6)["w"].shape == (1000,)
    with pytest.raises(TypeError, match="max_bytes"):
        io.load(tmp_path / "c.npz", max_bytes=1.5)


def test_duplicate_and_foreign_zip_entries(tmp_path):
    record = v2(leaf())
    good = npy_bytes({"descr": "<f4", "fortran_order": False, "shape": (3,)}, bytes(12))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate name
        write_zip(tmp_path / "dup.npz", {"leaf_0.npy": good, "__structure__.npy":
                                         structure_entry(record)})
        with zipfile.ZipFile(tmp_path / "dup.npz", "a") as z:
            z.writestr("leaf_0.npy", good)
    with pytest.raises(io.CheckpointError, match="lists the entry 'leaf_0.npy' twice"):
        io.load(tmp_path / "dup.npz")
    write_zip(tmp_path / "bz.npz", {"leaf_0.npy": good,
                                    "__structure__.npy": structure_entry(record)},
              zipfile.ZIP_BZIP2)
    with pytest.raises(io.CheckpointError, match="compression method 12"):
        io.load(tmp_path / "bz.npz")


def test_load_of_a_folder_or_a_non_file_is_an_error(tmp_path):
    with pytest.raises(io.CheckpointError, match="is a folder"):
        io.load(tmp_path)
    with pytest.raises(TypeError, match="path must be a str"):
        io.load(3)


# ---------------------------------------------------------------------------------------------
# Finding 9: fuzzing bytes and records. A load either returns the saved tree or raises
# CheckpointError; nothing else may escape.


def _valid_tree():
    params = {"w": fnp.ones((2, 3)), "b": np.arange(3, dtype=np.int64)}
    return {"p": params, "s": optim.masked(optim.scale_by_adam(), "**/w").init(params),
            7: [1, (2.5, True), None, 1 + 2j], "f": np.asfortranarray(np.ones((2, 2))),
            "e": ()}


def _valid_bytes():
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "v.npz")
        io.save(path, _valid_tree())
        with open(path, "rb") as f:
            return f.read()


VALID = _valid_bytes()


def load_bytes(raw, expected=None):
    """Loads `raw` as a checkpoint: the tree (equal to `expected` if given) or None on a
    CheckpointError; any other exception fails the test."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "f.npz")
        with open(path, "wb") as f:
            f.write(raw)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", io.CheckpointWarning)
                tree = io.load(path)
        except io.CheckpointError as e:
            assert "f.npz" in str(e)
            return None
    if expected is not None:
        assert_same(tree, expected)
    return tree


def test_the_fuzzed_file_loads_unchanged():
    assert_same(load_bytes(VALID), _valid_tree())


_positions = st.one_of(st.integers(0, len(VALID) - 1),  # anywhere, or in the zip directory
                       st.integers(len(VALID) - 700, len(VALID) - 1), st.integers(0, 200))


@given(st.lists(st.tuples(_positions, st.integers(1, 255)), min_size=1, max_size=4))
def test_fuzz_flipped_bytes(flips):
    raw = bytearray(VALID)
    for at, mask in flips:
        raw[at] ^= mask
    load_bytes(bytes(raw), _valid_tree())


@given(st.integers(0, len(VALID) - 1))
def test_fuzz_truncated_files(n):
    load_bytes(VALID[:n], _valid_tree())


@given(_positions, st.binary(min_size=1, max_size=64))
def test_fuzz_replaced_spans(at, data):
    load_bytes(VALID[:at] + data + VALID[at + len(data):], _valid_tree())


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats()
    | st.sampled_from(["none", "scalar", "leaf", "dict", "list", "tuple", "namedtuple",
                       "leaf_0", "leaf_1", "__structure__", "funcgrad", "numpy", "<f4", "int",
                       "str", "complex", "os", "a", -1, 10**12, [], [["str", "a"]], [3]])
    | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["type", "keys", "length", "fields", "name", "dtype", "shape", "kind",
                         "python", "value", "module", "qualname", "children"]) | st.text(
            max_size=4), inner, max_size=4),
    max_leaves=10)


def _valid_record(version):
    with zipfile.ZipFile(pyio.BytesIO(VALID)) as z, z.open("__structure__.npy") as f:
        record = json.loads(np.lib.format.read_array(f).tobytes())
    if version == 1:
        record = {"format": record["format"], "version": 1, "tree": _as_v1(record["nodes"])}
    with zipfile.ZipFile(pyio.BytesIO(VALID)) as z:
        arrays = {n[:-4]: np.lib.format.read_array(z.open(n)) for n in z.namelist()
                  if n != "__structure__.npy"}
    return record, arrays


def _as_v1(nodes):
    """The nested version-1 tree of version-2 preorder nodes (test-side, recursive)."""
    it = iter(nodes)

    def build():
        node = dict(next(it))
        t = node["type"]
        n = {"dict": lambda: len(node["keys"]), "namedtuple": lambda: len(node["fields"]),
             "list": lambda: node.pop("length"), "tuple": lambda: node.pop("length")}
        if t in n:
            count = n[t]()
            node["children"] = [build() for _ in range(count)]
        return node

    return build()


def _positions_in(value):
    """Every (container, key) slot of a JSON value."""
    out, stack = [], [value]
    while stack:
        x = stack.pop()
        slots = x.items() if isinstance(x, dict) else enumerate(x) if isinstance(x, list) else ()
        for k, c in slots:
            out.append((x, k))
            stack.append(c)
    return out


@given(st.sampled_from([1, 2]), st.data())
def test_fuzz_mutated_structure_records(version, data):
    record, arrays = _valid_record(version)
    slots = _positions_in(record)
    for _ in range(data.draw(st.integers(1, 3))):
        container, key = slots[data.draw(st.integers(0, len(slots) - 1))]
        if data.draw(st.booleans()) and isinstance(container, dict):
            container.pop(key, None)
        elif key in (container if isinstance(container, dict) else range(len(container))):
            container[key] = data.draw(_json)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "f.npz")
        write_raw(path, record, arrays)
        with open(path, "rb") as f:
            load_bytes(f.read())


@given(st.lists(_json, max_size=6))
def test_fuzz_random_node_lists(nodes):
    _, arrays = _valid_record(2)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "f.npz")
        write_raw(path, v2(*nodes), arrays)
        with open(path, "rb") as f:
            load_bytes(f.read())


@given(st.sampled_from(["<f4", "|O", "<U0", "|S0", "|V0", "[('a', '<f4')]", ">f8", "<c8",
                        "|b1", "<M8[s]"]),
       st.lists(st.integers(-2, 10**7), max_size=3), st.booleans(), st.binary(max_size=40))
def test_fuzz_entry_headers(descr, shape, fortran, data):
    descr = eval(descr) if descr.startswith("[") else descr  # a structured descr is a list
    try:
        header = npy_bytes({"descr": descr, "fortran_order": fortran, "shape": tuple(shape)},
                           data)
    except (TypeError, ValueError):
        return  # numpy itself refuses to write this header
    record = v2(leaf(dtype=np.dtype(descr).str, shape=shape))
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "f.npz")
        write_zip(path, {"leaf_0.npy": header, "__structure__.npy": structure_entry(record)})
        with open(path, "rb") as f:
            load_bytes(f.read())


# ---------------------------------------------------------------------------------------------
# Finding 9: saving into missing folders, onto folders, through symlinks; killed saves


def test_save_into_a_missing_folder_or_onto_a_folder_is_a_checkpoint_error(tmp_path):
    with pytest.raises(io.CheckpointError, match=r"folder .*nope.* does not exist"):
        io.save(tmp_path / "nope" / "c.npz", {"w": np.ones(2)})
    with pytest.raises(io.CheckpointError, match="is a folder"):
        io.save(tmp_path, {"w": np.ones(2)})
    with pytest.raises(io.CheckpointError, match="cannot write"):
        io.save(str(tmp_path / "a\0b"), {"w": np.ones(2)})
    assert os.listdir(tmp_path) == []


def test_save_through_a_symlink_replaces_its_target_and_keeps_the_link(tmp_path):
    (tmp_path / "real").mkdir()
    link = tmp_path / "link.npz"
    link.symlink_to(os.path.join("real", "ckpt.npz"))  # dangling until the first save
    io.save(link, {"w": np.ones(2)})
    io.save(link, {"w": np.zeros(2)})
    assert link.is_symlink() and (tmp_path / "real" / "ckpt.npz").is_file()
    np.testing.assert_array_equal(io.load(link)["w"], [0, 0])
    assert sorted(os.listdir(tmp_path / "real")) == ["ckpt.npz"]
    assert sorted(os.listdir(tmp_path)) == ["link.npz", "real"]


def test_save_refuses_what_json_or_the_format_cannot_hold(tmp_path):
    import enum

    class Color(enum.IntEnum):
        RED = 1

    cycle = []
    cycle.append(cycle)
    for tree, words in [({"n": 10**5000}, "cannot be recorded as JSON"),
                        ({"c": [cycle]}, r"contains itself at \['c'\]\[0\]\[0\]"),
                        ({"c": Color.RED}, "Color"), ({Color.RED: 1}, "dict key"),
                        ({"x": np.array([object()])}, "dtype object")]:
        with pytest.raises(io.CheckpointError, match=words):
            io.save(tmp_path / "c.npz", tree)
    assert os.listdir(tmp_path) == []


def _dead_pid():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_save_removes_temporary_files_of_dead_writers_only(tmp_path):
    dead = _dead_pid()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        names = {"stale": f".ckpt.npz.funcgrad-tmp-{dead}-abcd_123",
                 "live": f".ckpt.npz.funcgrad-tmp-{live.pid}-abcd_123",
                 "mine": f".ckpt.npz.funcgrad-tmp-{os.getpid()}-abcd_123",
                 "other_target": f".other.npz.funcgrad-tmp-{dead}-abcd_123",
                 "not_ours": f".ckpt.npz.funcgrad-tmp-{dead}-x",
                 "user_file": f"ckpt.npz.funcgrad-tmp-{dead}-abcd_123"}
        for name in names.values():
            (tmp_path / name).write_bytes(b"partial")
        io.save(tmp_path / "ckpt.npz", {"w": np.ones(2)})
    finally:
        live.kill()
        live.wait()
    left = set(os.listdir(tmp_path))
    assert left == {"ckpt.npz"} | {v for k, v in names.items() if k != "stale"}


KILLED_SAVE = """
import os, signal, sys
import numpy as np
from funcgrad import io

def dying_savez(f, **arrays):
    f.write(b"partial bytes" * 1000)
    f.flush()
    os.kill(os.getpid(), signal.SIGKILL)

io.np.savez = dying_savez
io.save(sys.argv[1], {"w": np.zeros(2)})
"""


def test_a_save_killed_with_sigkill_keeps_the_old_file_and_the_next_save_cleans_up(tmp_path):
    path = tmp_path / "ckpt.npz"
    io.save(path, {"w": np.ones(2)})
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO, *sys.path]))
    child = subprocess.run([sys.executable, "-c", KILLED_SAVE, str(path)], env=env, cwd=REPO)
    assert child.returncode == -signal.SIGKILL
    orphans = [n for n in os.listdir(tmp_path) if n != "ckpt.npz"]
    assert len(orphans) == 1 and orphans[0].startswith(".ckpt.npz.funcgrad-tmp-")
    np.testing.assert_array_equal(io.load(path)["w"], [1, 1])
    io.save(path, {"w": np.full(2, 5.0)})
    assert os.listdir(tmp_path) == ["ckpt.npz"]
    np.testing.assert_array_equal(io.load(path)["w"], [5, 5])


# ---------------------------------------------------------------------------------------------
# Finding 10: depth


def nested(depth, leaf_value):
    """A chain of lists, dicts, tuples and namedtuples `depth` deep around `leaf_value`."""
    x = leaf_value
    for i in range(depth):
        x = ([x], {"k": x}, (x,), optim.MaskedState(x))[i % 4]
    return x


def depth_of(x):
    n = 0
    while not isinstance(x, (np.ndarray, Array)):
        x = x["k"] if isinstance(x, dict) else x[0]
        n += 1
    return n


@pytest.mark.parametrize("depth", [1000, 20_000])
def test_deep_trees_save_and_load(tmp_path, depth):
    tree = nested(depth, np.arange(3))
    io.save(tmp_path / "d.npz", tree)
    assert depth_of(io.load(tmp_path / "d.npz")) == depth
    assert depth_of(io.load(tmp_path / "d.npz", like=tree)) == depth
    with pytest.raises(io.CheckpointError, match=r"\.\.\.\(\d+ levels\)\.\.\..*int64\[4\]"):
        io.load(tmp_path / "d.npz", like=nested(depth, np.arange(4)))


def test_crafted_depth_of_100_000(tmp_path):
    n = 100_000
    write_raw(tmp_path / "v2.npz", v2(*[{"type": "list", "length": 1}] * n, leaf()), ZEROS)
    assert depth_of(io.load(tmp_path / "v2.npz")) == n
    nested_v1 = ('{"format": "funcgrad-checkpoint", "version": 1, "tree": '
                 + '{"type": "list", "children": [' * n + '{"type": "none"}' + "]}" * n + "}")
    write_raw(tmp_path / "v1.npz", nested_v1)
    with pytest.raises(io.CheckpointError, match="not valid JSON.*Recursion"):
        io.load(tmp_path / "v1.npz")
