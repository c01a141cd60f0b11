"""The issue-27 program set: programs of many small operations (and a small CNN), with the
structure and sizes of the public JAX programs they stand for. Each `*_spec()` returns
`(make(L) -> step function, args, donated argnums, n_state, bytes moved or None)`, over a
namespace `L` (bench_native_programs.namespace) so funcgrad and JAX run the same math;
bench_native_programs.py times them (`--only gp7 logjoint advivmap maml mnist cnn`).

- `gp7`: GP regression on 7 points, jit(value_and_grad) of the negative log marginal
  likelihood over a dict of (1, 1) parameters; the covariance by a nested vmap, a cholesky
  and two triangular solves.
- `logjoint`: the log-joint of a Bayesian logistic regression (100 points, 5 features),
  value_and_grad vmapped over 16 parameter vectors (particles/chains).
- `advivmap`: one ADVI step on that model: 16 reparameterized samples drawn from a key,
  the ELBO's gradient with vmap over the samples, an SGD update.
- `maml`: MAML on sinusoid regression: an MLP 1-40-40-1, 25 tasks of 10+10 points, one inner
  SGD step (grad of grad), vmap over tasks, an Adam update of the meta-parameters.
- `mnist`: an MLP 784-1024-1024-10 on a batch of 128, softmax cross-entropy, SGD.
- `cnn`: batch 256 of 8x8x1 images (NHWC), conv 16 3x3, ReLU, max-pool 2, conv 32 3x3, ReLU,
  spatial mean, dense 10, softmax cross-entropy, Adam.
"""

import numpy as np


def _adam(L, params, grads, m, v, t, lr=1e-3, b1=0.9, b2=0.999, eps=1e-8):
    """One Adam update over matching pytrees (the same math in every library)."""
    t = t + 1
    m = L.tree_map(lambda m, g: b1 * m + (1 - b1) * g, m, grads)
    v = L.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, v, grads)
    c1, c2 = 1 - b1 ** t, 1 - b2 ** t
    params = L.tree_map(lambda p, m, v: p - lr * (m / c1) / (L.np.sqrt(v / c2) + eps),
                        params, m, v)
    return params, m, v, t


def _xent(L, logits, labels):
    logp = logits - L.logsumexp(logits, axis=-1, keepdims=True)
    return -L.np.mean(L.np.sum(logp * labels, axis=-1))


def gp7_spec(n=7):
    rng = np.random.default_rng(11)
    x = np.sort(rng.uniform(-3, 3, size=(n, 1)), axis=0).astype(np.float32)
    y = (np.sin(2 * x[:, 0]) + 0.1 * rng.normal(size=n)).astype(np.float32)
    params = {k: np.full((1, 1), v, np.float32)
              for k, v in (("log_ls", -0.3), ("log_sf", 0.0), ("log_sn", -2.3))}

    def make(L):
        def nll(p, x, y):
            ls, sf, sn = (L.np.exp(p[k][0, 0]) for k in ("log_ls", "log_sf", "log_sn"))
            kern = lambda a, b: sf * sf * L.np.exp(-0.5 * L.np.sum((a - b) ** 2) / (ls * ls))
            k = L.vmap(lambda a: L.vmap(lambda b: kern(a, b))(x))(x)
            k = k + sn * sn * L.np.eye(n, dtype=x.dtype)
            chol = L.sl.cholesky(k, lower=True)
            z = L.sl.solve_triangular(chol, y, lower=True)
            alpha = L.sl.solve_triangular(chol.T, z, lower=False)
            return (0.5 * y @ alpha + L.np.sum(L.np.log(L.np.diagonal(chol)))
                    + 0.5 * n * np.log(2 * np.pi))
        return L.value_and_grad(nll)
    return make, [params, x, y], (), 0, None


def _logistic_data(n=100, d=5):
    rng = np.random.default_rng(12)
    x = rng.normal(size=(n, d)).astype(np.float32)
    w = rng.normal(size=d).astype(np.float32)
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-x @ w))).astype(np.float32)
    return x, y


def _log_joint(L, theta, x, y):
    logits = x @ theta
    loglik = L.np.sum(y * logits - L.np.logaddexp(0.0, logits))
    return loglik - 0.5 * L.np.sum(theta * theta)


def logjoint_spec(particles=16):
    x, y = _logistic_data()
    thetas = np.random.default_rng(13).normal(size=(particles, x.shape[1])).astype(np.float32)

    def make(L):
        vg = L.value_and_grad(lambda t, x, y: _log_joint(L, t, x, y))
        return L.vmap(vg, in_axes=(0, None, None))
    return make, [thetas, x, y], (), 0, None


def advivmap_spec(samples=16):
    x, y = _logistic_data()
    d = x.shape[1]
    params = (np.zeros(d, np.float32), np.full(d, -1.0, np.float32))  # mean, log-scale
    key = np.array([0, 21], np.uint32)

    def make(L):
        def neg_elbo(p, eps, x, y):
            draw = lambda e: _log_joint(L, p[0] + L.np.exp(p[1]) * e, x, y)
            return -(L.np.mean(L.vmap(draw)(eps)) + L.np.sum(p[1]))

        def step(p, key, x, y):
            key, sub = L.random.split(key)
            eps = L.random.normal(sub, (samples, d))
            loss, g = L.value_and_grad(neg_elbo)(p, eps, x, y)
            return (p[0] - 0.01 * g[0], p[1] - 0.01 * g[1]), key, loss
        return step
    return make, [params, key, x, y], (), 2, None


def _mlp_init(rng, sizes):
    return [((rng.normal(size=(a, b)) * np.sqrt(2 / a)).astype(np.float32),
             np.zeros(b, np.float32)) for a, b in zip(sizes[:-1], sizes[1:])]


def _mlp(L, params, x):
    for w, b in params[:-1]:
        x = L.np.maximum(x @ w + b, 0.0)
    w, b = params[-1]
    return x @ w + b


def maml_spec(tasks=25, k=10, inner_lr=0.01):
    rng = np.random.default_rng(14)
    params = _mlp_init(rng, (1, 40, 40, 1))
    amp = rng.uniform(0.1, 5.0, size=(tasks, 1, 1))
    phase = rng.uniform(0, np.pi, size=(tasks, 1, 1))
    xs = rng.uniform(-5, 5, size=(2, tasks, k, 1))
    ys = amp * np.sin(xs + phase)
    xs, ys = xs.astype(np.float32), ys.astype(np.float32)
    zeros = [tuple(np.zeros_like(a) for a in layer) for layer in params]

    def make(L):
        mse = lambda p, x, y: L.np.mean((_mlp(L, p, x) - y) ** 2)

        def adapted_loss(p, xs, ys, xq, yq):
            g = L.grad(mse)(p, xs, ys)
            inner = L.tree_map(lambda p, g: p - inner_lr * g, p, g)
            return mse(inner, xq, yq)

        def meta_loss(p, xs, ys, xq, yq):
            per_task = L.vmap(adapted_loss, in_axes=(None, 0, 0, 0, 0))
            return L.np.mean(per_task(p, xs, ys, xq, yq))

        def step(p, m, v, t, xs, ys, xq, yq):
            loss, g = L.value_and_grad(meta_loss)(p, xs, ys, xq, yq)
            return (*_adam(L, p, g, m, v, t), loss)
        return step
    args = [params, zeros, [tuple(a.copy() for a in layer) for layer in zeros],
            np.float32(0), xs[0], ys[0], xs[1], ys[1]]
    return make, args, (0, 1, 2), 4, None


def mnist_spec(batch=128, lr=0.01):
    rng = np.random.default_rng(15)
    params = _mlp_init(rng, (784, 1024, 1024, 10))
    x = rng.uniform(size=(batch, 784)).astype(np.float32)
    labels = np.eye(10, dtype=np.float32)[rng.integers(0, 10, size=batch)]

    def make(L):
        loss = lambda p, x, t: _xent(L, _mlp(L, p, x), t)

        def step(p, x, t):
            value, g = L.value_and_grad(loss)(p, x, t)
            return L.tree_map(lambda p, g: p - lr * g, p, g), value
        return step
    return make, [params, x, labels], (0,), 1, None


def cnn_spec(batch=256):
    rng = np.random.default_rng(16)
    he = lambda *s: (rng.normal(size=s) * np.sqrt(2 / np.prod(s[:-1]))).astype(np.float32)
    params = {"c1": he(3, 3, 1, 16), "b1": np.zeros(16, np.float32),
              "c2": he(3, 3, 16, 32), "b2": np.zeros(32, np.float32),
              "w": he(32, 10), "b": np.zeros(10, np.float32)}
    x = rng.uniform(size=(batch, 8, 8, 1)).astype(np.float32)
    labels = np.eye(10, dtype=np.float32)[rng.integers(0, 10, size=batch)]
    zeros = {k: np.zeros_like(v) for k, v in params.items()}
    dn = ("NHWC", "HWIO", "NHWC")

    def make(L):
        conv = lambda x, w: L.lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                                       dimension_numbers=dn)

        def loss(p, x, t):
            h = L.np.maximum(conv(x, p["c1"]) + p["b1"], 0.0)
            h = L.lax.reduce_window(h, -np.inf, L.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
            h = L.np.maximum(conv(h, p["c2"]) + p["b2"], 0.0)
            return _xent(L, L.np.mean(h, axis=(1, 2)) @ p["w"] + p["b"], t)

        def step(p, m, v, t, x, labels):
            value, g = L.value_and_grad(loss)(p, x, labels)
            return (*_adam(L, p, g, m, v, t), value)
        return step
    args = [params, zeros, {k: v.copy() for k, v in zeros.items()}, np.float32(0), x, labels]
    return make, args, (0, 1, 2), 4, None


SPECS = {"gp7": gp7_spec, "logjoint": logjoint_spec, "advivmap": advivmap_spec,
         "maml": maml_spec, "mnist": mnist_spec, "cnn": cnn_spec}
