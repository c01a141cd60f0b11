"""Ctrl-C inside native code: C loops and the blocks of pool kernels stop within
microseconds of a SIGINT, and the KeyboardInterrupt reaches the user.

A tiny C runtime (one per process, built and cached like any module, its build started
beside the first module that needs it: `prepare`) installs a SIGINT handler with
`sigaction` that calls the handler it replaced (CPython's, which sets Python's
pending-signal flag) and then counts the signal. Every module whose loops or pool kernels
poll declares `HEADER` (no #include: it costs a module's compile nothing) and gets the
runtime's state through `fg_set_interrupt` when `build.load` loads it. A loop function
takes the count on entry (`fg_sigint_count`: in a thread other than Python's main one, where
Python runs signal handlers, a count that never changes) and polls it once per iteration
(one load and compare, no call), a parallel kernel once per block; when it changed, the loop
frees its temporaries and returns `FG_INTERRUPTED`, a kernel skips its remaining blocks.
Back in Python, the pending signal runs Python's handler as the call returns, which raises
KeyboardInterrupt; a loop's wrapper checks its status too (`checked_status`), so a handler
that does not raise just runs the loop again from its unchanged inputs.

Only the main thread stops: code in other threads runs on to its right result (Python
would raise nothing there). The handler is installed (again) whenever a module that polls
is loaded while Python's SIGINT handler is its default one (`signal.default_int_handler`,
which always raises): a handler the user sets with `signal.signal` replaces it, and native
code then runs to its end as before. After `os.fork` the child's main thread is the forking
one (`os.register_at_fork`).

    lib.fg_set_interrupt(ctypes.c_void_p(interrupt.state_address(cc)))   # build.load
"""

import ctypes
import dataclasses
import os
import signal
import threading

from funcgrad import errors
from funcgrad.backends.native import cnode

FG_INTERRUPTED = 2  # what a C loop returns when a SIGINT stopped it (1: out of memory)

# Declared by every module whose loops or pool kernels poll (`threads.MODULE_HEADER` holds it;
# a second copy is skipped). The state is the runtime's: the count of SIGINTs and whether the
# calling thread is Python's main one.
HEADER = r"""
#ifndef FG_INTERRUPTED
#define FG_INTERRUPTED 2
typedef struct { volatile int count; int (*on_main)(void); } fg_sigint_state;
static int fg_sigint_off(void) { return 0; }
static fg_sigint_state fg_sigint_none = {0, fg_sigint_off};
static fg_sigint_state *fg_sigint = &fg_sigint_none;
static volatile int fg_sigint_never;
void fg_set_interrupt(void *state) {
    fg_sigint = state ? (fg_sigint_state *)state : &fg_sigint_none;
}
/* The count a loop reads on entry and polls (it stops when the count changes): in Python's
   main thread the runtime's count of SIGINTs, elsewhere one that never changes */
static inline volatile int *fg_sigint_count(void) {
    return fg_sigint->on_main() ? &fg_sigint->count : &fg_sigint_never;
}
#endif
"""

INTERRUPT = cnode.Piece("interrupt", HEADER)  # what a loop or a pool kernel that polls needs

RUNTIME_SOURCE = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <string.h>
typedef struct { volatile int count; int (*on_main)(void); } fg_sigint_state;
static unsigned long fg_main;  /* Python's main thread (threading.main_thread().ident) */
static int fg_on_main(void) { return (unsigned long)pthread_self() == fg_main; }
static fg_sigint_state fg_state = {0, fg_on_main};
static struct sigaction fg_chained;  /* the handler ours replaced: CPython's */

static void fg_on_sigint(int sig, siginfo_t *info, void *context) {
    if (fg_chained.sa_flags & SA_SIGINFO) fg_chained.sa_sigaction(sig, info, context);
    else if (fg_chained.sa_handler != SIG_DFL && fg_chained.sa_handler != SIG_IGN)
        fg_chained.sa_handler(sig);
    fg_state.count = fg_state.count + 1;  /* after Python's flag: a loop that sees the count
                                             returns to a pending KeyboardInterrupt */
}

void *fg_interrupt_state(void) { return &fg_state; }
void fg_interrupt_set_main(unsigned long main_thread) { fg_main = main_thread; }

/* 1 when ours is installed (now or already), 0 when SIGINT's handler is no function */
int fg_interrupt_install(unsigned long main_thread) {
    struct sigaction now, ours;
    fg_main = main_thread;
    if (sigaction(SIGINT, 0, &now) != 0) return 0;
    if ((now.sa_flags & SA_SIGINFO) && now.sa_sigaction == fg_on_sigint) return 1;
    if (!(now.sa_flags & SA_SIGINFO) && (now.sa_handler == SIG_DFL || now.sa_handler == SIG_IGN))
        return 0;
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    pthread_sigmask(SIG_BLOCK, &block, &old);  /* this thread: no SIGINT half-way through */
    fg_chained = now;
    memset(&ours, 0, sizeof ours);
    ours.sa_sigaction = fg_on_sigint;
    ours.sa_mask = now.sa_mask;
    ours.sa_flags = SA_SIGINFO | (now.sa_flags & ~(SA_SIGINFO | SA_RESETHAND));
    const int ok = sigaction(SIGINT, &ours, 0) == 0;
    pthread_sigmask(SIG_SETMASK, &old, 0);
    return ok;
}
"""

_lib = []  # the runtime, once loaded (an empty list: not yet; [None]: it did not build)
_preparing = []  # whether `prepare` started its build
_lock = threading.Lock()


def runtime(cc):
    """The runtime's loaded module (built with compiler `cc` unless loaded already), or None
    when it does not build."""
    from funcgrad.backends.native import build
    with _lock:
        if not _lib:
            rt_cc = dataclasses.replace(cc, flags=cc.flags + ("-pthread",), libs=("-pthread",))
            try:
                lib = build.load(RUNTIME_SOURCE, rt_cc)
            except (build.NativeCompileError, errors.BackendUnavailableError, OSError):
                lib = None  # loops then run to their end, as numpy code between checks would
            if lib is not None:
                lib.fg_interrupt_state.restype = ctypes.c_void_p
                lib.fg_interrupt_install.argtypes = [ctypes.c_ulong]
                lib.fg_interrupt_set_main.argtypes = [ctypes.c_ulong]
            _lib.append(lib)
        return _lib[0]


def prepare(cc):
    """Starts building the runtime in a thread, beside the module about to need it (an empty
    cache then waits for one compile, not two in a row). Not a daemon: a process that ends
    meanwhile waits for it, so no temporary folder of its build is left behind."""
    if not _lib and not _preparing:
        _preparing.append(True)
        threading.Thread(target=runtime, args=(cc,), name="funcgrad-native-interrupt",
                         daemon=False).start()  # (a thread started by a daemon is one)


def state_address(cc):
    """The address of the runtime's state (what `fg_set_interrupt` gets), or None when it
    did not build; installs the handler when Python's is the default one."""
    lib = runtime(cc)
    if lib is None:
        return None
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        lib.fg_interrupt_install(threading.main_thread().ident)
    return lib.fg_interrupt_state()


def checked_status():
    """After a C function stopped for a SIGINT: Python's handler runs now (the default one
    raises KeyboardInterrupt); returns when it did not raise (the caller runs again)."""
    ctypes.pythonapi.PyErr_CheckSignals()


def _forked():
    global _lock
    _lock = threading.Lock()
    if not _lib:
        _preparing.clear()  # a build in another thread is not in this process
    elif _lib[0] is not None:
        _lib[0].fg_interrupt_set_main(threading.get_ident())


os.register_at_fork(after_in_child=_forked)
