"""Which tier runs a program: numpy at once, native when built (see `config.native`).

A `TieredExecutable` starts as the numpy backend's executable and swaps in the native one
when the single background worker has built it (one attribute assignment: a call runs
wholly on one tier). A build that fails leaves the numpy tier in place after a warning.
The bodies of loops that the worker compiles are built in the worker at once (so the loop
can become C too). Under a multi-process launch (mpiexec) "background" builds
synchronously: every process then runs the same tier at every step, so replicated values
stay identical bit for bit. When no C module can be built or loaded here
(`build.NativeUnavailableError`: a full disk, no usable folder) programs stay on the numpy
tier after one warning, in every mode. After `os.fork` the child gets a worker of its own,
which builds what was pending (`_forked`), so `drain()` and `as_text()` return there too.
"""

import os
import queue
import threading
import warnings
import weakref

from funcgrad import errors
from funcgrad.backends import numpy as numpy_backend
from funcgrad.backends.native import build
from funcgrad.backends.native.program import compile_native
from funcgrad.config import config
from funcgrad.distributed import runtime as distributed_runtime

MODES = ("background", "sync", "off")
_warned = set()
_jobs = queue.Queue()
_worker = []
_worker_lock = threading.Lock()
_building = threading.local()  # set in the worker: bodies it compiles are built at once
_current = [None]  # the job the worker is building


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


def compile_program(program, donate_argnums=(), ir=None, compile_subprogram=None):
    """Compile `program` for the CPU: native C kernels when a C compiler is available and
    `config.native` is not "off", else the numpy backend (see the package docstring)."""
    mode = _mode()
    cc = build.compiler() if mode != "off" else None
    if cc is None:
        if mode != "off" and "cc" not in _warned:
            _warned.add("cc")
            warnings.warn(no_compiler_message(), RuntimeWarning, stacklevel=2)
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
    _submit(tiered, lambda: compile_native(program, donate_argnums, ir, compile_subprogram,
                                           cc))
    return tiered


def _warn_once(kind, message):
    if kind not in _warned:
        _warned.add(kind)
        warnings.warn(message, RuntimeWarning, stacklevel=3)


def _submit(tiered, make):
    # held weakly: a program that dies before its build is not built (nor kept alive)
    _jobs.put((weakref.ref(tiered), make))
    with _worker_lock:
        if not _worker:
            t = threading.Thread(target=_work, name="funcgrad-native-build", daemon=True)
            _worker.append(t)
            t.start()


def _work():
    _building.active = True
    while True:
        ref, make = _current[0] = _jobs.get()
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
                tiered._done.set()
            del ref, make, tiered, exe
            _current[0] = None
            _jobs.task_done()


def _forked():
    """In a forked child: a new queue holding the builds the parent had not finished (its
    worker thread is gone), new locks, and a worker started for them."""
    global _jobs, _worker_lock
    pending = [job for job in [_current[0], *_jobs.queue] if job is not None]
    _jobs, _worker_lock, _current[0] = queue.Queue(), threading.Lock(), None
    _worker.clear()
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
