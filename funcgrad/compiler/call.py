"""The `jit` call primitive: one equation that runs a whole sub-program as compiled code.

`jit_p` (printed `jit`) takes the sub-program's inputs and has the params
  jaxpr:   a ClosedJaxpr with no consts (closure conversion: closed-over arrays are
           passed as leading inputs, never baked in as literals),
  name:    the function's name (`f`, `jvp(f)`, `transpose(jvp(f))`, ...),
  donated: one bool per input; all False in a bound equation (buffers are donated only by
           jit's own eager call, in compiler/jit_cache.py),
  backend: "cpu" or "cuda".
Eagerly it compiles the sub-program once (kept by the program cache of jit_cache.py, keyed
on the jaxpr object, backend and donation) and runs it on numpy values. Transforms keep it
a compiled call: jvp binds `jit_p` of the jvp program; transpose partially evaluates that
program into a known part (residuals) and a linear part and binds `jit_p` of each (the
linear one transposed); vmap binds `jit_p` of the batched program. So `grad(jit(f))` runs
compiled forward and backward code.
This module must not import funcgrad.compiler.jit (the user-facing API sits on top).
"""

import importlib.util

import numpy as np

from funcgrad import dtypes, errors
from funcgrad.compiler.jit_cache import programs, reraise
from funcgrad.compiler.jit_cache import stats as _stats
from funcgrad.config import config
from funcgrad.core import (
    Array,
    ClosedJaxpr,
    Eqn,
    Jaxpr,
    Literal,
    Primitive,
    Var,
    eval_jaxpr,
    get_aval,
    to_array,
    trace_to_jaxpr,
)
from funcgrad.core.array import device_provider
from funcgrad.interpreters import ad, batching
from funcgrad.interpreters import partial_eval as pe

KNOWN_BACKENDS = ("cpu", "cuda")
_cfg = config._values
stats = _stats.counts  # ("compile", name) and ("run", name): a view of jit_cache.stats


class BackendUnavailableError(errors.FuncgradError, RuntimeError):
    """A known backend that cannot run on this machine (e.g. "cuda" without CuPy)."""


# --- backends ---------------------------------------------------------------------------------

def check_backend(backend):
    """The canonical backend name for `backend` (None means "cpu"); unknown names raise."""
    if backend is None:
        return "cpu"
    if backend not in KNOWN_BACKENDS:
        raise errors.FuncgradValueError(
            f"jit: unknown backend {backend!r}; known backends are "
            f"{', '.join(repr(b) for b in KNOWN_BACKENDS)}\n{errors.where()}")
    return backend


def cupy_available():
    return importlib.util.find_spec("cupy") is not None


def require_backend(backend):
    """Raise a clear error when `backend` cannot run here."""
    if backend == "cuda" and not cupy_available():
        raise BackendUnavailableError(
            "jit: backend='cuda' needs CuPy, which is not installed.\n"
            "  hint: install it with `pip install funcgrad[cuda13]` (CUDA 13) or "
            "`pip install funcgrad[cuda12]` (CUDA 12), or use backend='cpu'.\n"
            f"{errors.where()}")


# --- compiling and running --------------------------------------------------------------------

def executable(closed, backend, donated, name):
    """The compiled form of `closed` (compiled on first use, then kept by the program cache)."""
    return programs.executable(closed, backend, donated, name, _compile)


def _compile(closed, backend, donated, name):
    require_backend(backend)
    from funcgrad.compiler import pipeline
    outs = {v for v in closed.jaxpr.outvars if type(v) is Var}
    # A donated input that is returned unchanged passes its buffer through as the output.
    donate = tuple(i for i, (d, v) in enumerate(zip(donated, closed.jaxpr.invars))
                   if d and v not in outs)
    # The code is built from a copy of the wrapper: cached code must not refer to the program
    # it is cached for (`jit_cache.ProgramCache`).
    copy = ClosedJaxpr(closed.jaxpr, closed.consts)
    try:
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
        outs = exe(*vals)
    except Exception as e:
        reraise(e, exe, name)
    stats["run", name] += 1
    res = _wrap_all(outs, jaxpr.out_avals)
    if _cfg["debug_nans"]:
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
    bad = [i for i, o in enumerate(outs)
           if dtypes.is_inexact(o.dtype) and np.isnan(o._value).any()]
    if not bad:
        return
    note = f"(jit({name}) produced a NaN; it was re-run op by op to find where)"
    try:
        eval_jaxpr(closed.jaxpr, closed.consts, *args)
    except FloatingPointError as e:
        if "re-run op by op" in str(e):
            raise
        raise FloatingPointError(f"{e}\n  {note}") from None
    raise FloatingPointError(
        f"debug_nans: jit({name}) produced a NaN in output {bad[0]} "
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
jit_p.def_impl(_jit_impl, raw=False)
jit_p.def_abstract_eval(_jit_abstract)


def closure_convert(closed):
    """`(jaxpr, consts)`: the consts of `closed` become its leading inputs."""
    j = closed.jaxpr
    if not j.constvars:
        return closed, []
    return ClosedJaxpr(Jaxpr([], j.constvars + j.invars, j.outvars, j.eqns), []), closed.consts


def call_jaxpr(closed, consts, args, name, backend):
    """Bind `jit_p` of `closed` (no consts) on `consts + args` in the current trace; a program
    without equations only forwards its inputs and is not compiled."""
    args = list(consts) + list(args)
    if not closed.jaxpr.eqns:
        env = dict(zip(closed.jaxpr.invars, args))
        return [Array(np.asarray(v.val, v.aval.dtype), v.aval.weak_type)
                if type(v) is Literal else env[v] for v in closed.jaxpr.outvars]
    return jit_p.bind(*args, jaxpr=closed, name=name, donated=(False,) * len(args),
                      backend=backend)


def _derive(closed, key, make):
    """Programs derived from `closed` (jvp, transpose, batched), built once per `key`."""
    return programs.get(closed, key, make)


# --- jvp --------------------------------------------------------------------------------------

def _jvp_program(closed, nonzeros):
    """(primals..., nonzero tangents...) -> nonzero tangent outs; the primal outputs are
    computed by the primal call already, so the program has only tangent outputs."""
    n = len(closed.in_avals)
    out_nonzero = []

    def fun(*args):
        it = iter(args[n:])
        ts = [next(it) if nz else ad.Zero(a) for nz, a in zip(nonzeros, closed.in_avals)]
        _, t_outs = ad.jvp_eval(closed.jaxpr, closed.consts, list(args[:n]), ts)
        out_nonzero[:] = [type(t) is not ad.Zero for t in t_outs]
        return [t for t in t_outs if type(t) is not ad.Zero]
    avals = list(closed.in_avals) + [ad.tangent_aval(a)
                                     for a, nz in zip(closed.in_avals, nonzeros) if nz]
    traced = trace_to_jaxpr(fun, avals, "jvp")
    jaxpr, _ = pe.dce_jaxpr(traced.jaxpr, [True] * len(traced.jaxpr.outvars), drop_effects=True)
    program, consts = closure_convert(ClosedJaxpr(jaxpr, traced.consts))
    return program, consts, out_nonzero


def _jit_jvp(primals, outs, tangents, *, jaxpr, name, donated, backend):
    nonzeros = tuple(type(t) is not ad.Zero for t in tangents)
    program, consts, out_nz = _derive(jaxpr, ("jvp", nonzeros),
                                      lambda: _jvp_program(jaxpr, nonzeros))
    nz_tangents = [t for t in tangents if type(t) is not ad.Zero]
    t_outs = iter(call_jaxpr(program, consts, list(primals) + nz_tangents, f"jvp({name})",
                             backend) if any(out_nz) else [])
    return [next(t_outs) if nz else ad.Zero(a) for nz, a in zip(out_nz, jaxpr.out_avals)]


# --- transpose --------------------------------------------------------------------------------

class _TransposePlan:
    """How to transpose a call with some undefined (linear) inputs: a known program for the
    residuals and the transposed linear program, both built once and compiled once."""

    def __init__(self, closed, undefined, ct_nonzero):
        known, unknown, out_unknowns, num_res = pe.partial_eval_jaxpr(closed, undefined, False)
        n_known_outs = len(known.jaxpr.outvars) - num_res
        # Cotangents of known outputs cannot reach linear inputs: only residuals are needed.
        kj, self.known_used = pe.dce_jaxpr(known.jaxpr, [False] * n_known_outs + [True] * num_res,
                                           prune_inputs=True, drop_effects=True)
        self.res_from_input = [kj.invars.index(r) if r in kj.invars else None for r in kj.outvars]
        computed = [r for r, i in zip(kj.outvars, self.res_from_input) if i is None]
        kj, _ = pe.dce_jaxpr(Jaxpr(kj.constvars, kj.invars, computed, kj.eqns),
                             [True] * len(computed))
        self.known, self.known_consts = closure_convert(ClosedJaxpr(kj, known.consts))
        self.ct_used = [u and nz for u, nz in zip(out_unknowns, ct_nonzero)]
        lin, _ = pe.dce_jaxpr(unknown.jaxpr, [nz for u, nz in zip(out_unknowns, ct_nonzero) if u])
        mask = [False] * num_res + [True] * sum(undefined)
        transposed = ad.transpose_jaxpr(ClosedJaxpr(lin, []), mask)
        self.transposed, self.t_consts = closure_convert(transposed)

    def residuals(self, known_args, name, backend):
        ins = [a for a, u in zip(known_args, self.known_used) if u]
        computed = iter(call_jaxpr(self.known, self.known_consts, ins, f"residuals({name})",
                                   backend))
        return [next(computed) if i is None else ins[i] for i in self.res_from_input]


def _jit_transpose(cts, *args, jaxpr, name, donated, backend):
    undefined = tuple(ad.is_undefined(a) for a in args)
    ct_nonzero = tuple(type(c) is not ad.Zero for c in cts)
    plan = _derive(jaxpr, ("transpose", undefined, ct_nonzero),
                   lambda: _TransposePlan(jaxpr, list(undefined), ct_nonzero))
    if not any(plan.ct_used):
        return [ad.Zero(a.aval) if u else None for a, u in zip(args, undefined)]
    res = plan.residuals([a for a, u in zip(args, undefined) if not u], name, backend)
    used_cts = [c for c, used in zip(cts, plan.ct_used) if used]
    ct_ins = iter(call_jaxpr(plan.transposed, plan.t_consts, res + used_cts,
                             f"transpose({name})", backend))
    return [next(ct_ins) if u else None for u in undefined]


# --- vmap -------------------------------------------------------------------------------------

def _batched_program(closed, dims, size):
    out_dims = []

    def fun(*args):
        outs, o_dims = batching.batch_eval(closed.jaxpr, closed.consts, args, dims)
        out_dims[:] = [batching.not_mapped if d is batching.not_mapped else 0 for d in o_dims]
        return [o if d is batching.not_mapped else batching.moveaxis(o, d, 0)
                for o, d in zip(outs, o_dims)]
    avals = [a if d is batching.not_mapped
             else a.update(shape=a.shape[:d] + (size,) + a.shape[d:])
             for a, d in zip(closed.in_avals, dims)]
    program, consts = closure_convert(trace_to_jaxpr(fun, avals, "vmap"))
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

__all__ = ["BackendUnavailableError", "KNOWN_BACKENDS", "call_jaxpr", "check_backend",
           "closure_convert", "executable", "jit_p", "require_backend", "stats"]
