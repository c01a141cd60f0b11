"""`debug.print` and `debug.callback` under `vmap` run once per example with that example's
values, as in JAX (checked against jax 0.10.2 when this was written): eagerly, under
jit(vmap), vmap(jit), nested vmaps (outer index first), grad and inside loops; JAX's two-call
form takes the options first."""

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import debug, lax


def _logged(seen):
    def f(x, y):
        debug.print("x={x} y={y}", x=x, y=y)
        debug.callback(lambda a, b: seen.append((np.asarray(a).tolist(), float(b))), x, y)
        return x * 2
    return f


X = np.arange(6.0, dtype=np.float32).reshape(3, 2)
ROWS = ["x=[0. 1.] y=7.0", "x=[2. 3.] y=7.0", "x=[4. 5.] y=7.0"]


@pytest.mark.parametrize("wrap", ["vmap", "jit(vmap)", "vmap(jit)", "grad(vmap)", "vmap(grad)"])
def test_print_and_callback_run_once_per_example(wrap, capsys):
    seen = []
    f = _logged(seen)
    run = {
        "vmap": lambda: fg.vmap(f, in_axes=(0, None))(X, 7.0),
        "jit(vmap)": lambda: fg.jit(fg.vmap(f, in_axes=(0, None)))(X, 7.0),
        "vmap(jit)": lambda: fg.vmap(fg.jit(f), in_axes=(0, None))(X, 7.0),
        "grad(vmap)": lambda: fg.grad(lambda x: fg.vmap(f, in_axes=(0, None))(x, 7.0).sum())(X),
        "vmap(grad)": lambda: fg.vmap(fg.grad(lambda x: f(x, 7.0).sum()))(X),
    }[wrap]
    out = run()
    want = 2 * np.ones_like(X) if "grad" in wrap else 2 * X
    np.testing.assert_array_equal(np.asarray(out), want)
    assert capsys.readouterr().out.splitlines() == ROWS
    assert seen == [([0.0, 1.0], 7.0), ([2.0, 3.0], 7.0), ([4.0, 5.0], 7.0)]


def test_batch_axes_nesting_and_batched_second_operands(capsys):
    seen = []
    f = _logged(seen)
    fg.vmap(f, in_axes=(1, None))(X, 7.0)
    fg.vmap(f)(X, fnp.array([1.0, 2.0, 3.0]))
    nested = fg.vmap(fg.vmap(f, in_axes=(0, None)), in_axes=(0, None))
    fg.jit(nested)(np.arange(8.0, dtype=np.float32).reshape(2, 2, 2), 7.0)
    fg.vmap(f, in_axes=(0, None))(fnp.ones((0, 2)), 7.0)  # no examples: no call
    assert [s[0] for s in seen] == [[0.0, 2.0, 4.0], [1.0, 3.0, 5.0], [0.0, 1.0], [2.0, 3.0],
                                    [4.0, 5.0], [0.0, 1.0], [2.0, 3.0], [4.0, 5.0], [6.0, 7.0]]
    assert [s[1] for s in seen[2:5]] == [1.0, 2.0, 3.0]
    assert len(capsys.readouterr().out.splitlines()) == len(seen)


def test_loops_and_branches_under_vmap(capsys):
    def body(c, _):
        debug.print("c {}", c)
        return c + 1, None
    for wrap in (lambda g: g, fg.jit):
        wrap(fg.vmap(lambda x: lax.scan(body, x, None, length=2)[0]))(fnp.array([10.0, 20.0]))
        assert capsys.readouterr().out.splitlines() == ["c 10.0", "c 20.0", "c 11.0", "c 21.0"]
    # a batched predicate runs both branches on every example (a select), as in JAX
    fg.vmap(lambda x: lax.cond(x > 0, lambda v: debug.print("pos {}", v) or v,
                               lambda v: v, x))(fnp.array([-1.0, 2.0]))
    assert capsys.readouterr().out.splitlines() == ["pos -1.0", "pos 2.0"]
    fg.vmap(lambda x: debug.print("no arrays") or x)(fnp.arange(3.0))  # nothing batched: once
    assert capsys.readouterr().out.splitlines() == ["no arrays"]


def test_two_call_form_and_unchecked_formats(capsys):
    seen = []
    fg.vmap(lambda x: debug.callback(ordered=True)(seen.append, x) or x)(fnp.arange(3.0))
    assert [float(s) for s in seen] == [0.0, 1.0, 2.0]
    fg.jit(lambda x: debug.print(ordered=True, partitioned=True)("x={}", x) or x)(fnp.ones(1))
    debug.print("values:", 1.5, fnp.arange(2), skip_format_check=True)
    assert capsys.readouterr().out.splitlines() == ["x=[1.]", "values: 1.5 [0 1]"]
    assert callable(debug.print()) and callable(debug.callback(partitioned=False))


def test_callback_values_do_not_change_after_the_call():
    seen = []

    def f(x, m):  # under jit, y's buffer is reused for a later value
        y = fnp.exp(x)
        debug.callback(seen.append, y)
        return fnp.cos(fnp.sin(y @ m) @ m) @ m
    fg.jit(f)(fnp.ones((4, 4)), fnp.eye(4))
    np.testing.assert_allclose(np.asarray(seen[0]), np.full((4, 4), np.e), rtol=1e-6)
