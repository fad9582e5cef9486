# Copyright ingot authors. Apache-2.0.
"""Fixtures for the Python API tests: `trt` (the ingot package, imported as TensorRT scripts
import tensorrt), `work` (a scratch folder) and `ingot_bin` (the CLI, for --version)."""
import os

import pytest


def pytest_addoption(parser):
    parser.addoption("--ingot", default=os.environ.get("INGOT_BIN", ""), help="the ingot binary")


@pytest.fixture(scope="session")
def trt():
    import ingot
    return ingot


@pytest.fixture
def work(tmp_path):
    return str(tmp_path)


@pytest.fixture(scope="session")
def ingot_bin(request):
    path = request.config.getoption("--ingot")
    if not path:
        pytest.skip("--ingot (or INGOT_BIN) not given: the CLI's version is not checked")
    return path
