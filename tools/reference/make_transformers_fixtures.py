"""Write fixtures/transformers/: tiny random checkpoints built and saved by Hugging Face transformers,
with transformers' own greedy ids and logits, so that a C++ test can check plumb against transformers
(and check that plumb refuses what it does not implement) without torch in CI.

    /tmp/hfvenv/bin/python tools/reference/make_transformers_fixtures.py [--out DIR] [--only NAME ...]
    /tmp/hfvenv/bin/python tools/reference/make_transformers_fixtures.py --search-seeds 40 --only qwen2

Not run in CI (torch is several GB); the output is committed. Pinned, and checked at start-up:

    torch 2.15.0 (PyPI; the CUDA build, run on the CPU), transformers 5.24.0, safetensors 0.8.0
    (transformers 5.24 needs >= 0.8; tools/reference/requirements.txt pins it), numpy 2.2.6, gguf 0.19.0.

    python3 -m venv /tmp/hfvenv
    /tmp/hfvenv/bin/pip install torch==2.15.0 transformers==5.24.0 -r tools/reference/requirements.txt pytest

Every checkpoint has the same tiny shapes (SHAPES: vocab 160, d 64, ffn 128, 2 layers, 4 query heads and
2 KV heads of 16, max_position_embeddings 128, rms_norm_eps 1e-5, bos 1, eos 2). For each one:

  1. `XxxConfig(**SHAPES, ...)`, `XxxForCausalLM(config)`, then every parameter redrawn from a seeded
     torch.Generator (sorted parameter names; INIT_STD): RMSNorm weights 1 + 0.1 N(0,1), biases 0.2 N(0,1),
     embeddings 0.1 N(0,1), an untied lm_head 0.3 N(0,1), all other matrices 0.15 N(0,1). transformers' own
     init (std 0.02) gives logits too close to each other for a useful greedy test, and a larger embedding
     scale makes a tied model repeat its last input token forever;
  2. `model.to(torch.float16).save_pretrained(dir)` (transformers 5 always writes safetensors; it has no
     safe_serialization argument any more): config.json exactly as transformers 5.24 writes it and
     model.safetensors in F16; generation_config.json is deleted;
  3. the saved checkpoint reloaded with `AutoModelForCausalLM.from_pretrained(dir, dtype=torch.float32,
     attn_implementation="eager")` (F16 -> F32 is exact), then: prompt_ids (PROMPT_IDS, 12 ids), greedy_ids
     (20 argmax steps through transformers' own KV cache, EOS not applied) and logits (one teacher-forced
     forward over prompt_ids + greedy_ids[:-1], 31 positions, float32) -> expected.safetensors
     (prompt_ids I32 [12], greedy_ids I32 [20], logits F32 [31, 160]) written with safetensors_io;
  4. checks that refuse to write otherwise: the teacher-forced argmax along the greedy path equals the
     cached greedy ids; the smallest top-1 minus top-2 logit along that path is at least MIN_RELATIVE_GAP
     of max|logit|; the float64 NumPy reference (llama_ref, an implementation independent of both
     transformers and plumb) on the same F16 weights and config.json agrees within REF_TOLERANCE relative
     and picks the same greedy ids (and, for the Spec.reference "transformers64" checkpoints, so does
     transformers itself in float64, whose logits are written as logits64);
  5. manifest.json: name, description, model_type, versions, generator, "expect": "runs", the measured gap,
     max|logit|, the reference's deviation, and per-checkpoint evidence (spelling, RoPE regimes, window).

The checkpoint plumb must refuse (granite) gets steps 1-2 and a manifest with "expect": "refused" and the
reason, no expected outputs; it is tied (no lm_head.weight) to keep the folder small.

llama3-scaling also gets model.f32.gguf (export_gguf.convert, type f32), read back with gguf-py: its
rope_freqs.weight must hold the converter's divisors, its other tensors the checkpoint's values, and the
float64 reference on the GGUF as stored (adjacent RoPE, divisors from rope_freqs) must reproduce the
transformers logits.

Everything is deterministic given the pinned versions (CPU, one torch thread); the floats of the logits
may differ in the last bits with another torch build, which is why they are committed rather than
regenerated in CI.
"""

import argparse
import dataclasses
import json
import math
import os
import shutil
import sys
from dataclasses import dataclass, field

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import export_gguf  # noqa: E402
import gguf_ref  # noqa: E402
import llama_ref  # noqa: E402
import safetensors_io  # noqa: E402

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GENERATOR = "tools/reference/make_transformers_fixtures.py"
PINNED = {"torch": "2.15.0", "transformers": "5.24.0"}

SHAPES = dict(
    vocab_size=160,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=128,
    rms_norm_eps=1e-5,
    bos_token_id=1,
    eos_token_id=2,
)
# BOS, then 11 ids drawn once with numpy.random.default_rng(20261127).integers(3, 160, 11).
PROMPT_IDS = [1, 127, 60, 53, 28, 128, 79, 134, 53, 121, 150, 152]
GREEDY_STEPS = 20

# The greedy path must be far from a tie: min(top1 - top2) >= MIN_RELATIVE_GAP * max|logit|. An engine
# computing in float32 from the same F16 weights moves the logits by ~1e-6 relative.
MIN_RELATIVE_GAP = 5e-3
# float64 reference vs transformers' float32 logits, max|ref - hf| / max|ref|.
REF_TOLERANCE = 1e-5

# Llama 3.x scaling for head_dim 16, theta 500000: pair i has wavelength 2 pi 500000^(i/8) = 6.28, 32.4, 167,
# 862, 4444, 2.3e4, 1.2e5, 6.1e5. With original_max_position_embeddings L = 16, high_freq_factor 2 and
# low_freq_factor 1/16, high_freq_wavelen = L/2 = 8 and low_freq_wavelen = 16 L = 256, so pair 0 is kept,
# pairs 1-2 are smoothed and pairs 3-7 are divided by the factor. (Llama 3.1's own 1 and 4 with L = 16
# give 4 and 16: pair 0 smoothed, everything else divided, nothing kept.) The 31 positions run to 30,
# well past L; llama3 scaling does not depend on the sequence length, only on L.
LLAMA3_ROPE = {
    "rope_type": "llama3",
    "rope_theta": 500000.0,
    "factor": 8.0,
    "low_freq_factor": 0.0625,
    "high_freq_factor": 2.0,
    "original_max_position_embeddings": 16,
}

# LongRoPE for the rotated 8 dims (4 pairs) of phi3-longrope*: a divisor per pair for sequences that fit the
# original context (short) and for longer ones (long), as Phi-3.5 and Phi-4-mini's config.json give them.
LONGROPE = {
    "rope_type": "longrope",
    "rope_theta": 10000.0,
    "partial_rotary_factor": 0.5,
    "short_factor": [1.0, 1.5, 2.0, 3.0],
    "long_factor": [1.0, 2.5, 6.0, 16.0],
}

# The router's choice must be far from flipping (make_fixtures.MIN_ROUTING_GAP: the smallest chosen minus
# largest unchosen router logit over every decision of the float64 reference's runs).
MIN_ROUTING_GAP = 1e-3
SEED_QWEN3, SEED_QWEN3_MOE = 8, 6
# A feature override (Spec.must_matter) must move the logits by at least this, relative to max|logit|.
FEATURE_BITES = 1e-3

# Standard deviations of the redrawn parameters (RMSNorm weights: 1 + norm * N(0, 1)).
INIT_STD = {"norm": 0.1, "bias": 0.2, "embed": 0.1, "lm_head": 0.3, "matrix": 0.15}


@dataclass
class Spec:
    name: str
    description: str
    model_type: str  # the transformers config class's model_type
    config: dict  # keyword arguments beyond SHAPES
    seed: int = 0
    expect: str = "runs"
    refused_because: str = ""
    v4_spelling: bool = False  # rewrite config.json into the transformers 4 spelling after saving
    same_weights_as: str = ""  # copy the checkpoint (and outputs) of another spec, only respell config.json
    extra: dict = field(default_factory=dict)
    # The independent float64 check: "llama_ref" (the NumPy reference) or "transformers64" (transformers itself
    # reloaded in float64; its logits are written as logits64). llama_ref implements every family now, but the
    # eight checkpoints written before it did keep "transformers64", so that what the generator writes (logits64,
    # the manifests' keys) stays what is committed; for them llama_ref must agree too (make_runnable), and
    # test_reference.py judges all of them by llama_ref.
    reference: str = "llama_ref"
    # Config overrides that must each change the logits (> FEATURE_BITES relative): evidence that a family's
    # feature is switched on and bites at these shapes (a soft-cap that never caps tests nothing).
    must_matter: dict = field(default_factory=dict)
    init_std: dict = field(default_factory=dict)  # INIT_STD entries this family draws otherwise


SPECS = [
    Spec(
        "llama-v4-spelling",
        "Llama, plain RoPE theta 10000, untied; config.json rewritten into the transformers 4 spelling "
        "(top-level rope_theta, torch_dtype, no rope_parameters) and checked to load in transformers 5.24 to "
        "identical logits",
        "llama",
        dict(rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, tie_word_embeddings=False),
        seed=1,
        v4_spelling=True,
    ),
    Spec(
        "llama-theta500k",
        "Llama, plain RoPE theta 500000 in transformers 5's rope_parameters, tied embeddings",
        "llama",
        dict(rope_parameters={"rope_type": "default", "rope_theta": 500000.0}, tie_word_embeddings=True),
        seed=6,
    ),
    Spec(
        "llama3-scaling",
        "Llama with Llama 3.x RoPE scaling (rope_type llama3, factor 8, original context 16) in transformers 5's "
        "rope_parameters, tied embeddings; with model.f32.gguf, the same checkpoint converted as llama.cpp's "
        "converter does (rope_freqs.weight)",
        "llama",
        dict(rope_parameters=dict(LLAMA3_ROPE), tie_word_embeddings=True),
        seed=2,
    ),
    Spec(
        "llama3-scaling-v4-spelling",
        "llama3-scaling's weights and expected outputs, config.json in the transformers 4 spelling (top-level "
        "rope_theta, rope_scaling with rope_type llama3, torch_dtype), checked to load in transformers 5.24 to "
        "identical logits",
        "llama",
        {},
        v4_spelling=True,
        same_weights_as="llama3-scaling",
    ),
    Spec(
        "qwen2",
        "Qwen2: q/k/v projection biases (random, non-zero), tied embeddings, no sliding window",
        "qwen2",
        dict(rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, tie_word_embeddings=True),
        seed=10,
    ),
    Spec(
        "mistral",
        "Mistral without a sliding window (sliding_window null), untied",
        "mistral",
        dict(rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, tie_word_embeddings=False, sliding_window=None),
        seed=9,
    ),
    Spec(
        "mistral-window6",
        "Mistral with sliding_window 6 on every layer (position p attends to p-5..p), tied; the 31 positions "
        "go well past the window",
        "mistral",
        dict(rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, tie_word_embeddings=True, sliding_window=6),
        seed=0,
    ),
    Spec(
        "gemma2",
        "Gemma 2: sqrt(d) embedding scale, (1 + w) RMSNorms, post-attention and pre/post feed-forward norms, "
        "GELU-tanh MLP, query_pre_attn_scalar 24 (not head_dim), attention-logit soft-capping 3 and final-logit "
        "soft-capping 6 (both bite), layer 0 sliding (window 6) and layer 1 global; tied",
        "gemma2",
        dict(
            head_dim=16,
            query_pre_attn_scalar=24,
            sliding_window=6,
            attn_logit_softcapping=3.0,
            final_logit_softcapping=6.0,
            pad_token_id=0,
            tie_word_embeddings=True,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        ),
        seed=1,
        reference="transformers64",
        init_std={"embed": 0.025},
        must_matter={
            "attn_logit_softcapping": None,
            "final_logit_softcapping": None,
            "query_pre_attn_scalar": 16,
            "sliding_window": 64,
        },
    ),
    Spec(
        "gemma3",
        "Gemma 3 (text, Gemma3ForCausalLM): Gemma 2's norms and scale with a per-head RMSNorm of q and k, layer 0 "
        "sliding (window 6, RoPE base 10000) and layer 1 global (RoPE base 1e6, linear scaling factor 4), "
        "query_pre_attn_scalar 24; tied",
        "gemma3_text",
        dict(
            head_dim=16,
            query_pre_attn_scalar=24,
            sliding_window=6,
            layer_types=["sliding_attention", "full_attention"],
            pad_token_id=0,
            tie_word_embeddings=True,
            rope_parameters={
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                "full_attention": {"rope_type": "linear", "rope_theta": 1000000.0, "factor": 4.0},
            },
        ),
        seed=7,
        reference="transformers64",
        init_std={"embed": 0.025},
        must_matter={"sliding_window": 64, "query_pre_attn_scalar": 16},
    ),
    Spec(
        "olmo2",
        "OLMo 2: no norm before attention or MLP, an RMSNorm of each block's output before the residual add "
        "(post_attention_layernorm, post_feedforward_layernorm), and q_norm / k_norm over the whole q and k "
        "projections (not per head); untied",
        "olmo2",
        dict(pad_token_id=None, tie_word_embeddings=False, rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
        seed=4,
        reference="transformers64",
    ),
    Spec(
        "phi3",
        "Phi-3 / Phi-4-mini: fused self_attn.qkv_proj and mlp.gate_up_proj, partial rotary (partial_rotary_factor "
        "0.5: RoPE on the first 8 of 16 dimensions of each head, as Phi-4-mini's 0.75), no window; tied",
        "phi3",
        dict(
            pad_token_id=None,
            original_max_position_embeddings=128,
            tie_word_embeddings=True,
            sliding_window=None,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
        ),
        seed=8,
        reference="transformers64",
    ),
    Spec(
        "phi3-longrope",
        "Phi-3 with LongRoPE (rope_type longrope, as Phi-3.5-mini and Phi-4-mini): per-pair short and long "
        "frequency divisors, cos and sin scaled by sqrt(1 + ln(128/8) / ln 8); original context 8, so every "
        "forward pass of the fixture (the 12-token prompt on) is past it and takes the long factors; partial "
        "rotary 0.5; tied",
        "phi3",
        dict(
            pad_token_id=None,
            original_max_position_embeddings=8,
            tie_word_embeddings=True,
            sliding_window=None,
            rope_parameters=dict(LONGROPE),
        ),
        seed=8,
        reference="transformers64",
        must_matter={"original_max_position_embeddings": 64},
    ),
    Spec(
        "phi3-longrope-short",
        "phi3-longrope's factors (other weights) with original context 64: every forward pass of the fixture "
        "fits it and takes the short factors (with the attention factor of 128/64)",
        "phi3",
        dict(
            pad_token_id=None,
            original_max_position_embeddings=64,
            tie_word_embeddings=True,
            sliding_window=None,
            rope_parameters=dict(LONGROPE),
        ),
        seed=1,
        reference="transformers64",
        must_matter={"original_max_position_embeddings": 8},
    ),
    Spec(
        "smollm3",
        "SmolLM3: a Llama whose layers listed 0 in no_rope_layers skip RoPE (NoPE); here layer 1 of 2 "
        "(no_rope_layer_interval 2; SmolLM3-3B skips every fourth); tied",
        "smollm3",
        dict(
            no_rope_layer_interval=2,
            use_sliding_window=False,
            pad_token_id=None,
            tie_word_embeddings=True,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        ),
        seed=2,
        reference="transformers64",
        must_matter={"no_rope_layers": [1, 1]},
    ),
    Spec(
        "mixtral",
        "Mixtral: every layer a mixture of 4 SwiGLU experts of width 64, 2 per token (softmax over all, the top 2 "
        "renormalized), no shared expert; sliding_window null; untied",
        "mixtral",
        dict(
            intermediate_size=64,
            num_local_experts=4,
            num_experts_per_tok=2,
            sliding_window=None,
            tie_word_embeddings=False,
            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
        ),
        seed=2,
        reference="transformers64",
    ),
    Spec(
        "granite",
        "Granite",
        "granite",
        dict(pad_token_id=None, tie_word_embeddings=True, embedding_multiplier=12.0, attention_multiplier=0.25,
             residual_multiplier=0.5, logits_scaling=4.0,
             rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
        expect="refused",
        refused_because="Granite looks like a Llama (the same tensor names) but scales the embedding, the attention "
        "scores, every residual branch and the logits by config multipliers: run as a Llama it would give plausible, "
        "wrong text",
    ),
    Spec(
        "qwen3",
        "Qwen3: a per-head RMSNorm of q and k (q_norm, k_norm) before RoPE, explicit head_dim, no biases, theta 1e6, "
        "tied embeddings",
        "qwen3",
        dict(head_dim=16, tie_word_embeddings=True, rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}),
        seed=SEED_QWEN3,
    ),
    Spec(
        "qwen3-moe",
        "Qwen3-MoE: layer 0 a dense MLP (mlp_only_layers [0]), layer 1 eight SwiGLU experts of width 32, two per "
        "token (softmax, norm_topk_prob), QK-norm, untied",
        "qwen3_moe",
        dict(
            head_dim=16,
            tie_word_embeddings=False,
            num_experts=8,
            num_experts_per_tok=2,
            moe_intermediate_size=32,
            norm_topk_prob=True,
            decoder_sparse_step=1,
            mlp_only_layers=[0],
            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
        ),
        seed=SEED_QWEN3_MOE,
    ),
]


def spec_by_name(name):
    return next(s for s in SPECS if s.name == name)


# ----------------------------------------------------------------------------------
# Building and saving
# ----------------------------------------------------------------------------------


def config_class(model_type):
    import transformers

    return transformers.AutoConfig.for_model(model_type).__class__


def build_model(spec, seed):
    """A random float32 model of spec (see the module docstring for the distributions)."""
    import torch
    import transformers

    config = config_class(spec.model_type)(**{**SHAPES, **spec.config})
    torch.manual_seed(seed)  # transformers' own init first (then every parameter is redrawn below)
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32, attn_implementation="eager")
    generator = torch.Generator().manual_seed(seed)
    std = {**INIT_STD, **spec.init_std}
    with torch.no_grad():
        for name, parameter in sorted(model.named_parameters()):
            noise = torch.randn(parameter.shape, generator=generator, dtype=torch.float32)
            if parameter.ndim == 1 and "norm" in name:
                parameter.copy_(1 + std["norm"] * noise)
            elif name.endswith(".bias"):
                parameter.copy_(std["bias"] * noise)
            elif "embed_tokens" in name:
                parameter.copy_(std["embed"] * noise)
            elif name.startswith("lm_head"):
                parameter.copy_(std["lm_head"] * noise)
            else:
                parameter.copy_(std["matrix"] * noise)
    model.eval()
    return model


def save_checkpoint(model, directory):
    """model in float16 through save_pretrained; only config.json and model.safetensors are kept."""
    import torch

    if os.path.isdir(directory):
        shutil.rmtree(directory)
    model.to(torch.float16).save_pretrained(directory)
    kept = {"config.json", "model.safetensors"}
    for name in sorted(os.listdir(directory)):
        if name not in kept:
            os.remove(os.path.join(directory, name))
    if sorted(os.listdir(directory)) != sorted(kept):
        raise AssertionError(f"{directory}: save_pretrained wrote {os.listdir(directory)}")


def load_checkpoint(directory, dtype=None, **overrides):
    import torch
    import transformers

    dtype = dtype or torch.float32
    # Eager attention, and eager experts (a loop over each expert's tokens; the default grouped GEMM takes no
    # float64).
    model = transformers.AutoModelForCausalLM.from_pretrained(
        directory, dtype=dtype, attn_implementation="eager", experts_implementation="eager", **overrides
    )
    model.eval()
    return model


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def write_json(path, value):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=2)
        f.write("\n")


def to_v4_spelling(config):
    """A transformers 5 config.json dict in the spelling transformers 4 wrote: top-level rope_theta, scaling
    (if any) under rope_scaling with rope_type and without rope_theta, torch_dtype instead of dtype."""
    out = {}
    for key, value in config.items():
        if key == "rope_parameters":
            rope = dict(value)
            out["rope_theta"] = float(rope.pop("rope_theta"))
            if rope.get("rope_type", "default") != "default":
                out["rope_scaling"] = rope
        elif key == "dtype":
            out["torch_dtype"] = value
        else:
            out[key] = value
    return out


# ----------------------------------------------------------------------------------
# Running transformers
# ----------------------------------------------------------------------------------


def greedy(model, prompt_ids, steps):
    """Greedy ids through transformers' KV cache (the model makes its own DynamicCache), EOS not applied.
    Returns (ids, the logits row each id was taken from)."""
    import torch

    with torch.no_grad():
        out = model(input_ids=torch.tensor([prompt_ids]), use_cache=True)
        ids, rows = [], []
        for step in range(steps):
            row = out.logits[0, -1].clone()
            rows.append(row)
            ids.append(int(torch.argmax(row)))
            if step + 1 < steps:
                out = model(input_ids=torch.tensor([[ids[-1]]]), cache=out.cache, use_cache=True)
    return ids, torch.stack(rows).numpy()


def forward(model, ids, dtype=np.float32):
    """logits [len(ids), vocab] of one forward pass without a cache (float32, or float64 for a float64 model)."""
    import torch

    with torch.no_grad():
        return model(input_ids=torch.tensor([ids]), use_cache=False).logits[0].numpy().astype(dtype)


def transformers64(directory, sequence):
    """transformers itself in float64 (weights widened from F16 exactly): the teacher-forced logits over
    `sequence`, its greedy ids through its own cache, and, for a mixture of experts, every routing decision's
    distance from flipping (chosen minimum minus unchosen maximum router logit, from a hook on each router).
    transformers computes some steps in float32 whatever the model's dtype (RMSNorm's variance in most families,
    the RoPE frequencies), so this is float64 matmuls, attention and softmax around float32 norms and angles."""
    import torch

    model = load_checkpoint(directory, dtype=torch.float64)
    gaps = []

    def on_route(module, inputs, output):
        logits = output[0].detach().double().reshape(-1, output[0].shape[-1])
        ordered = torch.sort(logits, dim=-1, descending=True).values
        k = module.top_k
        gaps.extend((ordered[:, k - 1] - ordered[:, k]).tolist())

    for name, module in model.named_modules():
        if name.endswith(".gate") and hasattr(module, "top_k"):
            module.register_forward_hook(on_route)
    logits = forward(model, sequence, np.float64)
    greedy_ids, _ = greedy(model, PROMPT_IDS, GREEDY_STEPS)
    return logits, greedy_ids, gaps


def feature_evidence(directory, spec, sequence, logits):
    """Spec.must_matter: each override, reloaded on the same weights, must move the logits."""
    evidence = {}
    for key, value in spec.must_matter.items():
        changed = forward(load_checkpoint(directory, **{key: value}), sequence)
        difference = llama_ref.max_relative_error(changed, logits)
        if difference < FEATURE_BITES:
            raise AssertionError(f"{spec.name}: {key} = {value} changes the logits by only {difference:.2e}")
        evidence[f"{key}={json.dumps(value)}"] = significant(difference)
    return evidence


def gaps_along(logits, first_row, ids):
    """top1 - top2 of the rows that chose ids (row first_row + i chose ids[i]); checks the argmax."""
    gaps = []
    for i, token in enumerate(ids):
        row = logits[first_row + i].astype(np.float64)
        if int(np.argmax(row)) != token:
            raise AssertionError(f"teacher-forced argmax at row {first_row + i} is {int(np.argmax(row))}, greedy chose {token}")
        gaps.append(llama_ref.top1_top2_gap(row))
    return np.array(gaps)


def significant(value, digits=4):
    return float(f"{value:.{digits - 1}e}")


def run_checkpoint(directory):
    """Greedy + teacher-forced logits of a saved checkpoint, and the measurements of the gap."""
    model = load_checkpoint(directory)
    greedy_ids, greedy_rows = greedy(model, PROMPT_IDS, GREEDY_STEPS)
    sequence = PROMPT_IDS + greedy_ids[:-1]
    logits = forward(model, sequence)
    gaps = gaps_along(logits, len(PROMPT_IDS) - 1, greedy_ids)
    max_abs = float(np.max(np.abs(logits)))
    cache_vs_full = llama_ref.max_relative_error(greedy_rows, logits[len(PROMPT_IDS) - 1 :])
    return {
        "greedy_ids": greedy_ids,
        "logits": logits,
        "gaps": gaps,
        "max_abs_logit": max_abs,
        "relative_gap": float(np.min(gaps)) / max_abs,
        "cache_vs_full": cache_vs_full,
    }


def reference_logits(directory, sequence, **config_overrides):
    """The float64 llama_ref logits of a saved checkpoint (config.json as saved, F16 weights widened)."""
    hf = {**read_json(os.path.join(directory, "config.json")), **config_overrides}
    config = llama_ref.ModelConfig.from_hf(hf)
    tensors, _ = safetensors_io.load_file(os.path.join(directory, "model.safetensors"))
    model = llama_ref.LlamaModel(config, tensors, dtype=np.float64)
    return config, model, model.forward(sequence, model.new_cache())


# ----------------------------------------------------------------------------------
# The GGUF of llama3-scaling
# ----------------------------------------------------------------------------------


def gguf_check(directory, sequence, hf_logits, reference64):
    """Write model.f32.gguf, read it back with gguf-py, run the reference on it as stored. Returns the
    manifest section."""
    import gguf

    path = os.path.join(directory, "model.f32.gguf")
    types = export_gguf.convert(directory, path, "f32", model_name=os.path.basename(directory))
    hf = read_json(os.path.join(directory, "config.json"))
    reader = gguf.GGUFReader(path)
    names = [t.name for t in reader.tensors]
    if names[0] != export_gguf.ROPE_FREQS:
        raise AssertionError(f"{path}: first tensor is {names[0]}")
    freq_base = float(reader.fields["llama.rope.freq_base"].contents())
    if freq_base != LLAMA3_ROPE["rope_theta"]:
        raise AssertionError(f"{path}: llama.rope.freq_base {freq_base}")

    model_data = gguf_ref.read_gguf(path)
    rope_freqs = model_data.tensors.pop(export_gguf.ROPE_FREQS).values
    head_dim = hf["head_dim"]
    if rope_freqs.shape != (head_dim // 2,) or rope_freqs.dtype != np.float32:
        raise AssertionError(f"{path}: rope_freqs {rope_freqs.dtype}{rope_freqs.shape}")
    expected_freqs = export_gguf.llama3_rope_freqs(head_dim, LLAMA3_ROPE["rope_theta"], LLAMA3_ROPE)
    if not np.array_equal(rope_freqs, expected_freqs):
        raise AssertionError(f"{path}: rope_freqs {rope_freqs} != {expected_freqs}")
    divisors64 = np.array(llama_ref.ModelConfig.from_hf(hf).rope_divisors)
    freqs_vs_float64 = float(np.max(np.abs(rope_freqs - divisors64) / divisors64))
    if freqs_vs_float64 > 1e-6:
        raise AssertionError(f"{path}: rope_freqs differ from the float64 divisors by {freqs_vs_float64:.2e}")

    # Every other tensor: the checkpoint's values (F16 widened exactly), Q/K rows permuted by the converter.
    tensors, _ = safetensors_io.load_file(os.path.join(directory, "model.safetensors"))
    for name, values in export_gguf.gguf_tensors(hf, tensors):
        stored = model_data.tensors[name].values
        if model_data.tensors[name].type_name != "F32" or not np.array_equal(stored, values):
            raise AssertionError(f"{path}: {name} is not the checkpoint's tensor")

    config = dataclasses.replace(gguf_ref.config_from_gguf(model_data), rope_divisors=tuple(float(x) for x in rope_freqs))
    model = llama_ref.LlamaModel(config, gguf_ref.hf_named_tensors(model_data), rope_pairing="adjacent")
    gguf_logits = model.forward(sequence, model.new_cache())
    vs_reference = llama_ref.max_relative_error(gguf_logits, reference64)
    vs_transformers = llama_ref.max_relative_error(hf_logits, gguf_logits)
    if vs_transformers > REF_TOLERANCE or vs_reference > 1e-6:
        raise AssertionError(f"{path}: GGUF reference off by {vs_transformers:.2e} (transformers), {vs_reference:.2e} (HF layout)")
    return {
        "file": "model.f32.gguf",
        "written_by": "tools/reference/export_gguf.py convert (type f32), as llama.cpp's convert_hf_to_gguf.py LlamaModel",
        "tensor_types": "all F32; rope_freqs.weight first, then the checkpoint's tensors in sorted Hugging Face name order",
        "llama.rope.freq_base": freq_base,
        "rope_freqs": [float(x) for x in rope_freqs],
        "rope_freqs_vs_float64_divisors_max_rel": significant(freqs_vs_float64),
        "reference_on_gguf_vs_transformers_max_rel": significant(vs_transformers),
        "reference_on_gguf_vs_reference_on_safetensors_max_rel": significant(vs_reference),
        "note": "the float64 reference on the GGUF as stored (Q/K rows permuted, adjacent-pair RoPE, divisors read "
        "from rope_freqs.weight) reproduces the transformers logits in expected.safetensors; gguf_ref.reference_model "
        "itself does not know rope_freqs.weight (KeyError), so this check builds the model by hand",
        "tensor_count": len(types),
    }


# ----------------------------------------------------------------------------------
# One fixture
# ----------------------------------------------------------------------------------


def versions():
    import torch
    import transformers

    return {"transformers": transformers.__version__, "torch": torch.__version__.split("+")[0]}


def rope_regimes(divisors, factor):
    kept = [i for i, d in enumerate(divisors) if d == 1.0]
    divided = [i for i, d in enumerate(divisors) if d == factor]
    smoothed = [i for i in range(len(divisors)) if i not in kept and i not in divided]
    return kept, smoothed, divided


def respelling_evidence(directory, v4, sequence, run):
    """That transformers really reads the old keys (a respelled config that it ignored would pass the identity
    check whenever the value equals transformers' default, as rope_theta 10000 does): the same weights with
    rope_theta doubled, and with rope_scaling.factor halved, must give other logits."""
    import tempfile

    variants = {"rope_theta doubled": {**v4, "rope_theta": 2 * v4["rope_theta"]}}
    if "rope_scaling" in v4:
        variants["rope_scaling.factor halved"] = {**v4, "rope_scaling": {**v4["rope_scaling"], "factor": v4["rope_scaling"]["factor"] / 2}}
    evidence = {}
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copyfile(os.path.join(directory, "model.safetensors"), os.path.join(tmp, "model.safetensors"))
        for what, config in variants.items():
            write_json(os.path.join(tmp, "config.json"), config)
            difference = llama_ref.max_relative_error(forward(load_checkpoint(tmp), sequence), run["logits"])
            if difference < 1e-3:
                raise AssertionError(f"{directory}: {what} changes the logits by only {difference:.2e}: is the key read?")
            evidence[f"max_rel_change_with_{what.replace(' ', '_').replace('.', '_')}"] = significant(difference)
    return evidence


def make_runnable(spec, out_dir, seed, results):
    directory = os.path.join(out_dir, spec.name)
    manifest = {
        "name": spec.name,
        "description": spec.description,
        "model_type": spec.model_type,
        **versions(),
        "generator": GENERATOR,
        "expect": "runs",
    }
    if spec.same_weights_as:
        source = os.path.join(out_dir, spec.same_weights_as)
        if os.path.isdir(directory):
            shutil.rmtree(directory)
        os.makedirs(directory)
        shutil.copyfile(os.path.join(source, "model.safetensors"), os.path.join(directory, "model.safetensors"))
        shutil.copyfile(os.path.join(source, "config.json"), os.path.join(directory, "config.json"))
        source_manifest = read_json(os.path.join(source, "manifest.json"))
        seed = source_manifest["seed"]
        manifest["same_weights_as"] = spec.same_weights_as
    else:
        save_checkpoint(build_model(spec, seed), directory)
    manifest["seed"] = seed
    config_path = os.path.join(directory, "config.json")
    saved_config = read_json(config_path)

    run = run_checkpoint(directory)
    if spec.v4_spelling:
        v4 = to_v4_spelling(saved_config)
        write_json(config_path, v4)
        respelled = run_checkpoint(directory)
        if respelled["greedy_ids"] != run["greedy_ids"] or not np.array_equal(respelled["logits"], run["logits"]):
            raise AssertionError(f"{spec.name}: transformers 5.24 gives other logits for the transformers 4 spelling")
        manifest["spelling"] = {
            "config_json": "transformers 4: top-level rope_theta"
            + (", rope_scaling" if "rope_scaling" in v4 else "")
            + ", torch_dtype; no rope_parameters, no dtype",
            "checked": "transformers 5.24 loads this config.json and the same weights to bit-identical logits and greedy "
            "ids as the transformers 5 spelling it was saved with",
            "transformers_5_spelling": {k: saved_config[k] for k in ("rope_parameters", "dtype") if k in saved_config},
            "transformers_reads_it_as": load_checkpoint(directory).config.rope_parameters,
            "keys_are_read": respelling_evidence(directory, v4, PROMPT_IDS + run["greedy_ids"][:-1], run),
        }
    else:
        manifest["spelling"] = {"config_json": "as saved by transformers " + versions()["transformers"]}
    if spec.same_weights_as:
        expected, _ = safetensors_io.load_file(os.path.join(out_dir, spec.same_weights_as, "expected.safetensors"))
        if list(expected["greedy_ids"]) != run["greedy_ids"] or not np.array_equal(expected["logits"], run["logits"]):
            raise AssertionError(f"{spec.name}: outputs differ from {spec.same_weights_as}")

    if run["relative_gap"] < MIN_RELATIVE_GAP:
        raise AssertionError(f"{spec.name}: min gap / max|logit| = {run['relative_gap']:.2e} < {MIN_RELATIVE_GAP} (choose another seed)")
    sequence = PROMPT_IDS + run["greedy_ids"][:-1]
    logits64, config, routing_gaps = None, None, []
    if spec.reference == "llama_ref":
        config, ref_model, ref_logits = reference_logits(directory, sequence)
        ref_error = llama_ref.max_relative_error(run["logits"], ref_logits)
        ref_greedy, _ = llama_ref.greedy_decode(ref_model, PROMPT_IDS, GREEDY_STEPS)
        routing_gaps = ref_model.routing_gaps if config.num_experts else []
    else:
        logits64, ref_greedy, routing_gaps = transformers64(directory, sequence)
        ref_error = llama_ref.max_relative_error(run["logits"], logits64)
        # and the NumPy reference, which writes nothing here (see Spec.reference)
        _, numpy_model, numpy_logits = reference_logits(directory, sequence)
        numpy_error = llama_ref.max_relative_error(run["logits"], numpy_logits)
        numpy_greedy, _ = llama_ref.greedy_decode(numpy_model, PROMPT_IDS, GREEDY_STEPS)
        if numpy_error > REF_TOLERANCE or list(numpy_greedy) != run["greedy_ids"]:
            raise AssertionError(
                f"{spec.name}: llama_ref differs from transformers by {numpy_error:.2e} (greedy {list(numpy_greedy)})"
            )
    if ref_error > REF_TOLERANCE or list(ref_greedy) != run["greedy_ids"]:
        raise AssertionError(f"{spec.name}: {spec.reference} differs from transformers by {ref_error:.2e} (greedy {list(ref_greedy)})")

    routing = {}
    if routing_gaps:
        min_routing_gap = min(routing_gaps)
        if min_routing_gap < MIN_ROUTING_GAP:
            raise AssertionError(f"{spec.name}: a routing decision is {min_routing_gap:.2e} from flipping (choose another seed)")
        routing = {
            "routing": {
                **({"moe_layers": list(config.moe_layers)} if config else {}),
                "decisions": len(routing_gaps),
                "min_router_logit_gap": significant(min_routing_gap),
                "why": f"every expert choice of the float64 reference ({spec.reference}: the teacher-forced forward and its greedy run) is at "
                "least this far in router logit from flipping, beyond any float32 engine's rounding",
            }
        }

    gap_step = int(np.argmin(run["gaps"]))
    manifest.update(
        {
            "tie_word_embeddings": bool(saved_config.get("tie_word_embeddings", False)),
            "prompt_ids": PROMPT_IDS,
            "greedy_ids": run["greedy_ids"],
            "min_top1_top2_gap": significant(float(np.min(run["gaps"]))),
            "min_gap_step": gap_step,
            "max_abs_logit": significant(run["max_abs_logit"]),
            "min_gap_over_max_abs_logit": significant(run["relative_gap"]),
            **(
                {"llama_ref_vs_transformers_max_rel": significant(ref_error)}
                if spec.reference == "llama_ref"
                else {"transformers_float32_vs_float64_max_rel": significant(ref_error)}
            ),
            "transformers_kv_cache_vs_full_forward_max_rel": significant(run["cache_vs_full"]),
            **routing,
        }
    )
    if spec.must_matter:
        manifest["features_bite"] = {
            "max_rel_change_with": feature_evidence(directory, spec, sequence, run["logits"]),
            "why": "the same weights reloaded with each feature switched off (or changed) give logits this far from "
            f"the fixture's (at least {FEATURE_BITES} of max|logit|): the feature is on and matters at these shapes",
        }
    if config is not None and config.rope_divisors is not None:
        factor = LLAMA3_ROPE["factor"]
        kept, smoothed, divided = rope_regimes(config.rope_divisors, factor)
        if not (kept and smoothed and divided):
            raise AssertionError(f"{spec.name}: not all three llama3 regimes occur: {config.rope_divisors}")
        wavelengths = [2 * math.pi * config.rope_theta ** (2 * i / config.head_dim) for i in range(config.head_dim // 2)]
        L = LLAMA3_ROPE["original_max_position_embeddings"]
        manifest["rope"] = {
            "rope_type": "llama3",
            "rope_theta": config.rope_theta,
            "pair_wavelengths": [significant(w) for w in wavelengths],
            "high_freq_wavelen": L / LLAMA3_ROPE["high_freq_factor"],
            "low_freq_wavelen": L / LLAMA3_ROPE["low_freq_factor"],
            "kept_pairs": kept,
            "smoothed_pairs": smoothed,
            "divided_pairs": divided,
            "divisors_float64": list(config.rope_divisors),
            "why": "pair i turns at theta^(-2i/16) / divisor_i; wavelength < L/high_freq_factor = 8 keeps the pair, "
            "> L/low_freq_factor = 256 divides it by factor 8, in between it is smoothed (two pairs, so the smoothing "
            "formula is exercised twice). With Llama 3.1's own factors (low 1, high 4) head_dim 16 shows all three "
            "regimes only for 32.4 <= L <= 129, not past the 31 positions; L = 16 with factors 1/16 and 2 shows them "
            "and the positions 0..30 run well past L (llama3 scaling does not depend on the position itself, only "
            "each pair's regime depends on L)",
        }
    if config is not None and config.sliding_window is not None:
        unwindowed = load_checkpoint(directory, sliding_window=None)
        full = forward(unwindowed, sequence)
        w = config.sliding_window
        scale = run["max_abs_logit"]
        inside = float(np.max(np.abs(full[:w] - run["logits"][:w]))) / scale
        beyond = float(np.max(np.abs(full[w:] - run["logits"][w:]))) / scale
        if inside > 1e-6 or beyond < 1e-2:
            raise AssertionError(f"{spec.name}: window evidence inside {inside:.2e}, beyond {beyond:.2e}")
        _, _, ref_unwindowed = reference_logits(directory, sequence, model_type="llama")
        manifest["sliding_window"] = {
            "window": w,
            "semantics": f"position p attends to positions p-{w - 1}..p",
            "same_weights_without_window_max_rel_diff_positions_0_to_5": significant(inside) if inside else 0.0,
            "same_weights_without_window_max_rel_diff_positions_6_to_30": significant(beyond),
            "llama_ref_without_window_vs_transformers_without_window_max_rel": significant(
                llama_ref.max_relative_error(full, ref_unwindowed)
            ),
            "evidence": "transformers reloaded with sliding_window=None on the same weights gives the same logits where "
            "the window covers every earlier position and clearly different ones after: the window is applied",
        }
    if spec.name == "llama3-scaling":
        manifest["gguf"] = gguf_check(directory, sequence, run["logits"], ref_logits)
    manifest["files"] = {
        "config.json": "as written by transformers' save_pretrained" + (" then respelled (see spelling)" if spec.v4_spelling else ""),
        "model.safetensors": "F16 weights as written by save_pretrained",
        "expected.safetensors": {
            "prompt_ids": f"I32 [{len(PROMPT_IDS)}]",
            "greedy_ids": f"I32 [{GREEDY_STEPS}]: argmax through transformers' KV cache, EOS not applied",
            "logits": f"F32 [{len(sequence)}, {SHAPES['vocab_size']}]: transformers float32 eager, one forward over "
            "prompt_ids + greedy_ids[:-1]; row 11 + i chose greedy_ids[i]",
            **(
                {"logits64": f"F64 [{len(sequence)}, {SHAPES['vocab_size']}]: the same forward in transformers float64"}
                if logits64 is not None
                else {}
            ),
        },
    }
    safetensors_io.save_file(
        os.path.join(directory, "expected.safetensors"),
        {
            "prompt_ids": np.array(PROMPT_IDS, dtype=np.int32),
            "greedy_ids": np.array(run["greedy_ids"], dtype=np.int32),
            "logits": run["logits"].astype(np.float32),
            **({"logits64": logits64.astype(np.float64)} if logits64 is not None else {}),
        },
    )
    write_json(os.path.join(directory, "manifest.json"), manifest)
    results[spec.name] = manifest
    print(
        f"{spec.name}: seed {seed} gap {manifest['min_top1_top2_gap']} (rel {manifest['min_gap_over_max_abs_logit']}), "
        f"max|logit| {manifest['max_abs_logit']}, reference {significant(ref_error)}, "
        f"greedy {run['greedy_ids']}"
    )


def make_refused(spec, out_dir, seed, results):
    directory = os.path.join(out_dir, spec.name)
    save_checkpoint(build_model(spec, seed), directory)
    load_checkpoint(directory)  # transformers itself loads it
    manifest = {
        "name": spec.name,
        "description": spec.description + " (tiny random checkpoint, F16, config.json as saved by transformers)",
        "model_type": spec.model_type,
        **versions(),
        "generator": GENERATOR,
        "expect": "refused",
        "why": spec.refused_because,
        "seed": seed,
        "architectures": read_json(os.path.join(directory, "config.json")).get("architectures"),
    }
    write_json(os.path.join(directory, "manifest.json"), manifest)
    results[spec.name] = manifest
    print(f"{spec.name}: refused-fixture written")


def search_seeds(spec, count):
    """Print the relative min gap of seeds 0..count-1 (to choose Spec.seed: the chosen ones have a relative gap
    >= MIN_RELATIVE_GAP and at least 13 distinct greedy ids; llama-v4-spelling and mistral are the same network
    for the same seed, so they use different seeds)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(count):
            directory = os.path.join(tmp, "x")
            save_checkpoint(build_model(spec, seed), directory)
            run = run_checkpoint(directory)
            print(f"{spec.name} seed {seed}: distinct {len(set(run['greedy_ids']))} rel gap {run['relative_gap']:.3e} gap {np.min(run['gaps']):.4f} max {run['max_abs_logit']:.2f} ids {run['greedy_ids']}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.path.join(REPO_ROOT, "fixtures", "transformers"))
    parser.add_argument("--only", nargs="*", help="names of the checkpoints to write (default: all)")
    parser.add_argument("--search-seeds", type=int, default=0, help="print the gap of seeds 0..N-1 instead of writing")
    parser.add_argument("--allow-other-versions", action="store_true")
    args = parser.parse_args(argv)

    import torch
    import transformers

    torch.set_num_threads(1)
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    found = versions()
    if found != PINNED and not args.allow_other_versions:
        raise SystemExit(f"pinned {PINNED}, found {found} (--allow-other-versions to go on)")
    specs = [s for s in SPECS if not args.only or s.name in args.only]
    if args.search_seeds:
        for spec in specs:
            search_seeds(spec, args.search_seeds)
        return
    os.makedirs(args.out, exist_ok=True)
    results = {}
    for spec in specs:
        if spec.expect == "runs":
            make_runnable(spec, args.out, spec.seed, results)
        else:
            make_refused(spec, args.out, spec.seed, results)


if __name__ == "__main__":
    main()
