"""The names real JAX code uses: present in funcgrad, or missing with a reason.

`tools/docs/jax_usage.json` records, from a survey of 84 public JAX-using repositories, how
many use each name funcgrad lacked when the survey was made; `tools/docs/jax_table.py` maps a
JAX namespace to funcgrad's modules (the one map the docs and the signature check share). No
JAX needed.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools", "docs"))

import jax_differences  # noqa: E402
import jax_table  # noqa: E402
import jax_usage  # noqa: E402

# Work in progress on other branches (the long tail): each goes when its work lands.
PENDING = set()


def test_every_name_used_by_two_repositories_exists_or_has_a_reason():
    unexplained = [(name, repos) for name, repos in jax_usage.still_missing(2)
                   if name not in jax_differences.MISSING and name not in PENDING]
    assert not unexplained, ("names used by >= 2 of the surveyed repositories, missing without "
                             "a reason in jax_differences.MISSING: " + repr(unexplained))


def test_the_usage_weighted_share_only_grows():
    s = jax_usage.summary()
    assert s["share"] >= 0.95 and s["names_now"] > s["names_before"], s
    assert s["missing_names_now"] < s["missing_names_before"]


def test_one_namespace_map_covers_every_recorded_namespace():
    record = jax_table.load_names()
    for namespace in record["namespaces"]:
        modules = jax_table.modules_for(namespace)
        assert modules and all(m.startswith("funcgrad") for m in modules), namespace
    assert jax_table.modules_for("jax.scipy.stats.norm") == ["funcgrad.scipy.stats.norm"]
    assert jax_table.modules_for("optax.contrib") == ["funcgrad.optim.contrib"]
    for namespace in ("jax.sharding", "jax.profiler", "jax.dtypes", "optax.contrib",
                      "jax.scipy.signal", "jax.nn"):
        assert namespace in record["namespaces"], namespace


def test_the_name_table_shows_each_namespace_and_the_reasons():
    table = jax_table.name_table()
    for namespace in ("jax.sharding", "jax.profiler", "optax.contrib", "jax.scipy.special"):
        assert f"### `{namespace}`" in table, namespace
    assert "— (no memory profiler yet" in table  # a MISSING reason beside its name
    assert "| `device_put` | function | `funcgrad.device_put` |" in table
