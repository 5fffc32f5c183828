"""Shared fixtures: where the package, the CLI and ../shared are."""

import os
import pathlib

import pytest

HERE = pathlib.Path(__file__).resolve().parent
SOURCE_DIR = pathlib.Path(os.environ.get("LLMSIM_SOURCE_DIR", HERE.parents[1]))


@pytest.fixture
def source_dir():
    return SOURCE_DIR


@pytest.fixture
def shared_dir():
    path = pathlib.Path(os.environ.get("LLMSIM_SHARED_DIR", SOURCE_DIR.parent / "shared"))
    if not path.is_dir():
        pytest.skip(f"{path} not found (tests that read ../shared skip when it is absent)")
    return path


@pytest.fixture
def cli():
    path = os.environ.get("LLMSIM_CLI", "")
    if not path or not os.path.isfile(path):
        pytest.skip("LLMSIM_CLI (the llmsim command line tool) not given")
    return path
