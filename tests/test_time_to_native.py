"""Time to native (issue 27): programs build in parallel (`tiers`' worker pool), a module two
programs share compiles once (`build.load`), the compiler is looked up once per $CC/$PATH and
probed in one round of compiler runs, and the jit hot path builds its outputs as `Array`
does (`jit_cache._output_builder`)."""

import contextlib
import functools
import threading
import types
import uuid

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import errors
from funcgrad.backends.native import build, threads, tiers
from funcgrad.compiler import jit_cache
from funcgrad.core.array import Array

needs_cc = pytest.mark.skipif(build.find_compiler() is None,
                              reason="no C compiler (the pool's structure is checked below)")


@contextlib.contextmanager
def options(**values):
    saved = {k: getattr(fg.config, k) for k in values}
    for k, v in values.items():
        fg.config.update(k, v)
    try:
        yield
    finally:
        for k, v in saved.items():
            fg.config.update(k, v)


# --- the worker pool ----------------------------------------------------------------------------

def test_builds_run_in_parallel_one_per_worker_up_to_build_jobs():
    """Three builds submitted at once are in flight together with three workers (each waits
    at a barrier only the three together pass; one worker after another would break it)."""
    tiers.drain()
    barrier, seen, passed = threading.Barrier(3, timeout=60), [], []

    def make():
        seen.append(tiers.in_flight())
        barrier.wait()  # raises BrokenBarrierError when fewer than 3 run at once
        passed.append(True)
    programs = [tiers.TieredExecutable(None) for _ in range(3)]  # kept alive: they build
    with options(native_build_jobs=3):
        for p in programs:
            tiers._submit(p, make)
        tiers.drain()
    assert passed == [True] * 3
    assert max(seen) == 3 and len(tiers._workers) >= 3
    assert all(p.wait(0).final_tier is None for p in programs)  # (make built nothing)


def test_no_more_workers_than_build_jobs():
    tiers.drain()
    started = len(tiers._workers)
    programs = [tiers.TieredExecutable(None) for _ in range(4)]
    with options(native_build_jobs=max(started, 1)):
        for p in programs:
            tiers._submit(p, lambda: None)
        tiers.drain()
    assert len(tiers._workers) == max(started, 1)


def test_build_jobs_default_to_the_cpus_and_are_checked():
    assert tiers.build_jobs() == threads.cpus() >= 1
    with options(native_build_jobs=5):
        assert tiers.build_jobs() == 5
    for bad in (0, -1, True, 2.0):
        with options(native_build_jobs=bad), pytest.raises(errors.FuncgradValueError,
                                                           match="native_build_jobs"):
            tiers.build_jobs()


# --- one compile per module -------------------------------------------------------------------

@needs_cc
def test_a_module_two_threads_load_at_once_compiles_once(monkeypatch, tmp_path):
    """The second loader of a module the first is building waits for it (`stats["waits"]`)
    and takes the same library: one compiler run."""
    name = f"fg_shared_{uuid.uuid4().hex[:12]}"
    source = f"double {name}(double x) {{ return x + 1.0; }}\n"
    built, real = [], build._build

    def slow_build(src, cc, key, folder, publish):
        built.append(key)
        for _ in range(600):  # the other thread asks meanwhile (bounded: 60 s at most)
            if build.stats["waits"] > waits:
                break
            threading.Event().wait(0.1)
        return real(src, cc, key, folder, publish)
    monkeypatch.setattr(build, "_build", slow_build)
    waits, libs = build.stats["waits"], []
    with options(native_cache_dir=str(tmp_path)):
        cc = build.compiler()
        loaders = [threading.Thread(target=lambda: libs.append(build.load(source, cc)))
                   for _ in range(2)]
        for t in loaders:
            t.start()
        for t in loaders:
            t.join()
    assert len(built) == 1 and build.stats["waits"] == waits + 1
    assert len(libs) == 2 and libs[0] is libs[1]


@needs_cc
def test_two_programs_with_the_same_kernel_compile_it_once(monkeypatch, tmp_path):
    """Two jitted functions whose programs are the same C module, built in the background by
    two workers: the compiler runs once for it (the other program takes the loaded module)."""
    built, real = [], build._run_compiler

    def counting(cc, source, out, work_fd):
        built.append(source)
        return real(cc, source, out, work_fd)
    monkeypatch.setattr(build, "_run_compiler", counting)
    scale = 3.0 + (uuid.uuid4().int % 4096) / 8  # a program no other test compiled
    # (one line: the C source names the user's line of each operation)
    f, g = fg.jit(lambda x: fnp.sin(x) * scale), fg.jit(lambda x: fnp.sin(x) * scale)
    x = fnp.ones(5)
    tiers.drain()
    with options(native="background", native_build_jobs=2, native_cache_dir=str(tmp_path)):
        want = [np.asarray(f(x)), np.asarray(g(x))]
        tiers.drain()
        got = [np.asarray(f(x)), np.asarray(g(x))]
    exes = [next(iter(h._cache.entries.values())) for h in (f, g)]
    assert all(e.exe is not None and hasattr(e.exe, "c_source") for e in exes)  # native now
    assert exes[0].exe.c_source() == exes[1].exe.c_source()
    assert built.count(exes[0].exe.c_source()) == 1
    np.testing.assert_allclose(got, want, rtol=1e-6)  # (numpy tier first, then C)


# --- the compiler: found once, probed in one round --------------------------------------------

def test_the_compiler_is_looked_up_once_per_cc_and_path(monkeypatch):
    asked = []
    monkeypatch.setattr(build.shutil, "which", lambda name: asked.append(name) or f"/x/{name}")
    monkeypatch.setattr(build, "_found", {})
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setenv("PATH", "/a")
    first = build.find_compiler()
    assert build.find_compiler() == first and len(asked) == 1
    monkeypatch.setenv("PATH", "/b")  # another PATH: looked up again
    build.find_compiler()
    monkeypatch.setenv("CC", "clang")  # $CC too
    assert build.find_compiler() == "/x/clang" and len(asked) == 3


def test_workers_asking_for_the_compiler_at_once_probe_it_once(monkeypatch):
    """Build workers start together; the first probes, the others wait for its answer (a
    probe is seven compiler runs: four workers probing at once would be 28)."""
    probes, second = [], threading.Event()

    def probe_on_disk(path, version, sanitize):
        probes.append(path)
        if len(probes) > 1:
            second.set()
        second.wait(0.5)  # (without the lock, another worker arrives meanwhile)
        return build.Compiler(path, version, ("-O2",))
    monkeypatch.setattr(build, "find_compiler", lambda: "/x/cc")
    monkeypatch.setattr(build, "_probe", functools.cache(build._probe.__wrapped__))
    monkeypatch.setattr(build, "_probe_on_disk", probe_on_disk)
    monkeypatch.setattr(build.subprocess, "run", lambda *a, **k: types.SimpleNamespace(
        stdout="cc 1.0\n"))
    start, got = threading.Barrier(4), []

    def worker():
        start.wait()
        got.append(build.compiler())
    workers = [threading.Thread(target=worker) for _ in range(4)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    assert probes == ["/x/cc"] and len(got) == 4 and len({id(c) for c in got}) == 1


@pytest.mark.parametrize("fails, want", [
    ((), ["march_native", "prefer_vector_width_512", "openmp_simd",
          "no_semantic_interposition", "vector_math"]),
    (("-fopenmp-simd",), ["march_native", "prefer_vector_width_512",
                          "no_semantic_interposition", "vector_math"]),
    (("-march=native",), ["openmp_simd", "no_semantic_interposition", "vector_math"]),
    (("-lmvec",), ["march_native", "prefer_vector_width_512", "openmp_simd",
                   "no_semantic_interposition"]),
    (("-std=c11",), None),
])
def test_the_probe_in_one_round_answers_as_one_option_after_another(monkeypatch, fails, want):
    """A compiler refusing some flags: the options kept are those a probe trying one after
    another on top of the ones kept keeps (the test programs ran at once first)."""
    runs = []

    def fake_builds(path, flags, text="", load=False, libs=()):
        runs.append(threading.current_thread().name)
        return not set(fails) & {*flags, *libs}
    monkeypatch.setattr(build, "_builds", fake_builds)
    monkeypatch.setattr(build, "_why_not", {})
    assert build._probe_options("/x/cc", "cc 1", None) == want
    assert runs.count("funcgrad-probe") == 7  # the first round, each in a thread of its own


# --- the jit hot path -------------------------------------------------------------------------

@pytest.mark.parametrize("fn", [
    lambda x: x + 1,
    lambda x: {"a": x * 2, "b": (x + 1, [x - 1, None])},
    lambda x: (x, 2),  # a weakly typed output
])
def test_outputs_are_arrays_as_the_array_constructor_makes_them(fn):
    x = fnp.arange(3.0)
    got, eager = fg.jit(fn)(x), fn(x)
    assert fg.tree_util.tree_structure(got) == fg.tree_util.tree_structure(eager)
    slots = [s for s in Array.__slots__ if s != "__weakref__"]
    for g, e in zip(fg.tree_util.tree_leaves(got), fg.tree_util.tree_leaves(eager)):
        made = Array(g._value, g.weak_type)
        assert type(g) is Array
        for s in slots:  # every field Array.__init__ sets is set alike, and no other
            assert hasattr(g, s) == hasattr(made, s), s
        np.testing.assert_array_equal(g, np.asarray(e))
        assert g.weak_type == (type(e) is int or getattr(e, "weak_type", False))


def test_a_native_program_is_called_directly_once_its_last_tier_is_in_place():
    """While building, an entry calls the tiered executable; once settled, the native one."""
    class Tiered:
        final_tier = None

        def __call__(self, *args, owned=False):
            return ["tiered"]
    entry = jit_cache._Entry.__new__(jit_cache._Entry)
    tiered = Tiered()
    assert entry.keep(tiered) is tiered and entry.tiered is tiered
    assert entry.settle() is tiered  # still building
    tiered.final_tier = final = object()
    assert entry.settle() is final and entry.exe is final and entry.tiered is None
    plain = object()  # an executable of one tier is kept as it is
    assert entry.keep(plain) is plain and entry.tiered is None and entry.exe is plain
    built = Tiered()  # one whose last tier is in place already: that tier is kept
    built.final_tier = final
    assert entry.keep(built) is built and entry.tiered is None and entry.exe is final


def test_a_compiler_that_cannot_build_is_found_out_by_the_worker(monkeypatch):
    """In the background a first call only looks the compiler up on PATH; the worker's probe
    finds it cannot build: one warning, and the program keeps its numpy tier, called
    directly from then on."""
    def probe():  # as `compiler()` finds a compiler that builds nothing
        build._why_not["/x/cc"] = "it did not build a test program"
    monkeypatch.setattr(build, "find_compiler", lambda: "/x/cc")
    monkeypatch.setattr(build, "compiler", probe)
    monkeypatch.setattr(build, "_why_not", {})
    submitted, real = [], tiers._submit
    monkeypatch.setattr(tiers, "_submit", lambda *a: submitted.append(1) or real(*a))
    monkeypatch.setattr(tiers, "_warned", set())
    f = fg.jit(lambda x: x * 3.0 + 0.25)
    tiers.drain()
    with options(native="background"), pytest.warns(RuntimeWarning, match="cc cannot build here"):
        first = np.asarray(f(fnp.ones(3)))
        tiers.drain()
    (entry,) = f._cache.entries.values()
    np.testing.assert_array_equal(f(fnp.ones(3)), first)
    assert entry.tiered is None and not isinstance(entry.exe, tiers.TieredExecutable)
    assert "np.multiply" in entry.exe.as_text()  # the numpy tier, called directly
    with options(native="background"):  # known now: later programs are not submitted
        g = fg.jit(lambda x: x - 1.0)
        g(fnp.ones(3))
    assert not isinstance(next(iter(g._cache.entries.values())).exe, tiers.TieredExecutable)
    assert submitted == [1]  # the first program's build, in a worker
