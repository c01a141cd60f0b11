"""funcgrad.optim has optax 0.2.8's names, namespaces and signatures, so that
`import funcgrad.optim as optax` runs optax code: every public name of optax and of its
namespaces (recorded by `tools/record_optax_golden.py` in `tests/golden/optax_api.json`) exists
on the matching funcgrad module with optax's parameter names, kinds, order and defaults, and
every state NamedTuple has optax's fields. What is missing is listed below with its reason."""

import importlib
import json
import pathlib

import optax_cases
import pytest

API = json.loads((pathlib.Path(__file__).parent / "golden" / "optax_api.json").read_text())
MODULES = {"optax": "funcgrad.optim", **{f"optax.{n}": f"funcgrad.optim.{n}" for n in (
    "schedules", "losses", "transforms", "contrib", "tree_utils", "tree", "projections",
    "perturbations")}}

# Whole namespaces funcgrad does not provide, and why.
NOT_PROVIDED = {
    "optax.second_order": "deprecated in optax 0.2.7 (fisher_diag, hessian_diag, hvp) and "
                          "removed in 0.2.9; funcgrad.hessian / jvp(grad) do the same",
    "optax.assignment": "the Hungarian algorithm (linear assignment): not an optimizer, used "
                        "by none of the 84 surveyed repositories",
}

def test_the_recorded_api_is_optax_0_2_8():
    assert API["versions"]["optax"] == "0.2.8"
    assert set(API["namespaces"]) == set(MODULES) | set(NOT_PROVIDED)


@pytest.mark.parametrize("namespace", sorted(MODULES))
def test_every_public_name_exists(namespace):
    module = importlib.import_module(MODULES[namespace])
    missing = [n for n, rec in API["namespaces"][namespace].items() if not hasattr(module, n)]
    assert not missing, f"{MODULES[namespace]} lacks optax's {missing}"


def _differences(namespace):
    module = importlib.import_module(MODULES[namespace])
    out = []
    for name, rec in sorted(API["namespaces"][namespace].items()):
        got = optax_cases.describe(getattr(module, name))
        if rec["kind"] == "namedtuple" and got["fields"] != rec["fields"]:
            out.append((name, f"fields {got['fields']} != optax's {rec['fields']}"))
        elif rec["kind"] != got["kind"]:
            out.append((name, f"a {got['kind']}, optax's is a {rec['kind']}"))
        elif rec["signature"] is not None and got["signature"] != rec["signature"]:
            out.append((name, f"signature {got['signature']}\n  optax's {rec['signature']}"))
    return out


@pytest.mark.parametrize("namespace", sorted(MODULES))
def test_signatures_and_state_fields_are_optaxs(namespace):
    bad = _differences(namespace)
    assert not bad, "\n".join(f"{namespace}.{n}: {why}" for n, why in bad)


def test_the_comparison_sees_a_wrong_signature():
    def adam(learning_rate, b1=0.9, b2=0.99):  # b2's default differs from optax's
        return None
    recorded = API["namespaces"]["optax"]["adam"]["signature"]
    assert optax_cases.describe(adam)["signature"] != recorded
    assert optax_cases.describe(adam)["signature"][:2] == recorded[:2]


def test_submodules_import_as_optax_namespaces():
    import funcgrad.optim as optax
    from funcgrad.optim.contrib import muon  # noqa: F401
    from funcgrad.optim.losses import ctc_loss  # noqa: F401
    from funcgrad.optim.transforms import MultiSteps, partition  # noqa: F401
    assert optax.multi_transform is optax.partition
    assert optax.safe_int32_increment is optax.safe_increment
    assert optax.tree.norm is optax.tree_utils.tree_norm
    assert optax.MultiTransformState is optax.PartitionState
