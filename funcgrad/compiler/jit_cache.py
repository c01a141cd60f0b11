"""The trace cache of `jit`: one `_FunCache` per function and options, its entries, how
they are evicted, how a miss is explained, and the builders of output pytrees.

At most `config.jit_cache_size` traces are kept per function; an evicted trace releases
its compiled programs at once (`call.release`), and with them their generated source.
Imported by `funcgrad.compiler.jit` only; must not import it.
"""

import types
import weakref
from collections import deque

from funcgrad.compiler import call
from funcgrad.config import config
from funcgrad.core import Array, ShapedArray, Tracer
from funcgrad.tree_util import _fold, _unflattener, first_mismatch, treedef_is_leaf

_cfg = config._values
_KWARGS = object()  # marks keys of calls with dynamic keyword arguments


class _NotPassed:
    def __repr__(self):
        return "<not passed>"


_NOT_PASSED = _NotPassed()


# --- entries and output builders ----------------------------------------------------------------

class _Entry:
    """One cached trace: the program, its closed-over values and how to call it."""

    __slots__ = ("jaxpr", "consts", "const_vals", "out_tree", "build_outputs", "params",
                 "traced_params", "donated", "exe", "cacheable", "hits", "seen_hits",
                 "fast_keys")

    def __init__(self, jaxpr, consts, out_tree, donated, name, backend):
        self.jaxpr, self.consts, self.out_tree = jaxpr, consts, out_tree
        self.cacheable = not any(isinstance(c, Tracer) for c in consts)
        self.const_vals = [c._value for c in consts] if self.cacheable else None
        self.build_outputs = _output_builder(out_tree, [a.weak_type for a in jaxpr.out_avals])
        self.donated = any(donated)
        self.params = dict(jaxpr=jaxpr, name=name, donated=donated, backend=backend)
        self.traced_params = dict(self.params, donated=(False,) * len(donated))
        self.exe = None
        self.hits = 0  # hits on the fast path (the others are counted by the cache)
        self.seen_hits = 0  # `hits` when eviction last passed over this entry
        self.fast_keys = []  # its keys in the fast-path table


# Generated output builders are kept to trees well inside what Python's parser nests (about
# 200 brackets) and small enough to compile quickly; others take the planned unflatten.
_MAX_EXPR_DEPTH = 50
_MAX_EXPR_NODES = 1000
_EXPR_TYPES = (tuple, list, dict, type(None))


def _output_builder(out_tree, out_weak):
    """A function from the executable's numpy outputs to the output pytree of Arrays.

    A shallow tree of tuples, lists, dicts and None gets one generated expression, e.g.
    `lambda o: {K0: (A(o[0], False), A(o[1], True))}`. Its source holds generated identifiers
    only (dict keys are bound as names `K0`, ..., never printed), and Python builds each
    container with one opcode, which a planned unflatten cannot match (`dict(zip(...))`
    alone costs more than the whole expression on a 12-leaf tree). Other trees wrap the
    leaves in one `map` and take an unflatten planned once (any depth, any node type).
    """
    if treedef_is_leaf(out_tree):
        weak = out_weak[0]
        return lambda outs: Array(outs[0], weak)
    nodes = out_tree._nodes
    if (len(nodes) <= _MAX_EXPR_NODES and _depth(nodes) < _MAX_EXPR_DEPTH
            and all(r is None or r[0] in _EXPR_TYPES for r in nodes)):
        names = {"A": Array}
        leaves = [f"A(o[{i}], {bool(w)})" for i, w in enumerate(out_weak)]
        body = _fold(nodes, leaves, lambda rec, parts: _expr(rec, parts, names))
        return eval(f"lambda o: {body}", names)  # generated identifiers only
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

    At most `config.jit_cache_size` entries are kept. Eviction approximates least recently
    used without costing the hot path anything (the CLOCK policy): entries are queued in
    insertion order, a slow-path hit moves its entry to the back, and an entry at the front
    that had fast-path hits since eviction last looked at it is moved to the back instead of
    evicted. An evicted entry's programs are released at once (see `call.release`).
    """

    def __init__(self):
        self.entries = {}  # full key -> _Entry, in eviction order
        self.fast = {}  # (tree node, x64, leaf signatures...) -> _Entry, for the hot path
        self.hits = self.misses = self.traces = 0
        self.recent = deque(maxlen=16)  # (key, leaf names) of recent traces
        self.evicted = {}  # recently evicted keys (at most 16), to explain their misses
        self.last_miss = None
        self.warned = False
        # A dead function's cache releases its programs at once (see `call.release`).
        weakref.finalize(self, _release_all, self.entries)

    def hit(self, key, entry):
        """A slow-path hit: `entry` becomes the most recently used."""
        self.hits += 1
        del self.entries[key]
        self.entries[key] = entry

    def add(self, key, entry):
        self.entries[key] = entry
        self.evicted.pop(key, None)
        while len(self.entries) > max(1, _cfg["jit_cache_size"]):
            self._evict_one(entry)

    def add_fast(self, fast_key, entry):
        if self.fast.get(fast_key) is not entry:
            self.fast[fast_key] = entry
            entry.fast_keys.append(fast_key)

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
        self.hits += entry.hits  # the counts outlive the entry
        for k in entry.fast_keys:
            if self.fast.get(k) is entry:
                del self.fast[k]
        call.release(entry.jaxpr)

    def clear(self):
        for entry in self.entries.values():
            self._drop(entry)
        self.entries.clear()
        self.fast.clear()

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
        call.release(entry.jaxpr)


_shared_caches = weakref.WeakKeyDictionary()  # function -> {options: _FunCache}


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


# --- explaining misses -----------------------------------------------------------------------

def _fmt_sig(s):
    return ShapedArray(s[0], s[1]).str_short() + (" (weakly typed)" if s[2] else "")


def _key_diff(old, new, names):
    """Readable differences between two cache keys."""
    (ot, osig, ost, ox), (nt, nsig, nst, nx) = old, new
    diffs = []
    if ox != nx:
        diffs.append(f"config enable_x64: {ox} -> {nx}")
    if ot != nt:
        diffs.append(f"argument pytree structure {first_mismatch(ot, nt)}")
    else:
        diffs += [f"argument `{n}`: {_fmt_sig(a)} -> {_fmt_sig(b)}"
                  for n, a, b in zip(names, osig, nsig) if a != b]
    if ost != nst:
        old_s = {s[0]: s[2] for s in ost if s is not _KWARGS}
        new_s = {s[0]: s[2] for s in nst if s is not _KWARGS}
        for label in sorted(set(old_s) | set(new_s), key=str):
            a, b = old_s.get(label, _NOT_PASSED), new_s.get(label, _NOT_PASSED)
            if type(a) is not type(b) or a != b:
                diffs.append(f"static argument `{label}`: {a!r:.60} -> {b!r:.60}")
    return diffs
