"""The fusion pass: cut an optimized IR into kernels and library calls.

A kernel is a maximal group of elementwise equations over one iteration space, optionally
ending in reductions over a common set of axes. Operands reach a kernel as strided reads:
views of an input (`broadcast_in_dim`, `transpose`, unit-axis `reshape`/`squeeze`) are
folded into the input's access pattern instead of being materialized. Everything else
(dot_general, convolutions, gathers, sorts, control flow...) stays one `CallNode` per
equation. What is which the primitives declare (`Primitive.kind`, `fusible`, a reduction's
`reduce_op`, a view's `view_axes` rule); this pass names no primitive.

The result is a `Program`: nodes in a valid execution order. A kernel is described by a
`KernelSpec`, a frozen, hashable, JSON-serializable record that names ops by primitive name
and dtypes by their names: backend-neutral, so that the numpy renderer and a CUDA renderer
print the same spec. This module must not import any backend.
"""

import dataclasses
import hashlib
import heapq
import json
from dataclasses import dataclass

import numpy as np

from funcgrad.compiler.passes import has_effects
from funcgrad.core import Jaxpr, Literal

CODEGEN_VERSION = 1


# --- the kernel description -----------------------------------------------------------------

@dataclass(frozen=True)
class KernelInput:
    """An array read by a kernel. Source axis i of the (row-major) array is iteration axis
    `axes[i]`, or -1 for a dropped size-1 axis; a size-1 source axis on a longer iteration
    axis, and every iteration axis no source axis maps to, is broadcast (stride 0)."""

    name: str
    dtype: str
    shape: tuple
    axes: tuple

    def strides(self, iter_shape):
        """Element strides over `iter_shape` of a row-major source (0: broadcast)."""
        out = [0] * len(iter_shape)
        stride = 1
        for size, ax in zip(reversed(self.shape), reversed(self.axes)):
            if ax >= 0 and size == iter_shape[ax] and size != 1:
                out[ax] = stride
            stride *= size
        return tuple(out)

    def is_direct(self, iter_shape):
        """True when numpy broadcasting reads it without a reshape (right-aligned axes)."""
        n, k = len(iter_shape), len(self.shape)
        return k <= n and self.axes == tuple(range(n - k, n))


@dataclass(frozen=True)
class Const:
    """A typed scalar constant in a kernel body."""

    value: object
    dtype: str


@dataclass(frozen=True)
class Instr:
    """`dst = op(*args)` on scalars; args name inputs or earlier dsts, or are `Const`s."""

    dst: str
    op: str
    args: tuple
    dtype: str
    params: tuple = ()

    @property
    def param_dict(self):
        return dict(self.params)


@dataclass(frozen=True)
class KernelOutput:
    """An array a kernel writes: `value` over the iteration space, or its reduction by
    `reduce` (a `ReduceOp`'s name: "sum", "max", "min", "prod") over the kernel's
    `reduce_axes`."""

    name: str
    value: str
    dtype: str
    shape: tuple
    reduce: str = None


@dataclass(frozen=True)
class KernelSpec:
    """A fused kernel: everything a backend needs, and nothing backend-specific.

    Example (relu(x + b) with b broadcast along the rows):
        KernelSpec(name='k0_add_max', iter_shape=(128, 512),
                   inputs=(KernelInput('in0', 'float32', (128, 512), (0, 1)),
                           KernelInput('in1', 'float32', (512,), (1,))),
                   body=(Instr('t0', 'add', ('in0', 'in1'), 'float32'),
                         Instr('t1', 'max', ('t0', Const(0.0, 'float32')), 'float32')),
                   outputs=(KernelOutput('out0', 't1', 'float32', (128, 512)),),
                   reduce_axes=())
    """

    name: str
    iter_shape: tuple
    inputs: tuple
    body: tuple
    outputs: tuple
    reduce_axes: tuple = ()

    def to_json(self):
        return json.dumps(dataclasses.asdict(self), sort_keys=True, default=str)

    def key(self):
        """A stable hash of the kernel's content (its name excluded) for compile caches."""
        d = dataclasses.asdict(self)
        d.pop("name")
        text = json.dumps([CODEGEN_VERSION, d], sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()


# --- the fused program ----------------------------------------------------------------------

@dataclass
class KernelNode:
    """A kernel in a program: its spec and how it binds to IR variables.

    `inputs[i]` is the IR variable read as `spec.inputs[i]`; `outputs[j]` the variable that
    receives `spec.outputs[j]`; `eqns[k]` the equation of `spec.body[k]` and `out_eqns[j]` the
    equation that defines `outputs[j]` (a reduction or a body equation), for source lines."""

    spec: KernelSpec
    inputs: list
    outputs: list
    eqns: list
    out_eqns: list


@dataclass
class CallNode:
    """One equation run as a library call, a view, or a higher-order primitive."""

    eqn: object


@dataclass
class Program:
    """A fused program: the optimized jaxpr and its nodes in execution order."""

    jaxpr: Jaxpr
    consts: list
    nodes: list

    @property
    def kernels(self):
        return [n for n in self.nodes if isinstance(n, KernelNode)]

    def summary(self):
        """One line per node: `kernel <name> <iter shape>` or `call <primitive>`."""
        lines = []
        for n in self.nodes:
            if isinstance(n, KernelNode):
                red = f" reduce{n.spec.reduce_axes}" if n.spec.reduce_axes else ""
                ops = " ".join(i.op for i in n.spec.body)
                lines.append(f"kernel {list(n.spec.iter_shape)}{red}: {ops}".rstrip())
            else:
                lines.append(f"call {n.eqn.prim.name}")
        return "\n".join(lines)


# --- classification --------------------------------------------------------------------------

def _simple_param(v):
    return isinstance(v, (bool, int, float, str, np.dtype)) or (
        isinstance(v, tuple) and all(_simple_param(x) for x in v))


def _json_param(v):
    if isinstance(v, np.dtype):
        return _dtype_name(v)
    if isinstance(v, tuple):
        return tuple(_json_param(x) for x in v)
    return v


def is_elementwise(eqn):
    """An equation a kernel can compute: fusible elementwise, plain params, shapes as lax
    allows."""
    p = eqn.prim
    if p.kind != "elementwise" or not p.fusible or p.multiple_results:
        return False
    shape = eqn.outvars[0].aval.shape
    return (all(a.aval.shape in (shape, ()) for a in eqn.invars)
            and all(_simple_param(v) for v in eqn.params.values()))


def is_reduction(eqn):
    p = eqn.prim
    return p.kind == "reduction" and p.fusible and not p.multiple_results


def view_axes(eqn):
    """For a layout-only equation, operand axis -> output axis (-1: dropped unit axis);
    None when the equation is not a view a kernel can fold into its strides."""
    p = eqn.prim
    if p.kind != "view" or not p.fusible or len(eqn.invars) != 1:
        return None
    return p.view_axes(eqn.invars[0].aval.shape, eqn.outvars[0].aval.shape, **eqn.params)


# --- grouping --------------------------------------------------------------------------------

class _Groups:
    """Union-find over equation indices, with what the merge test needs kept per group.

    `preds[r]`, `succs[r]` and `bad[r]` hold the equations (or groups) that group `r` reads,
    that read it, and that it reads in a way a kernel cannot fuse (through a view, or a
    reduction's result); they are resolved to current groups when read (`resolved`), so a
    merge only joins sets, the smaller into the larger. `pos` is a topological order of the
    groups (a group after every group it reads), kept valid across merges by Pearce and
    Kelly's reordering; a search for a path to some groups stops at groups placed before
    them. Every equation is added once and each merge costs its own sets and searches, not
    the size of the groups, so fusion is close to linear in the program."""

    def __init__(self, n):
        self.parent = list(range(n))
        self.pos = list(range(n))
        self.hi = list(range(n))
        self.members, self.shape, self.reduce_axes = {}, {}, {}
        self.reads = [()] * n  # eqn index -> (base var, axes) of each var operand
        self.preds, self.succs, self.bad = {}, {}, {}

    def find(self, i):
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def add(self, i, reads, producer, bad=()):
        """Equation `i` as a group of its own, after every group that exists."""
        self.reads[i] = reads
        self.members[i] = [i]
        self.preds[i] = preds = {self.find(producer[b]) for b, _ in reads if b in producer}
        self.succs[i] = set()
        self.bad[i] = set(bad)
        for p in preds:
            self.succs[p].add(i)

    def resolved(self, table, r):
        """`table[r]` (preds, succs or bad) as a set of current groups other than `r`."""
        out = {self.find(x) for x in table[r]}
        out.discard(r)
        table[r] = out
        return out

    def merge(self, reps, behind):
        """Make `reps` one group; `behind` (from `search_back`) lists the groups placed after
        the first of them that the new group reads: they move before it."""
        floor = min(self.pos[r] for r in reps)
        root = min(reps)
        for table in (self.members, self.preds, self.succs, self.bad):
            table[root] = _joined(table, reps)
        axes = [self.reduce_axes[r] for r in reps if self.reduce_axes.get(r) is not None]
        self.reduce_axes[root] = axes[0] if axes else None
        for r in reps:
            self.parent[r] = root
        self.hi[root] = max(self.hi[r] for r in reps)
        self.pos[root] = floor
        if behind:
            self._reorder(root, behind)
        return root

    def _reorder(self, root, behind):
        """Pearce-Kelly: the groups `behind` and the groups reading `root` placed before the
        last of `behind` share out their places, `behind` first, each set in its old order."""
        bound = max(self.pos[r] for r in behind)
        ahead, stack = set(), [root]
        while stack:
            r = stack.pop()
            if r in ahead or self.pos[r] > bound:
                continue
            ahead.add(r)
            stack.extend(self.resolved(self.succs, r))
        order = sorted(behind, key=self.pos.__getitem__) + sorted(ahead, key=self.pos.__getitem__)
        for r, p in zip(order, sorted(self.pos[r] for r in order)):
            self.pos[r] = p

    def search_back(self, starts, targets):
        """The groups placed after the first target that some start depends on (starts
        included), or None when a start depends (transitively) on a target."""
        floor = min(self.pos[t] for t in targets)
        seen, stack = set(), list(starts)
        while stack:
            r = stack.pop()
            if r in seen or self.pos[r] < floor:
                continue
            seen.add(r)
            for p in self.resolved(self.preds, r):
                if p in targets:
                    return None
                stack.append(p)
        return seen


def _joined(table, reps):
    """The union of `table[r]` (lists or sets) over `reps`, grown from the largest; the
    entries of `reps` leave `table`."""
    parts = sorted((table.pop(r) for r in reps), key=len)
    out = parts.pop()
    for part in parts:
        if type(out) is list:
            out += part
        else:
            out |= part
    return out


def _resolve(atom, views):
    """(base atom, axes) for an operand: through the foldable views that produce it."""
    if type(atom) is Literal:
        return atom, ()
    hit = views.get(atom)
    return hit if hit is not None else (atom, tuple(range(atom.aval.ndim)))


def _view_read(eqn, views):
    """(base atom, axes) of a view equation's result: its operand's, seen through it."""
    src = view_axes(eqn)
    base, axes = _resolve(eqn.invars[0], views)
    return base, tuple(-1 if a < 0 else src[a] for a in axes)


def _classify(eqn):
    if is_elementwise(eqn):
        return "ew"
    if is_reduction(eqn) and 0 not in eqn.invars[0].aval.shape:
        return "reduce"
    if view_axes(eqn) is not None:
        return "view"
    return "call"


def _try_join(g, i, eqn, kind, producer, classes):
    """Merge equation `i` into the groups of its operands' producers when that is legal."""
    shape = eqn.invars[0].aval.shape if kind == "reduce" else eqn.outvars[0].aval.shape
    axes = tuple(eqn.params["axes"]) if kind == "reduce" else None
    identity = tuple(range(len(shape)))
    cands = []
    for base, ax in g.reads[i]:
        p = producer.get(base)
        if p is None or classes[p] == "reduce" or ax != identity:
            continue
        r = g.find(p)
        if g.shape.get(r) == shape and r not in cands and (
                axes is None or g.reduce_axes.get(r) in (None, axes)):
            cands.append(r)
    g.shape[i] = shape
    g.reduce_axes[i] = axes
    attempts = ([cands] if len(cands) > 1 else []) + [[c] for c in cands]
    for attempt in attempts:
        kinds = {g.reduce_axes.get(r) for r in attempt} | {axes}
        behind = None if len(kinds - {None}) > 1 else _legal(g, i, set(attempt))
        if behind is not None:
            root = g.merge(attempt + [i], behind)
            g.shape[root] = shape
            return


def _legal(g, i, targets):
    """Whether equation `i` may join `targets`: it reads no target through a view or a
    reduction's result, nor does a target read another so, and no path leads from a target
    to `i` (or to another target) outside them. Returns the groups that must move before
    the merged group (see `_Groups.search_back`), or None when the merge is not legal."""
    if not g.resolved(g.bad, i).isdisjoint(targets):
        return None
    starts = g.resolved(g.preds, i) - targets
    if len(targets) > 1:
        for t in targets:
            if not g.resolved(g.bad, t).isdisjoint(targets):
                return None
            starts |= g.resolved(g.preds, t) - targets
    return g.search_back(starts, targets)


def fuse(closed):
    """Cut `closed` (a ClosedJaxpr) into kernels and calls.

    Returns:
        A `Program` whose `nodes` are `KernelNode`s and `CallNode`s in execution order.

    Example:
        >>> print(fuse(make_jaxpr(lambda x, b: lax.max(x + b, 0.0))(x, b)).summary())
        kernel [128, 512]: add max
    """
    jaxpr = closed.jaxpr
    eqns = jaxpr.eqns
    producer = {v: i for i, e in enumerate(eqns) for v in e.outvars}
    classes = [_classify(e) for e in eqns]
    g = _Groups(len(eqns))
    views = {}  # view result -> (base atom, axes), for views a kernel reads through
    for i, eqn in enumerate(eqns):
        kind = classes[i]
        if kind not in ("ew", "reduce"):
            g.add(i, tuple((a, None) for a in eqn.invars if type(a) is not Literal), producer)
            if kind == "view":
                views[eqn.outvars[0]] = _view_read(eqn, views)
            continue
        reads = tuple(_resolve(a, views) for a in eqn.invars if type(a) is not Literal)
        identity = tuple(range(eqn.invars[0].aval.ndim if kind == "reduce"
                               else eqn.outvars[0].aval.ndim))
        bad = [producer[b] for b, ax in reads if b in producer
               and (ax != identity or classes[producer[b]] == "reduce")]
        g.add(i, reads, producer, bad)
        _try_join(g, i, eqn, kind, producer, classes)
    for members in g.members.values():
        members.sort()
    users = _users(jaxpr, eqns, g, classes)
    order = _schedule(g, eqns, classes, users)
    nodes = []
    for rep in order:
        if classes[rep] in ("ew", "reduce"):
            nodes.append(_kernel(g, rep, eqns, classes, users, len(nodes)))
        else:
            nodes.append(CallNode(eqns[rep]))
    return Program(jaxpr, list(closed.consts), nodes)


def _users(jaxpr, eqns, g, classes):
    """var -> set of consumers: node reps (groups, calls, kept views) or "out".

    A view equation is kept (materialized) only when something other than a kernel reads
    its result; kernels read the view's operand through strides instead."""
    users = {}
    for v in jaxpr.outvars:
        if type(v) is not Literal:
            users.setdefault(v, set()).add("out")
    for i, reads in enumerate(g.reads):
        if classes[i] != "view":
            for base, _ in reads:
                users.setdefault(base, set()).add(g.find(i))
    for i in reversed(range(len(eqns))):
        if classes[i] == "view" and users.get(eqns[i].outvars[0]):
            users.setdefault(eqns[i].invars[0], set()).add(i)
    return users


def _schedule(g, eqns, classes, users):
    """Node reps in a topological order (Kahn), preferring the original program order,
    except that a node whose results only the program returns (a parameter's update) runs
    as soon as it is the last reader of its operands: their memory is free (a donated
    parameter's buffer takes the update in place) before the next large value is made.

    View equations whose results only kernels read (through strides) are dropped; equations
    with side effects run in their original order."""
    reps = []
    for i in range(len(eqns)):
        if g.find(i) != i:
            continue
        if classes[i] == "view" and not users.get(eqns[i].outvars[0]):
            continue
        reps.append(i)
    live = set(reps)
    deps = {r: {d for d in g.resolved(g.preds, r) if d in live} for r in reps}
    effects = [i for i in reps if classes[i] == "call" and has_effects(eqns[i])]
    for prev, nxt in zip(effects, effects[1:]):  # side effects keep their program order
        deps[nxt].add(prev)
    waiting = {r: len(d) for r, d in deps.items()}
    succ = {r: [] for r in reps}
    for r, d in deps.items():
        for p in d:
            succ[p].append(r)
    readers = _readers(users, eqns, classes, live)
    reads_of = {}
    for v, rs in readers.items():
        for r in rs:
            reads_of.setdefault(r, []).append(v)
    left = {v: len(rs) for v, rs in readers.items()}
    # kernels only: a library call's result may alias its operands (nothing is freed by
    # running it early) and effectful calls keep their order
    sinks = {r for r in reps if classes[r] != "call" and _only_results(g, r, eqns, users)}

    def key(r):
        last = r in sinks and all(left[v] == 1 for v in reads_of.get(r, ()))
        return (not last, g.hi[r], r)
    ready = [key(r) for r in reps if waiting[r] == 0]
    heapq.heapify(ready)
    order, done = [], set()
    while ready:
        r = heapq.heappop(ready)[-1]
        if r in done:
            continue
        done.add(r)
        order.append(r)
        for v in reads_of.get(r, ()):
            left[v] -= 1
            if left[v] == 1:  # a waiting sink may have become its operand's last reader
                s = next(iter(readers[v] - done), None)
                if s in sinks and waiting[s] == 0 and not key(s)[0]:
                    heapq.heappush(ready, key(s))
        for s in succ[r]:
            waiting[s] -= 1
            if waiting[s] == 0:
                heapq.heappush(ready, key(s))
    if len(order) != len(reps):
        raise AssertionError("fusion produced a cyclic schedule; this is a funcgrad bug")
    return order


def _readers(users, eqns, classes, live):
    """var -> the reps (not views) that read it, directly or through kept views."""
    out = {}
    for v in users:
        found, seen, stack = set(), set(), [v]
        while stack:  # (a loop, not recursion: a chain of views may be thousands long)
            for u in users.get(stack.pop(), ()):
                if u == "out" or u not in live or u in seen:
                    continue
                seen.add(u)
                if classes[u] == "view":
                    stack.append(eqns[u].outvars[0])
                else:
                    found.add(u)
        if found:
            out[v] = found
    return out


def _only_results(g, r, eqns, users):
    """Whether node `r`'s values are read by nothing but the program's results."""
    outs = [v for m in g.members[r] for v in eqns[m].outvars]
    return (all(users.get(v, set()) <= {"out", r} for v in outs)
            and any("out" in users.get(v, ()) for v in outs))


def _kernel(g, rep, eqns, classes, users, index):
    members = g.members[rep]
    iter_shape = g.shape[rep]
    names, inputs, in_vars, body, body_eqns = {}, [], [], [], []
    internal = {v for m in members for v in eqns[m].outvars}

    def arg(atom, base, axes):
        if type(base) is Literal:  # a literal, or a broadcast of one
            return Const(_scalar(base.val), _dtype_name(base.aval.dtype))
        if base in internal:
            return names[base]
        key = (base, axes)
        if key not in names:
            names[key] = f"in{len(inputs)}"
            dt = _dtype_name(base.aval.dtype)
            inputs.append(KernelInput(names[key], dt, base.aval.shape, axes))
            in_vars.append(base)
        return names[key]

    outputs, out_vars, out_eqns = [], [], []
    for m in members:
        eqn = eqns[m]
        reads = iter(g.reads[m])
        args = []
        for a in eqn.invars:
            base, axes = (a, ()) if type(a) is Literal else next(reads)
            args.append(arg(a, base, axes))
        out = eqn.outvars[0]
        if classes[m] == "reduce":
            outputs.append(KernelOutput(f"out{len(outputs)}", args[0], _dtype_name(out.aval.dtype),
                                        out.aval.shape, eqn.prim.reduce_op.name))
            out_vars.append(out)
            out_eqns.append(eqn)
            continue
        dst = f"t{len(body)}"
        names[out] = dst
        params = tuple(sorted((k, _json_param(v)) for k, v in eqn.params.items()))
        body.append(Instr(dst, eqn.prim.name, tuple(args), _dtype_name(out.aval.dtype), params))
        body_eqns.append(eqn)
        if users.get(out, set()) - {rep}:
            outputs.append(KernelOutput(f"out{len(outputs)}", dst, _dtype_name(out.aval.dtype),
                                        out.aval.shape))
            out_vars.append(out)
            out_eqns.append(eqn)
    ops = "_".join(dict.fromkeys(i.op for i in body)) or "_".join(
        o.reduce for o in outputs)
    red = g.reduce_axes.get(rep) or ()
    spec = KernelSpec(f"k{index}_{ops[:40]}", tuple(iter_shape), tuple(inputs), tuple(body),
                      tuple(outputs), tuple(red))
    return KernelNode(spec, in_vars, out_vars, body_eqns, out_eqns)


_dtype_names = {}


def _dtype_name(dt):
    name = _dtype_names.get(dt)
    if name is None:
        name = _dtype_names[dt] = dt.name
    return name


def _scalar(val):
    v = np.asarray(val)
    return v.item()
