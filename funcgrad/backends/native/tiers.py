"""Which tier runs a program: numpy at once, native when built (see `config.native`).

A `TieredExecutable` starts as the numpy backend's executable and swaps in the native one
when a background worker has built it (one attribute assignment: a call runs wholly on one
tier). Programs build in parallel, one per worker, up to `build_jobs()` workers (the CPUs
this process may use, or `config.native_build_jobs`): a training step and its gradient
programs are several modules, each one gcc run. The compiler is probed in a worker too, so
a program's first call never waits for it. A build that fails leaves the numpy tier in
place after a warning. The bodies of loops that a worker compiles are built in that worker
at once (so the loop can become C too). Under a multi-process launch (mpiexec)
"background" builds synchronously: every process then runs the same tier at every step, so
replicated values stay identical bit for bit. When no C module can be built or loaded here
(`build.NativeUnavailableError`: a full disk, no usable folder) programs stay on the numpy
tier after one warning, in every mode. After `os.fork` the child gets workers of its own,
which build what was pending (`_forked`), so `drain()` and `as_text()` return there too.
"""

import os
import queue
import threading
import warnings
import weakref

from funcgrad import errors
from funcgrad.backends import numpy as numpy_backend
from funcgrad.backends.native import build, threads
from funcgrad.backends.native.program import compile_native
from funcgrad.config import config
from funcgrad.distributed import runtime as distributed_runtime

MODES = ("background", "sync", "off")
_warned = set()
_jobs = queue.Queue()  # (weak reference to a TieredExecutable, make) per submitted build
_workers = []  # the build threads started so far (at most `build_jobs()`)
_worker_lock = threading.Lock()
_building = threading.local()  # set in a worker: bodies it compiles are built at once
_running = {}  # worker thread id -> the job it is building


def no_compiler_message():
    path = build.find_compiler()
    if path is not None and build.why_not(path):
        return (f"funcgrad: the C compiler {path} cannot build here: {build.why_not(path)}; "
                "the native CPU backend is off and programs run on the numpy backend. "
                "config.update('native', 'off') silences this warning.")
    tried = build._candidates()
    return (f"funcgrad: no C compiler found (tried {', '.join(tried)}"
            f"{' from $CC' if len(tried) == 1 else ' on PATH'}); the native CPU backend is "
            "off and programs run on the numpy backend. Install one (Debian/Ubuntu: `apt "
            "install gcc`; Fedora: `dnf install gcc`; macOS: `xcode-select --install`) or "
            "set $CC to it; config.update('native', 'off') silences this warning.")


def _mode():
    mode = config.native
    if mode not in MODES:
        raise errors.FuncgradValueError(
            f"config native={mode!r}: expected one of {', '.join(repr(m) for m in MODES)}")
    if mode == "background" and (getattr(_building, "active", False)
                                 or distributed_runtime.launched_size() > 1):
        return "sync"
    return mode


def build_jobs():
    """How many programs build at once: `config.native_build_jobs` when set, else the CPUs
    this process may run on (its affinity, at most its cgroup's quota)."""
    jobs = config.native_build_jobs
    if jobs is None:
        return threads.cpus()
    if not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 1:
        raise errors.FuncgradValueError(
            f"config native_build_jobs={jobs!r}: expected a positive int or None (the CPUs)")
    return jobs


def compile_program(program, donate_argnums=(), ir=None, compile_subprogram=None):
    """Compile `program` for the CPU: native C kernels when a C compiler is available and
    `config.native` is not "off", else the numpy backend (see the package docstring)."""
    mode = _mode()
    # In the background the compiler is probed by a worker (`_native`): a first call never
    # waits for the probe's compiler runs. Finding it on PATH is cached and costs nothing;
    # one that a probe found unable to build (`why_not`) is not tried again.
    path = build.find_compiler() if mode == "background" else None
    found = path is not None and build.why_not(path) is None
    cc = build.compiler() if mode == "sync" else None
    if cc is None and not found:
        if mode != "off":
            _warn_once("cc", no_compiler_message(), stacklevel=3)
        return numpy_backend.compile_program(program, donate_argnums, ir, compile_subprogram)
    if mode == "sync":
        try:
            exe = compile_native(program, donate_argnums, ir, compile_subprogram, cc)
        except build.NativeUnavailableError as e:
            _warn_once("unavailable", str(e))
            exe = None
        return exe or numpy_backend.compile_program(program, donate_argnums, ir,
                                                    compile_subprogram)
    fallback = numpy_backend.compile_program(program, donate_argnums, ir, compile_subprogram)
    tiered = TieredExecutable(fallback)
    _submit(tiered, lambda: _native(program, donate_argnums, ir, compile_subprogram))
    return tiered


def _native(program, donate_argnums, ir, compile_subprogram):
    """A worker's build: the native executable, or None (the numpy tier stays) when the
    compiler found on PATH cannot build here (one warning)."""
    cc = build.compiler()
    if cc is None:
        _warn_once("cc", no_compiler_message(), stacklevel=2)
        return None
    return compile_native(program, donate_argnums, ir, compile_subprogram, cc)


def _warn_once(kind, message, stacklevel=3):
    if kind not in _warned:
        _warned.add(kind)
        warnings.warn(message, RuntimeWarning, stacklevel=stacklevel)


def _submit(tiered, make):
    # held weakly: a program that dies before its build is not built (nor kept alive)
    _jobs.put((weakref.ref(tiered), make))
    with _worker_lock:  # one more worker, up to `build_jobs()`: idle ones wait on the queue
        if len(_workers) < build_jobs():
            t = threading.Thread(target=_work, name=f"funcgrad-native-build-{len(_workers)}",
                                 daemon=True)
            _workers.append(t)
            t.start()


def in_flight():
    """How many builds the workers are running now (tests, benchmarks)."""
    return len(_running)


def _work():
    _building.active = True
    me = threading.get_ident()
    while True:
        ref, make = _running[me] = _jobs.get()
        exe = tiered = None
        try:
            exe = make() if ref() is not None else None
            tiered = ref()
            if exe is not None and tiered is not None:
                tiered._exe = exe
        except build.NativeUnavailableError as e:
            _warn_once("unavailable", str(e))
        except Exception as e:  # the numpy tier keeps running the program
            warnings.warn(f"funcgrad: the native build of a program failed; it keeps "
                          f"running on the numpy backend ({type(e).__name__}: {e})",
                          RuntimeWarning, stacklevel=1)
        finally:
            tiered = ref()
            if tiered is not None:
                tiered.final_tier = tiered._exe
                tiered._done.set()
            del ref, make, tiered, exe
            _running.pop(me, None)
            _jobs.task_done()


def _forked():
    """In a forked child: a new queue holding the builds the parent had not finished (its
    worker threads are gone), new locks, and workers started for them."""
    global _jobs, _worker_lock
    pending = [*_running.values(), *_jobs.queue]
    _jobs, _worker_lock = queue.Queue(), threading.Lock()
    _running.clear()
    _workers.clear()
    for ref, make in pending:
        tiered = ref()
        if tiered is not None:
            tiered._done = threading.Event()  # its lock may have been held by the worker
            _submit(tiered, make)


os.register_at_fork(after_in_child=_forked)


def drain():
    """Wait until every native build submitted so far is done (tests, benchmarks)."""
    _jobs.join()


class TieredExecutable:
    """The executable of one program on the best tier ready so far (see module docstring)."""

    def __init__(self, first):
        self._exe = first
        self._done = threading.Event()
        self.final_tier = None  # the executable of the last tier, once in place (`jit_cache`)

    @property
    def _fn(self):
        """The generated function, as the numpy renderer binds a body's: it follows the
        swap (a bound method, so no reference cycle keeps a dead program alive)."""
        return self._run_fn

    def _run_fn(self, *args):
        return self._exe._fn(*args)

    def __call__(self, *args, owned=False):
        return self._exe(*args, owned=owned)

    @property
    def native(self):
        """True once the native tier runs the program."""
        return hasattr(self._exe, "c_source")

    def wait(self, timeout=None):
        """Wait for the native build (done or failed); returns self."""
        self._done.wait(timeout)
        return self

    def as_text(self):
        """The source of the native tier (waiting up to a minute for its build), so what is
        shown is what will run; the numpy tier's source if the build failed or took longer."""
        self.wait(timeout=60)
        return self._exe.as_text()

    def ir_text(self):
        return self._exe.ir_text()

    def memory_analysis(self):
        return self._exe.memory_analysis()

    def profile(self, *args, **kw):
        return self._exe.profile(*args, **kw)

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._exe, name)
