"""Shared by the package's tests: the committed suite (fixtures/suite), opened once."""
import pathlib

import pytest

import plumb

SUITE_DIR = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "suite"
# Cases of a whole model, not of one op: not computed from Python.
MODEL_OPS = ("layer", "end_to_end", "kv_handoff")


@pytest.fixture(scope="session")
def suite():
    return plumb.Suite(SUITE_DIR)


def op_cases(suite_dir=SUITE_DIR):
    return [c for c in plumb.Suite(suite_dir) if c.op not in MODEL_OPS]
