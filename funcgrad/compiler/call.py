"""The `jit` call primitive: one equation that runs a whole sub-program as compiled code.

`jit_p` (printed `jit`) takes the sub-program's inputs and has the params
  jaxpr:   a ClosedJaxpr with no consts (closure conversion: closed-over arrays are
           passed as leading inputs, never baked in as literals),
  name:    the function's name (`f`, `jvp(f)`, `transpose(jvp(f))`, ...),
  donated: one bool per input; all False in a bound equation (buffers are donated only by
           jit's own eager call, in compiler/jit_cache.py),
  backend: a registered backend's name ("cpu", "numpy", "cuda", ...).
Eagerly it compiles the sub-program once (kept by the program cache of jit_cache.py, keyed
on the jaxpr object, backend and donation) and runs it on numpy values. Transforms keep it
a compiled call, with the interpreters' sub-program transforms: jvp binds `jit_p` of the
jvp program (`ad.jvp_jaxpr`); transpose partially evaluates that program into a known part
(residuals) and a linear part and binds `jit_p` of each, the linear one transposed
(`ad.MixedTranspose`); vmap binds `jit_p` of the batched program (`batching.batch_jaxpr`).
So `grad(jit(f))` runs compiled forward and backward code, and the forward once: bound
under linearize, the call runs the known half of its jvp program (value and residuals in one
compiled call, `_OnePass`) and its jvp rule binds only the linear half.
This module must not import funcgrad.compiler.jit (the user-facing API sits on top).
"""

import contextlib
import gc
import threading

import numpy as np

from funcgrad import backends, dtypes, errors
from funcgrad.compiler.jit_cache import log, programs, reraise, run
from funcgrad.compiler.jit_cache import stats as _stats
from funcgrad.config import config
from funcgrad.core import (
    Array,
    ClosedJaxpr,
    Eqn,
    Jaxpr,
    Literal,
    Primitive,
    Tracer,
    Var,
    current_trace,
    eval_jaxpr,
    get_aval,
    set_trace,
    to_array,
)
from funcgrad.core.array import device_provider
from funcgrad.core.trace import NONFINITE, nonfinite
from funcgrad.interpreters import ad, batching
from funcgrad.interpreters import partial_eval as pe

_cfg = config._values
stats = _stats.counts  # ("compile", name) and ("run", name): a view of jit_cache.stats


BackendUnavailableError = errors.BackendUnavailableError  # re-exported: its old home


# --- backends ---------------------------------------------------------------------------------

def check_backend(backend):
    """The canonical backend name for `backend` (None means "cpu"); names not registered in
    `funcgrad.backends` (`register_backend`) raise."""
    if backend is None:
        return "cpu"
    if backend not in backends.names():
        raise errors.FuncgradValueError(
            f"jit: unknown backend {backend!r}; known backends are "
            f"{', '.join(repr(b) for b in backends.names())} (add one with "
            f"funcgrad.backends.register_backend)\n{errors.where()}")
    return backend


# --- compiling and running --------------------------------------------------------------------

_gc_lock = threading.Lock()
_gc_pause = {"depth": 0, "was_enabled": False}


@contextlib.contextmanager
def gc_paused():
    """No cyclic garbage collection inside the block (tracing and compiling allocate
    thousands of small objects, and the collector's passes over them cost ~10% of a large
    program's first call); nested and threaded blocks restore the state the outermost found.

    Example:
        >>> with gc_paused():
        ...     gc.isenabled()
        False
    """
    with _gc_lock:
        if _gc_pause["depth"] == 0:
            _gc_pause["was_enabled"] = gc.isenabled()
            gc.disable()
        _gc_pause["depth"] += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pause["depth"] -= 1
            if _gc_pause["depth"] == 0 and _gc_pause["was_enabled"]:
                gc.enable()


def executable(closed, backend, donated, name):
    """The compiled form of `closed` (compiled on first use, then kept by the program cache)."""
    return programs.executable(closed, backend, donated, name, _compile)


def _compile(closed, backend, donated, name):
    from funcgrad.compiler import pipeline
    outs = {v for v in closed.jaxpr.outvars if type(v) is Var}
    # A donated input that is returned unchanged passes its buffer through as the output.
    donate = tuple(i for i, (d, v) in enumerate(zip(donated, closed.jaxpr.invars))
                   if d and v not in outs)
    # The code is built from a copy of the wrapper: cached code must not refer to the program
    # it is cached for (`jit_cache.ProgramCache`).
    copy = ClosedJaxpr(closed.jaxpr, closed.consts)
    if _cfg["log_compiles"]:
        log(f"Compiling jit({name}) for {backend} with inputs "
            f"{', '.join(a.str_short() for a in closed.in_avals) or '()'}")
    try:
        with gc_paused():
            return pipeline.compile_jaxpr(copy, backend=backend, donate_argnums=donate)
    except errors.FuncgradError:
        raise
    except Exception as e:
        raise errors.FuncgradInternalError(
            f"jit({name}): compiling the program failed ({type(e).__name__}: {e}); this is a "
            f"funcgrad bug, please report it.\n  program:\n{closed}\n{errors.where()}\n"
            "  hint: config.update('disable_jit', True) runs the function op by op.") from e


def _jit_impl(*args, jaxpr, name, donated, backend):
    if _cfg["disable_jit"]:
        return _wrap_all(eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *args), jaxpr.out_avals)
    vals = [a._value if type(a) is Array else to_array(a)._value for a in args]
    # A bound equation never overwrites its operands: jit's own eager call donates buffers.
    exe = executable(jaxpr, backend, (False,) * len(args), name)
    try:
        outs = run(exe, vals, name)
    except Exception as e:
        reraise(e, exe, name)
    stats["run", name] += 1
    res = _wrap_all(outs, jaxpr.out_avals)
    if _cfg["debug_nans"] or _cfg["debug_infs"]:
        _check_nans(jaxpr, args, res, name)
    return res


def _wrap_all(outs, avals):
    res = []
    for o, a in zip(outs, avals):
        if type(o) is not Array:  # numpy arrays, or device arrays of the IR's dtype
            ok = (type(o) is np.ndarray or device_provider(o) is not None) and o.dtype == a.dtype
            o = Array(o if ok else np.asarray(o, a.dtype), a.weak_type)
        res.append(o)
    return res


def _check_nans(closed, args, outs, name):
    found = [(i, nonfinite(o._value)) for i, o in enumerate(outs) if dtypes.is_inexact(o.dtype)]
    bad = [i for i, what in found if what]
    if not bad:
        return
    what = dict(found)[bad[0]]
    note = f"(jit({name}) produced {NONFINITE[what]}; it was re-run op by op to find where)"
    try:
        eval_jaxpr(closed.jaxpr, closed.consts, *args)
    except FloatingPointError as e:
        if "re-run op by op" in str(e):
            raise
        raise FloatingPointError(f"{e}\n  {note}") from None
    raise FloatingPointError(
        f"debug_{what}s: jit({name}) produced {NONFINITE[what]} in output {bad[0]} "
        f"({closed.out_avals[bad[0]]}), but re-running it op by op did not; the difference "
        f"comes from compiled arithmetic (fusion, reassociation).\n{errors.where()}")


# --- the primitive ----------------------------------------------------------------------------

def _jit_abstract(*avals, jaxpr, name, donated, backend):
    want = jaxpr.in_avals
    if len(avals) != len(want) or any(a.shape != w.shape or a.dtype != w.dtype
                                      for a, w in zip(avals, want)):
        raise errors.FuncgradInternalError(
            f"jit({name}): called with {list(avals)}, but its program takes {want}")
    return list(jaxpr.out_avals)


jit_p = Primitive("jit", multiple_results=True)
jit_p.calls_body = True
jit_p.def_impl(_jit_impl, raw=False)
jit_p.def_abstract_eval(_jit_abstract)


def call_jaxpr(closed, consts, args, name, backend):
    """Bind `jit_p` of `closed` (no consts) on `consts + args` in the current trace; a program
    without equations only forwards its inputs and is not compiled."""
    args = list(consts) + list(args)
    if not closed.jaxpr.eqns:
        env = dict(zip(closed.jaxpr.invars, args))
        return [Array(np.asarray(v.val, v.aval.dtype), v.aval.weak_type)
                if type(v) is Literal else env[v] for v in closed.jaxpr.outvars]
    return bind(args, dict(jaxpr=closed, name=name, donated=(False,) * len(args),
                           backend=backend))


def bind(args, params):
    """Bind `jit_p` on `args`. In linearize's define-by-run trace (grad, vjp of a jitted
    function) the call runs once, as the known half of its jvp: the value and the residuals
    of the linear half come from one compiled call (`_OnePass`), so a loop in it runs once."""
    trace = current_trace()
    if ad.linearizing(trace):
        outs = _OnePass.run(trace, args, params)
        if outs is not None:
            return outs
    return jit_p.bind(*args, **params)


def _derive(closed, key, make):
    """Programs derived from `closed` (jvp, transpose, batched), built once per `key`."""
    return programs.get(closed, key, make)


# --- jvp --------------------------------------------------------------------------------------

def _jvp_program(closed, nonzeros):
    """(primals..., nonzero tangents...) -> nonzero tangent outs; the primal outputs are
    computed by the primal call already, so the program has only tangent outputs."""
    jvp, out_nonzero = ad.jvp_jaxpr(closed, nonzeros, instantiate=False)
    used = [False] * len(closed.out_avals) + [True] * sum(out_nonzero)
    jaxpr, _ = pe.dce_jaxpr(jvp.jaxpr, used, drop_effects=True)
    program, consts = pe.closure_convert(ClosedJaxpr(jaxpr, jvp.consts))
    return program, consts, out_nonzero


def _jit_jvp(primals, outs, tangents, *, jaxpr, name, donated, backend):
    nonzeros = tuple(type(t) is not ad.Zero for t in tangents)
    one_pass = ad.take_residuals(outs[0]) if outs else None
    if one_pass is not None and one_pass.covers(nonzeros):
        return one_pass.tangents(tangents, name, backend)
    program, consts, out_nz = _derive(jaxpr, ("jvp", nonzeros),
                                      lambda: _jvp_program(jaxpr, nonzeros))
    nz_tangents = [t for t in tangents if type(t) is not ad.Zero]
    t_outs = iter(call_jaxpr(program, consts, list(primals) + nz_tangents, f"jvp({name})",
                             backend) if any(out_nz) else [])
    return [next(t_outs) if nz else ad.Zero(a) for nz, a in zip(out_nz, jaxpr.out_avals)]


class _OnePass:
    """A jit call under linearize, run once. Its jvp program, partially evaluated with the
    primals known and the tangents not, gives a known program (primal outputs, then the
    residuals) run now as one compiled call, and a linear program (residuals, tangents ->
    tangent outputs) that `tangents` binds when linearize asks for the jvp; the transpose
    of that call is then the linear program's alone (as JAX's partial eval of `pjit`)."""

    def __init__(self, closed, nz):
        self.nz, n_out = nz, len(closed.out_avals)
        jvp, self.out_nz = ad.jvp_jaxpr(closed, list(nz), instantiate=False)
        unknowns = [False] * len(nz) + [True] * sum(nz)
        known, linear, out_u, num_res = pe.partial_eval_jaxpr(jvp, unknowns, False)
        self.known = None
        if any(out_u[:n_out]) or not all(out_u[n_out:]):
            return  # a primal output needs a tangent, or a tangent output none: plain rule
        kj = known.jaxpr
        self.res_from_input = [kj.invars.index(r) if r in kj.invars else None
                               for r in kj.outvars[n_out:]]
        computed = [r for r, i in zip(kj.outvars[n_out:], self.res_from_input) if i is None]
        kj, _ = pe.dce_jaxpr(Jaxpr(kj.constvars, kj.invars, kj.outvars[:n_out] + computed,
                                   kj.eqns), [True] * (n_out + len(computed)))
        self.known, self.known_consts = pe.closure_convert(ClosedJaxpr(kj, known.consts))
        self.linear, self.linear_consts = pe.closure_convert(linear)

    @classmethod
    def run(cls, b, args, params):
        """The call's outputs in the define-by-run trace `b`, or None (then bind it plainly)."""
        closed = params["jaxpr"]
        if not closed.out_avals:
            return None
        mine = [isinstance(a, Tracer) and a._trace is b for a in args]
        vals = [a.val if m else a for a, m in zip(args, mine)]
        nz = tuple(m and ad.differentiable(get_aval(a)) for a, m in zip(args, mine))
        if not any(nz) or any(v is None for v in vals):
            return None
        plan = _derive(closed, ("one pass", nz), lambda: cls(closed, nz))
        if plan.known is None:
            return None
        with set_trace(b.parent):  # one level up, as the plain call would have run
            outs = call_jaxpr(plan.known, plan.known_consts, vals, params["name"],
                              params["backend"])
        n_out = len(closed.out_avals)
        computed = iter(outs[n_out:])
        kept = _Kept(plan, [next(computed) if i is None else vals[i]
                            for i in plan.res_from_input])
        tracers = ad.record_known(b, jit_p, args, params, outs[:n_out])
        ad.keep_residuals(b, outs[0], kept)
        return tracers


class _Kept:
    """A `_OnePass` plan with the residuals of one run, for the jvp rule."""

    def __init__(self, plan, residuals):
        self.plan, self.residuals = plan, residuals

    def covers(self, nonzeros):
        return all(n <= m for n, m in zip(nonzeros, self.plan.nz))

    def tangents(self, tangents, name, backend):
        plan = self.plan
        ts = [ad.instantiate(t) for t, m in zip(tangents, plan.nz) if m]
        t_outs = iter(call_jaxpr(plan.linear, plan.linear_consts, self.residuals + ts,
                                 f"jvp({name})", backend))
        avals = plan.known.out_avals[:len(plan.out_nz)]
        return [next(t_outs) if nz else ad.Zero(a) for nz, a in zip(plan.out_nz, avals)]


# --- transpose --------------------------------------------------------------------------------

def _jit_transpose(cts, *args, jaxpr, name, donated, backend):
    """The known part (residuals) and the transposed linear part run as two compiled calls."""
    undefined = tuple(ad.is_undefined(a) for a in args)
    ct_nonzero = tuple(type(c) is not ad.Zero for c in cts)
    plan = _derive(jaxpr, ("transpose", undefined, ct_nonzero),
                   lambda: ad.MixedTranspose(jaxpr, list(undefined), ct_nonzero))

    def run(program, consts, operands, part):
        return call_jaxpr(program, consts, operands, f"{part}({name})", backend)
    ct_ins = iter(plan.apply(args, cts, run))
    return [next(ct_ins) if u else None for u in undefined]


# --- vmap -------------------------------------------------------------------------------------

def _batched_program(closed, dims, size):
    batched, out_dims = batching.batch_jaxpr(closed, dims, size)
    program, consts = pe.closure_convert(batched)
    return program, consts, out_dims


def _jit_batch(args, dims, *, jaxpr, name, donated, backend):
    size = next(get_aval(x).shape[d] for x, d in zip(args, dims) if d is not batching.not_mapped)
    dims = tuple(dims)
    program, consts, out_dims = _derive(jaxpr, ("vmap", dims, size, batching.current_axis()),
                                        lambda: _batched_program(jaxpr, dims, size))
    return call_jaxpr(program, consts, args, f"vmap({name})", backend), list(out_dims)


# --- partial evaluation of a call ---------------------------------------------------------------

def _jit_partial_eval(eqn, in_unknowns):
    """Split a call into a known call (known outputs + residuals) and an unknown call.

    A part without outputs is dropped, effects included: partial evaluation serves
    differentiation, whose forward pass has already run the effects."""
    p = eqn.params
    known, unknown, out_unknowns, num_res = pe.partial_eval_jaxpr(p["jaxpr"], in_unknowns, False)
    res = [Var(a) for a in unknown.in_avals[:num_res]]
    known_ins = [x for x, u in zip(eqn.invars, in_unknowns) if not u]
    known_outs = [v for v, u in zip(eqn.outvars, out_unknowns) if not u] + res
    unknown_ins = res + [x for x, u in zip(eqn.invars, in_unknowns) if u]
    unknown_outs = [v for v, u in zip(eqn.outvars, out_unknowns) if u]

    def call(program, ins, outs):
        params = dict(p, jaxpr=program, donated=(False,) * len(ins))
        return Eqn(jit_p, ins, outs, params, eqn.source) if outs else None
    return (call(known, known_ins, known_outs),
            call(unknown, unknown_ins, unknown_outs), out_unknowns)


ad.jvp_rules[jit_p] = _jit_jvp
ad.transpose_rules[jit_p] = _jit_transpose
batching.batch_rules[jit_p] = _jit_batch
pe.partial_eval_rules[jit_p] = _jit_partial_eval

__all__ = ["BackendUnavailableError", "call_jaxpr", "check_backend",
           "executable", "jit_p", "stats"]
