"""Generate the golden model fixtures (fixtures/<name>/) that the C++ tests compare against.

    python3 tools/reference/make_fixtures.py [--out DIR]      # default DIR: <repo>/fixtures

For each fixture this writes config.json, model.safetensors (random F32 weights under
Hugging Face names), golden.safetensors (the float64 reference outputs) and manifest.json
(what each golden tensor means and the threshold a float32 implementation must meet),
plus a short README.md. The format is described in docs/fixtures-golden-format.md.

Everything is deterministic: the weights come from numpy.random.default_rng(seed), are
drawn in float64 with standard_normal and then rounded to float32, and the float64
forward pass runs on those float32 values, so the C++ sees exactly the weights the
reference used.

Thresholds are fixed numbers in this file, not fitted to the data. The generator then
runs the very same forward pass in float32 (twice: NumPy/BLAS accumulation order and a
naive left-to-right accumulation order) and refuses to write fixtures unless every
float32 error is at least REQUIRED_MARGIN times below its threshold. The measured
values are stored in the manifest under observed_* names; they depend on the BLAS
library, so the reproduction check ignores them.
"""

import argparse
import json
import os
import sys
from dataclasses import dataclass

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import llama_ref  # noqa: E402
import safetensors_io  # noqa: E402

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GENERATOR = "tools/reference/make_fixtures.py"
GREEDY_STEPS = 16

# Tolerance of every float golden tensor, metric max|plumb - ref| / max|ref|.
FLOAT_THRESHOLD = 1e-5
# A float32 run of this same forward pass must be at least this many times below the threshold,
# which leaves room for a float32 implementation that rounds differently (other summation order,
# FMA or not, its own exp/sin/cos) but is still correct.
REQUIRED_MARGIN = 10.0
# The greedy choice must not be close to a tie: smallest top-1 minus top-2 logit over all steps.
MIN_GREEDY_GAP = 1e-3
# The KV-cache decode path must reproduce a full re-prefill to float64 rounding level.
DECODE_VS_PREFILL_TOLERANCE = 1e-12



def float_why(config, longest_context, threshold=FLOAT_THRESHOLD):
    """The threshold argument for the float tensors of one fixture, in one sentence."""
    longest_dot = max(config.hidden_size, config.intermediate_size, config.num_heads * config.head_dim, longest_context)
    return (
        f"float32 unit roundoff u = 2^-24 ~ 6e-8; the longest dot product here has {longest_dot} terms "
        f"(worst-case bound {longest_dot} u ~ {longest_dot * 2.0**-24:.0e}, typical sqrt({longest_dot}) u ~ "
        f"{np.sqrt(longest_dot) * 2.0**-24:.0e}) and errors pass through {config.num_layers} layers, RMSNorm, softmax "
        f"and RoPE; this same forward run in float32, with NumPy's BLAS accumulation order (observed_float32) and "
        f"with naive left-to-right accumulation (observed_float32_sequential), must stay >= {REQUIRED_MARGIN:g}x "
        f"below {threshold:g}, leaving that margin for a different but legitimate float32 implementation; "
        f"the bugs this must catch (RoPE pairing or base, a missing bias, the GQA head mapping, the causal mask, "
        f"the attention scale) move these tensors by 2e-2 or more"
    )


EXACT_WHY = "token ids are integers: the prompt is given, and the greedy choices are robust (see greedy.min_top1_top2_gap)"


@dataclass(frozen=True)
class FixtureSpec:
    """Everything that defines one fixture; changing any field changes the files."""

    name: str
    seed: int
    config: dict
    prompt_ids: tuple
    bias_std: float | None  # None: no q/k/v biases
    embedding_std: float  # spread of the token embeddings (and, when tied, of the logits)
    description: str


FIXTURES = [
    FixtureSpec(
        name="tiny-llama",
        seed=42,
        config={
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "attention_bias": False,
            "bos_token_id": 1,
            "eos_token_id": 2,
            "head_dim": 16,
            "hidden_act": "silu",
            "hidden_size": 64,
            "intermediate_size": 160,
            "max_position_embeddings": 128,
            "num_attention_heads": 4,
            "num_hidden_layers": 2,
            "num_key_value_heads": 2,
            "rms_norm_eps": 1e-05,
            "rope_theta": 10000.0,
            "tie_word_embeddings": False,
            "torch_dtype": "float32",
            "vocab_size": 320,
        },
        prompt_ids=(1, 17, 245, 88, 3, 190, 56, 301, 12, 77, 150),
        bias_std=None,
        embedding_std=1.0,
        description="Llama layout: GQA 4 query heads over 2 KV heads, explicit head_dim, untied lm_head, no biases",
    ),
    FixtureSpec(
        name="tiny-qwen2",
        seed=7,
        config={
            "architectures": ["Qwen2ForCausalLM"],
            "model_type": "qwen2",
            "bos_token_id": 1,
            "eos_token_id": 2,
            "hidden_act": "silu",
            "hidden_size": 64,
            "intermediate_size": 96,
            "max_position_embeddings": 64,
            "num_attention_heads": 4,
            "num_hidden_layers": 2,
            "num_key_value_heads": 1,
            "rms_norm_eps": 1e-06,
            "rope_theta": 1000000.0,
            "tie_word_embeddings": True,
            "torch_dtype": "float32",
            "vocab_size": 256,
        },
        prompt_ids=(1, 40, 7, 199, 63, 128, 5, 250, 91, 33, 176, 14, 220),
        bias_std=0.2,
        # Small, as in real tied models: with tied embeddings the logit of the current token
        # contains |e_t|^2, and large embeddings make every greedy step repeat the last token.
        embedding_std=0.1,
        description="Qwen2 layout: 4 query heads sharing 1 KV head, head_dim derived (16), q/k/v biases, "
        "tied embeddings (no lm_head.weight)",
    ),
    FixtureSpec(
        name="tiny-qwen3moe",
        seed=39,
        config={
            "architectures": ["Qwen3MoeForCausalLM"],
            "model_type": "qwen3_moe",
            "attention_bias": False,
            "bos_token_id": 1,
            "decoder_sparse_step": 1,
            "eos_token_id": 2,
            "head_dim": 16,
            "hidden_act": "silu",
            "hidden_size": 64,
            "intermediate_size": 96,
            "max_position_embeddings": 64,
            "mlp_only_layers": [],
            "moe_intermediate_size": 32,
            "norm_topk_prob": True,
            "num_attention_heads": 4,
            "num_experts": 8,
            "num_experts_per_tok": 2,
            "num_hidden_layers": 2,
            "num_key_value_heads": 2,
            "rms_norm_eps": 1e-06,
            "rope_theta": 1000000.0,
            "tie_word_embeddings": False,
            "torch_dtype": "float32",
            "vocab_size": 256,
        },
        prompt_ids=(1, 93, 12, 240, 57, 181, 8, 126, 71, 203, 35, 150),
        bias_std=None,
        embedding_std=1.0,
        description="Qwen3-MoE layout: every layer 8 SwiGLU experts of width 32, 2 per token (softmax, "
        "renormalized), QK-norm, 4 query heads over 2 KV heads, untied lm_head",
    ),
]

# The router's choice must not be close to flipping: the smallest gap, over every token of every MoE
# layer in the prefill and the greedy run, between the lowest chosen and the highest unchosen router logit.
# A float32 engine moves a router logit by ~1e-6 here; 1e-3 leaves it three orders of magnitude.
MIN_ROUTING_GAP = 1e-3


# ----------------------------------------------------------------------------------
# Weights
# ----------------------------------------------------------------------------------


def make_weights(spec):
    """Random F32 weights under Hugging Face names, drawn in a fixed order from one generator.

    Scales keep activations O(1): Linear weights ~ N(0, 1/fan_in) so a projection of an O(1)
    vector stays O(1); norm weights ~ 1 + 0.1 N(0, 1) so they are near 1 but not exactly 1
    (a missing multiply must show); biases, when present, ~ bias_std N(0, 1) so that leaving
    them out is a large error.
    """
    c = llama_ref.ModelConfig.from_hf(spec.config)
    rng = np.random.default_rng(spec.seed)
    d, ffn, hd = c.hidden_size, c.intermediate_size, c.head_dim
    q_out, kv_out = c.num_heads * hd, c.num_kv_heads * hd

    def normal(shape, std):
        return (std * rng.standard_normal(shape)).astype(np.float32)

    def linear(out_features, in_features):
        return normal((out_features, in_features), 1.0 / np.sqrt(in_features))

    def norm_weight():
        return (1.0 + 0.1 * rng.standard_normal(d)).astype(np.float32)

    w = {"model.embed_tokens.weight": normal((c.vocab_size, d), spec.embedding_std)}
    for layer in range(c.num_layers):
        p = f"model.layers.{layer}."
        w[p + "input_layernorm.weight"] = norm_weight()
        w[p + "self_attn.q_proj.weight"] = linear(q_out, d)
        w[p + "self_attn.k_proj.weight"] = linear(kv_out, d)
        w[p + "self_attn.v_proj.weight"] = linear(kv_out, d)
        if spec.bias_std is not None:
            w[p + "self_attn.q_proj.bias"] = normal(q_out, spec.bias_std)
            w[p + "self_attn.k_proj.bias"] = normal(kv_out, spec.bias_std)
            w[p + "self_attn.v_proj.bias"] = normal(kv_out, spec.bias_std)
        w[p + "self_attn.o_proj.weight"] = linear(d, q_out)
        if c.qk_norm:
            w[p + "self_attn.q_norm.weight"] = (1.0 + 0.1 * rng.standard_normal(hd)).astype(np.float32)
            w[p + "self_attn.k_norm.weight"] = (1.0 + 0.1 * rng.standard_normal(hd)).astype(np.float32)
        w[p + "post_attention_layernorm.weight"] = norm_weight()
        if layer in c.moe_layers:
            w[p + "mlp.gate.weight"] = linear(c.num_experts, d)
            f = c.moe_intermediate_size
            for e in range(c.num_experts):
                w[p + f"mlp.experts.{e}.gate_proj.weight"] = linear(f, d)
                w[p + f"mlp.experts.{e}.up_proj.weight"] = linear(f, d)
                w[p + f"mlp.experts.{e}.down_proj.weight"] = linear(d, f)
            continue
        w[p + "mlp.gate_proj.weight"] = linear(ffn, d)
        w[p + "mlp.up_proj.weight"] = linear(ffn, d)
        w[p + "mlp.down_proj.weight"] = linear(d, ffn)
    w["model.norm.weight"] = norm_weight()
    if not c.tie_word_embeddings:
        w["lm_head.weight"] = linear(c.vocab_size, d)
    return w


# ----------------------------------------------------------------------------------
# Golden outputs and their tolerances
# ----------------------------------------------------------------------------------


def tensor_descriptions(config):
    """(name, meaning) of every golden tensor, in manifest order."""
    entries = [
        ("prompt_ids", "the fixed prompt"),
        ("embedding.output", "embedding rows of the prompt (input of layer 0)"),
    ]
    for layer in range(config.num_layers):
        entries.append(
            (f"layer.{layer}.output", f"residual stream after layer {layer} (attention + MLP blocks, before the final norm)")
        )
    entries += [
        ("final_norm.output", "after the final RMSNorm"),
        ("logits", "logits at every prompt position"),
    ]
    for layer in range(config.num_layers):
        entries.append((f"kv.layer.{layer}.k", f"layer {layer} keys in the cache after the prompt's prefill (after RoPE)"))
        entries.append((f"kv.layer.{layer}.v", f"layer {layer} values in the cache after the prompt's prefill"))
    entries += [
        ("greedy.ids", "greedy continuation of the prompt, EOS not applied (exactly G tokens)"),
        (
            "greedy.logits",
            "row i: the logits whose argmax is greedy.ids[i] (row 0 = logits of the last prompt position; "
            "row i = logits after feeding greedy.ids[i-1] at position P+i-1)",
        ),
    ]
    return entries


def run_reference(config, weights, prompt_ids, dtype, sequential_dots=False):
    """All golden tensors computed in one precision: the prefill trace plus the greedy run."""
    model = llama_ref.LlamaModel(config, weights, dtype=dtype, sequential_dots=sequential_dots)
    outputs, _ = llama_ref.prefill(model, prompt_ids)
    greedy_ids, greedy_logits = llama_ref.greedy_decode(model, prompt_ids, GREEDY_STEPS)
    outputs["prompt_ids"] = np.array(prompt_ids, dtype=np.int32)
    outputs["greedy.ids"] = greedy_ids
    outputs["greedy.logits"] = greedy_logits
    return model, outputs


def significant(value, digits=6):
    """Round to a few significant digits so that a manifest number does not depend on the
    last bits of the BLAS library's float64 result."""
    return float(f"{value:.{digits - 1}e}")


def build_fixture(spec):
    """Compute one fixture. Returns (config, weights, golden tensors, manifest); raises if any of
    the generator's own guarantees (robust greedy, threshold margin, cache consistency) fails."""
    config = llama_ref.ModelConfig.from_hf(spec.config)
    prompt_ids = list(spec.prompt_ids)
    if spec.config["eos_token_id"] in prompt_ids or not all(0 <= t < config.vocab_size for t in prompt_ids):
        raise AssertionError(f"{spec.name}: prompt must hold valid non-EOS token ids")
    weights = make_weights(spec)

    model64, golden = run_reference(config, weights, prompt_ids, np.float64)
    _, float32_blas = run_reference(config, weights, prompt_ids, np.float32)
    _, float32_sequential = run_reference(config, weights, prompt_ids, np.float32, sequential_dots=True)

    # Every routing decision of the float64 run (prefill and greedy decode) is far from a flip, and the
    # float32 runs chose the same experts (else their errors below would be large).
    routing = {}
    if config.num_experts:
        min_routing_gap = min(model64.routing_gaps)
        if min_routing_gap < MIN_ROUTING_GAP:
            raise AssertionError(f"{spec.name}: a routing decision is {min_routing_gap:.3e} from flipping")
        routing = {"routing": {"decisions": len(model64.routing_gaps), "min_router_logit_gap": significant(min_routing_gap)}}

    # The greedy logits come from the cache; they must agree with a plain re-prefill.
    llama_ref.check_decode_matches_reprefill(
        model64, prompt_ids, golden["greedy.ids"], golden["greedy.logits"], DECODE_VS_PREFILL_TOLERANCE
    )
    # The prefill's last row and greedy row 0 are the same computation.
    assert np.array_equal(golden["logits"][-1], golden["greedy.logits"][0])

    # A float32 implementation that meets the logits threshold moves each logit by at most
    # FLOAT_THRESHOLD * max|logit|, so it can only flip a greedy choice whose gap is below twice that.
    # Demand the gap be far above both that and an absolute floor.
    min_gap = min(llama_ref.top1_top2_gap(row) for row in golden["greedy.logits"])
    largest_allowed_shift = FLOAT_THRESHOLD * float(np.max(np.abs(golden["greedy.logits"])))
    if min_gap < MIN_GREEDY_GAP or min_gap < 20 * largest_allowed_shift:
        raise AssertionError(
            f"{spec.name}: greedy top-1/top-2 gap {min_gap:.3e} is too small "
            f"(floor {MIN_GREEDY_GAP}, allowed logit shift {largest_allowed_shift:.1e})"
        )

    why = float_why(config, longest_context=len(prompt_ids) + GREEDY_STEPS - 1)
    tensors = []
    for name, meaning in tensor_descriptions(config):
        reference = golden[name]
        entry = {
            "name": name,
            "file": "golden.safetensors",
            "shape": list(reference.shape),
            "dtype": "I32" if reference.dtype == np.int32 else "F64",
            "what": meaning,
        }
        if reference.dtype == np.int32:
            for label, run in (("float32", float32_blas), ("float32_sequential", float32_sequential)):
                if not np.array_equal(run[name], reference):
                    raise AssertionError(f"{spec.name}: {label} run disagrees on {name}: {run[name]} vs {reference}")
            entry["check"] = {"metric": "exact", "threshold": 0, "why": EXACT_WHY}
            entry["observed_float32"] = "identical"
        else:
            observed = llama_ref.max_relative_error(float32_blas[name], reference)
            observed_sequential = llama_ref.max_relative_error(float32_sequential[name], reference)
            worst = max(observed, observed_sequential)
            if worst * REQUIRED_MARGIN > FLOAT_THRESHOLD:
                raise AssertionError(
                    f"{spec.name}: {name}: float32 error {worst:.3e} leaves less than {REQUIRED_MARGIN}x "
                    f"margin under {FLOAT_THRESHOLD}"
                )
            entry["check"] = {"metric": "max_abs_err/max_abs_ref", "threshold": FLOAT_THRESHOLD, "why": why}
            entry["observed_float32"] = significant(observed, 3)
            entry["observed_float32_sequential"] = significant(observed_sequential, 3)
        tensors.append(entry)

    manifest = {
        "format": "plumb-golden",
        "version": 1,
        "name": spec.name,
        "description": spec.description,
        "generator": GENERATOR,
        "seed": spec.seed,
        "config": "config.json",
        "weights": "model.safetensors",
        "golden": "golden.safetensors",
        "prompt_ids": prompt_ids,
        "greedy": {
            "steps": GREEDY_STEPS,
            "stop_on_eos": False,
            "min_top1_top2_gap": significant(min_gap),
            "ids": [int(t) for t in golden["greedy.ids"]],
        },
        **routing,
        "tensors": tensors,
    }
    return spec.config, weights, golden, manifest


def readme_text(spec):
    return (
        f"# {spec.name}\n\n"
        f"A tiny random-weight model ({spec.description}) with float64 reference outputs, used by the C++ tests.\n"
        "Generated, do not edit: every file here is written by `tools/reference/make_fixtures.py` "
        "(format: `docs/fixtures-golden-format.md`).\n"
        "Regenerate with `python3 tools/reference/make_fixtures.py` (packages: `tools/reference/requirements.txt`);\n"
        "check with `python3 tools/reference/check_fixtures.py --fixtures fixtures --scratch /tmp/plumb-fixtures-check`.\n"
    )


def format_json(value, indent=0):
    """JSON text with one key per line, but lists of plain values (ids, shapes) kept on one line."""
    pad, inner = "  " * indent, "  " * (indent + 1)
    if isinstance(value, dict) and value:
        items = [f"{inner}{json.dumps(key)}: {format_json(item, indent + 1)}" for key, item in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(value, list) and any(isinstance(item, (dict, list)) for item in value):
        return "[\n" + ",\n".join(inner + format_json(item, indent + 1) for item in value) + "\n" + pad + "]"
    return json.dumps(value, separators=(", ", ": "))


def write_json(path, value):
    with open(path, "w", encoding="utf-8") as f:
        f.write(format_json(value) + "\n")


def write_fixture(spec, out_dir):
    """Build one fixture and write its files into out_dir/<name>/. Returns the manifest."""
    config, weights, golden, manifest = build_fixture(spec)
    directory = os.path.join(out_dir, spec.name)
    os.makedirs(directory, exist_ok=True)
    write_json(os.path.join(directory, "config.json"), dict(sorted(config.items())))
    safetensors_io.save_file(os.path.join(directory, "model.safetensors"), weights, metadata={"format": "pt"})
    golden_for_file = {
        name: (array if array.dtype == np.int32 else np.asarray(array, dtype=np.float64)) for name, array in golden.items()
    }
    safetensors_io.save_file(
        os.path.join(directory, "golden.safetensors"),
        golden_for_file,
        metadata={"format": "plumb-golden", "fixture": spec.name, "generator": GENERATOR},
    )
    write_json(os.path.join(directory, "manifest.json"), manifest)
    with open(os.path.join(directory, "README.md"), "w", encoding="utf-8") as f:
        f.write(readme_text(spec))
    return manifest


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.path.join(REPO_ROOT, "fixtures"), help="output folder (default: repo fixtures/)")
    args = parser.parse_args(argv)
    for spec in FIXTURES:
        manifest = write_fixture(spec, args.out)
        floats = [t for t in manifest["tensors"] if t["dtype"] == "F64"]
        worst = max(max(t["observed_float32"], t["observed_float32_sequential"]) for t in floats)
        print(
            f"{spec.name}: wrote {os.path.join(args.out, spec.name)}; greedy ids {manifest['greedy']['ids']}; "
            f"min top1-top2 gap {manifest['greedy']['min_top1_top2_gap']}; worst float32 error {worst:.2e} "
            f"(threshold {FLOAT_THRESHOLD:g})"
        )


if __name__ == "__main__":
    main()
