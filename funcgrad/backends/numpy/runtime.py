"""What a compiled numpy program needs at run time: the `Executable`, library calls bound
into the generated function, ownership checks for donated buffers, error reports that point
at the generated line and the IR equation, and the optional per-statement profiler.
"""

import linecache
import time
import traceback
import weakref

import numpy as np

from funcgrad import errors
from funcgrad.core import Array, Jaxpr, Literal, pp_jaxpr, set_trace, widened


def compensated_add(total, comp, part):
    """`total += part` in place, its rounding error added to `comp` (Neumaier's compensated
    summation; the sum is `total + comp`): a chunked loop's float64 partial sums add up with
    an error that does not grow with the number of chunks."""
    with np.errstate(invalid="ignore", over="ignore"):
        t = total + part
        err = np.where(np.abs(total) >= np.abs(part), (total - t) + part, (part - t) + total)
        comp += np.where(np.isfinite(t), err, 0.0)
    total[...] = t


class LibCall:
    """A primitive's eager implementation with its params bound, called by generated code.

    Results are cast to the IR's dtypes, as eager `bind` does, and bfloat16 & co. are
    computed wide (`core.widened`) as there. Higher-order primitives (whose implementation
    takes and returns Arrays) run with no current trace.
    """

    def __init__(self, prim, params, out_avals):
        self.prim, self.params = prim, params
        self.dtypes = [a.dtype for a in out_avals]
        self.__name__ = prim.name

    def __call__(self, *args):
        if self.prim.raw_impl:
            out = self.prim.impl_rule(*widened(self.prim, args), **self.params)
        else:
            with set_trace(None):
                out = self.prim.impl_rule(*[Array(np.asarray(a)) for a in args], **self.params)
            out = [o._value for o in out] if self.prim.multiple_results else out._value
        if self.prim.multiple_results:
            return [np.asarray(o, dt) for o, dt in zip(out, self.dtypes)]
        return np.asarray(out, self.dtypes[0])


def own(args, which):
    """The arguments `args[i]` for `i` in `which` (donated), each as is when the program may
    overwrite it (a writeable, contiguous array owning its memory, which no other argument
    is or views), else as a copy."""
    refs = {}
    for a in args:
        for r in (a, getattr(a, "base", None)):
            if r is not None:
                refs[id(r)] = refs.get(id(r), 0) + 1
    out = []
    for i in which:
        x = args[i]
        ok = (type(x) is np.ndarray and x.base is None and x.flags.writeable
              and x.flags.c_contiguous and refs[id(x)] == 1)
        out.append(x if ok else np.array(x, copy=True))
    return out


class Workspace:
    """The temporary buffers of one compiled program, allocated on first use and reused by
    later calls (large fresh arrays cost page faults on every call). A call takes a set and
    gives it back when it returns, so concurrent or re-entrant calls get their own set; at
    most two spare sets are kept."""

    def __init__(self, specs):
        self.specs = specs  # (shape, dtype) per buffer
        self.free = []

    def take(self):
        try:
            return self.free.pop()
        except IndexError:
            return [np.empty(shape, dt) for shape, dt in self.specs]

    def give(self, buffers):
        if len(self.free) < 2:
            self.free.append(buffers)

    @property
    def nbytes(self):
        return sum(int(np.prod(s)) * np.dtype(d).itemsize for s, d in self.specs)


def unalias(x, *roots):
    """`x`, or a copy of it when it may share memory with one of `roots` (arguments the
    caller keeps, consts), so that results never alias them."""
    if any(np.may_share_memory(x, r) for r in roots):
        return np.array(x, copy=True)
    return x


def readonly(value):
    """A read-only view of a bound constant, so no program ever writes into it."""
    v = np.asarray(value).view()
    v.flags.writeable = False
    return v


def register_source(filename, source):
    """Make `source` visible to tracebacks and `inspect` under `filename`; the `Executable`
    that runs it drops it again when it is freed (`drop_sources`)."""
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)


def drop_sources(filenames):
    """Forget generated sources registered with `register_source`."""
    for name in filenames:
        linecache.cache.pop(name, None)


class Profile:
    """Per-statement timings of a compiled program (`Executable.profile`).

    `rows` are `(seconds per call, label, source line, user line)`, slowest first;
    `by_label()` sums them per kernel or primitive.
    """

    def __init__(self, rows, calls):
        self.rows = sorted(rows, key=lambda r: -r[0])
        self.calls = calls

    @property
    def total(self):
        return sum(r[0] for r in self.rows)

    def by_label(self):
        acc = {}
        for sec, label, _, _ in self.rows:
            acc[label] = acc.get(label, 0.0) + sec
        return sorted(acc.items(), key=lambda kv: -kv[1])

    def __str__(self):
        total = self.total or 1.0
        lines = [f"{'us/call':>9} {'%':>5}  {'kernel/op':<28} generated line"]
        for sec, label, text, _ in self.rows:
            lines.append(f"{sec * 1e6:9.1f} {100 * sec / total:5.1f}  {label:<28} {text}")
        lines.append(f"{total * 1e6:9.1f} 100.0  total over {self.calls} calls (per call)")
        return "\n".join(lines)


try:  # np.errstate's own state, set without its three Python calls (a jitted call's hot path)
    from numpy._core._ufunc_config import _extobj_contextvar, _make_extobj
    _errors_set, _errors_reset = _extobj_contextvar.set, _extobj_contextvar.reset
except ImportError:  # a numpy without them: np.errstate itself
    def _make_extobj(**kw):
        return np.errstate(**kw)

    def _errors_set(state):
        state.__enter__()
        return state

    def _errors_reset(state):
        state.__exit__(None, None, None)


class Executable:
    """A compiled program: `exe(*numpy_arrays) -> list of numpy arrays`.

    Example:
        >>> exe = compile_jaxpr(make_jaxpr(lambda x: fnp.sin(x) * 2)(np.ones(3)))
        >>> print(exe.as_text())  # the generated Python source
    """

    def __init__(self, fn, source, filename, ir, memory, steps, line_eqns, profiled,
                 instrumented=None):
        self._fn = fn
        self._checks_ownership = "_owned" in getattr(  # whether it checks donated buffers
            getattr(fn, "__code__", None), "co_varnames", ())
        self._source = source
        self._lines = source.splitlines()
        self._filename = filename
        # Generated sources registered for tracebacks go when the program goes.
        self._sources = [filename]
        weakref.finalize(self, drop_sources, self._sources)
        self._ir = ir
        self._memory = memory
        self._steps = steps  # (first line, last line, label, eqn) per timed statement group
        self._line_eqns = line_eqns  # generated line -> the IR equation it computes
        self._profiled = profiled  # () -> (profiled function, accumulator), built lazily
        self._instrumented = instrumented  # recorder -> function reporting its sites
        self.program = None  # the fused program and its buffers (set by compile_program)
        self.buffers = ()

    def __call__(self, *args, owned=False):
        """`owned`: the caller vouches that the donated arguments' buffers are its own to
        overwrite (no other argument is or views one), as `jit_cache.call_donating` checks;
        else the program checks, and copies a buffer it may not overwrite."""
        try:
            # IEEE results without warnings, as eager lax: np.errstate(all="ignore")
            token = _errors_set(_make_extobj(all="ignore"))
            try:
                if owned and self._checks_ownership:
                    return self._fn(*args, _owned=True)
                return self._fn(*args)
            finally:
                _errors_reset(token)
        except errors.FuncgradError:
            raise
        except Exception as e:
            if errors.is_user_error(e):  # raised by the user's own callback: theirs
                raise
            eqn = self._failed_eqn(e)
            avals = [v.aval for v in eqn.outvars] if eqn is not None else []
            if eqn is not None and errors.out_of_memory(e, avals):
                raise errors.memory_error(eqn.prim.name, avals, eqn.source) from None
            if isinstance(e, MemoryError):  # a line of no equation: an allocation, an output
                raise errors.memory_error("jit", _allocation(e)) from None
            raise self._internal_error(e) from e

    def as_text(self):
        """The generated Python source."""
        return self._source

    def ir_text(self):
        """The optimized IR that was compiled."""
        return str(self._ir)

    def memory_analysis(self):
        """The `MemoryAnalysis` predicted by the memory plan."""
        return self._memory

    def profile(self, *args, repeat=10):
        """Run the program `repeat` times with a timer around every statement.

        Returns:
            A `Profile`; `print(profile)` shows microseconds per statement.
        """
        fn, acc, texts = self._profiled()
        if fn.__code__.co_filename not in self._sources:
            self._sources.append(fn.__code__.co_filename)
        acc[:] = [0.0] * len(acc)
        with np.errstate(all="ignore"):
            for _ in range(repeat):
                fn(*args)
        rows = []
        for k, (_, _, label, eqn) in enumerate(self._steps):
            text = texts[k].split("#")[0].strip()  # as the timed program has it
            src = errors.format_frame(eqn.source) if eqn is not None else ""
            rows.append((acc[k] / repeat, label, text, src))
        return Profile(rows, repeat)

    def instrumented(self, recorder):
        """The program as a function that reports every kernel and library call it runs:
        `t0 = recorder.clock()` before it, `recorder.record(site, t0)` after it (`site` a
        `funcgrad.profiler.Site`); its sub-programs (loop and branch bodies) report to the
        same recorder. This is the profiling hook of a backend (`funcgrad.profiler`); the
        plain program is unchanged."""
        if self._instrumented is None:
            raise errors.BackendUnavailableError(
                f"{type(self).__name__} was built without its instrumented variant, so it "
                "cannot be profiled per kernel\n  hint: pass `timed_variants(...)[1]` of "
                "funcgrad.backends.numpy.render to the Executable, as compile_program does.")
        fn = self._instrumented(recorder)
        if fn.__code__.co_filename not in self._sources:
            self._sources.append(fn.__code__.co_filename)
        return fn

    def _line(self, lineno):
        """Line `lineno` (from 1) of the generated source."""
        return self._lines[lineno - 1] if 0 < lineno <= len(self._lines) else ""

    def _failed_line(self, exc):
        lineno = None
        for frame, line in traceback.walk_tb(exc.__traceback__):
            if frame.f_code.co_filename == self._filename:
                lineno = line
        return lineno

    def _failed_eqn(self, exc):
        """The IR equation whose generated line raised `exc`, or None."""
        lineno = self._failed_line(exc)
        eqn = self._line_eqns.get(lineno)
        if eqn is None:
            eqn = next((s[3] for s in self._steps
                        if lineno is not None and s[0] <= lineno <= s[1]), None)
        return eqn

    def _internal_error(self, exc):
        lineno, eqn = self._failed_line(exc), self._failed_eqn(exc)
        text = self._line(lineno) if lineno else "?"
        msg = [f"the compiled program raised {type(exc).__name__}: {exc}",
               f"  at generated line {self._filename}:{lineno}", f"    {text.strip()}"]
        if eqn is not None:
            msg.append(f"  while computing the IR equation\n    {eqn_text(eqn)}")
            if eqn.source is not None:
                msg.append(f"  traced from {errors.format_frame(eqn.source)}")
        msg.append("This is a funcgrad bug (the program type-checked when it was traced); "
                   "please report it with this message.")
        return errors.FuncgradInternalError("\n".join(msg))


def _allocation(exc):
    """[(shape, dtype)] of the allocation that raised MemoryError `exc` (NumPy's says), or []."""
    shape, dtype = getattr(exc, "shape", None), getattr(exc, "dtype", None)
    return [(tuple(shape), np.dtype(dtype))] if shape is not None and dtype is not None else []


def eqn_text(eqn):
    """One equation in the IR's printed form (names local to the equation)."""
    ins = list(dict.fromkeys(a for a in eqn.invars if type(a) is not Literal))
    return pp_jaxpr(Jaxpr([], ins, list(eqn.outvars), [eqn]))


def clock():
    return time.perf_counter()
