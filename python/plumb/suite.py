"""A fixture suite (docs/fixtures.md), read by plumb's C++ reader (suite_reader.h): every read is
bounds-checked, and a bad file raises ValueError naming the file and field."""
import json
import os

from . import _plumb
from ._tensors import dict_from_wire


class Case:
    """One case of a suite: its manifest entry, and its tensors loaded on demand (load(), inputs(),
    expected()). BF16 tensors are uint16 arrays of their bits; dtype(name) says which tensors are."""

    def __init__(self, suite, entry):
        self._suite = suite
        self.entry = entry  # the manifest's object, as written
        self.name = entry["name"]
        self.op = entry["op"]
        self.params = entry.get("params", {})
        self.description = entry.get("description", "")
        self.input_names = list(entry.get("inputs", []))
        self.output_names = [o["name"] for o in entry["outputs"]]
        self.checks = {o["name"]: o["check"] for o in entry["outputs"]}  # metric, threshold, bound, allow, why
        self._tensors = None

    def load(self):
        """Every tensor of the case file: inputs, expected outputs and the bounds' magnitude tensors."""
        if self._tensors is None:
            wire = self._suite._native.load(self.name)
            self._dtypes = {name: t[0] for name, t in wire.items()}
            self._tensors = dict_from_wire(wire)
        return {name: a.copy() for name, a in self._tensors.items()}

    def dtype(self, name):
        """The safetensors dtype of tensor `name` ("BF16" for a uint16 array that holds BF16 bits)."""
        self.load()
        return self._dtypes[name]

    def inputs(self):
        t = self.load()
        return {name: t[name] for name in self.input_names}

    def expected(self):
        t = self.load()
        return {name: t[name] for name in self.output_names}

    def __repr__(self):
        return f"Case({self.name!r}, op={self.op!r})"


class Suite:
    """A suite directory: manifest.json and one <case>.safetensors per case."""

    def __init__(self, path):
        self.path = os.fspath(path)
        self._native = _plumb.Suite(self.path)
        self.manifest = json.loads(self._native.manifest())
        self.cases = [Case(self, entry) for entry in self.manifest["cases"]]
        self._by_name = {c.name: c for c in self.cases}

    def case(self, name):
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"{self.path}: no case {name!r}") from None

    def __iter__(self):
        return iter(self.cases)

    def __len__(self):
        return len(self.cases)
