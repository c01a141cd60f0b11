"""The fusion pass: cut an optimized IR into kernels and library calls.

A kernel is a maximal group of elementwise equations over one iteration space, optionally
ending in reductions over a common set of axes. Operands reach a kernel as strided reads:
`broadcast_in_dim`, `transpose` and unit-axis `reshape`/`squeeze` of an input are folded
into the input's access pattern instead of being materialized. Everything else (dot_general,
convolutions, gathers, sorts, control flow...) stays one `CallNode` per equation.

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

# Primitives computed one element at a time: operands share the output shape or are rank-0.
ELEMENTWISE = frozenset("""
    add add_any sub mul div rem pow max min atan2 nextafter neg sign floor ceil round is_finite
    exp exp2 log log1p expm1 tanh logistic sin cos tan asin acos atan sinh cosh asinh acosh
    atanh sqrt rsqrt cbrt abs square integer_pow erf erfc erf_inv lgamma digamma
    eq ne lt le gt ge and or xor not shift_left shift_right_logical shift_right_arithmetic
    population_count clz select_n clamp convert_element_type real imag conj
    """.split())

# Reductions that can end a kernel, by primitive name -> the reduction's op in a KernelSpec.
REDUCTIONS = {"reduce_sum": "sum", "reduce_max": "max", "reduce_min": "min"}

# Layout-only primitives a kernel folds into the strides of its reads.
VIEWS = frozenset({"broadcast_in_dim", "transpose", "reshape", "squeeze"})


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
    `reduce` ("sum", "max", "min") over the kernel's `reduce_axes`."""

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
    """An equation a kernel can compute: elementwise, plain params, shapes as lax allows."""
    if eqn.prim.name not in ELEMENTWISE or eqn.prim.multiple_results:
        return False
    shape = eqn.outvars[0].aval.shape
    return (all(a.aval.shape in (shape, ()) for a in eqn.invars)
            and all(_simple_param(v) for v in eqn.params.values()))


def is_reduction(eqn):
    return eqn.prim.name in REDUCTIONS and not eqn.prim.multiple_results


def view_axes(eqn):
    """For a layout-only equation, operand axis -> output axis (-1: dropped unit axis);
    None when the equation is not a view a kernel can fold into its strides."""
    name, p = eqn.prim.name, eqn.params
    if name == "broadcast_in_dim":
        return tuple(p["broadcast_dimensions"])
    if name == "transpose":
        perm = p["permutation"]
        return tuple(perm.index(i) for i in range(len(perm)))
    in_shape = eqn.invars[0].aval.shape
    out_shape = eqn.outvars[0].aval.shape
    if name in ("reshape", "squeeze") and ([s for s in in_shape if s != 1]
                                           == [s for s in out_shape if s != 1]):
        big_out = iter(i for i, s in enumerate(out_shape) if s != 1)
        return tuple(-1 if s == 1 else next(big_out) for s in in_shape)
    return None


# --- grouping --------------------------------------------------------------------------------

class _Groups:
    """Union-find over equation indices with per-group data and a reachability test."""

    def __init__(self, eqns):
        n = len(eqns)
        self.parent = list(range(n))
        self.members = {i: [i] for i in range(n)}
        self.lo = list(range(n))
        self.hi = list(range(n))
        self.shape = {}
        self.reduce_axes = {}
        self.reads = [()] * n  # eqn index -> (base var, axes) of each var operand

    def find(self, i):
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def union(self, reps):
        root = min(reps)
        for r in reps:
            if r != root:
                self.parent[r] = root
                self.members[root] += self.members.pop(r)
                self.lo[root] = min(self.lo[root], self.lo[r])
                self.hi[root] = max(self.hi[root], self.hi[r])
                if self.reduce_axes.get(r) is not None:
                    self.reduce_axes[root] = self.reduce_axes[r]
        self.members[root].sort()
        return root

    def preds(self, rep, producer):
        out = set()
        for m in self.members[rep]:
            for base, _ in self.reads[m]:
                p = producer.get(base)
                if p is not None:
                    out.add(self.find(p))
        out.discard(rep)
        return out

    def reaches(self, starts, targets, producer):
        """Does any node in `starts` depend (transitively) on a node in `targets`?"""
        floor = min(self.lo[t] for t in targets)
        seen, stack = set(), [s for s in starts if s not in targets]
        while stack:
            r = stack.pop()
            if r in seen or self.hi[r] < floor:
                continue
            seen.add(r)
            for p in self.preds(r, producer):
                if p in targets:
                    return True
                stack.append(p)
        return False


def _resolve(atom, producer, eqns, classes):
    """(base atom, axes) for an operand: walks back through foldable view equations."""
    if type(atom) is Literal:
        return atom, ()
    axes = tuple(range(atom.aval.ndim))
    while True:
        i = producer.get(atom)
        if i is None or classes[i] != "view":
            return atom, axes
        src = view_axes(eqns[i])
        axes = tuple(-1 if a < 0 else axes[a] for a in src)
        atom = eqns[i].invars[0]


def _classify(eqn):
    if is_elementwise(eqn):
        return "ew"
    if is_reduction(eqn) and 0 not in eqn.invars[0].aval.shape:
        return "reduce"
    if eqn.prim.name in VIEWS and view_axes(eqn) is not None:
        return "view"
    return "call"


def _try_join(g, i, eqn, kind, producer, reduced):
    """Merge equation `i` into the groups of its operands' producers when that is legal."""
    shape = eqn.invars[0].aval.shape if kind == "reduce" else eqn.outvars[0].aval.shape
    axes = tuple(eqn.params["axes"]) if kind == "reduce" else None
    identity = tuple(range(len(shape)))
    cands = []
    for base, ax in g.reads[i]:
        p = producer.get(base)
        if p is None or base in reduced or ax != identity:
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
        if len(kinds - {None}) <= 1 and _legal(g, i, set(attempt), shape, producer, reduced):
            root = g.union(attempt + [i])
            g.shape[root] = shape
            return


def _legal(g, i, targets, shape, producer, reduced):
    """No path from a target group to equation `i` (or between targets) outside them, and
    every value `i` reads from a target is an unreduced value read in place."""
    identity = tuple(range(len(shape)))
    members = [i] + ([m for t in targets for m in g.members[t]] if len(targets) > 1 else [])
    for m in members:
        for base, ax in g.reads[m]:
            p = producer.get(base)
            if p is None or g.find(p) not in targets or (m != i and g.find(p) == g.find(m)):
                continue
            if ax != identity or base in reduced:
                return False
    starts = {g.find(producer[b]) for b, _ in g.reads[i] if b in producer} - targets
    for t in targets:
        starts |= g.preds(t, producer) - targets
    return not starts or not g.reaches(starts, targets, producer)


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
    g = _Groups(eqns)
    reduced = set()
    for i, eqn in enumerate(eqns):
        kind = classes[i]
        if kind in ("ew", "reduce"):
            g.reads[i] = tuple(_resolve(a, producer, eqns, classes) for a in eqn.invars
                               if type(a) is not Literal)
            _try_join(g, i, eqn, kind, producer, reduced)
            if kind == "reduce":
                reduced.add(eqn.outvars[0])
        else:
            g.reads[i] = tuple((a, None) for a in eqn.invars if type(a) is not Literal)
    users = _users(jaxpr, eqns, g, classes)
    order = _schedule(g, eqns, classes, users, producer)
    nodes = []
    for rep in order:
        if classes[rep] in ("ew", "reduce"):
            nodes.append(_kernel(g, rep, eqns, classes, producer, users, len(nodes)))
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


def _schedule(g, eqns, classes, users, producer):
    """Node reps in a topological order (Kahn), preferring the original program order.

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
    deps = {r: {d for d in g.preds(r, producer) if d in live} for r in reps}
    effects = [i for i in reps if classes[i] == "call" and has_effects(eqns[i])]
    for prev, nxt in zip(effects, effects[1:]):  # side effects keep their program order
        deps[nxt].add(prev)
    waiting = {r: len(d) for r, d in deps.items()}
    succ = {r: [] for r in reps}
    for r, d in deps.items():
        for p in d:
            succ[p].append(r)
    ready = [(g.hi[r], r) for r in reps if waiting[r] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, r = heapq.heappop(ready)
        order.append(r)
        for s in succ[r]:
            waiting[s] -= 1
            if waiting[s] == 0:
                heapq.heappush(ready, (g.hi[s], s))
    if len(order) != len(reps):
        raise AssertionError("fusion produced a cyclic schedule; this is a funcgrad bug")
    return order


def _kernel(g, rep, eqns, classes, producer, users, index):
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
                                        out.aval.shape, REDUCTIONS[eqn.prim.name]))
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
