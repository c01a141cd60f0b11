"""Three programs written as a JAX user writes them (funcgrad imported as jax, funcgrad.numpy
as jnp, funcgrad.scipy as jsp, the example libraries as in `jax.example_libraries`), each
checked against a direct NumPy/SciPy computation of the same numbers:

- Gaussian-process regression: the log marginal likelihood through cho_factor/cho_solve and
  its gradient in the kernel's log-parameters (against scipy.stats and the closed-form
  gradient 0.5 tr((a a^T - K^-1) dK)), jitted, and a few steps of gradient ascent;
- a small VAE with stax and optimizers.adam on scikit-learn's digits (the ELBO against a NumPy
  forward pass, jit against eager training, the loss going down);
- an iLQR step: Jacobians of the dynamics by vmap(jacfwd), the Riccati backward pass in a
  fori_loop with jnp.linalg.solve, the forward pass in lax.scan (gains and the new trajectory
  against NumPy, and a lower cost).
"""

import numpy as np
import scipy.stats

import funcgrad as jax
import funcgrad.numpy as jnp
import funcgrad.scipy as jsp
from funcgrad.example_libraries import optimizers, stax


def close(a, b, tol):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


# --- 1. Gaussian-process regression -------------------------------------------------------------

def rbf_kernel(params, x1, x2):
    amp, length = jnp.exp(params["log_amp"]), jnp.exp(params["log_length"])
    d2 = jnp.sum((x1[:, None, :] - x2[None, :, :]) ** 2, axis=-1)
    return amp ** 2 * jnp.exp(-0.5 * d2 / length ** 2)


def gp_log_marginal_likelihood(params, x, y):
    k = rbf_kernel(params, x, x) + jnp.exp(2 * params["log_noise"]) * jnp.eye(x.shape[0])
    c, lower = jsp.linalg.cho_factor(k, lower=True)
    alpha = jsp.linalg.cho_solve((c, lower), y)
    return (-0.5 * jnp.dot(y, alpha) - jnp.sum(jnp.log(jnp.diag(c)))
            - 0.5 * x.shape[0] * jnp.log(2 * jnp.pi))


def _gp_data():
    rng = np.random.default_rng(0)
    x = rng.uniform(-3, 3, size=(20, 1))
    y = np.sin(2 * x[:, 0]) + 0.1 * rng.normal(size=20)
    return x, y


def _np_gp_value_and_grad(p, x, y):
    amp, length, noise = np.exp(p["log_amp"]), np.exp(p["log_length"]), np.exp(p["log_noise"])
    d2 = ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1)
    kf = amp ** 2 * np.exp(-0.5 * d2 / length ** 2)
    k = kf + noise ** 2 * np.eye(len(x))
    value = scipy.stats.multivariate_normal.logpdf(y, np.zeros(len(x)), k)
    a = np.linalg.solve(k, y)
    inner = np.outer(a, a) - np.linalg.inv(k)
    dk = {"log_amp": 2 * kf, "log_length": kf * d2 / length ** 2,
          "log_noise": 2 * noise ** 2 * np.eye(len(x))}
    return value, {name: 0.5 * np.trace(inner @ d) for name, d in dk.items()}


def test_gp_log_likelihood_and_gradient_against_scipy():
    jax.config.update("enable_x64", True)
    x, y = _gp_data()
    params = {"log_amp": jnp.array(0.1), "log_length": jnp.array(-0.3),
              "log_noise": jnp.array(-1.5)}
    value, grads = jax.jit(jax.value_and_grad(gp_log_marginal_likelihood))(params, x, y)
    want_value, want_grads = _np_gp_value_and_grad({k: float(v) for k, v in params.items()},
                                                   x, y)
    close(value, want_value, 1e-8)
    for name in params:
        close(grads[name], want_grads[name], 1e-7)
    k = rbf_kernel(params, x, x) + jnp.exp(2 * params["log_noise"]) * jnp.eye(20)
    close(jsp.stats.multivariate_normal.logpdf(y, jnp.zeros(20), k), want_value, 1e-8)
    step = jax.jit(lambda p: jax.tree_util.tree_map(
        lambda v, g: v + 0.01 * g, p, jax.grad(gp_log_marginal_likelihood)(p, x, y)))
    for _ in range(20):
        params = step(params)
    assert float(gp_log_marginal_likelihood(params, x, y)) > float(value) + 1.0


# --- 2. A small VAE with stax and optimizers -----------------------------------------------------

def gaussian_kl(mu, sigmasq):
    return -0.5 * jnp.sum(1.0 + jnp.log(sigmasq) - mu ** 2.0 - sigmasq)


def gaussian_sample(rng, mu, sigmasq):
    return mu + jnp.sqrt(sigmasq) * jax.random.normal(rng, mu.shape)


def bernoulli_logpdf(logits, x):
    return -jnp.sum(jnp.logaddexp(0.0, jnp.where(x, -1.0, 1.0) * logits))


encoder_init, encode = stax.serial(
    stax.Dense(32), stax.Softplus, stax.FanOut(2),
    stax.parallel(stax.Dense(4), stax.serial(stax.Dense(4), stax.Softplus)))
decoder_init, decode = stax.serial(stax.Dense(32), stax.Relu, stax.Dense(64))


def elbo(rng, params, images):
    enc_params, dec_params = params
    mu_z, sigmasq_z = encode(enc_params, images)
    logits_x = decode(dec_params, gaussian_sample(rng, mu_z, sigmasq_z))
    return bernoulli_logpdf(logits_x, images) - gaussian_kl(mu_z, sigmasq_z)


def _digits():
    from sklearn.datasets import load_digits
    return (load_digits().data[:128] > 7).astype(np.float32)


def _np_elbo(rng, params, images):
    (e_dense, _, _, ((mu_w, mu_b), ((s_w, s_b), _))), dec = params
    softplus = lambda v: np.logaddexp(0.0, v)
    h = softplus(images @ np.asarray(e_dense[0]) + np.asarray(e_dense[1]))
    mu = h @ np.asarray(mu_w) + np.asarray(mu_b)
    sig = softplus(h @ np.asarray(s_w) + np.asarray(s_b))
    z = mu + np.sqrt(sig) * np.asarray(jax.random.normal(rng, mu.shape))
    (w1, b1), _, (w2, b2) = dec
    logits = np.maximum(z @ np.asarray(w1) + np.asarray(b1), 0) @ np.asarray(w2) + np.asarray(b2)
    rec = -np.logaddexp(0.0, np.where(images > 0, -1.0, 1.0) * logits).sum()
    return rec + 0.5 * np.sum(1.0 + np.log(sig) - mu ** 2 - sig)


def test_vae_with_stax_and_adam():
    images = jnp.asarray(_digits())
    enc_rng, dec_rng, rng = jax.random.split(jax.random.PRNGKey(0), 3)
    _, enc_params = encoder_init(enc_rng, (-1, 64))
    _, dec_params = decoder_init(dec_rng, (-1, 4))
    params = (enc_params, dec_params)
    close(elbo(rng, params, images), _np_elbo(rng, params, np.asarray(images)), 2e-3)

    opt_init, opt_update, get_params = optimizers.adam(3e-3)

    def run(step_fn, n):
        state = opt_init(params)
        for i in range(n):
            state = step_fn(i, state, jax.random.fold_in(rng, i))
        return get_params(state)

    def step(i, state, key):
        loss = lambda p: -elbo(key, p, images) / images.shape[0]
        return opt_update(i, jax.grad(loss)(get_params(state)), state)
    eager, jitted = run(step, 3), run(jax.jit(step), 3)
    for a, b in zip(jax.tree_util.tree_leaves(eager), jax.tree_util.tree_leaves(jitted)):
        close(a, b, 1e-5)
    trained = run(jax.jit(step), 60)
    key = jax.random.PRNGKey(1)
    before = -float(elbo(key, params, images)) / 128
    after = -float(elbo(key, trained, images)) / 128
    assert after < 0.8 * before, (before, after)


# --- 3. An iLQR step ---------------------------------------------------------------------------

DT, T = 0.1, 12


def dynamics(x, u):
    return jnp.array([x[0] + DT * x[1], x[1] + DT * (-jnp.sin(x[0]) + u[0])])


def rollout(x0, us):
    def step(x, u):
        nx = dynamics(x, u)
        return nx, nx
    _, xs = jax.lax.scan(step, x0, us)
    return jnp.concatenate([x0[None], xs])


def cost(xs, us):
    return jnp.sum(xs ** 2) + 0.1 * jnp.sum(us ** 2)


def ilqr_gains(xs, us):
    fx, fu = jax.vmap(jax.jacfwd(dynamics, argnums=(0, 1)))(xs[:-1], us)
    ks, kks = jnp.zeros((T, 1)), jnp.zeros((T, 1, 2))

    def backward(i, carry):
        vx, vxx, ks, kks = carry
        t = T - 1 - i
        a, b = fx[t], fu[t]
        qx, qu = 2 * xs[t] + a.T @ vx, 0.2 * us[t] + b.T @ vx
        qxx, quu, qux = 2 * jnp.eye(2) + a.T @ vxx @ a, 0.2 * jnp.eye(1) + b.T @ vxx @ b, \
            b.T @ vxx @ a
        k, kk = -jnp.linalg.solve(quu, qu), -jnp.linalg.solve(quu, qux)
        vx = qx + kk.T @ quu @ k + kk.T @ qu + qux.T @ k
        vxx = qxx + kk.T @ quu @ kk + kk.T @ qux + qux.T @ kk
        return vx, 0.5 * (vxx + vxx.T), ks.at[t].set(k), kks.at[t].set(kk)
    init = (2 * xs[T], 2 * jnp.eye(2), ks, kks)
    return jax.lax.fori_loop(0, T, backward, init)[2:]


def ilqr_forward(xs, us, ks, kks):
    def step(x, inputs):
        x_ref, u, k, kk = inputs
        u_new = u + k + kk @ (x - x_ref)
        return dynamics(x, u_new), u_new
    _, new_us = jax.lax.scan(step, xs[0], (xs[:-1], us, ks, kks))
    return new_us


def _np_ilqr(xs, us):
    ks, kks = np.zeros((T, 1)), np.zeros((T, 1, 2))
    vx, vxx = 2 * xs[T], 2 * np.eye(2)
    for t in reversed(range(T)):
        a = np.array([[1.0, DT], [-DT * np.cos(xs[t, 0]), 1.0]])
        b = np.array([[0.0], [DT]])
        qx, qu = 2 * xs[t] + a.T @ vx, 0.2 * us[t] + b.T @ vx
        qxx, quu, qux = 2 * np.eye(2) + a.T @ vxx @ a, 0.2 + b.T @ vxx @ b, b.T @ vxx @ a
        ks[t], kks[t] = -np.linalg.solve(quu, qu), -np.linalg.solve(quu, qux)
        k, kk = ks[t], kks[t]
        vx = qx + kk.T @ quu @ k + kk.T @ qu + qux.T @ k
        vxx = qxx + kk.T @ quu @ kk + kk.T @ qux + qux.T @ kk
        vxx = 0.5 * (vxx + vxx.T)
    return ks, kks


def test_ilqr_step_against_numpy():
    jax.config.update("enable_x64", True)
    x0 = jnp.array([1.0, 0.0])
    us = 0.1 * jnp.ones((T, 1))
    xs = rollout(x0, us)
    ks, kks = jax.jit(ilqr_gains)(xs, us)
    want_k, want_kk = _np_ilqr(np.asarray(xs), np.asarray(us))
    close(ks, want_k, 1e-10)
    close(kks, want_kk, 1e-10)
    new_us = ilqr_forward(xs, us, ks, kks)
    assert float(cost(rollout(x0, new_us), new_us)) < float(cost(xs, us)) - 0.5
    # the forward pass against a NumPy loop over the same gains
    x, want_us = np.asarray(x0), []
    for t in range(T):
        u = np.asarray(us[t]) + want_k[t] + want_kk[t] @ (x - np.asarray(xs[t]))
        want_us.append(u)
        x = np.array([x[0] + DT * x[1], x[1] + DT * (-np.sin(x[0]) + u[0])])
    close(new_us, np.stack(want_us), 1e-10)
