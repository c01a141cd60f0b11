"""The native tier is safe to share a machine with (issue 26): its disk cache trusts only
what this user built (ownership, mode, the sha256 recorded at build time, compiler flags
only from funcgrad's own list), prunes only its own files, repairs damage instead of
failing, falls back when it cannot write; Ctrl-C stops native loops and kernels; a forked
child builds and runs native code. Also: a nested C loop that runs out of memory frees the
outer loop's temporaries (issue 25).

Tests run as root in CI: another owner is a real `chown` there, a patched `os.geteuid`
elsewhere; a read-only folder is one that user `nobody` owns with mode 0500.
"""

import contextlib
import ctypes
import hashlib
import json
import os
import queue
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
import warnings

import numpy as np
import pytest

import funcgrad as fg
from funcgrad import lax
from funcgrad.backends.native import build, cache, interrupt, ops, threads
from funcgrad.compiler import pipeline

pytestmark = pytest.mark.skipif(build.find_compiler() is None,
                                reason="no C compiler (test_native_backend.py checks that)")
ROOT = os.geteuid() == 0
NOBODY = 65534
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@contextlib.contextmanager
def options(**values):
    saved = {k: getattr(fg.config, k) for k in values}
    for k, v in values.items():
        fg.config.update(k, v)
    try:
        yield
    finally:
        for k, v in saved.items():
            fg.config.update(k, v)


def fresh_source(value=1.0):
    """A C module no other test builds: (source, function name)."""
    name = f"fg_safety_{uuid.uuid4().hex[:12]}"
    return f"double {name}(double x) {{ return x + {value!r}; }}\n", name


def fresh_scale():
    """A float constant (exact in float32) that makes a program no other test compiled."""
    return 3.0 + (uuid.uuid4().int % 4096) / 8


def call(lib, name, x=1.0):
    fn = getattr(lib, name)
    fn.restype, fn.argtypes = ctypes.c_double, [ctypes.c_double]
    return fn(x)


def compile_so(source, out, extra=()):
    subprocess.run([build.find_compiler(), "-O1", "-shared", "-fPIC", *extra, "-x", "c", "-",
                    "-o", str(out)], input=source, text=True, check=True)


def evil_module(source, name, marker):
    """What an attacker plants at the key of `source`: the same function returning 666,
    and a constructor that leaves `marker` when the module is loaded."""
    return (f"#include <stdio.h>\ndouble {name}(double x) {{ return 666.0; }}\n"
            f"__attribute__((constructor)) static void fg_evil(void) {{\n"
            f"    FILE *f = fopen(\"{marker}\", \"w\"); if (f) fclose(f);\n}}\n")


def sidecar(path, key):
    data = path.read_bytes()
    return json.dumps({"key": key, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})


def owned_by_someone_else(path, monkeypatch):
    """Makes `path` another user's: a real chown as root, else this user appears to be
    someone else (then the folder fails the check too, which must also keep it out)."""
    if ROOT:
        os.chown(path, NOBODY, NOBODY)
    else:
        monkeypatch.setattr(os, "geteuid", lambda: os.getuid() + 1)


def mode(path):
    return os.stat(path).st_mode & 0o7777


def run_child(code, *args, timeout=300, **kw):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, cwd=REPO, **kw)


# --- a cache that trusts only what this user made ---------------------------------------------

@pytest.mark.parametrize("umask", [0o000, 0o002, 0o277])
def test_the_cache_folder_and_the_folders_above_it_are_created_private(tmp_path, umask):
    top = tmp_path / "made"
    folder = top / "by" / "funcgrad"
    source, name = fresh_source()
    old = os.umask(umask)
    try:
        with options(native_cache_dir=str(folder)):
            lib = build.load(source)
    finally:
        os.umask(old)
    assert call(lib, name) == 2.0
    assert [mode(d) for d in (top, top / "by", folder)] == [0o700] * 3
    key = build.cache_key(source, build.compiler())
    assert mode(folder / f"{key}.so") == 0o700
    assert [mode(folder / n) for n in (f"{key}.sum", f"{key}.c", cache.MARKER)] == [0o600] * 3
    assert (folder / cache.MARKER).read_text().startswith("Signature: 8a477f59")
    assert not [p for p in folder.iterdir() if p.name.startswith(cache.TEMP_PREFIX)]


def test_funcgrads_own_folder_left_group_writable_is_made_private_again(tmp_path):
    folder = tmp_path / "cache"
    with options(native_cache_dir=str(folder)):
        build.load(fresh_source()[0])
        os.chmod(folder, 0o775)  # as an older funcgrad under umask 002 left it
        source, name = fresh_source(2.0)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert call(build.load(source), name) == 3.0
    assert mode(folder) == 0o700


@pytest.mark.parametrize("how", ["another owner", "group-writable file"])
def test_a_planted_module_is_never_loaded(tmp_path, monkeypatch, how):
    folder, marker = tmp_path / "cache", tmp_path / "PLANTED-CODE-RAN"
    source, name = fresh_source()
    with options(native_cache_dir=str(folder)):
        build.load(fresh_source()[0])  # the folder exists, made by funcgrad
        key = build.cache_key(source, build.compiler())
        so, sums = folder / f"{key}.so", folder / f"{key}.sum"
        compile_so(evil_module(source, name, marker), so)
        sums.write_text(sidecar(so, key))  # the digest an attacker computes
        if how == "another owner":
            for p in (so, sums):
                owned_by_someone_else(p, monkeypatch)
            reason = "owned by uid"
        else:
            os.chmod(so, 0o775)
            os.chmod(sums, 0o664)
            reason = "writable by its group"
        with pytest.warns(RuntimeWarning, match=f"native cache {re.escape(str(folder))}.*"
                                                f"{reason}"):
            lib = build.load(source)
        monkeypatch.undo()
        assert call(lib, name) == 2.0 and not marker.exists()
        if how != "another owner" or ROOT:  # rebuilt in place, as this user's
            assert so.stat().st_uid == os.geteuid() and mode(so) == 0o700
            assert json.loads(sums.read_text())["sha256"] == hashlib.sha256(
                so.read_bytes()).hexdigest()


def test_a_folder_others_can_write_is_never_read_from(tmp_path, monkeypatch):
    folder, marker = tmp_path / "shared", tmp_path / "PLANTED-CODE-RAN"
    folder.mkdir()
    os.chmod(folder, 0o777)  # a configured folder funcgrad did not make: left as it is
    source, name = fresh_source()
    key = build.cache_key(source, build.compiler())
    compile_so(evil_module(source, name, marker), folder / f"{key}.so")
    (folder / f"{key}.sum").write_text(sidecar(folder / f"{key}.so", key))
    with options(native_cache_dir=str(folder), native="sync"):
        with pytest.warns(RuntimeWarning, match=f"{re.escape(str(folder))}: the folder is "
                                                "writable by its group and others.*private"):
            lib = build.load(source)
        assert call(lib, name) == 2.0 and not marker.exists()
        with warnings.catch_warnings():  # one warning: the next module says nothing
            warnings.simplefilter("error")
            scale = fresh_scale()
            f = fg.jit(lambda x: x * scale + 1.0)
            np.testing.assert_array_equal(np.asarray(f(np.ones(3, "f"))), [scale + 1] * 3)
            assert "C module" in f.lower(np.ones(3, "f")).compile().as_text()
    assert mode(folder) == 0o777 and sorted(p.name for p in folder.iterdir()) == sorted(
        [f"{key}.so", f"{key}.sum"])


PLANTED_PROBES = {
    "free-text flags": lambda evil: {"flags": ["-O3", "-std=c11", "-fPIC", "-shared",
                                               "-wrapper", evil], "libs": []},
    "an unknown option": lambda evil: {"options": ["march_native", "-wrapper", evil]},
    "flags as a string": lambda evil: {"flags": "-O3"},
    "null": lambda evil: None,
}


@pytest.mark.parametrize("content", [*PLANTED_PROBES, "garbage bytes", "another owner"])
def test_a_planted_probe_file_never_reaches_the_compiler(tmp_path, monkeypatch, content):
    reference = build.compiler()
    folder, marker = tmp_path / "cache", tmp_path / "WRAPPER-RAN"
    evil = tmp_path / "evil.sh"
    evil.write_text(f"#!/bin/sh\ntouch {marker}\nexec \"$@\"\n")
    evil.chmod(0o755)
    folder.mkdir(mode=0o700)
    probe = folder / build.probe_file(reference.path, reference.version, None)
    if content == "garbage bytes":
        probe.write_bytes(b"\x00\xff{\"options\": [")
    elif content == "another owner":  # a valid file naming fewer options than the host has
        probe.write_text(json.dumps({"options": []}))
        owned_by_someone_else(probe, monkeypatch)
    else:
        probe.write_text(json.dumps(PLANTED_PROBES[content](str(evil))))
    build._probe.cache_clear()
    try:
        with options(native_cache_dir=str(folder)), warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            cc = build.compiler()
            source, name = fresh_source()
            assert call(build.load(source, cc), name) == 2.0
        monkeypatch.undo()
    finally:
        build._probe.cache_clear()
    assert cc is not None and cc.flags == reference.flags and cc.libs == reference.libs
    assert not marker.exists()
    messages = [str(x.message) for x in w]
    assert not any("no C compiler" in m for m in messages), messages
    if content == "another owner":
        assert any(str(probe) in m and "owned by uid" in m for m in messages), messages
    else:
        assert not messages, messages
    if content != "another owner" or ROOT:  # rewritten by this user, options by name only
        assert probe.stat().st_uid == os.geteuid() and mode(probe) == 0o600
        assert set(json.loads(probe.read_text())) == {"options"}


# --- pruning touches only funcgrad's own files ------------------------------------------------

def _plant_user_files(folder):
    with open(folder / "dataset.bin", "wb") as f:
        f.truncate(2 << 30)  # a 2 GiB data set (sparse)
    files = {"dataset.bin": None, "mylib.so": b"user's library\n", "mylib.c": b"int x;\n",
             "notes.txt": b"mine\n", "0" * 64 + ".so": b"a content-addressed file\n",
             "probe-keep.json": b"{}\n"}
    for n, data in files.items():
        if data is not None:
            (folder / n).write_bytes(data)
    return files


def test_pruning_deletes_only_funcgrads_modules_never_a_users_files(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()  # a configured folder funcgrad did not make (no marker)
    files = _plant_user_files(folder)
    stale = folder / f"{cache.TEMP_PREFIX}0123456789abcdef.d"  # a crashed build's workspace
    stale.mkdir()
    (stale / "x.so").write_bytes(b"partial")
    fresh = folder / f"{cache.TEMP_PREFIX}fedcba9876543210-x.sum"  # another process's, now
    fresh.write_bytes(b"{}")
    os.utime(stale, (1, 1))
    sources = [fresh_source(float(k)) for k in range(3)]
    with options(native_cache_dir=str(folder), native_cache_bytes=1):
        for source, _ in sources:
            build.load(source)
    cc = build.compiler()
    keys = [build.cache_key(s, cc) for s, _ in sources]
    left = {p.name for p in folder.iterdir()}
    assert {f"{keys[-1]}.so", f"{keys[-1]}.sum", f"{keys[-1]}.c"} <= left
    assert not any(k in n for k in keys[:-1] for n in left)
    for n, data in files.items():  # every user file, as it was
        assert n in left and (data is None or (folder / n).read_bytes() == data)
    assert (folder / "dataset.bin").stat().st_size == 2 << 30
    assert not stale.exists() and fresh.exists()


def test_in_its_own_folder_funcgrad_also_prunes_its_older_modules_without_sidecars(tmp_path):
    folder = tmp_path / "made"
    source, _ = fresh_source()
    with options(native_cache_dir=str(folder)):
        build.load(fresh_source()[0])  # funcgrad makes the folder (and its marker)
        old = folder / ("ab" * 32 + ".so")  # an older funcgrad's module: no sidecar
        old.write_bytes(b"\x7fELF" + b"\0" * 5000)
        os.utime(old, (1, 1))
        (folder / "notes.txt").write_text("mine\n")
        with options(native_cache_bytes=1):
            build.load(source)
    assert not old.exists() and (folder / "notes.txt").read_text() == "mine\n"


# --- damage is repaired, never fatal ----------------------------------------------------------

SAME_PROGRAM_CHILD = """
import sys, warnings
import numpy as np, funcgrad as fg, funcgrad.numpy as fnp
from funcgrad import lax
fg.config.update("native", "sync")
fg.config.update("native_cache_dir", sys.argv[1])
x = np.linspace(-1, 1, 9, dtype=np.float32)
with warnings.catch_warnings():
    warnings.simplefilter("error")
    f = fg.jit(lambda x: lax.fori_loop(0, 4, lambda i, c: fnp.tanh(c * 1.5) + x, x))
    print(np.asarray(f(x)).tobytes().hex())
"""


def test_processes_building_the_same_program_at_once_agree_and_leave_one_module(tmp_path):
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(SAME_PROGRAM_CHILD),
                               str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, cwd=REPO) for _ in range(4)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err[-2000:] for _, err in outs]
    assert len({out for out, _ in outs}) == 1
    names = sorted(p.name for p in tmp_path.iterdir())
    modules = [n for n in names if n.endswith(".so")]
    assert all(not n.startswith(cache.TEMP_PREFIX) for n in names), names
    for so in modules:  # each module matches its sidecar
        key = so[:-3]
        record = json.loads((tmp_path / f"{key}.sum").read_text())
        assert record["sha256"] == hashlib.sha256((tmp_path / so).read_bytes()).hexdigest()




DAMAGE_CHILD = """
import ctypes, json, sys, warnings
import funcgrad as fg
from funcgrad.backends.native import build
fg.config.update("native_cache_dir", sys.argv[1])
out = {"values": [], "keys": []}
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    cc = build.compiler()
    for k in range(5):
        src = f"double fg_damage{k}(double x) {{ return x * {k + 2}; }}\\n"
        fn = getattr(build.load(src), f"fg_damage{k}")
        fn.restype, fn.argtypes = ctypes.c_double, [ctypes.c_double]
        out["values"].append(fn(1.5))
        out["keys"].append(build.cache_key(src, cc))
out["stats"] = dict(build.stats)
out["warnings"] = [str(x.message) for x in w]
out["flags"] = list(cc.flags)
print(json.dumps(out))
"""


def test_damaged_modules_and_probe_files_are_found_before_loading_and_rebuilt(tmp_path):
    def run():
        done = run_child(DAMAGE_CHILD, tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]  # SIGBUS was rc -7
        return json.loads(done.stdout.splitlines()[-1])
    first = run()
    assert first["values"] == [3.0, 4.5, 6.0, 7.5, 9.0] and first["stats"]["compiles"] == 5
    so = [tmp_path / f"{k}.so" for k in first["keys"]]
    os.truncate(so[0], 5000)  # a partial copy, a power cut
    data = bytearray(so[1].read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte
    so[1].write_bytes(bytes(data))
    so[2].write_bytes(so[3].read_bytes())  # another module at this key, no sidecar of its own
    (tmp_path / f"{first['keys'][2]}.sum").unlink()
    (tmp_path / f"{first['keys'][3]}.sum").write_text(  # a sidecar of another key
        (tmp_path / f"{first['keys'][4]}.sum").read_text())
    for probe in tmp_path.glob("probe-*.json"):
        probe.write_text("null")  # "no C compiler" for good, before
    second = run()
    assert second["values"] == first["values"] and second["flags"] == first["flags"]
    assert second["stats"].get("compiles") == 4 and second["stats"].get("disk_hits") == 1
    named = [m for m in second["warnings"] if "native cache" in m]
    assert len(named) == 2, second["warnings"]
    assert any(str(so[0]) in m and "5000 bytes" in m for m in named)
    assert any(str(so[1]) in m and "sha256 differs" in m for m in named)
    third = run()  # repaired: all from disk
    assert third["values"] == first["values"] and third["stats"].get("disk_hits") == 5
    assert not third["warnings"]


FULL_DISK_CHILD = """
import resource, sys, warnings
import numpy as np, funcgrad as fg, funcgrad.numpy as fnp
from funcgrad import lax
from funcgrad.backends.native import build
fg.config.update("native", sys.argv[2])
fg.config.update("native_cache_dir", sys.argv[1])
build.compiler()  # the probe's answer is on disk already: read, not written
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))  # no file may grow past 4 KiB
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    x = np.linspace(-1, 1, 7, dtype=np.float32)
    f = fg.jit(lambda x: fnp.tanh(x * 3.0) + 1.0)
    g = fg.jit(lambda x: lax.fori_loop(0, 5, lambda i, c: c * 0.5 + x, x))
    got = [np.asarray(f(x)), np.asarray(g(x))]
    if sys.argv[2] == "background":
        from funcgrad.backends.native import tiers
        tiers.drain()
        got += [np.asarray(f(x)), np.asarray(g(x))]
want = [np.asarray(fg.jit(f, backend="numpy")(x)), np.asarray(fg.jit(g, backend="numpy")(x))]
assert all(np.array_equal(a, want[k % 2]) for k, a in enumerate(got)), got
print([str(m.message) for m in w if issubclass(m.category, RuntimeWarning)])
"""


@pytest.mark.parametrize("mode_", ["sync", "background"])
def test_a_full_disk_falls_back_to_numpy_with_one_warning(tmp_path, mode_):
    folder, tmp = tmp_path / "cache", tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, TMPDIR=str(tmp))
    warm = run_child("import sys, funcgrad as fg\nfrom funcgrad.backends.native import build\n"
                     "fg.config.update('native_cache_dir', sys.argv[1])\nbuild.compiler()",
                     folder, env=env)
    assert warm.returncode == 0, warm.stderr
    done = run_child(FULL_DISK_CHILD, folder, mode_, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    messages = eval(done.stdout.splitlines()[-1])
    assert len(messages) == 1, messages
    assert "cannot build a C module here" in messages[0], messages
    assert re.search("File too large|File size limit exceeded", messages[0]), messages
    assert "funcgrad bug" not in done.stdout + done.stderr
    left = sorted(p.name for p in folder.iterdir())  # no half-written source, no temporaries
    assert all(n == cache.MARKER or n.startswith("probe-") for n in left), left
    assert not list(tmp.iterdir())


@pytest.mark.parametrize("where", ["under a file", "in /proc"])
def test_an_unusable_folder_builds_privately_with_one_warning(tmp_path, where):
    if where == "under a file":
        (tmp_path / "a-file").write_text("x")
        folder = tmp_path / "a-file" / "cache"
    else:
        folder = f"/proc/funcgrad-{uuid.uuid4().hex[:8]}/cache"
    x, scale = np.ones(3, "f"), fresh_scale()  # programs no other test has in memory
    with options(native_cache_dir=str(folder), native="sync"):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            outs = []
            for k in range(2):
                f = fg.jit(lambda x, k=k: x * (scale + k) + 1.0)
                outs.append(np.asarray(f(x)))
                assert "C module" in f.lower(x).compile().as_text()
        with options(native="background"):
            tiered = pipeline.compile_jaxpr(fg.make_jaxpr(lambda x: x * scale - 1.0)(x))
            assert tiered.wait(timeout=120).native
    np.testing.assert_array_equal(outs[0], [scale + 1] * 3)
    np.testing.assert_array_equal(outs[1], [scale + 2] * 3)
    messages = [str(m.message) for m in w if issubclass(m.category, RuntimeWarning)]
    assert len(messages) == 1 and str(folder) in messages[0], messages
    assert "cannot be created or opened" in messages[0] and "private" in messages[0]


READ_ONLY_CHILD = """
import sys, warnings
import numpy as np, funcgrad as fg
fg.config.update("native", "sync")
fg.config.update("native_cache_dir", sys.argv[1])
x = np.ones(3, "f")
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    for k in range(2):
        f = fg.jit(lambda x, k=k: x * (3.0 + k) + 1.0)
        assert (np.asarray(f(x)) == 4 + k).all()
        assert "C module" in f.lower(x).compile().as_text()
print([str(m.message) for m in w if issubclass(m.category, RuntimeWarning)])
"""


def _without_root_overrides():
    """In the child, before exec: root loses the capabilities that ignore file modes
    (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH), so a 0500 folder is read-only to it too."""
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def test_a_read_only_folder_builds_privately_with_one_warning(tmp_path):
    folder, tmp = tmp_path / "cache", tmp_path / "tmp"
    folder.mkdir(mode=0o700)
    tmp.mkdir()
    folder.chmod(0o500)
    try:
        done = run_child(READ_ONLY_CHILD, folder, env=dict(os.environ, TMPDIR=str(tmp)),
                         preexec_fn=_without_root_overrides if ROOT else None)
    finally:
        folder.chmod(0o700)
    assert done.returncode == 0, done.stderr[-3000:]
    messages = eval(done.stdout.splitlines()[-1])
    assert len(messages) == 1 and str(folder) in messages[0], messages
    assert "cannot be written (Permission denied)" in messages[0], messages
    assert not list(folder.iterdir()) and not list(tmp.iterdir())


# --- Ctrl-C stops native code -----------------------------------------------------------------

SIGINT_CHILD = """
import sys, threading, time, traceback
import numpy as np, funcgrad as fg, funcgrad.numpy as fnp
from funcgrad import lax
from funcgrad.backends.native import build, threads
fg.config.update("native", "sync")
fg.config.update("native_cache_dir", sys.argv[1])
f = fg.jit(lambda x: lax.while_loop(lambda c: c[0] >= 0, lambda c: (c[0] * 1, c[1] * 0.999 + 1.),
                                    (0, x)))
g = fg.jit(lambda x: lax.scan(lambda c, _: (c * 0.999 + 1.0, None), x, None, length=1 << 62)[0])
a, b = np.linspace(0, 1, 1 << 16, dtype=np.float32), np.linspace(0, 1, 1 << 20, dtype=np.float32)
k = fg.jit(lambda a, b: fnp.sum(fnp.sin(a[:, None] * b[None, :]), axis=1))  # minutes of work
one = np.float32(1)
assert "loop */" in f.lower(one).compile().as_text()
assert "loop */" in g.lower(one).compile().as_text()
assert "fg_parallel(" in k.lower(a, b).compile().as_text()

def interrupted(fn, *args):
    print("ready", flush=True)
    try:
        fn(*args)
        print("not interrupted", flush=True)
    except KeyboardInterrupt:
        where = traceback.extract_tb(sys.exc_info()[2])[-1]
        print("stopped in", where.filename.rsplit("/", 1)[-1], where.name, flush=True)

interrupted(f, one)
interrupted(f, one)  # the same program again: runs, and stops again
interrupted(g, one)
interrupted(k, a, b)

def fixed_point(n):  # the while loop below, in numpy
    c = np.float32(1)
    for _ in range(n):
        c = np.float32(c * np.float32(0.999) + np.float32(1))
    return c

h = fg.jit(lambda x, n: lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * 0.999 + 1.),
                                       (0, x)))
print("next", [float(v) for v in h(one, 5000)] == [5000.0, float(fixed_point(5000))], flush=True)
# other threads run on to their right results: only Python's main thread is stopped
x = np.arange(1 << 20, dtype=np.float32)
big = fg.jit(lambda x: fnp.sqrt(x) * 2.0 + 1.0)
assert "fg_parallel(" in big.lower(x).compile().as_text()
want_big, want_h = np.sqrt(x) * np.float32(2) + 1, [2000000.0, float(fixed_point(200000))]
results, stop = [], []

def work():  # pool kernels and a C loop, over and over until the main thread was stopped
    while not stop:
        results.append(bool(np.array_equal(np.asarray(big(x)), want_big)))
        results.append([float(v) for v in h(one, 2000000)] == want_h)  # float32 stays there

t = threading.Thread(target=work)
t.start()
while len(results) < 4:
    time.sleep(0.01)
print("ready", flush=True)
try:
    while True:
        time.sleep(0.01)
except KeyboardInterrupt:
    print("stopped in main", flush=True)
n = len(results)
while len(results) < n + 4:  # the thread goes on
    time.sleep(0.01)
stop.append(1)
t.join()
print("thread", all(results), len(results), flush=True)
"""


def test_ctrl_c_stops_native_loops_and_kernels_and_the_program_stays_usable(tmp_path):
    p = subprocess.Popen([sys.executable, "-c", textwrap.dedent(SIGINT_CHILD), str(tmp_path)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    out = queue.Queue()
    threading.Thread(target=lambda: [out.put(ln.strip()) for ln in p.stdout], daemon=True).start()
    lines = []
    try:
        for _ in range(5):
            while (line := _next(out, 240)) not in ("ready", None):  # 240 s: hang guards
                lines.append(line)
            assert line == "ready", ("the child stopped answering", lines)
            time.sleep(0.5)
            p.send_signal(signal.SIGINT)
            line = _next(out, 60)  # before the fix: still running after minutes
            assert line is not None, ("no KeyboardInterrupt", lines)
            lines.append(line)
        assert p.wait(timeout=240) == 0, p.stderr.read()[-3000:]
    finally:
        p.kill()
    lines += [ln for ln in iter(lambda: _next(out, 1), None)]
    assert lines[:6] == ["stopped in cprogram.py call"] * 4 + ["next True", "stopped in main"]
    assert len(lines) == 7 and re.fullmatch(r"thread True \d+", lines[6]), lines


def _next(lines, timeout):
    try:
        return lines.get(timeout=timeout)
    except queue.Empty:
        return None


def test_pool_kernels_stop_between_blocks_only_in_the_main_thread():
    cc = build.compiler()
    source = ops.PRELUDE + threads.MODULE_HEADER + textwrap.dedent("""
        static volatile long long fg_ran;
        static fg_sigint_state *fg_fake;
        void fg_t_fake(void *s) { fg_fake = (fg_sigint_state *)s; }
        static void fg_t_task(void *const *a, long long b) {
            (void)a;
            __atomic_add_fetch(&fg_ran, 1, __ATOMIC_RELAXED);
            if (b == 10) fg_fake->count = fg_fake->count + 1;  /* a SIGINT arrives */
            /* blocks after it are long (a few ms), so that the pool's workers could claim
               them all only if the calling thread, which checks, sat descheduled for more
               than a second (it did for 40 ms with 20 us blocks on a loaded machine) */
            for (volatile int k = 0; k < (b > 10 ? 2000000 : 20000); ++k) {}
        }
        long long fg_t_run(long long blocks) {
            fg_ran = 0; fg_parallel(fg_t_task, 0, blocks); return fg_ran;
        }
    """)
    lib = build.load(source, cc)
    lib.fg_t_run.restype, lib.fg_t_run.argtypes = ctypes.c_longlong, [ctypes.c_longlong]

    class State(ctypes.Structure):
        _fields_ = [("count", ctypes.c_int), ("on_main", ctypes.c_void_p)]
    real = ctypes.c_void_p(interrupt.state_address(cc))
    fake = State(0, State.from_address(real.value).on_main)  # the runtime's thread check
    pool = threads._pool(cc)
    lib.fg_t_fake(ctypes.byref(fake))
    lib.fg_set_interrupt(ctypes.byref(fake))
    try:
        lib.fg_set_parallel(None)  # the module's own serial loop
        assert lib.fg_t_run(1000) == 11
        if pool is not None:
            pool.fg_set_interrupt(ctypes.byref(fake))
            lib.fg_set_parallel(ctypes.c_void_p(threads.address(cc)))
            assert lib.fg_t_run(1000) < 500  # the blocks already claimed finish
        ran = []
        t = threading.Thread(target=lambda: ran.append(lib.fg_t_run(1000)))
        t.start()
        t.join()
        assert ran == [1000]  # another thread: every block (its result is used)
        assert lib.fg_t_run(1000) < 500 if pool is not None else True
    finally:
        lib.fg_set_interrupt(real)
        if pool is not None:
            pool.fg_set_interrupt(real)


# --- fork -------------------------------------------------------------------------------------

FORK_CHILD = """
import os, sys, threading
import numpy as np, funcgrad as fg, funcgrad.numpy as fnp
from funcgrad.backends.native import tiers
fg.config.update("native", "background")
fg.config.update("native_cache_dir", sys.argv[1])
x = np.arange(1 << 18, dtype=np.float32)
big = fg.jit(lambda x: x * 2.0 + 1.0)
big(x)
tiers.drain()
stop = []

def churn():  # pool kernels in another thread while the process forks
    while not stop:
        big(x)

t = threading.Thread(target=churn)
t.start()
pending = fg.jit(lambda x: fnp.sin(x) * 3.0 - x)
pending(x[:5])  # its build is queued or running when the process forks
pid = os.fork()
if pid == 0:
    ok = []
    try:
        def guarded(fn, seconds=120):
            done = threading.Event()
            threading.Thread(target=lambda: (fn(), done.set()), daemon=True).start()
            return done.wait(seconds)
        ok.append(guarded(tiers.drain))  # before: forever
        text = []
        ok.append(guarded(lambda: text.append(pending.lower(x[:5]).compile().as_text())))
        ok.append(bool(text) and "C module" in text[0])
        new = fg.jit(lambda x: fnp.cos(x) * 3.0 + x)
        new(x[:5])
        ok.append(guarded(tiers.drain))
        ok.append("C module" in new.lower(x[:5]).compile().as_text())
        ok.append(np.allclose(np.asarray(new(x[:5])), np.cos(x[:5]) * 3 + x[:5], rtol=1e-6))
        ok.append(all(np.array_equal(np.asarray(big(x + k)), (x + k) * 2 + 1) for k in range(5)))
    finally:
        os.write(1, f"child {ok}\\n".encode())
        os._exit(0)
stop.append(1)
t.join()
_, status = os.waitpid(pid, 0)
print("parent", os.waitstatus_to_exitcode(status))
"""


def test_a_forked_child_builds_and_runs_native_code_and_never_hangs(tmp_path):
    done = run_child(FORK_CHILD, tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "child [True, True, True, True, True, True, True]" in done.stdout, done.stdout
    assert "parent 0" in done.stdout


# --- issue 25: a nested loop out of memory frees the outer loop's temporaries -------------------

HARNESS = """
#include <stdlib.h>
static long fg_live, fg_calls, fg_fail_at;
static void *fg_test_malloc(size_t n) {
    if (++fg_calls == fg_fail_at) return 0;
    void *p = malloc(n);
    fg_live += p != 0;
    return p;
}
static void fg_test_free(void *p) { fg_live -= p != 0; free(p); }
void fg_test_reset(long fail_at) { fg_live = 0; fg_calls = 0; fg_fail_at = fail_at; }
long fg_test_live(void) { return fg_live; }
long fg_test_calls(void) { return fg_calls; }
#define malloc(n) fg_test_malloc(n)
#define free(p) fg_test_free(p)
"""


def test_a_nested_loop_out_of_memory_frees_every_temporary(tmp_path):
    def f(x):  # temporaries of 16 KiB: malloc'ed by the outer and the inner C loop
        inner = lambda c: lax.fori_loop(0, 3, lambda j, d: d * 0.5 + 1.0, c)
        return lax.fori_loop(0, 3, lambda k, c: inner(c * 2.0) + c, x)
    x = np.ones(4096, np.float32)
    with options(native="sync"):
        exe = pipeline.compile_jaxpr(fg.make_jaxpr(f)(x))
    src = exe.c_source()
    outer = re.findall(r"\nint (fg_loop\d+)\(([^)]*)\) \{", src)[-1]
    assert "goto fg_end" in src
    cc = build.compiler()
    lib_path = tmp_path / "harness.so"
    subprocess.run([cc.path, *cc.flags, "-x", "c", "-", "-o", str(lib_path), *cc.libs, "-lm"],
                   input=HARNESS + src, text=True, check=True)
    lib = ctypes.CDLL(str(lib_path))
    fn = getattr(lib, outer[0])
    params = outer[1].split(", ")
    arrays = [np.zeros(4096, np.int32 if "int" in p else np.float32) for p in params]
    fn.argtypes, fn.restype = [ctypes.c_void_p] * len(params), ctypes.c_int
    lib.fg_test_reset.argtypes = [ctypes.c_long]
    lib.fg_test_live.restype = lib.fg_test_calls.restype = ctypes.c_long
    lib.fg_test_reset(0)
    assert fn(*[a.ctypes.data for a in arrays]) == 0 and lib.fg_test_live() == 0
    calls = lib.fg_test_calls()
    assert calls == 6  # three in the outer loop, one per call of the inner one
    for fail_at in range(1, calls + 1):
        lib.fg_test_reset(fail_at)
        assert fn(*[a.ctypes.data for a in arrays]) == 1, fail_at
        assert lib.fg_test_live() == 0, f"malloc {fail_at} failed: {lib.fg_test_live()} leaked"


# --- doctor -----------------------------------------------------------------------------------

def test_doctor_reports_the_cache_folder_its_owner_mode_and_checks(tmp_path, capsys):
    from funcgrad import __main__ as main
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path))
    done = subprocess.run([sys.executable, "-m", "funcgrad", "doctor"], capture_output=True,
                          text=True, timeout=300, env=env, cwd=REPO)
    folder = tmp_path / "funcgrad" / "native"
    assert "Traceback" not in done.stdout + done.stderr
    assert f"native cache           {folder}" in done.stdout, done.stdout
    assert re.search(r"owner, mode +\S+ \(uid \d+\), 0700, funcgrad marker", done.stdout)
    assert re.search(r"checks +pass \(owned by this user.*\); [1-9]\d* modules", done.stdout)
    os.chmod(folder, 0o777)
    (folder / cache.MARKER).unlink()  # not funcgrad's folder any more: left as it is
    with options(native_cache_dir=str(folder)):
        fixes = []
        main._cache_lines(fixes)
    out = capsys.readouterr().out
    assert "0777" in out and "FAIL: the folder is writable by its group and others" in out
    assert fixes and "chmod 700" in fixes[0]
