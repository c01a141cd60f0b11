"""The docs' code runs: every ```python block of the pages under docs/ runs here, and the
output a page shows is checked; each picture's program is built and drawn as DOT.

The convention is `tools/docs/mdrun.py`'s (also stated on docs/index.md): the python blocks
of a page run in order in one namespace; a ```text block right after one is what it prints
(whitespace normalized; ```text approx: numbers to a relative 1e-4); ```python no-run only on
the GPU and MPI pages.

`python tests/test_docs.py --update docs/tutorials/jit.md` rewrites a page's existing text
blocks with what its code prints now (then read the diff).
"""

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")
sys.path.insert(0, os.path.join(ROOT, "tools", "docs"))

import mdrun  # noqa: E402

NO_RUN_PAGES = {"tutorials/gpu.md", "tutorials/distributed.md"}


def pages():
    out = []
    for folder, _, files in os.walk(DOCS):
        out += [os.path.relpath(os.path.join(folder, f), DOCS) for f in files if f.endswith(".md")]
    return sorted(out)


def read(page):
    with open(os.path.join(DOCS, page)) as f:
        return f.read()


def mismatches(page, text, pictures=None):
    """[(Code, printed)] of the blocks whose output differs from what the page shows."""
    def draw(picture, value):
        from funcgrad import viz
        dot = viz.to_dot(value)
        assert dot.startswith("digraph"), f"{page}:{picture.line}: {dot[:80]!r}"
        if pictures is not None:
            pictures.append(picture)

    ran = mdrun.run(page, text, on_picture=draw)
    return [(item, printed) for item, printed in ran
            if item.expected is not None and not mdrun.same(printed, item.expected, item.approx)]


@pytest.mark.parametrize("page", pages())
def test_page_runs_and_shows_its_output(page):
    bad = mismatches(page, read(page))
    report = [f"{page}:{item.line}: the block printed\n{printed}\nthe page shows\n{item.expected}"
              for item, printed in bad]
    assert not bad, "\n\n".join(report)


@pytest.mark.parametrize("page", pages())
def test_only_gpu_and_mpi_blocks_are_not_run(page):
    skipped = [item.line for item in mdrun.parse(read(page))
               if isinstance(item, mdrun.Code) and not item.run]
    assert not skipped or page in NO_RUN_PAGES, f"{page}: no-run blocks at lines {skipped}"


def test_the_runner_catches_wrong_output():
    text = "```python\nprint(1 + 1)\n```\n\n```text\n3\n```\n"
    (item,) = mdrun.parse(text)
    assert item.run and item.expected == "3\n" and not item.approx and item.line == 2
    assert len(mismatches("page.md", text)) == 1
    assert not mismatches("page.md", text.replace("3", "2"))
    assert mdrun.same("  2.00001 \n", "2.0", approx=True)
    assert not mdrun.same("2.1", "2.0", approx=True) and not mdrun.same("a 2.0", "b 2.0", True)
    assert mdrun.same("def fg_jit_11(a0):", "def fg_jit_2(a0):", approx=False)
    assert not mdrun.same("def fg_jit_1(a1):", "def fg_jit_1(a0):", approx=False)


def test_output_blocks_belong_to_the_block_just_above():
    text = "```python no-run\nx = 1\n```\nsome prose\n```text\n1\n```\n"
    (item,) = mdrun.parse(text)
    assert item.expected is None and not item.run


def test_blocks_share_a_namespace_and_point_into_the_page():
    text = "```python\nx = 2\n```\n\n```python\nimport traceback\ntry:\n    x / 0\n" \
           "except ZeroDivisionError as e:\n    print(traceback.extract_tb(e.__traceback__)[-1]" \
           ".lineno)\n```\n"
    (_, printed), = [r for r in mdrun.run("page.md", text) if r[1]]
    assert printed == "8\n"


def test_pictures_are_built():
    text = ("```python\nimport funcgrad as fg\nimport funcgrad.numpy as fnp\n"
            "f = fg.jit(lambda x: fnp.sin(x) * 2)\n```\n\n"
            "<!-- picture: f.lower(fnp.ones(3)).compile() -->\n")
    pictures = []
    assert not mismatches("page.md", text, pictures)
    assert [p.expr for p in pictures] == ["f.lower(fnp.ones(3)).compile()"]


def test_pictures_fall_back_to_dot_text_without_graphviz(monkeypatch):
    import shutil

    import hooks

    import funcgrad as fg
    import funcgrad.numpy as fnp

    lowered = fg.jit(lambda x: fnp.sin(x) * 2).lower(fnp.ones(3))
    if shutil.which("dot"):
        assert "<svg" in hooks.picture(lowered)
    monkeypatch.setattr(hooks.shutil, "which", lambda name: None)
    text = hooks.picture(lowered)
    assert "```dot\ndigraph" in text and "was not installed" in text
    page = "```python\nraise RuntimeError('boom')\n```\n<!-- picture: f -->\n"
    assert "could not be drawn" in hooks.pictures("page.md", page)


def test_name_table_follows_funcgrad():
    import hooks
    import jax_table

    record = {"versions": {"jax": "x", "optax": "y"},
              "namespaces": {"jax.numpy": {"sin": "function", "not_a_name_1": "function"},
                             "optax": {"adam": "function", "l2_loss": "function"}}}
    table = jax_table.name_table(record)
    assert "| `sin` | function | `funcgrad.numpy.sin` |" in table
    assert "| `not_a_name_1` | function | — |" in table
    assert "| `l2_loss` | function | `funcgrad.optim.l2_loss` |" in table
    assert "| [`jax.numpy`](#names-jax-numpy) | 2 | 1 | 1 |" in table
    assert "| `enable_x64` | `False` | 64-bit" in hooks.config_options()
    members, shadowed = hooks.api_members("funcgrad")
    assert "grad" in members and "funcgrad.compiler.jit.jit" in shadowed


def _update(path):
    page = os.path.relpath(os.path.abspath(path), DOCS)
    text = read(page)
    lines = text.split("\n")
    bad = mismatches(page, text)
    for item, printed in reversed(bad):  # the text block starts after the code's closing fence
        start = item.line - 1 + item.code.count("\n") + 1
        while not lines[start].startswith("```text"):
            start += 1
        end = lines.index("```", start + 1)
        lines[start + 1:end] = printed.rstrip("\n").split("\n")
    with open(os.path.join(DOCS, page), "w") as f:
        f.write("\n".join(lines))
    print(f"{page}: {len(bad)} output blocks rewritten")


if __name__ == "__main__":
    if sys.argv[1:2] != ["--update"] or len(sys.argv) < 3:
        sys.exit("usage: python tests/test_docs.py --update docs/PAGE.md ...")
    import funcgrad as fg

    fg.config.update("check_jaxprs", True)  # as tests/conftest.py sets them
    fg.config.update("native", "off")
    for p in sys.argv[2:]:
        _update(p)
