"""Reference forward pass for Llama-family decoder-only transformers, in NumPy.

This is the oracle the C++ implementation is tested against, so it is written to be
read, not to be fast: every step is the textbook formula, one function per idea.
It shares no code with the C++.

The model (Llama 2/3, Qwen2, Qwen3 and friends), for a sequence of token ids:

    x = embed_tokens[ids]                                     # [n, d]
    for each layer:
        x = x + o_proj(attention(rmsnorm(x)))                 # grouped-query causal attention, RoPE
        x = x + down_proj(silu(gate_proj(h)) * up_proj(h))    # with h = rmsnorm(x)
    logits = lm_head(rmsnorm(x))                              # lm_head = embed_tokens when tied

Qwen3 normalizes every query and key head (RMSNorm over head_dim, q_norm / k_norm) before RoPE.
Qwen3-MoE replaces the MLP of its MoE layers by a mixture of experts (moe_block):

    p = softmax(h router^T); the k experts of largest p (ties: lower id); p / sum of those p if norm_topk_prob
    x = x + sum over the chosen experts e of p_e * down_e(silu(gate_e(h)) * up_e(h))

The default precision is float64: with float32 weights and float64 arithmetic the
reference's own rounding error (~1e-16 relative) is negligible next to that of any
float32 implementation. The same code also runs in float32 (the `dtype` argument);
that mode exists only to measure how far a float32 implementation legitimately
drifts from the float64 result, which is what the test thresholds are derived from.
"""

from dataclasses import dataclass

import numpy as np


# ----------------------------------------------------------------------------------
# Configuration and weights
# ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelConfig:
    """The hyper-parameters the forward pass needs, read from a Hugging Face config.json.

    rope_divisors: None for plain RoPE, else one divisor per rotation pair (head_dim / 2 of them):
    pair i turns at theta^(-2i / head_dim) / rope_divisors[i] (RoPE scaling; see rope_divisors_from_hf).
    sliding_window: None, or W when every layer attends only to the W most recent positions
    (itself and the W - 1 before it), as Mistral does.
    """

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    tie_word_embeddings: bool
    rope_divisors: tuple | None = None
    sliding_window: int | None = None
    qk_norm: bool = False  # Qwen3: RMSNorm of each query and key head before RoPE
    # Qwen3-MoE: num_experts 0 means dense. moe_layers lists the layers whose MLP is the experts.
    num_experts: int = 0
    experts_per_token: int = 0
    moe_intermediate_size: int = 0
    norm_topk_prob: bool = False
    moe_layers: tuple = ()

    @classmethod
    def from_hf(cls, hf):
        """Build from a config.json dict. head_dim defaults to hidden_size / num_attention_heads
        (older configs and Qwen2 do not store it); num_key_value_heads defaults to
        num_attention_heads (plain multi-head attention). RoPE: see rope_theta_from_hf and
        rope_divisors_from_hf (both config.json spellings); the sliding window: see
        sliding_window_from_hf."""
        num_heads = hf["num_attention_heads"]
        num_kv_heads = hf.get("num_key_value_heads", num_heads)
        head_dim = hf.get("head_dim") or hf["hidden_size"] // num_heads
        if num_heads % num_kv_heads != 0:
            raise ValueError("num_key_value_heads must divide num_attention_heads")
        if head_dim % 2 != 0:
            raise ValueError("RoPE needs an even head_dim")
        theta = rope_theta_from_hf(hf)
        model_type = hf.get("model_type", "llama")
        moe = {}
        if model_type == "qwen3_moe":
            # transformers' Qwen3MoeDecoderLayer: MoE unless listed in mlp_only_layers, every
            # decoder_sparse_step-th layer.
            step = hf.get("decoder_sparse_step", 1)
            dense = hf.get("mlp_only_layers") or []
            # The hub's configs say num_experts; transformers 5 writes its alias num_local_experts.
            spellings = {hf[k] for k in ("num_experts", "num_local_experts") if k in hf}
            if len(spellings) != 1:
                raise ValueError(f"num_experts / num_local_experts: {sorted(spellings)} (need exactly one value)")
            moe = dict(
                num_experts=spellings.pop(),
                experts_per_token=hf["num_experts_per_tok"],
                moe_intermediate_size=hf["moe_intermediate_size"],
                norm_topk_prob=hf.get("norm_topk_prob", False),
                moe_layers=tuple(
                    i for i in range(hf["num_hidden_layers"]) if i not in dense and (i + 1) % step == 0
                ),
            )
        return cls(
            vocab_size=hf["vocab_size"],
            hidden_size=hf["hidden_size"],
            intermediate_size=hf["intermediate_size"],
            num_layers=hf["num_hidden_layers"],
            num_heads=num_heads,
            num_kv_heads=num_kv_heads,
            head_dim=head_dim,
            rms_norm_eps=hf["rms_norm_eps"],
            rope_theta=theta,
            tie_word_embeddings=hf.get("tie_word_embeddings", False),
            rope_divisors=rope_divisors_from_hf(hf, head_dim, theta),
            sliding_window=sliding_window_from_hf(hf),
            qk_norm=model_type in ("qwen3", "qwen3_moe"),
            **moe,
        )


# ----------------------------------------------------------------------------------
# RoPE parameters and the sliding window, in both config.json spellings
# ----------------------------------------------------------------------------------
#
# transformers 4.x writes the RoPE base as a top-level "rope_theta" and any scaling as
# "rope_scaling": {"rope_type" (older: "type"): ..., "factor": ..., ...}. transformers 5 writes one
# "rope_parameters": {"rope_type": ..., "rope_theta": ..., scaling fields} and neither of the others.
# Both are read; a config that states something twice must state it the same way, and anything
# the reference does not implement (other RoPE types, partial rotation, mixed window layers) is
# refused rather than approximated.

ROPE_TYPES = ("default", "linear", "llama3")


def _rope_dicts(hf):
    """The RoPE dicts of a config.json that are present (rope_parameters, rope_scaling), non-null."""
    dicts = []
    for key in ("rope_parameters", "rope_scaling"):
        value = hf.get(key)
        if value is None:
            continue
        if not isinstance(value, dict):
            raise ValueError(f"{key} must be an object, not {value!r}")
        if any(isinstance(v, dict) for v in value.values()):
            raise ValueError(f"{key} is nested per layer type; not supported by the reference")
        dicts.append(value)
    return dicts


def rope_theta_from_hf(hf):
    """The RoPE base: top-level rope_theta (transformers 4) or rope_parameters.rope_theta
    (transformers 5); 10000 when neither is there. Both present must agree."""
    values = [float(v) for v in [hf.get("rope_theta")] + [d.get("rope_theta") for d in _rope_dicts(hf)] if v is not None]
    if any(v != values[0] for v in values):
        raise ValueError(f"config.json states different RoPE bases: {values}")
    return values[0] if values else 10000.0


def rope_type_from_hf(hf):
    """(rope type, the dict holding its parameters or None). rope_type, or the older key "type",
    of rope_scaling or rope_parameters; "default" when neither says anything."""
    kinds = []
    for d in _rope_dicts(hf):
        kind = d.get("rope_type", d.get("type"))
        if "rope_type" in d and "type" in d and d["type"] != d["rope_type"]:
            raise ValueError(f"RoPE dict says both rope_type {d['rope_type']!r} and type {d['type']!r}")
        if kind is not None:
            kinds.append((kind, d))
    if not kinds:
        return "default", None
    if any(kind != kinds[0][0] for kind, _ in kinds):
        raise ValueError(f"rope_scaling and rope_parameters disagree on the RoPE type: {[k for k, _ in kinds]}")
    # Prefer a dict holding scaling fields (transformers 4: rope_scaling; 5: rope_parameters).
    for kind, d in kinds:
        if "factor" in d:
            return kind, d
    return kinds[0]


def llama3_rope_divisors(head_dim, theta, factor, low_freq_factor, high_freq_factor, original_max_position_embeddings):
    """Llama 3.x RoPE scaling ("rope_type": "llama3"), per rotation pair, in float64.

    With L = original_max_position_embeddings, pair i has inv_freq_i = theta^(-2i / head_dim) and
    wavelength 2 pi / inv_freq_i; high_freq_wavelen = L / high_freq_factor, low_freq_wavelen =
    L / low_freq_factor. Its divisor is
        1                                   if wavelength < high_freq_wavelen  (kept),
        factor                              if wavelength > low_freq_wavelen   (divided),
        1 / ((1 - s) / factor + s)          otherwise (smoothed),
    with s = (L / wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor).
    transformers (_compute_llama3_parameters) multiplies inv_freq by the reciprocal of the divisor;
    llama.cpp's converter stores the divisors themselves as the F32 tensor rope_freqs.weight and
    ggml divides the frequency by them."""
    if high_freq_factor <= low_freq_factor:
        raise ValueError(f"llama3 RoPE needs high_freq_factor > low_freq_factor, got {high_freq_factor} <= {low_freq_factor}")
    old_context = float(original_max_position_embeddings)
    low_freq_wavelen = old_context / low_freq_factor
    high_freq_wavelen = old_context / high_freq_factor
    divisors = []
    for i in range(head_dim // 2):
        inv_freq = float(theta) ** (-2.0 * i / head_dim)
        wavelen = 2.0 * np.pi / inv_freq
        if wavelen < high_freq_wavelen:
            divisors.append(1.0)
        elif wavelen > low_freq_wavelen:
            divisors.append(float(factor))
        else:
            smooth = (old_context / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
            divisors.append(1.0 / ((1.0 - smooth) / factor + smooth))
    return tuple(divisors)


def rope_divisors_from_hf(hf, head_dim, theta):
    """Per-pair RoPE divisors of a config.json (None for plain RoPE), from rope_scaling or
    rope_parameters: "default" -> None; "linear" -> factor for every pair (positions divided by
    factor); "llama3" -> llama3_rope_divisors (original_max_position_embeddings from the RoPE dict,
    else top level; required). Every other type, and partial rotation, raises ValueError."""
    for d in _rope_dicts(hf) + [hf]:
        partial = d.get("partial_rotary_factor")
        if partial is not None and float(partial) != 1.0:
            raise ValueError(f"partial_rotary_factor {partial}: partial RoPE is not supported by the reference")
    kind, d = rope_type_from_hf(hf)
    if kind not in ROPE_TYPES:
        raise ValueError(f"RoPE type {kind!r} is not supported by the reference (only {ROPE_TYPES})")
    if kind == "default":
        return None
    factor = float(d["factor"])
    if kind == "linear":
        return tuple([factor] * (head_dim // 2))
    original = d.get("original_max_position_embeddings", hf.get("original_max_position_embeddings"))
    if original is None:
        raise ValueError("llama3 RoPE without original_max_position_embeddings")
    return llama3_rope_divisors(head_dim, theta, factor, float(d["low_freq_factor"]), float(d["high_freq_factor"]), int(original))


def sliding_window_from_hf(hf):
    """The window W of a model whose every layer attends to the W most recent positions, else None.

    Mistral: sliding_window (null = full causal attention), every layer. Other configs with a
    sliding_window key (Qwen2, Qwen3) use it only when use_sliding_window is true and then only on
    some layers (layer_types / max_window_layers); that is refused, as is any layer_types list
    that is not all "full_attention" (or, for Mistral with a window, all "sliding_attention")."""
    window = None
    if hf.get("model_type") == "mistral":
        window = hf.get("sliding_window")
    elif hf.get("use_sliding_window"):
        raise ValueError("use_sliding_window: per-layer sliding windows are not supported by the reference")
    layer_types = hf.get("layer_types")
    if layer_types is not None:
        allowed = "full_attention" if window is None else "sliding_attention"
        if any(t != allowed for t in layer_types):
            raise ValueError(f"layer_types {layer_types} not supported (every layer must be {allowed!r})")
    if window is not None and (not isinstance(window, int) or window < 1):
        raise ValueError(f"sliding_window must be a positive integer, not {window!r}")
    return window


@dataclass
class LayerWeights:
    """One decoder layer. Linear weights are [out_features, in_features] as in Hugging Face."""

    input_norm: np.ndarray
    q_proj: np.ndarray
    k_proj: np.ndarray
    v_proj: np.ndarray
    o_proj: np.ndarray
    q_bias: np.ndarray | None
    k_bias: np.ndarray | None
    v_bias: np.ndarray | None
    post_attention_norm: np.ndarray
    gate_proj: np.ndarray | None  # None in a MoE layer
    up_proj: np.ndarray | None
    down_proj: np.ndarray | None
    q_norm: np.ndarray | None = None  # [head_dim], Qwen3
    k_norm: np.ndarray | None = None
    router: np.ndarray | None = None  # [experts, d], a MoE layer's mlp.gate
    experts: list | None = None  # [(gate_proj, up_proj, down_proj)] per expert


@dataclass
class ModelWeights:
    embed_tokens: np.ndarray  # [vocab, d]
    layers: list
    final_norm: np.ndarray  # [d]
    lm_head: np.ndarray  # [vocab, d]; the same array as embed_tokens when tied


def weights_from_hf(config, tensors, dtype):
    """Pick the Hugging Face-named tensors out of `tensors` and convert them to `dtype`.

    The q/k/v biases are optional (Qwen2 has them, Llama does not); lm_head.weight must be
    absent exactly when the embeddings are tied.
    """

    def get(name):
        return np.asarray(tensors[name], dtype=dtype)

    def get_optional(name):
        return get(name) if name in tensors else None

    layers = []
    for layer in range(config.num_layers):
        p = f"model.layers.{layer}."
        moe = layer in config.moe_layers

        def mlp(name):
            return None if moe else get(p + f"mlp.{name}.weight")

        experts = None
        if moe:
            experts = [
                tuple(get(p + f"mlp.experts.{e}.{name}.weight") for name in ("gate_proj", "up_proj", "down_proj"))
                for e in range(config.num_experts)
            ]
        layers.append(
            LayerWeights(
                input_norm=get(p + "input_layernorm.weight"),
                q_proj=get(p + "self_attn.q_proj.weight"),
                k_proj=get(p + "self_attn.k_proj.weight"),
                v_proj=get(p + "self_attn.v_proj.weight"),
                o_proj=get(p + "self_attn.o_proj.weight"),
                q_bias=get_optional(p + "self_attn.q_proj.bias"),
                k_bias=get_optional(p + "self_attn.k_proj.bias"),
                v_bias=get_optional(p + "self_attn.v_proj.bias"),
                post_attention_norm=get(p + "post_attention_layernorm.weight"),
                gate_proj=mlp("gate_proj"),
                up_proj=mlp("up_proj"),
                down_proj=mlp("down_proj"),
                q_norm=get(p + "self_attn.q_norm.weight") if config.qk_norm else None,
                k_norm=get(p + "self_attn.k_norm.weight") if config.qk_norm else None,
                router=get(p + "mlp.gate.weight") if moe else None,
                experts=experts,
            )
        )
    embed = get("model.embed_tokens.weight")
    if config.tie_word_embeddings:
        if "lm_head.weight" in tensors:
            raise ValueError("tie_word_embeddings is true but lm_head.weight is present")
        lm_head = embed
    else:
        lm_head = get("lm_head.weight")
    return ModelWeights(embed_tokens=embed, layers=layers, final_norm=get("model.norm.weight"), lm_head=lm_head)


# ----------------------------------------------------------------------------------
# The building blocks, each straight from its formula
# ----------------------------------------------------------------------------------


def matmul_blas(a, b):
    """a @ b, as NumPy does it (BLAS: blocked, vectorised accumulation)."""
    return a @ b


def matmul_sequential(a, b):
    """a @ b with every dot product accumulated left to right, one term at a time, in the
    arrays' own precision: the order of the most naive C++ loop. Used only in float32 to
    see how much the rounding error depends on the accumulation order."""
    a_moved = np.moveaxis(a, -1, 0)  # [k, ..., n]
    b_moved = np.moveaxis(b, -2, 0)  # [k, ..., m]
    total = np.zeros(np.broadcast_shapes(a.shape[:-1] + (1,), b.shape[:-2] + (1, b.shape[-1])), dtype=a.dtype)
    for a_k, b_k in zip(a_moved, b_moved):
        total = total + a_k[..., :, None] * b_k[..., None, :]
    return total


def rms_norm(x, weight, eps):
    """RMSNorm over the last axis: x / sqrt(mean(x^2) + eps) * weight."""
    mean_square = np.mean(x * x, axis=-1, keepdims=True)
    return x / np.sqrt(mean_square + eps) * weight


def silu(z):
    """SiLU (a.k.a. swish): z * sigmoid(z) = z / (1 + exp(-z))."""
    return z / (1 + np.exp(-z))


def softmax(scores):
    """Softmax over the last axis; the max is subtracted first so exp never overflows
    (masked entries are -inf and become exactly 0)."""
    shifted = scores - np.max(scores, axis=-1, keepdims=True)
    e = np.exp(shifted)
    return e / np.sum(e, axis=-1, keepdims=True)


def rope_cos_sin(positions, head_dim, theta, dtype, divisors=None):
    """cos and sin tables, each [len(positions), head_dim / 2], for rotary position embedding.

    Pair i (i < head_dim / 2) rotates at frequency inv_freq_i = theta^(-2i / head_dim), so at
    position p its angle is p * inv_freq_i. With RoPE scaling (`divisors`, one per pair, see
    llama3_rope_divisors) the angle is p * inv_freq_i / divisors[i].
    """
    i = np.arange(head_dim // 2, dtype=dtype)
    inv_freq = dtype(theta) ** (-2 * i / dtype(head_dim))
    if divisors is not None:
        if len(divisors) != head_dim // 2:
            raise ValueError(f"{len(divisors)} RoPE divisors for {head_dim // 2} pairs")
        inv_freq = inv_freq / np.asarray(divisors, dtype=dtype)
    angles = np.asarray(positions, dtype=dtype)[:, None] * inv_freq[None, :]
    return np.cos(angles), np.sin(angles)


def apply_rope(x, cos, sin):
    """Rotate x [..., n, head_dim] in the Hugging Face "rotate-half" convention.

    Element i is paired with element i + head_dim/2 (not with its neighbour 2i+1), and the
    pair is rotated by the angle of pair i:
        out[i]          = x[i] cos - x[i + hd/2] sin
        out[i + hd/2]   = x[i + hd/2] cos + x[i] sin
    """
    half = x.shape[-1] // 2
    first, second = x[..., :half], x[..., half:]
    return np.concatenate([first * cos - second * sin, second * cos + first * sin], axis=-1)


def apply_rope_adjacent(x, cos, sin):
    """Rotate x [..., n, head_dim] in the adjacent-pair ("GPT-J", interleaved) convention.

    Element 2i is paired with its neighbour 2i + 1, and the pair is rotated by the angle of pair i:
        out[2i]     = x[2i] cos - x[2i+1] sin
        out[2i+1]   = x[2i+1] cos + x[2i] sin
    This is what a GGUF file from llama.cpp's converter expects: the converter reorders each head's
    Q and K rows so that rotate-half pair (i, i + hd/2) lands on rows (2i, 2i + 1).
    """
    even, odd = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = odd * cos + even * sin
    return out


ROPE_PAIRINGS = {"rotate_half": apply_rope, "adjacent": apply_rope_adjacent}


def causal_attention(q, k, v, q_positions, k_positions, matmul, sliding_window=None):
    """Grouped-query causal attention.

    q: [n_heads, n, hd]; k, v: [n_kv_heads, T, hd]. Query head h reads kv head
    h // (n_heads / n_kv_heads). A query at position p attends to the keys at positions
    <= p, with scores q.k / sqrt(hd). Returns [n_heads, n, hd].

    With a sliding_window W (Gemma's local layers, every Mistral layer), a query at position p sees only the keys at
    positions t with p - t < W, i.e. itself and the W - 1 before it (llama.cpp's
    LLAMA_SWA_TYPE_STANDARD masks p - t >= W).
    """
    n_heads, _, head_dim = q.shape
    n_kv_heads = k.shape[0]
    group_size = n_heads // n_kv_heads
    kv_head_of = np.arange(n_heads) // group_size
    k_per_head = k[kv_head_of]  # [n_heads, T, hd]
    v_per_head = v[kv_head_of]

    scores = matmul(q, np.swapaxes(k_per_head, -1, -2)) / np.sqrt(q.dtype.type(head_dim))  # [n_heads, n, T]
    distance = np.asarray(q_positions)[:, None] - np.asarray(k_positions)[None, :]  # [n, T]: p - t
    hidden = distance < 0  # the future
    if sliding_window is not None:
        hidden = hidden | (distance >= sliding_window)  # too far in the past
    scores = np.where(hidden, q.dtype.type(-np.inf), scores)
    return matmul(softmax(scores), v_per_head)


# ----------------------------------------------------------------------------------
# The model
# ----------------------------------------------------------------------------------


class KVCache:
    """Keys (after RoPE) and values of every position seen so far, per layer,
    each [n_kv_heads, T, head_dim]. Positions are 0 .. T-1 in order."""

    def __init__(self, config, dtype):
        empty = np.zeros((config.num_kv_heads, 0, config.head_dim), dtype=dtype)
        self.keys = [empty] * config.num_layers
        self.values = [empty] * config.num_layers

    @property
    def length(self):
        return self.keys[0].shape[1]

    def append(self, layer, k, v):
        self.keys[layer] = np.concatenate([self.keys[layer], k], axis=1)
        self.values[layer] = np.concatenate([self.values[layer], v], axis=1)


class LlamaModel:
    """A Llama-family decoder-only transformer evaluated in one precision (`dtype`).

    `sequential_dots=True` accumulates every dot product term by term (see matmul_sequential);
    it is only meaningful, and only used, for the float32 error measurements.

    `rope_pairing` says which elements of a head RoPE rotates together: "rotate_half" (i, i + hd/2),
    the Hugging Face layout, or "adjacent" (2i, 2i + 1), the layout of Q/K rows in a GGUF file
    (see apply_rope_adjacent). It must match how the q_proj/k_proj rows are ordered.
    """

    def __init__(self, config, tensors, dtype=np.float64, sequential_dots=False, rope_pairing="rotate_half"):
        if rope_pairing not in ROPE_PAIRINGS:
            raise ValueError(f"rope_pairing must be one of {sorted(ROPE_PAIRINGS)}, not {rope_pairing!r}")
        self.config = config
        self.dtype = np.dtype(dtype).type
        self.weights = weights_from_hf(config, tensors, self.dtype)
        self.matmul = matmul_sequential if sequential_dots else matmul_blas
        self.rope = ROPE_PAIRINGS[rope_pairing]
        self.routing_gaps = []  # moe_block's, over every forward so far

    def new_cache(self):
        return KVCache(self.config, self.dtype)

    def linear(self, x, weight, bias=None):
        """y = x W^T (+ b), for x [n, in] and W [out, in]."""
        y = self.matmul(x, weight.T)
        return y if bias is None else y + bias

    def attention_block(self, x, layer, layer_index, positions, cache):
        """Project to q/k/v, rotate q and k, append k/v to the cache, attend, project back."""
        c = self.config
        n = x.shape[0]
        h = rms_norm(x, layer.input_norm, self.dtype(c.rms_norm_eps))

        def split_heads(y, heads):  # [n, heads*hd] -> [heads, n, hd]
            return y.reshape(n, heads, c.head_dim).transpose(1, 0, 2)

        q = split_heads(self.linear(h, layer.q_proj, layer.q_bias), c.num_heads)
        k = split_heads(self.linear(h, layer.k_proj, layer.k_bias), c.num_kv_heads)
        v = split_heads(self.linear(h, layer.v_proj, layer.v_bias), c.num_kv_heads)
        if layer.q_norm is not None:  # Qwen3: each head normalized over head_dim
            q = rms_norm(q, layer.q_norm, self.dtype(c.rms_norm_eps))
            k = rms_norm(k, layer.k_norm, self.dtype(c.rms_norm_eps))

        cos, sin = rope_cos_sin(positions, c.head_dim, c.rope_theta, self.dtype, c.rope_divisors)
        q = self.rope(q, cos, sin)
        k = self.rope(k, cos, sin)

        cache.append(layer_index, k, v)
        all_positions = np.arange(cache.keys[layer_index].shape[1])
        attended = causal_attention(
            q, cache.keys[layer_index], cache.values[layer_index], positions, all_positions, self.matmul, c.sliding_window
        )
        merged = attended.transpose(1, 0, 2).reshape(n, c.num_heads * c.head_dim)
        return self.linear(merged, layer.o_proj)

    def swiglu(self, h, gate_proj, up_proj, down_proj):
        return self.linear(silu(self.linear(h, gate_proj)) * self.linear(h, up_proj), down_proj)

    def mlp_block(self, x, layer):
        """SwiGLU feed-forward: down(silu(gate(h)) * up(h)) with h = rmsnorm(x); a MoE layer's experts."""
        h = rms_norm(x, layer.post_attention_norm, self.dtype(self.config.rms_norm_eps))
        if layer.router is not None:
            return self.moe_block(h, layer)
        return self.swiglu(h, layer.gate_proj, layer.up_proj, layer.down_proj)

    def moe_block(self, h, layer):
        """Qwen3-MoE's sparse block, row by row: softmax over the router's logits, the k largest
        (ties: the lower expert id), renormalized if norm_topk_prob, and the chosen experts' SwiGLU
        outputs summed with those weights. Each row's smallest gap between a chosen and an unchosen
        logit is appended to self.routing_gaps: how far the choice is from flipping."""
        c = self.config
        out = np.zeros_like(h)
        for row in range(h.shape[0]):
            logits = self.linear(h[row : row + 1], layer.router)[0]
            p = softmax(logits)
            order = np.argsort(-p, kind="stable")  # descending; equal p keep ascending ids
            chosen = order[: c.experts_per_token]
            if c.experts_per_token < c.num_experts:
                gap = np.min(logits[chosen]) - np.max(logits[order[c.experts_per_token :]])
                self.routing_gaps.append(float(gap))
            weights = p[chosen]
            if c.norm_topk_prob:
                weights = weights / np.sum(weights)
            for e, weight in sorted(zip(chosen, weights)):
                out[row] += weight * self.swiglu(h[row : row + 1], *layer.experts[e])[0]
        return out

    def forward(self, token_ids, cache, trace=None):
        """Run `token_ids` (the next positions after what `cache` holds) through the model.

        Works for a whole prompt (prefill, empty cache) and for one token at a time
        (decode). Appends the new keys/values to `cache` and returns the logits
        [len(token_ids), vocab]. If `trace` is a dict, the intermediate activations are
        stored in it under their golden-file names.
        """
        w = self.weights
        start = cache.length
        positions = np.arange(start, start + len(token_ids))

        x = w.embed_tokens[np.asarray(token_ids)]
        if trace is not None:
            trace["embedding.output"] = x
        for index, layer in enumerate(w.layers):
            x = x + self.attention_block(x, layer, index, positions, cache)
            x = x + self.mlp_block(x, layer)
            if trace is not None:
                trace[f"layer.{index}.output"] = x
        x = rms_norm(x, w.final_norm, self.dtype(self.config.rms_norm_eps))
        logits = self.linear(x, w.lm_head)
        if trace is not None:
            trace["final_norm.output"] = x
            trace["logits"] = logits
        # NumPy promotes silently; make sure the requested precision held throughout.
        assert logits.dtype == self.dtype, f"computation drifted to {logits.dtype}"
        return logits


# ----------------------------------------------------------------------------------
# What the golden files record
# ----------------------------------------------------------------------------------


def prefill(model, prompt_ids):
    """Run the prompt from an empty cache. Returns (trace dict, cache): the trace holds the
    per-stage activations, and the KV cache contents are added as kv.layer.{l}.k / .v."""
    cache = model.new_cache()
    trace = {}
    model.forward(prompt_ids, cache, trace)
    for layer in range(model.config.num_layers):
        trace[f"kv.layer.{layer}.k"] = cache.keys[layer]
        trace[f"kv.layer.{layer}.v"] = cache.values[layer]
    return trace, cache


def greedy_decode(model, prompt_ids, steps):
    """Greedy continuation through the KV cache, EOS not applied.

    Returns (ids [steps], logits [steps, vocab]). Row 0 is the last prompt position's
    logits; row i (i >= 1) comes from feeding ids[i-1], alone, at position P + i - 1, so
    every row after the first is genuinely produced by incremental decoding.
    """
    cache = model.new_cache()
    logits = model.forward(prompt_ids, cache)[-1]
    ids, rows = [], []
    for step in range(steps):
        if step > 0:
            logits = model.forward([ids[-1]], cache)[-1]
        rows.append(logits)
        ids.append(int(np.argmax(logits)))
    return np.array(ids, dtype=np.int32), np.stack(rows)


def max_relative_error(actual, reference):
    """max |actual - reference| / max |reference|: the metric of every float golden tensor."""
    reference = np.asarray(reference, dtype=np.float64)
    scale = np.max(np.abs(reference))
    return float(np.max(np.abs(np.asarray(actual, dtype=np.float64) - reference)) / scale)


def check_decode_matches_reprefill(model, prompt_ids, greedy_ids, greedy_logits, tolerance):
    """Every incremental-decode row must equal the last row of a fresh prefill over
    prompt + the tokens fed so far: the KV cache path and the full-sequence path are two
    computations of the same function. Returns the worst relative difference."""
    worst = 0.0
    for step in range(len(greedy_ids)):
        sequence = list(prompt_ids) + [int(t) for t in greedy_ids[:step]]
        full = model.forward(sequence, model.new_cache())[-1]
        error = max_relative_error(greedy_logits[step], full)
        if error > tolerance:
            raise AssertionError(f"decode step {step}: cache path differs from re-prefill by {error:.3e}")
        worst = max(worst, error)
    return worst


def top1_top2_gap(logits_row):
    """Distance between the largest and second-largest logit: how far the greedy choice is
    from a tie (a float32 implementation must not be able to flip it)."""
    top_two = np.sort(logits_row)[-2:]
    return float(top_two[1] - top_two[0])
