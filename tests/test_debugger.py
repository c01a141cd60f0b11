"""debug.breakpoint (driven through a fake stdin, as a user would type) and debug.log."""

import io
import logging

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import errors
from funcgrad.debugger import Debugger, DebuggerFrame


def _type(monkeypatch, commands):
    monkeypatch.setattr("sys.stdin", io.StringIO("".join(c + "\n" for c in commands)))


def test_breakpoint_under_jit_shows_values(monkeypatch, capsys):
    def model(x):
        y = fnp.sin(x)
        state = {"y": y, "n": 3}  # noqa: F841  (shown by the debugger)
        fg.debug.breakpoint()
        return y * 2

    def outer(x):
        scale = 10.0
        return fg.jit(model)(x) * scale
    _type(monkeypatch, ["p y", "pp state", "y.sum() + 1", "w", "u", "p scale", "p x",
                        "d", "l", "p nope", "c"])
    out = outer(fnp.array([0.0, np.pi / 2]))
    np.testing.assert_allclose(out, [0.0, 20.0], atol=1e-6)
    text = capsys.readouterr().out
    assert "Entering fgdb" in text and "fg.debug.breakpoint()" in text
    assert "Array([0., 1.], dtype=float32)" in text
    assert "'n': 3" in text and "Array(2., dtype=float32)" in text
    assert "in model" in text and "in outer" in text  # `w`: the recorded frames
    assert "10.0" in text  # `u` then `p scale`: the caller's variable
    assert "*** NameError: name 'nope' is not defined" in text


def test_breakpoint_eagerly_under_vmap_and_grad(monkeypatch, capsys):
    def f(x):
        y = x * 3
        fg.debug.breakpoint(num_frames=1)
        return y.sum()
    _type(monkeypatch, ["p y", "c"])
    f(fnp.ones(2))
    assert "Array([3., 3.], dtype=float32)" in capsys.readouterr().out
    _type(monkeypatch, ["p y", "c"] * 2)
    g = fg.grad(f)(fnp.ones(2))
    np.testing.assert_allclose(g, [3.0, 3.0])
    assert "Array([3., 3.], dtype=float32)" in capsys.readouterr().out
    _type(monkeypatch, ["p y.shape", "c"] * 4)
    fg.vmap(f)(fnp.ones((2, 3)))
    assert capsys.readouterr().out.count("(fgdb)") >= 2


def test_quit_stops_the_program_and_options_are_checked(monkeypatch):
    _type(monkeypatch, ["q"])
    with pytest.raises(SystemExit):
        fg.jit(lambda x: fg.debug.breakpoint() or x)(1.0)
    with pytest.raises(errors.FuncgradValueError, match="backend"):
        fg.debug.breakpoint(backend="web")
    with pytest.raises(errors.FuncgradValueError, match="mutually exclusive"):
        fg.debug.breakpoint(ordered=True, token=fnp.ones(1))
    token = fnp.ones(2)
    _type(monkeypatch, ["c"])
    assert fg.debug.breakpoint(token=token) is token


def test_debugger_commands_on_given_frames():
    frames = [DebuggerFrame("a.py", 2, "inner", ["def inner():", "    z = 1"], 1,
                            {"z": 1}, {}),
              DebuggerFrame("b.py", 5, "outer", [], None, {"z": 2, "k": [1, 2]}, {})]
    out = io.StringIO()
    Debugger(frames, stdin=io.StringIO("p z\nup\np z\nup\npp k\ndown\ndown\nc\n"),
             stdout=out).run()
    text = out.getvalue()
    assert "->      z = 1" in text
    assert text.count("\n1\n") + text.count(") 1\n") >= 1 and "2" in text
    assert "At topmost frame." in text and "At bottommost frame." in text


def test_debug_log(caplog):
    f = fg.jit(lambda x: fg.debug.log("x = {x}, sum {}", x.sum(), x=x) or x)
    with caplog.at_level(logging.INFO, logger="funcgrad.debug"):
        f(fnp.arange(3.0))
        fg.debug.log("eager {}", 7)
        fg.debug.log()("two calls {}", 8)
    messages = [r.getMessage() for r in caplog.records if r.name == "funcgrad.debug"]
    assert messages == ["x = [0. 1. 2.], sum 3.0", "eager 7", "two calls 8"]
    with pytest.raises(errors.FuncgradValueError):
        fg.debug.log("{} {}", 1)
