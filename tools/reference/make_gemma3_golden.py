"""Golden outputs of the real Gemma 3 270M Q4_K_M GGUF, for plumb's end-to-end test.

    python3 tools/reference/make_gemma3_golden.py [--model models/gemma-3-270m-q4_k_m.gguf] [--out DIR]

(default DIR: <repo>/fixtures/gemma3). Writes golden.safetensors, manifest.json and README.md in the
plumb-golden-topk format of fixtures/smollm2 (make_smollm2_golden.py, whose machinery this reuses).

The model file is git-ignored; its SHA-256 is checked first. Four prompts, each starting with <bos>
(tokenizer.ggml.add_bos_token is true): a chat turn in Gemma's template, English prose, Python code, and
`long`, the start of the GPL-3 text (fixtures/tokenizer/gpl-3.txt), longer than the 512-token sliding
window so that the sliding layers really drop keys. Token ids come from the `sentencepiece` package with
a ModelProto built from the GGUF's vocabulary (see build_tokenizer), not from plumb's tokenizer.

The float64 reference gemma3_ref.py (weights dequantized by gguf-py) computes per prompt the top-64
logits at every prompt position, all logits of the last prompt position, and a 32-step greedy
continuation through the KV cache with its top-64 logits. Float32 measurements as for SmolLM2: the
same forward pass in float32 through NumPy/BLAS (all prompts) and with naive left-to-right dot products
(prompts up to SEQUENTIAL_MAX_TOKENS tokens: over a 262,144-token vocabulary the naive run of the long
prompt would take many minutes and gigabytes).
"""

import copy
import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # see make_smollm2_golden.py

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gemma3_ref  # noqa: E402
import gguf_ref  # noqa: E402
import llama_ref  # noqa: E402
import make_fixtures  # noqa: E402
import make_smollm2_golden as topk  # noqa: E402
import make_tokenizer_fixtures  # noqa: E402

GENERATOR = "tools/reference/make_gemma3_golden.py"
MODEL_FILE = "gemma-3-270m-q4_k_m.gguf"
MODEL_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
DEFAULT_MODEL = os.path.join(make_fixtures.REPO_ROOT, "models", MODEL_FILE)
DEFAULT_OUT = os.path.join(make_fixtures.REPO_ROOT, "fixtures", "gemma3")
GREEDY_STEPS = 32
REPREFILL_STEPS = (1, 31)
SEQUENTIAL_MAX_TOKENS = 128
FLOAT_THRESHOLD = topk.FLOAT_THRESHOLD  # 1e-4, the SmolLM2 argument; the generator re-measures it here
LONG_PROMPT_CHARS = 2448  # up to the end of the paragraph "...authors of previous versions." (549 tokens)
MIN_LONG_PROMPT_TOKENS = 530  # the last prompt position and every greedy step must be past the 512 window


def long_prompt_text():
    with open(os.path.join(make_fixtures.REPO_ROOT, "fixtures", "tokenizer", "gpl-3.txt"), encoding="utf-8") as f:
        return "<bos>" + f.read()[:LONG_PROMPT_CHARS]


PROMPTS = [
    ("chat", "<bos><start_of_turn>user\nWhat is the capital of France?<end_of_turn>\n<start_of_turn>model\n"),
    ("english", "<bos>The old lighthouse keeper climbed the stairs every evening, and"),
    ("code", '<bos>def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n    if n < 2:\n        return n\n'),
    ("long", None),  # long_prompt_text()
]


# ----------------------------------------------------------------------------------
# Tokenizer: sentencepiece on a ModelProto built from the GGUF (make_tokenizer_fixtures's, which also
# gives plumb's tokenizer its oracle ids)
# ----------------------------------------------------------------------------------


class Tokenizer:
    """sentencepiece with make_tokenizer_fixtures.gemma3_model_proto (BPE, byte fallback, identity normalizer,
    no dummy prefix, extra whitespace kept, spaces escaped; piece types from tokenizer.ggml.token_type, with
    <unk> UNKNOWN and the GGUF's spaces in user-defined pieces turned back into U+2581), plus the control
    tokens written in the text (<bos>, <start_of_turn>, ...) matched literally first, as llama.cpp's
    parse_special and Hugging Face's added tokens do (sentencepiece never emits control pieces)."""

    def __init__(self, metadata):
        import sentencepiece

        if metadata.get("tokenizer.ggml.model") != "llama" or metadata.get("tokenizer.ggml.add_space_prefix") is not False:
            raise ValueError("expected tokenizer.ggml.model llama (SentencePiece) with add_space_prefix false")
        self.tokens = metadata["tokenizer.ggml.tokens"]
        types = metadata["tokenizer.ggml.token_type"]
        ids = [int(metadata[f"tokenizer.ggml.{k}_token_id"]) for k in ("unknown", "bos", "eos", "padding")]
        self.sp = sentencepiece.SentencePieceProcessor(
            model_proto=make_tokenizer_fixtures.gemma3_model_proto(self.tokens, metadata["tokenizer.ggml.scores"], types, *ids)
        )
        self.specials = {t: i for i, (t, ty) in enumerate(zip(self.tokens, types)) if ty in (2, 3)}
        self.control = set(self.specials.values())

    def encode(self, text):
        """Ids of text; raises unless decode gives the text back."""
        ids = []
        for part in make_tokenizer_fixtures.split_at_special(text, self.specials):
            ids += [part] if isinstance(part, int) else self.sp.encode(part)
        if self.decode(ids) != text:
            raise AssertionError(f"tokenizer does not round-trip {text!r}")
        return ids

    def decode(self, ids):
        """Text of ids; control tokens spelled out."""
        out, run = [], []
        for i in list(ids) + [None]:
            if i is None or i in self.control:
                out.append(self.sp.decode(run))
                run = []
                if i is not None:
                    out.append(self.tokens[i])
            else:
                run.append(int(i))
        return "".join(out)


# ----------------------------------------------------------------------------------
# Golden
# ----------------------------------------------------------------------------------


def prompts():
    return [(name, text if text is not None else long_prompt_text()) for name, text in PROMPTS]


def build(model_path, measure_float32=True):
    """(tensors, manifest, report lines); measure_float32=False: float64 only, no observed_* fields."""
    report = []
    started = time.perf_counter()
    digest = topk.sha256_of(model_path)
    if digest != MODEL_SHA256:
        raise ValueError(f"{model_path}: SHA-256 {digest}, expected {MODEL_SHA256}")
    data = gguf_ref.read_gguf(model_path)
    tokenizer = Tokenizer(data.metadata)
    model64 = gemma3_ref.reference_model(data)
    model32 = model32_sequential = None
    if measure_float32:
        model32 = gemma3_ref.reference_model(data, dtype=np.float32)
        model32_sequential = copy.copy(model32)
        model32_sequential.matmul = llama_ref.matmul_sequential
    report.append(f"loaded and checked {model_path} in {time.perf_counter() - started:.1f} s")

    tensors, entries = {}, []
    eos = int(data.metadata["tokenizer.ggml.eos_token_id"])
    for name, text in prompts():
        prompt_ids = tokenizer.encode(text)
        if name == "long" and len(prompt_ids) < MIN_LONG_PROMPT_TOKENS:
            raise AssertionError(f"long prompt has only {len(prompt_ids)} tokens")
        sequential = model32_sequential if len(prompt_ids) <= SEQUENTIAL_MAX_TOKENS else None
        started = time.perf_counter()
        r = topk.run_prompt(model64, model32, sequential, prompt_ids, GREEDY_STEPS, REPREFILL_STEPS)
        seconds = time.perf_counter() - started
        entry, line = topk.record_prompt(tensors, name, text, prompt_ids, r, seconds, tokenizer.decode, eos, measure_float32, FLOAT_THRESHOLD)
        entries.append(entry)
        report.append(line)
    return tensors, make_manifest(model64.config, tensors, entries), report


def make_manifest(config, tensors, entries):
    longest_dot = max(config.hidden_size, config.intermediate_size, config.num_heads * config.head_dim)
    why = (
        f"measured, not derived: this same forward pass in float32 (NumPy/BLAS with the KV cache, every prompt; naive "
        f"left-to-right dot products, prompts up to {SEQUENTIAL_MAX_TOKENS} tokens) must differ from float64 by at most "
        f"threshold / {topk.REQUIRED_MARGIN:g} (max|err|/max|ref|, per tensor; measured values in "
        f"prompts[].observed_float32_relative), leaving that much room for a float32 engine that rounds differently "
        f"(summation order, FMA, its own exp/tanh/sin/cos). Dot products here have up to {longest_dot} terms (and up to "
        f"512 positions in attention) and pass through {config.num_layers} layers. The weights are the exact "
        f"dequantized Q5_0/Q4_K/Q6_K/Q8_0 values; an engine that also quantizes activations needs a separately "
        f"justified bound"
    )
    return {
        "format": "plumb-golden-topk",
        "version": 1,
        "name": "gemma3",
        "description": "Gemma 3 270M (base), Q4_K_M GGUF (18 layers, d 640, 4 heads / 1 kv head of 256, sliding window "
        "512 with every 6th layer global, tied 262,144-token embeddings): top-64 logits at every prompt position and "
        "along a 32-step greedy continuation, float64 reference",
        "generator": GENERATOR,
        "model": {"file": MODEL_FILE, "path": f"models/{MODEL_FILE}", "sha256": MODEL_SHA256},
        "golden": "golden.safetensors",
        "tokenizer": "sentencepiece (the Python package) with a ModelProto built from the GGUF "
        "(tools/reference/make_tokenizer_fixtures.py gemma3_model_proto): pieces tokenizer.ggml.tokens / scores, piece "
        "types = tokenizer.ggml.token_type (except <unk>, typed UNKNOWN as sentencepiece requires; spaces in "
        "user-defined pieces turned back into U+2581), model_type BPE, byte_fallback, identity normalizer, "
        "add_dummy_prefix false, remove_extra_whitespaces false, escape_whitespaces true; control tokens written in "
        "the text (<bos>, <start_of_turn>, <end_of_turn>) matched literally first; every prompt starts with <bos> "
        "(add_bos_token true)",
        "reference": "tools/reference/gemma3_ref.py: weights dequantized by gguf-py, float64 arithmetic, KV-cached "
        "greedy decode",
        "storage": topk.STORAGE,
        "top_k": topk.TOP_K,
        "greedy_steps": GREEDY_STEPS,
        "stop_on_eos": False,
        "prompts": entries,
        "tensors": topk.manifest_tensor_entries(tensors, why, FLOAT_THRESHOLD, GREEDY_STEPS),
    }


def readme_text(manifest):
    lines = [
        "# gemma3",
        "",
        f"Float64 reference outputs of `models/{MODEL_FILE}` (SHA-256 `{MODEL_SHA256}`, not in git) for plumb's",
        f"end-to-end test. Generated, do not edit: written by `{GENERATOR}`; format and tolerances:",
        "`docs/fixtures-golden-format.md` (Gemma 3 section), `tools/reference/README.md` and `manifest.json`.",
        "",
        *topk.greedy_table(manifest, GREEDY_STEPS),
        "",
        "Regenerate with `python3 tools/reference/make_gemma3_golden.py`; check with",
        "`python3 tools/reference/check_fixtures.py --fixtures fixtures --scratch /tmp/plumb-fixtures-check`",
        "(float64 only; included when the model file is present, `--skip-gemma3` leaves it out).",
        "",
    ]
    return "\n".join(lines)


def write(model_path, out_dir, measure_float32=True):
    """golden.safetensors, manifest.json and README.md into out_dir (make_smollm2_golden.write with this module)."""
    return topk.write(model_path, out_dir, measure_float32, sys.modules[__name__])


if __name__ == "__main__":
    topk.main(generator=sys.modules[__name__])
