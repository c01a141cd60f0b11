"""The one escaping policy for generated source (numpy/Python, CUDA C and native C alike).

Generated programs are text that is compiled and run, so nothing a user controls (function
and file names, primitive names of extensions, dict keys, format strings) may reach it as
code. Every backend follows three rules, and this module is their only implementation:

- Identifiers are generated. Where a name should hint at its origin (`_rev_0`, `k0_exp_add`)
  it goes through `identifier`, which keeps ASCII letters, digits and `_` only.
- User text appears only inside comments, through `comment`, which removes everything that
  could end a comment or a line in Python or C: line breaks of every kind (`\\n \\r \\v \\f`,
  `\\x1c-\\x1e \\x85 \\u2028 \\u2029`), other control and format characters, NUL, `*/`,
  backslashes (a trailing one splices the next C line into a `//` comment) and `??`
  (trigraphs), and caps the length.
- Everything else is data bound outside the source: constants are names in the generated
  function's globals (numpy backend) or kernel arguments, never `repr` of a user object.

    >>> comment("model.py\\n    open('pwned', 'w')\\n    #")
    "model.py<U+000A>    open('pwned', 'w')<U+000A>    #"
    >>> identifier("scatter-add")
    'scatter_add'
"""

import functools
import os
import re

__all__ = ["COMMENT_LIMIT", "comment", "identifier", "source_location"]

COMMENT_LIMIT = 160  # characters of user text in one generated comment
IDENTIFIER_LIMIT = 40

_UNSAFE_IDENT = re.compile(r"[^0-9A-Za-z_]")


def _visible(ch):
    """`ch` itself where it is harmless in a one-line comment, else `<U+hhhh>`."""
    if ch == "\\" or not ch.isprintable() and ch != " ":
        return f"<U+{ord(ch):04X}>"
    return ch


def comment(text, limit=COMMENT_LIMIT):
    """`text` made safe inside a one-line Python `#` comment and a C `//` or `/* */` comment.

    Control, format and line-separator characters and backslashes become visible `<U+hhhh>`
    marks, `*/` and `??` are broken apart, and the result is at most about `limit`
    characters (cut with `...`).
    """
    text = str(text)
    cut = len(text) > limit
    text = text[:limit]
    if not (text.isascii() and text.isprintable() and "\\" not in text):  # else as it is
        text = "".join(_visible(ch) for ch in text)
    while "*/" in text or "/*" in text or "??" in text:
        text = text.replace("*/", "* /").replace("/*", "/ *").replace("??", "?_?")
    return text + "..." if cut else text


def identifier(text, limit=IDENTIFIER_LIMIT):
    """A fragment of a generated identifier derived from `text`: ASCII letters, digits and
    `_` only, at most `limit` characters (callers add a prefix and a unique suffix)."""
    return _UNSAFE_IDENT.sub("_", str(text))[:limit]


@functools.lru_cache(maxsize=4096)  # one per user line: a program prints each many times
def source_location(source, fallback=""):
    """`file.py:12 (fn)` for an equation's `source` triple `(filename, line, function)`,
    escaped for a comment; `fallback` (escaped too) when there is no source."""
    if source is None:
        return comment(fallback)
    filename, line, fn = source
    return comment(f"{os.path.basename(str(filename))}:{int(line)} ({fn})")
