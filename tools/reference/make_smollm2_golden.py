"""Golden outputs of the real SmolLM2-135M-Instruct Q4_1 GGUF, for plumb's end-to-end test.

    python3 tools/reference/make_smollm2_golden.py [--model models/SmolLM2-135M-Instruct.Q4_1.gguf] [--out DIR]

(default DIR: <repo>/fixtures/smollm2). Writes golden.safetensors, manifest.json and README.md.

The model file is git-ignored; its SHA-256 is checked first, so the golden always describes
exactly this file. Four prompts (a ChatML chat turn, English prose, Python code, text with
numbers) are tokenized with the Hugging Face `tokenizers` package, built from the vocabulary,
merges and token types stored in the GGUF (see `build_tokenizer`), so plumb's own tokenizer is
not involved. Then the float64 NumPy reference (gguf_ref: weights dequantized by gguf-py, Q/K rows
as stored, adjacent-pair RoPE) computes, per prompt:

  * the 64 largest logits and their ids at every prompt position;
  * the full logits of the last prompt position (stored as float32, see below);
  * a 64-step greedy continuation through the KV cache (EOS not applied), with the top-64 logits
    and ids of every step and the gap between the best and the second-best logit.

The same forward pass is also run in float32 (NumPy/BLAS, KV-cached, fed the float64 greedy tokens;
and once more with naive left-to-right dot products over prompt + greedy tokens in a single prefill).
Their largest deviation from float64 is recorded per prompt (`observed_float32_error`); the
threshold is a fixed constant that must be at least REQUIRED_MARGIN times above it, and the greedy
gaps must be far above what that threshold lets a logit move, or nothing is written.

Computed in float64, stored as float32: rounding moves a stored logit by at most 2^-24 relative
(<= 2.6e-6 for these logits, whose magnitude stays below 43), 20x or more below the float32 error a
correct engine shows (5e-5 .. 1.5e-4) and over 1000x below what the threshold allows (~4e-3). It halves the file and, with every tensor
4 bytes per element, keeps each tensor aligned to its element size in the safetensors layout.
"""

import argparse
import copy
import hashlib
import json
import os
import sys
import time

# A decode step streams ~1 GB of float64 weights through small matrix-vector products; OpenBLAS's
# threads only fight over memory bandwidth there (10x slower on a busy 2-core machine).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gguf_ref  # noqa: E402
import llama_ref  # noqa: E402
import make_fixtures  # noqa: E402
import safetensors_io  # noqa: E402

GENERATOR = "tools/reference/make_smollm2_golden.py"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
DEFAULT_MODEL = os.path.join(make_fixtures.REPO_ROOT, "models", MODEL_FILE)
DEFAULT_OUT = os.path.join(make_fixtures.REPO_ROOT, "fixtures", "smollm2")
TOP_K = 64
GREEDY_STEPS = 64
CONTROL_TOKEN_TYPE = 3  # llama.cpp's LLAMA_TOKEN_TYPE_CONTROL

PROMPTS = [
    (
        "chat",
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
        "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
    ),
    ("english", "The old lighthouse keeper climbed the stairs every evening, and"),
    ("code", 'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n    if n < 2:\n        return n\n'),
    ("numbers", "In 1969, 3 astronauts flew 384400 km to the Moon. 12 + 30 = 42, and 7 * 8 ="),
]

# Tolerance of every float golden tensor, metric max|plumb - ref| / max|ref| over the tensor.
FLOAT_THRESHOLD = 1e-4
# Both float32 runs must stay this many times below the threshold.
REQUIRED_MARGIN = 10.0
# A passing engine moves a logit by at most FLOAT_THRESHOLD * max|logit|; a greedy step can flip only
# if its top-1 minus top-2 gap is below twice that. Demand this factor more.
GREEDY_GAP_MARGIN = 5.0
# KV-cached decode rows must equal a fresh prefill of the same tokens to float64 rounding level.
DECODE_VS_PREFILL_TOLERANCE = 1e-12
# Decode steps spot-checked against a fresh prefill (each costs a whole prefill).
REPREFILL_STEPS = (1, 17, 63)


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def build_tokenizer(metadata):
    """The model's tokenizer, rebuilt with Hugging Face `tokenizers` from the GGUF metadata.

    tokenizer.ggml.model is gpt2 (byte-level BPE) and tokenizer.ggml.pre is smollm, whose
    pre-tokenizer splits every digit on its own and then applies the GPT-2 regex; so:
    models.BPE(vocab, merges), pre-tokenizer Sequence([Digits(individual_digits=True),
    ByteLevel(add_prefix_space=False, use_regex=True)]), ByteLevel decoder, and the control tokens
    (token type 3: <|im_start|>, <|im_end|>, ...) as special added tokens, so that they are matched
    as a whole in the text. No BOS is added (tokenizer.ggml.add_bos_token is false).
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    if metadata.get("tokenizer.ggml.model") != "gpt2" or metadata.get("tokenizer.ggml.pre") != "smollm":
        raise ValueError("expected tokenizer.ggml.model gpt2 and tokenizer.ggml.pre smollm")
    if metadata.get("tokenizer.ggml.add_bos_token") is not False:
        raise ValueError("expected tokenizer.ggml.add_bos_token false")
    tokens = metadata["tokenizer.ggml.tokens"]
    types = metadata["tokenizer.ggml.token_type"]
    vocab = {token: index for index, token in enumerate(tokens)}
    if len(vocab) != len(tokens):
        raise ValueError("duplicate tokens in tokenizer.ggml.tokens")
    merges = []
    for merge in metadata["tokenizer.ggml.merges"]:
        parts = merge.split(" ")
        if len(parts) != 2:
            raise ValueError(f"merge {merge!r} is not two tokens separated by one space")
        merges.append((parts[0], parts[1]))
    tokenizer = Tokenizer(models.BPE(vocab, merges))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]
    )
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens(
        [AddedToken(tokens[i], special=True, normalized=False) for i, t in enumerate(types) if t == CONTROL_TOKEN_TYPE]
    )
    return tokenizer


def encode(tokenizer, text):
    """Token ids of text; raises unless decoding them gives the text back."""
    ids = tokenizer.encode(text, add_special_tokens=False).ids
    if tokenizer.decode(ids, skip_special_tokens=False) != text:
        raise AssertionError(f"tokenizer does not round-trip {text!r}")
    return ids


def top_k(rows, k=TOP_K):
    """(ids, values) of the k largest entries of each row, largest first; ties broken by the smaller id."""
    rows = np.atleast_2d(rows)
    order = np.lexsort((np.broadcast_to(np.arange(rows.shape[1]), rows.shape), -rows), axis=1)[:, :k]
    return order.astype(np.int32), np.take_along_axis(rows, order, axis=1)


def forced_decode(model, prompt_ids, fed_ids):
    """Logits of the last prompt position, then of each token of fed_ids[:-1] fed through the KV
    cache one at a time: the rows greedy_decode produces, for a given token sequence (so a float32
    run can be compared row by row with the float64 one even if it would choose otherwise)."""
    cache = model.new_cache()
    rows = [model.forward(prompt_ids, cache)[-1]]
    for token in fed_ids[:-1]:
        rows.append(model.forward([int(token)], cache)[-1])
    return np.stack(rows)


def run_prompt(model64, model32, model32_sequential, prompt_ids, steps=GREEDY_STEPS, reprefill_steps=REPREFILL_STEPS):
    """Everything recorded for one prompt; raises if a guarantee fails. model32 None: float64 only
    (the reproduction check), no observed_* measurements; model32_sequential None: no naive-accumulation
    run (too slow for long prompts over a large vocabulary)."""
    started = time.perf_counter()
    cache = model64.new_cache()
    prompt_logits = model64.forward(prompt_ids, cache)
    prefill_seconds = time.perf_counter() - started
    started = time.perf_counter()
    greedy_ids, greedy_logits = llama_ref.greedy_decode(model64, prompt_ids, steps)
    greedy_seconds = time.perf_counter() - started
    assert np.array_equal(prompt_logits[-1], greedy_logits[0])
    for step in reprefill_steps:
        full = model64.forward(list(prompt_ids) + [int(t) for t in greedy_ids[:step]], model64.new_cache())[-1]
        error = llama_ref.max_relative_error(greedy_logits[step], full)
        if error > DECODE_VS_PREFILL_TOLERANCE:
            raise AssertionError(f"decode step {step}: cache path differs from re-prefill by {error:.3e}")

    result = {
        "prompt_logits": prompt_logits,
        "greedy_ids": greedy_ids,
        "greedy_logits": greedy_logits,
        "seconds": {"prefill": prefill_seconds, "greedy_per_step": greedy_seconds / steps},
    }
    if model32 is None:
        return result

    # float32: the KV-cached path fed the float64 tokens, and naive dot products in one prefill.
    prompt32 = model32.forward(prompt_ids, model32.new_cache())
    greedy32 = forced_decode(model32, prompt_ids, greedy_ids)

    def observed(actual, reference):
        return {
            "max_abs": float(np.max(np.abs(np.asarray(actual, np.float64) - reference))),
            "max_abs_err/max_abs_ref": llama_ref.max_relative_error(actual, reference),
        }

    result["float32_greedy_ids_identical"] = bool(np.array_equal(np.argmax(greedy32, axis=1), greedy_ids))
    result["observed"] = {
        "prompt": {"float32": observed(prompt32, prompt_logits)},
        "greedy": {"float32": observed(greedy32, greedy_logits)},
    }
    if model32_sequential is None:
        return result
    sequence = list(prompt_ids) + [int(t) for t in greedy_ids[:-1]]
    sequential32 = model32_sequential.forward(sequence, model32_sequential.new_cache())
    result["float32_greedy_ids_identical"] &= bool(np.array_equal(np.argmax(sequential32[len(prompt_ids) - 1 :], axis=1), greedy_ids))
    result["observed"]["prompt"]["float32_sequential"] = observed(sequential32[: len(prompt_ids)], prompt_logits)
    result["observed"]["greedy"]["float32_sequential"] = observed(sequential32[len(prompt_ids) - 1 :], greedy_logits)
    return result


def observations(name, r, threshold=FLOAT_THRESHOLD):
    """The observed_* fields of one prompt; raises unless every float32 run leaves the required margin
    under the threshold and chooses the same greedy tokens."""
    if not r["float32_greedy_ids_identical"]:
        raise AssertionError(f"{name}: a float32 run chooses different greedy tokens")
    runs = [(part, run) for part in ("prompt", "greedy") for run in ("float32", "float32_sequential") if run in r["observed"][part]]
    relative = {f"{part}.{run}": r["observed"][part][run]["max_abs_err/max_abs_ref"] for part, run in runs}
    worst = max(relative.values())
    if worst * REQUIRED_MARGIN > threshold:
        raise AssertionError(f"{name}: float32 error {worst:.2e} leaves less than {REQUIRED_MARGIN}x under {threshold}")
    fields = {"observed_float32_error": significant(max(r["observed"][p]["float32"]["max_abs"] for p in ("prompt", "greedy")))}
    if "float32_sequential" in r["observed"]["prompt"]:
        fields["observed_float32_sequential_error"] = significant(
            max(r["observed"][p]["float32_sequential"]["max_abs"] for p in ("prompt", "greedy"))
        )
    fields["observed_float32_relative"] = {key: significant(value) for key, value in relative.items()}
    return fields


def record_prompt(tensors, name, text, prompt_ids, r, seconds, decode, eos, measure_float32, threshold=FLOAT_THRESHOLD):
    """Adds the golden tensors of one prompt (run_prompt's result r) to `tensors`; returns its manifest
    entry and a report line. Raises if a greedy step is too close to a tie for the threshold."""
    prompt_top_ids, prompt_top = top_k(r["prompt_logits"])
    greedy_top_ids, greedy_top = top_k(r["greedy_logits"])
    gaps = greedy_top[:, 0] - greedy_top[:, 1]
    allowed_shift = threshold * float(np.max(np.abs(greedy_top)))
    min_step = int(np.argmin(gaps))
    if gaps[min_step] < GREEDY_GAP_MARGIN * 2 * allowed_shift:
        raise AssertionError(
            f"{name}: greedy step {min_step} has top-1/top-2 gap {gaps[min_step]:.3e}, below "
            f"{GREEDY_GAP_MARGIN} x 2 x allowed logit shift {allowed_shift:.2e}"
        )

    tensors[f"{name}.prompt_ids"] = np.array(prompt_ids, dtype=np.int32)
    tensors[f"{name}.prompt.top64.ids"] = prompt_top_ids
    tensors[f"{name}.prompt.top64.logits"] = prompt_top.astype(np.float32)
    tensors[f"{name}.last.logits"] = r["prompt_logits"][-1].astype(np.float32)
    tensors[f"{name}.greedy.ids"] = r["greedy_ids"].astype(np.int32)
    tensors[f"{name}.greedy.top64.ids"] = greedy_top_ids
    tensors[f"{name}.greedy.top64.logits"] = greedy_top.astype(np.float32)
    tensors[f"{name}.greedy.gaps"] = gaps.astype(np.float32)

    greedy_list = [int(t) for t in r["greedy_ids"]]
    entry = {
        "name": name,
        "text": text,
        "prompt_ids": prompt_ids,
        "greedy": {
            "ids": greedy_list,
            "text": decode(greedy_list),
            "first_eos_step": greedy_list.index(eos) if eos in greedy_list else None,
            "min_top1_top2_gap": make_fixtures.significant(float(gaps[min_step])),
            "min_gap_step": min_step,
            "largest_allowed_logit_shift": significant(allowed_shift),
        },
        "max_abs_logit": significant(float(max(np.max(np.abs(prompt_top)), np.max(np.abs(greedy_top)))), 6),
    }
    line = (
        f"{name}: {len(prompt_ids)} prompt tokens; prefill {r['seconds']['prefill']:.2f} s, greedy "
        f"{r['seconds']['greedy_per_step']:.3f} s/step, all runs {seconds:.1f} s; min gap {gaps[min_step]:.4f} at "
        f"step {min_step} (allowed shift {allowed_shift:.1e})"
    )
    if measure_float32:
        entry.update(observations(name, r, threshold))
        sequential = entry.get("observed_float32_sequential_error")
        line += (
            f"; float32 error {entry['observed_float32_error']:.2e} abs (sequential "
            f"{'not run' if sequential is None else f'{sequential:.2e}'}), "
            f"{max(entry['observed_float32_relative'].values()):.2e} relative"
        )
    entry["observed_seconds"] = {k: round(v, 3) for k, v in r["seconds"].items()}
    return entry, line


def significant(value, digits=3):
    return make_fixtures.significant(value, digits)


def build(model_path, measure_float32=True):
    """Compute the golden tensors and the manifest. Returns (tensors, manifest, report lines).
    measure_float32=False skips the float32 runs and leaves the observed_* fields out."""
    report = []
    started = time.perf_counter()
    digest = sha256_of(model_path)
    if digest != MODEL_SHA256:
        raise ValueError(f"{model_path}: SHA-256 {digest}, expected {MODEL_SHA256}")
    data = gguf_ref.read_gguf(model_path)
    tokenizer = build_tokenizer(data.metadata)
    model64 = gguf_ref.reference_model(data, dtype=np.float64)
    model32 = model32_sequential = None
    if measure_float32:
        model32 = gguf_ref.reference_model(data, dtype=np.float32)
        # The same float32 weights, only the dot products accumulated term by term (saves a 540 MB copy).
        model32_sequential = copy.copy(model32)
        model32_sequential.matmul = llama_ref.matmul_sequential
    config = model64.config
    report.append(f"loaded and checked {model_path} in {time.perf_counter() - started:.1f} s")

    tensors, prompts = {}, []
    eos = int(data.metadata["tokenizer.ggml.eos_token_id"])
    for name, text in PROMPTS:
        prompt_ids = encode(tokenizer, text)
        started = time.perf_counter()
        r = run_prompt(model64, model32, model32_sequential, prompt_ids)
        seconds = time.perf_counter() - started
        decode = lambda ids: tokenizer.decode(ids, skip_special_tokens=False)  # noqa: E731
        entry, line = record_prompt(tensors, name, text, prompt_ids, r, seconds, decode, eos, measure_float32)
        prompts.append(entry)
        report.append(line)

    manifest = make_manifest(config, tensors, prompts)
    return tensors, manifest, report


def tensor_entries(tensors, steps=GREEDY_STEPS):
    """(name, meaning, metric) of every golden tensor, in manifest order."""
    meanings = {
        "prompt_ids": ("the prompt's token ids (P of them), tokenized as described under 'tokenizer'", "exact"),
        "prompt.top64.ids": ("[P, 64]: at each prompt position, the ids of the 64 largest logits, largest first", "exact"),
        "prompt.top64.logits": ("[P, 64]: those 64 logits (compare your logits at these ids)", "float"),
        "last.logits": ("[vocab]: all logits of the last prompt position", "float"),
        "greedy.ids": (f"[{steps}]: greedy continuation through the KV cache, EOS not applied", "exact"),
        "greedy.top64.ids": (
            f"[{steps}, 64]: row i: the ids of the 64 largest logits of greedy step i (row 0 = last prompt position; row i = "
            "after feeding greedy.ids[i-1] at position P+i-1), largest first; column 0 is greedy.ids",
            "exact",
        ),
        "greedy.top64.logits": (f"[{steps}, 64]: those logits (compare your logits at these ids)", "float"),
        "greedy.gaps": (f"[{steps}]: top-1 minus top-2 logit of each greedy step (not a check; the robustness of greedy.ids)", "info"),
    }
    entries = []
    for prompt in dict.fromkeys(name.split(".", 1)[0] for name in tensors):
        for suffix, (meaning, metric) in meanings.items():
            entries.append((f"{prompt}.{suffix}", meaning, metric))
    return entries


def make_manifest(config, tensors, prompts):
    longest_dot = max(config.hidden_size, config.intermediate_size, config.num_heads * config.head_dim)
    why = (
        f"measured, not derived: this same forward pass in float32 (NumPy/BLAS with the KV cache; and naive left-to-right "
        f"dot products) must differ from float64 by at most threshold / {REQUIRED_MARGIN:g} (max|err|/max|ref|, per "
        f"tensor; measured values in prompts[].observed_float32_relative), leaving that much room for a float32 engine that "
        f"rounds differently (summation order, FMA, its own exp/sin/cos). Dot products here have up to {longest_dot} "
        f"terms and pass through {config.num_layers} layers, so the tiny fixtures' 1e-5 would be too tight. The "
        f"weights are the exact dequantized Q4_1/Q8_0 values; an engine that also quantizes activations needs a "
        f"separately justified bound"
    )
    return {
        "format": "plumb-golden-topk",
        "version": 1,
        "name": "smollm2",
        "description": "SmolLM2-135M-Instruct, Q4_1 GGUF (30 layers, d 576, 9 heads / 3 kv heads, tied embeddings): "
        "top-64 logits at every prompt position and along a 64-step greedy continuation, float64 reference",
        "generator": GENERATOR,
        "model": {"file": MODEL_FILE, "path": f"models/{MODEL_FILE}", "sha256": MODEL_SHA256},
        "golden": "golden.safetensors",
        "tokenizer": "Hugging Face tokenizers built from the GGUF: models.BPE(tokenizer.ggml.tokens, tokenizer.ggml.merges), "
        "pre-tokenizer Sequence([Digits(individual_digits=True), ByteLevel(add_prefix_space=False, use_regex=True)]), "
        "control tokens (token_type 3) as special added tokens, no BOS (add_bos_token false)",
        "reference": "tools/reference/gguf_ref.py: weights dequantized by gguf-py, Q/K rows as stored in the GGUF, "
        "adjacent-pair RoPE, float64 arithmetic, KV-cached greedy decode",
        "storage": STORAGE,
        "top_k": TOP_K,
        "greedy_steps": GREEDY_STEPS,
        "stop_on_eos": False,
        "prompts": prompts,
        "tensors": manifest_tensor_entries(tensors, why),
    }


STORAGE = (
    "computed in float64, stored as float32 (F32): rounding moves a value by <= 2^-24 relative, "
    "far below the threshold; min_top1_top2_gap and the other manifest numbers come from the float64 values"
)
EXACT_WHY = (
    "integers; greedy ids are robust: every step's top-1/top-2 gap is >= "
    f"{GREEDY_GAP_MARGIN:g} x 2 x (threshold x max|logit|), so no engine within the threshold can choose "
    "differently (prompts[].greedy.min_top1_top2_gap); top-64 ids may legitimately reorder where two logits are "
    "within the threshold of each other, so compare logits at the golden ids rather than ids by rank"
)


def manifest_tensor_entries(tensors, why, threshold=FLOAT_THRESHOLD, steps=GREEDY_STEPS):
    """The manifest's "tensors" list: shape, dtype, meaning and check of every golden tensor."""
    entries = []
    for name, meaning, metric in tensor_entries(tensors, steps):
        array = tensors[name]
        entry = {
            "name": name,
            "shape": list(array.shape),
            "dtype": {np.dtype(np.float64): "F64", np.dtype(np.float32): "F32", np.dtype(np.int32): "I32"}[array.dtype],
            "what": meaning,
        }
        if metric == "exact":
            entry["check"] = {"metric": "exact", "threshold": 0, "why": EXACT_WHY}
        elif metric == "float":
            entry["check"] = {"metric": "max_abs_err/max_abs_ref", "threshold": threshold, "why": why}
        else:
            entry["check"] = {"metric": "none", "why": "information for the test, not a value to reproduce"}
        entries.append(entry)
    return entries


def greedy_table(manifest, steps=GREEDY_STEPS):
    """The README's table of prompts and their greedy continuations (Markdown lines)."""
    lines = [f"| prompt | tokens | greedy continuation ({steps} tokens, EOS not applied) |", "|---|---|---|"]
    for p in manifest["prompts"]:
        text = json.dumps(p["greedy"]["text"])[1:-1].replace("|", "\\|")
        lines.append(f"| `{p['name']}` | {len(p['prompt_ids'])} | {text} |")
    return lines


def readme_text(manifest):
    lines = [
        "# smollm2",
        "",
        f"Float64 reference outputs of `models/{MODEL_FILE}` (SHA-256 `{MODEL_SHA256}`, not in git) for plumb's end-to-end",
        f"test. Generated, do not edit: written by `{GENERATOR}`; format and tolerances: `tools/reference/README.md`",
        "and `manifest.json`.",
        "",
        *greedy_table(manifest),
        "",
        "Regenerate with `python3 tools/reference/make_smollm2_golden.py` (a few minutes, mostly the float32",
        "naive-accumulation measurement); check with",
        "`python3 tools/reference/check_fixtures.py --fixtures fixtures --scratch /tmp/plumb-fixtures-check`",
        "(float64 only, about a minute; included when the model file is present).",
        "",
    ]
    return "\n".join(lines)


def write(model_path, out_dir, measure_float32=True, generator=None):
    """Build and write golden.safetensors, manifest.json and README.md. generator: the module whose build,
    readme_text, MODEL_SHA256 and GENERATOR to use (default this one; make_gemma3_golden passes itself)."""
    g = generator or sys.modules[__name__]
    tensors, manifest, report = g.build(model_path, measure_float32)
    os.makedirs(out_dir, exist_ok=True)
    safetensors_io.save_file(
        os.path.join(out_dir, "golden.safetensors"),
        tensors,
        metadata={"format": "plumb-golden-topk", "model_sha256": g.MODEL_SHA256, "generator": g.GENERATOR},
    )
    make_fixtures.write_json(os.path.join(out_dir, "manifest.json"), manifest)
    with open(os.path.join(out_dir, "README.md"), "w", encoding="utf-8") as f:
        f.write(g.readme_text(manifest))
    return manifest, report


def main(argv=None, generator=None):
    g = generator or sys.modules[__name__]
    parser = argparse.ArgumentParser(description=g.__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=g.DEFAULT_MODEL, help=f"the GGUF file (default models/{g.MODEL_FILE})")
    parser.add_argument("--out", default=g.DEFAULT_OUT, help=f"output folder (default: repo {os.path.relpath(g.DEFAULT_OUT, make_fixtures.REPO_ROOT)})")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    _, report = write(args.model, args.out, generator=g)
    for line in report:
        print(line)
    size = os.path.getsize(os.path.join(args.out, "golden.safetensors"))
    print(f"wrote {args.out} (golden.safetensors {size} bytes) in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
