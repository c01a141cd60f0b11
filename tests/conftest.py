"""Test-suite settings: IR checking on, a derandomized hypothesis profile for CI."""

import os

import pytest
from hypothesis import HealthCheck, settings

import funcgrad as fg

settings.register_profile("ci", derandomize=True, deadline=None, max_examples=25,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None, max_examples=25,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci" if os.environ.get("CI") else "dev")


@pytest.fixture(autouse=True)
def _checked_ir():
    """Every jaxpr built in a test is type-checked; options are reset afterwards."""
    fg.config.update("check_jaxprs", True)
    fg.config.update("native", "off")  # C kernels only where a test asks (test_native*.py)
    yield
    fg.config.update("native", "off")
    fg.config.update("check_jaxprs", False)
    fg.config.update("enable_x64", False)
    fg.config.update("debug_nans", False)
    fg.config.update("disable_jit", False)
