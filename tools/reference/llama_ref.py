"""Reference forward pass of the decoder-only transformers plumb runs, in NumPy.

This is the oracle the C++ implementation is tested against, so it is written to be
read, not to be fast: every step is the textbook formula, one function per idea.
It shares no code with the C++ (nor with transformers: it reads config.json and the weights).

The model, for a sequence of token ids at positions p (the Llama layer; in brackets what other
families change, each switched on by config data: FAMILIES below says which family does what):

    x = embed_tokens[ids]                          [* sqrt(d): Gemma]                           # [n, d]
    for each layer:
        h = rmsnorm(x)                             [h = x: OLMo 2]
        q, k, v = h Wq^T (+ bq), h Wk^T (+ bk), h Wv^T (+ bv)
                                                   [Phi-3: one fused Wqkv, rows q | k | v]
        q, k = rmsnorm(q), rmsnorm(k)              [Qwen3, Gemma 3: per head, over head_dim; OLMo 2: over the
                                                    whole projection, q_norm [heads * hd], k_norm [kv_heads * hd]]
        q, k = rope(q), rope(k)                    [only the first rotary_dim dims of each head: Phi-3;
                                                    none on NoPE layers: SmolLM3's no_rope_layers 0]
        s = q k^T / sqrt(head_dim)                 [/ sqrt(query_pre_attn_scalar): Gemma]
        s = cap tanh(s / cap)                      [only Gemma 2: attn_logit_softcapping]
        a = softmax(s + causal mask) v             [+ the window mask on sliding layers: Mistral, Mixtral, Phi-3
                                                    (every layer), Gemma (layer_types)]; kv head h // group (GQA)
        x = x + a Wo^T                             [x + rmsnorm(a Wo^T): Gemma, OLMo 2]
        h = rmsnorm(x)                             [h = x: OLMo 2]
        x = x + down(act(gate(h)) * up(h))         [act silu, gelu_tanh for Gemma; Phi-3: one fused gate_up,
                                                    rows gate | up; Gemma, OLMo 2: x + rmsnorm(down(...));
                                                    Mixtral, Qwen3-MoE: a mixture of experts, below]
    logits = lm_head(rmsnorm(x))                   lm_head = embed_tokens when tied
    logits = cap tanh(logits / cap)                [only Gemma 2: final_logit_softcapping]

with rmsnorm(v) = v / sqrt(mean(v^2) + eps) * w over the last axis, each norm its own w [* (1 + w): Gemma].

RoPE (rope_cos_sin, apply_rope) turns pair i (i < rotary_dim / 2; rotary_dim = head_dim unless partial)
of each head at position p by the angle p * theta^(-2i / rotary_dim) / divisor_i, where divisor_i is 1
(default), factor (linear), the llama3 rule (llama3_rope_divisors), or LongRoPE's short_factor_i while a
forward pass ends within original_max_position_embeddings and long_factor_i once it ends past it, the
rotated values then multiplied by LongRoPE's attention factor. Gemma 3 gives its sliding and full layers
each their own theta and scaling (rope_parameters per layer type).

A mixture-of-experts MLP (moe_block), per row h:

    p = softmax(h router^T); the k experts of largest p (ties: lower id); p / sum of those p if renormalized
    x = x + sum over the chosen experts e of p_e * down_e(silu(gate_e(h)) * up_e(h))

(Mixtral always renormalizes, which is the same as a softmax over the k chosen logits; Qwen3-MoE when
norm_topk_prob.)

The default precision is float64: with float32 weights and float64 arithmetic the
reference's own rounding error (~1e-16 relative) is negligible next to that of any
float32 implementation. The same code also runs in float32 (the `dtype` argument);
that mode exists only to measure how far a float32 implementation legitimately
drifts from the float64 result, which is what the test thresholds are derived from.
"""

import math
from dataclasses import dataclass, field

import numpy as np


# ----------------------------------------------------------------------------------
# The families: what each model_type changes in the Llama layer, as data
# ----------------------------------------------------------------------------------
#
# Each Family says where its tensors are (names, fused matrices, experts), how its layer is
# built (which norms, their 1 + w, the embedding scale, the kind of QK-norm) and which
# config.json keys its transformers class reads, with the value transformers takes when the key
# is absent (`reads`). A key a family does not read is ignored, as transformers ignores it (a
# Llama's "sliding_window"); a value the reference does not implement is refused.

LLAMA_NORMS = ("input_layernorm", None, "post_attention_layernorm", None)
# Gemma 2/3: a norm before and after each block ("sandwich"); the after-attention norm takes Llama's name.
SANDWICH_NORMS = (
    "input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"
)
# OLMo 2: no norm before the blocks, one on each block's output before the residual add.
POST_NORMS = (None, "post_attention_layernorm", None, "post_feedforward_layernorm")


@dataclass(frozen=True)
class Experts:
    """Where a mixture-of-experts family keeps its router and experts (names under model.layers.L.,
    {e} the expert id) and the config key of each expert's width."""

    router: str
    gate: str
    up: str
    down: str
    width_key: str


QWEN3_MOE_EXPERTS = Experts(
    "mlp.gate", "mlp.experts.{e}.gate_proj", "mlp.experts.{e}.up_proj", "mlp.experts.{e}.down_proj",
    "moe_intermediate_size",
)
# Mixtral: w1 is the gate, w3 the up and w2 the down projection (out = w2(silu(w1 h) * w3 h)).
MIXTRAL_EXPERTS = Experts(
    "block_sparse_moe.gate", "block_sparse_moe.experts.{e}.w1", "block_sparse_moe.experts.{e}.w3",
    "block_sparse_moe.experts.{e}.w2", "intermediate_size",
)


@dataclass(frozen=True)
class Family:
    """What a model_type changes in the Llama layer (every default is the Llama layer's)."""

    # (before attention, after attention, before the MLP, after the MLP): tensor names, None where absent
    norms: tuple = LLAMA_NORMS
    norm_weight_offset: float = 0.0  # every RMSNorm (QK-norms too) scales by offset + w: 1 for Gemma
    scale_embedding: bool = False  # x = embed_tokens[ids] * sqrt(hidden_size)
    qk_norm: str | None = None  # "head" (RMSNorm of each head over head_dim) or "projection" (of all of q, k)
    fused: bool = False  # self_attn.qkv_proj (rows q | k | v) and mlp.gate_up_proj (rows gate | up)
    experts: Experts | None = None
    sliding_period: int | None = None  # without layer_types: every p-th layer full, the others sliding
    rope_per_layer_type: bool = False  # sliding and full layers may each have their own RoPE (Gemma 3)
    reads: dict = field(default_factory=dict)  # config key -> transformers' value when config.json omits it


LLAMA_READS = {"hidden_act": "silu", "rope_theta": 10000.0, "tie_word_embeddings": False}
# Qwen2/Qwen3 (and SmolLM3) read a window only with use_sliding_window, which the reference refuses.
QWEN_READS = {**LLAMA_READS, "use_sliding_window": False, "sliding_window": 4096, "layer_types": None}
GEMMA_READS = {
    "hidden_activation": "gelu_pytorch_tanh", "tie_word_embeddings": True, "sliding_window": 4096,
    "layer_types": None, "query_pre_attn_scalar": 256,
}

FAMILIES = {
    "llama": Family(reads=LLAMA_READS),
    "mistral": Family(reads={**LLAMA_READS, "sliding_window": 4096}),  # the window is on every layer
    "mixtral": Family(experts=MIXTRAL_EXPERTS, reads={**LLAMA_READS, "rope_theta": 1e6, "sliding_window": None}),
    "qwen2": Family(reads=QWEN_READS),
    "qwen3": Family(qk_norm="head", reads=QWEN_READS),
    "qwen3_moe": Family(
        qk_norm="head", experts=QWEN3_MOE_EXPERTS,
        reads={**LLAMA_READS, "use_sliding_window": False, "sliding_window": 4096, "norm_topk_prob": False,
               "mlp_only_layers": [], "decoder_sparse_step": 1},
    ),
    "smollm3": Family(
        reads={**QWEN_READS, "rope_theta": 2e6, "tie_word_embeddings": True, "sliding_window": None,
               "no_rope_layers": None, "no_rope_layer_interval": 4},
    ),
    "gemma2": Family(
        norms=SANDWICH_NORMS, norm_weight_offset=1.0, scale_embedding=True, sliding_period=2,
        reads={**GEMMA_READS, "rope_theta": 10000.0, "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0},
    ),
    "gemma3_text": Family(
        norms=SANDWICH_NORMS, norm_weight_offset=1.0, scale_embedding=True, qk_norm="head", sliding_period=6,
        rope_per_layer_type=True,
        # rope_local_base_freq: transformers 4's spelling of the sliding layers' own RoPE base
        reads={**GEMMA_READS, "rope_theta": 1e6, "rope_local_base_freq": 10000.0, "attn_logit_softcapping": None,
               "final_logit_softcapping": None},
    ),
    "olmo2": Family(norms=POST_NORMS, qk_norm="projection", reads=LLAMA_READS),
    "phi3": Family(fused=True, reads={**LLAMA_READS, "sliding_window": None, "partial_rotary_factor": 1.0}),
}

ACTIVATION_KEYS = ("hidden_act", "hidden_activation")
LAYER_TYPES = ("full_attention", "sliding_attention")


def family_of(model_type):
    """FAMILIES[model_type]; ValueError naming the list for any other (Granite looks like a Llama and is not)."""
    if model_type not in FAMILIES:
        raise ValueError(f"model_type {model_type!r} is not implemented by the reference (only {sorted(FAMILIES)})")
    return FAMILIES[model_type]


def setting(hf, family, key, absent=None):
    """The value of a config key the family reads (transformers' default where config.json omits it; null
    stays None, as in transformers), or `absent` for a key the family does not read."""
    if key not in family.reads:
        return absent
    return hf.get(key, family.reads[key])


# ----------------------------------------------------------------------------------
# Configuration
# ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelConfig:
    """The hyper-parameters the forward pass needs, read from a Hugging Face config.json.

    rope_divisors: None for plain RoPE, else one divisor per rotation pair (rotary_dim / 2 of them):
    pair i turns at theta^(-2i / rotary_dim) / rope_divisors[i] (RoPE scaling; see rope_divisors_from_hf).
    sliding_window: None, or W when the sliding layers (every layer unless layer_types says otherwise)
    attend only to the W most recent positions (itself and the W - 1 before it), as Mistral does.
    Every field with a default defaults to the Llama layer.
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
    qk_norm: str | None = None  # "head" (Qwen3, Gemma 3), "projection" (OLMo 2); see Family
    # Mixture of experts: num_experts 0 means dense. moe_layers lists the layers whose MLP is the experts.
    num_experts: int = 0
    experts_per_token: int = 0
    moe_intermediate_size: int = 0
    norm_topk_prob: bool = False
    moe_layers: tuple = ()
    # The other families' switches (FAMILIES says which sets what).
    model_type: str = "llama"  # names the tensors (weights_from_hf)
    norm_weight_offset: float = 0.0  # RMSNorm scales by offset + w
    embedding_multiplier: float = 1.0  # x = embed_tokens[ids] * embedding_multiplier
    activation: str = "silu"  # of the gated MLP: a key of ACTIVATIONS
    query_pre_attn_scalar: float | None = None  # scores / sqrt(this); None: head_dim
    attn_logit_softcapping: float | None = None
    final_logit_softcapping: float | None = None
    layer_types: tuple | None = None  # "full_attention" / "sliding_attention" per layer; None: all alike
    rotary_dim: int | None = None  # RoPE on the first rotary_dim dims of each head; None: head_dim
    rope_layers: tuple | None = None  # per layer, whether it applies RoPE; None: every layer
    # LongRoPE: rope_divisors are the short factors, these the long ones, taken by a forward pass whose
    # positions end past rope_original_context; the rotated values are multiplied by rope_attention_factor.
    rope_long_divisors: tuple | None = None
    rope_original_context: int | None = None
    rope_attention_factor: float = 1.0
    # The sliding layers' own RoPE (Gemma 3); None: rope_theta and rope_divisors, as the full layers.
    sliding_rope_theta: float | None = None
    sliding_rope_divisors: tuple | None = None

    @classmethod
    def from_hf(cls, hf):
        """Build from a config.json dict. model_type picks the family (FAMILIES; "llama" when absent);
        head_dim defaults to hidden_size / num_attention_heads (older configs and Qwen2 do not store it);
        num_key_value_heads defaults to num_attention_heads (plain multi-head attention). RoPE: see
        rope_from_hf (both config.json spellings, per layer type); the windows: attention_layout_from_hf;
        experts: experts_from_hf."""
        model_type = hf.get("model_type", "llama")
        family = family_of(model_type)
        num_layers = hf["num_hidden_layers"]
        num_heads = hf["num_attention_heads"]
        num_kv_heads = hf.get("num_key_value_heads") or num_heads
        head_dim = hf.get("head_dim") or hf["hidden_size"] // num_heads
        if num_heads % num_kv_heads != 0:
            raise ValueError("num_key_value_heads must divide num_attention_heads")
        activation = next(setting(hf, family, key) for key in ACTIVATION_KEYS if key in family.reads)
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation {activation!r} is not supported by the reference ({sorted(ACTIVATIONS)})")
        window, layer_types = attention_layout_from_hf(hf, family, num_layers)
        rope = rope_by_layer_type(hf, family, head_dim)
        full, sliding = rope["full_attention"], rope["sliding_attention"]

        def beyond_base_and_divisors(r):
            return {k: v for k, v in r.items() if k not in ("theta", "divisors")}

        if beyond_base_and_divisors(sliding) != beyond_base_and_divisors(full):
            raise ValueError("sliding and full layers differ in more than the RoPE base and divisors")
        same_rope = (sliding["theta"], sliding["divisors"]) == (full["theta"], full["divisors"])
        return cls(
            vocab_size=hf["vocab_size"],
            hidden_size=hf["hidden_size"],
            intermediate_size=hf["intermediate_size"],
            num_layers=num_layers,
            num_heads=num_heads,
            num_kv_heads=num_kv_heads,
            head_dim=head_dim,
            rms_norm_eps=hf["rms_norm_eps"],
            rope_theta=full["theta"],
            tie_word_embeddings=setting(hf, family, "tie_word_embeddings"),
            rope_divisors=full["divisors"],
            sliding_window=window,
            qk_norm=family.qk_norm,
            **experts_from_hf(hf, family),
            model_type=model_type,
            norm_weight_offset=family.norm_weight_offset,
            embedding_multiplier=math.sqrt(hf["hidden_size"]) if family.scale_embedding else 1.0,
            activation=activation,
            query_pre_attn_scalar=setting(hf, family, "query_pre_attn_scalar"),
            attn_logit_softcapping=setting(hf, family, "attn_logit_softcapping"),
            final_logit_softcapping=setting(hf, family, "final_logit_softcapping"),
            layer_types=layer_types,
            rotary_dim=full["rotary_dim"],
            rope_layers=rope_layers_from_hf(hf, family, num_layers),
            rope_long_divisors=full["long_divisors"],
            rope_original_context=full["original_context"],
            rope_attention_factor=full["attention_factor"],
            sliding_rope_theta=None if same_rope else sliding["theta"],
            sliding_rope_divisors=None if same_rope else sliding["divisors"],
        )

    def is_sliding(self, layer):
        """Whether `layer` attends through the sliding window (layer_types None: every layer, if there is one)."""
        if self.sliding_window is None:
            return False
        return self.layer_types is None or self.layer_types[layer] == "sliding_attention"

    def window(self, layer):
        """The sliding window of `layer`, None where it attends to every earlier position."""
        return self.sliding_window if self.is_sliding(layer) else None

    def layer_rope(self, layer, length):
        """(theta, per-pair divisors or None) of `layer` in a forward pass over positions < length, or None
        for a layer without RoPE. LongRoPE takes its long divisors when length > the original context."""
        if self.rope_layers is not None and not self.rope_layers[layer]:
            return None
        theta, divisors = self.rope_theta, self.rope_divisors
        if self.sliding_rope_theta is not None and self.is_sliding(layer):
            theta, divisors = self.sliding_rope_theta, self.sliding_rope_divisors
        if self.rope_long_divisors is not None and length > self.rope_original_context:
            divisors = self.rope_long_divisors
        return theta, divisors


def experts_from_hf(hf, family):
    """ModelConfig's mixture-of-experts fields ({} for a dense family).

    A layer is MoE unless listed in mlp_only_layers, every decoder_sparse_step-th layer (transformers'
    Qwen3MoeDecoderLayer; Mixtral reads neither key: every layer). The expert count is num_experts (the
    hub's Qwen3-MoE configs) or num_local_experts (Mixtral, and transformers 5's alias for Qwen3-MoE).
    The weights are renormalized when norm_topk_prob says so (Qwen3-MoE) or always (Mixtral reads no such key)."""
    if family.experts is None:
        return {}
    step = setting(hf, family, "decoder_sparse_step", absent=1)
    dense = setting(hf, family, "mlp_only_layers", absent=[]) or []
    spellings = {hf[k] for k in ("num_experts", "num_local_experts") if k in hf}
    if len(spellings) != 1:
        raise ValueError(f"num_experts / num_local_experts: {sorted(spellings)} (need exactly one value)")
    return dict(
        num_experts=spellings.pop(),
        experts_per_token=hf["num_experts_per_tok"],
        moe_intermediate_size=hf[family.experts.width_key],
        norm_topk_prob=setting(hf, family, "norm_topk_prob", absent=True),
        moe_layers=tuple(i for i in range(hf["num_hidden_layers"]) if i not in dense and (i + 1) % step == 0),
    )


def rope_layers_from_hf(hf, family, num_layers):
    """SmolLM3's NoPE layers: no_rope_layers[i] is 1 where layer i applies RoPE and 0 where it does not;
    absent, every no_rope_layer_interval-th layer (i + 1 a multiple of it) goes without (transformers'
    SmolLM3Config). None for the families that rotate every layer."""
    if "no_rope_layers" not in family.reads:
        return None
    flags = setting(hf, family, "no_rope_layers")
    if flags is None:
        interval = setting(hf, family, "no_rope_layer_interval")
        flags = [int((i + 1) % interval != 0) for i in range(num_layers)]
    if len(flags) != num_layers or any(f not in (0, 1) for f in flags):
        raise ValueError(f"no_rope_layers {flags}: need one 0 or 1 per layer")
    return tuple(bool(f) for f in flags)


# ----------------------------------------------------------------------------------
# RoPE parameters and the sliding window, in both config.json spellings
# ----------------------------------------------------------------------------------
#
# transformers 4.x writes the RoPE base as a top-level "rope_theta" and any scaling as
# "rope_scaling": {"rope_type" (older: "type"): ..., "factor": ..., ...}. transformers 5 writes one
# "rope_parameters": {"rope_type": ..., "rope_theta": ..., scaling fields} and neither of the others,
# or, for Gemma 3, one such dict per layer type ({"full_attention": {...}, "sliding_attention": {...}}).
# Both are read; a config that states something twice must state it the same way, and anything
# the reference does not implement (other RoPE types, partial rotation outside Phi-3, windows on
# some layers of a family that does not read layer_types) is refused rather than approximated.

ROPE_TYPES = ("default", "linear", "llama3", "longrope")


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
            raise ValueError(f"{key} is nested per layer type; only Gemma 3's layer types are read")
        dicts.append(value)
    return dicts


def rope_by_layer_type(hf, family, head_dim):
    """{layer type: rope_from_hf of that type's RoPE}, for a family with rope_per_layer_type (Gemma 3):
    rope_parameters nested per layer type (transformers 5) gives each type its dict; transformers 4's spelling
    (rope_theta and rope_scaling for the full layers) rotates the sliding ones unscaled at rope_local_base_freq.
    Every other family's two layer types read the same keys (a nested dict is refused by _rope_dicts)."""
    views = {t: hf for t in LAYER_TYPES}
    if family.rope_per_layer_type:
        params = hf.get("rope_parameters")
        if isinstance(params, dict) and params and set(params) <= set(LAYER_TYPES):
            views = {t: {**hf, "rope_parameters": params.get(t)} for t in LAYER_TYPES}
        else:
            unscaled = {k: v for k, v in hf.items() if k not in ("rope_parameters", "rope_scaling")}
            views["sliding_attention"] = {**unscaled, "rope_theta": setting(hf, family, "rope_local_base_freq")}
    return {t: rope_from_hf(view, family, head_dim) for t, view in views.items()}


def rope_from_hf(hf, family, head_dim):
    """One layer type's RoPE from (a view of) config.json: {theta, rotary_dim, divisors, long_divisors,
    original_context, attention_factor}; see rope_theta_from_hf, partial_rotary_factor_from_hf,
    rope_divisors_from_hf and longrope_from_hf."""
    theta = rope_theta_from_hf(hf, default=setting(hf, family, "rope_theta"))
    partial = partial_rotary_factor_from_hf(hf)
    if partial != 1.0 and "partial_rotary_factor" not in family.reads:
        raise ValueError(f"partial_rotary_factor {partial}: partial RoPE is read only for Phi-3")
    rotary_dim = int(head_dim * partial)  # transformers' int(head_dim * partial_rotary_factor)
    if rotary_dim % 2 != 0 or rotary_dim < 2:
        raise ValueError(f"RoPE needs an even number of rotated dims, not {rotary_dim}")
    rope = dict(theta=theta, rotary_dim=rotary_dim, divisors=rope_divisors_from_hf(hf, rotary_dim, theta),
                long_divisors=None, original_context=None, attention_factor=1.0)
    kind, d = rope_type_from_hf(hf)
    if kind == "longrope":
        rope.update(longrope_from_hf(hf, d, rotary_dim))
    return rope


def rope_theta_from_hf(hf, default=10000.0):
    """The RoPE base: top-level rope_theta (transformers 4) or rope_parameters.rope_theta
    (transformers 5); `default` when neither is there. Both present must agree."""
    stated = [hf.get("rope_theta")] + [d.get("rope_theta") for d in _rope_dicts(hf)]
    values = [float(v) for v in stated if v is not None]
    if any(v != values[0] for v in values):
        raise ValueError(f"config.json states different RoPE bases: {values}")
    return values[0] if values else float(default)


def partial_rotary_factor_from_hf(hf):
    """The fraction of each head RoPE rotates: partial_rotary_factor in the RoPE dicts or at top level
    (transformers 4's Phi-3), 1 when absent. Every statement must agree."""
    stated = [d.get("partial_rotary_factor") for d in _rope_dicts(hf) + [hf]]
    values = [float(v) for v in stated if v is not None]
    if any(v != values[0] for v in values):
        raise ValueError(f"config.json states different partial_rotary_factor values: {values}")
    return values[0] if values else 1.0


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
        if "factor" in d or "short_factor" in d:
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
        raise ValueError(
            f"llama3 RoPE needs high_freq_factor > low_freq_factor, got {high_freq_factor} <= {low_freq_factor}"
        )
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
    rope_parameters, for head_dim rotated dims: "default" -> None; "linear" -> factor for every pair
    (positions divided by factor); "llama3" -> llama3_rope_divisors (original_max_position_embeddings from
    the RoPE dict, else top level; required); "longrope" -> short_factor (the long ones: longrope_from_hf).
    Every other type raises ValueError."""
    kind, d = rope_type_from_hf(hf)
    if kind not in ROPE_TYPES:
        raise ValueError(f"RoPE type {kind!r} is not supported by the reference (only {ROPE_TYPES})")
    if kind == "default":
        return None
    if kind == "longrope":
        return longrope_from_hf(hf, d, head_dim)["divisors"]
    factor = float(d["factor"])
    if kind == "linear":
        return tuple([factor] * (head_dim // 2))
    original = d.get("original_max_position_embeddings", hf.get("original_max_position_embeddings"))
    if original is None:
        raise ValueError("llama3 RoPE without original_max_position_embeddings")
    return llama3_rope_divisors(
        head_dim, theta, factor, float(d["low_freq_factor"]), float(d["high_freq_factor"]), int(original)
    )


def longrope_from_hf(hf, d, rotary_dim):
    """LongRoPE (Phi-3.5, Phi-4-mini), as transformers' _compute_longrope_parameters reads its dict `d`:
    divisors = short_factor, long_divisors = long_factor (one per rotated pair each); original_context =
    original_max_position_embeddings (the dict's, else top level); attention_factor as stated, else
    sqrt(1 + ln s / ln original_context) with s = factor, or max_position_embeddings / original_context
    when the dict has no factor (1 when s <= 1)."""
    short, long = (tuple(float(x) for x in d[key]) for key in ("short_factor", "long_factor"))
    if len(short) != rotary_dim // 2 or len(long) != rotary_dim // 2:
        raise ValueError(f"LongRoPE needs {rotary_dim // 2} short and long factors, has {len(short)} and {len(long)}")
    original = d.get("original_max_position_embeddings", hf.get("original_max_position_embeddings"))
    if original is None:
        raise ValueError("longrope RoPE without original_max_position_embeddings")
    factor = d.get("factor")
    if factor is None:
        factor = hf["max_position_embeddings"] / original
    attention_factor = d.get("attention_factor")
    if attention_factor is None:
        attention_factor = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(original))
    return dict(
        divisors=short, long_divisors=long, original_context=int(original), attention_factor=float(attention_factor)
    )


def attention_layout_from_hf(hf, family, num_layers):
    """(sliding_window, layer_types): the window W of the sliding layers (None when no layer slides) and
    "full_attention" / "sliding_attention" per layer.

    The window is the family's sliding_window (Mistral's default 4096; null: none); the Qwen families
    read it only when use_sliding_window is true, and then only on some layers: refused. The layers:
    config.json's layer_types for a family that reads it (Gemma, the Qwens, SmolLM3; Gemma's default
    without one is a full layer every sliding_period-th); for the others every layer is sliding exactly
    when there is a window, and a layer_types list saying otherwise is refused."""
    if setting(hf, family, "use_sliding_window"):
        raise ValueError("use_sliding_window: per-layer sliding windows are not supported by the reference")
    window = None if "use_sliding_window" in family.reads else setting(hf, family, "sliding_window")
    full, sliding = LAYER_TYPES
    if family.sliding_period:
        default = [full if (i + 1) % family.sliding_period == 0 else sliding for i in range(num_layers)]
    else:
        default = [full if window is None else sliding] * num_layers
    stated = hf.get("layer_types")
    layer_types = default if stated is None else list(stated)
    if "layer_types" not in family.reads and layer_types != default:
        raise ValueError(f"layer_types {stated} not supported (every layer must be {default[0]!r})")
    if len(layer_types) != num_layers or any(t not in LAYER_TYPES for t in layer_types):
        raise ValueError(f"layer_types {stated}: need one of {LAYER_TYPES} per layer")
    if sliding not in layer_types:
        window = None
    elif window is None:
        raise ValueError(f"layer_types {layer_types} has sliding layers but there is no sliding_window")
    if window is not None and (not isinstance(window, int) or window < 1):
        raise ValueError(f"sliding_window must be a positive integer, not {window!r}")
    return window, tuple(layer_types)


# ----------------------------------------------------------------------------------
# Weights
# ----------------------------------------------------------------------------------


@dataclass
class LayerWeights:
    """One decoder layer. Linear weights are [out_features, in_features] as in Hugging Face; a norm is
    None where the family has none (and its weight already includes the family's offset: 1 + w)."""

    attn_norm: np.ndarray | None  # before attention
    q_proj: np.ndarray
    k_proj: np.ndarray
    v_proj: np.ndarray
    o_proj: np.ndarray
    q_bias: np.ndarray | None
    k_bias: np.ndarray | None
    v_bias: np.ndarray | None
    attn_out_norm: np.ndarray | None  # on the attention output (Gemma, OLMo 2)
    mlp_norm: np.ndarray | None  # before the MLP (Llama's post_attention_layernorm)
    mlp_out_norm: np.ndarray | None  # on the MLP output (Gemma, OLMo 2)
    gate_proj: np.ndarray | None  # None in a MoE layer
    up_proj: np.ndarray | None
    down_proj: np.ndarray | None
    q_norm: np.ndarray | None = None  # [head_dim], or [num_heads * head_dim] over the whole projection
    k_norm: np.ndarray | None = None
    router: np.ndarray | None = None  # [experts, d], a MoE layer's gate
    experts: list | None = None  # [(gate_proj, up_proj, down_proj)] per expert


@dataclass
class ModelWeights:
    embed_tokens: np.ndarray  # [vocab, d]
    layers: list
    final_norm: np.ndarray  # [d]
    lm_head: np.ndarray  # [vocab, d]; the same array as embed_tokens when tied


def weights_from_hf(config, tensors, dtype):
    """Pick the Hugging Face-named tensors of config's family out of `tensors`, converted to `dtype`.

    The q/k/v biases are optional (Qwen2 has them, Llama does not); lm_head.weight must be
    absent exactly when the embeddings are tied. Phi-3's fused matrices are split by rows here (the
    same dot products). Every tensor must be used (but a saved rotary_emb.inv_freq buffer, which
    transformers ignores too): an unread one is math the reference would leave out.
    """
    family = family_of(config.model_type)
    used = set()

    def get(name):
        used.add(name)
        return np.asarray(tensors[name], dtype=dtype)

    def get_optional(name):
        return get(name) if name in tensors else None

    def norm(name):  # the multiplier of an RMSNorm: offset + w
        weight = get(name)
        return weight + dtype(config.norm_weight_offset) if config.norm_weight_offset else weight

    def rows(matrix, *counts):  # split a fused matrix into blocks of `counts` rows
        if matrix.shape[0] != sum(counts):
            raise ValueError(f"fused matrix of {matrix.shape[0]} rows, expected {' + '.join(map(str, counts))}")
        return np.split(matrix, np.cumsum(counts)[:-1])

    q_rows, kv_rows = config.num_heads * config.head_dim, config.num_kv_heads * config.head_dim
    norm_rows = {"head": (config.head_dim, config.head_dim), "projection": (q_rows, kv_rows)}
    layers = []
    for layer in range(config.num_layers):
        p = f"model.layers.{layer}."
        moe = layer in config.moe_layers
        if family.fused:
            q, k, v = rows(get(p + "self_attn.qkv_proj.weight"), q_rows, kv_rows, kv_rows)
            ffn = config.intermediate_size
            gate, up = (None, None) if moe else rows(get(p + "mlp.gate_up_proj.weight"), ffn, ffn)
        else:
            q, k, v = (get(p + f"self_attn.{name}.weight") for name in ("q_proj", "k_proj", "v_proj"))
            gate, up = (None, None) if moe else (get(p + "mlp.gate_proj.weight"), get(p + "mlp.up_proj.weight"))
        router, experts = None, None
        if moe:
            where = family.experts
            router = get(p + where.router + ".weight")
            experts = [
                tuple(get(p + name.format(e=e) + ".weight") for name in (where.gate, where.up, where.down))
                for e in range(config.num_experts)
            ]
        q_norm = k_norm = None
        if config.qk_norm:
            q_norm, k_norm = norm(p + "self_attn.q_norm.weight"), norm(p + "self_attn.k_norm.weight")
            if (q_norm.shape[0], k_norm.shape[0]) != norm_rows[config.qk_norm]:
                raise ValueError(f"{config.qk_norm} QK-norm weights of {q_norm.shape[0]} / {k_norm.shape[0]} values")
        attn_norm, attn_out_norm, mlp_norm, mlp_out_norm = (
            None if name is None else norm(p + name + ".weight") for name in family.norms
        )
        layers.append(
            LayerWeights(
                attn_norm=attn_norm,
                q_proj=q,
                k_proj=k,
                v_proj=v,
                o_proj=get(p + "self_attn.o_proj.weight"),
                q_bias=get_optional(p + "self_attn.q_proj.bias"),
                k_bias=get_optional(p + "self_attn.k_proj.bias"),
                v_bias=get_optional(p + "self_attn.v_proj.bias"),
                attn_out_norm=attn_out_norm,
                mlp_norm=mlp_norm,
                mlp_out_norm=mlp_out_norm,
                gate_proj=gate,
                up_proj=up,
                down_proj=None if moe else get(p + "mlp.down_proj.weight"),
                q_norm=q_norm,
                k_norm=k_norm,
                router=router,
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
    final_norm = norm("model.norm.weight")
    unused = sorted(name for name in set(tensors) - used if not name.endswith("rotary_emb.inv_freq"))
    if unused:
        raise ValueError(f"tensors the {config.model_type} reference does not use: {unused[:6]}")
    return ModelWeights(embed_tokens=embed, layers=layers, final_norm=final_norm, lm_head=lm_head)


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


def gelu_tanh(z):
    """GELU, tanh approximation (transformers' gelu_pytorch_tanh, Gemma's activation):
    0.5 z (1 + tanh(sqrt(2/pi) (z + 0.044715 z^3)))."""
    t = z.dtype.type
    return t(0.5) * z * (t(1) + np.tanh(t(np.sqrt(2 / np.pi)) * (z + t(0.044715) * z * z * z)))


ACTIVATIONS = {"silu": silu, "gelu_pytorch_tanh": gelu_tanh}


def softcap(x, cap):
    """cap * tanh(x / cap): squashes x into (-cap, cap), close to the identity for |x| << cap."""
    t = x.dtype.type
    return t(cap) * np.tanh(x / t(cap))


def softmax(scores):
    """Softmax over the last axis; the max is subtracted first so exp never overflows
    (masked entries are -inf and become exactly 0)."""
    shifted = scores - np.max(scores, axis=-1, keepdims=True)
    e = np.exp(shifted)
    return e / np.sum(e, axis=-1, keepdims=True)


def rope_cos_sin(positions, head_dim, theta, dtype, divisors=None):
    """cos and sin tables, each [len(positions), head_dim / 2], for rotary position embedding
    (head_dim: the rotated dims of a head, rotary_dim under partial rotation).

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


def causal_attention(q, k, v, q_positions, k_positions, matmul, sliding_window=None, query_scalar=None, logit_cap=None):
    """Grouped-query causal attention.

    q: [n_heads, n, hd]; k, v: [n_kv_heads, T, hd]. Query head h reads kv head
    h // (n_heads / n_kv_heads). A query at position p attends to the keys at positions
    <= p, with scores q.k / sqrt(hd) (q.k / sqrt(query_scalar) when given: Gemma's
    query_pre_attn_scalar), soft-capped to logit_cap * tanh(score / logit_cap) before the mask
    when logit_cap is given (Gemma 2). Returns [n_heads, n, hd].

    With a sliding_window W (Gemma's local layers, every Mistral layer), a query at position p sees only the keys at
    positions t with p - t < W, i.e. itself and the W - 1 before it (llama.cpp's
    LLAMA_SWA_TYPE_STANDARD masks p - t >= W; transformers keeps t > p - W).
    """
    n_heads, _, head_dim = q.shape
    n_kv_heads = k.shape[0]
    group_size = n_heads // n_kv_heads
    kv_head_of = np.arange(n_heads) // group_size
    k_per_head = k[kv_head_of]  # [n_heads, T, hd]
    v_per_head = v[kv_head_of]

    scale = head_dim if query_scalar is None else query_scalar
    scores = matmul(q, np.swapaxes(k_per_head, -1, -2)) / np.sqrt(q.dtype.type(scale))  # [n_heads, n, T]
    if logit_cap is not None:
        scores = softcap(scores, logit_cap)
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
    """A decoder-only transformer of any family in FAMILIES, evaluated in one precision (`dtype`).

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
        self.activation = ACTIVATIONS[config.activation]
        self.routing_gaps = []  # moe_block's, over every forward so far

    def new_cache(self):
        return KVCache(self.config, self.dtype)

    def linear(self, x, weight, bias=None):
        """y = x W^T (+ b), for x [n, in] and W [out, in]."""
        y = self.matmul(x, weight.T)
        return y if bias is None else y + bias

    def norm(self, x, weight):
        """rms_norm with the model's eps; the identity where the family has no such norm (weight None)."""
        return x if weight is None else rms_norm(x, weight, self.dtype(self.config.rms_norm_eps))

    def rotate(self, x, layer_index, positions):
        """RoPE on x [heads, n, hd] at `positions`, with the layer's base and divisors (ModelConfig.layer_rope),
        on the first rotary_dim dims of each head (the rest pass through), times the attention factor;
        x unchanged on a layer without RoPE."""
        c = self.config
        rope = c.layer_rope(layer_index, int(positions[-1]) + 1)
        if rope is None:
            return x
        rotary_dim = c.rotary_dim or c.head_dim
        cos, sin = rope_cos_sin(positions, rotary_dim, rope[0], self.dtype, rope[1])
        rotated = self.rope(x[..., :rotary_dim], cos, sin)
        if c.rope_attention_factor != 1.0:
            rotated = rotated * self.dtype(c.rope_attention_factor)
        return rotated if rotary_dim == c.head_dim else np.concatenate([rotated, x[..., rotary_dim:]], axis=-1)

    def attention_block(self, x, layer, layer_index, positions, cache):
        """Project to q/k/v, normalize and rotate q and k, append k/v to the cache, attend, project back."""
        c = self.config
        n = x.shape[0]
        h = self.norm(x, layer.attn_norm)

        def split_heads(y, heads):  # [n, heads*hd] -> [heads, n, hd]
            return y.reshape(n, heads, c.head_dim).transpose(1, 0, 2)

        q = self.linear(h, layer.q_proj, layer.q_bias)
        k = self.linear(h, layer.k_proj, layer.k_bias)
        v = self.linear(h, layer.v_proj, layer.v_bias)
        if c.qk_norm == "projection":  # OLMo 2: over all heads at once
            q, k = self.norm(q, layer.q_norm), self.norm(k, layer.k_norm)
        q, k, v = split_heads(q, c.num_heads), split_heads(k, c.num_kv_heads), split_heads(v, c.num_kv_heads)
        if c.qk_norm == "head":  # Qwen3, Gemma 3: each head over head_dim
            q, k = self.norm(q, layer.q_norm), self.norm(k, layer.k_norm)
        q = self.rotate(q, layer_index, positions)
        k = self.rotate(k, layer_index, positions)

        cache.append(layer_index, k, v)
        all_positions = np.arange(cache.keys[layer_index].shape[1])
        attended = causal_attention(
            q, cache.keys[layer_index], cache.values[layer_index], positions, all_positions, self.matmul,
            c.window(layer_index), c.query_pre_attn_scalar, c.attn_logit_softcapping,
        )
        merged = attended.transpose(1, 0, 2).reshape(n, c.num_heads * c.head_dim)
        return self.norm(self.linear(merged, layer.o_proj), layer.attn_out_norm)

    def gated_mlp(self, h, gate_proj, up_proj, down_proj):
        """down(act(gate(h)) * up(h)): SwiGLU, or GeGLU (tanh) for Gemma."""
        return self.linear(self.activation(self.linear(h, gate_proj)) * self.linear(h, up_proj), down_proj)

    def mlp_block(self, x, layer):
        """The feed-forward block on h = rmsnorm(x): the gated MLP, or a MoE layer's experts; then the
        family's output norm, if any."""
        h = self.norm(x, layer.mlp_norm)
        if layer.router is not None:
            out = self.moe_block(h, layer)
        else:
            out = self.gated_mlp(h, layer.gate_proj, layer.up_proj, layer.down_proj)
        return self.norm(out, layer.mlp_out_norm)

    def moe_block(self, h, layer):
        """The sparse block (transformers' Qwen3MoeSparseMoeBlock, MixtralSparseMoeBlock), row by row:
        softmax over the router's logits, the k largest (ties: the lower expert id), renormalized if
        norm_topk_prob, and the chosen experts' gated-MLP outputs summed with those weights. Each row's
        smallest gap between a chosen and an unchosen logit is appended to self.routing_gaps: how far
        the choice is from flipping."""
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
                out[row] += weight * self.gated_mlp(h[row : row + 1], *layer.experts[e])[0]
        return out

    def forward(self, token_ids, cache, trace=None):
        """Run `token_ids` (the next positions after what `cache` holds) through the model.

        Works for a whole prompt (prefill, empty cache) and for one token at a time
        (decode). Appends the new keys/values to `cache` and returns the logits
        [len(token_ids), vocab]. If `trace` is a dict, the intermediate activations are
        stored in it under their golden-file names.
        """
        c, w = self.config, self.weights
        start = cache.length
        positions = np.arange(start, start + len(token_ids))

        x = w.embed_tokens[np.asarray(token_ids)]
        if c.embedding_multiplier != 1.0:  # Gemma: sqrt(d), in the working precision
            x = x * self.dtype(c.embedding_multiplier)
        if trace is not None:
            trace["embedding.output"] = x
        for index, layer in enumerate(w.layers):
            x = x + self.attention_block(x, layer, index, positions, cache)
            x = x + self.mlp_block(x, layer)
            if trace is not None:
                trace[f"layer.{index}.output"] = x
        x = self.norm(x, w.final_norm)
        logits = self.linear(x, w.lm_head)
        if c.final_logit_softcapping is not None:
            logits = softcap(logits, c.final_logit_softcapping)
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
