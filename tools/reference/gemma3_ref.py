"""Reference forward pass of Gemma 3 (text model) over a GGUF file, in NumPy.

    model = gemma3_ref.load_model("models/gemma-3-270m-q4_k_m.gguf")      # float64
    logits = model.forward(ids, model.new_cache())
    ids, rows = llama_ref.greedy_decode(model, prompt_ids, steps)

Written from the architecture as llama.cpp (llama_load_hparams for LLM_ARCH_GEMMA3,
llm_build_gemma3, convert_hf_to_gguf.py Gemma3Model) and Hugging Face transformers (Gemma3) define
it; it shares no code with the C++. Like gguf_ref.py, the file is read with gguf-py's GGUFReader
and every tensor dequantized with gguf.quants.dequantize, so nothing plumb wrote is involved.

For token ids at positions p = start .. start + n - 1 (d = embedding_length, hd = key_length):

    x = token_embd[ids] * sqrt(d)
    for layer il (GLOBAL iff il % 6 == 5, else SLIDING):
        h = rmsnorm(x, attn_norm)
        q, k, v = attn_q h, attn_k h, attn_v h                     # split into heads of hd
        q = rmsnorm(q, attn_q_norm); k = rmsnorm(k, attn_k_norm)    # per head, over hd; v is not normed
        q, k = rope(q), rope(k)       # rotate-half pairs (i, i + hd/2); base rope.freq_base (global) or 10000
        a = attention(q, k, v)        # causal, GQA, scale 1/sqrt(hd); SLIDING: only keys with p - t < sliding_window
        x = x + rmsnorm(attn_output a, post_attention_norm)
        h = rmsnorm(x, ffn_norm)
        x = x + rmsnorm(ffn_down(gelu_tanh(ffn_gate h) * ffn_up h), post_ffw_norm)
    logits = token_embd rmsnorm(x, output_norm)                   # tied (output.weight if present)
    logits = c tanh(logits / c)                                   # only if final_logit_softcapping c > 0

with rmsnorm(v, w) = v / sqrt(mean(v^2) + eps) * w.

Notes on where this differs from a Llama:
  * Gemma's RMSNorm multiplies by (1 + w) in Hugging Face; llama.cpp's converter stores w + 1 in the
    GGUF, so every norm weight here is used as stored, with no +1 at run time.
  * The Q/K rows are NOT permuted by the converter for gemma3 (unlike llama), so RoPE pairs element i
    with element i + hd/2 of each head as stored (llama.cpp: LLAMA_ROPE_TYPE_NEOX).
  * Sliding-window (local) layers use RoPE base 10000 (llama.cpp hard-codes rope_freq_base_train_swa);
    global layers use gemma3.rope.freq_base. The pattern is llama.cpp's set_swa_pattern(6).
  * The attention scale is 1/sqrt(head_dim) (query_pre_attn_scalar = head_dim; llama.cpp uses
    1/sqrt(n_embd_head_k) for every size except 27B, which this reference does not support).
  * The embedding scale sqrt(d) is computed in the working precision (llama.cpp: sqrtf(n_embd) in
    float32; transformers rounds it to the weights' dtype, 25.25 instead of 25.298 for d = 640 in bf16).
  * The KV cache keeps every position and the mask hides what a sliding layer must not see; an engine
    with a ring buffer of sliding_window entries must give the same numbers.
"""

from dataclasses import dataclass

import numpy as np

import gguf_ref
import llama_ref

ARCHITECTURE = "gemma3"
GLOBAL_LAYER_PERIOD = 6  # llama.cpp hparams.set_swa_pattern(6): layer il is global iff il % 6 == 5
SLIDING_ROPE_BASE = 10000.0  # llama.cpp rope_freq_base_train_swa for LLM_ARCH_GEMMA3


@dataclass(frozen=True)
class Gemma3Config:
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float  # global layers
    sliding_window: int  # 0: no sliding layers
    final_logit_softcapping: float  # 0: none
    context_length: int

    def is_global(self, layer):
        return self.sliding_window == 0 or layer % GLOBAL_LAYER_PERIOD == GLOBAL_LAYER_PERIOD - 1

    def rope_base(self, layer):
        return self.rope_theta if self.is_global(layer) else SLIDING_ROPE_BASE


def config_from_gguf(model):
    """Gemma3Config from the gemma3.* keys of a gguf_ref.GGUFModel."""
    m = model.metadata
    if m.get("general.architecture") != ARCHITECTURE:
        raise ValueError(f"general.architecture is {m.get('general.architecture')!r}, expected {ARCHITECTURE!r}")

    def key(name, default=None):
        return gguf_ref.arch_key(m, ARCHITECTURE, name, default)

    num_heads = int(key("attention.head_count"))
    head_dim = int(key("attention.key_length"))
    if int(key("attention.value_length")) != head_dim:
        raise ValueError("attention.value_length differs from key_length; not supported by the reference")
    return Gemma3Config(
        vocab_size=model.tensors["token_embd.weight"].values.shape[0],
        hidden_size=int(key("embedding_length")),
        intermediate_size=int(key("feed_forward_length")),
        num_layers=int(key("block_count")),
        num_heads=num_heads,
        num_kv_heads=int(key("attention.head_count_kv", num_heads)),
        head_dim=head_dim,
        rms_norm_eps=float(key("attention.layer_norm_rms_epsilon")),  # float32 in the file, used as stored
        rope_theta=float(key("rope.freq_base")),
        sliding_window=int(key("attention.sliding_window", 0)),
        final_logit_softcapping=float(key("final_logit_softcapping", 0.0)),
        context_length=int(key("context_length")),
    )


LAYER_TENSORS = (
    "attn_norm", "attn_q", "attn_k", "attn_v", "attn_q_norm", "attn_k_norm", "attn_output", "post_attention_norm",
    "ffn_norm", "ffn_gate", "ffn_up", "ffn_down", "post_ffw_norm",
)


def tensor_names(num_layers, tied=True):
    """Every GGUF tensor name of a Gemma 3 text model, as llama.cpp's converter writes them."""
    names = ["token_embd.weight", "output_norm.weight"] + ([] if tied else ["output.weight"])
    return names + [f"blk.{il}.{t}.weight" for il in range(num_layers) for t in LAYER_TENSORS]


# ----------------------------------------------------------------------------------
# The pieces that Llama does not have
# ----------------------------------------------------------------------------------


def gelu_tanh(z):
    """GELU, tanh approximation (Gemma's hidden_activation gelu_pytorch_tanh, ggml_gelu):
    0.5 z (1 + tanh(sqrt(2/pi) (z + 0.044715 z^3)))."""
    t = z.dtype.type
    return t(0.5) * z * (t(1) + np.tanh(t(np.sqrt(2 / np.pi)) * (z + t(0.044715) * z * z * z)))


def softcap(logits, cap):
    """cap * tanh(logits / cap): squashes the logits into (-cap, cap); identity-like for |logit| << cap."""
    t = logits.dtype.type
    return t(cap) * np.tanh(logits / t(cap))


# ----------------------------------------------------------------------------------
# The model
# ----------------------------------------------------------------------------------


class Gemma3Model:
    """Gemma 3 evaluated in one precision (`dtype`), on GGUF-named weights (GGUF layout, [out, in]).

    Same interface as llama_ref.LlamaModel (new_cache, forward), so llama_ref.greedy_decode and
    llama_ref.check_decode_matches_reprefill work on it. sequential_dots: see llama_ref.matmul_sequential.
    """

    def __init__(self, config, tensors, dtype=np.float64, sequential_dots=False):
        self.config = config
        self.dtype = np.dtype(dtype).type
        self.w = {name: np.asarray(values, dtype=self.dtype) for name, values in tensors.items()}
        expected = tensor_names(config.num_layers, tied="output.weight" not in tensors)
        if sorted(self.w) != sorted(expected):
            raise ValueError(f"unexpected tensor set: {sorted(set(self.w) ^ set(expected))}")
        self.lm_head = self.w.get("output.weight", self.w["token_embd.weight"])
        self.matmul = llama_ref.matmul_sequential if sequential_dots else llama_ref.matmul_blas

    def new_cache(self):
        return llama_ref.KVCache(self.config, self.dtype)

    def linear(self, x, weight):
        """y = x W^T, for x [n, in] and W [out, in]."""
        return self.matmul(x, weight.T)

    def norm(self, x, weight):
        return llama_ref.rms_norm(x, weight, self.dtype(self.config.rms_norm_eps))

    def attention_block(self, x, il, positions, cache):
        c, w, p = self.config, self.w, f"blk.{il}."
        n = x.shape[0]
        h = self.norm(x, w[p + "attn_norm.weight"])

        def split_heads(y, heads):  # [n, heads*hd] -> [heads, n, hd]
            return y.reshape(n, heads, c.head_dim).transpose(1, 0, 2)

        q = split_heads(self.linear(h, w[p + "attn_q.weight"]), c.num_heads)
        k = split_heads(self.linear(h, w[p + "attn_k.weight"]), c.num_kv_heads)
        v = split_heads(self.linear(h, w[p + "attn_v.weight"]), c.num_kv_heads)
        q = self.norm(q, w[p + "attn_q_norm.weight"])  # per head: the norm runs over the last axis, hd
        k = self.norm(k, w[p + "attn_k_norm.weight"])

        cos, sin = llama_ref.rope_cos_sin(positions, c.head_dim, c.rope_base(il), self.dtype)
        q = llama_ref.apply_rope(q, cos, sin)  # rotate-half: pairs (i, i + hd/2)
        k = llama_ref.apply_rope(k, cos, sin)

        cache.append(il, k, v)
        attended = llama_ref.causal_attention(
            q, cache.keys[il], cache.values[il], positions, np.arange(cache.keys[il].shape[1]), self.matmul,
            sliding_window=None if c.is_global(il) else c.sliding_window,
        )
        merged = attended.transpose(1, 0, 2).reshape(n, c.num_heads * c.head_dim)
        return self.norm(self.linear(merged, w[p + "attn_output.weight"]), w[p + "post_attention_norm.weight"])

    def mlp_block(self, x, il):
        w, p = self.w, f"blk.{il}."
        h = self.norm(x, w[p + "ffn_norm.weight"])
        m = self.linear(gelu_tanh(self.linear(h, w[p + "ffn_gate.weight"])) * self.linear(h, w[p + "ffn_up.weight"]), w[p + "ffn_down.weight"])
        return self.norm(m, w[p + "post_ffw_norm.weight"])

    def forward(self, token_ids, cache, trace=None):
        """Run token_ids (the positions after what `cache` holds) through the model; appends their keys
        and values to the cache and returns the logits [len(token_ids), vocab]. If `trace` is a dict, the
        residual stream is stored in it (embedding.output, layer.{il}.output, final_norm.output)."""
        c = self.config
        start = cache.length
        positions = np.arange(start, start + len(token_ids))
        trace = {} if trace is None else trace
        x = self.w["token_embd.weight"][np.asarray(token_ids)] * np.sqrt(self.dtype(c.hidden_size))
        trace["embedding.output"] = x
        for il in range(c.num_layers):
            x = x + self.attention_block(x, il, positions, cache)
            x = x + self.mlp_block(x, il)
            trace[f"layer.{il}.output"] = x
        x = self.norm(x, self.w["output_norm.weight"])
        trace["final_norm.output"] = x
        logits = self.linear(x, self.lm_head)
        if c.final_logit_softcapping > 0:
            logits = softcap(logits, c.final_logit_softcapping)
        assert logits.dtype == self.dtype, f"computation drifted to {logits.dtype}"
        return logits


def reference_model(data, dtype=np.float64, sequential_dots=False):
    """A Gemma3Model on the dequantized tensors of a gguf_ref.GGUFModel."""
    tensors = {name: t.values for name, t in data.tensors.items()}
    return Gemma3Model(config_from_gguf(data), tensors, dtype=dtype, sequential_dots=sequential_dots)


def load_model(path, dtype=np.float64, sequential_dots=False):
    """gguf_ref.read_gguf + reference_model."""
    return reference_model(gguf_ref.read_gguf(path), dtype=dtype, sequential_dots=sequential_dots)
