"""A griffe extension for the API reference: funcgrad docstrings title their doctest section
`Example:` (singular), which griffe's Google parser does not know; it reads them as
`Examples:` so the `>>>` lines and their output render as code."""

import re

import griffe

_EXAMPLE = re.compile(r"^(\s*)Example:\s*$", re.MULTILINE)


class SingularExample(griffe.Extension):
    def on_instance(self, *, obj, **kwargs):
        if obj.docstring is not None:
            obj.docstring.value = _EXAMPLE.sub(r"\1Examples:", obj.docstring.value)
