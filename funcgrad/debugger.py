"""`debug.breakpoint` (an interactive debugger that stops inside transformed code) and
`debug.log` (`debug.print` through Python's logging).

`breakpoint()` records the local and global variables of the calling frames at trace time;
the traced values among them become operands of an effectful primitive, so when the program
runs (eagerly or compiled) a `Debugger` (a `cmd.Cmd`, JAX's jdb commands: `p`, `pp`, `l`,
`u`, `d`, `w`, `c`, `q`, or an expression) opens on those frames with the concrete values.
It reads `sys.stdin` (tests pass their own stream). Both reuse `funcgrad.debug`'s effect
primitives. Imports errors, core, tree_util and funcgrad.debug.
"""

import cmd
import inspect
import logging
import pprint
import sys
import threading
import traceback

from funcgrad import debug, errors
from funcgrad.core import Array, Tracer
from funcgrad.tree_util import tree_flatten

__all__ = ["Debugger", "DebuggerFrame", "breakpoint", "debug_breakpoint_p", "debug_log_p", "log"]

_lock = threading.Lock()


class DebuggerFrame:
    """A Python frame as the debugger shows it: file, line, source and variables."""

    def __init__(self, filename, lineno, function, source, offset, locals, globals):
        self.filename, self.lineno, self.function = filename, lineno, function
        self.source, self.offset = source, offset
        self.locals, self.globals = locals, globals

    @classmethod
    def from_frame(cls, frame):
        try:
            lines, start = inspect.getsourcelines(frame)
            source, offset = [s.rstrip("\n") for s in lines], frame.f_lineno - max(start, 1)
        except (OSError, TypeError):
            source, offset = [], None
        return cls(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name, source,
                   offset, dict(frame.f_locals), frame.f_globals)


class Debugger(cmd.Cmd):
    """A text debugger over recorded frames (JAX's jdb commands); `run()` reads commands
    until `c` (continue). Frame 0 is the one that called `breakpoint`."""

    prompt = "(fgdb) "

    def __init__(self, frames, stdin=None, stdout=None):
        super().__init__(stdin=stdin, stdout=stdout)
        self.use_rawinput = stdin is None
        self.frames, self.index = frames, 0

    def evaluate(self, expr):
        f = self.frames[self.index]
        return eval(expr, dict(f.globals), dict(f.locals))

    def _show(self, expr, fmt):
        try:
            print(fmt(self.evaluate(expr)), file=self.stdout)
        except Exception:
            print("***", traceback.format_exception_only(*sys.exc_info()[:2])[-1].strip(),
                  file=self.stdout)

    def default(self, line):
        """Evaluates an expression and prints its value."""
        self._show(line, repr)

    def do_p(self, arg):
        """p expression: evaluate and print the value of an expression."""
        self._show(arg, repr)

    def do_pp(self, arg):
        """pp expression: evaluate and pretty-print the value of an expression."""
        self._show(arg, pprint.pformat)

    def do_up(self, arg):
        """u(p): move up a stack frame (to the caller)."""
        if self.index == len(self.frames) - 1:
            print("At topmost frame.", file=self.stdout)
        else:
            self.index += 1
        self.print_context()
    do_u = do_up

    def do_down(self, arg):
        """d(own): move down a stack frame."""
        if self.index == 0:
            print("At bottommost frame.", file=self.stdout)
        else:
            self.index -= 1
        self.print_context()
    do_d = do_down

    def do_list(self, arg):
        """l(ist): the source around the current line."""
        self.print_context(5)
    do_l = do_list

    def do_where(self, arg):
        """w(here), bt: the recorded frames, the most recent last."""
        out = ["Traceback:"]
        for f in self.frames[::-1]:
            out.append(f'  File "{f.filename}", line {f.lineno}, in {f.function}')
            out.append(f"    {f.source[f.offset].strip()}" if f.offset is not None
                       else "    <no source>")
        print("\n".join(out), file=self.stdout)
    do_w = do_bt = do_where

    def do_continue(self, arg):
        """c(ont(inue)): continue running the program."""
        return True
    do_c = do_cont = do_continue

    def do_quit(self, arg):
        """q(uit), exit: stop the program (SystemExit, as JAX's debugger)."""
        raise SystemExit(0)
    do_q = do_exit = do_EOF = do_quit

    def print_context(self, lines=2):
        f = self.frames[self.index]
        out = [f"> {f.filename}({f.lineno}) {f.function}()"]
        if f.offset is not None:
            for i in range(max(0, f.offset - lines), min(len(f.source), f.offset + lines + 1)):
                out.append(("->  " if i == f.offset else "    ") + f.source[i])
        print("\n".join(out), file=self.stdout)

    def preloop(self):
        print("Entering fgdb (funcgrad's debugger; c to continue, help for commands):",
              file=self.stdout)
        self.print_context()

    def run(self):
        self.cmdloop()


class _Frames:
    """The recorded frames of one `breakpoint` call, a primitive parameter (compared by
    identity): each local variable flattened, its traced leaves replaced by the operands'
    values when the breakpoint runs."""

    def __init__(self, frames):
        self.frames, self.entries, self.traced = frames, [], []
        for i, f in enumerate(frames):
            for name, value in f.locals.items():
                try:
                    leaves, tree = tree_flatten(value)
                except Exception:  # (a value whose pytree flattening fails: kept as it is)
                    leaves, tree = [value], None
                mask = [isinstance(x, Tracer) for x in leaves]
                self.entries.append((i, name, tree, [None if m else x
                                                     for x, m in zip(leaves, mask)], mask))
                self.traced += [x for x, m in zip(leaves, mask) if m]

    def with_values(self, values):
        """The frames with each traced value replaced by its value (an Array)."""
        locals_ = [dict(f.locals) for f in self.frames]
        it = iter(values)
        for i, name, tree, leaves, mask in self.entries:
            if any(mask):
                full = [Array(next(it)) if m else x for x, m in zip(leaves, mask)]
                locals_[i][name] = full[0] if tree is None else tree.unflatten(full)
        return [DebuggerFrame(f.filename, f.lineno, f.function, f.source, f.offset, lo,
                              f.globals) for f, lo in zip(self.frames, locals_)]


def breakpoint(*, backend=None, filter_frames=True, num_frames=None, ordered=False, token=None,
               **kwargs):
    """Stop and open a debugger when this line runs, also inside `jit`, `vmap` and `grad`:
    its commands print the variables of the calling frames with their values (`p x`,
    `pp params`, an expression), move between frames (`u`, `d`, `w`, `l`) and continue
    (`c`) or quit (`q`).

    Args:
        backend: the debugger: None or "cli" (the text debugger on stdin/stdout).
        filter_frames: leave funcgrad's own frames out.
        num_frames: how many calling frames to record (None: all).
        ordered: accepted; funcgrad runs effects in program order.
        token: returned unchanged (JAX's alternative to `ordered`).

    Returns:
        `token`.

    Example:
        >>> @jit
        ... def f(x):
        ...     y = fnp.sin(x)
        ...     debug.breakpoint()      # (fgdb) p y  ->  Array([0.841471], dtype=float32)
        ...     return y
    """
    if backend not in (None, "cli"):
        raise errors.op_error("debug.breakpoint", f"unknown debugger backend {backend!r}; "
                              "funcgrad has the text debugger (backend=None or 'cli')",
                              cls=errors.FuncgradValueError)
    if token is not None and ordered:
        raise errors.op_error("debug.breakpoint", "`ordered` and `token` are mutually "
                              "exclusive arguments.", cls=errors.FuncgradValueError)
    frames, f = [], sys._getframe(1)
    while f is not None and (num_frames is None or len(frames) < num_frames):
        if not (filter_frames and errors._is_internal(f.f_code)):
            frames.append(DebuggerFrame.from_frame(f))
        f = f.f_back
    info = _Frames(frames)
    debug_breakpoint_p.bind(*info.traced, frames=info)
    return token


def _breakpoint_run(*vals, frames):
    with _lock:
        Debugger(frames.with_values(vals)).run()


debug_breakpoint_p = debug._effect_primitive("debug_breakpoint", _breakpoint_run)


def log(fmt=None, *args, ordered=False, partitioned=False, skip_format_check=False, **kwargs):
    """`debug.print` through Python's `logging`: each time the line runs (also inside `jit`),
    the formatted message goes to the logger "funcgrad.debug" at INFO level.

    Example:
        >>> logging.basicConfig(level=logging.INFO)
        >>> jit(lambda x: debug.log("x = {}", x) or x)(1.0)     # INFO:funcgrad.debug:x = 1.0
    """
    def _log(fmt, *args, **kwargs):
        where = errors.user_frame(3)
        if not skip_format_check:
            debug._check_format(fmt, args, kwargs, where)
        dynamic, params = debug._split(args, kwargs)
        debug_log_p.bind(*dynamic, fmt=fmt, _where=where, **params)
    if fmt is not None:
        _log(fmt, *args, **kwargs)
        return None
    if args or kwargs:
        raise errors.op_error("debug.log", "the format must be a string, got None")
    return _log


def _log_run(*vals, fmt, _tree, _static, _where=None):
    args, kwargs = debug._rebuild(vals, _tree, _static)
    logging.getLogger("funcgrad.debug").info(debug._FORMATTER.vformat(fmt, args, kwargs))


debug_log_p = debug._effect_primitive("debug_log", _log_run)
