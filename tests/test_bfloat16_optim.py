"""funcgrad.optim on bfloat16 parameters against optax 0.2.8 (recorded by
`tools/record_optax_bfloat16.py`): the state, update and parameter dtypes optax gives, and
the parameters' bits after three steps."""

import json
import pathlib

import numpy as np
import optax_bfloat16_cases as cases
import pytest

import funcgrad.numpy as fnp
from funcgrad import optim

RECORD = json.loads((pathlib.Path(__file__).parent / "golden" / "jax" /
                     "optax_bfloat16.json").read_text())


def test_every_case_is_recorded():
    assert sorted(RECORD["cases"]) == sorted(cases.OPTIMIZERS)


@pytest.mark.parametrize("name", sorted(cases.OPTIMIZERS))
def test_optimizer_on_bfloat16_params_matches_optax(name):
    got, want = cases.run(optim, fnp, name), RECORD["cases"][name]
    for field in ("state_dtypes", "update_dtypes", "final_state_dtypes", "param_dtypes"):
        assert got[field] == want[field], (field, got[field], want[field])
    for k, bits in want["param_bits"].items():
        g = np.array(got["param_bits"][k], np.uint16).view(fnp.bfloat16).astype(np.float32)
        w = np.array(bits, np.uint16).view(fnp.bfloat16).astype(np.float32)
        np.testing.assert_array_equal(g, w, err_msg=f"{name}: parameter {k}")
