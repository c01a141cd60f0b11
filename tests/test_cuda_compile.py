"""CUDA backend, tier 4: every canonical kernel compiles for sm_90 with NVRTC (through CuPy, when
importable) and with nvcc (when on PATH), with no register spills and no stack frame (ptxas
report); the two-level compile cache; compile failures are readable. No GPU needed."""

import dataclasses
import os

import cuda_canonical as canonical
import numpy as np
import pytest

import funcgrad as fg
from funcgrad.backends.cuda import compile as cc
from funcgrad.backends.cuda import renderer
from funcgrad.backends.cuda.plan import H200

ARCH = 90
MAX_REGISTERS = 64
TRIG = {"sin", "cos", "tan", "lgamma", "digamma"}
HAVE = {"nvrtc": cc.nvrtc_version() is not None, "nvcc": cc.nvcc_version() is not None}


@pytest.fixture(autouse=True)
def cache_dir(tmp_path):
    fg.config.update("cuda_cache_dir", str(tmp_path / "cuda-cache"))
    cc.clear_memory_cache()
    yield tmp_path / "cuda-cache"
    fg.config.update("cuda_cache_dir", None)
    cc.clear_memory_cache()


def canonical_plans():
    rng = np.random.default_rng(0)
    plans = []
    for case in canonical.CASES:
        plan, _, _ = case.build(rng, H200)
        plans.append(plan)
        if case.name == "ew_row_col_broadcast":
            plans.append(dataclasses.replace(plan, index="int64", name=plan.name + "_i64"))
        if case.name == "sum_split_column":
            plans.append(case.build(rng)[0])  # planned for the small device: split
    return list({p.name: p for p in plans}.values())


def batched_source(plans):
    """All modules in one translation unit (one namespace each): one compiler run."""
    return "".join(f"namespace fg_module_{k} {{\n{renderer.render(p)}\n}}\n"
                   for k, p in enumerate(plans))


@pytest.mark.parametrize("compiler", ["nvrtc", "nvcc"])
def test_every_canonical_kernel_compiles_without_spills(compiler):
    if not HAVE[compiler]:
        pytest.skip(f"{compiler} is not available: "
                    f"{cc.nvrtc_problem() if compiler == 'nvrtc' else 'nvcc not on PATH'}")
    plans = canonical_plans()
    cubin = cc.compile_source(batched_source(plans), ARCH, compiler, verbose=True,
                              name="canonical")
    assert cubin.data[:4] == b"\x7fELF"
    report = cubin.resources()
    for p in plans:
        # CUDA's own trigonometric range reduction keeps a small array on the stack
        trig = any(i.op in TRIG for i in p.spec.body)
        for name in p.kernel_names:
            r = report[name]
            assert r["spill_stores"] == 0 and r["spill_loads"] == 0, (name, r)
            assert r["stack"] == 0 or trig, (name, r)
            assert 0 < r["registers"] <= MAX_REGISTERS, (name, r)
    blocks = [p for p in plans if p.strategy == "block_per_row"]
    assert all(report[p.name]["smem"] == 4 * p.block // 32 for p in blocks)


@pytest.mark.skipif(not any(HAVE.values()), reason="neither NVRTC nor nvcc is available")
def test_a_standalone_module_compiles():
    plan, _, _ = canonical.by_name("sum_split_block").build(np.random.default_rng(0))
    cubin = cc.compile_source(renderer.render(plan), ARCH, verbose=True, name=plan.name)
    assert set(cubin.resources()) == set(plan.kernel_names)


@pytest.mark.skipif(not any(HAVE.values()), reason="neither NVRTC nor nvcc is available")
def test_compile_cache_in_memory_then_on_disk(cache_dir):
    plan, _, _ = canonical.by_name("ew_odd_size").build(np.random.default_rng(0))
    src = renderer.render(plan)
    before = dict(cc.stats)
    first = cc.compile_source(src, ARCH, name=plan.name)
    assert cc.stats["compiles"] == before.get("compiles", 0) + 1
    assert cc.compile_source(src, ARCH, name=plan.name) is first
    assert cc.stats["memory_hits"] == before.get("memory_hits", 0) + 1
    cc.clear_memory_cache()
    again = cc.compile_source(src, ARCH, name=plan.name)
    assert again.data == first.data
    assert cc.stats["disk_hits"] == before.get("disk_hits", 0) + 1
    assert cc.stats["compiles"] == before.get("compiles", 0) + 1
    other = cc.compile_source(src, 80, name=plan.name)  # another arch: another entry
    assert other.key != first.key and cc.stats["compiles"] == before.get("compiles", 0) + 2


@pytest.mark.skipif(not any(HAVE.values()), reason="neither NVRTC nor nvcc is available")
def test_a_corrupt_cache_file_is_recompiled(cache_dir):
    src = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] = 1.0f; }'
    first = cc.compile_source(src, ARCH, name="k")
    cc.clear_memory_cache()
    (path,) = [os.path.join(d, f) for d, _, fs in os.walk(cache_dir) for f in fs]
    with open(path, "r+b") as f:
        f.seek(-5, os.SEEK_END)
        f.write(b"XXXXX")
    n = cc.stats["compiles"]
    assert cc.compile_source(src, ARCH, name="k").data == first.data
    assert cc.stats["compiles"] == n + 1


@pytest.mark.skipif(not any(HAVE.values()), reason="neither NVRTC nor nvcc is available")
def test_a_compile_failure_shows_source_ir_and_says_bug():
    src = 'extern "C" __global__ void k(float* x) { x[0] = undefined_thing; }'
    with pytest.raises(cc.CudaCompileError) as info:
        cc.compile_source(src, ARCH, name="k", context="{ lambda ; a:f32[3]. let ... }")
    msg = str(info.value)
    assert "undefined_thing" in msg and "   1  extern" in msg
    assert "a:f32[3]" in msg and "funcgrad bug" in msg


def test_ptxas_report_parsing():
    log = """ptxas info    : Compiling entry function 'fg_a' for 'sm_90'
ptxas info    : Function properties for fg_a
    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 32 bytes smem"""
    assert cc.parse_ptxas(log) == {"fg_a": {"registers": 40, "stack": 8, "spill_stores": 4,
                                            "spill_loads": 4, "smem": 32}}


def test_no_compiler_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(cc, "available_compilers", lambda: [])
    with pytest.raises(fg.errors.FuncgradValueError, match="no CUDA compiler"):
        cc.compile_source("x", ARCH)


@pytest.mark.skipif(not any(HAVE.values()), reason="neither NVRTC nor nvcc is available")
def test_gpu_validation_script_dry_run(tmp_path):
    """The prepared GPU script renders and compiles everything it would run (for sm_90)."""
    import subprocess
    import sys
    script = os.path.join(os.path.dirname(__file__), "..", "tools", "gpu", "validate.py")
    res = subprocess.run([sys.executable, script, "--dry-run", "--out", str(tmp_path),
                          "--cache-dir", str(tmp_path / "cache")],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "no spills" in res.stdout and (tmp_path / "dry_run.json").exists()
