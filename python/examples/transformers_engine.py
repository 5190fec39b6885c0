"""Hugging Face transformers as an engine judged by the fixture suite: the model cases (layer, end_to_end,
kv_handoff; docs/fixtures.md "Ops and tensor names") computed by transformers' own Llama, loaded from the
case's GGUF file by transformers' own GGUF loader, so that plumb.verify can judge it.

It is what an engineer writes to check a model implementation they did not write against the suite: the
weights come from `AutoModelForCausalLM.from_pretrained(models_dir, gguf_file=name, dtype=...)` (which
dequantizes with the `gguf` package and un-permutes llama.cpp's Q/K rows into rotate-half order: docs/formats.md
"RoPE pairing"), the forward pass is transformers' LlamaForCausalLM in eager attention, its KV cache a
DynamicCache, and everything the suite wants to see is read with forward hooks, nothing recomputed here. The op
cases (gemv, rope, attention_decode, ...) are not this adapter's job: transformers has no entry point for one
kernel, so it runs only the model cases (python/examples/torch_engine.py computes the others). No network:
HF_HUB_OFFLINE=1, the config comes from the GGUF's metadata, no tokenizer is loaded (the cases hold token ids).

Run it (from the repository root, with the plumb package importable, transformers and accelerate installed):

    python python/examples/transformers_engine.py --suite fixtures/suite --mode bf16 [--cases REGEX] [--bug NAME]

which prints the verify table of the model cases, judged with the allowances the mode declares.

Modes (MODES below):
  fp32  the model in torch.float32 (transformers' own float32 path: RMSNorm, RoPE angles, softmax in FP32);
        declares nothing.
  bf16  the model in torch.bfloat16, as `dtype=torch.bfloat16` gives it: weights, activations, the residual
        stream and the KV cache in BF16; transformers itself computes RMSNorm's statistics, RoPE's angles and
        softmax in FP32 and casts back (docs/fixtures.md "Model cases in BF16 and FP16"). Declares
        bf16_activations (on the model cases it means the whole engine), under which end_to_end's tokens are
        judged argmax_within rather than exact.
Outputs are returned as float32 tensors (cast from the model's dtype), the tokens as int32. For Llama,
transformers 5.24 loads a GGUF by its legacy path, every weight dequantized and cast to the dtype (load_model
checks it); the warning it prints in bf16 about packed-GGUF kernels computing in FP32 is about its newer path.

The cases, as transformers computes them:
  end_to_end  prefill the prompt in one forward, then N decode steps one token per forward through the
              DynamicCache; each step is fed the reference's greedy token (teacher forcing: the case's
              `decode_tokens` input, or, in suites older than that input, the expected `tokens`' first N),
              so one flipped argmax changes one `tokens` element and not every later logits row.
  layer       the same over the given tokens: a forward pre-hook on each decoder layer gives layer_input,
              one on post_attention_layernorm gives x + attention (its input), the layer's output after_mlp,
              model.norm's output final_norm; keys and values from the DynamicCache after the last step.
  kv_handoff  the hand-off file (docs/kv-cache.md "KV hand-off format") checked against the model, decoded
              into a DynamicCache whose layers store what the file's dtype can hold (KvDtypeLayer: each new
              key and value is rounded through bf16, or FP8 E4M3 with the file's scale, before attention
              reads it back, as a paged engine's cache does), then the continuation decoded. Its
              k_cache/v_cache outputs are the file's elements as that decoding gives them (FP32 values; the
              bf16 mode's cache holds them rounded to BF16, as an engine that dequantizes on import would).

Planted bugs (BUGS below): Engine(mode, bug=NAME) plants one classic model-level mistake into the loaded
model (a weight, buffer or attribute patched, restored after the case), which the suite must reject; each
entry names the cases that catch it with no allowance (fp32) and under bf16_activations (bf16), and what was
measured. Two of the four (RoPE frequencies 2^(1/32) off, RMSNorm eps 1e-6 for 1e-5) fail FP32 by 3-80x and
pass every check under bf16_activations: a BF16 engine's own error is larger than theirs.
python/tests/test_transformers_engine.py checks both modes and every bug."""
import argparse
import contextlib
import functools
import hashlib
import json
import os
import pathlib
from dataclasses import dataclass

# Before transformers is imported: it reads these once. The Hub is never needed (everything comes from the GGUF
# file), so a missing file is an error here rather than a download.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
if __name__ == "__main__":
    # Run as a script: no GGUF loader progress bar (272 updates of a plain tqdm, which reads this when it is
    # first imported, by torch). Imported, the caller's environment is left as it is.
    os.environ.setdefault("TQDM_DISABLE", "1")

import torch  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[2]
MODEL_OPS = ("layer", "end_to_end", "kv_handoff")

# ----------------------------------------------------------------------------------------------------------
# Precision modes


@dataclass(frozen=True)
class Mode:
    name: str
    dtype: torch.dtype  # what from_pretrained loads the model in
    allow: tuple = ()   # the allowances it declares to verify


MODES = {
    "fp32": Mode("fp32", torch.float32),
    # On the model cases bf16_activations means the whole engine in BF16 (docs/fixtures.md "Model cases in BF16
    # and FP16": with bf16_outputs nothing more is added), so it is the one allowance declared.
    "bf16": Mode("bf16", torch.bfloat16, ("bf16_activations",)),
}

# ----------------------------------------------------------------------------------------------------------
# Planted bugs: name -> the model cases that catch it in each mode, what it does. Every one lives in the model's
# code, so it can fail model cases only. A case is named when it fails by at least 2x its threshold, measured on
# the committed suite (numbers: the worst row, value / threshold), so another host's summation order cannot
# turn it: a FAIL closer to the threshold is stated in `what`, not asserted.

E2E, LAYER = "end_to_end.smollm2-135m-instruct.q4_1", "layer.smollm2-135m-instruct.q4_1"
HANDOFF_BF16, HANDOFF_FP8 = "kv_handoff.bf16", "kv_handoff.fp8_e4m3"


@dataclass(frozen=True)
class Bug:
    fp32: tuple  # model cases that must FAIL it in fp32 (no allowance)
    bf16: tuple  # ... and in bf16 under bf16_activations; () when that allowance hides it everywhere
    what: str


BUGS = {
    "rope_frequencies_off": Bug(
        (E2E, LAYER, HANDOFF_FP8), (),
        "every RoPE inverse frequency x 2^(1/32) (the rotary embedding's inv_freq buffer): every angle 2.2% "
        "too large, as a stray linear RoPE scaling factor makes them. fp32: end_to_end logits 4.2e-3 (42x), "
        "layer k_cache NMSE 2.8e-4, kv_handoff.fp8_e4m3 80x, kv_handoff.bf16 only 1.27x; bf16: every check "
        "passes (worst 0.37, end_to_end logits 0.018 of 0.05)"),
    "rope_theta_off": Bug(
        (E2E, LAYER, HANDOFF_BF16, HANDOFF_FP8), (LAYER,),
        "RoPE base 10000 (Llama 2's, an engine's default when it does not read llama.rope.freq_base) instead of "
        "the file's 100000. fp32: 10x to 6e5x everywhere, one greedy token flipped; bf16: layer's decode rows "
        "and caches 4-13x, but end_to_end logits only 1.18x and kv_handoff.bf16 1.05x, kv_handoff.fp8_e4m3 "
        "passes (0.48)"),
    "norm_eps_off": Bug(
        (E2E, LAYER, HANDOFF_FP8), (),
        "every RMSNorm's eps 1e-6 (LlamaConfig's default, as when llama.attention.layer_norm_rms_epsilon is "
        "not read) instead of the file's 1e-5. fp32: end_to_end logits 3.1x, layer v_cache 18x (its prefill "
        "rows pass, 0.39), kv_handoff.fp8_e4m3 16x, kv_handoff.bf16 passes (0.05 of its 5e-3); bf16: every "
        "check passes (worst 0.32)"),
    "head_transposed": Bug(
        (E2E, LAYER, HANDOFF_BF16, HANDOFF_FP8), (E2E, LAYER, HANDOFF_BF16, HANDOFF_FP8),
        "q_proj's output viewed [head_dim][n_heads] and transposed instead of [n_heads][head_dim] (the "
        "heads and head_dim axes swapped in q's view), planted as the same permutation of q_proj's rows: "
        "every check fails in both modes (logits off by about their own size)"),
}

# ----------------------------------------------------------------------------------------------------------
# The model, loaded by transformers


@functools.lru_cache(maxsize=2)
def load_model(path, dtype):
    """transformers' LlamaForCausalLM from the GGUF file at `path`, in `dtype`, eager attention, in eval mode.
    Cached: from_pretrained reads the GGUF twice (config and weights), about 12 s for SmolLM2 on one core."""
    from transformers import AutoModelForCausalLM
    path = pathlib.Path(path)
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=dtype,
                                                 attn_implementation="eager")
    # For Llama, transformers 5.24 takes its legacy GGUF path: every weight dequantized (gguf.quants, FP32) and
    # cast to `dtype` in plain nn.Linear modules. (For bf16 it warns that packed-GGUF kernels compute in FP32;
    # that is its newer path, which does not cover Llama.) Should a later version keep the blocks packed, the
    # bf16 mode would no longer be what MODES says: refuse rather than judge something else.
    odd = {p.dtype for p in model.parameters()} - {dtype}
    if odd:
        raise RuntimeError(f"{path.name} loaded with parameters in {odd}, not only {dtype}: packed GGUF weights?")
    return model.eval()


@functools.lru_cache(maxsize=4)
def sha256_of(path):
    """The KV hand-off file's weights_sha256: the SHA-256 of the GGUF file whole (docs/kv-cache.md)."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


@contextlib.contextmanager
def planted(model, bug):
    """The model with `bug` planted for the duration of the block, then restored exactly (the tensors saved
    are clones, the attributes their old values), so one loaded model serves every bug."""
    if bug is None:
        yield model
        return
    saved = []  # (object, attribute, old value)

    def patch(obj, name, value):
        old = getattr(obj, name)
        saved.append((obj, name, old.detach().clone() if torch.is_tensor(old) else old))
        if torch.is_tensor(old):
            with torch.no_grad():
                old.copy_(value)  # in place: the buffer or parameter object stays the one the module uses
        else:
            setattr(obj, name, value)

    cfg, rotary = model.config, model.model.rotary_emb
    hd = cfg.head_dim
    if bug == "rope_frequencies_off":
        patch(rotary, "inv_freq", rotary.inv_freq * 2 ** (1 / 32))
    elif bug == "rope_theta_off":
        # transformers' own formula (compute_default_rope_parameters) with the wrong base
        patch(rotary, "inv_freq", 1.0 / (10000.0 ** (torch.arange(0, hd, 2, dtype=torch.float) / hd)))
    elif bug == "norm_eps_off":
        norms = [model.model.norm] + [m for layer in model.model.layers
                                      for m in (layer.input_layernorm, layer.post_attention_layernorm)]
        for norm in norms:
            patch(norm, "variance_epsilon", 1e-6)
    elif bug == "head_transposed":
        # Row h·hd + j of the engine's q is the real q's element j·n_heads + h.
        for layer in model.model.layers:
            w = layer.self_attn.q_proj.weight
            patch(layer.self_attn.q_proj, "weight",
                  w.view(hd, cfg.num_attention_heads, -1).transpose(0, 1).reshape(w.shape))
    else:
        raise ValueError(f"unknown bug {bug!r}; known: {sorted(BUGS)}")
    try:
        yield model
    finally:
        for obj, name, old in reversed(saved):
            if torch.is_tensor(old):
                with torch.no_grad():
                    getattr(obj, name).copy_(old)
            else:
                setattr(obj, name, old)


# ----------------------------------------------------------------------------------------------------------
# A cache layer in the hand-off file's element type


def kv_codec(kv_dtype, scales):
    """For the file's dtype (docs/kv-cache.md "Element types"): decode(stored) → float32 values as read back,
    and roundtrip(x) → what x reads back as once written into that cache. scales [n_kv_heads] for FP8."""
    if kv_dtype in ("f32", "f16", "bf16"):
        t = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[kv_dtype]
        return (lambda stored: stored.float()), (lambda x: x.to(t).float())
    if kv_dtype not in ("fp8-e4m3", "fp8-e5m2"):
        raise ValueError(f"unknown KV dtype {kv_dtype!r}")
    fp8 = torch.float8_e4m3fn if kv_dtype == "fp8-e4m3" else torch.float8_e5m2
    s = scales.float()[:, None, None]  # [n_kv_heads][1][1]: the cache's [n_kv_heads][positions][head_dim]
    largest = torch.finfo(fp8).max

    def decode(stored):  # the code's value times its head's scale, one FP32 multiplication
        return stored.view(fp8).float() * s

    def roundtrip(x):  # x / scale rounded to nearest even, SATFINITE (torch's cast alone overflows to NaN)
        return decode((x.float() / s).clamp(-largest, largest).to(fp8))
    return decode, roundtrip


def kv_dtype_layer_class():
    from transformers.cache_utils import DynamicLayer

    class KvDtypeLayer(DynamicLayer):
        """A DynamicLayer whose new keys and values go through the cache's element type before attention reads
        them: what a paged engine with a bf16 or FP8 cache computes. Stores the decoded values in the model's
        dtype (each exactly a cache element's value, or its rounding to BF16 in the bf16 mode)."""

        def __init__(self, k_roundtrip, v_roundtrip):
            super().__init__()
            self.k_roundtrip, self.v_roundtrip = k_roundtrip, v_roundtrip

        def import_positions(self, keys, values):
            """The hand-off file's positions, decoded already: stored as they are, not rounded again."""
            return super().update(keys, values)

        def update(self, key_states, value_states, *args, **kwargs):
            dtype = key_states.dtype
            return super().update(self.k_roundtrip(key_states[0])[None].to(dtype),
                                  self.v_roundtrip(value_states[0])[None].to(dtype), *args, **kwargs)

    return KvDtypeLayer


def read_handoff(data):
    """The hand-off file's bytes → (metadata, {name: tensor}); FP8 tensors as uint8 codes."""
    from safetensors.torch import load
    n = int.from_bytes(data[:8], "little")
    meta = json.loads(data[8:8 + n]).get("__metadata__", {})
    tensors = {name: t.view(torch.uint8) if t.dtype in (torch.float8_e4m3fn, torch.float8_e5m2) else t
               for name, t in load(data).items()}
    return meta, tensors


# ----------------------------------------------------------------------------------------------------------
# The engine


class Engine:
    """Computes a model case's outputs: engine(case) → {output name: tensor}, transformers' model in `mode`
    (MODES), with `bug` planted (BUGS or None). CPU, eager attention, no gradients."""

    def __init__(self, mode="fp32", bug=None, model_dir=REPO / "models"):
        self.mode = MODES[mode] if isinstance(mode, str) else mode
        if bug is not None and bug not in BUGS:
            raise ValueError(f"unknown bug {bug!r}; known: {sorted(BUGS)}")
        self.bug, self.model_dir = bug, pathlib.Path(model_dir)

    def __call__(self, case):
        if case.op not in MODEL_OPS:
            raise NotImplementedError(f"{case.name}: transformers runs whole models; op cases are not this "
                                      "adapter's job (python/examples/torch_engine.py computes them)")
        path = self.model_dir / case.params["model"]
        if not path.exists():
            raise FileNotFoundError(f"{path}: the model cases need it (scripts/fetch-model smollm2)")
        model = load_model(str(path), self.mode.dtype)
        with torch.inference_mode(), planted(model, self.bug):
            outputs = getattr(self, "op_" + case.op)(model, path, case)
        return {name: t.float() if t.is_floating_point() else t for name, t in outputs.items()}

    @staticmethod
    def step(model, cache, tokens):
        """One forward over `tokens` (a prefill or one decode step) appending to `cache`; the last row's
        logits. (`cache=` is 5.24's name for past_key_values, which it still accepts with a deprecation.)"""
        out = model(input_ids=tokens.long()[None], cache=cache, use_cache=True, logits_to_keep=1)
        return out.logits[0, -1]

    def op_end_to_end(self, model, path, case):
        from transformers import DynamicCache
        t, n = case.inputs("torch"), case.params["decode_steps"]
        if "decode_tokens" in t:
            fed = t["decode_tokens"]
        else:  # suites older than the decode_tokens input: the reference's greedy tokens are its expected ones
            fed = case.expected("torch")["tokens"][:n]
        cache = DynamicCache(config=model.config)
        rows = [self.step(model, cache, t["prompt"])]
        for token in fed.tolist():
            rows.append(self.step(model, cache, torch.tensor([token])))
        logits = torch.stack(rows).float()
        # torch.argmax returns the first maximal index: the lowest id on ties, as the case defines
        return {"logits": logits, "tokens": torch.argmax(logits, dim=-1).to(torch.int32)}

    def op_layer(self, model, path, case):
        from transformers import DynamicCache
        tokens, n_prompt = case.inputs("torch")["tokens"], case.params["prompt_len"]
        stages = ("layer_input", "after_attention", "after_mlp")
        trace = {stage: [] for stage in stages}  # this pass's [rows][d] per layer, in layer order
        finals = []

        def note(stage):
            return lambda x: trace[stage].append(x[0].float())

        hooks = []
        for layer in model.model.layers:
            # hidden_states is the first positional argument in LlamaModel's loop; by keyword if that changes
            hooks.append(layer.register_forward_pre_hook(
                lambda m, args, kwargs: note("layer_input")(args[0] if args else kwargs["hidden_states"]),
                with_kwargs=True))
            # post_attention_layernorm's input is residual + o_proj(attention): after_attention
            hooks.append(layer.post_attention_layernorm.register_forward_pre_hook(
                lambda m, args: note("after_attention")(args[0])))
            hooks.append(layer.register_forward_hook(lambda m, args, out: note("after_mlp")(out)))
        hooks.append(model.model.norm.register_forward_hook(lambda m, args, out: finals.append(out[0, -1])))
        passes = []
        cache = DynamicCache(config=model.config)
        try:
            # the base model: the layer case has no logits, so lm_head (a 49152-row GEMV) is skipped
            for start, end in [(0, n_prompt)] + [(i, i + 1) for i in range(n_prompt, len(tokens))]:
                model.model(input_ids=tokens[start:end].long()[None], cache=cache, use_cache=True)
                passes.append({stage: torch.stack(trace[stage]) for stage in stages})  # [n_layers][rows][d]
                for stage in stages:
                    trace[stage].clear()
        finally:
            for hook in hooks:
                hook.remove()
        out = {f"prefill.{s}": passes[0][s] for s in stages}
        out.update({f"decode.{s}": torch.stack([p[s][:, 0] for p in passes[1:]]) for s in stages})
        out["final_norm"] = torch.stack(finals)
        # DynamicCache layers hold [batch][n_kv_heads][positions][head_dim], keys after RoPE: the suite's layout
        out["k_cache"] = torch.stack([layer.keys[0] for layer in cache.layers])
        out["v_cache"] = torch.stack([layer.values[0] for layer in cache.layers])
        return out

    def op_kv_handoff(self, model, path, case):
        from transformers import DynamicCache
        cfg, t = model.config, case.inputs("torch")
        meta, tensors = read_handoff(t["handoff"].numpy().tobytes())
        if meta.get("format") != "plumb.kv-handoff" or meta.get("format_version") != "1":
            raise ValueError(f"not a version-1 KV hand-off file: {meta}")
        if meta["weights_sha256"] != sha256_of(str(path)):
            raise ValueError(f"KV hand-off file computed by other weights than {path.name}")
        shape = {"n_layers": cfg.num_hidden_layers, "n_kv_heads": cfg.num_key_value_heads, "head_dim": cfg.head_dim}
        if any(int(meta[key]) != value for key, value in shape.items()):
            raise ValueError(f"KV hand-off shape {meta} does not match the model's {shape}")
        length, continuation = int(meta["length"]), t["continuation"]
        if "next_token" in meta and int(meta["next_token"]) != int(continuation[0]):
            raise ValueError(f"the file's next_token {meta['next_token']} is not the continuation's first")
        layer_class = kv_dtype_layer_class()
        cache = DynamicCache(config=cfg)
        cache.layers, read_back = [], []
        for i in range(cfg.num_hidden_layers):
            scales = [tensors[s][i] if s in tensors else None for s in ("k_scales", "v_scales")]
            (k_decode, k_round), (v_decode, v_round) = (kv_codec(meta["kv_dtype"], sc) for sc in scales)
            # the file's [length][n_kv_heads][head_dim] → the cache's [n_kv_heads][length][head_dim]
            keys, values = (k_decode(tensors[f"layers.{i}.keys"].transpose(0, 1)),
                            v_decode(tensors[f"layers.{i}.values"].transpose(0, 1)))
            read_back.append((keys, values))
            layer = layer_class(k_round, v_round)
            layer.import_positions(keys[None].to(model.dtype), values[None].to(model.dtype))
            cache.layers.append(layer)
        assert cache.get_seq_length() == length
        logits = [self.step(model, cache, torch.tensor([token])) for token in continuation.tolist()]
        return {"k_cache": torch.stack([k for k, _ in read_back]), "v_cache": torch.stack([v for _, v in read_back]),
                "logits": torch.stack(logits)}


def run(suite, mode="fp32", bug=None, cases=None, **engine_args):
    """{case name: outputs} for the model cases among `cases` (default: every case of the suite)."""
    engine = Engine(mode, bug, **engine_args)
    return {case.name: engine(case) for case in (suite if cases is None else cases) if case.op in MODEL_OPS}


def main():
    import plumb
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", default=str(REPO / "fixtures" / "suite"))
    ap.add_argument("--mode", choices=sorted(MODES), default="fp32")
    ap.add_argument("--bug", choices=sorted(BUGS))
    ap.add_argument("--cases", help="a Python regex searched in case names")
    ap.add_argument("--models", default=str(REPO / "models"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    suite = plumb.Suite(args.suite)
    selected = suite.select(args.cases)
    skipped = [c.name for c in selected if c.op not in MODEL_OPS]
    if skipped:
        print(f"skipped {len(skipped)} op cases: transformers runs whole models (layer, end_to_end, kv_handoff)")
    results = run(suite, args.mode, args.bug, selected, model_dir=args.models)
    if not results:
        raise SystemExit("no model case selected")
    rows, ok = plumb.verify(suite, results, allow=MODES[args.mode].allow)
    print(plumb.format_rows(rows))
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
