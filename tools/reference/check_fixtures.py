"""Check that the committed golden fixtures are exactly what the reference generates.

    python3 tools/reference/check_fixtures.py --fixtures fixtures --scratch /tmp/plumb-fixtures-check

Runs the reference's self-tests, regenerates every fixture into the scratch folder and
compares it with the committed one:
  * config.json, model.safetensors and README.md byte for byte (they involve no float arithmetic
    beyond the deterministic RNG, so they must reproduce exactly);
  * golden.safetensors tensor by tensor: same names, shapes and dtypes; float tensors within
    1e-12 relative (max abs err / max abs ref), since another BLAS may round float64 sums
    differently; integer tensors exactly;
  * manifest.json identical except fields named observed_* (float32 measurements that depend
    on the BLAS library);
and checks every committed .safetensors file with the official `safetensors` library
(the same tensors as this project's own reader), plus the manifest against the golden file.

Prints one line per check, then "N passed, M failed"; exits non-zero if anything failed.
"""

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import llama_ref  # noqa: E402
import make_fixtures  # noqa: E402
import safetensors_io  # noqa: E402
import test_reference  # noqa: E402

GOLDEN_REPRODUCTION_TOLERANCE = 1e-12
FIXTURE_FILES = ("config.json", "model.safetensors", "golden.safetensors", "manifest.json", "README.md")


class Checks:
    """Collects pass/fail results and prints one line per check."""

    def __init__(self):
        self.passed = 0
        self.failed = 0

    def record(self, name, ok, detail=""):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        print(f"{'PASS' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)

    def run(self, name, fn):
        """Run fn(), which returns None or PASSED(detail) on success and a failure message
        otherwise; an exception is a failure too."""
        try:
            result = fn()
        except Exception as error:
            result = f"{type(error).__name__}: {error}"
        if result is None or isinstance(result, Passed):
            self.record(name, True, result or "")
        else:
            self.record(name, False, result)


class Passed(str):
    """A success that carries a note for the report line (a plain str return is a failure)."""


def without_observed(value):
    """The manifest minus every field named observed_* (at any depth)."""
    if isinstance(value, dict):
        return {k: without_observed(v) for k, v in value.items() if not k.startswith("observed_")}
    if isinstance(value, list):
        return [without_observed(v) for v in value]
    return value


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def same_bytes(committed, fresh):
    if read_bytes(committed) != read_bytes(fresh):
        return f"{committed} differs from the regenerated {fresh}"
    return None


def compare_golden(committed, fresh):
    expected, _ = safetensors_io.load_file(fresh)
    actual, _ = safetensors_io.load_file(committed)
    if sorted(actual) != sorted(expected):
        return f"tensor names differ: {sorted(set(actual) ^ set(expected))}"
    problems = []
    worst = 0.0
    for name in sorted(expected):
        a, e = actual[name], expected[name]
        if a.dtype != e.dtype or a.shape != e.shape:
            problems.append(f"{name}: {a.dtype}{list(a.shape)} vs {e.dtype}{list(e.shape)}")
        elif e.dtype.kind in "iu":
            if not np.array_equal(a, e):
                problems.append(f"{name}: integer values differ")
        else:
            error = llama_ref.max_relative_error(a, e) if np.any(e) else float(np.max(np.abs(a)))
            worst = max(worst, error)
            if not error <= GOLDEN_REPRODUCTION_TOLERANCE:
                problems.append(f"{name}: relative error {error:.3e} > {GOLDEN_REPRODUCTION_TOLERANCE}")
    if problems:
        return "; ".join(problems)
    return Passed(f"worst difference {worst:.1e}")


def compare_manifests(committed, fresh):
    with open(committed, encoding="utf-8") as f:
        a = without_observed(json.load(f))
    with open(fresh, encoding="utf-8") as f:
        e = without_observed(json.load(f))
    if a != e:
        differing = sorted(k for k in set(a) | set(e) if a.get(k) != e.get(k))
        return f"manifest fields differ (observed_* ignored): {differing}"
    return None


def manifest_matches_golden(manifest_path, golden_path):
    """Every golden tensor is described once, with the shape and dtype it has in the file, and
    every float tensor's float32 observation leaves the required margin under its threshold."""
    with open(manifest_path, encoding="utf-8") as f:
        manifest = json.load(f)
    tensors, _ = safetensors_io.load_file(golden_path)
    listed = [t["name"] for t in manifest["tensors"]]
    if sorted(listed) != sorted(tensors):
        return f"manifest lists {sorted(listed)}, file holds {sorted(tensors)}"
    dtype_names = {np.dtype(np.float64): "F64", np.dtype(np.int32): "I32"}
    for entry in manifest["tensors"]:
        array = tensors[entry["name"]]
        if entry["shape"] != list(array.shape) or entry["dtype"] != dtype_names.get(array.dtype):
            return f"{entry['name']}: manifest says {entry['dtype']}{entry['shape']}, file has {array.dtype}{list(array.shape)}"
        check = entry["check"]
        if entry["dtype"] == "F64":
            worst = max(entry["observed_float32"], entry["observed_float32_sequential"])
            if check["metric"] != "max_abs_err/max_abs_ref" or worst * make_fixtures.REQUIRED_MARGIN > check["threshold"]:
                return f"{entry['name']}: check {check} with observed float32 error {worst}"
        elif check["metric"] != "exact":
            return f"{entry['name']}: integer tensor must be checked exactly"
    if manifest["prompt_ids"] != tensors["prompt_ids"].tolist() or manifest["greedy"]["ids"] != tensors["greedy.ids"].tolist():
        return "prompt_ids / greedy ids in the manifest differ from the golden file"
    return None


def official_reader_agrees(path):
    """The official library loads the file and sees exactly what the project's own reader sees;
    also check each tensor starts on a multiple of its element size (friendly to mmap readers)."""
    from safetensors.numpy import load_file as official_load_file

    official = official_load_file(path)
    own, _ = safetensors_io.load_file(path)
    if sorted(official) != sorted(own):
        return f"tensor names differ: {sorted(set(official) ^ set(own))}"
    for name in own:
        if official[name].dtype != own[name].dtype or not np.array_equal(official[name], own[name]):
            return f"{name}: official and own reader disagree"
    header, _ = safetensors_io.parse_header(read_bytes(path))
    for name, entry in header.items():
        if name != safetensors_io.METADATA_KEY:
            if entry["data_offsets"][0] % safetensors_io.DTYPES[entry["dtype"]].itemsize != 0:
                return f"{name}: data not aligned to its element size"
    return None


def main(argv=None):
    parser = argparse.ArgumentParser(description="Regenerate the golden fixtures and compare with the committed ones.")
    parser.add_argument("--fixtures", default=os.path.join(make_fixtures.REPO_ROOT, "fixtures"), help="committed fixtures folder")
    parser.add_argument("--scratch", required=True, help="folder to regenerate into (created if missing)")
    args = parser.parse_args(argv)
    checks = Checks()

    for name, passed, message in test_reference.run_all():
        checks.record(f"self-test {name}", passed, message)

    os.makedirs(args.scratch, exist_ok=True)
    for spec in make_fixtures.FIXTURES:
        committed_dir = os.path.join(args.fixtures, spec.name)
        fresh_dir = os.path.join(args.scratch, spec.name)

        def regenerate():
            make_fixtures.write_fixture(spec, args.scratch)

        checks.run(f"{spec.name}: regenerate into {fresh_dir}", regenerate)
        missing = [f for f in FIXTURE_FILES if not os.path.isfile(os.path.join(committed_dir, f))]
        checks.record(f"{spec.name}: committed files present", not missing, f"missing {missing}" if missing else "")
        if missing or not os.path.isdir(fresh_dir):
            continue

        def committed(f):
            return os.path.join(committed_dir, f)

        def fresh(f):
            return os.path.join(fresh_dir, f)

        for f in ("config.json", "model.safetensors", "README.md"):
            checks.run(f"{spec.name}: {f} byte-identical", lambda f=f: same_bytes(committed(f), fresh(f)))
        checks.run(
            f"{spec.name}: golden.safetensors within {GOLDEN_REPRODUCTION_TOLERANCE:g} (integers exact)",
            lambda: compare_golden(committed("golden.safetensors"), fresh("golden.safetensors")),
        )
        checks.run(
            f"{spec.name}: manifest.json identical except observed_*",
            lambda: compare_manifests(committed("manifest.json"), fresh("manifest.json")),
        )
        checks.run(
            f"{spec.name}: manifest describes golden.safetensors",
            lambda: manifest_matches_golden(committed("manifest.json"), committed("golden.safetensors")),
        )
        for f in ("model.safetensors", "golden.safetensors"):
            checks.run(f"{spec.name}: {f} loads with official safetensors, same as own reader", lambda f=f: official_reader_agrees(committed(f)))

    print(f"{checks.passed} passed, {checks.failed} failed")
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
