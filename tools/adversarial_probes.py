"""Adversarial probes of funcgrad, counted per area: clean, crash/raw, silently wrong, security.

Each probe tries one thing an attacker or a careless user does and says how funcgrad
answered: "clean" (the right result, or an error funcgrad raised on purpose, naming the
problem), "raw" (a raw Python/numpy exception, or a user error reported as a funcgrad bug),
"wrong" (a wrong result without an error) or "security" (user text executed or a module
imported). Run it against any checkout to compare before and after:

    python tools/adversarial_probes.py                      # this checkout
    PYTHONPATH=/tmp/old python tools/adversarial_probes.py  # another one (git worktree)
"""

import collections
import contextlib
import gc
import io
import json
import linecache
import os
import sys
import tempfile
import zipfile

import numpy as np

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import errors, lax

PROBES = collections.defaultdict(list)
_MARK = os.path.join(tempfile.mkdtemp(), "pwned")


def probe(area):
    def register(fn):
        PROBES[area].append(fn)
        return fn
    return register


def _intended(e):
    """An error funcgrad raised on purpose for bad input (not a raw one, not 'a bug')."""
    internal = getattr(errors, "FuncgradInternalError", ())
    return isinstance(e, errors.FuncgradError) and not isinstance(e, internal)


def _expect_error(fn, *exc_types):
    """clean if `fn` raises an intended funcgrad error (or one of `exc_types`)."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - classifying is the point
        return "clean" if _intended(e) or isinstance(e, exc_types) else "raw"
    return "wrong"


def _close(a, b, tol=1e-4):
    return "clean" if np.allclose(np.asarray(a), np.asarray(b), atol=tol, equal_nan=True) \
        else "wrong"


# --- jit aliasing ----------------------------------------------------------------------------

_ALIAS = [lambda y: (y + y.T) / 2.0, lambda y: y + y[::-1], lambda y: y - y[::-1, ::-1]]
for _n in (300, 724, 800):
    for _k, _f in enumerate(_ALIAS):
        def _alias(n=_n, f=_f):
            a = np.random.default_rng(0).normal(size=(n, n)).astype(np.float32) * 0.1
            g = lambda a: f(fnp.exp(a))
            return _close(fg.jit(g)(a), g(a))
        PROBES["jit aliasing"].append(_alias)


@probe("jit aliasing")
def _matmul_alias():
    a = np.random.default_rng(1).normal(size=(800, 800)).astype(np.float32) * 0.1
    f = lambda a: (lambda z: z - z.T)(a @ a.T + 1)
    return _close(fg.jit(f)(a), f(a))


@probe("jit aliasing")
def _donated_alias():
    a = np.random.default_rng(2).normal(size=(800, 800)).astype(np.float32)
    return _close(fg.jit(lambda a: a + a.T, donate_argnums=0)(fnp.array(a)), a + a.T)


@probe("donation")
def _donated_failure():
    fail = [False]

    def maybe_boom(_):
        if fail[0]:
            raise RuntimeError("stop")

    def step(x):
        y = x * 2 + 1
        fg.debug.callback(maybe_boom, y)
        return y
    jitted = fg.jit(step, donate_argnums=0)
    jitted(fnp.full((4,), 0.5))  # compiled and cached; the next call takes the fast path
    fail[0] = True
    x = fnp.full((4,), 0.5)
    with contextlib.suppress(Exception):
        jitted(x)
    try:
        v = np.asarray(x)
    except Exception:  # noqa: BLE001 - deleted: a clear error on use is fine
        return "clean"
    return "clean" if np.all(v == 0.5) else "wrong"


# --- numbers -------------------------------------------------------------------------------

for _name in ("floor", "ceil", "trunc"):
    PROBES["complex and conversions"].append(
        lambda name=_name: _expect_error(lambda: getattr(fnp, name)(1.6 + 2.4j), TypeError))


@probe("complex and conversions")
def _rint_complex():
    r = fnp.rint(1.6 + 2.4j)
    return "clean" if complex(np.asarray(r)) == 2 + 2j else "wrong"


_SAT = np.array([np.inf, -np.inf, np.nan, 1e10, 300.0], np.float32)
for _jit in (False, True):
    for _dt in ("int8", "uint8", "int32"):
        def _saturate(dt=_dt, jit=_jit):
            f = lambda x: x.astype(dt)
            got = np.asarray((fg.jit(f) if jit else f)(fnp.asarray(_SAT)))
            info = np.iinfo(dt)
            want = np.clip(np.nan_to_num(_SAT.astype(np.float64), nan=0.0, posinf=info.max,
                                         neginf=info.min), info.min, info.max).astype(dt)
            return "clean" if np.array_equal(got, want) else "wrong"
        PROBES["complex and conversions"].append(_saturate)


# --- generated source ----------------------------------------------------------------------

def _payload_fn(filename, name="f"):
    ns = {"fnp": fnp}
    exec(compile(f"def {name}(x):\n    return fnp.sin(x) * 2\n", "p.py", "exec"), ns)
    ns[name].__code__ = ns[name].__code__.replace(co_filename=filename)  # NUL allowed here
    return ns[name]


for _fname in (f"u.py\n    open({_MARK!r},'w')\n    #", f"m.py\r    open({_MARK!r},'w')\r#",
               "a\x00b.py", "x\u2028y.py"):
    for _how in ("jit", "grad", "vmap"):
        def _codegen(fname=_fname, how=_how):
            f = _payload_fn(fname)
            x = fnp.ones(3)
            try:
                if how == "jit":
                    out = fg.jit(f)(x)
                    want = np.sin(1.0) * 2
                elif how == "grad":
                    out = fg.jit(fg.grad(lambda x: fnp.sum(f(x))))(x)
                    want = np.cos(1.0) * 2
                else:
                    out = fg.jit(fg.vmap(f))(fnp.ones((2, 3)))
                    want = np.sin(1.0) * 2
            except Exception:  # noqa: BLE001
                return "security" if os.path.exists(_MARK) else "raw"
            if os.path.exists(_MARK):
                os.remove(_MARK)
                return "security"
            return _close(out, want)
        PROBES["generated source"].append(_codegen)


@probe("generated source")
def _code_name_cr():
    f = _payload_fn("ok.py")
    f.__code__ = f.__code__.replace(co_name=f"f\r    open({_MARK!r},'w')\r#")
    try:
        out = fg.jit(f)(fnp.ones(3))
    except Exception:  # noqa: BLE001
        return "raw"
    return "security" if os.path.exists(_MARK) else _close(out, np.sin(1.0) * 2)


for _f in (lambda x: 1 // x, lambda x: 1 << x, lambda x: fnp.reciprocal(x),
           lambda x: fnp.floor_divide(1, x)):
    def _int_first(f=_f):
        x = fnp.asarray(np.array([1, 2, 3], np.int32))
        try:
            return "clean" if np.array_equal(fg.jit(f)(x), f(x)) else "wrong"
        except Exception:  # noqa: BLE001
            return "raw"
    PROBES["generated source"].append(_int_first)


for _c in (complex(np.nan, 1), complex(1, np.inf), complex(-np.inf, -0.0)):
    def _complex_literal(c=_c):
        x = fnp.ones(3, dtype=fnp.complex64)
        try:
            return _close(fg.jit(lambda x: x * c)(x), np.ones(3, np.complex64) * c)
        except Exception:  # noqa: BLE001
            return "raw"
    PROBES["generated source"].append(_complex_literal)


# --- debugging aids ------------------------------------------------------------------------

for _jit in (False, True):
    def _callback_error(jit=_jit):
        def bad(_):
            raise ValueError("mine")

        def f(x):
            fg.debug.callback(bad, x)
            return x + 1
        try:
            (fg.jit(f) if jit else f)(fnp.ones(2))
        except ValueError as e:
            return "clean" if "mine" in str(e) and not isinstance(
                e, getattr(errors, "FuncgradInternalError", ())) else "raw"
        except Exception:  # noqa: BLE001
            return "raw"
        return "wrong"
    PROBES["debugging aids"].append(_callback_error)

for _fmt in ("{", "{} {}", "{0.__class__.__mro__}", 3, "{x.__globals__}"):
    def _bad_format(fmt=_fmt):
        def f(x):
            fg.debug.print(fmt, x)
            return x
        with contextlib.redirect_stdout(io.StringIO()):
            return _expect_error(lambda: fg.jit(f)(fnp.ones(2)))
    PROBES["debugging aids"].append(_bad_format)


# --- out of memory -------------------------------------------------------------------------

for _thunk in (lambda: lax.iota(np.int32, 2**40),
               lambda: fg.random.normal(fg.random.PRNGKey(0), (2**40,)),
               lambda: fg.jit(lambda x: fnp.sin(fnp.broadcast_to(x, (2**20, 2**20))))(
                   fnp.ones(1)),
               lambda: fg.grad(lambda x: fnp.sum(fnp.sin(fnp.broadcast_to(x, (2**20, 2**20)))))(
                   1.0)):
    def _oom(thunk=_thunk):
        try:
            thunk()
        except MemoryError as e:
            return "clean" if _intended(e) and "out of memory" in str(e) else "raw"
        except Exception as e:  # noqa: BLE001
            return "clean" if _intended(e) and "memory" in str(e) else "raw"
        return "wrong"
    PROBES["out of memory"].append(_oom)


# --- API misuse ----------------------------------------------------------------------------

_BAD = [None, "str", object(), [[1, 2], [3]], 1.5]
_CALLS = [
    lambda b: lax.add(b, 1.0), lambda b: lax.exp(b), lambda b: lax.reduce_sum(fnp.ones(3), b),
    lambda b: fnp.expand_dims(fnp.ones(3), b), lambda b: fnp.roll(fnp.ones(3), 1, axis=b),
    lambda b: fnp.sum(fnp.ones(3), axis=b if b is not None else "x"),
    lambda b: fnp.reshape(fnp.ones(4), b), lambda b: fnp.asarray(b),
    lambda b: fnp.concatenate([fnp.ones(2), b]), lambda b: lax.slice(fnp.ones(4), b, (2,)),
    lambda b: fnp.ones(b), lambda b: fnp.take(fnp.ones(3), b), lambda b: lax.dot(b, b),
    lambda b: fnp.transpose(fnp.ones((2, 3)), b), lambda b: fnp.where(b, 1.0, 2.0),
]
for _call in _CALLS:
    for _b in _BAD:
        def _misuse(call=_call, b=_b):
            try:
                call(b)
            except Exception as e:  # noqa: BLE001
                return "clean" if _intended(e) else "raw"
            return "clean"  # accepted, as numpy/JAX may (e.g. a float converted on purpose)
        PROBES["API misuse"].append(_misuse)


@probe("API misuse")
def _bad_static_repr():
    class Evil:
        def __repr__(self):
            raise RuntimeError("no repr")

        def __hash__(self):
            return 1

        def __eq__(self, other):
            return isinstance(other, Evil)
    f = fg.jit(lambda x, s: x + 1, static_argnums=1)
    with contextlib.suppress(Exception):
        f(fnp.ones(2), Evil())
    try:
        return _close(f(fnp.ones(2), 3), [2.0, 2.0])
    except Exception:  # noqa: BLE001
        return "raw"


# --- checkpoints ---------------------------------------------------------------------------

def _ckpt_bytes(tree):
    path = os.path.join(tempfile.mkdtemp(), "c.npz")
    fg.io.save(path, tree)
    return path


def _rewrite_structure(path, edit):
    with zipfile.ZipFile(path) as z:
        entries = {n: z.read(n) for n in z.namelist()}
    name = next(n for n in entries if n.startswith("__structure__"))
    raw = np.load(io.BytesIO(entries[name]))
    record = json.loads(bytes(raw).decode())
    edit(record)
    buf = io.BytesIO()
    np.save(buf, np.frombuffer(json.dumps(record).encode(), np.uint8))
    entries[name] = buf.getvalue()
    with zipfile.ZipFile(path, "w") as z:
        for n, data in entries.items():
            z.writestr(n, data)
    return path


def _load_outcome(path, **kw):
    try:
        fg.io.load(path, **kw)
    except Exception as e:  # noqa: BLE001
        return "clean" if _intended(e) else "raw"
    return "wrong"


def _find_node(node, pred):
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, dict):
            if pred(n):
                return n
            stack.extend(v for v in n.values() if isinstance(v, (dict, list)))
        elif isinstance(n, list):
            stack.extend(n)
    return None


@probe("checkpoints")
def _import_module():
    folder = tempfile.mkdtemp()
    with open(os.path.join(folder, "fg_probe_evil.py"), "w") as fh:
        fh.write(f"open({_MARK!r}, 'w').close()\n")
    sys.path.insert(0, folder)
    try:
        State = collections.namedtuple("State", "a")
        path = _ckpt_bytes({"s": State(np.ones(2))})

        def edit(record):
            node = _find_node(record, lambda n: "module" in n)
            node["module"] = "fg_probe_evil"
        _rewrite_structure(path, edit)
        with contextlib.suppress(Exception):
            fg.io.load(path)
        hit = os.path.exists(_MARK) or "fg_probe_evil" in sys.modules
    finally:
        sys.path.remove(folder)
        sys.modules.pop("fg_probe_evil", None)
        if os.path.exists(_MARK):
            os.remove(_MARK)
    return "security" if hit else "clean"


@probe("checkpoints")
def _keys_children_mismatch():
    path = _ckpt_bytes({"a": np.ones(2), "b": np.zeros(2)})

    def edit(record):
        node = _find_node(record, lambda n: "keys" in n)
        node["keys"] = node["keys"][:1]
    _rewrite_structure(path, edit)
    return _load_outcome(path)


@probe("checkpoints")
def _huge_shape():
    path = _ckpt_bytes({"a": np.ones(2)})

    def edit(record):
        node = _find_node(record, lambda n: "shape" in n)
        node["shape"] = [10**12]
    _rewrite_structure(path, edit)
    return _load_outcome(path)


for _seed in range(12):
    def _bitflip(seed=_seed):
        path = _ckpt_bytes({"w": np.arange(6.0).reshape(2, 3), "n": [1, 2.5, None]})
        data = bytearray(open(path, "rb").read())
        rng = np.random.default_rng(seed)
        for i in rng.integers(0, len(data), 1 + seed % 4):
            data[i] ^= 1 << int(rng.integers(0, 8))
        open(path, "wb").write(bytes(data))
        try:
            fg.io.load(path)
        except Exception as e:  # noqa: BLE001
            return "clean" if _intended(e) else "raw"
        return "clean"  # a flip in padding or an unused field may leave the data intact
    PROBES["checkpoints"].append(_bitflip)


@probe("checkpoints")
def _save_missing_dir():
    return _expect_error(lambda: fg.io.save("/nonexistent-dir/x/c.npz", {"a": np.ones(1)}))


@probe("checkpoints")
def _save_onto_dir():
    return _expect_error(lambda: fg.io.save(tempfile.mkdtemp(), {"a": np.ones(1)}))


@probe("checkpoints")
def _save_symlink():
    folder = tempfile.mkdtemp()
    target, link = os.path.join(folder, "real.npz"), os.path.join(folder, "link.npz")
    fg.io.save(target, {"a": np.ones(1)})
    os.symlink(target, link)
    fg.io.save(link, {"a": np.zeros(1)})
    return "clean" if os.path.islink(link) else "wrong"


@probe("checkpoints")
def _local_namedtuple():
    Local = collections.namedtuple("Local", "a b")
    path = _ckpt_bytes(Local(np.ones(1), np.zeros(1)))
    try:
        out = fg.io.load(path, like=Local(np.ones(1), np.zeros(1)))
    except Exception:  # noqa: BLE001
        return "raw"
    return "clean" if type(out) is Local else "wrong"


@probe("checkpoints")
def _deep_checkpoint():
    tree = np.ones(1)
    for _ in range(500):
        tree = [tree]
    try:
        fg.io.load(_ckpt_bytes(tree))
    except Exception as e:  # noqa: BLE001
        return "clean" if _intended(e) else "raw"
    return "clean"


# --- depth and memory ----------------------------------------------------------------------

def _nested(depth):
    tree = fnp.ones(2)
    for _ in range(depth):
        tree = [tree]
    return tree


for _depth in (200, 500, 1000):
    for _what in ("tree_map", "jit", "grad"):
        def _deep(depth=_depth, what=_what):
            tree = _nested(depth)
            try:
                if what == "tree_map":
                    fg.tree_util.tree_map(lambda x: x + 1, tree)
                elif what == "jit":
                    fg.jit(lambda t: t)(tree)
                else:
                    fg.grad(lambda t: fnp.sum(fg.tree_util.tree_leaves(t)[0]))(tree)
            except Exception:  # noqa: BLE001
                return "raw"
            return "clean"
        PROBES["depth"].append(_deep)


@probe("cache and memory")
def _cache_bound():
    f = fg.jit(lambda x: x + 1)
    for n in range(1, 300):
        f(fnp.ones(n))
    info = f.cache_info()
    size = getattr(info, "size", None) or getattr(info, "currsize", None)
    return "clean" if size is not None and size < 299 else "wrong"


@probe("cache and memory")
def _linecache_growth():
    before = sum(1 for k in linecache.cache if str(k).startswith("<funcgrad"))
    for _ in range(200):
        fg.jit(lambda x: x * 3.0)(fnp.ones(2))
    gc.collect()
    after = sum(1 for k in linecache.cache if str(k).startswith("<funcgrad"))
    return "clean" if after - before < 100 else "wrong"


def main():
    rows, totals = [], collections.Counter()
    for area, probes in PROBES.items():
        counts = collections.Counter()
        for p in probes:
            try:
                with np.errstate(all="ignore"):
                    outcome = p()
            except Exception:  # noqa: BLE001 - the probe's own machinery was refused
                outcome = "raw"
            counts[outcome] += 1
        totals.update(counts)
        rows.append((area, len(probes), counts))
    head = f"{'area':<26}{'probes':>7}{'clean':>7}{'crash/raw':>10}{'wrong':>7}{'security':>9}"
    print(head)
    print("-" * len(head))
    for area, n, c in rows + [("total", sum(r[1] for r in rows), totals)]:
        print(f"{area:<26}{n:>7}{c['clean']:>7}{c['raw']:>10}{c['wrong']:>7}{c['security']:>9}")


if __name__ == "__main__":
    main()
