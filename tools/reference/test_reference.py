"""Sanity checks of the reference itself: the oracle has to be right before the C++ is judged by it.

Each test pins down one property that follows from the math alone (RoPE at position 0 is the
identity, attention over a single position returns its value, ...), so a mistake in
llama_ref.py or safetensors_io.py shows up here rather than as a "bug" in the C++.

    python3 tools/reference/test_reference.py          # also run by check_fixtures.py
"""

import json
import math
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import llama_ref  # noqa: E402
import safetensors_io  # noqa: E402

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def small_config(num_kv_heads=2, head_dim=None):
    hf = {
        "vocab_size": 40,
        "hidden_size": 32,
        "intermediate_size": 48,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": num_kv_heads,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
    }
    if head_dim is not None:
        hf["head_dim"] = head_dim
    return llama_ref.ModelConfig.from_hf(hf)


def random_weights(config, seed, with_bias=False):
    """Arbitrary weights with Hugging Face names (scale 1/sqrt(fan_in) to keep values O(1))."""
    rng = np.random.default_rng(seed)
    d, hd = config.hidden_size, config.head_dim
    q_out, kv_out, ffn = config.num_heads * hd, config.num_kv_heads * hd, config.intermediate_size

    def linear(out_features, in_features):
        return rng.standard_normal((out_features, in_features)) / np.sqrt(in_features)

    w = {"model.embed_tokens.weight": rng.standard_normal((config.vocab_size, d))}
    for layer in range(config.num_layers):
        p = f"model.layers.{layer}."
        w[p + "input_layernorm.weight"] = 1 + 0.1 * rng.standard_normal(d)
        w[p + "self_attn.q_proj.weight"] = linear(q_out, d)
        w[p + "self_attn.k_proj.weight"] = linear(kv_out, d)
        w[p + "self_attn.v_proj.weight"] = linear(kv_out, d)
        w[p + "self_attn.o_proj.weight"] = linear(d, q_out)
        if with_bias:
            w[p + "self_attn.q_proj.bias"] = 0.3 * rng.standard_normal(q_out)
            w[p + "self_attn.k_proj.bias"] = 0.3 * rng.standard_normal(kv_out)
            w[p + "self_attn.v_proj.bias"] = 0.3 * rng.standard_normal(kv_out)
        w[p + "post_attention_layernorm.weight"] = 1 + 0.1 * rng.standard_normal(d)
        w[p + "mlp.gate_proj.weight"] = linear(ffn, d)
        w[p + "mlp.up_proj.weight"] = linear(ffn, d)
        w[p + "mlp.down_proj.weight"] = linear(d, ffn)
    w["model.norm.weight"] = 1 + 0.1 * rng.standard_normal(d)
    w["lm_head.weight"] = linear(config.vocab_size, d)
    return w


# ----------------------------------------------------------------------------------
# Building blocks
# ----------------------------------------------------------------------------------


def test_rope_is_identity_at_position_zero():
    x = np.random.default_rng(0).standard_normal((3, 1, 16))
    cos, sin = llama_ref.rope_cos_sin([0], 16, 10000.0, np.float64)
    assert np.array_equal(llama_ref.apply_rope(x, cos, sin), x)


def test_rope_pairs_i_with_i_plus_half():
    """Hand-computed rotate-half example, head_dim 4 at position 1: pair (0, 2) turns by
    1 * theta^0 = 1 radian, pair (1, 3) by 1 * theta^(-1/2) radians."""
    theta = 100.0
    x = np.array([1.0, 2.0, 3.0, 4.0])
    cos, sin = llama_ref.rope_cos_sin([1], 4, theta, np.float64)
    a0, a1 = 1.0, theta**-0.5
    expected = np.array(
        [
            1 * np.cos(a0) - 3 * np.sin(a0),
            2 * np.cos(a1) - 4 * np.sin(a1),
            3 * np.cos(a0) + 1 * np.sin(a0),
            4 * np.cos(a1) + 2 * np.sin(a1),
        ]
    )
    assert np.allclose(llama_ref.apply_rope(x[None, :], cos, sin)[0], expected, rtol=0, atol=1e-15)


def test_rope_scores_depend_only_on_relative_position():
    """The point of RoPE: q at position m dotted with k at position n depends on m - n only."""
    rng = np.random.default_rng(1)
    q, k = rng.standard_normal(16), rng.standard_normal(16)

    def score(m, n):
        cos, sin = llama_ref.rope_cos_sin([m, n], 16, 10000.0, np.float64)
        rq = llama_ref.apply_rope(q[None, :], cos[:1], sin[:1])[0]
        rk = llama_ref.apply_rope(k[None, :], cos[1:], sin[1:])[0]
        return rq @ rk

    assert abs(score(7, 3) - score(24, 20)) < 1e-12
    assert abs(score(7, 3) - score(3, 7)) > 1e-6  # and it is not symmetric in m, n


def test_adjacent_rope_pairs_neighbours():
    """Hand-computed adjacent-pair example, head_dim 4 at position 1: pair (0, 1) turns by
    1 radian, pair (2, 3) by theta^(-1/2) radians."""
    theta = 100.0
    x = np.array([1.0, 2.0, 3.0, 4.0])
    cos, sin = llama_ref.rope_cos_sin([1], 4, theta, np.float64)
    a0, a1 = 1.0, theta**-0.5
    expected = np.array(
        [
            1 * np.cos(a0) - 2 * np.sin(a0),
            2 * np.cos(a0) + 1 * np.sin(a0),
            3 * np.cos(a1) - 4 * np.sin(a1),
            4 * np.cos(a1) + 3 * np.sin(a1),
        ]
    )
    assert np.allclose(llama_ref.apply_rope_adjacent(x[None, :], cos, sin)[0], expected, rtol=0, atol=1e-15)


def test_attention_over_one_position_returns_its_value():
    """softmax over a single score is 1, so each query head gets its kv head's value,
    with query head h reading kv head h // (n_heads / n_kv_heads)."""
    rng = np.random.default_rng(2)
    q = rng.standard_normal((6, 1, 8))
    k = rng.standard_normal((2, 1, 8))
    v = rng.standard_normal((2, 1, 8))
    out = llama_ref.causal_attention(q, k, v, [0], [0], llama_ref.matmul_blas)
    for head in range(6):
        assert np.allclose(out[head], v[head // 3], rtol=0, atol=1e-15)


def test_attention_is_causal():
    """A query never sees keys at later positions: changing them changes nothing."""
    rng = np.random.default_rng(3)
    q = rng.standard_normal((2, 4, 8))
    k = rng.standard_normal((1, 4, 8))
    v = rng.standard_normal((1, 4, 8))
    out = llama_ref.causal_attention(q, k, v, np.arange(4), np.arange(4), llama_ref.matmul_blas)
    k2, v2 = k.copy(), v.copy()
    k2[:, 3] += 5.0
    v2[:, 3] -= 5.0
    out2 = llama_ref.causal_attention(q, k2, v2, np.arange(4), np.arange(4), llama_ref.matmul_blas)
    assert np.allclose(out[:, :3], out2[:, :3], rtol=0, atol=1e-14)
    assert not np.allclose(out[:, 3], out2[:, 3])


def test_rms_norm_of_constant_vector():
    """For x = c (every element), mean(x^2) = c^2, so the result is c / sqrt(c^2 + eps) * w."""
    w = np.linspace(0.5, 1.5, 8)
    for c in (-3.0, 0.25, 2.0):
        out = llama_ref.rms_norm(np.full(8, c), w, 1e-5)
        assert np.allclose(out, c / np.sqrt(c * c + 1e-5) * w, rtol=1e-15, atol=0)
    assert np.array_equal(llama_ref.rms_norm(np.zeros(8), w, 1e-5), np.zeros(8))


def test_softmax_and_silu_values():
    p = llama_ref.softmax(np.array([[1.0, 2.0, -np.inf, 0.5]]))
    assert abs(p.sum() - 1) < 1e-15 and p[0, 2] == 0.0 and np.argmax(p) == 1
    assert llama_ref.silu(np.array(0.0)) == 0.0
    assert abs(llama_ref.silu(np.array(1.0)) - 1 / (1 + np.exp(-1.0))) < 1e-16
    assert abs(llama_ref.silu(np.array(30.0)) - 30.0) < 1e-10


def test_sequential_matmul_is_a_matmul():
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((3, 5, 7)), rng.standard_normal((3, 7, 2))
    assert np.allclose(llama_ref.matmul_sequential(a, b), a @ b, rtol=0, atol=1e-13)


def test_head_dim_from_config_or_derived():
    assert small_config().head_dim == 8  # 32 / 4
    assert small_config(head_dim=16).head_dim == 16  # explicit value wins, even if != hidden / heads


# ----------------------------------------------------------------------------------
# Whole model
# ----------------------------------------------------------------------------------


def test_gqa_equals_mha_with_duplicated_kv_heads():
    """GQA with 2 kv heads for 4 query heads is exactly MHA whose kv heads 0,1 are copies of kv
    head 0 and heads 2,3 copies of kv head 1 (mapping h // 2, not h % 2)."""
    gqa_config = small_config(num_kv_heads=2)
    mha_config = small_config(num_kv_heads=4)
    weights = random_weights(gqa_config, seed=5, with_bias=True)
    mha_weights = dict(weights)
    hd = gqa_config.head_dim
    for layer in range(gqa_config.num_layers):
        for kind in ("k_proj", "v_proj"):
            for suffix in ("weight", "bias"):
                name = f"model.layers.{layer}.self_attn.{kind}.{suffix}"
                per_head = weights[name].reshape((2, hd) + weights[name].shape[1:])
                mha_weights[name] = np.repeat(per_head, 2, axis=0).reshape((4 * hd,) + weights[name].shape[1:])
    ids = [3, 14, 15, 9, 2, 6]
    gqa = llama_ref.LlamaModel(gqa_config, weights).forward(ids, llama_ref.KVCache(gqa_config, np.float64))
    mha = llama_ref.LlamaModel(mha_config, mha_weights).forward(ids, llama_ref.KVCache(mha_config, np.float64))
    assert llama_ref.max_relative_error(gqa, mha) < 1e-13


def test_chunked_prefill_and_decode_match_one_prefill():
    """Feeding tokens through the cache in any split gives the same logits as one pass."""
    config = small_config()
    model = llama_ref.LlamaModel(config, random_weights(config, seed=6, with_bias=True))
    ids = [5, 1, 33, 8, 21, 13, 2, 39]
    whole = model.forward(ids, model.new_cache())
    cache = model.new_cache()
    pieces = [model.forward(ids[:3], cache), model.forward(ids[3:4], cache), model.forward(ids[4:], cache)]
    assert cache.length == len(ids)
    assert llama_ref.max_relative_error(np.concatenate(pieces), whole) < 1e-12


def test_earlier_logits_ignore_later_tokens():
    config = small_config()
    model = llama_ref.LlamaModel(config, random_weights(config, seed=7))
    a = model.forward([4, 8, 15, 16], model.new_cache())
    b = model.forward([4, 8, 15, 23], model.new_cache())
    assert np.allclose(a[:3], b[:3], rtol=0, atol=1e-13) and not np.allclose(a[3], b[3])


def test_float32_mode_stays_float32_and_close():
    config = small_config()
    weights = {k: v.astype(np.float32) for k, v in random_weights(config, seed=8, with_bias=True).items()}
    ids = [1, 2, 3, 4, 5]
    f64 = llama_ref.LlamaModel(config, weights, np.float64).forward(ids, llama_ref.KVCache(config, np.float64))
    f32 = llama_ref.LlamaModel(config, weights, np.float32).forward(ids, llama_ref.KVCache(config, np.float32))
    assert f32.dtype == np.float32
    assert 0 < llama_ref.max_relative_error(f32, f64) < 1e-5


def test_tied_embeddings_use_embed_tokens_as_head():
    config = llama_ref.ModelConfig(**{**small_config().__dict__, "tie_word_embeddings": True})
    weights = random_weights(config, seed=9)
    del weights["lm_head.weight"]
    model = llama_ref.LlamaModel(config, weights)
    assert model.weights.lm_head is model.weights.embed_tokens


# ----------------------------------------------------------------------------------
# GGUF layout: permuted Q/K rows with adjacent-pair RoPE
# ----------------------------------------------------------------------------------


def gguf_layout(config, tensors):
    """The tensors with Q/K rows permuted as llama.cpp's converter does (export_gguf.permute)."""
    import export_gguf

    out = dict(tensors)
    for name, values in tensors.items():
        if ".q_proj." in name:
            out[name] = export_gguf.permute(np.asarray(values), config.num_heads, config.num_heads)
        elif ".k_proj." in name:
            out[name] = export_gguf.permute(np.asarray(values), config.num_heads, config.num_kv_heads)
    return out


def assert_gguf_layout_equivalent(config, tensors, ids, decode_steps):
    """Adjacent RoPE on the permuted weights gives the rotate-half model's logits (prefill and
    KV-cached decode) to float64 rounding, and adjacent RoPE on the unpermuted weights does not."""
    original = llama_ref.LlamaModel(config, tensors)
    permuted = llama_ref.LlamaModel(config, gguf_layout(config, tensors), rope_pairing="adjacent")
    mismatched = llama_ref.LlamaModel(config, tensors, rope_pairing="adjacent")
    expected = original.forward(ids, original.new_cache())
    assert llama_ref.max_relative_error(permuted.forward(ids, permuted.new_cache()), expected) < 1e-12
    assert llama_ref.max_relative_error(mismatched.forward(ids, mismatched.new_cache()), expected) > 1e-2
    expected_ids, expected_rows = llama_ref.greedy_decode(original, ids, decode_steps)
    got_ids, got_rows = llama_ref.greedy_decode(permuted, ids, decode_steps)
    assert np.array_equal(got_ids, expected_ids)
    assert llama_ref.max_relative_error(got_rows, expected_rows) < 1e-12


def test_adjacent_rope_on_permuted_weights_equals_rotate_half():
    """Random GQA model with q/k/v biases (the converter permutes the q/k biases too)."""
    config = small_config(num_kv_heads=2)
    assert_gguf_layout_equivalent(config, random_weights(config, seed=10, with_bias=True), [7, 3, 30, 12, 1, 25], 4)


def test_adjacent_rope_on_permuted_tiny_llama_equals_rotate_half():
    """The committed tiny-llama checkpoint (4 query heads, 2 kv heads, head_dim 16), its fixture prompt."""
    fixture = os.path.join(REPO_ROOT, "fixtures", "tiny-llama")
    with open(os.path.join(fixture, "config.json"), encoding="utf-8") as f:
        config = llama_ref.ModelConfig.from_hf(json.load(f))
    with open(os.path.join(fixture, "manifest.json"), encoding="utf-8") as f:
        prompt_ids = json.load(f)["prompt_ids"]
    tensors, _ = safetensors_io.load_file(os.path.join(fixture, "model.safetensors"))
    assert_gguf_layout_equivalent(config, tensors, prompt_ids, 8)


def test_gguf_tensor_names_round_trip():
    import export_gguf
    import gguf_ref

    names = ["token_embd.weight", "output_norm.weight", "output.weight"]
    names += [f"blk.{layer}.{suffix}" for layer in (0, 11) for suffix in gguf_ref.LAYER_TENSORS]
    for name in names:
        assert export_gguf.gguf_tensor_name(gguf_ref.hf_name(name)) == name
    assert gguf_ref.hf_name("blk.11.ffn_down.weight") == "model.layers.11.mlp.down_proj.weight"
    for bad in ("blk.x.attn_q.weight", "blk.0.attn_qq.weight", "tok_embd.weight"):
        try:
            gguf_ref.hf_name(bad)
        except KeyError:
            continue
        raise AssertionError(f"{bad} was accepted")


def test_gguf_export_and_read_back():
    """Convert a small random checkpoint (tied embeddings, 1 kv head) to F32, Q8_0 and Q4_1 GGUF and read
    it back with gguf_ref: the metadata gives the same config (eps rounded to float32, as stored);
    F32 tensors come back exactly, in the converter's row order, and the reference on that file
    equals the rotate-half model on the checkpoint; a Q4_1 value is within half a quantization step
    ((max - min) / 30 of its 32-block, plus the float16 rounding of the block's scale and minimum)."""
    import export_gguf
    import gguf_ref

    hf = {
        "architectures": ["LlamaForCausalLM"],
        "vocab_size": 40,
        "hidden_size": 64,
        "intermediate_size": 96,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 1,
        "max_position_embeddings": 64,
        "rms_norm_eps": 1e-6,
        "rope_theta": 500000.0,
        "tie_word_embeddings": True,
    }
    config = llama_ref.ModelConfig.from_hf(hf)
    tensors = {k: v.astype(np.float32) for k, v in random_weights(config, seed=11).items() if k != "lm_head.weight"}
    layout = gguf_layout(config, tensors)
    ids = [3, 1, 4, 1, 5, 9, 2, 6]
    expected = llama_ref.LlamaModel(config, tensors).forward(ids, llama_ref.KVCache(config, np.float64))
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "config.json"), "w", encoding="utf-8") as f:
            json.dump(hf, f)
        safetensors_io.save_file(os.path.join(tmp, "model.safetensors"), tensors)
        for out_type, tolerance in (("f32", 1e-12), ("q8_0", 0.05), ("q4_1", 0.5)):
            path = os.path.join(tmp, f"m.{out_type}.gguf")
            export_gguf.convert(tmp, path, out_type)
            data = gguf_ref.read_gguf(path)
            assert gguf_ref.config_from_gguf(data) == llama_ref.ModelConfig(
                **{**config.__dict__, "rms_norm_eps": float(np.float32(1e-6))}
            )
            assert "output.weight" not in data.tensors
            stored = gguf_ref.hf_named_tensors(data)
            assert sorted(stored) == sorted(layout)
            for name, values in layout.items():
                if out_type == "f32" or values.ndim == 1:
                    assert np.array_equal(stored[name], values), name
                elif out_type == "q4_1":
                    blocks, got = values.reshape(-1, 32), stored[name].reshape(-1, 32)
                    low, high = blocks.min(axis=1, keepdims=True), blocks.max(axis=1, keepdims=True)
                    bound = (high - low) / 30 * 1.01 + np.abs(low) * 2.0**-10
                    assert np.all(np.abs(got - blocks) <= bound), name
            error = llama_ref.max_relative_error(gguf_ref.reference_model(data).forward(ids, llama_ref.KVCache(config, np.float64)), expected)
            assert error < tolerance, (out_type, error)
            if out_type != "f32":
                assert error > 1e-6, (out_type, error)  # the quantized file really holds other numbers


# ----------------------------------------------------------------------------------
# RoPE scaling, both config.json spellings, Mistral's sliding window, fixtures/transformers
# ----------------------------------------------------------------------------------

LLAMA3_SMALL = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 0.0625, "high_freq_factor": 2.0, "original_max_position_embeddings": 16}


def test_llama3_rope_divisors_three_regimes():
    """head_dim 16, theta 500000: pair wavelengths 2 pi 500000^(i/8) = 6.28, 32.4, 167, 862, ...; with L = 16,
    high_freq_wavelen 16 / 2 = 8 and low_freq_wavelen 16 / 0.0625 = 256: pair 0 kept, pairs 1-2 smoothed,
    3-7 divided by 8. The smoothed divisors follow 1 / ((1 - s) / factor + s), s = (L / wavelen - low) /
    (high - low), which is 1 at wavelen = L / high and factor at wavelen = L / low (continuous)."""
    import math

    d = llama_ref.llama3_rope_divisors(16, 500000.0, 8.0, 0.0625, 2.0, 16)
    assert d[0] == 1.0 and d[3:] == (8.0,) * 5
    for i in (1, 2):
        wavelen = 2 * math.pi * 500000.0 ** (i / 8)
        s = (16 / wavelen - 0.0625) / (2.0 - 0.0625)
        assert 0 < s < 1 and 1.0 < d[i] < 8.0
        assert abs(d[i] - 1 / ((1 - s) / 8 + s)) < 1e-14
    assert abs(d[1] - 3.1270543351618) < 1e-12 and abs(d[2] - 7.1417355289351) < 1e-12
    # Llama 3.1 8B (head_dim 128, theta 500000, factor 8, low 1, high 4, L 8192): pairs with wavelength
    # below 2048 kept, above 8192 divided by 8, smoothed in between, monotonic.
    big = llama_ref.llama3_rope_divisors(128, 500000.0, 8.0, 1.0, 4.0, 8192)
    wavelengths = [2 * math.pi * 500000.0 ** (2 * i / 128) for i in range(64)]
    for w, x in zip(wavelengths, big):
        assert (x == 1.0) == (w < 2048) and (x == 8.0) == (w > 8192)
    assert list(big) == sorted(big) and 0 < sum(1.0 < x < 8.0 for x in big) < 64
    # Continuity at the two boundaries: a wavelength exactly at either one is "smoothed" with s = 1 / s = 0.
    theta_at = lambda wavelen, i, hd: (wavelen / (2 * math.pi)) ** (hd / (2 * i))  # noqa: E731
    at_high = llama_ref.llama3_rope_divisors(4, theta_at(8.0, 1, 4), 8.0, 0.0625, 2.0, 16)[1]
    at_low = llama_ref.llama3_rope_divisors(4, theta_at(256.0, 1, 4), 8.0, 0.0625, 2.0, 16)[1]
    assert abs(at_high - 1.0) < 1e-12 and abs(at_low - 8.0) < 1e-11



def assert_each_refused(base, refused):
    """Each of `refused` merged into the config `base` is refused by ModelConfig.from_hf (ValueError)."""
    for extra in refused:
        try:
            llama_ref.ModelConfig.from_hf({**base, **extra})
        except ValueError:
            continue
        raise AssertionError(f"accepted {extra}")


def test_rope_config_spellings():
    """transformers 4 (top-level rope_theta, rope_scaling) and 5 (rope_parameters) spellings read alike;
    contradictions, unknown RoPE types and partial rotation are refused."""
    base = {"vocab_size": 40, "hidden_size": 64, "intermediate_size": 48, "num_hidden_layers": 1, "num_attention_heads": 4, "rms_norm_eps": 1e-6}
    v5 = llama_ref.ModelConfig.from_hf({**base, "rope_parameters": {**LLAMA3_SMALL, "rope_theta": 500000.0}})
    v4 = llama_ref.ModelConfig.from_hf({**base, "rope_theta": 500000.0, "rope_scaling": LLAMA3_SMALL})
    v4_type = llama_ref.ModelConfig.from_hf({**base, "rope_theta": 500000.0, "rope_scaling": {**{k: v for k, v in LLAMA3_SMALL.items() if k != "rope_type"}, "type": "llama3"}})
    assert v5 == v4 == v4_type and v5.rope_theta == 500000.0 and len(v5.rope_divisors) == 8
    plain5 = llama_ref.ModelConfig.from_hf({**base, "rope_parameters": {"rope_type": "default", "rope_theta": 1e6}})
    plain4 = llama_ref.ModelConfig.from_hf({**base, "rope_theta": 1e6, "rope_scaling": None})
    assert plain5 == plain4 and plain5.rope_divisors is None and plain5.rope_theta == 1e6
    assert llama_ref.ModelConfig.from_hf(base).rope_theta == 10000.0
    linear = llama_ref.ModelConfig.from_hf({**base, "rope_parameters": {"rope_type": "linear", "factor": 4.0, "rope_theta": 1e4}})
    assert linear.rope_divisors == (4.0,) * 8
    refused = [
        {"rope_theta": 1e4, "rope_parameters": {"rope_type": "default", "rope_theta": 5e5}},
        {"rope_parameters": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e4}},
        {"rope_scaling": {"type": "dynamic", "factor": 2.0}},
        {"rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.5}},
        {"rope_parameters": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "rope_theta": 1e4}},
        {"rope_scaling": {"rope_type": "linear", "factor": 2.0}, "rope_parameters": {"rope_type": "llama3", **LLAMA3_SMALL}},
        {"model_type": "qwen2", "use_sliding_window": True, "sliding_window": 4},
        {"layer_types": ["sliding_attention", "full_attention"]},
    ]
    assert_each_refused(base, refused)


def test_rope_divisors_slow_each_pair():
    """A divisor c on a pair turns it at position p as the unscaled pair turns at p / c: with divisors all 2,
    position 2m gives the angles of position m."""
    cos2, sin2 = llama_ref.rope_cos_sin([6, 10], 16, 10000.0, np.float64, divisors=(2.0,) * 8)
    cos1, sin1 = llama_ref.rope_cos_sin([3, 5], 16, 10000.0, np.float64)
    assert np.allclose(cos2, cos1, rtol=0, atol=1e-15) and np.allclose(sin2, sin1, rtol=0, atol=1e-15)
    cos, _ = llama_ref.rope_cos_sin([7], 16, 10000.0, np.float64, divisors=(1.0,) + (1e30,) * 7)
    assert abs(cos[0, 0] - np.cos(7.0)) < 1e-15 and np.allclose(cos[0, 1:], 1.0, rtol=0, atol=1e-15)


def test_mistral_sliding_window_from_config():
    """model_type mistral with sliding_window W: every layer sees p - W < t <= p (the same logits as full
    attention over the first W positions, others after), KV-cached decode equals re-prefill; null means none."""
    base = {"vocab_size": 40, "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4,
            "num_key_value_heads": 2, "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "model_type": "mistral"}
    windowed = llama_ref.ModelConfig.from_hf({**base, "sliding_window": 3})
    full = llama_ref.ModelConfig.from_hf({**base, "sliding_window": None})
    assert windowed.sliding_window == 3 and full.sliding_window is None
    assert llama_ref.ModelConfig.from_hf({**base, "model_type": "llama", "sliding_window": 3}).sliding_window is None
    tensors = random_weights(windowed, seed=21)
    a_model, b_model = llama_ref.LlamaModel(windowed, tensors), llama_ref.LlamaModel(full, tensors)
    ids = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3]
    a, b = a_model.forward(ids, a_model.new_cache()), b_model.forward(ids, b_model.new_cache())
    assert np.max(np.abs(a[:3] - b[:3])) < 1e-13 and np.max(np.abs(a[3:] - b[3:])) > 1e-3
    greedy_ids, greedy_rows = llama_ref.greedy_decode(a_model, ids[:4], 8)
    assert llama_ref.check_decode_matches_reprefill(a_model, ids[:4], greedy_ids, greedy_rows, 1e-12) < 1e-12


def test_export_writes_llama3_rope_freqs():
    """export_gguf: a llama3-scaled checkpoint (either spelling) gets rope_freqs.weight first, F32 [head_dim/2],
    the converter's float32 divisors (within 1e-6 of the float64 ones); the reference on the GGUF as stored
    with those divisors reproduces the reference on the checkpoint. Other RoPE types are refused."""
    import dataclasses

    import export_gguf
    import gguf
    import gguf_ref

    hf = {"architectures": ["LlamaForCausalLM"], "vocab_size": 40, "hidden_size": 64, "intermediate_size": 48, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64, "rms_norm_eps": 1e-6,
          "tie_word_embeddings": False, "rope_parameters": {**LLAMA3_SMALL, "rope_theta": 500000.0}}
    config = llama_ref.ModelConfig.from_hf(hf)
    tensors = {k: v.astype(np.float32) for k, v in random_weights(config, seed=5).items()}
    ids = list(range(3, 33))
    expected = llama_ref.LlamaModel(config, tensors).forward(ids, llama_ref.KVCache(config, np.float64))
    v4 = {**{k: v for k, v in hf.items() if k != "rope_parameters"}, "rope_theta": 500000.0, "rope_scaling": LLAMA3_SMALL}
    with tempfile.TemporaryDirectory() as tmp:
        safetensors_io.save_file(os.path.join(tmp, "model.safetensors"), tensors)
        outputs = []
        for spelling in (hf, v4):
            with open(os.path.join(tmp, "config.json"), "w", encoding="utf-8") as f:
                json.dump(spelling, f)
            path = os.path.join(tmp, "m.gguf")
            export_gguf.convert(tmp, path, "f32")
            with open(path, "rb") as f:
                outputs.append(f.read())
            reader = gguf.GGUFReader(path)
            assert reader.tensors[0].name == "rope_freqs.weight" and reader.tensors[0].tensor_type == gguf.GGMLQuantizationType.F32
            assert float(reader.fields["llama.rope.freq_base"].contents()) == 500000.0
            data = gguf_ref.read_gguf(path)
            freqs = data.tensors.pop("rope_freqs.weight").values
            assert freqs.shape == (8,) and np.max(np.abs(freqs - np.array(config.rope_divisors)) / np.array(config.rope_divisors)) < 1e-6
            gguf_config = dataclasses.replace(gguf_ref.config_from_gguf(data), rope_divisors=tuple(float(x) for x in freqs))
            got = llama_ref.LlamaModel(gguf_config, gguf_ref.hf_named_tensors(data), rope_pairing="adjacent")
            assert llama_ref.max_relative_error(got.forward(ids, got.new_cache()), expected) < 1e-6
        assert outputs[0] == outputs[1]  # both spellings give the same bytes
        for rope in ({"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e4}, {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4}):
            with open(os.path.join(tmp, "config.json"), "w", encoding="utf-8") as f:
                json.dump({**hf, "rope_parameters": rope}, f)
            try:
                export_gguf.convert(tmp, os.path.join(tmp, "r.gguf"), "f32")
            except ValueError:
                continue
            raise AssertionError(f"converted {rope}")


# What llama_ref float64 may differ from each logits tensor of fixtures/transformers/*/expected.safetensors by
# (max |ref - hf| / max |ref|). transformers float32 (`logits`, every checkpoint): the README's 1e-5 (measured
# 6.2e-7 olmo2 .. 3.5e-6 gemma3). transformers float64 (`logits64`, the eight families it was written for):
# measured 3.0e-7 (olmo2) .. 9.6e-7 (gemma3), all of it transformers' float32 steps (the RMSNorm variance, the
# RoPE angles, the attention and router softmax, Gemma's whole norm): with those steps widened to float64 too,
# transformers and llama_ref agree to 3e-15 on all 17 checkpoints. 2e-6 leaves 2x margin over the largest.
TRANSFORMERS_FLOAT32_TOLERANCE = 1e-5
TRANSFORMERS_FLOAT64_TOLERANCE = 2e-6


def transformers_fixtures():
    """(name, config.json dict, weights, expected tensors) of every runnable fixtures/transformers checkpoint;
    asserts the 18 directories and that the refused one (granite) has no expected outputs and is refused here."""
    root = os.path.join(REPO_ROOT, "fixtures", "transformers")
    names = sorted(n for n in os.listdir(root) if os.path.isdir(os.path.join(root, n)))
    assert len(names) == 18, names
    out = []
    for name in names:
        directory = os.path.join(root, name)
        with open(os.path.join(directory, "manifest.json"), encoding="utf-8") as f:
            manifest = json.load(f)
        with open(os.path.join(directory, "config.json"), encoding="utf-8") as f:
            hf = json.load(f)
        if manifest["expect"] == "refused":
            assert not os.path.exists(os.path.join(directory, "expected.safetensors")), name
            try:
                llama_ref.ModelConfig.from_hf(hf)
            except ValueError:
                continue
            raise AssertionError(f"{name}: the reference accepted a checkpoint plumb must refuse")
        weights, _ = safetensors_io.load_file(os.path.join(directory, "model.safetensors"))
        expected, _ = safetensors_io.load_file(os.path.join(directory, "expected.safetensors"))
        out.append((name, hf, manifest, weights, expected))
    return out


def test_transformers_fixtures_match_reference():
    """fixtures/transformers (written by make_transformers_fixtures.py with torch): the float64 reference on every
    runnable checkpoint's config.json and F16 weights (all 17, eleven families) reproduces transformers' float32
    logits (TRANSFORMERS_FLOAT32_TOLERANCE) and, where the generator also wrote transformers' float64 run
    (logits64), that too (TRANSFORMERS_FLOAT64_TOLERANCE); its own greedy run through its KV cache gives
    transformers' greedy ids, its cached rows equal its full forward, and every expert choice of a MoE checkpoint
    is far from flipping. The refused checkpoint (granite) has no expected outputs and is refused."""
    checked = with_logits64 = 0
    for name, hf, manifest, weights, expected in transformers_fixtures():
        model = llama_ref.LlamaModel(llama_ref.ModelConfig.from_hf(hf), weights)
        prompt = [int(x) for x in expected["prompt_ids"]]
        logits = model.forward(prompt + [int(x) for x in expected["greedy_ids"][:-1]], model.new_cache())
        assert llama_ref.max_relative_error(expected["logits"], logits) < TRANSFORMERS_FLOAT32_TOLERANCE, name
        if "logits64" in expected:
            with_logits64 += 1
            assert llama_ref.max_relative_error(expected["logits64"], logits) < TRANSFORMERS_FLOAT64_TOLERANCE, name
            # and the two transformers runs differ as the generator recorded
            recorded = manifest["transformers_float32_vs_float64_max_rel"]
            assert abs(llama_ref.max_relative_error(expected["logits"], expected["logits64"]) - recorded) < 1e-8, name
        model.routing_gaps.clear()
        greedy_ids, greedy_rows = llama_ref.greedy_decode(model, prompt, len(expected["greedy_ids"]))
        assert np.array_equal(greedy_ids, expected["greedy_ids"]), name
        assert llama_ref.max_relative_error(greedy_rows, logits[len(prompt) - 1 :]) < 1e-12, name
        if model.config.num_experts:
            assert min(model.routing_gaps) > 1e-3, name  # make_transformers_fixtures.MIN_ROUTING_GAP
        checked += 1
    assert (checked, with_logits64) == (17, 8), (checked, with_logits64)


def test_transformers_fixtures_decode_in_any_split():
    """Every family through the cache: a prompt fed in pieces (12 tokens, then 1, 7 and the rest) gives one
    pass's logits. The first piece ends past phi3-longrope's original context (8), so every piece there takes
    the long factors, as the one pass does (LongRoPE chooses per pass: test_longrope_chooses_per_pass)."""
    for name, hf, _, weights, expected in transformers_fixtures():
        model = llama_ref.LlamaModel(llama_ref.ModelConfig.from_hf(hf), weights)
        ids = [int(x) for x in expected["prompt_ids"]] + [int(x) for x in expected["greedy_ids"][:-1]]
        whole = model.forward(ids, model.new_cache())
        cache = model.new_cache()
        pieces = [model.forward(ids[a:b], cache) for a, b in ((0, 12), (12, 13), (13, 20), (20, len(ids)))]
        assert cache.length == len(ids)
        assert llama_ref.max_relative_error(np.concatenate(pieces), whole) < 1e-12, name


def test_every_family_reads_its_features():
    """What each fixture's config.json turns on, as ModelConfig holds it (the families' table, FAMILIES)."""
    configs = {name: llama_ref.ModelConfig.from_hf(hf) for name, hf, _, _, _ in transformers_fixtures()}
    gemma2, gemma3 = configs["gemma2"], configs["gemma3"]
    assert (gemma2.norm_weight_offset, gemma2.embedding_multiplier) == (1.0, 8.0)
    assert gemma2.activation == "gelu_pytorch_tanh" and gemma2.query_pre_attn_scalar == 24
    assert (gemma2.attn_logit_softcapping, gemma2.final_logit_softcapping) == (3.0, 6.0)
    assert [gemma2.window(i) for i in range(2)] == [6, None] == [gemma3.window(i) for i in range(2)]
    assert gemma2.layer_rope(0, 31) == gemma2.layer_rope(1, 31) == (10000.0, None)
    assert gemma3.layer_rope(0, 31) == (10000.0, None) and gemma3.layer_rope(1, 31) == (1e6, (4.0,) * 8)
    assert (gemma3.qk_norm, gemma3.attn_logit_softcapping, gemma3.final_logit_softcapping) == ("head", None, None)
    assert configs["olmo2"].qk_norm == "projection" and configs["qwen3"].qk_norm == "head"
    assert configs["phi3"].rotary_dim == 8 and configs["phi3"].rope_long_divisors is None
    long, short = configs["phi3-longrope"], configs["phi3-longrope-short"]
    assert (long.rope_divisors, long.rope_long_divisors) == ((1.0, 1.5, 2.0, 3.0), (1.0, 2.5, 6.0, 16.0))
    assert abs(long.rope_attention_factor - math.sqrt(1 + math.log(16) / math.log(8))) < 1e-15
    assert abs(short.rope_attention_factor - math.sqrt(1 + math.log(2) / math.log(64))) < 1e-15
    assert long.layer_rope(0, 9)[1] == long.rope_long_divisors and long.layer_rope(0, 8)[1] == long.rope_divisors
    assert configs["smollm3"].rope_layers == (True, False) and configs["smollm3"].layer_rope(1, 31) is None
    mixtral = configs["mixtral"]
    assert (mixtral.num_experts, mixtral.experts_per_token, mixtral.moe_intermediate_size) == (4, 2, 64)
    assert mixtral.moe_layers == (0, 1) and mixtral.norm_topk_prob
    assert configs["mistral-window6"].window(1) == 6 and configs["mistral"].window(1) is None
    plain = {"qwen2", "qwen3", "qwen3-moe", "olmo2", "phi3", "mixtral", "smollm3", "mistral"}
    plain |= {n for n in configs if n.startswith("llama")}
    for name in plain:
        c = configs[name]
        assert c.sliding_window is None and c.norm_weight_offset == 0.0 and c.embedding_multiplier == 1.0, name
        assert c.final_logit_softcapping is None and c.query_pre_attn_scalar is None and c.activation == "silu", name


def test_family_defaults_and_spellings():
    """Keys config.json omits take transformers' defaults (the families' `reads`); transformers 4's spellings of
    Gemma 3's and Phi-3's RoPE read as transformers 5's; what no family reads is ignored; unknown model_types,
    partial rotation outside Phi-3 and tensors the family does not use are refused."""
    base = {"vocab_size": 40, "hidden_size": 64, "intermediate_size": 48, "num_hidden_layers": 6,
            "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "rms_norm_eps": 1e-6,
            "max_position_embeddings": 128}
    gemma2 = llama_ref.ModelConfig.from_hf({**base, "model_type": "gemma2"})
    assert gemma2.query_pre_attn_scalar == 256
    assert (gemma2.attn_logit_softcapping, gemma2.final_logit_softcapping) == (50.0, 30.0)
    assert gemma2.tie_word_embeddings and [gemma2.window(i) for i in range(6)] == [4096, None] * 3
    gemma3 = llama_ref.ModelConfig.from_hf({**base, "model_type": "gemma3_text"})
    assert [gemma3.window(i) for i in range(6)] == [4096] * 5 + [None]
    assert (gemma3.layer_rope(0, 1), gemma3.layer_rope(5, 1)) == ((10000.0, None), (1e6, None))
    nested = {"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
              "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}
    v5 = llama_ref.ModelConfig.from_hf({**base, "model_type": "gemma3_text", "rope_parameters": nested})
    v4_keys = {"rope_theta": 1e6, "rope_local_base_freq": 1e4, "rope_scaling": {"rope_type": "linear", "factor": 8.0}}
    v4 = llama_ref.ModelConfig.from_hf({**base, "model_type": "gemma3_text", **v4_keys})
    assert v5 == v4 and v5.layer_rope(5, 1) == (1e6, (8.0,) * 8) and v5.layer_rope(0, 1) == (1e4, None)
    longrope = {"rope_type": "longrope", "short_factor": [1.0, 2.0], "long_factor": [3.0, 4.0],
                "original_max_position_embeddings": 32}
    phi3 = {**base, "model_type": "phi3"}
    phi3_v5 = llama_ref.ModelConfig.from_hf(
        {**phi3, "rope_parameters": {**longrope, "rope_theta": 1e4, "partial_rotary_factor": 0.25}}
    )
    v4_scaling = {k: v for k, v in longrope.items() if k != "original_max_position_embeddings"}
    phi3_v4 = llama_ref.ModelConfig.from_hf({**phi3, "rope_theta": 1e4, "partial_rotary_factor": 0.25,
                                             "original_max_position_embeddings": 32, "rope_scaling": v4_scaling})
    assert phi3_v5 == phi3_v4 and phi3_v5.rotary_dim == 4 and phi3_v5.rope_original_context == 32
    assert abs(phi3_v5.rope_attention_factor - math.sqrt(1 + math.log(4) / math.log(32))) < 1e-15
    smollm3 = llama_ref.ModelConfig.from_hf({**base, "model_type": "smollm3", "num_hidden_layers": 8})
    assert smollm3.rope_layers == (True, True, True, False) * 2 and smollm3.rope_theta == 2e6
    # keys a family's transformers class does not read change nothing
    llama = llama_ref.ModelConfig.from_hf({**base})
    ignored = {"query_pre_attn_scalar": 24, "final_logit_softcapping": 3.0, "sliding_window": 4,
               "no_rope_layers": [0] * 6}
    assert llama_ref.ModelConfig.from_hf({**base, **ignored}) == llama
    refused = [
        {"model_type": "granite"},
        {"model_type": "llama", "partial_rotary_factor": 0.5},
        {"model_type": "mistral", "sliding_window": 4, "layer_types": ["sliding_attention", "full_attention"] * 3},
        {"model_type": "gemma2", "sliding_window": None},
        {"model_type": "phi3", "rope_parameters": {**longrope, "short_factor": [1.0], "partial_rotary_factor": 0.25}},
        {"model_type": "smollm3", "no_rope_layers": [1, 0]},
        {"model_type": "gemma2", "hidden_activation": "relu"},
    ]
    assert_each_refused(base, refused)
    config = small_config()
    weights = random_weights(config, seed=23)
    weights["model.layers.0.self_attn.o_proj.bias"] = np.zeros(config.hidden_size)
    try:
        llama_ref.LlamaModel(config, weights)
    except ValueError as error:
        assert "o_proj.bias" in str(error)
    else:
        raise AssertionError("an unused o_proj.bias was accepted")


def test_longrope_chooses_per_pass():
    """LongRoPE takes the short factors for a pass over positions < original context and the long ones past it,
    as transformers' model call does: on phi3-longrope (original 8) the first 8 rows of a 9-position pass differ
    from an 8-position pass, and equal it when both lists are the same."""
    import dataclasses

    (fixture,) = [f for f in transformers_fixtures() if f[0] == "phi3-longrope"]
    _, hf, _, weights, expected = fixture
    config = llama_ref.ModelConfig.from_hf(hf)
    ids = [int(x) for x in expected["prompt_ids"]]
    for long_divisors, differs in ((config.rope_long_divisors, True), (config.rope_divisors, False)):
        model = llama_ref.LlamaModel(dataclasses.replace(config, rope_long_divisors=long_divisors), weights)
        within, past = model.forward(ids[:8], model.new_cache()), model.forward(ids[:9], model.new_cache())[:8]
        assert (llama_ref.max_relative_error(past, within) > 1e-2) == differs
        assert differs or llama_ref.max_relative_error(past, within) < 1e-13


def test_partial_rope_leaves_the_other_dims():
    """Phi-3's partial rotation: a head's dims past rotary_dim come out of RoPE unchanged, the first rotary_dim
    are rotate-half RoPE of their own (pair i with i + rotary_dim / 2, frequencies theta^(-2i / rotary_dim)),
    times the attention factor."""
    import dataclasses

    (fixture,) = [f for f in transformers_fixtures() if f[0] == "phi3-longrope"]
    _, hf, _, weights, _ = fixture
    config = llama_ref.ModelConfig.from_hf(hf)
    model = llama_ref.LlamaModel(config, weights)
    x = np.random.default_rng(24).standard_normal((2, 12, 16))
    positions = np.arange(12)
    out = model.rotate(x, 0, positions)
    assert np.array_equal(out[..., 8:], x[..., 8:])
    cos, sin = llama_ref.rope_cos_sin(positions, 8, 10000.0, np.float64, config.rope_long_divisors)
    expected = llama_ref.apply_rope(x[..., :8], cos, sin) * config.rope_attention_factor
    assert np.allclose(out[..., :8], expected, rtol=0, atol=1e-15)
    whole_head = dataclasses.replace(
        config, rotary_dim=None, rope_long_divisors=None, rope_divisors=None, rope_attention_factor=1.0
    )
    full = llama_ref.LlamaModel(whole_head, weights)
    cos16, sin16 = llama_ref.rope_cos_sin(positions, 16, 10000.0, np.float64)
    assert np.allclose(full.rotate(x, 0, positions), llama_ref.apply_rope(x, cos16, sin16), rtol=0, atol=1e-15)


def test_gelu_tanh_and_softcap_match_gemma3_ref():
    """llama_ref's GELU-tanh and soft-cap are the same functions as gemma3_ref's (tested there by value)."""
    import gemma3_ref

    z = np.linspace(-12.0, 12.0, 97)
    assert np.array_equal(llama_ref.gelu_tanh(z), gemma3_ref.gelu_tanh(z))
    assert np.array_equal(llama_ref.softcap(z, 5.0), gemma3_ref.softcap(z, 5.0))


def test_attention_softcap_and_query_scalar():
    """Scores scaled by query_scalar^-1/2 instead of head_dim^-1/2, and soft-capped before the mask: with a
    cap far above every score nothing changes, a cap below the largest bends the output."""
    rng = np.random.default_rng(25)
    q, k, v = rng.standard_normal((2, 5, 8)), rng.standard_normal((1, 5, 8)), rng.standard_normal((1, 5, 8))
    positions = np.arange(5)
    plain = llama_ref.causal_attention(q, k, v, positions, positions, llama_ref.matmul_blas)
    same = llama_ref.causal_attention(q, k, v, positions, positions, llama_ref.matmul_blas, query_scalar=8)
    assert np.array_equal(plain, same)
    scaled = llama_ref.causal_attention(
        q * np.sqrt(24 / 8), k, v, positions, positions, llama_ref.matmul_blas, query_scalar=24
    )
    assert np.allclose(scaled, plain, rtol=0, atol=1e-14)
    loose = llama_ref.causal_attention(q, k, v, positions, positions, llama_ref.matmul_blas, logit_cap=1e6)
    tight = llama_ref.causal_attention(q, k, v, positions, positions, llama_ref.matmul_blas, logit_cap=0.5)
    assert np.allclose(loose, plain, rtol=0, atol=1e-12) and not np.allclose(tight, plain, rtol=0, atol=1e-3)


# ----------------------------------------------------------------------------------
# Gemma 3 (gemma3_ref.py)
# ----------------------------------------------------------------------------------


def small_gemma3(sliding_window=3, layers=7, softcap=None, seed=12):
    """A random Gemma 3 (d 32, 4 heads / 2 kv heads of 16, q dimension 64 != d), GGUF-named float32 weights."""
    import dataclasses

    import gemma3_ref
    import make_tiny_gemma3

    spec = dataclasses.replace(
        make_tiny_gemma3.SPECS[1], seed=seed, hidden=32, head_dim=16, ffn=48, layers=layers, vocab=40,
        sliding_window=sliding_window, softcap=softcap, embedding_std=0.2, output_norm_scale=4.0,
    )
    config = gemma3_ref.Gemma3Config(
        vocab_size=spec.vocab, hidden_size=spec.hidden, intermediate_size=spec.ffn, num_layers=spec.layers,
        num_heads=spec.heads, num_kv_heads=spec.kv_heads, head_dim=spec.head_dim, rms_norm_eps=1e-6,
        rope_theta=1e6, sliding_window=sliding_window, final_logit_softcapping=softcap or 0.0, context_length=64,
    )
    return config, make_tiny_gemma3.make_weights(spec)


def test_sliding_window_mask():
    """With window W, the query at position p sees exactly the keys at p - W < t <= p: changing any
    other key or value changes nothing, changing one inside changes the output."""
    rng = np.random.default_rng(13)
    q, k, v = rng.standard_normal((2, 8, 4)), rng.standard_normal((1, 8, 4)), rng.standard_normal((1, 8, 4))
    positions = np.arange(8)
    out = llama_ref.causal_attention(q, k, v, positions, positions, llama_ref.matmul_blas, sliding_window=3)
    for t in range(8):
        k2, v2 = k.copy(), v.copy()
        k2[:, t] += 3.0
        v2[:, t] -= 3.0
        out2 = llama_ref.causal_attention(q, k2, v2, positions, positions, llama_ref.matmul_blas, sliding_window=3)
        for p in range(8):
            seen = p - 3 < t <= p
            assert np.array_equal(out[:, p], out2[:, p]) != seen, (t, p)
    # window 1: every query reads only its own value
    one = llama_ref.causal_attention(q, k, v, positions, positions, llama_ref.matmul_blas, sliding_window=1)
    assert np.allclose(one, np.broadcast_to(v, one.shape), rtol=0, atol=1e-15)


def test_gemma3_global_layers_and_rope_bases():
    """llama.cpp's set_swa_pattern(6): layers 5, 11, 17 of 18 are global (rope.freq_base), the others
    sliding (base 10000); without a sliding window every layer is global."""
    import dataclasses

    config, _ = small_gemma3()
    config = dataclasses.replace(config, num_layers=18)
    assert [il for il in range(18) if config.is_global(il)] == [5, 11, 17]
    assert config.rope_base(5) == 1e6 and config.rope_base(4) == 10000.0 and config.rope_base(6) == 10000.0
    assert all(dataclasses.replace(config, sliding_window=0).is_global(il) for il in range(18))


def test_gelu_tanh_and_softcap_values():
    import gemma3_ref

    z = np.array([0.0, 1.0, -1.0, 10.0, -10.0])
    g = gemma3_ref.gelu_tanh(z)
    assert g[0] == 0.0 and abs(g[1] - 0.8411919906082768) < 1e-15 and abs(g[2] + 0.15880800939172324) < 1e-15
    assert abs(g[3] - 10.0) < 1e-12 and abs(g[4]) < 1e-12
    erf_gelu = np.array([0.5 * x * (1 + __import__("math").erf(x / np.sqrt(2))) for x in z])
    assert np.max(np.abs(g - erf_gelu)) < 1e-3 and np.max(np.abs(g - erf_gelu)) > 1e-5  # close to, but not, the erf GELU
    c = 30.0
    x = np.array([0.0, 0.3, -3.0, 30.0, 1e4])
    s = gemma3_ref.softcap(x, c)
    assert s[0] == 0.0 and abs(s[1] - 0.3) < 1e-4 and abs(s[2] - c * np.tanh(-0.1)) < 1e-15
    assert abs(s[3] - c * np.tanh(1.0)) < 1e-13 and s[4] <= c and np.array_equal(gemma3_ref.softcap(-x, c), -s)


def test_gemma3_embedding_scale_and_softcap_in_forward():
    """The residual stream starts at token_embd[ids] * sqrt(d); the softcapped model's logits are
    c tanh(uncapped / c)."""
    import gemma3_ref

    config, weights = small_gemma3(softcap=5.0)
    model = gemma3_ref.Gemma3Model(config, weights)
    ids = [3, 17, 39, 0, 8]
    trace = {}
    capped = model.forward(ids, model.new_cache(), trace)
    assert np.array_equal(trace["embedding.output"], weights["token_embd.weight"][ids].astype(np.float64) * np.sqrt(32.0))
    uncapped_model = gemma3_ref.Gemma3Model(gemma3_ref.Gemma3Config(**{**config.__dict__, "final_logit_softcapping": 0.0}), weights)
    uncapped = uncapped_model.forward(ids, uncapped_model.new_cache())
    assert np.max(np.abs(uncapped)) > 5.0  # the cap really bends something
    assert np.allclose(capped, 5.0 * np.tanh(uncapped / 5.0), rtol=0, atol=1e-13)


def test_gemma3_kv_cached_decode_equals_full_recompute():
    """Chunked prefill and one-token decode through the cache equal one prefill (window 3, 14 positions:
    the window slides on every sliding layer); greedy rows equal re-prefills."""
    import gemma3_ref

    config, weights = small_gemma3()
    model = gemma3_ref.Gemma3Model(config, weights)
    ids = [5, 1, 33, 8, 21, 13, 2, 39, 11, 7, 30, 4, 19, 26]
    whole = model.forward(ids, model.new_cache())
    cache = model.new_cache()
    pieces = [model.forward(ids[:4], cache)] + [model.forward([t], cache) for t in ids[4:9]] + [model.forward(ids[9:], cache)]
    assert cache.length == len(ids)
    assert llama_ref.max_relative_error(np.concatenate(pieces), whole) < 1e-12
    greedy_ids, greedy_rows = llama_ref.greedy_decode(model, ids[:6], 8)
    assert llama_ref.check_decode_matches_reprefill(model, ids[:6], greedy_ids, greedy_rows, 1e-12) < 1e-12


def test_gemma3_sliding_window_matters_only_past_the_window():
    """Over the first `window` positions the sliding mask hides nothing, so a window longer than the text
    gives the same logits (same RoPE bases); after that they differ. With one (sliding) layer, a position
    p >= window does not depend on token 0 at all (with more layers it does, through earlier positions)."""
    import gemma3_ref

    config, weights = small_gemma3(sliding_window=3)
    windowed = gemma3_ref.Gemma3Model(config, weights)
    unmasked = gemma3_ref.Gemma3Model(gemma3_ref.Gemma3Config(**{**config.__dict__, "sliding_window": 1000}), weights)
    ids = [5, 1, 33, 8, 21, 13, 2, 39]
    a, b = windowed.forward(ids, windowed.new_cache()), unmasked.forward(ids, unmasked.new_cache())
    assert np.max(np.abs(a[:3] - b[:3])) < 1e-12 and np.max(np.abs(a[3:] - b[3:])) > 1e-3
    config1, weights1 = small_gemma3(sliding_window=3, layers=1)
    one = gemma3_ref.Gemma3Model(config1, weights1)
    x = one.forward(ids, one.new_cache())
    y = one.forward([9] + ids[1:], one.new_cache())
    assert np.max(np.abs(x[3:] - y[3:])) < 1e-12 and np.max(np.abs(x[:3] - y[:3])) > 1e-6


def test_gemma3_reads_tiny_gguf_fixture():
    """The committed fixtures/tiny-gemma3 files read back with the intended configuration."""
    import gemma3_ref
    import gguf_ref

    folder = os.path.join(REPO_ROOT, "fixtures", "tiny-gemma3")
    q = gemma3_ref.config_from_gguf(gguf_ref.read_gguf(os.path.join(folder, "model.q.gguf")))
    f = gemma3_ref.config_from_gguf(gguf_ref.read_gguf(os.path.join(folder, "model.f32.softcap.gguf")))
    assert (q.hidden_size, q.num_heads, q.num_kv_heads, q.head_dim, q.intermediate_size, q.num_layers, q.vocab_size) == (256, 4, 2, 64, 512, 7, 512)
    assert (q.sliding_window, q.rope_theta, q.final_logit_softcapping, q.context_length) == (5, 1e6, 0.0, 64)
    assert [il for il in range(7) if q.is_global(il)] == [5] and f.final_logit_softcapping == 30.0
    assert (f.hidden_size, f.num_heads * f.head_dim) == (64, 128)


def test_kquants_round_trip_through_gguf_py():
    """kquants' Q4_K / Q6_K blocks dequantized by gguf-py come back within one quantization step of their
    sub-block (plus the float16 rounding of the scales): the byte layout is ggml's."""
    import gguf
    import kquants

    rng = np.random.default_rng(14)
    x = (rng.standard_normal((6, 512)) * rng.uniform(0.01, 3.0, (6, 1))).astype(np.float32)
    T = gguf.GGMLQuantizationType
    for qtype, sub, levels in ((T.Q4_K, 32, 15), (T.Q6_K, 16, 31)):
        back = gguf.quants.dequantize(kquants.quantize(x, qtype), qtype)
        blocks, got = x.reshape(-1, sub), back.reshape(-1, sub)
        step = (blocks.max(axis=1, keepdims=True) - np.minimum(blocks.min(axis=1, keepdims=True), 0)) / levels
        if qtype == T.Q6_K:
            step = np.abs(blocks).max(axis=1, keepdims=True) / levels
        assert np.all(np.abs(got - blocks) <= step * 1.05 + 1e-6), qtype.name
        assert np.max(np.abs(got - blocks)) > 0


# ----------------------------------------------------------------------------------
# safetensors reader / writer
# ----------------------------------------------------------------------------------


def test_safetensors_round_trip_and_layout():
    tensors = {
        "b.f64": np.arange(6, dtype=np.float64).reshape(2, 3) / 7,
        "a.i32": np.array([1, -2, 3], dtype=np.int32),
        "c.f32": np.ones((2, 2, 1), dtype=np.float32),
        "d.scalar": np.float32(2.5),
    }
    blob = safetensors_io.serialize(tensors, metadata={"k": "v"})
    assert blob == safetensors_io.serialize(dict(reversed(list(tensors.items()))), metadata={"k": "v"})
    header_len = int.from_bytes(blob[:8], "little")
    assert header_len % 8 == 0
    header, _ = safetensors_io.parse_header(blob)
    assert header["a.i32"]["data_offsets"] == [0, 12]  # sorted-name order: a.i32 comes first
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t.safetensors")
        safetensors_io.save_file(path, tensors, metadata={"k": "v"})
        loaded, metadata = safetensors_io.load_file(path)
    assert metadata == {"k": "v"} and sorted(loaded) == sorted(tensors)
    for name, array in tensors.items():
        assert loaded[name].dtype == np.asarray(array).dtype and np.array_equal(loaded[name], array)


def test_safetensors_reader_rejects_bad_offsets():
    blob = bytearray(safetensors_io.serialize({"x": np.zeros(4, dtype=np.float32)}))
    truncated = bytes(blob[:-4])
    try:
        safetensors_io.parse_header(truncated)
    except ValueError:
        return
    raise AssertionError("a truncated data section was accepted")


def test_transformers_ggufs_hold_the_checkpoints():
    """fixtures/transformers/*/model.f16.gguf (export_gguf.py transformers-fixtures), read back by gguf-py's
    GGUFReader: the architecture llama.cpp's converter gives the class, every tensor named as the converter
    names it, and each equal to the safetensors one after the converter's changes (Q/K rows permuted for
    llama/smollm3, Gemma's norms + 1 in float32, Phi-3's qkv and gate_up fused as stored, experts stacked);
    every checkpoint of export_gguf.TRANSFORMERS_GGUF_SKIPPED has none."""
    import gguf
    import export_gguf

    root = os.path.join(REPO_ROOT, "fixtures", "transformers")
    checked = 0
    for name in sorted(os.listdir(root)):
        folder = os.path.join(root, name)
        path = os.path.join(folder, "model.f16.gguf")
        if name in export_gguf.TRANSFORMERS_GGUF_SKIPPED or not os.path.isfile(os.path.join(folder, "config.json")):
            assert not os.path.exists(path), f"{name}: a GGUF of a checkpoint the exporter skips"
            continue
        with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
            hf = json.load(f)
        architecture = export_gguf.ARCHITECTURES[hf["architectures"][0]]
        reader = gguf.GGUFReader(path)
        assert reader.fields["general.architecture"].contents() == architecture, name
        stored = {t.name: t for t in reader.tensors}
        assert len(stored) == len(reader.tensors), f"{name}: duplicate tensor names"
        original, _ = safetensors_io.load_file(os.path.join(folder, "model.safetensors"))
        n_head = hf["num_attention_heads"]
        n_kv = hf.get("num_key_value_heads", n_head)
        want = {}
        experts = {}
        for hf_name, values in original.items():
            values = np.asarray(values, dtype=np.float32)
            parts = hf_name.split(".")
            if "block_sparse_moe.experts." in hf_name:  # Mixtral: w1 gate, w2 down, w3 up
                suffix = {"w1": "ffn_gate_exps", "w2": "ffn_down_exps", "w3": "ffn_up_exps"}[parts[6]]
                experts.setdefault(f"blk.{parts[2]}.{suffix}.weight", {})[int(parts[5])] = values
                continue
            if architecture in export_gguf.PERMUTED_ARCHITECTURES and ".q_proj." in hf_name:
                values = export_gguf.permute(values, n_head, n_head)
            elif architecture in export_gguf.PERMUTED_ARCHITECTURES and ".k_proj." in hf_name:
                values = export_gguf.permute(values, n_head, n_kv)
            if architecture in ("gemma2", "gemma3") and hf_name.endswith("norm.weight"):
                values = values + np.float32(1.0)
            want[export_gguf.gguf_tensor_name(hf_name, architecture, hf["num_hidden_layers"])] = values
        for gguf_name, by_expert in experts.items():
            want[gguf_name] = np.stack([by_expert[e] for e in range(len(by_expert))])
        if "rope_freqs.weight" in stored:  # Llama 3.x scaling: the divisors, as export_gguf computes them
            _, want["rope_freqs.weight"] = export_gguf.rope_settings(hf)
        rope = hf.get("rope_parameters") or {}
        if architecture == "phi3" and rope.get("rope_type") == "longrope":  # config.json's two lists, F32
            for which in ("long", "short"):
                want[f"rope_factors_{which}.weight"] = np.array(rope[f"{which}_factor"], dtype=np.float32)
        assert sorted(stored) == sorted(want), f"{name}: {sorted(set(stored) ^ set(want))}"
        for gguf_name, values in want.items():
            t = stored[gguf_name]
            expected_type = "F32" if values.ndim == 1 or gguf_name.endswith("ffn_gate_inp.weight") else "F16"
            assert t.tensor_type.name == expected_type, f"{name}: {gguf_name} is {t.tensor_type.name}"
            got = np.asarray(t.data, dtype=np.float32).reshape(values.shape)
            assert np.array_equal(got, values), f"{name}: {gguf_name} differs from model.safetensors"
        checked += 1
    assert checked >= 13, f"only {checked} GGUFs in fixtures/transformers"


def all_tests():
    return [(name, fn) for name, fn in sorted(globals().items()) if name.startswith("test_") and callable(fn)]


def run_all():
    """Run every test; return a list of (name, passed, message)."""
    results = []
    for name, fn in all_tests():
        try:
            fn()
            results.append((name, True, ""))
        except Exception as error:  # report every failure, do not stop at the first
            results.append((name, False, f"{type(error).__name__}: {error}"))
    return results


if __name__ == "__main__":
    outcomes = run_all()
    for name, passed, message in outcomes:
        print(f"{'PASS' if passed else 'FAIL'} {name}{': ' + message if message else ''}")
    failed = sum(not passed for _, passed, _ in outcomes)
    print(f"{len(outcomes) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
