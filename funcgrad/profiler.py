"""Per-kernel profiling of compiled programs: which fused kernel or library call takes the time.

    prof = funcgrad.profile(jitted, *args, repeat=10)    # or jitted.profile(*args)
    print(prof.table())                                    # kernel, line, calls, time, GB/s
    prof.to_chrome_trace("step.json")                      # chrome://tracing, ui.perfetto.dev

A backend takes part through one hook: its executable's `instrumented(recorder)` returns the
program as a function that calls `t0 = recorder.clock()` before each kernel or library call
and `recorder.record(site, t0)` after it, `site` being the `Site` that `site_of(node,
program_name)` builds for that node of the fused program; sub-programs report to the same
recorder. The plain compiled program is untouched, so not profiling costs nothing. The
clock is the recorder's: `time.perf_counter` on the CPU, `EventClock` (CUDA events) on a GPU.
JAX's names (`start_trace`/`stop_trace`/`trace`, `TraceAnnotation`, `StepTraceAnnotation`,
`annotate_function`) record a session of many runs into the same kind of trace (at the end).
This module imports numpy, the core, errors and the escaping policy only at the top (backends
import `site_of` from it); the compiler is imported lazily.
"""

import contextlib
import functools
import gzip
import json
import math
import os
import socket
import statistics
import threading
import time

import numpy as np

from funcgrad import errors
from funcgrad.compiler import escape
from funcgrad.core import Var

__all__ = ["EventClock", "ProfileOptions", "ProfileResult", "Recorder", "Row", "Site",
           "StepTraceAnnotation", "TraceAnnotation", "annotate_function", "profile", "site_of",
           "start_trace", "stop_trace", "trace"]


class Site:
    """One place of a compiled program that the profiler times: a fused kernel ("kernel"), a
    library call ("call") or a loop/branch/call around compiled bodies ("control", timed
    without its bodies' sites). `nbytes` counts the bytes its operands and results occupy,
    `flops` the floating-point operations of a matmul (0 where not counted), `source` the
    user's line and `lines` every user line its equations came from."""

    __slots__ = ("name", "kind", "source", "lines", "nbytes", "flops", "program")

    def __init__(self, name, kind, lines, nbytes, flops=0, program=""):
        self.name, self.kind, self.lines = name, kind, tuple(lines)
        self.source = self.lines[0] if self.lines else ""
        self.nbytes, self.flops, self.program = int(nbytes), int(flops), program

    def __repr__(self):
        return f"Site({self.name!r}, {self.kind!r}, {self.source!r})"


def _nbytes(shape, dtype):
    return math.prod(shape) * np.dtype(dtype).itemsize


def _dot_flops(eqn):
    (contract, _), _ = eqn.params["dimension_numbers"]
    lhs, out = eqn.invars[0].aval, eqn.outvars[0].aval
    return 2 * math.prod(out.shape) * math.prod(lhs.shape[d] for d in contract)


def _conv_flops(eqn):
    # each output element: a multiply-add per kernel element of one output feature
    rhs, out = eqn.invars[1].aval, eqn.outvars[0].aval
    features = rhs.shape[eqn.params["dimension_numbers"].rhs_spec[0]]
    return 2 * math.prod(out.shape) * (math.prod(rhs.shape) // max(features, 1))


# Operation counts of library calls, by primitive name (a count, never a behaviour).
FLOP_RULES = {"dot_general": _dot_flops, "conv_general_dilated": _conv_flops}


def _lines(eqns):
    found = [escape.source_location(e.source) for e in eqns if e.source is not None]
    return list(dict.fromkeys(found))


def site_of(node, program=""):
    """The `Site` of a node of a fused program (`KernelNode` or `CallNode`) in the generated
    program named `program`."""
    spec = getattr(node, "spec", None)
    if spec is not None:
        nbytes = sum(_nbytes(a.shape, a.dtype) for a in spec.inputs + spec.outputs)
        return Site(escape.comment(spec.name), "kernel", _lines(node.eqns + node.out_eqns),
                    nbytes, 0, program)
    eqn = node.eqn
    atoms = [a for a in list(eqn.invars) + list(eqn.outvars) if type(a) is Var]
    nbytes = sum(_nbytes(a.aval.shape, a.aval.dtype) for a in atoms)
    if eqn.prim.kind == "higher-order":  # its bodies' sites move the bytes
        return Site(escape.comment(eqn.prim.name), "control", _lines([eqn]), 0, 0, program)
    rule = FLOP_RULES.get(eqn.prim.name)
    return Site(escape.comment(eqn.prim.name), "call", _lines([eqn]), nbytes,
                rule(eqn) if rule else 0, program)


# --- recording ----------------------------------------------------------------------------------

class Recorder:
    """Where an instrumented program reports: `t0 = clock()` before a site and
    `record(site, t0)` after it. `events` are `(site, t0, t1)` in the clock's units."""

    def __init__(self, clock=None):
        self.clock = clock or time.perf_counter
        self.events = []

    def record(self, site, t0):
        self.events.append((site, t0, self.clock()))

    def span(self, site, t0, t1):
        """A site timed by the program itself (a statement of a native C function)."""
        self.events.append((site, t0, t1))


class EventClock:
    """A clock of CUDA events: calling it records an event on the current stream;
    `seconds(event)` is its time since the first event, once the device is synchronized.
    `cupy` is the module (or anything with its `cuda.Event` and `cuda.get_elapsed_time`)."""

    def __init__(self, cupy):
        self.cuda = cupy.cuda
        self.origin = None

    def __call__(self):
        ev = self.cuda.Event()
        ev.record()
        if self.origin is None:
            self.origin = ev
        return ev

    def synchronize(self, last):
        last.synchronize()

    def seconds(self, ev):
        return self.cuda.get_elapsed_time(self.origin, ev) / 1e3


class Row:
    """One line of the table: a site's time per step (median over the runs)."""

    __slots__ = ("site", "calls", "seconds", "share")

    def __init__(self, site, calls, seconds, share):
        self.site, self.calls, self.seconds, self.share = site, calls, seconds, share

    name = property(lambda self: self.site.name)
    kind = property(lambda self: self.site.kind)
    source = property(lambda self: self.site.source)
    nbytes = property(lambda self: self.site.nbytes * self.calls)  # bytes moved per step
    flops = property(lambda self: self.site.flops * self.calls)

    @property
    def gbps(self):
        return self.nbytes / self.seconds / 1e9 if self.seconds > 0 and self.nbytes else None

    @property
    def gflops(self):
        return self.flops / self.seconds / 1e9 if self.seconds > 0 and self.flops else None

    def __repr__(self):
        return f"Row({self.name!r}, calls={self.calls}, seconds={self.seconds:.3g})"


# --- measuring ----------------------------------------------------------------------------------

def _self_times(events):
    """`[site, t0, t1, self seconds]` per event: a site's time without the sites that ran
    inside it (a loop's bodies), found by nesting of the intervals."""
    out, stack = [], []
    for site, t0, t1 in sorted(events, key=lambda e: (e[1], -e[2])):
        while stack and stack[-1][2] <= t0:
            stack.pop()
        ev = [site, t0, t1, t1 - t0]
        if stack:
            stack[-1][3] -= t1 - t0
        stack.append(ev)
        out.append(ev)
    return out


def profile_executable(exe, args, repeat=10, warmup=1, copy_args=False, clock=None,
                       name="program"):
    """Run executable `exe` on the flat arrays `args` `warmup + repeat` times through its
    `instrumented` hook; a `ProfileResult` of the `repeat` timed runs.

    `copy_args` passes fresh copies on every run (donated arguments may be overwritten).
    """
    if not hasattr(exe, "instrumented"):
        raise errors.BackendUnavailableError(
            f"profile({name}): the {type(exe).__name__} of this backend has no profiling hook "
            "(`instrumented(recorder)`)\n  hint: profile on the cpu backend "
            "(jit(..., backend='cpu')), which has it.")
    if repeat < 1:
        raise errors.FuncgradValueError(f"profile({name}): repeat must be >= 1, got {repeat}")
    if clock is None and hasattr(exe, "profile_clock"):
        clock = exe.profile_clock()  # CUDA events on a GPU
    rec = Recorder(clock)
    fn = exe.instrumented(rec)
    runs = []
    with np.errstate(all="ignore"):
        for i in range(warmup + repeat):
            run_args = [np.array(a, copy=True) for a in args] if copy_args else args
            first, t0 = len(rec.events), rec.clock()
            fn(*run_args)
            t1 = rec.clock()
            if i >= warmup:
                runs.append((t0, t1, first, len(rec.events)))
    if hasattr(rec.clock, "synchronize"):
        rec.clock.synchronize(runs[-1][1])
    return _result(rec, runs, name)


# Runs whose step took longer than this times the fastest one were slowed by something
# else (other processes, a page-fault storm): the medians leave them out.
SLOW_RUN = 1.2


def _result(rec, runs, name):
    sec = getattr(rec.clock, "seconds", None) or (lambda t: t)
    base = sec(runs[0][0])
    steps, per_run, events = [], [], []
    for k, (t0, t1, a, b) in enumerate(runs):
        steps.append(sec(t1) - sec(t0))
        evs = _self_times([(s, sec(u0), sec(u1)) for s, u0, u1 in rec.events[a:b]])
        totals = {}
        for site, u0, u1, own in evs:
            t, c = totals.get(site, (0.0, 0))
            totals[site] = (t + own, c + 1)
            events.append((site, u0 - base, u1 - u0, k))
        per_run.append(totals)
        events.append((None, sec(t0) - base, steps[-1], k))
    kept = [k for k, t in enumerate(steps) if t <= SLOW_RUN * min(steps)]
    step = statistics.median(steps[k] for k in kept)
    per_run = [per_run[k] for k in kept]
    sites = list(dict.fromkeys(s for totals in per_run for s in totals))
    rows = []
    for s in sites:
        secs = statistics.median(t.get(s, (0.0, 0))[0] for t in per_run)
        calls = statistics.median_low(t.get(s, (0.0, 0))[1] for t in per_run)
        rows.append(Row(s, calls, secs, secs / step if step > 0 else 0.0))
    rows.sort(key=lambda r: -r.seconds)
    return ProfileResult(rows, step, len(runs), events, name, len(kept), steps)


# --- the result ---------------------------------------------------------------------------------

def _size(n):
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000


def _rate(x):
    return "" if x is None else f"{x:.2f}"


class ProfileResult:
    """Per-kernel timings of a compiled program (`funcgrad.profile`, `jitted.profile`).

    Attributes:
        rows: one `Row` per kernel / library call (name, source, calls, seconds per step,
            share of the step, nbytes, gbps, gflops), slowest first: medians over the kept
            runs.
        step_seconds: the median time of one whole step (instrumented run) over them.
        repeat: how many runs were timed; `kept` how many the medians are over: runs that
            took more than `SLOW_RUN` (1.2) times the fastest were slowed by other load on
            the machine and are left out (they are in the trace).
        step_times: every timed run's step, in seconds.
        events: `(site, start, duration, run)` in seconds for every timed site of every run
            (site None: the whole step), as written to the Chrome trace.
    """

    def __init__(self, rows, step_seconds, repeat, events, name="program", kept=None,
                 step_times=()):
        self.rows, self.step_seconds, self.repeat = rows, step_seconds, repeat
        self.events, self.name = events, name
        self.kept = repeat if kept is None else kept
        self.step_times = list(step_times)

    @property
    def total_seconds(self):
        """The sum of the rows: the step's time spent inside kernels and calls."""
        return sum(r.seconds for r in self.rows)

    def table(self, limit=None):
        """The table as text: kernel/call, user line, calls, time per step, share, bytes
        moved, achieved GB/s and GFLOP/s."""
        head = (f"{'kernel / call':<28} {'source':<30} {'calls':>6} {'us/step':>10} "
                f"{'share':>6} {'bytes':>9} {'GB/s':>7} {'GFLOP/s':>8}")
        left = self.repeat - self.kept
        note = f" ({left} slowed by other load left out)" if left else ""
        lines = [f"# profile of {escape.comment(self.name)}: medians of {self.kept} of "
                 f"{self.repeat} steps{note}", head]
        for r in self.rows[:limit]:
            lines.append(f"{r.name[:28]:<28} {r.source[:30]:<30} {r.calls:>6} "
                         f"{r.seconds * 1e6:>10.1f} {100 * r.share:>5.1f}% "
                         f"{_size(r.nbytes):>9} {_rate(r.gbps):>7} {_rate(r.gflops):>8}")
        share = self.total_seconds / self.step_seconds if self.step_seconds else 0.0
        lines.append(f"{'kernels and calls':<28} {'':<30} {'':>6} "
                     f"{self.total_seconds * 1e6:>10.1f} {100 * share:>5.1f}%")
        lines.append(f"{'step (measured)':<28} {'':<30} {'':>6} "
                     f"{self.step_seconds * 1e6:>10.1f} {100.0:>5.1f}%")
        return "\n".join(lines)

    __str__ = table

    def chrome_trace(self):
        """The runs as a Chrome/Perfetto trace: `{"traceEvents": [{"name", "ph": "X", "ts",
        "dur", "pid", "tid", "args"}, ...]}` with times in microseconds (after two "M"
        metadata events naming the process and thread)."""
        out = [{"name": "process_name", "ph": "M", "pid": 1, "tid": 1,
                "args": {"name": f"funcgrad {escape.comment(self.name)}"}},
               {"name": "thread_name", "ph": "M", "pid": 1, "tid": 1,
                "args": {"name": "steps, kernels and calls"}}]
        for site, start, dur, run in self.events:
            ev = {"name": f"step {run}" if site is None else site.name, "ph": "X",
                  "ts": start * 1e6, "dur": dur * 1e6, "pid": 1, "tid": 1,
                  "cat": "step" if site is None else site.kind, "args": {"run": run}}
            if site is not None:
                ev["args"].update(source=site.source, bytes=site.nbytes, flops=site.flops,
                                  program=site.program)
            out.append(ev)
        return {"traceEvents": out, "displayTimeUnit": "ms"}

    def to_chrome_trace(self, path):
        """Write `chrome_trace()` as JSON to `path` (open it in chrome://tracing or
        ui.perfetto.dev); returns `path`."""
        with open(path, "w") as f:
            json.dump(self.chrome_trace(), f)
        return path


def profile(fun, *args, repeat=10, warmup=1, trace=None, show=False, **kwargs):
    """Profile one step of a jitted function per kernel and library call.

    Args:
        fun: a `jit`-ted function (a plain function is jitted), or a `Compiled`.
        *args, **kwargs: its arguments.
        repeat: timed steps (after `warmup` untimed ones); rows are medians per step.
        trace: a path to write the Chrome/Perfetto trace JSON to.
        show: print the table.

    Returns:
        A `ProfileResult` (`.table()`, `.rows`, `.to_chrome_trace(path)`).

    Example:
        >>> prof = funcgrad.profile(jit(lambda x: fnp.tanh(x @ x).sum()), np.ones((512, 512)))
        >>> print(prof.table())        # dot_general ... GFLOP/s, k1_tanh_reduce_sum ... GB/s
    """
    from funcgrad.compiler.jit import Compiled, jit
    if not isinstance(fun, Compiled):
        fun = (fun if hasattr(fun, "lower") else jit(fun)).lower(*args, **kwargs).compile()
    return fun.profile(*args, repeat=repeat, warmup=warmup, trace=trace, show=show, **kwargs)


# --- JAX's trace sessions: start_trace/stop_trace/trace and annotations -------------------------
# A session records, until `stop_trace`, the annotated Python ranges (`TraceAnnotation`,
# `StepTraceAnnotation`, `annotate_function`), every run of a compiled program (a "jit(f)"
# slice) and, inside it, each kernel and library call (the backend's `instrumented` hook), and
# writes them as the Chrome/Perfetto trace that `ProfileResult.chrome_trace` writes.

class _Recorder(Recorder):
    """A `Recorder` that also notes the thread of each event."""

    def record(self, site, t0):
        self.events.append((site, t0, self.clock(), threading.get_ident()))

    def span(self, site, t0, t1):
        self.events.append((site, t0, t1, threading.get_ident()))


class _Session:
    def __init__(self, log_dir, perfetto_trace, perfetto_link):
        self.log_dir, self.perfetto_trace = str(log_dir), perfetto_trace or perfetto_link
        self.perfetto_link = perfetto_link
        self.origin = time.perf_counter()
        self.spans = []  # (name, category, t0, t1, thread, args)
        self.recorder = _Recorder()
        self.programs = {}  # id(exe) -> (exe, its instrumented function or None)

    def add(self, name, category, t0, t1, args):
        self.spans.append((name, category, t0, t1, threading.get_ident(), args))

    def run(self, name, exe, args):
        """Run a compiled program, timing it and (where the backend can) its kernels."""
        hit = self.programs.get(id(exe))
        if hit is None or hit[0] is not exe:
            try:
                fn = exe.instrumented(self.recorder)
            except (AttributeError, errors.BackendUnavailableError):
                fn = None
            hit = self.programs[id(exe)] = (exe, fn)
        t0 = time.perf_counter()
        try:
            return (hit[1] or exe)(*args)
        finally:
            self.add(f"jit({name})", "jit", t0, time.perf_counter(), {})

    def chrome_trace(self):
        threads = {}
        tid = lambda t: threads.setdefault(t, len(threads) + 1)  # noqa: E731
        us = lambda t: (t - self.origin) * 1e6  # noqa: E731
        events = [{"name": escape.comment(n), "ph": "X", "ts": us(t0), "dur": us(t1) - us(t0),
                   "pid": 1, "tid": tid(th), "cat": cat, "args": _jsonable(args)}
                  for n, cat, t0, t1, th, args in self.spans]
        for site, t0, t1, th in self.recorder.events:
            events.append({"name": site.name, "ph": "X", "ts": us(t0), "dur": us(t1) - us(t0),
                           "pid": 1, "tid": tid(th), "cat": site.kind,
                           "args": {"source": site.source, "bytes": site.nbytes,
                                    "flops": site.flops, "program": site.program}})
        meta = [{"name": "process_name", "ph": "M", "pid": 1, "tid": 0,
                 "args": {"name": "funcgrad"}}]
        meta += [{"name": "thread_name", "ph": "M", "pid": 1, "tid": n,
                  "args": {"name": f"python thread {n}"}} for n in threads.values()]
        return {"traceEvents": meta + sorted(events, key=lambda e: (e["ts"], -e["dur"])),
                "displayTimeUnit": "ms"}

    def write(self):
        """`log_dir/plugins/profile/<run>/<host>.trace.json.gz` (and `perfetto_trace.json.gz`
        beside it when asked), JAX's layout; returns the run's folder."""
        run = time.strftime("%Y_%m_%d_%H_%M_%S")
        folder = os.path.join(self.log_dir, "plugins", "profile", run)
        n = 1
        while os.path.exists(folder):
            n += 1
            folder = os.path.join(self.log_dir, "plugins", "profile", f"{run}_{n}")
        os.makedirs(folder)
        trace = self.chrome_trace()
        _write_gz(os.path.join(folder, f"{socket.gethostname()}.trace.json.gz"),
                  dict(trace, metadata={"producer": "funcgrad"}))
        if self.perfetto_trace:
            path = _write_gz(os.path.join(folder, "perfetto_trace.json.gz"), trace)
            if self.perfetto_link:
                print(f"Open https://ui.perfetto.dev and load {path} (funcgrad serves no link)")
        return folder


def _jsonable(args):
    return {str(k): v if isinstance(v, (int, float, str, bool, type(None))) else repr(v)
            for k, v in args.items()}


def _write_gz(path, trace):
    with gzip.open(path, "wt", encoding="utf-8") as f:
        json.dump(trace, f)
    return path


class _State:
    session = None


_state = _State()


def start_trace(log_dir, create_perfetto_link=False, create_perfetto_trace=False,
                profiler_options=None):
    """Start recording a trace, written to `log_dir` by `stop_trace` (JAX's layout:
    `log_dir/plugins/profile/<run>/<host>.trace.json.gz`, and `perfetto_trace.json.gz` with
    `create_perfetto_trace`). It records annotated ranges (`TraceAnnotation`,
    `StepTraceAnnotation`, `annotate_function`), every run of a jitted program and each of its
    kernels and library calls; eager operations are not recorded.

    Args:
        log_dir: the folder to write the trace into.
        create_perfetto_link: also write `perfetto_trace.json.gz` and print where it is
            (JAX serves it to ui.perfetto.dev and waits; funcgrad does not).
        create_perfetto_trace: also write `perfetto_trace.json.gz`.
        profiler_options: accepted (`ProfileOptions`); funcgrad has no options.

    Raises:
        RuntimeError: a trace is being recorded already.

    Example:
        >>> start_trace("/tmp/tb"); step(x); stop_trace()
    """
    if _state.session is not None:
        raise RuntimeError("Profile has already been started. Only one profile may be run "
                           "at a time.")
    from funcgrad.compiler import jit_cache
    _state.session = _Session(log_dir, create_perfetto_trace, create_perfetto_link)
    jit_cache.watchers.append(_state.session.run)


def stop_trace():
    """Stop the trace `start_trace` began and write it (see `start_trace`).

    Raises:
        RuntimeError: no trace is being recorded.
    """
    session = _state.session
    if session is None:
        raise RuntimeError("No profile started")
    from funcgrad.compiler import jit_cache
    jit_cache.watchers.remove(session.run)
    _state.session = None
    session.write()


@contextlib.contextmanager
def trace(log_dir, create_perfetto_link=False, create_perfetto_trace=False,
          profiler_options=None):
    """`start_trace(...)` on entry and `stop_trace()` on exit.

    Example:
        >>> with trace("/tmp/tb"):
        ...     step(x).block_until_ready()
    """
    start_trace(log_dir, create_perfetto_link, create_perfetto_trace, profiler_options)
    try:
        yield
    finally:
        stop_trace()


class TraceAnnotation:
    """A named range of the trace being recorded (`start_trace`), with `kwargs` as its
    arguments; a context manager. Costs almost nothing when no trace is recorded.

    Example:
        >>> with TraceAnnotation("data loading", epoch=3):
        ...     batch = next(loader)
    """

    category = "annotation"

    def __init__(self, name, **kwargs):
        self.name, self.kwargs, self.t0 = name, kwargs, None

    def __enter__(self):
        self.t0 = time.perf_counter() if _state.session is not None else None
        return self

    def __exit__(self, *exc):
        session = _state.session
        if session is not None and self.t0 is not None:
            session.add(self.name, self.category, self.t0, time.perf_counter(), self.kwargs)


class StepTraceAnnotation(TraceAnnotation):
    """A `TraceAnnotation` that marks one training step (`step_num=` among its arguments),
    category "step" in the trace.

    Example:
        >>> for i in range(3):
        ...     with StepTraceAnnotation("train", step_num=i):
        ...         params = update(params, batch)
    """

    category = "step"


def annotate_function(func, name=None, **decorator_kwargs):
    """`func` with every call recorded as a `TraceAnnotation` named `name` (default: its
    qualified name) with `decorator_kwargs` as arguments.

    Example:
        >>> @annotate_function
        ... def loss(params, batch): ...
    """
    name = name or getattr(func, "__qualname__", None) or getattr(func, "__name__", "function")

    @functools.wraps(func)
    def annotated(*args, **kwargs):
        with TraceAnnotation(name, **decorator_kwargs):
            return func(*args, **kwargs)
    return annotated


class ProfileOptions:
    """JAX's profiler options, accepted by `start_trace`; funcgrad's traces take none of them
    (the attributes keep JAX's defaults)."""

    def __init__(self):
        self.host_tracer_level, self.python_tracer_level = 2, 1
        self.enable_hlo_proto, self.include_dataset_ops = True, True
        self.duration_ms, self.start_timestamp_ns = 0, 0
        self.advanced_configuration, self.repository_path, self.session_id = {}, "", ""
        self.raise_error_on_start_failure = False
