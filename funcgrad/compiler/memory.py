"""Liveness-based buffer planning for a compiled program, in words every backend shares.

A backend describes its program as a list of `Step`s: each step reads values and defines
values. A defined value says how the backend can produce it (its `kind`, one of):

- `ANY_BUFFER`: writes into any buffer of its shape and dtype it is given, also the buffer
  of one of its own operands that dies at this step (in place); allocates when given none;
- `FREE_BUFFER`: writes into a buffer it is given that is none of its operands';
  allocates when given none;
- `NEW_ARRAY`: always allocates a new array that nothing else references;
- `ALIAS`: may share memory with the values in `aliases` (a library call's result);
  counted as allocated, never reused;
- `VIEW`: shares memory with `aliases`; costs nothing;
- `SCALAR`: a rank-0 value, never planned;
- `ARG`, `CONST`: the program's inputs and bound constants.

`plan_memory` assigns buffers by a linear scan: a buffer is free once the value it holds
and every value that may alias it are dead; free buffers are pooled by shape and dtype.
Donated arguments join the pool once dead. Optionally, large buffers that only ever hold
temporaries (no result, nothing a result may alias) form a workspace that a backend
allocates once and reuses across calls. The plan also predicts the peak bytes
(`MemoryAnalysis`). How a kind is written in code (numpy's `out=`, a kernel's output
pointer) is the backend's business: this module knows nothing about IR, numpy source or
any backend, and imports none.
"""

import math
from dataclasses import dataclass

import numpy as np

ANY_BUFFER = "any-buffer"
FREE_BUFFER = "free-buffer"
NEW_ARRAY = "new-array"
ALIAS = "alias"
VIEW = "view"
SCALAR = "scalar"
ARG = "arg"
CONST = "const"

WRITES_INTO = (ANY_BUFFER, FREE_BUFFER)  # kinds that can be given a buffer to write into
OWNING = (ANY_BUFFER, FREE_BUFFER, NEW_ARRAY)  # kinds whose memory is their own
SHARING = (ALIAS, VIEW)  # kinds that may share memory with other values


@dataclass
class Value:
    """A value of a program: shape, dtype, how it is produced, what it may alias."""

    key: object
    shape: tuple
    dtype: object
    kind: str
    aliases: tuple = ()

    @property
    def nbytes(self):
        return math.prod(self.shape) * np.dtype(self.dtype).itemsize


@dataclass
class Step:
    """One statement: the values it defines and reads; `inplace` lists read values whose
    buffer an `ANY_BUFFER` definition may take when they die here (read with their own
    layout), or maps each definition's key to such a list."""

    defs: list
    uses: list
    inplace: tuple = ()


@dataclass
class Slot:
    """Where a value lives: `action` is "new" (the op allocates buffer `buffer`), "reuse"
    (write into the free buffer `buffer`), "inplace" (into its operand's buffer `buffer`) or
    "none" (not planned: args, consts, aliases, views, scalars)."""

    action: str
    buffer: int = None

    @property
    def existing(self):
        """True when the value is written into a buffer that exists before this step."""
        return self.action in ("reuse", "inplace")


@dataclass
class MemoryAnalysis:
    """Predicted memory use of one call, in bytes (library calls' own scratch excluded).

    Attributes:
        argument_bytes: the inputs (and bound consts).
        output_bytes: the results.
        temp_bytes: the most bytes held at once by values that are not results.
        peak_bytes: the most bytes live at once, arguments included.
        alias_bytes: bytes of donated arguments reused for other values.
        buffers: how many arrays the program allocates.
        workspace_bytes: temporaries allocated once and kept between calls (part of
            `temp_bytes`).
    """

    argument_bytes: int
    output_bytes: int
    temp_bytes: int
    peak_bytes: int
    alias_bytes: int = 0
    buffers: int = 0
    workspace_bytes: int = 0

    # JAX's names for the same numbers (`compiled.memory_analysis()` in JAX)
    argument_size_in_bytes = property(lambda self: self.argument_bytes)
    output_size_in_bytes = property(lambda self: self.output_bytes)
    temp_size_in_bytes = property(lambda self: self.temp_bytes)
    alias_size_in_bytes = property(lambda self: self.alias_bytes)
    peak_memory_in_bytes = property(lambda self: self.peak_bytes)

    def __str__(self):
        mb = lambda b: f"{b / 2**20:.2f} MiB"
        return (f"peak {mb(self.peak_bytes)} = arguments {mb(self.argument_bytes)} + "
                f"temporaries/results; temp {mb(self.temp_bytes)}, outputs "
                f"{mb(self.output_bytes)}, donated reuse {mb(self.alias_bytes)}, "
                f"{self.buffers} allocations, workspace kept between calls "
                f"{mb(self.workspace_bytes)}")


@dataclass
class MemoryPlan:
    """The result of `plan_memory`.

    Attributes:
        slots: value key -> `Slot`.
        buffers: buffer id -> (shape, dtype).
        releases: step index -> buffer ids and value keys whose last use is that step
            (a backend may drop its references there).
        copies: indices into `outputs` of results the program must copy before returning
            (non-donated arguments, consts, repeated values).
        donated_used: donated argument keys whose buffer holds another value later.
        analysis: the `MemoryAnalysis`.
        holders: buffer id -> the keys of the values it holds, in order (a donated
            argument's buffer starts with the argument).
        workspace: ids of the buffers kept across calls (with `persistent=True`); their
            first value is written into them ("reuse") and they are never released.
        lifetimes: buffer id -> (first step, last step) it holds a value over (a donated
            argument's buffer starts at -1, a result's ends at `len(steps)`).
        offsets: workspace buffer id -> its byte offset in the packed workspace (with
            `pack_workspace=True`; `analysis.workspace_bytes` is then the block's size).
    """

    slots: dict
    buffers: list
    releases: dict
    copies: set
    donated_used: set
    analysis: MemoryAnalysis
    holders: list
    workspace: list
    lifetimes: list = None
    offsets: dict = None


def _last_uses(steps, outputs):
    end = len(steps)
    last = {}
    for i, step in enumerate(steps):
        for d in step.defs:
            last.setdefault(d.key, i)
        for k in step.uses:
            last[k] = i
    for k in outputs:
        last[k] = end
    for step in reversed(steps):  # a value lives as long as anything that may alias it
        for d in step.defs:
            for a in d.aliases:
                last[a] = max(last.get(a, 0), last[d.key])
    return last


def plan_memory(steps, args, consts=(), outputs=(), donated=(), workspace_min_bytes=None,
                pack_workspace=False):
    """Assign buffers to the values of `steps` by liveness.

    Args:
        steps: the program's `Step`s in execution order.
        args: `Value`s of the inputs (kind `ARG`); consts: `Value`s of bound consts (`CONST`).
        outputs: keys of the returned values, in order (repeats allowed).
        donated: keys of arguments whose buffers the program may overwrite once dead.
        workspace_min_bytes: keep the buffers of temporaries of at least this size across
            calls (see the module docstring); None: no workspace.
        pack_workspace: lay the workspace's buffers out in one block by their lifetimes
            (`pack`: `plan.offsets`), counted as one block of that size.

    Returns:
        A `MemoryPlan`.
    """
    values = {v.key: v for v in list(args) + list(consts)}
    for s in steps:
        values.update((d.key, d) for d in s.defs)
    last = _last_uses(steps, outputs)
    out_set, donated = set(outputs), set(donated)
    buffers, holders, born, buf_of, slots, pool = [], [], [], {}, {}, {}
    for a in args:
        if a.key in donated and a.shape != () and a.key not in out_set:
            buffers.append((tuple(a.shape), np.dtype(a.dtype)))
            holders.append([a.key])
            born.append(-1)
            buf_of[a.key] = len(buffers) - 1
    for i, step in enumerate(steps):
        taken = set()
        for d in step.defs:
            slot = _place(d, step, i, last, buf_of, buffers, holders, born, pool, taken, out_set,
                          pack_workspace)
            if slot.action == "new":
                buffers.append((tuple(d.shape), np.dtype(d.dtype)))
                holders.append([])
                born.append(i)
                slot.buffer = len(buffers) - 1
            if slot.buffer is not None:
                buf_of[d.key] = slot.buffer
                holders[slot.buffer].append(d.key)
                taken.add(slot.buffer)
            slots[d.key] = slot
        for k in dict.fromkeys(list(step.uses) + [d.key for d in step.defs]):
            b = buf_of.get(k)
            if last.get(k) == i and b is not None and holders[b][-1] == k:
                pool.setdefault((buffers[b][0], buffers[b][1].str), []).append(b)
    workspace = ([] if workspace_min_bytes is None else
                 _workspace(values, holders, born, outputs, buffers, workspace_min_bytes))
    for b in workspace:
        slots[holders[b][0]].action = "reuse"
    if pack_workspace:
        workspace += _split_reuse(steps, last, workspace, buffers, holders, born, slots, buf_of)
    end = len(steps)
    lifetimes = [(born[b], end if hs and hs[-1] in out_set else last.get(hs[-1], born[b])
                  if hs else born[b]) for b, hs in enumerate(holders)]
    offsets, block = {}, None
    if pack_workspace:
        at, block = pack([_nbytes(buffers[b]) for b in workspace],
                         [lifetimes[b] for b in workspace])
        offsets = dict(zip(workspace, at))
    releases, analysis = _account(steps, values, last, buffers, holders, born, slots,
                                  out_set, args, consts, outputs, set(workspace), block)
    donated_used = {h[0] for h in holders if h and h[0] in donated and len(h) > 1}
    analysis.alias_bytes = sum(values[k].nbytes for k in donated_used)
    analysis.workspace_bytes = (block if block is not None else
                                sum(_nbytes(buffers[b]) for b in workspace))
    return MemoryPlan(slots, buffers, releases, _copies(outputs, values, donated),
                      donated_used, analysis, holders, workspace, lifetimes, offsets)


def pack(sizes, lifetimes, align=64):
    """Offsets of blocks of `sizes` bytes in one region such that two blocks whose
    `lifetimes` ((first step, last step), inclusive) meet never overlap, and the region's
    size. Each block goes to the lowest offset free over its lifetime, aligned to `align`
    bytes (a block under 4 KiB to 16, as malloc aligns), in the better of two orders
    (largest first; earliest first). A backend lays a program's temporaries out in one
    workspace with it.

    Example:
        >>> pack([64, 64, 64], [(0, 1), (1, 2), (2, 3)])
        ([0, 64, 0], 128)
    """
    orders = (sorted(range(len(sizes)), key=lambda k: (-sizes[k], k)),
              sorted(range(len(sizes)), key=lambda k: (lifetimes[k][0], -sizes[k], k)))
    return min((_first_fit(order, sizes, lifetimes, align) for order in orders),
               key=lambda placed: placed[1])


def _first_fit(order, sizes, lifetimes, align):
    offsets, placed = [0] * len(sizes), []
    for k in order:
        a = align if sizes[k] >= 4096 else 16
        size = -(-sizes[k] // a) * a
        lo, hi = lifetimes[k]
        taken = sorted((offsets[j], offsets[j] + s) for j, s in placed
                       if lifetimes[j][0] <= hi and lo <= lifetimes[j][1])
        at = 0
        for start, stop in taken:
            if at + size <= start:
                break
            at = max(at, -(-stop // a) * a)
        offsets[k] = at
        placed.append((k, size))
    return offsets, max((offsets[j] + s for j, s in placed), default=0)


def alias_reach(values, keys):
    """The keys of the values that the values `keys` may share memory with, following
    `aliases` transitively (`values`: key -> `Value`; keys not in it are skipped)."""
    seen, stack = set(), [a for k in keys if k in values for a in values[k].aliases]
    while stack:
        k = stack.pop()
        if k not in seen and k in values:
            seen.add(k)
            stack.extend(values[k].aliases)
    return seen


def _workspace(values, holders, born, outputs, buffers, min_bytes):
    """Buffers (of at least `min_bytes`) allocated by the program that hold no result and
    nothing a result may alias, and whose first value can be written into a buffer."""
    escaping = {k for k in outputs if k in values} | alias_reach(values, outputs)
    return [b for b, hs in enumerate(holders)
            if born[b] >= 0 and values[hs[0]].kind in WRITES_INTO
            and _nbytes(buffers[b]) >= min_bytes and not any(h in escaping for h in hs)]


def _split_reuse(steps, last, workspace, buffers, holders, born, slots, buf_of):
    """Splits each workspace buffer where a value took it from the free pool (not in place)
    into a buffer of its own, if the workspace then packs into fewer bytes; returns the new
    buffers' indices. The pool chains values of one shape and dtype into one buffer, alive
    from the first value's definition to the last one's death; `pack`, given the values' own
    lifetimes, can lay another value into a gap of the chain (first fit: not always smaller,
    so both layouts are tried)."""
    def_step = {d.key: i for i, s in enumerate(steps) for d in s.defs}
    span = lambda hs: (def_step[hs[0]], last.get(hs[-1], def_step[hs[0]]))
    runs = {}
    for b in workspace:
        hs, start, runs[b] = holders[b], 0, []
        for j in range(1, len(hs)):
            if slots[hs[j]].action == "reuse":
                runs[b].append(hs[start:j])
                start = j
        runs[b].append(hs[start:])
    pieces = [(b, run) for b in workspace for run in runs[b]]
    if len(pieces) == len(workspace) or (
            pack([_nbytes(buffers[b]) for b, _ in pieces], [span(r) for _, r in pieces])[1]
            >= pack([_nbytes(buffers[b]) for b in workspace],
                    [span(holders[b]) for b in workspace])[1]):
        return []
    new = []
    for b in workspace:
        holders[b] = runs[b][0]
        for run in runs[b][1:]:
            buffers.append(buffers[b])
            holders.append(run)
            born.append(def_step[run[0]])
            new.append(len(buffers) - 1)
            for k in run:
                slots[k].buffer = buf_of[k] = new[-1]
    return new


def _place(d, step, i, last, buf_of, buffers, holders, born, pool, taken, out_set,
           packed):
    if d.kind not in OWNING or tuple(d.shape) == ():
        return Slot("none")
    shape, dt = tuple(d.shape), np.dtype(d.dtype)
    if d.kind == ANY_BUFFER:
        cands = step.inplace.get(d.key, ()) if isinstance(step.inplace, dict) else step.inplace
        if packed:  # a donated argument's buffer first: the result aliases it, as donation
            # asks, and the other operand's bytes go back to the packed workspace
            cands = sorted(cands, key=lambda u: born[buf_of[u]] >= 0 if u in buf_of else True)
        for u in cands:
            b = buf_of.get(u)
            if (b is not None and b not in taken and last.get(u) == i and u not in out_set
                    and holders[b][-1] == u and buffers[b] == (shape, dt)):
                return Slot("inplace", b)
    if d.kind in WRITES_INTO:
        free = pool.get((shape, dt.str))
        if free:
            return Slot("reuse", free.pop())
    return Slot("new")


def _account(steps, values, last, buffers, holders, born, slots, out_set, args, consts,
             outputs, workspace, block=None):
    """Release points of buffers and aliasing values, and the predicted byte counts (the
    workspace as its buffers, or as one `block` of bytes when it is packed)."""
    end = len(steps)
    def_step = {d.key: i for i, s in enumerate(steps) for d in s.defs}
    events, releases = [], {}  # events: (alloc step, release step, bytes, is a result)
    if block:
        events.append((0, end, block, False))
    for b, hs in enumerate(holders):
        if born[b] < 0:
            continue
        if b in workspace:  # allocated before the call, held throughout
            if block is None:
                events.append((0, end, _nbytes(buffers[b]), False))
            continue
        final = hs[-1]
        rel = end if final in out_set else last.get(final, born[b])
        events.append((born[b], rel, _nbytes(buffers[b]), final in out_set))
        if rel < end:
            releases.setdefault(rel, []).append(("buffer", b))
    for k, v in values.items():
        if v.kind in SHARING and k in slots:
            rel = end if k in out_set else last.get(k, def_step[k])
            if v.kind == ALIAS:
                events.append((def_step[k], rel, v.nbytes, k in out_set))
            if rel < end:
                releases.setdefault(rel, []).append(("value", k))
    delta_all, delta_tmp = [0] * (end + 2), [0] * (end + 2)
    for start, stop, nb, is_out in events:
        delta_all[start] += nb
        delta_all[stop + 1] -= nb
        if not is_out:
            delta_tmp[start] += nb
            delta_tmp[stop + 1] -= nb
    peak = temp = live = live_tmp = 0
    for i in range(end + 1):
        live += delta_all[i]
        live_tmp += delta_tmp[i]
        peak, temp = max(peak, live), max(temp, live_tmp)
    base = sum(v.nbytes for v in list(args) + list(consts))
    out_bytes = sum(values[k].nbytes for k in dict.fromkeys(outputs) if k in values)
    return releases, MemoryAnalysis(base, out_bytes, temp, base + peak, 0, len(events))


def _nbytes(buffer):
    shape, dt = buffer
    return math.prod(shape) * dt.itemsize


def _copies(outputs, values, donated):
    """Outputs the program must copy: arguments and consts (unless donated), and repeats."""
    copies, seen = set(), set()
    for idx, k in enumerate(outputs):
        v = values.get(k)
        if v is None:
            continue
        if (v.kind == ARG and k not in donated) or v.kind == CONST or k in seen:
            copies.add(idx)
        seen.add(k)
    return copies
