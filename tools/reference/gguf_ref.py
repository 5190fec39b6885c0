"""GGUF -> weights for the NumPy reference (read_gguf and arch_key: any architecture, gemma3_ref uses them too; the rest: llama and qwen3moe).

    model = gguf_ref.load_model("fixtures/tiny-llama/model.q4_1.gguf")        # float64, adjacent RoPE
    logits = model.forward(ids, model.new_cache())

The file is read with gguf-py's own GGUFReader and every tensor is dequantized with
gguf.quants.dequantize (gguf-py's NumPy transcription of ggml's reference dequantizers), so
the reference depends on nothing plumb wrote: neither its GGUF parser nor its block decoders.

The weights are used in GGUF layout as they are. In particular the Q and K projection rows
stay in the order llama.cpp's converter put them in (within each head, rotate-half pair
(i, i + hd/2) moved to rows (2i, 2i + 1)), and the reference rotates adjacent pairs to match
(LlamaModel(rope_pairing="adjacent")). plumb does the opposite (un-permutes the rows, then
rotates halves), so the two agree only if both the permutation and both RoPE conventions are
understood the same way by two different pieces of code.

Hyper-parameters come from the llama.* metadata keys; tied embeddings are recognised by the
absence of output.weight, as llama.cpp does.

Qwen3-MoE (architecture qwen3moe) is read too: its converter does not permute Q/K (llama.cpp rotates
halves, "NEOX" RoPE, for it), so the reference rotates halves there; each layer adds attn_q_norm /
attn_k_norm, the router ffn_gate_inp, and the experts stacked in one tensor per matrix
(ffn_gate_exps, ffn_up_exps, ffn_down_exps: [n_expert, rows, cols]), split here into the per-expert
Hugging Face names. llama.cpp always renormalizes the chosen experts' weights for qwen3moe.
"""

from dataclasses import dataclass

import numpy as np

import llama_ref

ARCHITECTURE = "llama"

# GGUF tensor name -> Hugging Face name (the names llama_ref.weights_from_hf looks up).
GLOBAL_TENSORS = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}
LAYER_TENSORS = {
    "attn_norm.weight": "input_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_q.bias": "self_attn.q_proj.bias",
    "attn_k.bias": "self_attn.k_proj.bias",
    "attn_v.bias": "self_attn.v_proj.bias",
    "attn_output.weight": "self_attn.o_proj.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}


# Qwen3 / Qwen3-MoE's own layer tensors, and the stacked experts (GGUF suffix -> HF matrix name).
QWEN3_LAYER_TENSORS = {
    "attn_q_norm.weight": "self_attn.q_norm.weight",
    "attn_k_norm.weight": "self_attn.k_norm.weight",
    "ffn_gate_inp.weight": "mlp.gate.weight",
}
EXPERT_TENSORS = {
    "ffn_gate_exps.weight": "gate_proj",
    "ffn_up_exps.weight": "up_proj",
    "ffn_down_exps.weight": "down_proj",
}
ROTATE_HALF_ARCHITECTURES = ("qwen3moe",)  # the converter leaves their Q/K rows in HF order


def split_layer_name(gguf_name):
    """(layer index, suffix) of a blk.N.suffix name, else (None, None)."""
    prefix, _, rest = gguf_name.partition(".")
    layer, _, suffix = rest.partition(".")
    return (int(layer), suffix) if prefix == "blk" and layer.isdigit() else (None, None)


def hf_name(gguf_name):
    """The Hugging Face name of a llama / qwen3moe GGUF tensor name (not the stacked experts: see
    hf_named_tensors); raises KeyError for an unknown one."""
    if gguf_name in GLOBAL_TENSORS:
        return GLOBAL_TENSORS[gguf_name]
    layer, suffix = split_layer_name(gguf_name)
    table = {**LAYER_TENSORS, **QWEN3_LAYER_TENSORS}
    if layer is not None and suffix in table:
        return f"model.layers.{layer}.{table[suffix]}"
    raise KeyError(f"not a llama GGUF tensor name: {gguf_name!r}")


@dataclass
class GGUFTensor:
    name: str
    type_name: str  # ggml type, e.g. "Q4_1"
    values: np.ndarray  # dequantized, float32, row-major [ne1, ne0] (= [out, in] for a Linear weight)


@dataclass
class GGUFModel:
    metadata: dict  # key -> Python value (strings, numbers, lists)
    tensors: dict  # GGUF name -> GGUFTensor, in file order


def read_metadata(reader):
    """Every key-value pair of the file as a plain Python value. Large arrays (the tokenizer
    vocabulary) are read too; they are only a few MB."""
    return {key: field.contents() for key, field in reader.fields.items()}


def read_gguf(path):
    """Read and dequantize every tensor of a GGUF file. Returns a GGUFModel."""
    import gguf

    reader = gguf.GGUFReader(path)
    tensors = {}
    for tensor in reader.tensors:
        # reader.tensors[i].data is [ne1, ne0] elements for float types and [ne1, bytes per row] for
        # block types; dequantize turns both into [ne1, ne0] float32.
        values = gguf.quants.dequantize(np.asarray(tensor.data), tensor.tensor_type)
        expected_shape = tuple(int(n) for n in reversed(tensor.shape.tolist()))
        if values.shape != expected_shape or values.dtype != np.float32:
            raise ValueError(f"{path}: tensor {tensor.name}: dequantized to {values.dtype}{values.shape}, expected {expected_shape}")
        tensors[tensor.name] = GGUFTensor(tensor.name, tensor.tensor_type.name, values)
    return GGUFModel(read_metadata(reader), tensors)


def arch_key(metadata, architecture, name, default=None):
    """metadata["<architecture>.<name>"]; default when absent, or ValueError when there is no default."""
    full = f"{architecture}.{name}"
    if full in metadata:
        return metadata[full]
    if default is None:
        raise ValueError(f"missing metadata key {full}")
    return default


def config_from_gguf(model):
    """llama_ref.ModelConfig from the llama.* keys of a GGUFModel.

    head_dim is llama.attention.key_length when present, else embedding_length / head_count
    (what llama.cpp does); RoPE must cover the whole head (rope.dimension_count == head_dim) and
    keys and values must have the same length, because the reference supports nothing else.
    """
    m = model.metadata
    architecture = m.get("general.architecture")
    if architecture not in (ARCHITECTURE,) + ROTATE_HALF_ARCHITECTURES:
        raise ValueError(f"general.architecture is {architecture!r}, only {ARCHITECTURE!r} and qwen3moe are supported")

    def key(name, default=None):
        return arch_key(m, architecture, name, default)

    moe = {}
    if architecture == "qwen3moe":
        moe = {
            "model_type": "qwen3_moe",
            "num_experts": int(key("expert_count")),
            "num_experts_per_tok": int(key("expert_used_count")),
            "moe_intermediate_size": int(key("expert_feed_forward_length")),
            "norm_topk_prob": True,  # llama.cpp's build_moe_ffn(..., norm_w = true) for qwen3moe
        }

    hidden = int(key("embedding_length"))
    num_heads = int(key("attention.head_count"))
    num_kv_heads = int(key("attention.head_count_kv", num_heads))
    head_dim = int(key("attention.key_length", hidden // num_heads))
    if int(key("attention.value_length", head_dim)) != head_dim:
        raise ValueError("attention.value_length differs from key_length; not supported by the reference")
    if int(key("rope.dimension_count", head_dim)) != head_dim:
        raise ValueError("rope.dimension_count differs from the head size (partial RoPE); not supported by the reference")
    embed_rows = model.tensors["token_embd.weight"].values.shape[0]
    vocab = int(key("vocab_size", embed_rows))
    if vocab != embed_rows:
        raise ValueError(f"{architecture}.vocab_size {vocab} differs from token_embd rows {embed_rows}")
    return llama_ref.ModelConfig.from_hf(
        {
            **moe,
            "vocab_size": vocab,
            "hidden_size": hidden,
            "intermediate_size": int(key("feed_forward_length")),
            "num_hidden_layers": int(key("block_count")),
            "num_attention_heads": num_heads,
            "num_key_value_heads": num_kv_heads,
            "head_dim": head_dim,
            # float32 in the file; the reference uses exactly that value (widened to float64).
            "rms_norm_eps": float(key("attention.layer_norm_rms_epsilon")),
            "rope_theta": float(key("rope.freq_base", 10000.0)),
            "tie_word_embeddings": "output.weight" not in model.tensors,
        }
    )


def hf_named_tensors(model):
    """The dequantized tensors under Hugging Face names, Q/K rows still in GGUF order (adjacent pairs for
    llama); a stacked expert tensor [n_expert, rows, cols] becomes one matrix per expert."""
    out = {}
    for name, tensor in model.tensors.items():
        layer, suffix = split_layer_name(name)
        if suffix in EXPERT_TENSORS:
            for e, values in enumerate(tensor.values):
                out[f"model.layers.{layer}.mlp.experts.{e}.{EXPERT_TENSORS[suffix]}.weight"] = values
        else:
            out[hf_name(name)] = tensor.values
    return out


def reference_model(model, dtype=np.float64, sequential_dots=False):
    """A llama_ref.LlamaModel on the GGUF weights as stored: no un-permuting, adjacent-pair RoPE for llama
    (rotate-half for qwen3moe, whose rows the converter leaves in HF order)."""
    pairing = "rotate_half" if model.metadata.get("general.architecture") in ROTATE_HALF_ARCHITECTURES else "adjacent"
    return llama_ref.LlamaModel(
        config_from_gguf(model), hf_named_tensors(model), dtype=dtype, sequential_dots=sequential_dots, rope_pairing=pairing
    )


def load_model(path, dtype=np.float64, sequential_dots=False):
    """read_gguf + reference_model."""
    return reference_model(read_gguf(path), dtype=dtype, sequential_dots=sequential_dots)
