"""Deeply nested pytrees through jit, grad and vmap; the bounded jit cache and the generated
sources it releases (`config.jit_cache_size`, `linecache`)."""

import gc
import linecache

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad.compiler import jit_cache
from funcgrad.compiler.jit import RetraceWarning
from funcgrad.tree_util import tree_leaves, tree_map, tree_structure

DEPTH = 1000


def nest(leaf, depth):
    """`depth` containers around `leaf`, cycling through list, tuple and dict."""
    for i in range(depth):
        leaf = [leaf] if i % 3 == 0 else (leaf,) if i % 3 == 1 else {"k": leaf}
    return leaf


def innermost(tree):
    (leaf,) = tree_leaves(tree)
    return leaf


def close(a, b):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6)


# --- depth ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("depth", [60, 250, DEPTH])  # around the old generated-builder limits
def test_jit_outputs_nested_deep(depth):
    out = fg.jit(lambda x: nest(x * 2.0, depth))(fnp.ones(3))
    assert tree_structure(out) == tree_structure(nest(0, depth))
    close(innermost(out), [2.0] * 3)


def test_jit_inputs_and_outputs_nested_deep():
    f = fg.jit(lambda t: tree_map(lambda a: a + 1.0, t))
    tree = nest(fnp.arange(3.0), DEPTH)
    out = f(tree)
    assert tree_structure(out) == tree_structure(tree)
    close(innermost(out), [1.0, 2.0, 3.0])
    close(innermost(f(nest(fnp.ones(3), DEPTH))), [2.0] * 3)  # the cached fast path
    assert f.trace_count == 1
    with pytest.raises(TypeError, match="argument pytree structure"):
        f.lower(nest(fnp.ones(3), DEPTH)).compile()(nest(fnp.ones(3), DEPTH - 1))


def test_grad_of_a_deep_pytree():
    tree = {"deep": nest(fnp.arange(3.0), DEPTH), "w": fnp.ones(3)}

    def loss(t):
        return fnp.sum(innermost(t["deep"]) ** 2 * t["w"])
    for g in (fg.grad(loss), fg.jit(fg.grad(loss)), fg.grad(fg.jit(loss))):
        grads = g(tree)
        assert tree_structure(grads) == tree_structure(tree)
        close(innermost(grads["deep"]), [0.0, 2.0, 4.0])
        close(grads["w"], [0.0, 1.0, 4.0])


def test_vmap_of_a_deep_pytree():
    tree = nest(fnp.arange(6.0).reshape(3, 2), DEPTH)
    for f in (fg.vmap(lambda t: tree_map(lambda a: a.sum(), t)),
              fg.vmap(fg.jit(lambda t: tree_map(lambda a: a.sum(), t)))):
        out = f(tree)
        assert tree_structure(out) == tree_structure(tree)
        close(innermost(out), [1.0, 5.0, 9.0])


def test_many_leaves_round_trip_through_jit():
    tree = {f"p{i}": {"w": fnp.full(2, i), "b": (fnp.ones(1),)} for i in range(1500)}
    out = fg.jit(lambda t: tree_map(lambda a: a * 2.0, t))(tree)
    assert tree_structure(out) == tree_structure(tree)
    close(out["p1234"]["w"], [2468.0, 2468.0])


# --- the bounded cache ----------------------------------------------------------------------------

@pytest.fixture
def cache_size():
    old_size, old_warn = fg.config.jit_cache_size, fg.config.retrace_warn_after
    fg.config.update("retrace_warn_after", 10**6)
    yield lambda n: fg.config.update("jit_cache_size", n)
    fg.config.update("jit_cache_size", old_size)
    fg.config.update("retrace_warn_after", old_warn)


def jit_sources():
    return {k for k in linecache.cache if k.startswith("<funcgrad-jit-")}


def sources_of_calls(f, sizes):
    """Call `f(ones(n))` for each size; the generated sources each call registered."""
    made = []
    for n in sizes:
        before = jit_sources()
        close(f(fnp.ones(n)), 2.0 * np.ones(n) + 1.0)
        made.append(jit_sources() - before)
    return made


def test_cache_keeps_at_most_the_bound_and_drops_evicted_sources(cache_size):
    cache_size(4)
    f = fg.jit(lambda x: x * 2.0 + 1.0)
    made = sources_of_calls(f, range(1, 11))
    assert all(len(m) == 1 for m in made), "one compiled program per new shape"
    info = f.cache_info()
    assert info.size == 4 and info.traces == 10
    live = jit_sources()
    assert not any(m & live for m in made[:6]), "evicted programs keep no source"
    assert all(m <= live for m in made[6:])
    f.clear_cache()
    assert not any(m & jit_sources() for m in made)
    assert f.cache_info().size == 0


def test_evicted_entry_recompiles_and_the_miss_is_explained(cache_size):
    cache_size(2)
    f = fg.jit(lambda x: x * 2.0 + 1.0)
    sources_of_calls(f, [1, 2, 3])
    assert f.trace_count == 3
    sources_of_calls(f, [1])  # evicted: traced and compiled again, same result
    assert f.trace_count == 4
    assert "evicted" in f.explain_last_miss() and "jit_cache_size" in f.explain_last_miss()
    assert f.cache_info().last_miss == f.explain_last_miss()
    sources_of_calls(f, [1])
    assert f.trace_count == 4


def test_recently_used_entries_outlive_older_ones(cache_size):
    cache_size(3)
    f = fg.jit(lambda x: x * 2.0 + 1.0)
    sources_of_calls(f, [1, 2, 3, 1, 4])  # 1 was used again (fast path) before 4 came
    assert f.trace_count == 4
    sources_of_calls(f, [1, 3, 4])
    assert f.trace_count == 4
    sources_of_calls(f, [2])
    assert f.trace_count == 5
    g = fg.jit(lambda x, *, s: x * s)
    for n in (1, 2, 3, 1, 4):  # keyword arguments take the slow path
        g(fnp.ones(n), s=fnp.ones(n))
    g(fnp.ones(1), s=fnp.ones(1))
    assert g.trace_count == 4


def test_hit_counts_survive_eviction(cache_size):
    cache_size(1)
    f = fg.jit(lambda x: x * 2.0 + 1.0)
    sources_of_calls(f, [1, 1, 1, 2, 2])
    assert f.cache_info().hits == 3 and f.cache_info().misses == 2


def test_retrace_warning_with_a_bounded_cache(cache_size):
    cache_size(2)
    fg.config.update("retrace_warn_after", 3)
    f = fg.jit(lambda x: x * 2.0 + 1.0)
    sources_of_calls(f, [1, 2, 3])
    with pytest.warns(RetraceWarning, match="traced 4 times.*evicted"):
        sources_of_calls(f, [1])


def test_dead_jitted_lambdas_leave_no_sources():
    before = jit_sources()
    for i in range(300):
        f = fg.jit(lambda x, i=i: x * 2.0 + i)
        close(f(fnp.ones(2)), [2.0 + i] * 2)
    del f
    gc.collect()
    assert jit_sources() - before == set()


def test_program_cache_of_derived_programs_is_bounded(cache_size):
    cache_size(4)
    f = fg.jit(lambda x: fnp.sin(x) * 2.0)
    before = jit_sources()
    batched = fg.vmap(f)
    for n in range(1, 11):  # one batched program per batch size
        close(batched(fnp.ones((n, 3))), 2.0 * np.sin(np.ones((n, 3))))
    (entry,) = f._cache.entries.values()
    assert len(jit_cache.programs.cached(entry.jaxpr)) <= 4
    assert len(jit_sources() - before) <= 4
    f.clear_cache()
    assert jit_sources() - before == set()


def test_compiled_object_outlives_clear_cache_and_its_profile_source_goes_with_it():
    f = fg.jit(lambda x: x * 2.0 + 1.0)
    before = jit_sources()
    compiled = f.lower(fnp.ones(3)).compile()
    compiled._exe.profile(np.ones(3, np.float32), repeat=1)
    assert len(jit_sources() - before) == 2  # the program and its profiled variant
    f.clear_cache()
    close(compiled(fnp.ones(3)), [3.0] * 3)  # traces again
    assert "return" in compiled.as_text()
    del compiled
    f.clear_cache()
    gc.collect()
    assert jit_sources() - before == set()

