"""The Python side of a native program: where each value lives, the C segments' parameters,
and the wrapper's source.

A value C reads or writes lives in one of:
- the workspace: the memory plan's buffers that hold no result (`plan.workspace`) and the
  0-d temporaries, laid out in one block by `compiler.memory.pack` over their lifetimes
  (two buffers whose lifetimes meet never share bytes); C addresses them as `fg_w + offset`,
  Python statements through typed views (`cprogram.WorkspaceSet.views`);
- an array the wrapper passes: an argument, a result (allocated by the wrapper, `np.empty`,
  before the segment that first writes it), a value a Python statement computed;
- an array bound once: a constant, a literal, a loop's constant.
A view (`NativeRenderer.cviews`) lives where its root does, at its offset.

`source(r, fn_name, profile)` prints the wrapper: the donation check, the workspace taken,
then per group of the program either a Python statement (the numpy renderer's) or the
allocations of a segment's new results and its call; with `profile`, the segment also
receives a timing array and hands each statement's time to the profile (see
`cprogram.Segment`). Imports numpy and the native modules.
"""

import numpy as np

from funcgrad.backends.native import cprogram, ops
from funcgrad.backends.numpy import emit
from funcgrad.backends.numpy import ops as numpy_ops
from funcgrad.backends.numpy import render as numpy_render
from funcgrad.compiler import memory
from funcgrad.core import Literal


class Storage:
    """Where a value's root lives (see the module docstring): `kind` "ws" (`offset` bytes
    into the workspace), "array" (`expr`, the wrapper's name of the array; `check`: it may
    come with another dtype, size or layout, as arguments may) or "bound" (`array`)."""

    def __init__(self, kind, dtype, size, offset=None, expr=None, check=False, array=None):
        self.kind, self.dtype, self.size = kind, np.dtype(dtype), size
        self.offset, self.expr, self.check, self.array = offset, expr, check, array

    @property
    def ident(self):
        return (self.kind, self.offset if self.kind == "ws" else
                self.expr if self.kind == "array" else id(self.array))


class Layout:
    """The storages of a built `NativeRenderer` `r` and its workspace (see the module)."""

    def __init__(self, r):
        self.r, plan = r, r.plan
        self.outputs = {v for v in r.jaxpr.outvars if type(v) is not Literal}
        self.escaping = self.outputs | memory.alias_reach(r.values, self.outputs)
        self.ws_buffers = set(plan.workspace)
        self.c_defined = {d.key for b in r.blocks if getattr(b, "cstep", None)
                          for d in b.step.defs}
        keys, self.regions, offsets = [], [], []
        for b in plan.workspace:  # laid out by the plan (memory.pack)
            keys.append(("buffer", b))
            self.regions.append(plan.buffers[b])
            offsets.append(plan.offsets[b])
        at = plan.analysis.workspace_bytes
        for blk in r.blocks:  # then the 0-d temporaries that C writes, one slot each
            for d in blk.step.defs:
                if d.kind == memory.SCALAR and d.key in self.c_defined \
                        and d.key not in self.escaping:
                    keys.append(("scalar", d.key))
                    self.regions.append(((), d.dtype))
                    offsets.append(at)
                    at += 8  # (every dtype fits, aligned)
        self.nbytes = at  # (0-d values are not counted in the analysis, as on every tier)
        self.offset = dict(zip(keys, offsets))
        self.region = {k: j for j, k in enumerate(keys)}
        self.views = {}  # region index -> the wrapper's name of its view

    def used(self):
        """Whether the program has a workspace (regions of 0 bytes included: an empty
        temporary still has its view)."""
        return bool(self.regions)

    def workspace(self):
        regions = [(self.offset[k], shape, dt)
                   for k, (shape, dt) in zip(self.region, self.regions)]
        return cprogram.Workspace(self.nbytes, regions)

    def storage(self, key):
        """(Storage, element offset) of value `key` (a view: its root's, at its offset)."""
        r = self.r
        if key in r.cviews:
            root, view, _ = r.cviews[key]
            st, off = self.storage(root)
            return st, off + view.offset
        if hasattr(key, "array") and not hasattr(key, "aval"):  # program.Bound
            a = key.array
            return Storage("bound", a.dtype, a.size, array=a), 0
        v = r.values[key]
        if v.kind == memory.ARG:
            return Storage("array", v.dtype, v.nbytes // v.dtype.itemsize, expr=r.names[key],
                           check=True), 0
        if v.kind == memory.CONST:
            a = r.ns[r.names[key]]
            return Storage("bound", a.dtype, a.size, array=a), 0
        slot = r.plan.slots.get(key)
        if slot is not None and slot.buffer is not None:
            b = slot.buffer
            shape, dt = r.plan.buffers[b]
            if b in self.ws_buffers:
                return Storage("ws", dt, int(np.prod(shape)), offset=self.offset[("buffer", b)]), 0
            name = r.buffer_names[b]
            return Storage("array", dt, int(np.prod(shape)), expr=name,
                           check=name.startswith("a")), 0
        if v.kind == memory.SCALAR and key in self.c_defined:
            if key in self.escaping:
                return Storage("array", v.dtype, 1, expr=r.name_of(key)), 0
            return Storage("ws", v.dtype, 1, offset=self.offset[("scalar", key)]), 0
        return Storage("array", v.dtype, int(np.prod(v.shape)), expr=r.name_of(key),
                       check=True), 0  # computed by a Python statement

    def python_view(self, key):
        """The wrapper's name of the workspace region holding `key` (bound from `_w`)."""
        r = self.r
        slot = r.plan.slots.get(key)
        if slot is not None and slot.buffer in self.ws_buffers:
            return r.buffer_names[slot.buffer], self.region[("buffer", slot.buffer)]
        if ("scalar", key) in self.region:
            return r.name_of(key), self.region[("scalar", key)]
        return None

    def segment(self, cname, pyname, blocks, first):
        """The `cprogram.Segment` of C blocks `blocks` (with their steps' pointers set) and
        the wrapper's allocation lines for the results it writes first."""
        params, by_ident, local_ws = [], {}, {}

        def pointer(key):
            st, off = self.storage(key)
            if st.kind == "ws":
                if st.offset not in local_ws:
                    local_ws[st.offset] = (ops.storage(st.dtype.name), f"w{len(local_ws)}")
                name = local_ws[st.offset][1]
            else:
                p = by_ident.get(st.ident)
                if p is None:
                    p = cprogram.Param(f"p{len(params)}", ops.storage(st.dtype.name), False,
                                       st.kind, expr=st.expr, array=st.array, check=st.check,
                                       dtype=st.dtype, size=st.size)
                    by_ident[st.ident] = p
                    params.append(p)
                name = p.name
            return f"({name} + {off})" if off else name
        steps = [b.cstep for b in blocks]
        for s in steps:
            s.ptr = pointer
            s.statements()  # every operand gets its parameter
        written = {k for s in steps for k in s.outs}
        for p in params:
            p.const = False
        arrays = [p for p in params if p.source == "array"]
        bound = [p for p in params if p.source == "bound"]
        for p in bound:
            p.const = True
        for p in arrays:  # read-only where no statement of the segment writes it
            p.const = not any(self.storage(k)[0].ident == ("array", p.expr) for k in written)
        ordered = arrays + bound
        for k, p in enumerate(ordered):
            p.name = f"p{k}"
        locals_ = [(t, name, off) for off, (t, name) in local_ws.items()]
        seg = cprogram.Segment(cname, pyname, steps, ordered, locals_, first)
        seg.allocations = self._allocations(blocks)
        return seg

    def _allocations(self, blocks):
        """Lines allocating the results the blocks write first (their buffer is new)."""
        r, lines = self.r, []
        for b in blocks:
            for d in b.step.defs:
                st, _ = self.storage(d.key)
                if st.kind != "array" or st.check:
                    continue
                if d.kind == memory.SCALAR:
                    lines.append(f"{st.expr} = np.empty((), "
                                 f"{numpy_ops.dtype_text(np.dtype(d.dtype))})")
                elif r.plan.slots[d.key].action == "new":
                    shape, dt = r.plan.buffers[r.plan.slots[d.key].buffer]
                    lines.append(emit.allocate(st.expr, shape, dt))
        return lines


def source(r, fn_name, profile=False):
    """The wrapper's source (see the module docstring): (text, spans, line_eqns), as the
    numpy renderer's `source`."""
    segments = r.build_segments()
    lay = r.ws_layout
    lines = r.head(fn_name)
    spans, line_eqns, r.site_nodes = [], {}, []
    if lay.used():
        lines.append("    _w = _ws.take()  # the temporaries (one block, kept between calls)")
        for name, j in sorted(_python_views(r, lay).items()):
            lines.append(f"    {name} = _w.views[{j}]")
    seg_of = {idx[0]: s for s, (_, idx) in zip(segments, [g for g in r.groups() if g[0] == "c"])}
    for kind, idx in r.groups():
        if kind == "view":
            continue
        if kind == "py":
            i = idx[0]
            body = r.timed_body(i, profile, len(spans))
            first = len(lines) + 1
            numpy_render.add_lines(lines, body, line_eqns)
            if r.blocks[i].eqn is not None:
                spans.append((first, len(lines), r.blocks[i].label, r.blocks[i].eqn))
            continue
        seg = seg_of[idx[0]]
        _segment_lines(r, seg, idx, profile, lines, spans, line_eqns)
    if lay.used():
        lines.append("    _ws.give(_w)")
    lines.append(f"    return [{', '.join(r._results())}]")
    return "\n".join(lines) + "\n", spans, line_eqns


def _python_views(r, lay):
    """{name: region} of the workspace regions Python statements or results use."""
    found = {}
    keys = [k for b in r.blocks if not getattr(b, "cstep", None) and not getattr(b, "view", 0)
            for k in list(b.step.uses) + [d.key for d in b.step.defs]]
    keys += [v for v in r.jaxpr.outvars if type(v) is not Literal]
    for k in keys:
        while k in r.cviews:
            k = r.cviews[k][0]
        hit = lay.python_view(k)
        if hit is not None:
            found[hit[0]] = hit[1]
    return found


def _segment_lines(r, seg, idx, profile, lines, spans, line_eqns):
    """The allocations, call and `del`s of segment `seg` (blocks `idx`), timed when
    profiling."""
    blocks = [r.blocks[i] for i in idx]
    cblocks = [b for b in blocks if getattr(b, "cstep", None)]
    eqn = next((b.eqn for b in cblocks if b.eqn is not None), None)
    args = [p.expr for p in seg.params if p.source == "array"]
    ws = "_w.ptr" if r.ws_layout.used() else "0"
    body = [(ln, None) for ln in seg.allocations]
    times = "0"
    if profile:
        times = f"_tm{seg.pyname}.ctypes.data"
        r.ns[f"_tm{seg.pyname}"] = np.zeros(2 * len(cblocks))
    if profile == "sites":
        body.append(("_t = _clock()", None))
    body.append((f"{seg.pyname}({', '.join(args + [ws, times])})", eqn))
    first_span = len(spans)
    if profile is True:
        body.append((f"_cacc(_acc, _tm{seg.pyname}, {first_span})", None))
    elif profile == "sites":
        k0 = len(r.site_nodes)
        r.site_nodes += [b.node for b in cblocks]
        body.append((f"_crec(_rec, _sites, _tm{seg.pyname}, _t, {k0})", None))
    rel = [r._release_name(x) for i in idx for x in r.plan.releases.get(i, ())]
    rel = [x for x in rel if x]
    if rel:
        body.append((f"del {', '.join(rel)}", None))
    first = len(lines) + 1
    numpy_render.add_lines(lines, body, line_eqns)
    call = first + len(seg.allocations) + (profile == "sites")
    for b in cblocks:
        spans.append((call, call, b.label, b.eqn))


def c_accumulate(acc, times, first):
    """Profiling: add each C statement's time (`times`: start, end per statement) to
    `acc[first + k]`."""
    for k in range(len(times) // 2):
        acc[first + k] += times[2 * k + 1] - times[2 * k]


def c_record(rec, sites, times, t_call, first):
    """The profiler's hook: report each C statement to the recorder of `rec` (its `record`
    method) as a span, on its clock (C's times shifted to start at `t_call`)."""
    recorder = rec.__self__
    base = times[0] if len(times) else 0.0
    for k in range(len(times) // 2):
        recorder.span(sites[first + k], t_call + times[2 * k] - base,
                      t_call + times[2 * k + 1] - base)
