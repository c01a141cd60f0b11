"""The worker threads large C kernels split their loops over: one small pool per process.

A kernel of `kernel.PARALLEL_MIN_ELEMENTS` elements or more is printed as a task function
(one block of its outermost loop) and a call that runs its blocks on the pool:

    static void fg_k0_task(void *const *fg_a, long long _t) { ...block _t... }
    void fg_k0(const float *restrict p_in0, float *restrict p_out0) {
        void *const fg_a[] = {(void *)p_in0, (void *)p_out0};
        fg_parallel(fg_k0_task, fg_a, 25);
    }

Blocks are independent (disjoint outputs, no cross-block reduction), so the results are the
same bits whichever thread runs a block. Why not OpenMP: an OpenMP parallel region ends
with a barrier every thread of the team must reach, so a region costs at least the time a
sleeping thread takes to wake, 60-130 us on this project's VM (a 128k-element kernel of 20
us took 80); libgomp's threads that spin instead take the cores from OpenBLAS's threads and
Python (a transformer step 34 -> 156 ms). Here the caller claims blocks itself from the
start, and a call ends when every block is done, not when every thread has checked in: a
worker still waking finds nothing left. Idle workers spin for `SPIN_US` after their last
block, calling `sched_yield` every 64 pauses, so a sequence of kernels (an optimizer update
over many arrays, a C loop, a training step) finds them awake while any other runnable
thread (OpenBLAS's, Python's) still gets the core; then they sleep on a condition variable.
On two cores (`benchmarks/bench_parallel_threshold.py`, RESULTS.md) kernels from 128k
elements (`kernel.PARALLEL_MIN_ELEMENTS`) run 1.5-2x faster than on one thread, and
spinning 1 ms this way left the GPT and MLP steps as fast as workers that sleep after
50 us, where spinning without yielding made them 10-50% slower. A call of fewer than 8
blocks wakes no sleeping worker (the caller's wake-up call costs more than the worker
saves there) but uses those awake.

One caller at a time: a kernel called while another thread's kernel holds the pool runs its
blocks serially (same results). A forked child starts its own workers on first use. The
pool has `threads()` threads counting the caller: `OMP_NUM_THREADS` when set, else the CPUs
this process may run on, at most its cgroup's CPU quota.

    from funcgrad.backends.native import build, threads
    threads.threads()                      # e.g. 2
    threads.address(build.compiler())      # what `fg_set_parallel` gets, or None
"""

import ctypes
import dataclasses
import functools
import os
import threading

from funcgrad import errors
from funcgrad.backends.native import cnode, interrupt

SPIN_US = 1000  # how long an idle worker looks for the next kernel's blocks before sleeping
MAX_BLOCKS = 0xFFFF  # blocks one parallel call may have (the kernels make at most this many)

# Declared by every C module with such kernels (a kernel in blocks needs the piece `POOL`,
# which requires `interrupt.INTERRUPT`): their blocks run on the pool once `build.load` has
# called `fg_set_parallel`, serially before that and without a pool; after a SIGINT in the
# main thread no further block starts (`interrupt.py`: Python then raises KeyboardInterrupt).
_POOL_ENTRY = r"""
typedef void (*fg_task)(void *const *, long long);
typedef void (*fg_runner)(fg_task, void *const *, long long);
static fg_runner fg_parallel_run;
void fg_set_parallel(void *f) { fg_parallel_run = (fg_runner)f; }
static void fg_parallel(fg_task task, void *const *args, long long blocks) {
    if (fg_parallel_run) { fg_parallel_run(task, args, blocks); return; }
    volatile int *const count = fg_sigint_count();  /* Ctrl-C: no further block */
    const int seen = *count;
    for (long long b = 0; b < blocks && *count == seen; ++b) task(args, b);
}
"""
POOL = cnode.Piece("pool", _POOL_ENTRY, requires=[interrupt.INTERRUPT])
MODULE_HEADER = interrupt.HEADER + _POOL_ENTRY  # both, as text

# The pool. `fg_state` is the current call: generation << 32 | blocks << 16 | next block.
# A block is claimed by a compare-and-swap of the whole word, so a claim can only succeed
# while its call is live; the claimer then reads the call's task (written before the word
# was published) and, when done, counts it in `fg_done`, which the caller waits for.
POOL_SOURCE = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>
typedef void (*fg_task)(void *const *, long long);
""" + interrupt.HEADER + r"""

static int fg_threads = 1;
static long long fg_spin_ns = 1000000;
/* Smaller calls use only the workers already awake: waking one costs the caller more than
   it saves there (on this project's VM, below 256k elements) */
#define FG_WAKE_MIN_BLOCKS 8
static pthread_mutex_t fg_submit = PTHREAD_MUTEX_INITIALIZER;  /* one caller at a time */
static pthread_mutex_t fg_sleep_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t fg_wake = PTHREAD_COND_INITIALIZER;
static _Atomic unsigned long long fg_state;
static _Atomic long long fg_done;
static _Atomic int fg_sleepers;
static _Atomic long long fg_worker_blocks;  /* blocks the workers ran (tests read it) */
static fg_task fg_call_task;
static void *const *fg_call_args;
static unsigned long long fg_generation;
static int fg_started;  /* whether this process's workers exist (a forked child: not yet) */

static long long fg_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static inline void fg_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Claims and runs one block of the live call; 0 when none is left. */
static int fg_run_one(void) {
    unsigned long long s = atomic_load_explicit(&fg_state, memory_order_acquire);
    for (;;) {
        const unsigned long long blocks = (s >> 16) & 0xffff, next = s & 0xffff;
        if (next >= blocks) return 0;
        if (atomic_compare_exchange_weak_explicit(&fg_state, &s, s + 1,
                                                  memory_order_acq_rel, memory_order_acquire)) {
            fg_call_task(fg_call_args, (long long)next);  /* the call is live until counted */
            atomic_fetch_add_explicit(&fg_done, 1, memory_order_release);
            return 1;
        }
    }
}

/* After a SIGINT: no block of the live call starts any more; those not started count as
   done (the caller still waits for the ones running). */
static void fg_cancel(void) {
    unsigned long long s = atomic_load_explicit(&fg_state, memory_order_acquire);
    for (;;) {
        const unsigned long long blocks = (s >> 16) & 0xffff, next = s & 0xffff;
        if (next >= blocks) return;
        if (atomic_compare_exchange_weak_explicit(&fg_state, &s, (s & ~0xffffULL) | blocks,
                                                  memory_order_acq_rel, memory_order_acquire)) {
            atomic_fetch_add_explicit(&fg_done, (long long)(blocks - next), memory_order_release);
            return;
        }
    }
}

static void *fg_worker(void *unused) {
    (void)unused;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, 0);  /* signals go to Python's threads */
    for (;;) {
        long long idle = fg_now();
        int spins = 0;
        for (;;) {
            if (fg_run_one()) {
                atomic_fetch_add_explicit(&fg_worker_blocks, 1, memory_order_relaxed);
                idle = fg_now();
                continue;
            }
            fg_relax();
            if (++spins % 64 == 0) {  /* yielding: a runnable thread (OpenBLAS's) goes first */
                if (fg_now() - idle > fg_spin_ns) break;
                sched_yield();
            }
        }
        pthread_mutex_lock(&fg_sleep_lock);
        atomic_fetch_add(&fg_sleepers, 1);  /* before the check: a caller then wakes us */
        const unsigned long long seen = atomic_load(&fg_state);
        while ((seen & 0xffff) >= ((seen >> 16) & 0xffff) && atomic_load(&fg_state) == seen)
            pthread_cond_wait(&fg_wake, &fg_sleep_lock);
        atomic_fetch_sub(&fg_sleepers, 1);
        pthread_mutex_unlock(&fg_sleep_lock);
    }
    return 0;
}

/* A forked child has the parent's memory but none of its workers: it starts its own. */
static void fg_forked(void) {
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t c = PTHREAD_COND_INITIALIZER;
    fg_submit = m;
    fg_sleep_lock = m;
    fg_wake = c;
    atomic_store(&fg_sleepers, 0);
    atomic_store(&fg_state, 0);
    fg_started = 0;
}

int fg_pool_configure(int threads, long long spin_ns) {
    static int registered;
    pthread_mutex_lock(&fg_submit);
    if (!registered) { pthread_atfork(0, 0, fg_forked); registered = 1; }
    if (!fg_started) {
        fg_threads = threads < 1 ? 1 : threads;
        fg_spin_ns = spin_ns;
    }
    const int now = fg_threads;
    pthread_mutex_unlock(&fg_submit);
    return now;
}

static void fg_start(void) {
    fg_started = 1;
    for (int k = 1; k < fg_threads; ++k) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &attr, fg_worker, 0) != 0) fg_threads = k;
        pthread_attr_destroy(&attr);
    }
}

long long fg_pool_worker_blocks(void) { return atomic_load(&fg_worker_blocks); }

void fg_parallel_run(fg_task task, void *const *args, long long blocks) {
    volatile int *const count = fg_sigint_count();  /* Ctrl-C: see interrupt.py */
    const int seen = *count;
    if (blocks <= 1 || fg_threads <= 1 || blocks > 0xffff ||
        pthread_mutex_trylock(&fg_submit) != 0) {
        for (long long b = 0; b < blocks && *count == seen; ++b) task(args, b);
        return;
    }
    if (!fg_started) fg_start();
    fg_call_task = task;
    fg_call_args = args;
    atomic_store_explicit(&fg_done, 0, memory_order_relaxed);
    fg_generation = (fg_generation + 1) & 0xffffffffULL;
    atomic_store(&fg_state, fg_generation << 32 | (unsigned long long)blocks << 16);
    int asleep = atomic_load(&fg_sleepers);
    if (asleep > 0 && blocks >= FG_WAKE_MIN_BLOCKS) {  /* no more than there are blocks for */
        pthread_mutex_lock(&fg_sleep_lock);
        for (long long k = 0; k < asleep && k < blocks - 1; ++k) pthread_cond_signal(&fg_wake);
        pthread_mutex_unlock(&fg_sleep_lock);
    }
    while (fg_run_one()) {
        if (*count != seen) {
            fg_cancel();
            break;
        }
    }
    /* the blocks still running on workers; yielding now and then, in case one of them was
       preempted in favour of this thread */
    for (int spins = 1; atomic_load_explicit(&fg_done, memory_order_acquire) < blocks; ++spins) {
        fg_relax();
        if (spins % 64 == 0) sched_yield();
    }
    pthread_mutex_unlock(&fg_submit);
}
"""


def threads():
    """The pool's threads, the caller included: `OMP_NUM_THREADS` when set (as the
    benchmarks pin one thread), else the CPUs this process may run on, no more than its
    cgroup's CPU quota (a container limited to 2 CPUs on a 64-core host: 2, not 64 threads
    spinning through the quota)."""
    env = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    return cpus()


def cpus():
    """The CPUs this process may run on (its affinity), no more than its cgroup's quota."""
    try:
        count = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        count = os.cpu_count() or 1
    quota = cgroup_cpus()
    return max(1, min(count, quota)) if quota else count


def cgroup_cpus(root="/sys/fs/cgroup"):
    """The CPU quota of this process's cgroup rounded up (`cpu.max` of cgroup v2, else
    `cpu.cfs_quota_us / cpu.cfs_period_us` of v1), or None when there is none."""
    def read(name):
        try:
            with open(os.path.join(root, name)) as f:
                return f.read().split()
        except OSError:
            return None
    limit = read("cpu.max")  # "max 100000" (none) or "200000 100000"
    if not limit or limit[0] == "max":
        limit = (read("cpu/cpu.cfs_quota_us") or ["-1"]) + (read("cpu/cpu.cfs_period_us") or [])
    try:
        quota, period = int(limit[0]), int(limit[1])
    except (ValueError, IndexError):
        return None
    return -(-quota // period) if quota > 0 and period > 0 else None


_lock = threading.Lock()


def _forked():
    global _lock
    _lock = threading.Lock()  # a lock held by another thread at the fork stays held otherwise
    _preparing.clear()  # a build in another thread is not in this process


os.register_at_fork(after_in_child=_forked)


def _pool(cc):
    """The pool's loaded module for compiler `cc` (built and configured once), or None."""
    with _lock:
        return _build_pool(cc)


@functools.cache
def _build_pool(cc):
    from funcgrad.backends.native import build
    pool_cc = dataclasses.replace(cc, flags=cc.flags + ("-pthread",), libs=("-pthread",))
    try:
        lib = build.load(POOL_SOURCE, pool_cc)
    except (build.NativeCompileError, errors.BackendUnavailableError, OSError):
        return None  # no pthreads (or no module here): kernels run their blocks in order
    lib.fg_pool_configure.argtypes = [ctypes.c_int, ctypes.c_longlong]
    lib.fg_pool_configure(threads(), SPIN_US * 1000)
    lib.fg_pool_worker_blocks.restype = ctypes.c_longlong
    return lib


def prepare(cc):
    """Starts building the pool in a thread, beside a module about to need it (an empty
    cache then waits for one compile, not two in a row; `build._prepare`). Not a daemon: a
    process that ends meanwhile waits for it, so no temporary folder of its build is left."""
    if _preparing:  # (started already, or built: `_pool` waits for it or returns it)
        return
    _preparing.append(True)
    threading.Thread(target=_pool, args=(cc,), name="funcgrad-native-pool",
                     daemon=False).start()


_preparing = []  # whether `prepare` started the build (in this process)


def worker_blocks(cc):
    """How many blocks the pool's workers (not the callers) have run in this process."""
    lib = _pool(cc)
    return 0 if lib is None else lib.fg_pool_worker_blocks()


def address(cc):
    """The address of the pool's `fg_parallel_run` built with compiler `cc`, or None."""
    lib = _pool(cc)
    return None if lib is None else ctypes.cast(lib.fg_parallel_run, ctypes.c_void_p).value
