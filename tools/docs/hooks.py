"""mkdocs hooks (named in mkdocs.yml): expand the markers of the docs pages at build time.

- `<!-- jax-name-table -->`: the name-status table of `jax_table.py`.
- `<!-- jax-usage -->`: the usage-weighted share and the most used missing names
  (`jax_usage.py`).
- `<!-- jax-differences -->`: the signature check's counts and the table of deliberate
  differences from JAX (`jax_signatures.differences_markdown`, `jax_differences.py`).
- `<!-- api funcgrad.numpy -->`: an mkdocstrings block for the module with, as members, every
  public function and class the module has when the docs are built (funcgrad modules
  re-export most names, which mkdocstrings does not list by itself).
- `<!-- api-modules funcgrad.scipy.stats -->`: one such block per public submodule.
- `<!-- config-options -->`: the table of `funcgrad.config`'s options and defaults.
- `<!-- picture: EXPR -->`: the page's code runs (`mdrun`) and EXPR, a program of it, is drawn
  by `funcgrad.viz`: inline SVG when Graphviz's `dot` is installed, else the DOT text with a
  note. A picture never fails the build: an error becomes a note on the page (the test suite
  builds every picture's DOT text, so it fails there).
"""

import importlib
import importlib.util
import inspect
import logging
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax_signatures  # noqa: E402
import jax_table  # noqa: E402
import jax_usage  # noqa: E402
import mdrun  # noqa: E402

log = logging.getLogger("mkdocs.hooks.funcgrad")

_API = re.compile(r"^<!-- api ([\w.]+) -->$", re.MULTILINE)
_API_MODULES = re.compile(r"^<!-- api-modules ([\w.]+) -->$", re.MULTILINE)


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


def api_modules(package_name):
    """One api block per public submodule of `package_name` (`funcgrad.scipy.stats.norm`...)."""
    package = importlib.import_module(package_name)
    names = sorted(n for n in dir(package) if not n.startswith("_")
                   and inspect.ismodule(getattr(package, n))
                   and getattr(package, n).__name__ == f"{package_name}.{n}")
    return "\n".join(api_block(f"{package_name}.{n}") for n in names)


def api_block(module_name):
    members, shadowed = api_members(module_name)
    listed = "\n".join(f"        - {name}" for name in members)
    out = [f"::: {module_name}\n    options:\n      members:\n{listed}\n"]
    out += [f"::: {path}\n    options:\n      heading_level: 2\n      show_root_full_path: false\n"
            for path in shadowed]
    return "\n".join(out)


def picture(value):
    """Markdown for one program: inline SVG, or the DOT text when `dot` is missing."""
    from funcgrad import viz

    if shutil.which("dot") is None:
        return ('!!! note "Graphviz\'s `dot` was not installed when this site was built: '
                'here is the picture as DOT text (`dot -Tsvg` draws it)."\n\n```dot\n'
                + viz.to_dot(value).rstrip("\n") + "\n```\n")
    svg = viz.to_svg(value)
    svg = "\n".join(line for line in svg[svg.index("<svg"):].splitlines() if line.strip())
    return f'<div class="fg-picture" style="overflow-x: auto">\n{svg}\n</div>\n'


def pictures(page_name, markdown):
    """The page with its picture markers replaced."""
    if "<!-- picture: " not in markdown:
        return markdown
    drawn = {}

    def draw(item, value):
        drawn[item.line] = picture(value)

    import funcgrad as fg

    fg.config.update("native", "off")  # as the test suite runs them: the numpy programs
    try:
        mdrun.run(page_name, markdown, on_picture=draw)
    except Exception as e:  # noqa: BLE001 (reported on the page; the test suite fails on it)
        log.info("%s: pictures stopped at %s: %s", page_name, type(e).__name__, e)
    lines = markdown.split("\n")
    for item in mdrun.parse(markdown):
        if isinstance(item, mdrun.Picture):
            lines[item.line - 1] = drawn.get(item.line, (
                '!!! warning "This picture could not be drawn when the site was built."\n'))
    return "\n".join(lines)


_OPTION = re.compile(r'^\s*"(\w+)": (.+?),\s*#\s*(.*)$')


def config_options():
    """The table of `funcgrad.config`'s options: name, default, and the comment beside it in
    `Config._defaults` (read from the source, so it stays true)."""
    from funcgrad.config import Config

    notes = {m.group(1): m.group(3) for line in inspect.getsource(Config).splitlines()
             if (m := _OPTION.match(line))}
    rows = [f"| `{name}` | `{value!r}` | {notes.get(name, '').replace('|', '&#124;')} |"
            for name, value in Config._defaults.items()]
    return "\n".join(["| option | default | meaning |", "| --- | --- | --- |", *rows]) + "\n"


def on_page_markdown(markdown, page, config, files, **kwargs):
    markdown = markdown.replace("<!-- config-options -->", config_options())
    markdown = pictures(page.file.src_uri, markdown)
    markdown = markdown.replace("<!-- jax-name-table -->", jax_table.name_table())
    if "<!-- jax-usage -->" in markdown:
        markdown = markdown.replace("<!-- jax-usage -->", jax_usage.usage_markdown())
    if "<!-- jax-differences -->" in markdown:
        markdown = markdown.replace("<!-- jax-differences -->",
                                    jax_signatures.differences_markdown())
    markdown = _API_MODULES.sub(lambda m: api_modules(m.group(1)), markdown)
    return _API.sub(lambda m: api_block(m.group(1)), markdown)
