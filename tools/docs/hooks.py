"""mkdocs hooks (named in mkdocs.yml): expand the markers of the docs pages at build time.

- `<!-- jax-name-table -->`: the name-status table of `jax_table.py`.
- `<!-- api funcgrad.numpy -->`: an mkdocstrings block for the module with, as members, every
  public function and class the module has when the docs are built (funcgrad modules
  re-export most names, which mkdocstrings does not list by itself).
"""

import importlib
import importlib.util
import inspect
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax_table  # noqa: E402

_API = re.compile(r"^<!-- api ([\w.]+) -->$", re.MULTILINE)


def api_members(module_name):
    """Public functions and classes defined in funcgrad that `module_name` exports, as
    (members, shadowed): `shadowed` are the full paths of the functions whose name is also
    a submodule's (`funcgrad.jit` and `funcgrad.compiler.jit`), which mkdocstrings resolves
    to the module; they get a block of their own."""
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", None) or dir(module)
    members, shadowed = [], []
    for name in sorted(names):
        value = getattr(module, name, None)
        if name.startswith("_") or not (inspect.isfunction(value) or inspect.isclass(value)):
            continue
        home = getattr(inspect.unwrap(value), "__module__", None) or ""
        if not home.startswith("funcgrad"):
            continue
        if home.endswith("." + name) or _is_submodule(module, name):
            shadowed.append(f"{home}.{inspect.unwrap(value).__qualname__}")
        else:
            members.append(name)
    return members, shadowed


def _is_submodule(module, name):
    path = getattr(module, "__path__", None)
    return bool(path) and importlib.util.find_spec(f"{module.__name__}.{name}") is not None


def api_block(module_name):
    members, shadowed = api_members(module_name)
    listed = "\n".join(f"        - {name}" for name in members)
    out = [f"::: {module_name}\n    options:\n      members:\n{listed}\n"]
    out += [f"::: {path}\n    options:\n      heading_level: 2\n      show_root_full_path: false\n"
            for path in shadowed]
    return "\n".join(out)


def on_page_markdown(markdown, page, config, files, **kwargs):
    markdown = markdown.replace("<!-- jax-name-table -->", jax_table.name_table())
    return _API.sub(lambda m: api_block(m.group(1)), markdown)
