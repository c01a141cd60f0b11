"""JAX's config keys (honoured, or accepted with a documented meaning, unknown ones raising as
JAX's), the config states as context managers, disable_jit, named_scope/named_call and
ensure_compile_time_eval."""

import logging

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import config, errors
from funcgrad.config import UnknownOptionError
from funcgrad.dtypes import TypePromotionError


@pytest.fixture(autouse=True)
def _restore_config():
    saved = dict(config._values)
    yield
    for k, v in saved.items():
        if config._values[k] != v:
            config.update(k, v)


def test_unknown_keys_raise_as_jax():
    with pytest.raises(AttributeError, match="Unrecognized config option: jax_foo"):
        config.update("jax_foo", 1)
    with pytest.raises(ValueError):  # (funcgrad's earlier error type still catches it)
        config.update("no_such_option", 1)
    assert issubclass(UnknownOptionError, AttributeError)


@pytest.mark.parametrize("key,value,message", [
    ("jax_numpy_rank_promotion", "sometimes", "new enum value must be in"),
    ("jax_numpy_dtype_promotion", "loose", "new enum value must be in"),
    ("jax_default_matmul_precision", "fastest", "None or in"),
    ("jax_traceback_filtering", "x", "new enum value"),
    ("jax_default_prng_impl", "foo", "new enum value"),
    ("jax_default_prng_impl", "rbg", "only the 'threefry2x32'"),
    ("jax_threefry_partitionable", False, "partitionable layout only"),
    ("jax_enable_custom_prng", True, "keys stay raw"),
    ("jax_platforms", "tpu", "cannot run on"),
    ("jax_platform_name", "metal2", "unknown platform"),
])
def test_bad_values_are_refused_as_jax(key, value, message):
    with pytest.raises(ValueError, match=message):
        config.update(key, value)


def test_accepted_keys_read_back_under_both_spellings():
    for key, value in [("jax_platform_name", "cpu"), ("jax_platforms", "cpu,cuda"),
                       ("jax_default_matmul_precision", "highest"),
                       ("jax_default_matmul_precision", "bfloat16"),
                       ("jax_compilation_cache_dir", "/tmp/cache"),
                       ("jax_persistent_cache_min_compile_time_secs", 0),
                       ("jax_persistent_cache_min_entry_size_bytes", -1),
                       ("jax_traceback_filtering", "off"), ("jax_check_tracer_leaks", True),
                       ("jax_default_prng_impl", "threefry2x32"),
                       ("jax_threefry_partitionable", True),
                       ("jax_enable_custom_prng", False)]:
        config.update(key, value)
        assert getattr(config, key) == value == getattr(config, key[4:])
    # the computation is unchanged by the accepted keys
    np.testing.assert_allclose(fg.jit(lambda x: x @ x)(fnp.eye(2) * 3), 9 * np.eye(2))


def test_enable_checks_is_check_jaxprs():
    config.update("jax_enable_checks", False)
    assert config.check_jaxprs is False and config.enable_checks is False
    with fg.enable_checks(True):
        assert config.check_jaxprs is True


def test_debug_infs_and_nans_under_jit_and_eagerly():
    config.update("jax_debug_infs", True)
    with pytest.raises(FloatingPointError, match="debug_infs: primitive div produced an inf"):
        fnp.ones(2) / fnp.zeros(2)
    with pytest.raises(FloatingPointError, match="an inf"):
        fg.jit(lambda x: fnp.log(x))(fnp.zeros(2))
    assert float(fnp.log(fnp.ones(()))) == 0.0
    config.update("jax_debug_infs", False)
    with fg.debug_nans(True):
        with pytest.raises(FloatingPointError, match="debug_nans"):
            fnp.sqrt(-fnp.ones(2))
    assert np.isinf(np.asarray(fnp.ones(2) / fnp.zeros(2))).all()


def test_numpy_rank_promotion():
    a, b = fnp.ones((2, 3)), fnp.ones(3)
    with fg.numpy_rank_promotion("raise"):
        with pytest.raises(errors.FuncgradValueError, match=r"\(2, 3\) \(3,\)"):
            a + b
        with pytest.raises(errors.FuncgradValueError, match="where"):
            fnp.where(a > 0, b, 0.0)
        np.testing.assert_allclose(a + 1.0, 2 * np.ones((2, 3)))  # scalars still broadcast
        np.testing.assert_allclose(a + fnp.ones((1, 3)), 2 * np.ones((2, 3)))
    with fg.numpy_rank_promotion("warn"):
        with pytest.warns(UserWarning, match="rank promotion"):
            a * b
    np.testing.assert_allclose(a + b, 2 * np.ones((2, 3)))


def test_numpy_dtype_promotion_strict():
    with fg.numpy_dtype_promotion("strict"):
        assert (fnp.ones(2) * 2.0).dtype == np.float32  # weak scalars of the same kind
        with pytest.raises(TypePromotionError, match="float32', 'float16"):
            fnp.ones(2) + fnp.ones(2, fnp.float16)
        with pytest.raises(TypePromotionError, match="int32"):
            fnp.ones(2, fnp.int32) * 2.0
    assert (fnp.ones(2) + fnp.ones(2, fnp.float16)).dtype == np.float32


def test_config_states_as_context_managers():
    with fg.enable_x64(True):
        assert fnp.ones(1).dtype == np.float64 and fg.enable_x64.value
    assert fnp.ones(1).dtype == np.float32 and not fg.enable_x64.value
    with fg.enable_x64():  # a flag's default value is True, as in JAX
        assert config.enable_x64
    with pytest.raises(errors.FuncgradTypeError, match="requires an argument"):
        fg.numpy_rank_promotion()
    with fg.default_matmul_precision("float32"):
        assert config.default_matmul_precision == "float32"
    with fg.checking_leaks():
        assert config.check_tracer_leaks
    with pytest.raises(ValueError):
        with fg.numpy_rank_promotion("nope"):
            pass
    assert config.numpy_rank_promotion == "allow"


def test_disable_jit_runs_python():
    seen = []
    f = fg.jit(lambda x: seen.append(type(x).__name__) or x * 2)
    with fg.disable_jit():
        np.testing.assert_allclose(f(fnp.ones(2)), [2.0, 2.0])
        f(fnp.ones(2))
    assert seen == ["Array", "Array"] and not config.disable_jit
    f(fnp.ones(2))
    assert seen[-1] == "Tracer"
    with fg.disable_jit(False):
        f(fnp.ones(3))
    assert seen[-1] == "Tracer"


def test_log_compiles_and_explain_cache_misses(caplog):
    f = fg.jit(lambda x: fnp.cos(x) + 1)
    with caplog.at_level(logging.WARNING, logger="funcgrad"):
        with fg.log_compiles(True), fg.explain_cache_misses(True):
            f(fnp.ones(2))
            f(fnp.ones(3))
    text = caplog.text
    assert "Compiling jit(<lambda>) for cpu with inputs f32[2]" in text
    assert "f32[2] -> f32[3]" in text or "(2,) -> (3,)" in text or "f32[3]" in text
    assert text.count("tracing `<lambda>` again") == 2


def test_named_scope_and_named_call_name_the_equations():
    @fg.named_call
    def layer(x, w):
        return fnp.tanh(x @ w)

    def model(x, w):
        with fg.named_scope("block1"):
            h = layer(x, w)
            with fg.named_scope("out"):
                return fnp.sum(h * 2)
    x, w = fnp.ones((2, 3)), fnp.ones((3, 3))
    names = {e.prim.name: e.source[2] for e in fg.make_jaxpr(model)(x, w).eqns}
    assert names["tanh"] == "block1/layer/layer" and names["dot_general"] == "block1/layer/layer"
    assert names["reduce_sum"] == "block1/out/model"
    grads = fg.make_jaxpr(fg.grad(model, 1))(x, w)  # the backward pass keeps the names
    assert all(e.source[2].startswith("block1/") for e in grads.eqns
               if e.prim.name != "add_any")  # (cotangents summed by the backward pass)
    src = fg.jit(model).lower(x, w).compile().as_text()
    assert "(block1/layer/layer)" in src
    with pytest.raises(errors.FuncgradTypeError, match="must be a string"):
        with fg.named_scope(3):
            pass
    assert fg.make_jaxpr(fg.named_call(fnp.sin, name="s"))(1.0).eqns[0].source[2] == \
        "s/test_named_scope_and_named_call_name_the_equations"


def test_ensure_compile_time_eval():
    seen = []

    @fg.jit
    def f(x):
        with fg.ensure_compile_time_eval():
            n = fnp.arange(4).sum()  # concrete: Python may branch on it
            seen.append(type(n).__name__)
            y = x * 2  # traced values are still traced
            seen.append(type(y).__name__)
            big = bool(n > 5)
        return x * int(n) if big else x
    np.testing.assert_allclose(f(fnp.ones(2)), [6.0, 6.0])
    assert seen == ["Array", "Tracer"]
    eqns = fg.make_jaxpr(_cte)(1.0).eqns
    assert [e.prim.name for e in eqns] == ["add"]  # exp(1) was computed while tracing
    np.testing.assert_allclose(fg.grad(_cte)(1.0), 1.0)
    np.testing.assert_allclose(fg.vmap(_cte)(fnp.zeros(2)), [np.e, np.e], rtol=1e-6)


def _cte(x):
    with fg.ensure_compile_time_eval():
        e = fnp.exp(fnp.ones(()))
    return x + e
