"""End to end: training on scikit-learn's digits reaches a stated accuracy in seconds, jitted
and eager training give the same parameters, and a checkpoint resumes training exactly."""

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import data, io, nn, optim, random
from funcgrad.tree_util import tree_leaves, tree_map


@pytest.fixture(scope="module")
def digits():
    return data.load_digits()


@pytest.fixture(autouse=True, scope="module")
def _one_blas_thread():
    # These matrices are small: a second BLAS thread gains nothing and, on a busy 2-core CI
    # machine, waiting for it makes each product milliseconds slower (measured 10-30x).
    # threadpoolctl comes with scikit-learn, which the digits need anyway.
    from threadpoolctl import threadpool_limits
    with threadpool_limits(1, user_api="blas"):
        yield


def make_step(model, opt, train=True):
    def loss_fn(params, model_state, x, y):
        logits, model_state = model.apply(params, model_state, x, train=train)
        return nn.softmax_cross_entropy(logits, nn.one_hot(y, 10)).mean(), model_state

    def step(params, model_state, opt_state, x, y):
        (loss, model_state), grads = fg.value_and_grad(loss_fn, has_aux=True)(
            params, model_state, x, y)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optim.apply_updates(params, updates), model_state, opt_state, loss

    return step


def accuracy(model, params, model_state, x, y):
    logits, _ = model.apply(params, model_state, fnp.asarray(x))
    return float(np.mean(np.asarray(fnp.argmax(logits, axis=-1)) == y))


def test_mlp_reaches_97_percent_on_digits(digits):
    # The README example's configuration: 64-256-256-10, Adam 1e-3, 20 epochs of batch 64.
    model = nn.Sequential(nn.Linear(256), nn.ReLU(), nn.Linear(256), nn.ReLU(), nn.Linear(10))
    params, model_state = model.init(random.PRNGKey(0), fnp.asarray(digits.x_train[:1]))
    opt = optim.adam(1e-3)
    opt_state = opt.init(params)
    step = fg.jit(make_step(model, opt))
    loader = data.DataLoader((digits.x_train, digits.y_train), 64, shuffle=True, seed=0,
                             drop_last=True)
    losses = []
    for _ in range(20):
        for x, y in loader:
            params, model_state, opt_state, loss = step(params, model_state, opt_state, x, y)
            losses.append(float(loss))
    assert step.trace_count == 1
    assert np.mean(losses[-10:]) < 0.05 < 1.0 < np.mean(losses[:10])
    assert accuracy(model, params, model_state, digits.x_test, digits.y_test) >= 0.97


def model_and_optimizer():
    # No bias before BatchNorm: its true gradient is zero, and Adam would amplify the rounding
    # noise of that zero into lr-sized steps that differ between any two evaluation orders.
    model = nn.Sequential(nn.Linear(32, use_bias=False), nn.BatchNorm(), nn.ReLU(),
                          nn.Linear(10))
    opt = optim.chain(optim.clip_by_global_norm(1.0),
                      optim.adamw(optim.warmup_cosine_decay_schedule(0.0, 1e-2, 2, 10),
                                  weight_decay=1e-2, mask="**/w"))
    return model, opt


def test_jitted_training_equals_eager_training(digits):
    model, opt = model_and_optimizer()
    params, model_state = model.init(random.PRNGKey(1), fnp.asarray(digits.x_train[:1]))
    step = make_step(model, opt)
    jitted = fg.jit(step)
    eager = (params, model_state, opt.init(params))
    compiled = (params, model_state, opt.init(params))
    loader = data.DataLoader((digits.x_train, digits.y_train), 32, shuffle=True, seed=2)
    for _, (x, y) in zip(range(6), loader):
        *eager, loss_e = step(*eager, x, y)
        *compiled, loss_j = jitted(*compiled, x, y)
        np.testing.assert_allclose(float(loss_j), float(loss_e), rtol=1e-5, atol=1e-6)
    assert jitted.trace_count == 1
    for a, b in zip(tree_leaves(compiled), tree_leaves(eager)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
    assert float(optim.current_lr(compiled[2])) == pytest.approx(
        float(optim.current_lr(eager[2])), rel=1e-6)


def test_checkpoint_resumes_training_exactly(digits, tmp_path):
    model, opt = model_and_optimizer()
    params, model_state = model.init(random.PRNGKey(2), fnp.asarray(digits.x_train[:1]))
    step = fg.jit(make_step(model, opt))
    batches = list(data.DataLoader((digits.x_train, digits.y_train), 64, shuffle=True, seed=3,
                                   drop_last=True))[:8]
    run = (params, model_state, opt.init(params))
    for x, y in batches[:4]:
        *run, _ = step(*run, x, y)
    io.save(tmp_path / "mid.npz", {"run": tuple(run), "step": 4})
    for x, y in batches[4:]:
        *run, _ = step(*run, x, y)

    fresh_params, fresh_state = model.init(random.PRNGKey(9), fnp.asarray(digits.x_train[:1]))
    like = {"run": (fresh_params, fresh_state, opt.init(fresh_params)), "step": 0}
    restored = io.load(tmp_path / "mid.npz", like=like)
    assert restored["step"] == 4
    resumed = restored["run"]
    for x, y in batches[4:]:
        *resumed, _ = step(*resumed, x, y)
    assert step.trace_count == 1
    for a, b in zip(tree_leaves(resumed), tree_leaves(run)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_per_example_gradients_match_a_loop(digits):
    model = nn.Sequential(nn.Linear(16), nn.Tanh(), nn.Linear(10))
    params, state = model.init(random.PRNGKey(3), fnp.asarray(digits.x_train[:1]))

    def example_loss(params, x, y):
        logits, _ = model.apply(params, state, x[None])
        return nn.softmax_cross_entropy(logits, nn.one_hot(y[None], 10))[0]

    x, y = fnp.asarray(digits.x_train[:8]), fnp.asarray(digits.y_train[:8])
    batched = fg.jit(fg.vmap(fg.grad(example_loss), in_axes=(None, 0, 0)))(params, x, y)
    for i in range(8):
        one = fg.grad(example_loss)(params, x[i], y[i])
        for a, b in zip(tree_leaves(batched), tree_leaves(one)):
            np.testing.assert_allclose(np.asarray(a)[i], np.asarray(b), rtol=1e-5, atol=1e-6)
    mean = tree_map(lambda g: np.asarray(g).mean(0), batched)
    full = fg.grad(lambda p: fnp.mean(fg.vmap(example_loss, in_axes=(None, 0, 0))(p, x, y)))(
        params)
    for a, b in zip(tree_leaves(mean), tree_leaves(full)):
        np.testing.assert_allclose(a, np.asarray(b), rtol=1e-5, atol=1e-6)
