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

The tiny-llama and tiny-qwen3moe GGUF files (export_gguf.py) are regenerated too: every model.<type>.gguf must be
byte-identical, the F32 one must hold exactly model.safetensors' numbers and reproduce
golden.safetensors, and the goldens in gguf-goldens/ are compared like the others.

fixtures/tiny-gemma3 (make_tiny_gemma3.py) likewise: both GGUF files and the README byte-identical,
the goldens compared like the others.

The SmolLM2 and Gemma 3 goldens (make_smollm2_golden.py, make_gemma3_golden.py) are regenerated in
float64 (a minute or two each) and compared when their model files are in models/ (a file with another
SHA-256 fails); a missing file fails too (scripts/test fetches both first: scripts/fetch-model and
scripts/fetch-model gemma3). --skip-smollm2 and --skip-gemma3 leave them out.

Prints one line per check, then "N passed, M failed"; exits non-zero if anything failed.
"""

import argparse
import filecmp
import json
import os
import subprocess
import sys

# The SmolLM2 check streams ~1 GB of float64 weights per decode step through matrix-vector
# products; OpenBLAS threads only contend for memory bandwidth there. Must be set before numpy loads.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import export_gguf  # noqa: E402
import llama_ref  # noqa: E402
import make_fixtures  # noqa: E402
import make_gemma3_golden  # noqa: E402
import make_smollm2_golden  # noqa: E402
import make_tiny_gemma3  # noqa: E402
import make_tokenizer_fixtures  # noqa: E402
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


def check_tiny_gguf(checks, fixtures_dir, scratch_dir, name):
    """A tiny checkpoint's GGUF files and their goldens (export_gguf.GGUF_FIXTURES), regenerated into
    scratch_dir/<name> (which must already hold the regenerated checkpoint)."""
    types = export_gguf.GGUF_FIXTURES[name]
    committed_dir, fresh_dir = os.path.join(fixtures_dir, name), os.path.join(scratch_dir, name)
    committed_goldens = os.path.join(committed_dir, export_gguf.GOLDEN_DIR)
    fresh_goldens = os.path.join(fresh_dir, export_gguf.GOLDEN_DIR)

    def regenerate():
        export_gguf.write_fixtures(scratch_dir, name)

    checks.run(f"{name} GGUF: regenerate into {fresh_dir}", regenerate)
    for out_type in types:
        f = export_gguf.file_name(out_type)
        checks.run(f"{name}: {f} byte-identical", lambda f=f: same_bytes(os.path.join(committed_dir, f), os.path.join(fresh_dir, f)))
    f32 = os.path.join(committed_dir, export_gguf.file_name("f32"))
    checks.run(
        f"{name}: model.f32.gguf = model.safetensors (Q/K un-permuted, bit for bit), reproduces golden.safetensors "
        f"within {export_gguf.F32_GGUF_VS_GOLDEN_TOLERANCE:g}",
        lambda: Passed(f"worst difference {export_gguf.check_f32_gguf(committed_dir, f32, name):.1e}"),
    )
    checks.run(
        f"{name}: {export_gguf.GOLDEN_DIR}/README.md byte-identical",
        lambda: same_bytes(os.path.join(committed_goldens, "README.md"), os.path.join(fresh_goldens, "README.md")),
    )
    for out_type in types[1:]:
        golden, manifest = export_gguf.golden_file_name(out_type), export_gguf.manifest_file_name(out_type)

        def committed(f):
            return os.path.join(committed_goldens, f)

        def fresh(f):
            return os.path.join(fresh_goldens, f)

        checks.run(
            f"{name}: {golden} within {GOLDEN_REPRODUCTION_TOLERANCE:g} (integers exact)",
            lambda golden=golden: compare_golden(committed(golden), fresh(golden)),
        )
        checks.run(f"{name}: {manifest} identical except observed_*", lambda m=manifest: compare_manifests(committed(m), fresh(m)))
        checks.run(
            f"{name}: {manifest} describes {golden}",
            lambda m=manifest, g=golden: manifest_matches_golden(committed(m), committed(g)),
        )
        checks.run(f"{name}: {golden} loads with official safetensors", lambda g=golden: official_reader_agrees(committed(g)))


FLOAT32_ROUNDING = 2.0**-23  # two roundings to float32 of float64 values within 1e-12 differ by at most this, relative


def only_tied_swaps(committed_ids, committed_logits, fresh_ids):
    """True if wherever two top-k id tables differ, the committed logit at that rank equals a
    neighbouring rank's to within float32 rounding: the order of tied logits is not defined."""
    tolerance = 2 * FLOAT32_ROUNDING * np.max(np.abs(committed_logits))
    for row, rank in zip(*np.nonzero(committed_ids != fresh_ids)):
        values = committed_logits[row]
        neighbours = [values[r] for r in (rank - 1, rank + 1) if 0 <= r < len(values)]
        if not any(abs(values[rank] - v) <= tolerance for v in neighbours):
            return False
    return True


def compare_topk_golden(committed, fresh):
    """Like compare_golden, for the SmolLM2 golden, whose floats are float64 results stored as float32:
    within float32 rounding (another BLAS changes the float64 values by ~1e-15, which can move a
    rounding by one unit in the last place); ids exact except where two top-k logits are tied."""
    expected, _ = safetensors_io.load_file(fresh)
    actual, _ = safetensors_io.load_file(committed)
    if sorted(actual) != sorted(expected):
        return f"tensor names differ: {sorted(set(actual) ^ set(expected))}"
    problems, worst = [], 0.0
    for name in sorted(expected):
        a, e = actual[name], expected[name]
        if a.dtype != e.dtype or a.shape != e.shape:
            problems.append(f"{name}: {a.dtype}{list(a.shape)} vs {e.dtype}{list(e.shape)}")
        elif e.dtype.kind in "iu":
            if not np.array_equal(a, e) and not (name.endswith(".top64.ids") and only_tied_swaps(a, actual[name[:-4] + ".logits"], e)):
                problems.append(f"{name}: integer values differ")
        else:
            error = llama_ref.max_relative_error(a, e)
            worst = max(worst, error)
            if not error <= FLOAT32_ROUNDING:
                problems.append(f"{name}: relative error {error:.3e} > {FLOAT32_ROUNDING:g}")
    if problems:
        return "; ".join(problems)
    return Passed(f"worst difference {worst:.1e}")


def topk_observations_hold(manifest_path, threshold):
    """The committed manifest's float32 measurements leave the required margin under the threshold,
    and its greedy gaps the required margin over what the threshold allows (the margins are
    make_smollm2_golden's, shared by every plumb-golden-topk generator)."""
    with open(manifest_path, encoding="utf-8") as f:
        manifest = json.load(f)
    m = make_smollm2_golden
    thresholds = {t["check"]["threshold"] for t in manifest["tensors"] if t["check"]["metric"] == "max_abs_err/max_abs_ref"}
    if thresholds != {threshold}:
        return f"thresholds {thresholds}, expected {threshold}"
    for p in manifest["prompts"]:
        worst = max(p["observed_float32_relative"].values())
        if worst * m.REQUIRED_MARGIN > threshold:
            return f"{p['name']}: observed float32 error {worst} leaves less than {m.REQUIRED_MARGIN}x margin"
        g = p["greedy"]
        if g["min_top1_top2_gap"] < m.GREEDY_GAP_MARGIN * 2 * g["largest_allowed_logit_shift"]:
            return f"{p['name']}: greedy gap {g['min_top1_top2_gap']} too small"
    return None


def topk_manifest_matches_golden(manifest_path, golden_path):
    """Every SmolLM2 golden tensor is listed once with its file shape and dtype, and the ids the
    manifest spells out for people are the ones in the file."""
    with open(manifest_path, encoding="utf-8") as f:
        manifest = json.load(f)
    tensors, _ = safetensors_io.load_file(golden_path)
    listed = [t["name"] for t in manifest["tensors"]]
    if sorted(listed) != sorted(tensors):
        return f"manifest lists {sorted(listed)}, file holds {sorted(tensors)}"
    dtype_names = {np.dtype(np.float32): "F32", np.dtype(np.int32): "I32"}
    for entry in manifest["tensors"]:
        array = tensors[entry["name"]]
        if entry["shape"] != list(array.shape) or entry["dtype"] != dtype_names.get(array.dtype):
            return f"{entry['name']}: manifest says {entry['dtype']}{entry['shape']}, file has {array.dtype}{list(array.shape)}"
    for p in manifest["prompts"]:
        if p["prompt_ids"] != tensors[p["name"] + ".prompt_ids"].tolist() or p["greedy"]["ids"] != tensors[p["name"] + ".greedy.ids"].tolist():
            return f"{p['name']}: prompt / greedy ids in the manifest differ from the golden file"
    return None


def check_topk(checks, name, generator, fixtures_dir, scratch_dir, model_path, fetch_command):
    """A real-model plumb-golden-topk fixture (fixtures/<name>), regenerated in float64 by `generator`
    (make_smollm2_golden or make_gemma3_golden)."""
    committed_dir, fresh_dir = os.path.join(fixtures_dir, name), os.path.join(scratch_dir, name)
    if not os.path.isfile(model_path):
        # Not a skip: the test command fetches the model first (scripts/test runs fetch_command), so its absence
        # is a failure to report. --skip-<name> leaves this part out on purpose.
        checks.record(f"{name}: model file present", False, f"{model_path} is missing: run {fetch_command}")
        return

    def regenerate():
        generator.write(model_path, fresh_dir, measure_float32=False)

    checks.run(f"{name}: regenerate (float64 only) into {fresh_dir}", regenerate)

    def committed(f):
        return os.path.join(committed_dir, f)

    def fresh(f):
        return os.path.join(fresh_dir, f)

    checks.run(f"{name}: README.md byte-identical", lambda: same_bytes(committed("README.md"), fresh("README.md")))
    checks.run(
        f"{name}: golden.safetensors within float32 rounding (ids exact up to ties)",
        lambda: compare_topk_golden(committed("golden.safetensors"), fresh("golden.safetensors")),
    )
    checks.run(f"{name}: manifest.json identical except observed_*", lambda: compare_manifests(committed("manifest.json"), fresh("manifest.json")))
    checks.run(f"{name}: manifest's float32 observations and greedy gaps leave the margins", lambda: topk_observations_hold(committed("manifest.json"), generator.FLOAT_THRESHOLD))
    checks.run(
        f"{name}: manifest describes golden.safetensors",
        lambda: topk_manifest_matches_golden(committed("manifest.json"), committed("golden.safetensors")),
    )
    checks.run(f"{name}: golden.safetensors loads with official safetensors", lambda: official_reader_agrees(committed("golden.safetensors")))


def check_tiny_gemma3(checks, fixtures_dir, scratch_dir):
    name = make_tiny_gemma3.NAME
    committed_dir, fresh_dir = os.path.join(fixtures_dir, name), os.path.join(scratch_dir, name)
    checks.run(f"{name}: regenerate into {fresh_dir}", lambda: make_tiny_gemma3.write_fixture(fresh_dir) and None)

    def committed(f):
        return os.path.join(committed_dir, f)

    def fresh(f):
        return os.path.join(fresh_dir, f)

    for f in [spec.file for spec in make_tiny_gemma3.SPECS] + ["README.md"]:
        checks.run(f"{name}: {f} byte-identical", lambda f=f: same_bytes(committed(f), fresh(f)))
    for spec in make_tiny_gemma3.SPECS:
        golden, manifest = make_tiny_gemma3.golden_file_name(spec), make_tiny_gemma3.manifest_file_name(spec)
        checks.run(
            f"{name}: {golden} within {GOLDEN_REPRODUCTION_TOLERANCE:g} (integers exact)",
            lambda g=golden: compare_golden(committed(g), fresh(g)),
        )
        checks.run(f"{name}: {manifest} identical except observed_*", lambda m=manifest: compare_manifests(committed(m), fresh(m)))
        checks.run(f"{name}: {manifest} describes {golden}", lambda m=manifest, g=golden: manifest_matches_golden(committed(m), committed(g)))
        checks.run(f"{name}: {golden} loads with official safetensors", lambda g=golden: official_reader_agrees(committed(g)))


def run_script(args):
    """Runs a fixture script of this folder with this interpreter; None on success, else its output's tail."""
    result = subprocess.run([sys.executable, os.path.join(HERE, args[0]), *args[1:]], capture_output=True, text=True)
    if result.returncode == 0:
        return None
    return f"exit {result.returncode}: " + (result.stdout + result.stderr).strip()[-600:]


def same_tree(committed_dir, fresh_dir, ignore):
    """Every file the script writes is byte-identical to the committed one."""
    fresh = filecmp.dircmp(committed_dir, fresh_dir, ignore=ignore)
    problems = []

    def walk(d, prefix):
        problems.extend(prefix + f for f in d.diff_files + d.right_only + d.left_only + d.funny_files)
        for name, sub in d.subdirs.items():
            walk(sub, prefix + name + "/")

    walk(fresh, "")
    # dircmp compares shallowly (size + mtime); compare contents for files that both have.
    for root, _, files in os.walk(fresh_dir):
        for f in files:
            rel = os.path.relpath(os.path.join(root, f), fresh_dir)
            other = os.path.join(committed_dir, rel)
            if os.path.isfile(other) and not filecmp.cmp(other, os.path.join(root, f), shallow=False):
                problems.append(rel)
    return f"differ: {sorted(set(problems))}" if problems else None


def check_generated_fixtures(checks, fixtures_dir, scratch_dir):
    """The fixtures whose generators have their own --check (block bytes, GGUF samples, chat templates) and
    the tokenizer oracles and Unicode tables, regenerated into scratch and compared byte for byte."""
    checks.run("blocks: fixtures/blocks reproduces (gguf-py dequantizers)", lambda: run_script(["make_block_fixtures.py", "--check"]))
    checks.run("gguf: fixtures/gguf samples reproduce (gguf-py writer)", lambda: run_script(["make_gguf_samples.py", "--check"]))
    checks.run("chat: fixtures/chat reproduce (jinja2 renderings)", lambda: run_script(["make_chat_template_fixtures.py", "--check"]))
    tokenizer_out = os.path.join(scratch_dir, "tokenizer")

    def tokenizer():
        # expected-gemma3.json needs the Gemma 3 GGUF, which no script fetches: without it, that file is not
        # regenerated and is left out of the comparison (said in the report line).
        ignore = ["corpus.json", "gpl-3.txt"]
        gemma3 = os.path.isfile(make_tokenizer_fixtures.GEMMA3_MODEL)
        if not gemma3:
            ignore.append("expected-gemma3.json")
        problem = run_script(["make_tokenizer_fixtures.py", "--out", tokenizer_out]) or same_tree(
            os.path.join(fixtures_dir, "tokenizer"), tokenizer_out, ignore=ignore)
        if problem or gemma3:
            return problem
        return Passed(f"SKIP expected-gemma3.json: {make_tokenizer_fixtures.GEMMA3_MODEL} is absent")

    checks.run("tokenizer: fixtures/tokenizer oracle ids reproduce (HF tokenizers, sentencepiece)", tokenizer)
    tables = os.path.join(scratch_dir, "unicode_tables.inc")
    committed_tables = os.path.join(HERE, "..", "..", "src", "tokenizer", "unicode_tables.inc")
    checks.run(
        "tokenizer: src/tokenizer/unicode_tables.inc reproduces (unicodedata2)",
        lambda: run_script(["gen_unicode_tables.py", "--out", tables]) or same_bytes(committed_tables, tables),
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description="Regenerate the golden fixtures and compare with the committed ones.")
    parser.add_argument("--fixtures", default=os.path.join(make_fixtures.REPO_ROOT, "fixtures"), help="committed fixtures folder")
    parser.add_argument("--scratch", required=True, help="folder to regenerate into (created if missing)")
    parser.add_argument("--smollm2-model", default=make_smollm2_golden.DEFAULT_MODEL, help="the SmolLM2 GGUF (default: %(default)s)")
    parser.add_argument("--skip-smollm2", action="store_true", help="leave out the SmolLM2 golden (about a minute)")
    parser.add_argument("--gemma3-model", default=make_gemma3_golden.DEFAULT_MODEL, help="the Gemma 3 GGUF (default: %(default)s)")
    parser.add_argument("--skip-gemma3", action="store_true", help="leave out the Gemma 3 270M golden (a few minutes)")
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

    for name in export_gguf.GGUF_FIXTURES:
        check_tiny_gguf(checks, args.fixtures, args.scratch, name)
    check_tiny_gemma3(checks, args.fixtures, args.scratch)
    check_generated_fixtures(checks, args.fixtures, args.scratch)
    if not args.skip_smollm2:
        check_topk(checks, "smollm2", make_smollm2_golden, args.fixtures, args.scratch, args.smollm2_model, "scripts/fetch-model")
    if not args.skip_gemma3:
        check_topk(checks, "gemma3", make_gemma3_golden, args.fixtures, args.scratch, args.gemma3_model, "scripts/fetch-model gemma3")

    print(f"{checks.passed} passed, {checks.failed} failed")
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
