"""Write fixtures/tiny-gemma3/: two small random Gemma 3 GGUF files and their float64 goldens.

    python3 tools/reference/make_tiny_gemma3.py [--out DIR]      # default DIR: <repo>/fixtures/tiny-gemma3

model.q.gguf            d 256, 4 heads / 2 kv heads, head_dim 64, ffn 512, 7 layers (layer 5 global, the
                        others sliding, window 5), vocab 512; the tensor types of the real Gemma 3 270M
                        Q4_K_M file (below).
model.f32.softcap.gguf  every tensor F32 and gemma3.final_logit_softcapping = 30; smaller (d 64, 4 heads /
                        2 kv heads of head_dim 32, so q has 128 rows != d; ffn 128) to keep the file small.

Both are written with gguf-py's GGUFWriter with the keys and tensor names of llama.cpp's converter
(convert_hf_to_gguf.py, Gemma3Model): gemma3.{context_length, embedding_length, block_count,
feed_forward_length, attention.head_count, attention.layer_norm_rms_epsilon, attention.key_length,
attention.value_length}, general.file_type, gemma3.{rope.freq_base, attention.sliding_window,
attention.head_count_kv}, optional gemma3.final_logit_softcapping, general.quantization_version; no
tokenizer keys (token ids are just numbers below 512); tied embeddings (no output.weight). Tensors in the
order llama-quantize writes them (llama_model_loader's weight_name_comparer: the non-layer tensors by
name, then layer by layer, by name within a layer), the order of the real file.

Tensor types of model.q.gguf, as llama-quantize's Q4_K_M gives the real 270M file: attn_q, attn_k,
ffn_gate, ffn_up Q5_0; attn_output Q4_K; attn_v Q8_0 and ffn_down Q6_K on the "more bits" layers
(use_more_bits(i, n): i < n/8, i >= 7n/8 or (i - n/8) % 3 == 2; here layers 2, 5, 6), attn_v Q5_0 and
ffn_down Q4_K on the others; token_embd Q8_0; norms F32. Q5_0 and Q8_0 are quantized by
gguf.quants.quantize, Q4_K and Q6_K by kquants.py (gguf-py has no quantizer for them).

Weights: numpy.random.default_rng(seed) standard_normal in float64, scaled, rounded to float32: Linear
weights N(0, 1/fan_in), every norm weight (the GGUF's, +1 already included) 1 + 0.1 N(0,1), token
embeddings EMBEDDING_STD * N(0,1). The bytes are deterministic (check_fixtures.py compares them).

Goldens (format plumb-golden, the tensors of fixtures/tiny-llama/gguf-goldens): the float64 reference
gemma3_ref.py on gguf-py's dequantization of each written file: prompt_ids [20], logits [20, 512],
greedy.ids [16], greedy.logits [16, 512]. The prompt is 20 tokens, so the window of 5 slides many times
and the greedy rows (positions 19 .. 34) use RoPE at positions well past the window.
"""

import argparse
import os
import sys
from dataclasses import dataclass

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import export_gguf  # noqa: E402
import gemma3_ref  # noqa: E402
import gguf_ref  # noqa: E402
import kquants  # noqa: E402
import llama_ref  # noqa: E402
import make_fixtures  # noqa: E402

GENERATOR = "tools/reference/make_tiny_gemma3.py"
NAME = "tiny-gemma3"
DEFAULT_OUT = os.path.join(make_fixtures.REPO_ROOT, "fixtures", NAME)
GREEDY_STEPS = 16
PROMPT_IDS = (2, 101, 7, 345, 88, 260, 13, 499, 56, 301, 12, 77, 150, 9, 402, 33, 218, 64, 480, 5)
# Tolerance of the float goldens, metric max|err|/max|ref|: the tiny fixtures' rule (make_fixtures.py), the
# worst-case float32 error bound of the longest dot product, n u with u = 2^-24: 512 u = 3.05e-5 here (160 u
# = 1e-5 for tiny-llama). The margin and greedy rules are make_fixtures.py's.
FLOAT_THRESHOLD = 3e-5


@dataclass(frozen=True)
class Spec:
    file: str
    seed: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    layers: int
    vocab: int
    sliding_window: int
    context_length: int
    rope_base: float
    eps: float
    softcap: float | None
    quantized: bool
    embedding_std: float
    output_norm_scale: float
    description: str


SPECS = [
    Spec("model.q.gguf", 3, 256, 4, 2, 64, 512, 7, 512, 5, 64, 1e6, 1e-6, None, True, 1 / 16, 1.0,
         "Gemma 3 layout, 7 layers (layer 5 global, the rest sliding with window 5), GQA 4/2, head_dim 64, "
         "tied embeddings, the Q4_K_M tensor types of the real 270M file (Q5_0, Q4_K, Q6_K, Q8_0, F32)"),
    Spec("model.f32.softcap.gguf", 4, 64, 4, 2, 32, 128, 7, 512, 5, 64, 1e6, 1e-6, 30.0, False, 1 / 8, 8.0,
         "Gemma 3 layout, all F32, final_logit_softcapping 30, 7 layers (layer 5 global, window 5), GQA 4/2, "
         "q dimension 128 != d 64, tied embeddings"),
]


def golden_file_name(spec):
    return spec.file.replace(".gguf", ".golden.safetensors")


def manifest_file_name(spec):
    return spec.file.replace(".gguf", ".manifest.json")


# ----------------------------------------------------------------------------------
# Weights and the GGUF file
# ----------------------------------------------------------------------------------


def make_weights(spec):
    """GGUF name -> float32 array ([out, in] for Linear weights), in a fixed drawing order."""
    rng = np.random.default_rng(spec.seed)
    d, q_dim, kv_dim = spec.hidden, spec.heads * spec.head_dim, spec.kv_heads * spec.head_dim

    def linear(rows, cols):
        return (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32)

    def norm(n):
        return (1 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    w = {"token_embd.weight": (spec.embedding_std * rng.standard_normal((spec.vocab, d))).astype(np.float32)}
    for il in range(spec.layers):
        p = f"blk.{il}."
        w[p + "attn_norm.weight"] = norm(d)
        w[p + "attn_q.weight"] = linear(q_dim, d)
        w[p + "attn_k.weight"] = linear(kv_dim, d)
        w[p + "attn_v.weight"] = linear(kv_dim, d)
        w[p + "attn_q_norm.weight"] = norm(spec.head_dim)
        w[p + "attn_k_norm.weight"] = norm(spec.head_dim)
        w[p + "attn_output.weight"] = linear(d, q_dim)
        w[p + "post_attention_norm.weight"] = norm(d)
        w[p + "ffn_norm.weight"] = norm(d)
        w[p + "ffn_gate.weight"] = linear(spec.ffn, d)
        w[p + "ffn_up.weight"] = linear(spec.ffn, d)
        w[p + "ffn_down.weight"] = linear(d, spec.ffn)
        w[p + "post_ffw_norm.weight"] = norm(d)
    w["output_norm.weight"] = spec.output_norm_scale * norm(d)
    return w


def use_more_bits(layer, n_layers):
    """llama-quantize's rule (llama-quant.cpp) for the layers whose attn_v / ffn_down get more bits."""
    return layer < n_layers // 8 or layer >= 7 * n_layers // 8 or (layer - n_layers // 8) % 3 == 2


def tensor_type(spec, name, values):
    import gguf

    T = gguf.GGMLQuantizationType
    if values.ndim == 1 or not spec.quantized:
        return T.F32
    if name == "token_embd.weight":
        return T.Q8_0
    layer, kind = int(name.split(".")[1]), name.split(".")[2]
    more_bits = use_more_bits(layer, spec.layers)
    return {
        "attn_q": T.Q5_0,
        "attn_k": T.Q5_0,
        "ffn_gate": T.Q5_0,
        "ffn_up": T.Q5_0,
        "attn_output": T.Q4_K,
        "attn_v": T.Q8_0 if more_bits else T.Q5_0,
        "ffn_down": T.Q6_K if more_bits else T.Q4_K,
    }[kind]


def quantize_order(name):
    """llama_model_loader's weight_name_comparer: non-layer tensors (layer -1) first, then by layer, then by name."""
    layer = int(name.split(".")[1]) if name.startswith("blk.") else -1
    return (layer, name)


def write_gguf(spec, path):
    """Writes the GGUF; returns {tensor name: ggml type name} in file order."""
    import gguf

    weights = make_weights(spec)
    writer = gguf.GGUFWriter(path, gemma3_ref.ARCHITECTURE)  # writes general.architecture
    writer.add_type("model")
    writer.add_name(NAME)
    writer.add_context_length(spec.context_length)
    writer.add_embedding_length(spec.hidden)
    writer.add_block_count(spec.layers)
    writer.add_feed_forward_length(spec.ffn)
    writer.add_head_count(spec.heads)
    writer.add_layer_norm_rms_eps(spec.eps)
    writer.add_key_length(spec.head_dim)
    writer.add_value_length(spec.head_dim)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_K_M if spec.quantized else gguf.LlamaFileType.ALL_F32)
    writer.add_rope_freq_base(spec.rope_base)
    writer.add_sliding_window(spec.sliding_window)
    writer.add_head_count_kv(spec.kv_heads)
    if spec.softcap is not None:
        writer.add_final_logit_softcapping(spec.softcap)
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
    types = {}
    for name in sorted(weights, key=quantize_order):
        qtype = tensor_type(spec, name, weights[name])
        writer.add_tensor(name, kquants.quantize(weights[name], qtype), raw_dtype=qtype)
        types[name] = qtype.name
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return types, weights


# ----------------------------------------------------------------------------------
# Goldens
# ----------------------------------------------------------------------------------


def run(model):
    prompt_ids = list(PROMPT_IDS)
    logits = model.forward(prompt_ids, model.new_cache())
    greedy_ids, greedy_logits = llama_ref.greedy_decode(model, prompt_ids, GREEDY_STEPS)
    return {"prompt_ids": np.array(prompt_ids, dtype=np.int32), "logits": logits, "greedy.ids": greedy_ids, "greedy.logits": greedy_logits}


def build_golden(spec, gguf_path, tensor_types, weights):
    """Golden tensors and manifest of one file; raises if a guarantee fails."""
    data = gguf_ref.read_gguf(gguf_path)
    model64 = gemma3_ref.reference_model(data)
    config = model64.config
    golden = run(model64)
    float32_blas = run(gemma3_ref.reference_model(data, dtype=np.float32))
    float32_sequential = run(gemma3_ref.reference_model(data, dtype=np.float32, sequential_dots=True))

    llama_ref.check_decode_matches_reprefill(
        model64, list(PROMPT_IDS), golden["greedy.ids"], golden["greedy.logits"], make_fixtures.DECODE_VS_PREFILL_TOLERANCE
    )
    assert np.array_equal(golden["logits"][-1], golden["greedy.logits"][0])
    min_gap = min(llama_ref.top1_top2_gap(row) for row in golden["greedy.logits"])
    largest_allowed_shift = FLOAT_THRESHOLD * float(np.max(np.abs(golden["greedy.logits"])))
    if min_gap < make_fixtures.MIN_GREEDY_GAP or min_gap < 20 * largest_allowed_shift:
        raise AssertionError(f"{spec.file}: greedy top-1/top-2 gap {min_gap:.3e} too small (allowed shift {largest_allowed_shift:.1e})")

    extra = {}
    if spec.quantized:
        # How far quantization moved the logits from the float32 weights' model (prefill rows).
        unquantized = gemma3_ref.Gemma3Model(config, weights).forward(list(PROMPT_IDS), llama_ref.KVCache(config, np.float64))
        extra["logits_shift_from_f32_weights"] = make_fixtures.significant(llama_ref.max_relative_error(golden["logits"], unquantized), 3)
    if spec.softcap:
        uncapped = gemma3_ref.reference_model(data)
        uncapped.config = type(config)(**{**config.__dict__, "final_logit_softcapping": 0.0})
        raw = uncapped.forward(list(PROMPT_IDS), uncapped.new_cache())
        extra["max_abs_logit_before_softcap"] = make_fixtures.significant(float(np.max(np.abs(raw))), 3)
        extra["softcap_shift"] = make_fixtures.significant(llama_ref.max_relative_error(golden["logits"], raw), 3)

    why = make_fixtures.float_why(config, len(PROMPT_IDS) + GREEDY_STEPS - 1, FLOAT_THRESHOLD) + (
        "; it assumes exact dequantization to float32 (ggml's definition) and float32 arithmetic: an engine that "
        "also quantizes activations needs its own bound"
    )
    tensors = export_gguf.golden_tensor_entries(
        golden, float32_blas, float32_sequential, golden_file_name(spec), dict(make_fixtures.tensor_descriptions(config)),
        FLOAT_THRESHOLD, why, spec.file,
    )

    counts = {}
    for type_name in tensor_types.values():
        counts[type_name] = counts.get(type_name, 0) + 1
    manifest = {
        "format": "plumb-golden",
        "version": 1,
        "name": f"{NAME}/{spec.file}",
        "description": spec.description,
        "generator": GENERATOR,
        "seed": spec.seed,
        "config": None,
        "weights": spec.file,
        "golden": golden_file_name(spec),
        "gemma3": {
            "embedding_length": spec.hidden,
            "block_count": spec.layers,
            "feed_forward_length": spec.ffn,
            "attention.head_count": spec.heads,
            "attention.head_count_kv": spec.kv_heads,
            "attention.key_length": spec.head_dim,
            "attention.sliding_window": spec.sliding_window,
            "rope.freq_base (global layers)": spec.rope_base,
            "rope base of sliding layers": gemma3_ref.SLIDING_ROPE_BASE,
            "global_layers": [il for il in range(spec.layers) if config.is_global(il)],
            "final_logit_softcapping": spec.softcap,
            "vocab": spec.vocab,
        },
        "gguf": {
            "tensor_types": tensor_types,
            "tensor_type_counts": dict(sorted(counts.items())),
            **extra,
        },
        "prompt_ids": list(PROMPT_IDS),
        "greedy": {
            "steps": GREEDY_STEPS,
            "stop_on_eos": False,
            "min_top1_top2_gap": make_fixtures.significant(min_gap),
            "ids": [int(t) for t in golden["greedy.ids"]],
        },
        "tensors": tensors,
    }
    return golden, manifest


def readme_text():
    return f"""# tiny-gemma3

Generated, do not edit: written by `{GENERATOR}`; checked by `tools/reference/check_fixtures.py`.
Details: `docs/fixtures-golden-format.md` (Gemma 3 section) and `tools/reference/README.md`.

| file | contents |
|---|---|
| `model.q.gguf` | random Gemma 3: d 256, 4 heads / 2 kv heads, head_dim 64, ffn 512, 7 layers (layer 5 global, 0-4 and 6 sliding, window 5), vocab 512, rope base 1e6 (global) / 1e4 (sliding), eps 1e-6, tied embeddings; the real 270M Q4_K_M file's tensor types (Q5_0, Q4_K, Q6_K, Q8_0, F32 norms) |
| `model.f32.softcap.gguf` | random Gemma 3, all F32, `gemma3.final_logit_softcapping` 30: d 64, 4 heads / 2 kv heads, head_dim 32 (q dimension 128 != d), ffn 128, the same 7 layers / window 5 / vocab 512 |
| `model.<q or f32.softcap>.golden.safetensors` | `prompt_ids` [20] I32, `logits` [20, 512] F64, `greedy.ids` [16] I32, `greedy.logits` [16, 512] F64 (the tensors of `fixtures/tiny-llama/gguf-goldens`) |
| `model.<q or f32.softcap>.manifest.json` | plumb-golden manifest: threshold (max\\|err\\|/max\\|ref\\| {FLOAT_THRESHOLD:g}) and its argument, the float32 measurements, greedy gap, the ggml type of every tensor |

The goldens are the float64 reference `tools/reference/gemma3_ref.py` run on the weights gguf-py's dequantizer
reads back from each file. No tokenizer keys: token ids are plain numbers below 512.
"""


def write_fixture(out_dir):
    """Write every file; returns report lines."""
    os.makedirs(out_dir, exist_ok=True)
    lines = []
    for spec in SPECS:
        path = os.path.join(out_dir, spec.file)
        types, weights = write_gguf(spec, path)
        golden, manifest = build_golden(spec, path, types, weights)
        summary = export_gguf.save_gguf_golden(out_dir, golden_file_name(spec), manifest_file_name(spec), golden, manifest, GENERATOR)
        extra = {k: v for k, v in manifest["gguf"].items() if k not in ("tensor_types", "tensor_type_counts")}
        lines.append(f"{spec.file}: {os.path.getsize(path)} bytes; {summary}; {extra}")
    with open(os.path.join(out_dir, "README.md"), "w", encoding="utf-8") as f:
        f.write(readme_text())
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=DEFAULT_OUT, help="output folder (default: repo fixtures/tiny-gemma3)")
    args = parser.parse_args(argv)
    for line in write_fixture(args.out):
        print(line)


if __name__ == "__main__":
    main()
