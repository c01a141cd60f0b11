"""Runs the code of a docs page: the one home of the page convention, used by
`tests/test_docs.py` (which checks the output) and by the docs build (`hooks.py`, pictures).

- The ```python blocks of one page run in order in one namespace, as one session would.
- A ```text block that follows a python block (blank lines between at most) is what that
  block prints; it is compared after normalizing whitespace (each run of spaces, tabs and
  line breaks counts as one space; leading and trailing space is ignored).
- ```text approx compares the same way, except that numbers agree to a relative 1e-4 (plus
  1e-6 absolute): for values whose last digits depend on the BLAS build or summation order.
- ```python no-run is shown and not run; only the GPU and MPI pages use it.
- The numbers of generated programs (`fg_jit_7`, `# funcgrad jit program 7`) count the
  programs compiled before in the process, so they are not compared.
- A line `<!-- picture: EXPR -->` is replaced at build time by a picture of EXPR (a jaxpr, a
  `Lowered` or a `Compiled`, evaluated after the blocks above it): SVG when Graphviz's `dot`
  is installed, else the DOT text. The test suite evaluates EXPR and builds its DOT text.
Code is compiled with the page's path as its file name and its own line numbers, so a
traceback (and the `# page.md:12` comments of generated code) point into the page.
"""

import contextlib
import io
import math
import re
from dataclasses import dataclass

_FENCE = re.compile(r"^```(\S*)(.*)$")
_PICTURE = re.compile(r"^<!-- picture: (.+) -->$")
_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")


@dataclass
class Code:
    line: int             # 1-based line of the code's first line
    code: str
    expected: str = None  # the text block shown after it, if any
    approx: bool = False
    run: bool = True


@dataclass
class Picture:
    line: int
    expr: str


def _fences(lines):
    """[(language, flags, first code line (0-based), closing fence line)] of a page."""
    out, i = [], 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and lines[j] != "```":
            j += 1
        if j == len(lines):
            raise ValueError(f"line {i + 1}: unclosed code fence")
        out.append((m.group(1), m.group(2).split(), i + 1, j))
        i = j + 1
    return out


def parse(text):
    """The page's python blocks (`Code`) and picture markers (`Picture`), in page order."""
    lines = text.split("\n")
    fences = _fences(lines)
    items = []
    for k, (lang, flags, start, end) in enumerate(fences):
        if lang != "python":
            continue
        item = Code(start + 1, "\n".join(lines[start:end]) + "\n", run="no-run" not in flags)
        if k + 1 < len(fences) and fences[k + 1][0] == "text":
            nlang, nflags, nstart, nend = fences[k + 1]
            if all(not s.strip() for s in lines[end + 1:nstart - 1]):
                item.expected = "\n".join(lines[nstart:nend]) + "\n" if nend > nstart else ""
                item.approx = "approx" in nflags
        items.append(item)
    inside = {i for _, _, start, end in fences for i in range(start - 1, end + 1)}
    items += [Picture(i + 1, m.group(1)) for i, s in enumerate(lines)
              if i not in inside and (m := _PICTURE.match(s))]
    return sorted(items, key=lambda item: item.line)


# Generated code is numbered per process (`fg_jit_7`, `# funcgrad jit program 7`): the
# number depends on what ran before, so it is not compared.
_COUNTERS = re.compile(r"(fg_jit_|jit program )\d+")


def normalize(text):
    return " ".join(_COUNTERS.sub(r"\1#", text).split())


def same(actual, expected, approx):
    a, e = normalize(actual), normalize(expected)
    if not approx:
        return a == e
    if _NUMBER.sub("#", a) != _NUMBER.sub("#", e):
        return False
    pairs = zip(_NUMBER.findall(a), _NUMBER.findall(e))
    return all(math.isclose(float(x), float(y), rel_tol=1e-4, abs_tol=1e-6) for x, y in pairs)


def run(page, text, on_picture=None):
    """Runs the page's blocks in order (`page` names the code's file). Returns
    [(Code, printed text)] of every block run; `on_picture(picture, value)` is called with
    each picture's evaluated expression."""
    namespace = {"__name__": "docs_" + re.sub(r"\W", "_", page)}
    out = []
    for item in parse(text):
        if isinstance(item, Picture):
            if on_picture is not None:
                on_picture(item, eval(compile(item.expr, page, "eval"), namespace))
            continue
        if not item.run:
            continue
        stdout = io.StringIO()
        with contextlib.redirect_stdout(stdout):
            exec(compile("\n" * (item.line - 1) + item.code, page, "exec"), namespace)
        out.append((item, stdout.getvalue()))
    return out
