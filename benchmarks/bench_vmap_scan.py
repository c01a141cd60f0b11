"""vmap and scan: per-example gradients of an MLP, and a 100-step scan RNN forward+backward.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/bench_vmap_scan.py
        [--examples 64] [--steps 100] [--repeat 15]

(1) Per-example gradients of a 64-128-128-10 tanh MLP (softmax cross-entropy) for a batch of
`--examples` examples:
- `loop grad (eager)`: a Python loop calling funcgrad.grad once per example (define-by-run);
- `loop jit(grad)`: the same loop over a jitted gradient (one compiled call per example);
- `vmap(grad) (eager)`: funcgrad.vmap(funcgrad.grad(loss)) op by op;
- `jit(vmap(grad))`: the same, compiled;
- `jax jit(vmap(grad))`: JAX, when importable.
(2) An Elman RNN (hidden 64, batch 32, input 16) over `--steps` time steps with `lax.scan`;
the value and gradient of a sum-of-squares loss with respect to all parameters:
- `funcgrad eager`: value_and_grad op by op (the scan body is evaluated per step);
- `funcgrad jit`: value_and_grad under jit (real Python loops around compiled bodies);
- `jax jit`: the same in JAX, when importable.
Every row is checked against the first one of its table before timing. Times are the median
and the minimum over `--repeat` calls, in milliseconds, after one warm-up call.
"""

import argparse
import time

import numpy as np

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import lax
from funcgrad.tree_util import tree_leaves

try:  # optional comparison tier
    import jax
    import jax.numpy as jnp
except ImportError:
    jax = jnp = None

MLP = (64, 128, 128, 10)


def timed(fn, repeat):
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        leaves = out if isinstance(out, (list, tuple)) else [out]
        for leaf in leaves:
            getattr(leaf, "block_until_ready", lambda: None)()
        times.append(time.perf_counter() - t0)
    return 1e3 * float(np.median(times)), 1e3 * float(np.min(times))


def table(title, rows):
    base = rows[0][1]
    print(f"\n{title}")
    print(f"  {'method':<26} {'median ms':>10} {'min ms':>9} {'vs first':>9}")
    for name, med, mn in rows:
        print(f"  {name:<26} {med:10.3f} {mn:9.3f} {base / med:8.2f}x")


# --- (1) per-example gradients of an MLP -------------------------------------------------------

def mlp_params(rng):
    return [(rng.standard_normal((a, b)).astype(np.float32) / np.float32(np.sqrt(a)),
             np.zeros(b, np.float32)) for a, b in zip(MLP[:-1], MLP[1:])]


def mlp_loss(params, x, y):
    for i, (w, b) in enumerate(params):
        x = x @ w + b
        if i < len(params) - 1:
            x = fnp.tanh(x)
    m = fnp.max(x, axis=-1, keepdims=True)
    logp = x - m - fnp.log(fnp.sum(fnp.exp(x - m), axis=-1, keepdims=True))
    return -fnp.sum(y * logp)


def jax_mlp_loss(params, x, y):
    for i, (w, b) in enumerate(params):
        x = x @ w + b
        if i < len(params) - 1:
            x = jnp.tanh(x)
    return -jnp.sum(y * jax.nn.log_softmax(x))


def per_example(n, repeat):
    rng = np.random.default_rng(0)
    params_np = mlp_params(rng)
    x = rng.standard_normal((n, MLP[0])).astype(np.float32)
    y = np.eye(MLP[-1], dtype=np.float32)[rng.integers(0, MLP[-1], n)]
    params = [(fnp.asarray(w), fnp.asarray(b)) for w, b in params_np]
    fx, fy = fnp.asarray(x), fnp.asarray(y)
    g = fg.grad(mlp_loss)
    jg = fg.jit(g)
    vg = fg.vmap(g, in_axes=(None, 0, 0))
    jvg = fg.jit(vg)
    stack = lambda gs: [np.stack([np.asarray(p[k][j]) for p in gs]) for k in range(3)
                        for j in range(2)]
    methods = [
        ("loop grad (eager)", lambda: stack([g(params, fx[i], fy[i]) for i in range(n)])),
        ("loop jit(grad)", lambda: stack([jg(params, fx[i], fy[i]) for i in range(n)])),
        ("vmap(grad) (eager)", lambda: tree_leaves(vg(params, fx, fy))),
        ("jit(vmap(grad))", lambda: tree_leaves(jvg(params, fx, fy))),
    ]
    if jax is not None:
        jparams = [(jnp.asarray(w), jnp.asarray(b)) for w, b in params_np]
        jx, jy = jnp.asarray(x), jnp.asarray(y)
        jax_fn = jax.jit(jax.vmap(jax.grad(jax_mlp_loss), in_axes=(None, 0, 0)))
        methods.append(("jax jit(vmap(grad))", lambda: tree_leaves(jax_fn(jparams, jx, jy))))
    _check(methods)
    return [(name, *timed(fn, repeat)) for name, fn in methods]


# --- (2) a scan RNN, forward and backward ------------------------------------------------------

def rnn_params(rng, d_in=16, hidden=64):
    s = lambda k: np.float32(1.0 / np.sqrt(k))
    return {"w_in": (rng.standard_normal((d_in, hidden)) * s(d_in)).astype(np.float32),
            "w_rec": (rng.standard_normal((hidden, hidden)) * s(hidden)).astype(np.float32),
            "b": np.zeros(hidden, np.float32),
            "w_out": (rng.standard_normal((hidden, 1)) * s(hidden)).astype(np.float32)}


def make_rnn_loss(np_mod, scan):
    def loss(params, h0, xs, ys):
        def step(h, x):
            h = np_mod.tanh(x @ params["w_in"] + h @ params["w_rec"] + params["b"])
            return h, h @ params["w_out"]
        _, preds = scan(step, h0, xs)
        return np_mod.mean((preds - ys) ** 2)
    return loss


def scan_rnn(steps, repeat, batch=32):
    rng = np.random.default_rng(1)
    p_np = rnn_params(rng)
    hidden = p_np["w_rec"].shape[0]
    xs = rng.standard_normal((steps, batch, p_np["w_in"].shape[0])).astype(np.float32)
    ys = rng.standard_normal((steps, batch, 1)).astype(np.float32)
    h0 = np.zeros((batch, hidden), np.float32)
    params = {k: fnp.asarray(v) for k, v in p_np.items()}
    args = (params, fnp.asarray(h0), fnp.asarray(xs), fnp.asarray(ys))
    vg = fg.value_and_grad(make_rnn_loss(fnp, lax.scan))
    jvg = fg.jit(vg)
    methods = [("funcgrad eager", lambda: _flat_vg(vg(*args))),
               ("funcgrad jit", lambda: _flat_vg(jvg(*args)))]
    if jax is not None:
        jargs = ({k: jnp.asarray(v) for k, v in p_np.items()}, jnp.asarray(h0),
                 jnp.asarray(xs), jnp.asarray(ys))
        jax_fn = jax.jit(jax.value_and_grad(make_rnn_loss(jnp, jax.lax.scan)))
        methods.append(("jax jit", lambda: _flat_vg(jax_fn(*jargs))))
    _check(methods)
    return [(name, *timed(fn, repeat)) for name, fn in methods]


def _flat_vg(res):
    loss, grads = res
    return [loss] + [grads[k] for k in sorted(grads)]


def _check(methods):
    want = [np.asarray(v) for v in methods[0][1]()]
    for name, fn in methods[1:]:
        got = [np.asarray(v) for v in fn()]
        for w, g in zip(want, got):
            np.testing.assert_allclose(g, w, rtol=2e-3, atol=2e-4, err_msg=name)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=64)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    print(f"funcgrad {fg.__version__}; jax {jax.__version__ if jax else 'not installed'}")
    table(f"(1) per-example gradients, MLP {'-'.join(map(str, MLP))}, {args.examples} "
          "examples", per_example(args.examples, args.repeat))
    table(f"(2) scan RNN value_and_grad, {args.steps} steps, batch 32, hidden 64",
          scan_rnn(args.steps, args.repeat))


if __name__ == "__main__":
    main()
