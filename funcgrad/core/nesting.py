"""Room on the Python stack for nested programs.

A program nests as deeply as the user's control flow does (a cond in a scan in a jit...),
and every walk over it recurses once per level: tracing a sub-program, evaluating it,
splitting it, compiling it. Each level costs funcgrad 8-14 frames of its own, so with
Python's default limit (1000 frames) nesting failed near 70-100 levels, although the user's
own code had used a tenth of that. A function marked `@nests` is such a level: past
`FREE_LEVELS` nested levels, each level raises the recursion limit by `FRAMES_PER_LEVEL`
while it lasts (and lowers it again when it ends), so funcgrad's own frames are not charged
to the user's recursion budget. Only `MAX_LEVELS` levels are granted, so a runaway recursion
through funcgrad still ends in a RecursionError. The limit is the interpreter's: threads
record what their levels need and the limit is the largest need. Imports nothing of funcgrad.
"""

import functools
import sys
import threading

FREE_LEVELS = 4  # what Python's own headroom covers, as before
FRAMES_PER_LEVEL = 24  # the most frames between two marked levels is 14 (cond's transpose)
MAX_LEVELS = 2000

_local = threading.local()
_lock = threading.Lock()
_needs = {}  # thread ident -> the recursion limit that its levels need
_base = [None]  # the limit before the first grant (the user's)


def nests(fn):
    """Mark `fn` as entering one nesting level of a program (see the module docstring)."""
    @functools.wraps(fn)
    def level(*args, **kwargs):
        depth = getattr(_local, "depth", 0) + 1
        _local.depth = depth
        if depth > FREE_LEVELS:
            _grant(depth)
        try:
            return fn(*args, **kwargs)
        finally:
            _local.depth = depth - 1
            if depth > FREE_LEVELS:
                _grant(depth - 1)
    return level


def _grant(depth):
    """Set the limit for this thread at `depth` levels (and the others' needs)."""
    me = threading.get_ident()
    with _lock:
        if _base[0] is None:
            _base[0] = sys.getrecursionlimit()
        base, extra = _base[0], min(depth, MAX_LEVELS) - FREE_LEVELS
        if extra > 0:
            _needs[me] = base + extra * FRAMES_PER_LEVEL
        else:
            _needs.pop(me, None)
        if not _needs:
            _base[0] = None
        try:
            sys.setrecursionlimit(max(_needs.values(), default=base))
        except RecursionError:  # lower than another thread's current depth: stays higher
            pass
