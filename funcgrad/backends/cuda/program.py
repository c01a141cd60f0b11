"""Host glue: a fused `Program` becomes a `CudaExecutable` for `jit(..., backend="cuda")`.

At compile time every kernel is planned for the current device (`plan.py`), rendered
(`renderer.py`), compiled to a cubin and loaded (`runtime.py`); everything else becomes a
library call. A kernel the renderer cannot print (complex numbers, say) runs its equations
one by one as library calls instead, never on the CPU behind the user's back. Rendering
needs no GPU: where none can run (no CuPy, no device), a program is planned for
`DEFAULT_DEVICE` and rendered, so `as_text()` shows its CUDA source and `memory_analysis()`
its memory, and only a call raises `BackendUnavailableError` (saying why).

At run time the executable walks its steps in order: host inputs are copied to the device
once per call (keep arrays on the device with `device_put`), kernels write into fresh
buffers from CuPy's pool, and each value is dropped after its last use, so the pool reuses
its memory for later steps. Nothing synchronizes: results are device arrays on the current
stream (`block_until_ready` waits for them).
"""

import itertools
import math

import numpy as np

from funcgrad import errors
from funcgrad.backends.cuda import ops, renderer
from funcgrad.backends.cuda.plan import H200, plan_kernel
from funcgrad.backends.cuda.runtime import call_primitive
from funcgrad.compiler import escape, memory
from funcgrad.compiler.fusion import KernelNode
from funcgrad.core import Jaxpr, Literal, pp_jaxpr

_program_ids = itertools.count(1)
_runtime = [None]
DEFAULT_DEVICE = H200  # what a program is planned for where no GPU can run it


def runtime_problem():
    """Why no CUDA program can run here (a sentence with the fix), or None."""
    if _runtime[0] is not None:
        return None
    from funcgrad.devices import cuda_provider
    return cuda_provider().problem()


def get_runtime():
    """The runtime programs compile for: CuPy on the current GPU (or a test's emulation).

    Raises:
        BackendUnavailableError: no GPU can run here (says why).
    """
    if _runtime[0] is None:
        problem = runtime_problem()
        if problem:
            raise errors.BackendUnavailableError(_unavailable(problem))
        from funcgrad.backends.cuda.runtime import CupyRuntime
        _runtime[0] = CupyRuntime()
    return _runtime[0]


def _unavailable(problem):
    return (f"jit(backend='cuda') cannot run here: {problem}.\n  hint: jit(..., "
            "backend='cpu') runs on the CPU; jit(f, backend='cuda').lower(...).compile()"
            f".as_text() shows the CUDA source without a GPU.\n{errors.where()}")


def set_runtime(runtime):
    """Compile later programs for `runtime` (None: CuPy again); returns the previous one."""
    old, _runtime[0] = _runtime[0], runtime
    return old


def eqns_text(eqns):
    """Equations in the IR's printed form (for messages and the generated text)."""
    if not eqns:
        return ""
    defined = {v for e in eqns for v in e.outvars}
    ins = list(dict.fromkeys(a for e in eqns for a in e.invars
                             if type(a) is not Literal and a not in defined))
    return pp_jaxpr(Jaxpr([], ins, [v for e in eqns for v in e.outvars], list(eqns)))


class _Kernel:
    def __init__(self, node, plan, handle):
        self.node, self.plan, self.handle = node, plan, handle


def compile_program(program, donate_argnums=(), ir=None, compile_subprogram=None):
    """Compile `program` (a fusion `Program`) for the current GPU (rendered for
    `DEFAULT_DEVICE` where no GPU can run it); returns a `CudaExecutable`. `donate_argnums`
    is accepted and ignored (CuPy's pool reuses memory), and so is `compile_subprogram`:
    higher-order primitives run through their own eager implementation on device arrays."""
    problem = runtime_problem()
    rt = None if problem else get_runtime()
    device = rt.device_info() if rt is not None else DEFAULT_DEVICE
    steps, plans, contexts = [], [], []
    for node in program.nodes:
        if isinstance(node, KernelNode):
            try:
                plan = plan_kernel(node.spec, device)
                renderer.render(plan)
            except ops.Unsupported as e:
                steps.append(("interpret", node, str(e)))
                continue
            plans.append(plan)
            contexts.append(eqns_text(node.eqns + [e for e in node.out_eqns
                                                   if e not in node.eqns]))
            steps.append(("kernel", node, plan))
        else:
            steps.append(("call", node.eqn, None))
    handles = iter(rt.prepare(plans, contexts) if rt is not None else
                   [(plan, None) for plan in plans])
    steps = [(kind, node, next(handles)) if kind == "kernel" else (kind, node, extra)
             for kind, node, extra in steps]
    consts = [np.asarray(getattr(c, "_value", c)) for c in program.consts]
    consts = [rt.to_device(c) for c in consts] if rt is not None else consts
    return CudaExecutable(program, rt, steps, consts, ir, problem)


class CudaExecutable:
    """A compiled GPU program: `exe(*arrays) -> list of device arrays`. Without a runtime
    (`problem` says why) it is only rendered: a call raises `BackendUnavailableError`."""

    def __init__(self, program, runtime, steps, consts, ir, problem=None):
        self.program, self.rt, self.steps, self.consts, self._ir = (
            program, runtime, steps, consts, ir)
        self.problem = problem
        self.id = next(_program_ids)
        j = program.jaxpr
        self._uses = [self._step_uses(s) for s in steps]
        last = {}
        for i, uses in enumerate(self._uses):
            for v in uses:
                last[v] = i
        outs = {v for v in j.outvars if type(v) is not Literal}
        self._drop = [[v for v in uses if last[v] == i and v not in outs]
                      for i, uses in enumerate(self._uses)]

    @staticmethod
    def _step_uses(step):
        kind, node, _ = step
        atoms = node.invars if kind == "call" else node.inputs
        return list(dict.fromkeys(a for a in atoms if type(a) is not Literal))

    def __call__(self, *args):
        return self._run(args)

    def instrumented(self, recorder):
        """The profiling hook (`funcgrad.profiler`): the program reporting each kernel and
        library call to `recorder`, timed by `profile_clock()`."""
        from funcgrad.profiler import site_of
        sites = [site_of(node, f"cuda_program_{self.id}") for node in self.program.nodes]
        return lambda *args: self._run(args, recorder, sites)

    def profile_clock(self):
        """CUDA events on a GPU; None (the host clock) on a runtime without them."""
        from funcgrad.profiler import EventClock
        cuda = getattr(getattr(self.rt, "xp", None), "cuda", None)
        return EventClock(self.rt.xp) if hasattr(cuda, "Event") else None

    def _run(self, args, recorder=None, sites=None):
        if self.rt is None:
            raise errors.BackendUnavailableError(_unavailable(self.problem))
        rt, xp, j = self.rt, self.rt.xp, self.program.jaxpr
        env = dict(zip(j.constvars, self.consts))
        for v, a in zip(j.invars, args):
            env[v] = a if isinstance(a, xp.ndarray) else rt.to_device(np.asarray(a))
        for k, (step, drop) in enumerate(zip(self.steps, self._drop)):
            t0 = recorder.clock() if recorder is not None else None
            kind, node, extra = step
            if kind == "kernel":
                self._kernel(node, extra, env)
            elif kind == "call":
                vals = [_read(xp, env, a) for a in node.invars]
                for v, o in zip(node.outvars, call_primitive(xp, node, vals, rt.fallback)):
                    env[v] = o
            else:
                self._interpret(node, env)
            if recorder is not None:
                recorder.record(sites[k], t0)
            for v in drop:
                del env[v]
        return [_read(xp, env, v) for v in j.outvars]

    def _kernel(self, node, handle, env):
        rt, xp = self.rt, self.rt.xp
        plan = handle[0]
        ins = []
        for v, op in zip(node.inputs, plan.inputs):
            x = xp.ascontiguousarray(env[v])
            if op.vec and not rt.aligned(x):
                x = x.copy()
            ins.append(x)
        outs = [rt.empty(o.shape, o.dtype) for o in plan.spec.outputs]
        rt.launch(handle, ins, outs)
        for v, o in zip(node.outputs, outs):
            env[v] = o

    def _interpret(self, node, env):
        """An unsupported kernel, instruction by instruction, as library calls."""
        xp, spec = self.rt.xp, node.spec
        S = tuple(spec.iter_shape)
        vals = {}
        for inp, v in zip(spec.inputs, node.inputs):
            vals[inp.name] = _view(xp, env[v], inp, S)
        for instr, eqn in zip(spec.body, node.eqns):
            args = [vals[a] if isinstance(a, str) else xp.asarray(a.value, a.dtype)
                    for a in instr.args]
            vals[instr.dst] = call_primitive(xp, _Eqn(eqn, args), args, self.rt.fallback)[0]
        for o, var, eqn in zip(spec.outputs, node.outputs, node.out_eqns):
            if o.reduce is None:
                env[var] = vals[o.value]
            else:
                x = xp.broadcast_to(vals[o.value], S)
                env[var] = call_primitive(xp, eqn, [x], self.rt.fallback)[0]

    # --- inspection ----------------------------------------------------------------------------

    def as_text(self):
        """The program's steps and the CUDA source of each kernel."""
        j = self.program.jaxpr
        lines = [f"// funcgrad CUDA program {self.id}: {len(j.invars)} inputs, "
                 f"{len(j.outvars)} outputs"]
        if self.rt is None:
            d = DEFAULT_DEVICE
            lines.append(f"// planned for sm_{d.arch} with {d.sm_count} SMs: no GPU can run it "
                         "here")
        sources = []
        for k, (kind, node, extra) in enumerate(self.steps):
            if kind == "kernel":
                plan = extra[0]
                lines.append(f"// step {k}: kernel {plan.name} ({plan.strategy}"
                             f"{f', {plan.splits} splits' if plan.splits > 1 else ''}, "
                             f"{plan.index}, vec {plan.vec}) over {list(node.spec.iter_shape)}")
                sources.append(renderer.render(plan))
            elif kind == "call":
                lines.append(f"// step {k}: library call {escape.comment(node.prim.name)}")
            else:
                lines.append(f"// step {k}: kernel {escape.identifier(node.spec.name)} as library "
                             f"calls ({escape.comment(extra)})")
        return "\n".join(lines) + "\n\n" + "\n".join(sources)

    def ir_text(self):
        return str(self._ir)

    def memory_analysis(self):
        """Bytes of arguments, results and the most temporaries alive at once."""
        j = self.program.jaxpr
        nbytes = lambda v: math.prod(v.aval.shape) * v.aval.dtype.itemsize
        args = sum(nbytes(v) for v in list(j.invars) + list(j.constvars))
        outs = {v for v in j.outvars if type(v) is not Literal}
        live = temp = 0
        for (kind, node, _), drop in zip(self.steps, self._drop):
            defs = node.outvars if kind == "call" else node.outputs
            live += sum(nbytes(v) for v in defs if v not in outs)
            temp = max(temp, live)
            live -= sum(nbytes(v) for v in drop if v not in j.invars and v not in j.constvars)
        out_bytes = sum(nbytes(v) for v in outs)
        return memory.MemoryAnalysis(args, out_bytes, temp, args + temp + out_bytes)


class _Eqn:
    """An equation's primitive and params applied to already materialized operands."""

    def __init__(self, eqn, args):
        self.prim, self.params, self.outvars = eqn.prim, eqn.params, eqn.outvars
        self.invars = args


def _read(xp, env, atom):
    if type(atom) is Literal:
        return xp.asarray(np.asarray(atom.val, atom.aval.dtype))
    return env[atom]


def _view(xp, x, inp, S):
    """Kernel input `inp` (array `x`) as an array of the iteration shape `S`."""
    mapped = [(ax, size) for ax, size in zip(inp.axes, inp.shape) if ax >= 0]
    x = x.reshape(tuple(size for _, size in mapped))
    order = [ax for ax, _ in mapped]
    perm = sorted(range(len(order)), key=lambda i: order[i])
    x = xp.transpose(x, perm)
    shape = [1] * len(S)
    for ax, size in mapped:
        shape[ax] = size
    return xp.broadcast_to(x.reshape(shape), S)
