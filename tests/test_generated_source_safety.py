"""Nothing a user controls reaches generated source as code (`funcgrad.compiler.escape`).

Function and file names (the user's line in every generated comment), dict keys, primitive
names of extensions and constants of every dtype go through the one escaping policy. The
property checked on every backend: the generated code, comments removed, is the same token
for token as for a harmless name, it compiles, runs, gives the right numbers and has no
side effect (the payloads below would create a marker file if they ever ran).
"""

import io
import os
import re
import tokenize

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad.backends.cuda import emulate, program
from funcgrad.backends.native import build as native_build
from funcgrad.compiler import escape
from funcgrad.core import Primitive
from funcgrad.interpreters import batching

MARK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pwned-by-generated-source")
PAYLOADS = [
    f"u.py\n    open({MARK!r}, 'w')\n    #",
    f"model.py\r    open({MARK!r}, 'w')\r    #.py",
    f"f\u2028open({MARK!r}, 'w')\u2029#",
    f"x\x00y\x0b\x0c\x1c\x1d\x1e\x85*/ open({MARK!r}, 'w'); /* ??/\\",
    "é中文 \U0001f600 名前.py", "'''\"\"\"", "\\", "#" * 500,
]
names = st.one_of(st.sampled_from(PAYLOADS), st.text(min_size=1, max_size=40),
                  st.text(alphabet=st.sampled_from(list("\n\r\x00\\*/?#'\"\u2028\u2029 ab")),
                          min_size=1, max_size=20))


def _renamed(fn, filename, name):
    fn.__code__ = fn.__code__.replace(co_filename=filename, co_name=name)
    return fn


def _code_tokens(src):
    """The source's tokens without comments; program numbers and the names of bound library
    calls (`_rev_0`: derived from a primitive's name through `escape.identifier`) made
    equal. Every name must be an ASCII identifier."""
    src = re.sub(r"fg_jit_\d+", "fg_jit_N", src)
    toks = [t for t in tokenize.generate_tokens(io.StringIO(src).readline)
            if t.type not in (tokenize.COMMENT, tokenize.NL)]
    assert all(re.fullmatch(r"[A-Za-z_][0-9A-Za-z_]*", t.string)
               for t in toks if t.type == tokenize.NAME)
    return [(t.type, re.sub(r"^_\w*_(\d+)$", r"_LIB_\1", t.string)) for t in toks]


def _model(x):
    return fnp.sum(fnp.tanh(x * 2.0 + 1.0) * x)


def _source(fn, *args):
    return fg.jit(fn).lower(*args).compile().as_text()


@pytest.fixture(autouse=True)
def no_marker():
    yield
    assert not os.path.exists(MARK), "generated source executed user text"


@given(text=st.text(max_size=300))
def test_comment_is_one_inert_line_in_python_and_c(text):
    c = escape.comment(text)
    assert len(c) <= escape.COMMENT_LIMIT * 9 + 3
    assert all(ch.isprintable() for ch in c) and "\\" not in c
    assert "*/" not in c and "/*" not in c and "??" not in c
    assert c.splitlines() in ([], [c])
    ns = {}
    exec(compile(f"x = 1  # {c}\ny = 2\n", "<test>", "exec"), ns)
    assert (ns["x"], ns["y"]) == (1, 2)


@given(text=st.text(max_size=80))
def test_identifier_fragments_are_ascii_words(text):
    assert re.fullmatch(r"[0-9A-Za-z_]*", escape.identifier(text))


def test_the_reported_exploit_only_reaches_a_comment():
    ns = {"fnp": fnp}
    exec(compile("def f(x):\n    return fnp.sin(x) * 2\n", PAYLOADS[0], "exec"), ns)
    x = fnp.ones(3)
    for _ in range(2):
        np.testing.assert_allclose(np.asarray(fg.jit(ns["f"])(x)), np.sin(1.0) * 2, rtol=1e-6)
    assert "<U+000A>" in _source(ns["f"], x)  # the name is there, inside a comment
    fg.grad(lambda x: fnp.sum(ns["f"](x)))(x)
    fg.vmap(fg.jit(ns["f"]))(fnp.ones((2, 3)))


@settings(max_examples=20, deadline=None)
@given(filename=names, name=names)
def test_user_names_never_change_the_generated_code(filename, name):
    x = fnp.asarray(np.linspace(-1, 1, 6, dtype=np.float32))
    plain = _renamed(lambda x: _model(x), "model.py", "model")
    odd = _renamed(lambda x: _model(x), filename, name)
    assert _code_tokens(_source(odd, x)) == _code_tokens(_source(plain, x))
    grad_src = _source(fg.grad(odd), x)
    assert _code_tokens(grad_src) == _code_tokens(_source(fg.grad(plain), x))
    want = np.asarray(fg.grad(plain)(x))
    np.testing.assert_allclose(np.asarray(fg.jit(fg.grad(odd))(x)), want, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(fg.grad(fg.jit(odd))(x)), want, rtol=1e-6)
    batched = fg.jit(fg.vmap(odd))(fnp.stack([x, -x]))
    np.testing.assert_allclose(np.asarray(batched), [_model(x), _model(-x)], rtol=1e-6)


@settings(max_examples=15, deadline=None)
@given(keys=st.lists(names, min_size=1, max_size=4, unique=True))
def test_dict_keys_never_reach_the_generated_code(keys):
    tree = {k: fnp.full((2,), float(i)) for i, k in enumerate(keys)}
    f = lambda t: {k: v * 2.0 + 1.0 for k, v in t.items()}
    out = fg.jit(f)(tree)
    assert sorted(out) == sorted(tree)
    for i, k in enumerate(keys):
        np.testing.assert_array_equal(np.asarray(out[k]), [2.0 * i + 1.0] * 2)
    baseline = {f"k{i}": v for i, v in enumerate(tree.values())}
    assert _code_tokens(_source(f, tree)) == _code_tokens(_source(f, baseline))


def _extension(name):
    """A primitive defined outside the package, with a name the user chose."""
    p = Primitive(name)
    p.def_impl(lambda x: np.asarray(x) * 3)
    p.def_abstract_eval(lambda aval: aval)
    batching.defvectorized(p)
    return p


@settings(max_examples=15, deadline=None)
@given(name=names)
def test_extension_primitive_names_stay_in_comments(name):
    p, plain = _extension(name), _extension("triple")
    x = fnp.arange(4.0)
    f = lambda p: (lambda x: fnp.sin(p.bind(x)) + 1.0)
    np.testing.assert_allclose(np.asarray(fg.jit(f(p))(x)), np.sin(np.arange(4.0) * 3) + 1,
                               rtol=1e-6)
    assert _code_tokens(_source(f(p), x)) == _code_tokens(_source(f(plain), x))


def _c_code(src):
    """The native backend's C module without its comments (one line each: `/* */`, `//`)."""
    src = re.sub(r"/\*.*?\*/", " ", src)
    return [re.sub(r"//.*", "", ln).split() for ln in src.splitlines()]


@pytest.mark.skipif(native_build.compiler() is None, reason="no C compiler (native backend)")
@settings(max_examples=6, deadline=None)
@given(filename=names, name=names)
def test_native_c_source_is_independent_of_user_names(filename, name):
    x = fnp.asarray(np.linspace(-1, 1, 6, dtype=np.float32))
    plain = _renamed(lambda x: _model(x), "model.py", "model")
    odd = _renamed(lambda x: _model(x), filename, name)
    saved = fg.config.native
    fg.config.update("native", "sync")
    try:
        exes = [fg.jit(f).lower(x).compile() for f in (odd, plain)]
        texts = [e.as_text() for e in exes]
        assert all("C module" in t for t in texts)
        py, c = zip(*[t.split("# ---- C module (native backend) ----") for t in texts])
        assert _code_tokens(py[0]) == _code_tokens(py[1])
        assert _c_code(c[0]) == _c_code(c[1])
        np.testing.assert_allclose(np.asarray(fg.jit(odd)(x)), np.asarray(_model(x)),
                                   rtol=1e-6)
    finally:
        fg.config.update("native", saved)


@pytest.mark.skipif(emulate.compiler() is None, reason="no host C++ compiler (CUDA emulation)")
def test_cuda_source_is_independent_of_user_names(monkeypatch):
    old = program.set_runtime(emulate.EmulatedRuntime())
    try:
        x = fnp.arange(8.0)
        texts = []
        for name in PAYLOADS[:4] + ["plain"]:
            p = _extension(name)
            fn = _renamed(lambda x, p=p: fnp.exp(p.bind(fnp.sin(x) * 2.0)) + 1.0, name, name)
            jitted = fg.jit(fn, backend="cuda")
            np.testing.assert_allclose(np.asarray(jitted(x)),
                                       np.exp(np.sin(np.arange(8.0)) * 6) + 1, rtol=1e-5)
            text = jitted.lower(x).compile().as_text()
            head, _, modules = text.partition("\n\n")
            assert all(line.startswith("//") for line in head.splitlines())
            assert "__global__" in modules
            texts.append(re.sub(r"program \d+", "program N", text.replace(
                escape.comment(name), "NAME")))
        assert len(set(texts)) == 1
    finally:
        program.set_runtime(old)


def _fusible_extension(name):
    """A fusible elementwise primitive defined outside the package, named by the user, with
    a C expression: it prints inside a CUDA kernel."""
    from funcgrad.backends import cstyle
    from funcgrad.lax import utils
    p = utils.unop(name, lambda x: np.asarray(x) * 3, kinds="f")
    cstyle.def_expression(p, lambda a, d, q: f"({a[0]} * 3.0f)")
    return p


def test_cuda_text_holds_user_names_only_escaped_even_without_a_gpu(monkeypatch):
    # every payload (`*/` and `/*` among them) as the function's and file's name and as the
    # names of extension primitives, fusible (inside a kernel) or not (a library call), on
    # the CUDA text rendered without a GPU: the text is the plain name's with the escaped
    # name in its place, and holds no comment delimiter the plain text lacks
    import sys

    from funcgrad.devices import CupyProvider, set_cuda_provider
    monkeypatch.setitem(sys.modules, "cupy", None)
    old_rt, old_provider = program.set_runtime(None), set_cuda_provider(CupyProvider())
    try:
        x = fnp.arange(8.0)
        texts = []
        for name in PAYLOADS + ["plain"]:
            p, q = _extension(name + " lib"), _fusible_extension(name + " fused")
            fn = _renamed(lambda x, p=p, q=q: fnp.exp(p.bind(q.bind(fnp.sin(x) * 2.0))) + 1.0,
                          name, name)
            text = fg.jit(fn, backend="cuda").lower(x).compile().as_text()
            for part in (name + " lib", name + " fused", name):
                text = text.replace(escape.comment(part), "NAME")
            text = re.sub(r"\bfg_k0_\w+_[0-9a-f]{8}\b", "KERNEL", text)  # escape.identifier
            texts.append(re.sub(r"program \d+", "program N", text))
        assert len(set(texts)) == 1
        assert all(t.count("*/") == texts[-1].count("*/") for t in texts)
        assert all(t.count("/*") == texts[-1].count("/*") for t in texts)
    finally:
        program.set_runtime(old_rt)
        set_cuda_provider(old_provider)


SPECIAL = [0.0, -0.0, np.nan, np.inf, -np.inf, 1e-45, 65504.0, 1e300, 2**63 - 1, -2**63,
           2**64 - 1, 255, -128, True]


@settings(max_examples=25, deadline=None)
@given(dtype=st.sampled_from(["float16", "float32", "float64", "complex64", "complex128",
                              "int8", "uint8", "int32", "int64", "uint64", "bool"]),
       value=st.sampled_from(SPECIAL), imag=st.sampled_from([0.0, np.nan, -np.inf, -0.0]))
def test_constants_of_every_dtype_render_validly(dtype, value, imag):
    fg.config.update("enable_x64", True)  # conftest turns it off again after the test
    dt = np.dtype(dtype)
    with np.errstate(all="ignore"):
        c = np.asarray(complex(value, imag) if dt.kind == "c" else value).astype(dt)
    x = fnp.asarray(np.ones(3, dt))
    op = fnp.logical_xor if dt.kind == "b" else fnp.multiply
    f = lambda x: op(x, c)
    with np.errstate(all="ignore"):
        want = np.asarray(f(x))
        got = np.asarray(fg.jit(f)(x))
    np.testing.assert_array_equal(got, want)
    assert np.array_equal(np.signbit(np.real(got)), np.signbit(np.real(want)))
