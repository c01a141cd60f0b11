"""Ctrl-C inside native code: C loops and the blocks of pool kernels stop within
microseconds of a SIGINT, and the KeyboardInterrupt reaches the user.

The first module loaded that holds `RUNTIME` (every module whose loops or kernels poll, and
the thread pool's) becomes the process's runtime: it installs a SIGINT handler with
`sigaction` that calls the handler it replaced (CPython's, which sets Python's
pending-signal flag) and then counts the signal. Every module that polls declares `HEADER`
and gets the count's address through `fg_set_interrupt` when `build.load` loads it. A loop
function takes the count on entry (`fg_sigint_count`: in a thread other than Python's main
one, where Python runs signal handlers, a count that never changes) and polls it once per
iteration (one load and compare, no call), a parallel kernel once per block; when it
changed, the loop frees its temporaries and returns `FG_INTERRUPTED`, a kernel skips its
remaining blocks. Back in Python, the pending signal runs Python's handler as the call
returns, which raises KeyboardInterrupt; a loop's wrapper checks its status too
(`checked_status`), so a handler that does not raise just runs the loop again from its
unchanged inputs.

Only the main thread stops: code in other threads runs on to its right result (Python
would raise nothing there). The handler is installed (again) whenever a module that polls
is loaded while Python's SIGINT handler is its default one (`signal.default_int_handler`,
which always raises): a handler the user sets with `signal.signal` replaces it, and native
code then runs to its end as before. After `os.fork` the child's main thread is the forking
one (`os.register_at_fork`).

    lib.fg_set_interrupt(ctypes.c_void_p(interrupt.state_address(lib)))   # build.load
"""

import ctypes
import os
import signal
import threading

FG_INTERRUPTED = 2  # what a C loop returns when a SIGINT stopped it (1: out of memory)
# A module holding `RUNTIME` defines this before any #include (sigaction is POSIX, not C11)
FEATURES = "#define _POSIX_C_SOURCE 200809L\n"

# Declared by every module whose loops or pool kernels poll (`threads.MODULE_HEADER` holds it;
# a second copy is skipped).
HEADER = r"""
#ifndef FG_INTERRUPTED
#include <pthread.h>
#include <signal.h>
#define FG_INTERRUPTED 2
typedef struct { volatile sig_atomic_t count; volatile unsigned long main; } fg_sigint_state;
static fg_sigint_state fg_sigint_none;
static fg_sigint_state *fg_sigint = &fg_sigint_none;
static volatile sig_atomic_t fg_sigint_never;
void fg_set_interrupt(void *state) {
    fg_sigint = state ? (fg_sigint_state *)state : &fg_sigint_none;
}
/* The count a loop reads on entry and polls (it stops when the count changes): in Python's
   main thread the runtime's count of SIGINTs, elsewhere one that never changes */
static inline volatile sig_atomic_t *fg_sigint_count(void) {
    return (unsigned long)pthread_self() == fg_sigint->main ? &fg_sigint->count
                                                            : &fg_sigint_never;
}
#endif
"""

# The handler, in every module that polls (after `HEADER`); only the runtime's is installed.
RUNTIME = r"""
#ifndef FG_INTERRUPT_RUNTIME
#define FG_INTERRUPT_RUNTIME
#include <string.h>
static fg_sigint_state fg_sigint_counted;
static struct sigaction fg_chained;  /* the handler ours replaced: CPython's */

static void fg_on_sigint(int sig, siginfo_t *info, void *context) {
    if (fg_chained.sa_flags & SA_SIGINFO) fg_chained.sa_sigaction(sig, info, context);
    else if (fg_chained.sa_handler != SIG_DFL && fg_chained.sa_handler != SIG_IGN)
        fg_chained.sa_handler(sig);
    fg_sigint_counted.count = fg_sigint_counted.count + 1;  /* after Python's flag: a loop
        that sees the count returns to a pending KeyboardInterrupt */
}

void *fg_interrupt_state(void) { return &fg_sigint_counted; }
void fg_interrupt_set_main(unsigned long main_thread) { fg_sigint_counted.main = main_thread; }

/* 1 when ours is installed (now or already), 0 when SIGINT's handler is no function */
int fg_interrupt_install(unsigned long main_thread) {
    struct sigaction now, ours;
    fg_sigint_counted.main = main_thread;
    if (sigaction(SIGINT, 0, &now) != 0) return 0;
    if ((now.sa_flags & SA_SIGINFO) && now.sa_sigaction == fg_on_sigint) return 1;
    if (!(now.sa_flags & SA_SIGINFO) && (now.sa_handler == SIG_DFL || now.sa_handler == SIG_IGN))
        return 0;
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigprocmask(SIG_BLOCK, &block, &old);  /* this thread: no SIGINT half-way through */
    fg_chained = now;
    memset(&ours, 0, sizeof ours);
    ours.sa_sigaction = fg_on_sigint;
    ours.sa_mask = now.sa_mask;
    ours.sa_flags = SA_SIGINFO | (now.sa_flags & ~(SA_SIGINFO | SA_RESETHAND));
    const int ok = sigaction(SIGINT, &ours, 0) == 0;
    sigprocmask(SIG_SETMASK, &old, 0);
    return ok;
}
#endif
"""

_runtime = []  # the module whose handler is installed (the first loaded that has one)
_lock = threading.Lock()


def state_address(lib):
    """The address of the runtime's SIGINT count, for module `lib` (the runtime itself when
    it is the first loaded with `RUNTIME`), or None while there is none; installs the
    handler when Python's is the default one."""
    with _lock:
        if not _runtime and hasattr(lib, "fg_interrupt_install"):
            lib.fg_interrupt_state.restype = ctypes.c_void_p
            lib.fg_interrupt_install.argtypes = [ctypes.c_ulong]
            lib.fg_interrupt_set_main.argtypes = [ctypes.c_ulong]
            _runtime.append(lib)
        if not _runtime:
            return None
        rt = _runtime[0]
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        rt.fg_interrupt_install(threading.main_thread().ident)
    return rt.fg_interrupt_state()


def checked_status():
    """After a C function stopped for a SIGINT: Python's handler runs now (the default one
    raises KeyboardInterrupt); returns when it did not raise (the caller runs again)."""
    ctypes.pythonapi.PyErr_CheckSignals()


def _forked():
    global _lock
    _lock = threading.Lock()
    if _runtime:
        _runtime[0].fg_interrupt_set_main(threading.get_ident())


os.register_at_fork(after_in_child=_forked)
