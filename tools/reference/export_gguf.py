"""Convert a Hugging Face checkpoint to GGUF, as llama.cpp's converter does, and write the tiny-llama GGUF
fixtures with their float64 goldens and fixtures/transformers/*/model.f16.gguf.

    python3 tools/reference/export_gguf.py convert CHECKPOINT_DIR OUT.gguf [--type f32|f16|q8_0|q4_0|q4_1]
    python3 tools/reference/export_gguf.py fixtures [--out DIR]        # default DIR: <repo>/fixtures
    python3 tools/reference/export_gguf.py transformers-fixtures [--root DIR]   # fixtures/transformers

Families (ARCHITECTURES; the converter's classes, convert_hf_to_gguf.py / conversion/*.py): Llama, Mistral and
Mixtral as arch llama (LlamaModel), SmolLM3 as smollm3 (a LlamaModel), Qwen2 qwen2, Qwen3 qwen3, Qwen3-MoE
qwen3moe, Gemma 2 gemma2, Gemma 3 (text) gemma3, OLMo 2 olmo2, Phi-3 phi3. Tensor names are gguf-py's
TensorNameMap for the arch (what the converter's map_tensor_name reads). Per family, beyond Llama's below:
Q/K rows are permuted for llama and smollm3 only (the others keep Hugging Face's order: llama.cpp runs them
with rotate-half RoPE); Mixtral's experts are stacked into blk.N.ffn_{gate,down,up}_exps [n_expert, rows, cols]
(w1, w2, w3) where the converter meets a layer's last one, its router ffn_gate_inp F32, llama.expert_count and
expert_used_count written; Phi-3's fused qkv_proj and gate_up_proj are stored as attn_qkv and ffn_up (gate
rows first) with phi3.rope.dimension_count = int(partial_rotary_factor * n_embd) // n_head,
phi3.rope.scaling.original_context_length and phi3.attention.sliding_window (0 for none); Gemma 2 and 3 norms
are stored as w + 1 (attn_norm, post_attention_norm, ffn_norm = pre_feedforward_layernorm, post_ffw_norm,
Gemma 3's attn_q_norm / attn_k_norm), with <arch>.attn_logit_softcapping / final_logit_softcapping and
<arch>.attention.sliding_window, Gemma 3's linear RoPE scaling as rope.scaling.type / factor and its local base
as rope.freq_base_swa (TextModel's keys); OLMo 2 has attn_q_norm / attn_k_norm over the whole projections and
only post_attention_norm / post_ffw_norm. The metadata keys of each follow its converter class's
set_gguf_parameters in order.

Deviations from the converter, each because its output would not be this checkpoint's math:
  * Gemma's +1 is added in float32 (transformers multiplies by 1 + w.float()); the converter adds it to the F16
    tensor before widening it, which rounds 1 + w to F16 (up to 1e-3 here: far beyond the 1e-5 tolerance).
  * <arch>.attention.scale (query_pre_attn_scalar^-1/2 in float32) for a Gemma whose query_pre_attn_scalar is
    not head_dim: llama.cpp derives Gemma's scale from the model size (1/sqrt(head_dim) but for the 27B) and
    reads the key, which it defines, for other archs only. Written only when it differs from head_dim.
  * gemma3.attention.sliding_window_pattern (a period, uint32) when the checkpoint's layer_types period is not
    llama.cpp's fixed 6 (gemma2: 2); llama.cpp defines the key for other archs and ignores it for these.
  * llama.attention.sliding_window for Mistral's window on every layer: llama.cpp's llama arch has no window
    (it runs such a file with full attention); the key is the one it defines for other archs.
  * No tokenizer.* keys (below), so Gemma 3's token_embd keeps every row (the converter drops rows past the
    tokenizer's vocabulary), and no vocab_size key where the converter takes it from the tokenizer.
Refused (ValueError), because no GGUF key says it: Qwen3-MoE with dense layers (mlp_only_layers,
decoder_sparse_step), SmolLM3 whose NoPE layers are not every 4th (llama.cpp's fixed n_no_rope_layer_step),
Qwen's partial sliding window, LongRoPE, a RoPE type other than default (linear for Gemma 3, llama3 for llama).

The rest of this docstring describes the llama arch.

`convert` reads CHECKPOINT_DIR/config.json and CHECKPOINT_DIR/model.safetensors (one file) and writes the GGUF with gguf-py's GGUFWriter, following llama.cpp's
convert_hf_to_gguf.py (class LlamaModel) for everything it covers:

  * tensor names: token_embd, blk.N.{attn_norm, attn_q, attn_k, attn_v, attn_output, ffn_norm,
    ffn_gate, ffn_up, ffn_down}, output_norm, output (absent when the embeddings are tied);
  * Q and K rows permuted per head by the converter's own formula (`permute` below; n_head_kv heads
    for K), so that adjacent-pair RoPE on the GGUF rows equals rotate-half RoPE on the HF rows;
  * metadata, in the converter's order: general.architecture, general.type, general.name,
    llama.block_count, llama.context_length, llama.embedding_length, llama.feed_forward_length,
    llama.attention.head_count, llama.attention.head_count_kv, llama.rope.freq_base,
    llama.attention.layer_norm_rms_epsilon, llama.attention.key_length / value_length (only when
    config.json has head_dim), general.file_type, llama.vocab_size, llama.rope.dimension_count,
    general.quantization_version;
  * tensors in the order the converter meets them in a single safetensors file (sorted HF names);
  * 1-D tensors (the norms) always F32;
  * RoPE from either config.json spelling: the base from top-level rope_theta (transformers 4) or
    rope_parameters.rope_theta (transformers 5), written as llama.rope.freq_base; Llama 3.x scaling
    (rope_type, or the older key type, "llama3" in rope_scaling or rope_parameters) as the converter's
    LlamaModel.generate_extra_tensors does: an extra F32 tensor rope_freqs.weight [head_dim / 2]
    holding each rotation pair's frequency divisor (llama3_rope_freqs below), first in the file (the
    converter chains its extra tensors before the checkpoint's), and no other key. Any other RoPE type
    ("linear", "yarn", "dynamic", "longrope", ...) and partial rotation are refused (ValueError).

Tensor types per --type: f32: all F32. f16 and q8_0: every 2-D tensor F16 / Q8_0 (as
`convert_hf_to_gguf.py --outtype f16|q8_0`). q4_0 and q4_1 are not converter output types but
llama-quantize's; this mirrors what llama-quantize makes of them: the 2-D weights of the blocks in
Q4_0 / Q4_1, and token_embd and output in Q8_0 (llama-quantize gives the output matrix Q6_K and,
when its rows are not a multiple of the 256-element K-quant block, falls back to Q8_0; the
SmolLM2-135M Q4_1 file has its tied token_embd in Q8_0 this way). Quantizing is done by
gguf.quants.quantize (gguf-py's transcription of ggml's reference quantizers).

No tokenizer.* keys are written: the tiny checkpoints have no tokenizer (their token ids are just
numbers below vocab_size), and an invented vocabulary would only be something for a loader to get
wrong. bos/eos ids stay in config.json and the fixture manifests.

The output is deterministic: gguf-py writes nothing time- or host-dependent, and quantization is
plain float32 NumPy arithmetic, so the same checkpoint and type always give the same bytes
(check_fixtures.py compares them byte for byte).

`fixtures` writes fixtures/tiny-llama/model.{f32,f16,q8_0,q4_0,q4_1}.gguf from the tiny-llama
checkpoint, and for every type except f32 a golden under fixtures/tiny-llama/gguf-goldens/
(the float64 reference on the weights dequantized from the written file by gguf-py, with
adjacent-pair RoPE on the GGUF rows as stored; see that folder's README.md). The F32 file needs
no golden of its own: the generator proves that it reproduces fixtures/tiny-llama/golden.safetensors.
"""

import argparse
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gguf_ref  # noqa: E402
import llama_ref  # noqa: E402
import make_fixtures  # noqa: E402
import safetensors_io  # noqa: E402

GENERATOR = "tools/reference/export_gguf.py"
ARCHITECTURE = "llama"
TYPES = ("f32", "f16", "q8_0", "q4_0", "q4_1")
FIXTURE_NAME = "tiny-llama"
# Every checkpoint the `fixtures` command converts, with the types it writes (f32 first: it has no golden of
# its own). tiny-qwen3moe: the MoE model as llama.cpp's qwen3moe architecture.
GGUF_FIXTURES = {FIXTURE_NAME: TYPES, "tiny-qwen3moe": ("f32", "q8_0", "q4_0")}
# The GGUF architecture written for each Hugging Face class, as the converter registers them: Mistral and
# Mixtral are its LlamaModel (arch llama), SmolLM3 a LlamaModel subclass with an arch of its own.
ARCHITECTURES = {
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "llama",
    "MixtralForCausalLM": "llama",
    "SmolLM3ForCausalLM": "smollm3",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
    "Qwen3MoeForCausalLM": "qwen3moe",
    "Gemma2ForCausalLM": "gemma2",
    "Gemma3ForCausalLM": "gemma3",
    "Olmo2ForCausalLM": "olmo2",
    "Phi3ForCausalLM": "phi3",
}
# The converter's LlamaModel and its subclasses permute Q/K rows (undo_permute) and llama.cpp runs them with
# adjacent-pair RoPE (LLAMA_ROPE_TYPE_NORM); every other class here keeps Hugging Face's row order and
# llama.cpp runs it with rotate-half RoPE (LLAMA_ROPE_TYPE_NEOX).
PERMUTED_ARCHITECTURES = ("llama", "smollm3")
# Gemma's RMSNorm multiplies by (1 + w): the converter stores w + 1 (Gemma2Model / Gemma3Model.modify_tensors).
GEMMA_ARCHITECTURES = ("gemma2", "gemma3")
# llama.cpp's fixed values where a GGUF key is absent (llama_model::load_hparams): Gemma 3's and Gemma 2's
# sliding-window period, and SmolLM3's NoPE step (n_no_rope_layer_step, which no key sets).
LLAMA_CPP_SWA_PATTERN = {"gemma2": 2, "gemma3": 6}
LLAMA_CPP_NO_ROPE_LAYER_STEP = 4
# The fixtures/transformers checkpoints `transformers-fixtures` converts to model.f16.gguf, and those it does not,
# with the reason (what llama.cpp's GGUF cannot say).
TRANSFORMERS_GGUF_SKIPPED = {
    "granite": "not a family plumb runs (no expected.safetensors)",
    "qwen3-moe": "mlp_only_layers [0]: llama.cpp's qwen3moe makes every layer MoE",
    "smollm3": "NoPE on layer 1 of 2 (no_rope_layer_interval 2): llama.cpp's smollm3 skips RoPE on every 4th "
    "layer (n_no_rope_layer_step = 4) and no GGUF key says otherwise",
}
GOLDEN_DIR = "gguf-goldens"
# The float32 GGUF must reproduce the safetensors golden to float64 rounding level: the weights are
# the same numbers, only the Q/K row order and the RoPE pairing (and so the summation order in the
# attention scores) differ.
F32_GGUF_VS_GOLDEN_TOLERANCE = 1e-12
# A quantized golden must tell its type apart from the float32 model: the logits must move by at least
# this many times the float threshold, or a loader that silently read the wrong thing could pass.
MIN_QUANTIZATION_SHIFT_FACTOR = 10.0


def file_name(out_type):
    return f"model.{out_type}.gguf"


def golden_file_name(out_type):
    return f"model.{out_type}.golden.safetensors"


def manifest_file_name(out_type):
    return f"model.{out_type}.manifest.json"


# ----------------------------------------------------------------------------------
# Conversion
# ----------------------------------------------------------------------------------


def permute(weights, n_head, n_head_kv):
    """llama.cpp's LlamaModel.permute (convert_hf_to_gguf.py), on NumPy arrays: within each head,
    row i of the first half and row i of the second half become rows 2i and 2i + 1."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:]).swapaxes(1, 2).reshape(weights.shape)


def gguf_tensor_name(hf_name, architecture="llama", n_layers=None):
    """The GGUF name of a Hugging Face tensor name, by gguf-py's TensorNameMap for `architecture` (the table
    the converter's map_tensor_name reads: e.g. post_attention_layernorm is ffn_norm for llama, qwen2/3 and
    phi3, but post_attention_norm for gemma2/3 and olmo2); raises KeyError for a name it does not know."""
    import gguf

    parts = hf_name.split(".")
    layers = n_layers if n_layers is not None else (int(parts[2]) + 1 if len(parts) > 2 and parts[2].isdigit() else 1)
    arch = next(a for a, name in gguf.MODEL_ARCH_NAMES.items() if name == architecture)
    name = gguf.get_tensor_name_map(arch, layers).get_name(hf_name, try_suffixes=(".weight", ".bias"))
    if name is None:
        raise KeyError(f"no GGUF name for Hugging Face tensor {hf_name!r} ({architecture})")
    return name


def stack_experts(tensors):
    """The per-expert matrices mlp.experts.E.{gate,up,down}_proj of each layer stacked into one
    [n_expert, rows, cols] tensor under its GGUF name (blk.N.ffn_{gate,up,down}_exps.weight), as the
    converter's Qwen3MoeModel does; returns (the other tensors, {GGUF name: stacked values})."""
    rest, experts = {}, {}
    for name, values in tensors.items():
        parts = name.split(".")
        if len(parts) == 8 and parts[3:5] == ["mlp", "experts"]:
            layer, expert, matrix = int(parts[2]), int(parts[5]), parts[6]
            suffix = {hf: g for g, hf in gguf_ref.EXPERT_TENSORS.items()}[matrix]
            experts.setdefault(f"blk.{layer}.{suffix}", {})[expert] = values
        else:
            rest[name] = values
    stacked = {}
    for name, by_expert in experts.items():
        if sorted(by_expert) != list(range(len(by_expert))):
            raise ValueError(f"{name}: experts {sorted(by_expert)} are not 0 .. n - 1")
        stacked[name] = np.stack([np.asarray(by_expert[e], dtype=np.float32) for e in range(len(by_expert))])
    return rest, stacked


def tensor_type(gguf_name, values, out_type):
    """The ggml type a tensor is stored in for --type out_type (see the module docstring)."""
    import gguf

    T = gguf.GGMLQuantizationType
    # The router stays F32 in every type: the converter keeps FFN_GATE_INP so and llama-quantize skips it.
    if values.ndim <= 1 or out_type == "f32" or gguf_name.endswith("ffn_gate_inp.weight"):
        return T.F32
    if out_type == "f16":
        return T.F16
    if out_type == "q8_0":
        return T.Q8_0
    if gguf_name in ("token_embd.weight", "output.weight"):
        return T.Q8_0
    return {"q4_0": T.Q4_0, "q4_1": T.Q4_1}[out_type]


def file_type(out_type):
    import gguf

    F = gguf.LlamaFileType
    return {"f32": F.ALL_F32, "f16": F.MOSTLY_F16, "q8_0": F.MOSTLY_Q8_0, "q4_0": F.MOSTLY_Q4_0, "q4_1": F.MOSTLY_Q4_1}[out_type]


MIXTRAL_EXPERT = "block_sparse_moe.experts."


def mixtral_experts(name, tensors, n_experts, done):
    """The converter's LlamaModel.modify_tensors for Mixtral's block_sparse_moe.experts.E.w{1,2,3}: once the
    last of a layer's 3 * n_experts matrices has been met (in name order), the stacked [n_experts, rows, cols]
    tensors of w1, w2, w3 in that order, i.e. ffn_gate_exps, ffn_down_exps, ffn_up_exps; else nothing."""
    layer = int(name.split(".")[2])
    prefix = f"model.layers.{layer}.{MIXTRAL_EXPERT}"
    names = [f"{prefix}{e}.{w}.weight" for w in ("w1", "w2", "w3") for e in range(n_experts)]
    missing = [n for n in names if n not in tensors]
    if missing:
        raise ValueError(f"layer {layer}: missing expert tensors {missing}")
    done.add(name)
    if not all(n in done for n in names):
        return []
    out = []
    for w, suffix in (("w1", "ffn_gate_exps"), ("w2", "ffn_down_exps"), ("w3", "ffn_up_exps")):
        stacked = np.stack([np.asarray(tensors[f"{prefix}{e}.{w}.weight"], dtype=np.float32) for e in range(n_experts)])
        out.append((f"blk.{layer}.{suffix}.weight", stacked))
    return out


def gguf_tensors(hf_config, tensors):
    """(GGUF name, float32 values) in writing order: sorted HF names, Q/K permuted for the LlamaModel archs
    (llama, smollm3) only; Gemma's norms + 1 (in float32, see the module docstring); Mixtral's experts stacked
    where the converter meets the last of a layer's, Qwen3-MoE's stacked per layer and matrix after the rest."""
    architecture = ARCHITECTURES[hf_config["architectures"][0]]
    n_layers = hf_config["num_hidden_layers"]
    n_head = hf_config["num_attention_heads"]
    n_head_kv = hf_config.get("num_key_value_heads", n_head)
    permuted = architecture in PERMUTED_ARCHITECTURES
    stacked = {}
    if architecture == "qwen3moe":
        tensors, stacked = stack_experts(tensors)
    out, done = [], set()
    for name in sorted(tensors):
        if MIXTRAL_EXPERT in name:
            out += mixtral_experts(name, tensors, hf_config["num_local_experts"], done)
            continue
        values = np.asarray(tensors[name], dtype=np.float32)
        if permuted and name.endswith(("q_proj.weight", "q_proj.bias")):
            values = permute(values, n_head, n_head)
        elif permuted and name.endswith(("k_proj.weight", "k_proj.bias")):
            values = permute(values, n_head, n_head_kv)
        if architecture in GEMMA_ARCHITECTURES and name.endswith("norm.weight"):
            values = values + np.float32(1.0)
        out.append((gguf_tensor_name(name, architecture, n_layers), values))
    return out + sorted(stacked.items())


ROPE_FREQS = "rope_freqs.weight"


def llama3_rope_freqs(head_dim, base, rope):
    """rope_freqs.weight of a Llama 3.x checkpoint: one F32 divisor per rotation pair, as the converter
    defines it (LlamaModel.generate_extra_tensors), in float32 like the converter's torch code.

    freq_i = 1 / base^((2i) / head_dim) in float32; wavelen_i = 2 pi / freq_i; with L =
    original_max_position_embeddings, high = L / high_freq_factor and low = L / low_freq_factor, the
    divisor is 1 when wavelen_i < high, factor when wavelen_i > low, and otherwise
    1 / ((1 - smooth) / factor + smooth) with smooth = (L / wavelen_i - low_freq_factor) /
    (high_freq_factor - low_freq_factor). ggml then turns pair i at theta_i / divisor_i.

    L comes from the RoPE dict (transformers writes it there in both spellings), as in newer versions of the
    converter; older ones read a top-level original_max_position_embeddings only, defaulting to 8192 (right
    for Llama 3.1, wrong for anything else). Without it in the RoPE dict the config is refused here: a wrong
    L silently moves every pair's regime."""
    factor = float(rope["factor"])
    low_freq_factor = float(rope["low_freq_factor"])
    high_freq_factor = float(rope["high_freq_factor"])
    old_context_len = rope.get("original_max_position_embeddings")
    if old_context_len is None:
        raise ValueError("llama3 RoPE scaling without original_max_position_embeddings in its parameters")
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    if not high_freq_wavelen < low_freq_wavelen:
        raise ValueError("llama3 RoPE scaling needs high_freq_factor > low_freq_factor")
    exponents = np.arange(0, head_dim, 2, dtype=np.float32) / np.float32(head_dim)
    freqs = np.float32(1.0) / np.power(np.float32(base), exponents)
    divisors = []
    for freq in freqs:
        wavelen = np.float32(2 * math.pi) / freq
        if wavelen < high_freq_wavelen:
            divisors.append(1.0)
        elif wavelen > low_freq_wavelen:
            divisors.append(factor)
        else:
            smooth = (np.float32(old_context_len) / wavelen - np.float32(low_freq_factor)) / np.float32(high_freq_factor - low_freq_factor)
            divisors.append(np.float32(1.0) / ((np.float32(1.0) - smooth) / np.float32(factor) + smooth))
    return np.array(divisors, dtype=np.float32)


def rope_settings(hf):
    """(rope_theta or None, rope_freqs values or None) of a config.json, either spelling; raises for a
    RoPE this converter does not write (see the module docstring)."""
    head_dim = hf.get("head_dim") or hf["hidden_size"] // hf["num_attention_heads"]
    theta = llama_ref.rope_theta_from_hf(hf)  # checks that both spellings agree
    stated = hf.get("rope_theta") is not None or any(
        isinstance(d, dict) and d.get("rope_theta") is not None for d in (hf.get("rope_scaling"), hf.get("rope_parameters"))
    )
    llama_ref.rope_divisors_from_hf(hf, head_dim, theta)  # refuses unknown or inconsistent types
    if llama_ref.partial_rotary_factor_from_hf(hf) != 1.0:  # the llama archs rotate whole heads
        raise ValueError("partial_rotary_factor: partial RoPE is not written by this converter for this architecture")
    kind, params = llama_ref.rope_type_from_hf(hf)
    if kind == "default":
        return (theta if stated else None), None
    if kind == "llama3":
        return (theta if stated else None), llama3_rope_freqs(head_dim, theta, params)
    raise ValueError(f"RoPE type {kind!r} is not supported by this converter (only default and llama3)")


def rope_parameters(hf):
    """The converter's TextModel.rope_parameters, as far as these checkpoints need it: rope_parameters
    (transformers 5) or rope_scaling (4), with a top-level rope_theta mirrored in; Gemma 3's nested
    {"full_attention": ..., "sliding_attention": ...} kept as is."""
    rope = dict(hf.get("rope_parameters") or hf.get("rope_scaling") or {})
    if "full_attention" not in rope and "rope_theta" not in rope and hf.get("rope_theta") is not None:
        rope["rope_theta"] = hf["rope_theta"]
    return rope


def head_dim_of(hf):
    return hf.get("head_dim") or hf["hidden_size"] // hf["num_attention_heads"]


def query_scale(hf):
    """Gemma's attention scale query_pre_attn_scalar^-1/2 (transformers' default scalar 256), as the float32
    transformers multiplies the scores by; None where llama.cpp's own scale, 1/sqrt(head_dim), is that."""
    scalar = hf.get("query_pre_attn_scalar", 256)
    if scalar == head_dim_of(hf):
        return None
    return float(np.float32(1.0 / math.sqrt(scalar)))


def swa_pattern(hf):
    """The period p of a Gemma checkpoint's layer_types (layer i full exactly when (i + 1) % p == 0), checked to
    be one; transformers' own default where layer_types is absent."""
    types = hf.get("layer_types")
    if types is None:
        return hf.get("sliding_window_pattern") or LLAMA_CPP_SWA_PATTERN[ARCHITECTURES[hf["architectures"][0]]]
    period = next((i + 1 for i, t in enumerate(types) if t == "full_attention"), 0)
    want = ["full_attention" if period and (i + 1) % period == 0 else "sliding_attention" for i in range(len(types))]
    if types != want:
        raise ValueError(f"layer_types {types} is not periodic: no GGUF key says it")
    return period


def check_representable(hf, architecture, where):
    """Raises for a checkpoint whose math llama.cpp's GGUF of its architecture cannot say (the module docstring
    lists what is written instead where a key llama.cpp defines elsewhere can)."""
    if architecture == "qwen3moe" and (hf.get("mlp_only_layers") or hf.get("decoder_sparse_step", 1) != 1 or not hf.get("norm_topk_prob")):
        raise ValueError(f"{where}: llama.cpp's qwen3moe has every layer MoE with renormalized weights")
    if architecture == "smollm3":
        layers = hf["num_hidden_layers"]
        flags = hf.get("no_rope_layers")
        if flags is None:
            interval = hf.get("no_rope_layer_interval", 4)
            flags = [int((i + 1) % interval != 0) for i in range(layers)]
        llama_cpp = [int((i + 1) % LLAMA_CPP_NO_ROPE_LAYER_STEP != 0) for i in range(layers)]
        if list(flags) != llama_cpp:
            raise ValueError(
                f"{where}: no_rope_layers {flags}: llama.cpp's smollm3 skips RoPE on every "
                f"{LLAMA_CPP_NO_ROPE_LAYER_STEP}th layer ({llama_cpp}) and no GGUF key says otherwise"
            )
    if architecture in ("qwen2", "qwen3", "smollm3") and hf.get("use_sliding_window"):
        raise ValueError(f"{where}: use_sliding_window (a window on some layers) has no GGUF key")
    if architecture == "olmo2" and (hf.get("sliding_window") is not None or hf.get("attention_bias")):
        raise ValueError(f"{where}: an OLMo 2 with a sliding window or attention biases is not written here")
    rope = rope_parameters(hf)
    full = rope.get("full_attention", rope)
    kind = full.get("rope_type", full.get("type", "default"))
    if architecture == "phi3" and kind not in ("default", "longrope"):
        raise ValueError(f"{where}: RoPE type {kind!r} is not written for phi3")
    if architecture in ("qwen2", "qwen3", "olmo2", "gemma2") and kind != "default":
        raise ValueError(f"{where}: RoPE type {kind!r} is not written for {architecture}")
    if architecture == "gemma3":
        if kind not in ("default", "linear"):
            raise ValueError(f"{where}: RoPE type {kind!r} is not written for gemma3")
        local = rope.get("sliding_attention", {})
        if local.get("rope_type", "default") != "default":
            raise ValueError(f"{where}: Gemma 3's sliding layers rotate unscaled in llama.cpp")


def write_llama_hparams(writer, hf, architecture, out_type, rope_theta):
    """The converter's LlamaModel.set_gguf_parameters (arch llama: Llama, Mistral, Mixtral; smollm3), and the
    qwen3moe keys this exporter has always written in this order."""
    writer.add_block_count(hf["num_hidden_layers"])
    writer.add_context_length(hf["max_position_embeddings"])
    writer.add_embedding_length(hf["hidden_size"])
    writer.add_feed_forward_length(hf["intermediate_size"])
    writer.add_head_count(hf["num_attention_heads"])
    if "num_key_value_heads" in hf:
        writer.add_head_count_kv(hf["num_key_value_heads"])
    if rope_theta is not None:
        writer.add_rope_freq_base(rope_theta)
    writer.add_layer_norm_rms_eps(hf["rms_norm_eps"])
    if hf.get("num_local_experts") and architecture == "llama":  # Mixtral: TextModel's expert keys
        writer.add_expert_count(hf["num_local_experts"])
        writer.add_expert_used_count(hf["num_experts_per_tok"])
    if hf.get("head_dim") is not None:
        writer.add_key_length(hf["head_dim"])
        writer.add_value_length(hf["head_dim"])
    if architecture == "qwen3moe":
        writer.add_expert_count(hf["num_experts"] if "num_experts" in hf else hf["num_local_experts"])
        writer.add_expert_used_count(hf["num_experts_per_tok"])
        writer.add_expert_feed_forward_length(hf["moe_intermediate_size"])
    if architecture == "llama" and hf.get("sliding_window"):
        # Mistral's window (every layer): llama.cpp's llama arch has no window and ignores this key, which it
        # defines for other archs (LLM_KV_ATTENTION_SLIDING_WINDOW). A deviation: see the module docstring.
        writer.add_sliding_window(hf["sliding_window"])
    writer.add_file_type(file_type(out_type))
    writer.add_vocab_size(hf["vocab_size"])
    writer.add_rope_dimension_count(head_dim_of(hf))


def write_text_model_hparams(writer, hf, architecture):
    """The converter's TextModel.set_gguf_parameters (Qwen2Model, Qwen3Model and Olmo2Model add nothing these
    checkpoints use), in its order, without general.file_type (written by the caller, last)."""
    rope = rope_parameters(hf)
    full = rope.get("full_attention", rope)
    writer.add_block_count(hf["num_hidden_layers"])
    writer.add_context_length(hf["max_position_embeddings"])
    writer.add_embedding_length(hf["hidden_size"])
    writer.add_feed_forward_length(hf["intermediate_size"])
    writer.add_head_count(hf["num_attention_heads"])
    if "num_key_value_heads" in hf:
        writer.add_head_count_kv(hf["num_key_value_heads"])
    if full.get("rope_type", full.get("type")) == "linear" and full.get("factor") is not None:
        writer.add_rope_scaling_type(gguf_module().RopeScalingType.LINEAR)
        writer.add_rope_scaling_factor(full["factor"])
    if full.get("rope_theta") is not None:
        writer.add_rope_freq_base(full["rope_theta"])
    if rope.get("sliding_attention", {}).get("rope_theta") is not None:
        writer.add_rope_freq_base_swa(rope["sliding_attention"]["rope_theta"])
    writer.add_layer_norm_rms_eps(hf["rms_norm_eps"])
    if hf.get("head_dim") is not None:
        writer.add_key_length(hf["head_dim"])
        writer.add_value_length(hf["head_dim"])


def gguf_module():
    import gguf

    return gguf


def write_gemma2_hparams(writer, hf, out_type):
    """The converter's Gemma2Model.set_gguf_parameters (it writes no RoPE base: llama.cpp's default 10000), plus
    gemma2.attention.scale where query_pre_attn_scalar is not head_dim (a deviation: the module docstring)."""
    writer.add_context_length(hf["max_position_embeddings"])
    writer.add_embedding_length(hf["hidden_size"])
    writer.add_block_count(hf["num_hidden_layers"])
    writer.add_feed_forward_length(hf["intermediate_size"])
    writer.add_head_count(hf["num_attention_heads"])
    writer.add_head_count_kv(hf.get("num_key_value_heads", hf["num_attention_heads"]))
    writer.add_layer_norm_rms_eps(hf["rms_norm_eps"])
    writer.add_key_length(hf["head_dim"])
    writer.add_value_length(hf["head_dim"])
    writer.add_file_type(file_type(out_type))
    if hf.get("attn_logit_softcapping") is not None:
        writer.add_attn_logit_softcapping(hf["attn_logit_softcapping"])
    if hf.get("final_logit_softcapping") is not None:
        writer.add_final_logit_softcapping(hf["final_logit_softcapping"])
    writer.add_sliding_window(hf["sliding_window"])
    theta = rope_parameters(hf).get("rope_theta", 10000.0)
    if theta != 10000.0:
        writer.add_rope_freq_base(theta)  # a deviation: llama.cpp reads it for any arch, the converter omits it
    if swa_pattern(hf) != LLAMA_CPP_SWA_PATTERN["gemma2"]:
        writer.add_sliding_window_pattern(swa_pattern(hf))
    if query_scale(hf) is not None:
        writer.add_attention_scale(query_scale(hf))


def write_gemma3_hparams(writer, hf):
    """The keys the converter's Gemma3Model.set_gguf_parameters adds after TextModel's (those it writes again,
    e.g. the head counts, keep their first place and value), plus gemma3.attention.sliding_window_pattern where
    the checkpoint's period is not llama.cpp's 6 and gemma3.attention.scale where query_pre_attn_scalar is not
    head_dim (deviations: the module docstring)."""
    if hf.get("attn_logit_softcapping") is not None:
        raise ValueError("Gemma 3 has no attention soft-capping (the converter asserts it)")
    if hf.get("final_logit_softcapping"):
        writer.add_final_logit_softcapping(hf["final_logit_softcapping"])
    if hf.get("sliding_window_pattern") != 1:
        writer.add_sliding_window(hf["sliding_window"])
    if swa_pattern(hf) != LLAMA_CPP_SWA_PATTERN["gemma3"]:
        writer.add_sliding_window_pattern(swa_pattern(hf))
    if query_scale(hf) is not None:
        writer.add_attention_scale(query_scale(hf))


def write_phi3_hparams(writer, hf, out_type):
    """The converter's Phi3MiniModel.set_gguf_parameters: rope.dimension_count = int(partial_rotary_factor *
    n_embd) // n_head, a sliding window of 0 where config.json has none."""
    rope = rope_parameters(hf)
    n_embd, n_head = hf["hidden_size"], hf["num_attention_heads"]
    writer.add_context_length(hf["max_position_embeddings"])
    writer.add_rope_scaling_orig_ctx_len(rope.get("original_max_position_embeddings", hf["original_max_position_embeddings"]))
    writer.add_embedding_length(n_embd)
    writer.add_feed_forward_length(hf["intermediate_size"])
    writer.add_block_count(hf["num_hidden_layers"])
    writer.add_head_count(n_head)
    writer.add_head_count_kv(hf["num_key_value_heads"])
    writer.add_layer_norm_rms_eps(hf["rms_norm_eps"])
    writer.add_rope_dimension_count(int(rope.get("partial_rotary_factor", 1.0) * n_embd) // n_head)
    writer.add_rope_freq_base(rope["rope_theta"])
    writer.add_file_type(file_type(out_type))
    writer.add_sliding_window(hf.get("sliding_window") or 0)
    if rope.get("rope_type", rope.get("type", "default")) == "longrope":
        # The converter's attention factor, from the two context lengths (not rope_parameters' attention_factor)
        original = rope.get("original_max_position_embeddings", hf.get("original_max_position_embeddings"))
        scale = hf["max_position_embeddings"] / original
        writer.add_rope_scaling_attn_factors(math.sqrt(1 + math.log(scale) / math.log(original)) if scale > 1.0 else 1.0)


def phi3_rope_factors(hf):
    """The converter's Phi3MiniModel.generate_extra_tensors for LongRoPE: rope_factors_long.weight then
    rope_factors_short.weight, F32 [rope dims / 2], first in the file; nothing for another RoPE type."""
    rope = rope_parameters(hf)
    if rope.get("rope_type", rope.get("type", "default")) != "longrope":
        return []
    return [
        ("rope_factors_long.weight", np.array(rope["long_factor"], dtype=np.float32)),
        ("rope_factors_short.weight", np.array(rope["short_factor"], dtype=np.float32)),
    ]


def convert(checkpoint_dir, out_path, out_type, model_name=None):
    """Write the GGUF of a HF checkpoint directory. Returns {GGUF name: ggml type name}."""
    import gguf

    if out_type not in TYPES:
        raise ValueError(f"--type must be one of {TYPES}, not {out_type!r}")
    with open(os.path.join(checkpoint_dir, "config.json"), encoding="utf-8") as f:
        hf = json.load(f)
    classes = hf.get("architectures") or [None]
    if len(classes) != 1 or classes[0] not in ARCHITECTURES:
        raise ValueError(f"{checkpoint_dir}: only {sorted(ARCHITECTURES)} are supported, config says {hf.get('architectures')}")
    architecture = ARCHITECTURES[classes[0]]
    check_representable(hf, architecture, checkpoint_dir)
    tensors, _ = safetensors_io.load_file(os.path.join(checkpoint_dir, "model.safetensors"))
    if hf.get("tie_word_embeddings", False) != ("lm_head.weight" not in tensors):
        raise ValueError(f"{checkpoint_dir}: tie_word_embeddings disagrees with the presence of lm_head.weight")
    rope_freqs = None

    writer = gguf.GGUFWriter(out_path, architecture)  # writes general.architecture
    writer.add_type("model")
    writer.add_name(model_name or os.path.basename(os.path.normpath(checkpoint_dir)))
    if architecture in ("llama", "smollm3", "qwen3moe"):
        rope_theta, rope_freqs = rope_settings(hf)
        write_llama_hparams(writer, hf, architecture, out_type, rope_theta)
    elif architecture in ("qwen2", "qwen3", "olmo2"):
        write_text_model_hparams(writer, hf, architecture)
        writer.add_file_type(file_type(out_type))
    elif architecture == "gemma2":
        write_gemma2_hparams(writer, hf, out_type)
    elif architecture == "gemma3":
        write_text_model_hparams(writer, hf, architecture)
        writer.add_file_type(file_type(out_type))
        write_gemma3_hparams(writer, hf)
    else:
        write_phi3_hparams(writer, hf, out_type)
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)

    types = {}
    if rope_freqs is not None:
        writer.add_tensor(ROPE_FREQS, rope_freqs, raw_dtype=gguf.GGMLQuantizationType.F32)
        types[ROPE_FREQS] = gguf.GGMLQuantizationType.F32.name
    for name, values in phi3_rope_factors(hf) if architecture == "phi3" else []:
        writer.add_tensor(name, values, raw_dtype=gguf.GGMLQuantizationType.F32)
        types[name] = gguf.GGMLQuantizationType.F32.name
    for name, values in gguf_tensors(hf, tensors):
        qtype = tensor_type(name, values, out_type)
        data = gguf.quants.quantize(values, qtype)
        writer.add_tensor(name, data, raw_dtype=qtype)
        types[name] = qtype.name
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return types


# ----------------------------------------------------------------------------------
# The tiny-llama GGUF fixtures
# ----------------------------------------------------------------------------------


def tiny_spec(name=FIXTURE_NAME):
    return next(spec for spec in make_fixtures.FIXTURES if spec.name == name)


def run_gguf_reference(model_data, prompt_ids, dtype, sequential_dots=False):
    """The golden tensors of a GGUF fixture, in one precision."""
    model = gguf_ref.reference_model(model_data, dtype=dtype, sequential_dots=sequential_dots)
    logits = model.forward(prompt_ids, model.new_cache())
    greedy_ids, greedy_logits = llama_ref.greedy_decode(model, prompt_ids, make_fixtures.GREEDY_STEPS)
    outputs = {
        "prompt_ids": np.array(prompt_ids, dtype=np.int32),
        "logits": logits,
        "greedy.ids": greedy_ids,
        "greedy.logits": greedy_logits,
    }
    return model, outputs


def check_f32_gguf(fixture_dir, gguf_path, name=FIXTURE_NAME):
    """The F32 GGUF is the safetensors checkpoint, losslessly: its tensors un-permuted (Llama) and the experts
    unstacked are bit-identical to model.safetensors, and the reference on it (adjacent RoPE for Llama)
    reproduces golden.safetensors. Returns the worst relative difference of the logits; raises on any failure."""
    spec = tiny_spec(name)
    model_data = gguf_ref.read_gguf(gguf_path)
    original, _ = safetensors_io.load_file(os.path.join(fixture_dir, "model.safetensors"))
    hf = spec.config
    permuted = ARCHITECTURES[hf["architectures"][0]] == "llama"
    restored = {}
    for hf_tensor_name, values in gguf_ref.hf_named_tensors(model_data).items():
        # Undo the converter's permutation: it maps row s*hd/2 + j of a head to row 2j + s.
        heads = hf["num_attention_heads"] if ".q_proj." in hf_tensor_name else hf["num_key_value_heads"]
        if permuted and (".q_proj." in hf_tensor_name or ".k_proj." in hf_tensor_name):
            values = values.reshape(heads, values.shape[0] // heads // 2, 2, *values.shape[1:]).swapaxes(1, 2).reshape(values.shape)
        restored[hf_tensor_name] = values
    if sorted(restored) != sorted(original):
        raise AssertionError(f"{gguf_path}: tensor set differs from model.safetensors: {sorted(set(restored) ^ set(original))}")
    for name, values in original.items():
        if restored[name].dtype != np.float32 or not np.array_equal(restored[name], values):
            raise AssertionError(f"{gguf_path}: {name} is not bit-identical to model.safetensors after un-permuting")

    golden, _ = safetensors_io.load_file(os.path.join(fixture_dir, "golden.safetensors"))
    _, outputs = run_gguf_reference(model_data, list(spec.prompt_ids), np.float64)
    if not np.array_equal(outputs["greedy.ids"], golden["greedy.ids"]):
        raise AssertionError(f"{gguf_path}: greedy ids {outputs['greedy.ids']} differ from golden {golden['greedy.ids']}")
    worst = 0.0
    for name in ("logits", "greedy.logits"):
        error = llama_ref.max_relative_error(outputs[name], golden[name])
        if error > F32_GGUF_VS_GOLDEN_TOLERANCE:
            raise AssertionError(f"{gguf_path}: {name} differs from golden.safetensors by {error:.3e}")
        worst = max(worst, error)
    return worst


def golden_tensor_entries(golden, float32_blas, float32_sequential, golden_file, descriptions, threshold, why, label):
    """The manifest's "tensors" list of a GGUF golden (prompt_ids, logits, greedy.ids, greedy.logits), with the
    float32 measurements; raises unless both float32 runs agree on the ids and stay the required margin below
    the threshold."""
    tensors = []
    for name in ("prompt_ids", "logits", "greedy.ids", "greedy.logits"):
        reference = golden[name]
        entry = {
            "name": name,
            "file": golden_file,
            "shape": list(reference.shape),
            "dtype": "I32" if reference.dtype == np.int32 else "F64",
            "what": descriptions[name],
        }
        if reference.dtype == np.int32:
            for run_name, run in (("float32", float32_blas), ("float32_sequential", float32_sequential)):
                if not np.array_equal(run[name], reference):
                    raise AssertionError(f"{label}: {run_name} run disagrees on {name}")
            entry["check"] = {"metric": "exact", "threshold": 0, "why": make_fixtures.EXACT_WHY}
            entry["observed_float32"] = "identical"
        else:
            observed = llama_ref.max_relative_error(float32_blas[name], reference)
            observed_sequential = llama_ref.max_relative_error(float32_sequential[name], reference)
            if max(observed, observed_sequential) * make_fixtures.REQUIRED_MARGIN > threshold:
                raise AssertionError(f"{label}: {name}: float32 error leaves less than {make_fixtures.REQUIRED_MARGIN}x margin")
            entry["check"] = {"metric": "max_abs_err/max_abs_ref", "threshold": threshold, "why": why}
            entry["observed_float32"] = make_fixtures.significant(observed, 3)
            entry["observed_float32_sequential"] = make_fixtures.significant(observed_sequential, 3)
        tensors.append(entry)
    return tensors


def build_gguf_golden(spec, out_type, gguf_path, tensor_types, f32_golden):
    """Golden tensors and manifest of one quantized GGUF fixture; raises if a guarantee fails."""
    config = llama_ref.ModelConfig.from_hf(spec.config)
    prompt_ids = list(spec.prompt_ids)
    model_data = gguf_ref.read_gguf(gguf_path)
    model64, golden = run_gguf_reference(model_data, prompt_ids, np.float64)
    _, float32_blas = run_gguf_reference(model_data, prompt_ids, np.float32)
    _, float32_sequential = run_gguf_reference(model_data, prompt_ids, np.float32, sequential_dots=True)

    llama_ref.check_decode_matches_reprefill(
        model64, prompt_ids, golden["greedy.ids"], golden["greedy.logits"], make_fixtures.DECODE_VS_PREFILL_TOLERANCE
    )
    assert np.array_equal(golden["logits"][-1], golden["greedy.logits"][0])

    routing = {}
    if config.num_experts:  # as make_fixtures demands of the float64 checkpoint's own run
        min_routing_gap = min(model64.routing_gaps)
        if min_routing_gap < make_fixtures.MIN_ROUTING_GAP:
            raise AssertionError(f"{out_type}: a routing decision is {min_routing_gap:.3e} from flipping")
        routing = {
            "routing": {"decisions": len(model64.routing_gaps), "min_router_logit_gap": make_fixtures.significant(min_routing_gap)}
        }

    threshold = make_fixtures.FLOAT_THRESHOLD
    min_gap = min(llama_ref.top1_top2_gap(row) for row in golden["greedy.logits"])
    largest_allowed_shift = threshold * float(np.max(np.abs(golden["greedy.logits"])))
    if min_gap < make_fixtures.MIN_GREEDY_GAP or min_gap < 20 * largest_allowed_shift:
        raise AssertionError(f"{out_type}: greedy top-1/top-2 gap {min_gap:.3e} too small (allowed shift {largest_allowed_shift:.1e})")

    # How far quantization moved the logits from the float32 model's (prefill rows; the greedy rows
    # may follow other tokens). Must be far above the threshold for the golden to identify the type.
    shift = llama_ref.max_relative_error(golden["logits"], f32_golden["logits"])
    if shift < MIN_QUANTIZATION_SHIFT_FACTOR * threshold:
        raise AssertionError(f"{out_type}: quantization moves the logits by only {shift:.2e}, too close to the threshold")

    why = (
        make_fixtures.float_why(config, longest_context=len(prompt_ids) + make_fixtures.GREEDY_STEPS - 1)
        + "; this assumes the weights are dequantized exactly as ggml defines it (each block value to float32) and all "
        "arithmetic is float32 or better: an engine that also quantizes activations (e.g. to Q8 blocks before a "
        "quantized dot product) makes larger errors and needs its own bound"
    )
    tensors = golden_tensor_entries(
        golden, float32_blas, float32_sequential, golden_file_name(out_type), dict(make_fixtures.tensor_descriptions(config)),
        threshold, why, out_type,
    )

    counts = {}
    for type_name in tensor_types.values():
        counts[type_name] = counts.get(type_name, 0) + 1
    manifest = {
        "format": "plumb-golden",
        "version": 1,
        "name": f"{spec.name}/{file_name(out_type)}",
        "description": f"the {spec.name} checkpoint converted to GGUF ({out_type}); reference run on the weights "
        + ("gguf-py dequantizes from the file, Q/K rows as stored, adjacent-pair RoPE" if config.num_experts == 0 else
           "gguf-py dequantizes from the file (experts unstacked), rotate-half RoPE as llama.cpp runs qwen3moe"),
        "generator": GENERATOR,
        "seed": spec.seed,
        "config": "../config.json",
        "weights": f"../{file_name(out_type)}",
        "golden": golden_file_name(out_type),
        "gguf": {
            "type": out_type,
            "tensor_types": {name: tensor_types[name] for name in tensor_types},
            "tensor_type_counts": dict(sorted(counts.items())),
            "logits_shift_from_f32_model": make_fixtures.significant(shift, 3),
        },
        "prompt_ids": prompt_ids,
        "greedy": {
            "steps": make_fixtures.GREEDY_STEPS,
            "stop_on_eos": False,
            "min_top1_top2_gap": make_fixtures.significant(min_gap),
            "ids": [int(t) for t in golden["greedy.ids"]],
        },
        **routing,
        "tensors": tensors,
    }
    return golden, manifest


def golden_readme_text(name=FIXTURE_NAME):
    if name != FIXTURE_NAME:
        return f"""# {name} GGUF goldens

Generated, do not edit: written by `{GENERATOR} fixtures` (which also writes `../model.*.gguf`);
checked by `tools/reference/check_fixtures.py`. Details: `tools/reference/README.md`.

`../model.<type>.gguf` is the {name} checkpoint (`../model.safetensors`, `../config.json`) converted the way
llama.cpp's converter writes Qwen3-MoE (architecture qwen3moe, Q/K rows in Hugging Face order, the experts of
each layer stacked into ffn_gate_exps / ffn_up_exps / ffn_down_exps [n_expert, rows, cols], the router
ffn_gate_inp and the norms F32), with `<type>` one of {", ".join(GGUF_FIXTURES[name])}. For each `<type>` but
f32 this folder holds `model.<type>.golden.safetensors` (prompt_ids, logits, greedy.ids, greedy.logits, as in
`../golden.safetensors`) and its manifest, whose `routing` section gives the smallest gap between a chosen and
an unchosen router logit over every decision the float64 run made (it must be >= 1e-3, far beyond float32
error, so an engine cannot flip an expert choice by rounding). The golden is the float64 NumPy reference on
the weights gguf-py dequantizes from the file, rotate-half RoPE; the F32 file reproduces `../golden.safetensors`.
"""
    return f"""# tiny-llama GGUF goldens

Generated, do not edit: written by `{GENERATOR} fixtures` (which also writes `../model.*.gguf`);
checked by `tools/reference/check_fixtures.py`. Details: `tools/reference/README.md`.

`../model.<type>.gguf` is the tiny-llama checkpoint (`../model.safetensors`, `../config.json`) converted the way
llama.cpp's `convert_hf_to_gguf.py` does (Q/K rows permuted per head, llama.* metadata, no tokenizer keys),
with `<type>` one of f32, f16, q8_0 (every 2-D tensor F16 / Q8_0), q4_0, q4_1 (block weights Q4_0 / Q4_1,
token_embd and output Q8_0, as llama-quantize does). Norms are F32 in all of them.

For each quantized `<type>` (all but f32) this folder holds:

| file | contents |
|---|---|
| `model.<type>.golden.safetensors` | `prompt_ids` [11] I32, `logits` [11, 320] F64, `greedy.ids` [16] I32, `greedy.logits` [16, 320] F64: the same names, shapes and meanings as `../golden.safetensors` (docs/fixtures-golden-format.md) |
| `model.<type>.manifest.json` | the plumb-golden manifest of those tensors (metric, threshold, why), plus a `gguf` section: the ggml type of every tensor and how far quantization moved the logits from the float32 model |

The golden is the float64 NumPy reference run on the weights that gguf-py's own dequantizer
(`gguf.quants.dequantize`) reads back from the GGUF file, with the Q/K rows as stored and adjacent-pair RoPE, so
it shares no code with plumb's GGUF reader, block decoders or Q/K un-permutation. The threshold (1e-5, metric
max|err|/max|ref|) is the float32 one of the safetensors goldens and assumes exact dequantization to float32 and
float32 arithmetic; an engine that quantizes activations needs a wider, separately justified bound.

There is no golden for `model.f32.gguf`: it holds the same numbers as `../model.safetensors`, and the generator
proves that the reference on it reproduces `../golden.safetensors` (to 1e-12), so that golden applies.
"""


def save_gguf_golden(folder, golden_file, manifest_file, golden, manifest, generator):
    """Write a GGUF golden (floats as F64) and its manifest; returns a one-line summary for the report."""
    safetensors_io.save_file(
        os.path.join(folder, golden_file),
        {name: (a if a.dtype == np.int32 else np.asarray(a, dtype=np.float64)) for name, a in golden.items()},
        metadata={"format": "plumb-golden", "fixture": manifest["name"], "generator": generator},
    )
    make_fixtures.write_json(os.path.join(folder, manifest_file), manifest)
    floats = [t for t in manifest["tensors"] if t["dtype"] == "F64"]
    worst = max(max(t["observed_float32"], t["observed_float32_sequential"]) for t in floats)
    return (
        f"types {manifest['gguf']['tensor_type_counts']}; greedy ids {manifest['greedy']['ids']}; min gap "
        f"{manifest['greedy']['min_top1_top2_gap']}; worst float32 error {worst:.2e}"
    )


def write_fixtures(out_dir, name=FIXTURE_NAME):
    """Write fixtures/<name>/model.*.gguf and the GGUF goldens. The checkpoint must already be in
    out_dir (make_fixtures.py writes it). Returns a list of report lines."""
    spec = tiny_spec(name)
    fixture_dir = os.path.join(out_dir, spec.name)
    golden_dir = os.path.join(fixture_dir, GOLDEN_DIR)
    os.makedirs(golden_dir, exist_ok=True)
    f32_golden, _ = safetensors_io.load_file(os.path.join(fixture_dir, "golden.safetensors"))
    lines = []
    for out_type in GGUF_FIXTURES[name]:
        gguf_path = os.path.join(fixture_dir, file_name(out_type))
        types = convert(fixture_dir, gguf_path, out_type, model_name=spec.name)
        size = os.path.getsize(gguf_path)
        if out_type == "f32":
            worst = check_f32_gguf(fixture_dir, gguf_path, name)
            lines.append(f"{file_name(out_type)}: {size} bytes; reproduces golden.safetensors to {worst:.1e}")
            continue
        golden, manifest = build_gguf_golden(spec, out_type, gguf_path, types, f32_golden)
        summary = save_gguf_golden(golden_dir, golden_file_name(out_type), manifest_file_name(out_type), golden, manifest, GENERATOR)
        lines.append(f"{file_name(out_type)}: {size} bytes; {summary}; logits moved {manifest['gguf']['logits_shift_from_f32_model']} from f32")
    with open(os.path.join(golden_dir, "README.md"), "w", encoding="utf-8") as f:
        f.write(golden_readme_text(name))
    return lines


def write_transformers_ggufs(root=None):
    """fixtures/transformers/<name>/model.f16.gguf for every runnable checkpoint but TRANSFORMERS_GGUF_SKIPPED's
    (F16 keeps the F16 weights exact and the norms go F32 as the converter writes them, so each directory's
    expected.safetensors is the GGUF's golden too). Returns report lines."""
    root = root or os.path.join(make_fixtures.REPO_ROOT, "fixtures", "transformers")
    lines = []
    for name in sorted(os.listdir(root)):
        folder = os.path.join(root, name)
        if not os.path.isfile(os.path.join(folder, "config.json")):
            continue
        if name in TRANSFORMERS_GGUF_SKIPPED:
            lines.append(f"{name}: skipped: {TRANSFORMERS_GGUF_SKIPPED[name]}")
            continue
        path = os.path.join(folder, file_name("f16"))
        types = convert(folder, path, "f16", model_name=name)
        lines.append(f"{name}/{file_name('f16')}: {os.path.getsize(path)} bytes, {len(types)} tensors")
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    c = commands.add_parser("convert", help="convert one HF checkpoint directory to GGUF")
    c.add_argument("checkpoint", help="directory with config.json and model.safetensors")
    c.add_argument("out", help="output .gguf path")
    c.add_argument("--type", default="f32", choices=TYPES, help="tensor types (default f32)")
    c.add_argument("--name", default=None, help="general.name (default: the checkpoint folder's name)")
    f = commands.add_parser("fixtures", help="write the tiny-llama and tiny-qwen3moe GGUF fixtures and their goldens")
    f.add_argument("--out", default=os.path.join(make_fixtures.REPO_ROOT, "fixtures"), help="fixtures folder (default: repo fixtures/)")
    t = commands.add_parser("transformers-fixtures", help="write fixtures/transformers/*/model.f16.gguf")
    t.add_argument("--root", default=None, help="folder of the checkpoints (default: repo fixtures/transformers)")
    args = parser.parse_args(argv)
    if args.command == "transformers-fixtures":
        for line in write_transformers_ggufs(args.root):
            print(line)
    elif args.command == "convert":
        types = convert(args.checkpoint, args.out, args.type, model_name=args.name)
        counts = {}
        for t in types.values():
            counts[t] = counts.get(t, 0) + 1
        print(f"wrote {args.out}: {len(types)} tensors {dict(sorted(counts.items()))}")
    else:
        for name in GGUF_FIXTURES:
            for line in write_fixtures(args.out, name):
                print(f"{name}/{line}")


if __name__ == "__main__":
    main()
