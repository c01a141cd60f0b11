"""The one cache of `jit`: traces per function, compiled code per program, the single path
that runs a cached trace (with donation), and the counters.

    _FunCache   one per jitted function and options: key -> `_Entry` (one trace), at most
                `config.jit_cache_size`, evicted least recently used first; misses explained
    programs    per program (a ClosedJaxpr, by identity): its compiled code per (backend,
                donation) and the programs derived from it (jvp, transpose, vmap)
    call_donating, check_donation, is_deleted
                donation: argument checks, taking buffers over, deleting donated Arrays
    stats       the counters; `call.stats` and `pipeline.stats` are views of it
Imported by `compiler.call`, `compiler.jit` and `compiler.pipeline`; must not import them.
"""

import linecache
import sys
import types
import warnings
import weakref
from collections import Counter, OrderedDict, deque

import numpy as np

from funcgrad import errors
from funcgrad.config import config
from funcgrad.core import Array, ClosedJaxpr, ShapedArray, Tracer
from funcgrad.tree_util import PyTreeDef, _fold, _unflattener, first_mismatch, treedef_is_leaf

_cfg = config._values
_KWARGS = object()  # marks keys of calls with dynamic keyword arguments


# --- counters ---------------------------------------------------------------------------------

class Stats:
    """The compile and run counters of jit and the compiler, kept in one place.

    `counts`: `("compile", name)` and `("run", name)` per program name (`f`, `jvp(f)`,
    `transpose(jvp(f))`): programs compiled for the program cache, and `jit` equations run
    eagerly (derived programs, calls under grad or debug_nans). A jitted function's own calls
    are counted by its cache (`cache_info()`, `trace_count`). Read as `compiler.call.stats`.
    `pipeline`: `compiles`, `compile_seconds` and the phases of the last compilation
    (`last_seconds`) of every `pipeline.compile_jaxpr` (jit programs, the control-flow bodies
    compiled with them, direct calls). Read as `compiler.pipeline.stats`.
    """

    def __init__(self):
        self.counts = Counter()
        self.pipeline = {"compiles": 0, "compile_seconds": 0.0, "last_seconds": {}}

    def compiled(self, seconds, phases):
        """Record one compilation by the pipeline."""
        p = self.pipeline
        p["compiles"] += 1
        p["compile_seconds"] += seconds
        p["last_seconds"] = phases


stats = Stats()

# Runs watched by a `funcgrad.profiler` trace session: while it holds a function
# `watch(name, exe, args) -> outputs`, every eager run of a compiled program goes through it.
watchers = []


def run(exe, args, name):
    """`exe(*args)`, through the trace session's watcher while one is on."""
    return exe(*args) if not watchers else watchers[0](name, exe, args)


def log(message):
    """`message` on the logger "funcgrad" at WARNING (`log_compiles`, `explain_cache_misses`:
    shown by default, as JAX's)."""
    import logging
    logging.getLogger("funcgrad").warning(message)


# --- compiled code and derived programs, per program -----------------------------------------

class _Record(OrderedDict):
    """What is cached for one program, least recently used first; it leaves `records` when
    the program dies. (The callback holds the records and the key, not the record: a cycle
    through it would keep compiled code alive until the cycle collector runs.)"""

    def __init__(self, program, records):
        super().__init__()
        key = id(program)

        def forget(ref):
            if key in records and records[key].ref is ref:
                del records[key]
        self.ref = weakref.ref(program, forget)


class ProgramCache:
    """Compiled code and derived programs of each program (a ClosedJaxpr, by identity).

    Keys are `("exe", backend, donated)` for compiled code and the deriving transform's own
    keys (`("jvp", nonzeros)`, ...) for derived programs. A program's record goes when the
    program dies (a weak reference) or is released; it keeps at most `config.jit_cache_size`
    values (vmap over ever new batch sizes would otherwise grow it without bound). Values
    must not refer back to their program, or it could never die: compiled code is built
    from a copy of the program's wrapper (`call._compile`).
    """

    def __init__(self):
        self._records = {}  # id(program) -> _Record

    def get(self, program, key, make):
        """The value cached for (`program`, `key`), made by `make()` on first use."""
        rec = self._records.get(id(program))
        if rec is None or rec.ref() is not program:
            rec = self._records[id(program)] = _Record(program, self._records)
        value = rec.get(key)
        if value is None:
            value = make()
            rec[key] = value
            while len(rec) > max(1, _cfg["jit_cache_size"]):
                old_key, old = rec.popitem(last=False)
                self._release_values([(old_key, old)])
        else:
            rec.move_to_end(key)
        return value

    def executable(self, program, backend, donated, name, compile):
        """`program` compiled for (`backend`, `donated`): `compile(program, backend, donated,
        name)` on first use, counted as `stats.counts["compile", name]`."""
        def make():
            stats.counts["compile", name] += 1
            return compile(program, backend, donated, name)
        return self.get(program, ("exe", backend, donated), make)

    def cached(self, program):
        """The keys cached for `program` (for tests and curious users)."""
        rec = self._records.get(id(program))
        return list(rec) if rec is not None and rec.ref() is program else []

    def clear(self):
        """Drop what is cached for every program."""
        while self._records:
            self._release_values(list(self._records.popitem()[1].items()))

    def release(self, program):
        """Drop what is cached for `program`, and for the programs derived from it, now (their
        generated sources leave `linecache` with them); later calls compile again."""
        rec = self._records.pop(id(program), None)
        if rec is not None:
            self._release_values(list(rec.items()))

    def _release_values(self, items):
        stack = items
        while stack:
            key, value = stack.pop()
            if key[0] == "exe":
                continue
            for p in _programs_in(value):
                rec = self._records.pop(id(p), None)
                if rec is not None:
                    stack.extend(rec.items())


def _programs_in(value):
    """The programs a derived value holds: `(program, consts, info)` tuples, or an object
    (a transpose plan) with programs among its attributes."""
    if type(value) is ClosedJaxpr:
        return [value]
    parts = value if type(value) in (tuple, list) else getattr(value, "__dict__", {}).values()
    return [p for p in parts if type(p) is ClosedJaxpr]


programs = ProgramCache()


# --- entries and output builders ----------------------------------------------------------------

class _Entry:
    """One cached trace: the program, its closed-over values and how to call it.

    `donate`: positions (among the call's leaves) of donated arguments, checked on every
    call, `kept` the others; `donated`: one bool per program input, the donation the code is
    compiled for, none unless the backend takes donated buffers (a capability it declares,
    `funcgrad.backends.capabilities`: not CUDA, whose pool reuses memory).
    """

    __slots__ = ("jaxpr", "consts", "const_vals", "out_tree", "build_outputs", "name",
                 "bind_params", "donate", "kept", "takes_buffers", "donated", "exe", "tiered",
                 "cacheable", "hits", "seen_hits")

    def __init__(self, jaxpr, consts, out_tree, donated, name, backend, takes_buffers):
        self.jaxpr, self.consts, self.out_tree, self.name = jaxpr, consts, out_tree, name
        self.cacheable = not any(isinstance(c, Tracer) for c in consts)
        self.const_vals = [c._value for c in consts] if self.cacheable else None
        self.build_outputs = _output_builder(out_tree, [a.weak_type for a in jaxpr.out_avals])
        mask = donated[len(consts):]
        self.donate = tuple(i for i, d in enumerate(mask) if d)
        self.kept = tuple(i for i, d in enumerate(mask) if not d)
        no_donation = (False,) * len(donated)
        self.takes_buffers = bool(self.donate) and takes_buffers
        self.donated = donated if self.takes_buffers else no_donation
        self.bind_params = dict(jaxpr=jaxpr, name=name, donated=no_donation, backend=backend)
        self.exe = self.tiered = None
        self.hits = 0
        self.seen_hits = 0  # `hits` when eviction last passed over this entry

    def keep(self, exe):
        """Keeps `exe` as the code this trace runs, and returns it. An executable that moves
        to a faster tier later (`final_tier`: None until its last tier is in place, as the
        native backend's `TieredExecutable`) is called through until then, and its last
        tier directly from then on (`settle`): a call then costs one Python call less."""
        final = getattr(exe, "final_tier", False)  # (False: an executable of one tier)
        self.tiered = exe if final is None else None
        self.exe = exe if final is None or final is False else final
        return exe

    def settle(self):
        """The code to run now: the last tier of a tiered executable once it is in place."""
        final = self.tiered.final_tier
        if final is not None:
            self.exe, self.tiered = final, None
        return self.exe


# Generated output builders are kept to trees well inside what Python's parser nests (about
# 200 brackets) and small enough to compile quickly; others take the planned unflatten.
_MAX_EXPR_DEPTH = 50
_MAX_EXPR_NODES = 1000
_EXPR_TYPES = (tuple, list, dict, type(None))


def _output_builder(out_tree, out_weak):
    """A function from the executable's numpy outputs to the output pytree of Arrays.

    A shallow tree of tuples, lists, dicts and None gets one generated function, e.g.
    `def build(o): a0 = N(A); a0._value = o[0]; a0.weak_type = False; ...; return {K0: (a0,
    a1)}`. Its source holds generated identifiers only (dict keys are bound as names `K0`,
    ..., never printed), and Python builds each container with one opcode, which a planned
    unflatten cannot match (`dict(zip(...))` alone costs more than the whole function on a
    12-leaf tree). Each Array is made as `Array(value, weak)` makes it (its two fields set;
    `tests/test_time_to_native.py` checks it), without a Python call per leaf. Other trees
    wrap the leaves in one `map` and take an unflatten planned once (any depth, any node
    type).
    """
    nodes = out_tree._nodes
    if treedef_is_leaf(out_tree) or (
            len(nodes) <= _MAX_EXPR_NODES and _depth(nodes) < _MAX_EXPR_DEPTH
            and all(r is None or r[0] in _EXPR_TYPES for r in nodes)):
        names = {"N": Array.__new__, "A": Array}
        made = "".join(f"    a{i} = N(A); a{i}._value = o[{i}]; a{i}.weak_type = {bool(w)}\n"
                       for i, w in enumerate(out_weak))
        leaves = [f"a{i}" for i in range(len(out_weak))]
        body = leaves[0] if treedef_is_leaf(out_tree) else _fold(
            nodes, leaves, lambda rec, parts: _expr(rec, parts, names))
        exec(f"def build(o):\n{made}    return {body}\n", names)  # generated identifiers only
        return names["build"]
    build, weak = _unflattener(nodes), tuple(out_weak)
    return lambda outs: build(list(map(Array, outs, weak)))


def _expr(rec, parts, names):
    t, aux, _ = rec
    if t is tuple:
        return "(" + "".join(p + ", " for p in parts) + ")"
    if t is list:
        return "[" + ", ".join(parts) + "]"
    if t is dict:
        keys = []
        for k in aux:
            keys.append(f"K{len(names)}")
            names[keys[-1]] = k
        return "{" + ", ".join(f"{k}: {p}" for k, p in zip(keys, parts)) + "}"
    return "None"


def _depth(nodes):
    """How many containers deep a structure nests."""
    best, open_counts = 0, []
    for rec in nodes:
        if rec is not None and rec[2]:
            open_counts.append(rec[2])
            best = max(best, len(open_counts))
            continue
        while open_counts:
            open_counts[-1] -= 1
            if open_counts[-1]:
                break
            open_counts.pop()
    return best


# --- the cache of one function ------------------------------------------------------------------

class _FunCache:
    """The traces of one function (shared by every `jit` of it with the same options).

    `entries` maps a call's key `(structure, enable_x64, statics, leaf signature...)` to its
    trace; every call, cached or not, eager or traced, looks it up with the same key. At
    most `config.jit_cache_size` entries are kept. Eviction approximates least recently used
    without costing the hot path anything but `entry.hits += 1` (the CLOCK policy): entries
    are queued in insertion order, and an entry at the front that had hits since eviction
    last looked at it is moved to the back instead of evicted. An evicted entry's programs
    are released at once (`programs.release`).
    """

    def __init__(self):
        self.entries = {}  # key -> _Entry, in eviction order
        self.dropped_hits = self.misses = self.traces = 0
        self.recent = deque(maxlen=16)  # (key, leaf names) of recent traces
        self.evicted = {}  # recently evicted keys (at most 16), to explain their misses
        self.last_miss = None
        self.warned = False
        # A dead function's cache releases its programs at once.
        weakref.finalize(self, _release_all, self.entries)
        _all_caches.add(self)

    @property
    def hits(self):
        """Calls answered from the cache (the counts outlive evicted entries)."""
        return self.dropped_hits + sum(e.hits for e in self.entries.values())

    def add(self, key, entry):
        self.entries[key] = entry
        self.evicted.pop(key, None)
        while len(self.entries) > max(1, _cfg["jit_cache_size"]):
            self._evict_one(entry)

    def _evict_one(self, newest):
        entries = self.entries
        while True:  # ends: an entry passed over once has no new hits on its next turn
            key = next(iter(entries))
            entry = entries.pop(key)
            if entry.hits == entry.seen_hits and entry is not newest:
                break
            entry.seen_hits = entry.hits
            entries[key] = entry
        self._drop(entry)
        self.evicted[key] = None
        if len(self.evicted) > 16:
            del self.evicted[next(iter(self.evicted))]

    def _drop(self, entry):
        self.dropped_hits += entry.hits
        programs.release(entry.jaxpr)

    def clear(self):
        for entry in self.entries.values():
            self._drop(entry)
        self.entries.clear()

    def explain(self, key, names):
        """Why `key` missed: the differences from the closest recently traced key."""
        if key in self.evicted:
            return (f"this signature was traced before, but its trace was evicted: the cache "
                    f"keeps the {max(1, _cfg['jit_cache_size'])} most recently used "
                    f"(config.jit_cache_size)")
        if not self.recent:
            return "first call: nothing was cached yet"
        diffs = min((_key_diff(old, key, names) for old, _ in reversed(self.recent)), key=len)
        if not diffs:
            return ("the key is unchanged, but the function closes over values traced by an "
                    "enclosing transformation, so its traces cannot be cached")
        return "; ".join(diffs)


def _release_all(entries):
    for entry in entries.values():
        programs.release(entry.jaxpr)


_shared_caches = weakref.WeakKeyDictionary()  # function -> {options: _FunCache}
_all_caches = weakref.WeakSet()  # every live _FunCache (for `clear_all`)


def clear_all():
    """Forget every trace of every jitted function and every compiled program
    (`funcgrad.clear_caches`); later calls trace and compile again."""
    for cache in list(_all_caches):
        cache.clear()
    programs.clear()


def _cache_for(fun, options):
    """The cache of `fun` for `options`: shared between `jit(f)` objects of one plain
    function (so `jit(f)(x)` in a loop does not re-trace), private otherwise."""
    if not isinstance(fun, types.FunctionType):
        return _FunCache()
    per_fun = _shared_caches.setdefault(fun, {})
    cache = per_fun.get(options)
    if cache is None:
        cache = per_fun[options] = _FunCache()
    return cache


# --- donation -----------------------------------------------------------------------------------

class DonatedArrayError(errors.FuncgradError, RuntimeError):
    """An array that was donated to a jitted function was used afterwards."""


def call_donating(entry, leaves, vals, names_of):
    """Run a donating trace eagerly on `vals` (the values of `leaves`): its output pytree.

    Its donated Arrays are checked (`check_donation`), their buffers taken over (a copy is
    donated instead where someone else can still see one) and deleted after the call, or
    when it fails: the program may have overwritten part of them before the error.
    `names_of()` names the leaves for error messages. Linear in the number of leaves.
    """
    if len(leaves) > 1:  # (one argument alone shares its buffer with nothing)
        check_donation(entry, leaves, names_of)
    exe = entry.exe
    if not entry.takes_buffers:
        try:
            outs = exe(*entry.const_vals, *vals)
        except Exception as e:
            reraise(e, exe, entry.name)
        return entry.build_outputs(outs)
    for i in entry.donate:  # (checked inline: a training step passes here on every call)
        v = vals[i]  # taken over when only its Array holds it and it owns writeable memory
        # (counted before `v.flags` is read: a flags object holds its array)
        if not (type(v) is np.ndarray and type(leaves[i]) is Array
                and _getrefcount(v) <= _SOLE_OWNER_REFS and _private_layout(v.flags)):
            vals[i] = np.array(v)
        del v
    try:  # the donated buffers are private now: the program need not check them again
        outs = exe(*entry.const_vals, *vals, owned=True)
    except BaseException as e:
        _delete(leaves, entry.donate, entry.name, failed=True)
        if not isinstance(e, Exception):  # KeyboardInterrupt, SystemExit
            raise
        reraise(e, exe, entry.name)
    _delete(leaves, entry.donate, entry.name)
    return entry.build_outputs(outs)


def check_donation(entry, leaves, names_of):
    """A donated buffer must not also be read through another argument (or be donated
    twice). One pass over the kept arguments, one over the donated ones."""
    readers = {}  # id of a kept buffer (or of the array it views) -> its position
    for k in entry.kept:
        x = leaves[k]
        if type(x) is Array:
            v = x._value
            readers[id(v)] = k
            base = getattr(v, "base", None)
            if base is not None:
                readers[id(base)] = k
    donated = {}  # id of a donated Array -> its position
    for i in entry.donate:
        x = leaves[i]
        if type(x) is not Array:
            continue
        j = readers.get(id(x._value))
        if j is None:  # not read by a kept argument: donated twice?
            first = donated.setdefault(id(x), i)
            i, j = (first, i) if first != i else (i, None)
        if j is not None:
            names = names_of()
            raise errors.FuncgradValueError(
                f"jit({entry.name}): argument `{names[i]}` is donated, but the same buffer "
                f"is also passed as argument `{names[j]}`; donating it would overwrite a "
                f"value that is still read\n{errors.where()}\n"
                "  hint: pass a copy (fnp.array(x)) or do not donate this argument.")


def warn_unusable_donations(closed, donated, names, name):
    """Warn (once, at trace time) about donated inputs no output can reuse."""
    passthrough = set(closed.jaxpr.outvars)
    free = [(a.shape, a.dtype) for a in closed.out_avals]
    unusable = []
    for v, d, leaf in zip(closed.jaxpr.invars, donated, names):
        if not d or v in passthrough:
            continue
        if (v.aval.shape, v.aval.dtype) in free:
            free.remove((v.aval.shape, v.aval.dtype))
        else:
            unusable.append(f"`{leaf}` {v.aval}")
    if unusable:
        frame = errors.user_frame() or ("<unknown>", 0, "")
        warnings.warn_explicit(
            f"jit({name}): some donated buffers were not usable (no output has their shape "
            f"and dtype): {', '.join(unusable)}", UserWarning, frame[0], frame[1])


_getrefcount = sys.getrefcount


def _private_layout(flags):
    return flags.owndata and flags.writeable and flags.c_contiguous


def _calibrate():
    a = Array(np.zeros(1))
    vals = [a._value]
    v = vals[0]
    # held by the Array, the list, `v` and the call's argument (as in `call_donating`)
    return _getrefcount(v)


_SOLE_OWNER_REFS = _calibrate()


class _Deleted:
    """Stands in for the buffer of a donated Array: any use raises a clear error.

    The message is built only when raised: donation runs on every call of a training step,
    which makes one per donated leaf (`_delete`: with no Python call each, `_info` set at
    once: shape, dtype, the function's name, whether its call failed).
    """

    __slots__ = ("_info",)

    @property
    def message(self):
        shape, dtype, name, failed = self._info
        aval = ShapedArray(shape, dtype)
        if failed:
            return (f"this Array ({aval}) was donated to jit({name}) (donate_argnums), "
                    "whose call failed after its buffer may have been partly overwritten; it "
                    "can no longer be used.\n"
                    "  hint: keep a copy (fnp.array(x)) to retry a failing call with donated "
                    "arguments, or do not donate this argument.")
        return (f"this Array ({aval}) was donated to jit({name}) (donate_argnums) and its "
                "buffer may have been reused; it can no longer be used.\n"
                "  hint: use the function's outputs instead, or do not donate this argument.")

    def __getattr__(self, attr):
        raise DonatedArrayError(self.message)

    def __array__(self, *args, **kwargs):
        raise DonatedArrayError(self.message)

    def __repr__(self):
        return "<donated buffer>"


def _delete(leaves, donate, name, failed=False):
    """Marks the donated Arrays among `leaves` deleted (their values become `_Deleted`)."""
    for i in donate:
        a = leaves[i]
        if type(a) is Array:
            v = a._value
            if type(v) is not _Deleted:
                d = _new_deleted(_Deleted)
                d._info = (v.shape, v.dtype, name, failed)
                a._value = d


_new_deleted = object.__new__


def is_deleted(x):
    """True when `x` is an Array whose buffer was donated to a jitted call."""
    return type(x) is Array and type(x._value) is _Deleted


# --- failures of compiled code ------------------------------------------------------------------

def reraise(e, exe, name):
    """Re-raise an exception from running compiled code: funcgrad errors as they are,
    anything else as a FuncgradInternalError naming the generated line."""
    if isinstance(e, errors.FuncgradError) or errors.is_user_error(e):
        raise e
    raise errors.FuncgradInternalError(
        f"jit({name}): the compiled code raised {type(e).__name__}: {e}\n"
        f"{_generated_line(e, exe)}  This is a funcgrad bug, please report it.\n"
        f"{errors.where()}\n"
        "  hint: config.update('disable_jit', True) runs the function op by op.") from e


def _generated_line(e, exe):
    """'  generated code FILE:LINE: text' for the deepest frame in generated source."""
    tb, frame = e.__traceback__, None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.startswith("<"):
            frame = (tb.tb_frame.f_code.co_filename, tb.tb_lineno)
        tb = tb.tb_next
    if frame is None:
        return ""
    text = linecache.getline(*frame).strip()
    if not text and hasattr(exe, "as_text"):
        lines = exe.as_text().splitlines()
        text = lines[frame[1] - 1].strip() if 0 < frame[1] <= len(lines) else ""
    return f"  generated code {frame[0]}:{frame[1]}: {text}\n"


# --- explaining misses -----------------------------------------------------------------------

class _NotPassed:
    def __repr__(self):
        return "<not passed>"


_NOT_PASSED = _NotPassed()


def _fmt_sig(s):
    return ShapedArray(s[0], s[1]).str_short() + (" (weakly typed)" if s[2] else "")


def _key_diff(old, new, names):
    """Readable differences between two cache keys."""
    (ot, ox, ost), osig = old[:3], old[3:]
    (nt, nx, nst), nsig = new[:3], new[3:]
    diffs = []
    if ox != nx:
        diffs.append(f"config enable_x64: {ox} -> {nx}")
    if ot != nt:
        diffs.append("argument pytree structure "
                     f"{first_mismatch(PyTreeDef(ot, len(osig)), PyTreeDef(nt, len(nsig)))}")
    else:
        diffs += [f"argument `{n}`: {_fmt_sig(a)} -> {_fmt_sig(b)}"
                  for n, a, b in zip(names, osig, nsig) if a != b]
    if ost != nst:
        old_s = {s[0]: s[2] for s in ost if s is not _KWARGS}
        new_s = {s[0]: s[2] for s in nst if s is not _KWARGS}
        for label in sorted(set(old_s) | set(new_s), key=str):
            a, b = old_s.get(label, _NOT_PASSED), new_s.get(label, _NOT_PASSED)
            if type(a) is not type(b) or a != b:
                diffs.append(f"static argument `{label}`: {errors.short_repr(a, 60)} -> "
                             f"{errors.short_repr(b, 60)}")
    return diffs
