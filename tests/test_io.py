"""Tests for funcgrad.io: checkpoints round-trip params, model state and optimizer state
(NamedTuples) with dtypes; corrupt files, mismatched structures and failed saves are clear
errors that never damage an existing checkpoint."""

import os
from typing import NamedTuple

import numpy as np
import pytest

import funcgrad.numpy as fnp
from funcgrad import io, nn, optim, random
from funcgrad.core import Array
from funcgrad.tree_util import tree_flatten, tree_leaves, tree_map, tree_structure


class Custom(NamedTuple):
    a: object
    b: object


def training_tree():
    model = nn.Sequential(nn.Linear(4), nn.BatchNorm(), nn.ReLU(), nn.Linear(2))
    params, state = model.init(random.PRNGKey(0), fnp.ones((3, 5)))
    opt = optim.adamw(optim.exponential_decay(1e-3, 10, 0.5), mask="**/w")
    opt_state = opt.init(params)
    grads = tree_map(fnp.ones_like, params)
    _, opt_state = opt.update(grads, opt_state, params)  # counts become 1
    return {"params": params, "model_state": state, "opt_state": opt_state, "epoch": 7,
            "lr": 0.5, "done": False, "note": None}


def assert_same(a, b):
    la, ta = tree_flatten(a)
    lb, tb = tree_flatten(b)
    assert ta == tb
    for x, y in zip(la, lb):
        assert type(x) is type(y)
        if isinstance(x, (Array, np.ndarray)):
            assert x.dtype == y.dtype and x.shape == y.shape
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
        else:
            assert x == y


def test_round_trip_training_state(tmp_path):
    tree = training_tree()
    path = tmp_path / "ckpt.npz"
    io.save(path, tree)
    back = io.load(path)
    assert_same(back, tree)
    adam_state = back["opt_state"][0]
    assert isinstance(adam_state, optim.ScaleByAdamState) and int(adam_state.count) == 1
    assert isinstance(back["opt_state"][1], optim.MaskedState)
    assert isinstance(back["opt_state"][1].inner_state, optim.EmptyState)
    assert float(optim.current_lr(back["opt_state"])) == pytest.approx(1e-3)
    assert_same(io.load(str(path), like=tree), tree)


def test_masked_nodes_and_mixed_containers_round_trip(tmp_path):
    params = {"layer": {"w": fnp.ones((2, 2)), "b": fnp.zeros(2)}}
    state = optim.masked(optim.scale_by_adam(), "**/w").init(params)
    tree = {"s": state, 3: [1, (2.5, True)], "t": (), "l": [], "d": {},
            "c": Custom(np.arange(3, dtype=np.int64), 1 + 2j)}
    io.save(tmp_path / "m.npz", tree)
    back = io.load(tmp_path / "m.npz", types=[Custom])
    assert isinstance(back["s"].inner_state.mu["layer"]["b"], optim.MaskedNode)
    assert_same(back, tree)
    assert back["c"].a.dtype == np.int64  # NumPy leaves keep 64-bit dtypes
    assert_same(io.load(tmp_path / "m.npz", like=tree), tree)


def test_namedtuple_types_not_allowed_load_as_stand_ins_with_a_warning(tmp_path):
    io.save(tmp_path / "c.npz", {"c": Custom(np.arange(3), 2.5)})
    with pytest.warns(io.CheckpointWarning, match=r"test_io\.Custom.*\['c'\].*like=.*types="):
        back = io.load(tmp_path / "c.npz")
    assert not isinstance(back["c"], Custom)
    assert type(back["c"]).__name__ == "Custom" and back["c"]._fields == ("a", "b")
    np.testing.assert_array_equal(back["c"].a, np.arange(3))
    assert back["c"].b == 2.5


def test_dtypes_round_trip(tmp_path):
    tree = {name: fnp.asarray(np.arange(4).astype(name))
            for name in ("float32", "int32", "uint8", "bool", "float16", "int8", "uint32")}
    tree["numpy_f64"] = np.linspace(0, 1, 3)
    tree["scalar"] = fnp.asarray(np.float32(2.5))
    io.save(tmp_path / "d.npz", tree)
    assert_same(io.load(tmp_path / "d.npz"), tree)


def test_training_continues_identically_after_reload(tmp_path):
    params = {"w": fnp.asarray(np.linspace(-1, 1, 6, dtype=np.float32))}
    opt = optim.adam(0.1)
    state = opt.init(params)
    loss_grad = lambda p: {"w": 2 * p["w"] - 1}
    for _ in range(3):
        updates, state = opt.update(loss_grad(params), state, params)
        params = optim.apply_updates(params, updates)
    io.save(tmp_path / "c.npz", (params, state))
    params2, state2 = io.load(tmp_path / "c.npz", like=(params, state))
    for _ in range(3):
        updates, state = opt.update(loss_grad(params), state, params)
        params = optim.apply_updates(params, updates)
        updates, state2 = opt.update(loss_grad(params2), state2, params2)
        params2 = optim.apply_updates(params2, updates)
    np.testing.assert_array_equal(np.asarray(params["w"]), np.asarray(params2["w"]))


def test_load_into_a_different_structure_names_the_path(tmp_path):
    tree = training_tree()
    io.save(tmp_path / "s.npz", tree)
    other = dict(tree, params=tree["params"][:-1])
    with pytest.raises(io.CheckpointError, match=r"\['params'\]") as info:
        io.load(tmp_path / "s.npz", like=other)
    assert "structure" in str(info.value)
    reshaped = dict(tree, epoch=tree["epoch"])
    reshaped["params"] = list(tree["params"])
    reshaped["params"][0] = {"w": fnp.ones((5, 3)), "b": fnp.zeros(3)}
    with pytest.raises(io.CheckpointError, match=r"\['params'\]\[0\]\['b'\].*float32\[3\].*"
                                                 r"float32\[4\]"):
        io.load(tmp_path / "s.npz", like=reshaped)
    retyped = dict(tree, epoch=7.0)
    with pytest.raises(io.CheckpointError, match=r"\['epoch'\]: expected float"):
        io.load(tmp_path / "s.npz", like=retyped)


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty", "plain_npz", "bad_json"])
def test_corrupt_files_are_clear_errors(tmp_path, damage):
    good = tmp_path / "good.npz"
    io.save(good, training_tree())
    raw = good.read_bytes()
    bad = tmp_path / "bad.npz"
    if damage == "truncate":
        bad.write_bytes(raw[: len(raw) // 2])
    elif damage == "garbage":
        bad.write_bytes(b"not a checkpoint" * 10)
    elif damage == "empty":
        bad.write_bytes(b"")
    elif damage == "plain_npz":
        with open(bad, "wb") as f:
            np.savez(f, x=np.ones(3))
    else:
        with open(bad, "wb") as f:
            np.savez(f, __structure__=np.frombuffer(b"{not json", np.uint8))
    with pytest.raises(io.CheckpointError, match="bad.npz"):
        io.load(bad)


def test_missing_file(tmp_path):
    with pytest.raises(io.CheckpointError, match="no checkpoint"):
        io.load(tmp_path / "nope.npz")


def test_unsupported_leaf_fails_before_touching_the_old_file(tmp_path):
    path = tmp_path / "keep.npz"
    io.save(path, {"w": fnp.ones(2)})
    before = path.read_bytes()
    with pytest.raises(io.CheckpointError, match=r"\['bad'\]"):
        io.save(path, {"w": fnp.ones(2), "bad": object()})
    with pytest.raises(io.CheckpointError, match="dict key"):
        io.save(path, {(1, 2): fnp.ones(2)})
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["keep.npz"]


def test_failed_write_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.npz"
    io.save(path, {"w": fnp.ones(2)})
    before = path.read_bytes()

    def failing_savez(f, **arrays):
        f.write(b"partial bytes")
        raise OSError("disk full")

    monkeypatch.setattr(io.np, "savez", failing_savez)
    with pytest.raises(io.CheckpointError, match=r"ckpt\.npz.*disk full.*unchanged"):
        io.save(path, {"w": fnp.zeros(2)})
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["ckpt.npz"]  # no temporary file left behind
    np.testing.assert_array_equal(np.asarray(io.load(path)["w"]), [1, 1])


def test_saved_file_holds_no_pickles(tmp_path):
    path = tmp_path / "p.npz"
    io.save(path, training_tree())
    with np.load(path, allow_pickle=False) as archive:
        assert all(archive[name].dtype != object for name in archive.files)
    assert len(tree_leaves(io.load(path))) == len(tree_leaves(training_tree()))
    assert tree_structure(io.load(path)) == tree_structure(training_tree())


def test_fortran_ordered_and_empty_arrays_round_trip(tmp_path):
    tree = {"f": np.asfortranarray(np.arange(6.0).reshape(2, 3)), "e": np.zeros((0, 3)),
            "big_endian": np.arange(3, dtype=">i4")}
    io.save(tmp_path / "f.npz", tree)
    assert_same(io.load(tmp_path / "f.npz"), tree)


# The exact `__structure__` that funcgrad.io's version-1 writer produced for this tree:
# {'p': {'w': fnp.ones((2, 3)), 'b': np.arange(3, dtype=np.int64)},
#  's': optim.masked(optim.scale_by_adam(), '**/w').init(p), 3: [1, (2.5, True), None, 1+2j],
#  't': (), 'e': {}}
V1_STRUCTURE = (
    '{"format": "funcgrad-checkpoint", "version": 1, "tree": {"type": "dict", "keys": [["int", '
    '3], ["str", "e"], ["str", "p"], ["str", "s"], ["str", "t"]], "children": [{"type": "list", '
    '"children": [{"type": "scalar", "python": "int", "value": 1}, {"type": "tuple", "children"'
    ': [{"type": "scalar", "python": "float", "value": 2.5}, {"type": "scalar", "python": "bool"'
    ', "value": true}]}, {"type": "none"}, {"type": "scalar", "python": "complex", "value": [1.0'
    ', 2.0]}]}, {"type": "dict", "keys": [], "children": []}, {"type": "dict", "keys": [["str", '
    '"b"], ["str", "w"]], "children": [{"type": "leaf", "kind": "numpy", "name": "leaf_0", "path'
    '": "[\'p\'][\'b\']", "dtype": "<i8", "shape": [3]}, {"type": "leaf", "kind": "funcgrad", "n'
    'ame": "leaf_1", "path": "[\'p\'][\'w\']", "dtype": "<f4", "shape": [2, 3]}]}, {"type": "nam'
    'edtuple", "module": "funcgrad.optim.transforms", "qualname": "MaskedState", "fields": ["inn'
    'er_state"], "children": [{"type": "namedtuple", "module": "funcgrad.optim.transforms", "qua'
    'lname": "ScaleByAdamState", "fields": ["count", "mu", "nu"], "children": [{"type": "leaf", '
    '"kind": "funcgrad", "name": "leaf_2", "path": "[\'s\'].inner_state.count", "dtype": "<i4", '
    '"shape": []}, {"type": "dict", "keys": [["str", "b"], ["str", "w"]], "children": [{"type": '
    '"namedtuple", "module": "funcgrad.optim.base", "qualname": "MaskedNode", "fields": [], "chi'
    'ldren": []}, {"type": "leaf", "kind": "funcgrad", "name": "leaf_3", "path": "[\'s\'].inner_'
    'state.mu[\'w\']", "dtype": "<f4", "shape": [2, 3]}]}, {"type": "dict", "keys": [["str", "b"'
    '], ["str", "w"]], "children": [{"type": "namedtuple", "module": "funcgrad.optim.base", "qua'
    'lname": "MaskedNode", "fields": [], "children": []}, {"type": "leaf", "kind": "funcgrad", "'
    'name": "leaf_4", "path": "[\'s\'].inner_state.nu[\'w\']", "dtype": "<f4", "shape": [2, 3]}]'
    '}]}]}, {"type": "tuple", "children": []}]}}')


def test_version_1_checkpoints_still_load(tmp_path):
    params = {"w": fnp.ones((2, 3)), "b": np.arange(3, dtype=np.int64)}
    tree = {"p": params, "s": optim.masked(optim.scale_by_adam(), "**/w").init(params),
            3: [1, (2.5, True), None, 1 + 2j], "t": (), "e": {}}
    leaves = [np.arange(3, dtype=np.int64), np.ones((2, 3), np.float32), np.int32(0),
              np.zeros((2, 3), np.float32), np.zeros((2, 3), np.float32)]
    with open(tmp_path / "v1.npz", "wb") as f:
        np.savez(f, **{f"leaf_{i}": x for i, x in enumerate(leaves)},
                 __structure__=np.frombuffer(V1_STRUCTURE.encode(), np.uint8))
    back = io.load(tmp_path / "v1.npz")
    assert_same(back, tree)
    assert isinstance(back["s"].inner_state, optim.ScaleByAdamState)
    assert_same(io.load(tmp_path / "v1.npz", like=tree), tree)
