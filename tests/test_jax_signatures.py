"""JAX's signatures, checked: every funcgrad name with a JAX (or optax) counterpart accepts
JAX's parameters by name, in JAX's positional order, with JAX's defaults.

The JAX side is recorded in `tools/docs/jax_names.json` (by `tools/docs/dump_jax_names.py`,
run with JAX 0.10.2 and optax 0.2.8); the check (`tools/docs/jax_signatures.py`) looks every
recorded name up on the matching funcgrad module, so a newly added funcgrad name is checked
without a line here. A difference must be fixed or listed with its reason in
`tools/docs/jax_differences.py` (the table docs/for-jax-users.md shows). No JAX needed.
"""

import inspect
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools", "docs"))

import jax_differences  # noqa: E402
import jax_signatures as js  # noqa: E402

# Work in progress elsewhere: (JAX name, parameter) -> who is adding it. These may still
# differ for now; each must go when its work lands (the test then says so).
PENDING = {}

REPORT = js.check()


def test_every_difference_from_jax_is_fixed_or_listed():
    missing = js.unexplained(REPORT, set(PENDING))
    assert not missing, (
        f"{len(missing)} signature difference(s) from JAX: fix them, or list each with its "
        "reason in tools/docs/jax_differences.py:\n" + "\n".join(
            f"  {name} -> {REPORT.paths[name]}: {msg}" for name, _, msg in missing))


def test_listed_differences_still_exist():
    gone = js.stale(REPORT, set(PENDING))
    assert not gone, ("fixed, so remove from tools/docs/jax_differences.py (or PENDING): "
                      + ", ".join(f"{n}({p})" for n, p in gone))


def test_listed_differences_name_real_functions_and_parameters():
    record = js.jax_table.load_names()
    for d in jax_differences.DIFFERENCES:
        assert d.funcgrad and d.reason, d
        namespace, name = d.name.rsplit(".", 1)
        assert namespace in record["namespaces"], d.name
        if name == "*":  # a whole namespace's functions
            continue
        assert name in record["namespaces"][namespace], d.name
        assert js.jax_table.status(namespace, name) is not None, f"funcgrad lacks {d.name}"
        signature = record["signatures"].get(namespace, {}).get(name)
        params = {p[0] for p in signature or ()} | {"*args", "**kwargs"}
        found = js.counterpart(namespace, name)
        ours = set(inspect.signature(found[1]).parameters) if found and d.checked else set()
        assert all(p in params or p in ours for p in d.parameters), d


def test_names_missing_on_purpose_are_recorded_and_missing():
    names = js.jax_table.load_names()["namespaces"]
    for full, reason in jax_differences.MISSING.items():
        namespace, name = full.rsplit(".", 1)
        assert name in names[namespace], full
        assert js.jax_table.status(namespace, name) is None, f"{full} exists now: remove it"
        assert reason, full


def test_the_check_covers_the_namespaces_and_counts_them():
    spaces = {name.rsplit(".", 1)[0] for name in REPORT.paths}
    for ns in ("jax", "jax.numpy", "jax.numpy.linalg", "jax.numpy.fft", "jax.lax",
               "jax.lax.linalg", "jax.random", "jax.nn", "jax.nn.initializers", "jax.tree_util",
               "jax.tree", "jax.scipy.special", "jax.scipy.linalg", "jax.scipy.stats.norm",
               "optax", "optax.losses", "optax.transforms", "optax.schedules", "jax.sharding",
               "jax.profiler", "jax.dtypes", "jax.debug", "jax.image", "jax.ops",
               "optax.contrib", "optax.tree_utils", "optax.projections"):
        assert ns in spaces, ns
    assert REPORT.names > 1200 and REPORT.parameters > 3800


# --- the comparison itself, on functions made for it ------------------------------------------

def _jax(*params):
    return [list(p) for p in params]


def _problems(jax_params, fn):
    return sorted({p for p, _ in js.compare(jax_params, fn)})


def test_the_comparison_finds_each_kind_of_difference():
    jax = _jax(("a", "either"), ("axis", "either", "None"), ("keepdims", "keyword", "False"))

    def same(a, axis=None, *, keepdims=False, extra=1):
        pass

    def renamed(x, axis=None, *, keepdims=False):
        pass

    def swapped(a, keepdims=False, axis=None):
        pass

    def other_default(a, axis=-1, *, keepdims=False):
        pass

    def missing(a, axis=None):
        pass

    def positional_only(a, /, axis=None, *, keepdims=False):
        pass

    def extra_positional(a, axis=None, extra=1, *, keepdims=False):
        pass

    def extra_required(a, axis=None, *, keepdims=False, extra):
        pass

    assert _problems(jax, same) == []
    assert _problems(jax, renamed) == ["a"]
    assert _problems(jax, swapped) == ["axis"]
    assert _problems(jax, other_default) == ["axis"]
    assert _problems(jax, missing) == ["keepdims"]
    assert _problems(jax, positional_only) == ["a"]
    assert _problems(jax, extra_positional) == ["extra"]
    assert _problems(jax, extra_required) == ["extra"]


def test_the_comparison_reads_defaults_as_jax_writes_them():
    assert js.same_default("None", None) and not js.same_default("None", ())
    assert js.same_default("()", ()) and js.same_default("(0, 1)", [0, 1])
    assert js.same_default("1e-05", 1e-5) and not js.same_default("False", 0)
    assert js.same_default("nan", float("nan"))
    assert js.same_default("<class 'jax.numpy.float32'>", __import__("numpy").float32)
    assert js.same_default("<object object>", 3)  # JAX's "not given" sentinels
    assert not js.same_default("'VALID'", "SAME")
