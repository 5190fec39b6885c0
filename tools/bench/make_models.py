#!/usr/bin/env python3
"""Writes GGUF files with random weights in the shapes of real checkpoints, for benchmarks (scripts/bench-models).

Every weight matrix is ~N(0, 0.02), every norm weight 1, so that the files cost what the real models cost to
run (same tensor shapes, same quantization types, same vocabulary size for the LM head) without downloading
them. The text they generate is noise. A file is first written as F16 (or BF16), then quantized with
llama.cpp's own llama-quantize, so that the quantized tensors (including Q4_K_M's and Q5_K_M's per-tensor
mix) are exactly what llama.cpp would make of the real model.

The tokenizer is a real one (SmolLM2's GPT-2 BPE for the Llama 3 and Qwen2.5 shapes, Gemma 3's own
SentencePiece vocabulary for Gemma), padded with unused filler tokens up to the family's vocabulary size, so
that both plumb and llama.cpp load the file.

    make_models.py [--out models/bench] [--llama-quantize PATH] [--keep-f16] [--f16-type f16|bf16]
                   [--threads N] SHAPE:TYPE[,TYPE...] ...
    make_models.py --list
prints the path of each file asked for, one a line; a file that is already there is not made again.
"""
import argparse
import math
import os
import subprocess
import sys
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import gguf

REPO = Path(__file__).resolve().parents[2]

# The hyper-parameters of each shape, from the model's Hugging Face config.json (the repository named in
# `source`). context_length does not change what a benchmark costs (plumb and llama-bench size the KV cache to
# the tokens they run); it is written as the config says, for realism.
@dataclass(frozen=True)
class Shape:
    arch: str            # GGUF general.architecture
    source: str          # the Hugging Face repository whose config.json gave the numbers
    hidden: int          # hidden_size
    ffn: int             # intermediate_size
    layers: int          # num_hidden_layers
    heads: int           # num_attention_heads
    kv_heads: int        # num_key_value_heads
    head_dim: int        # head_dim (hidden / heads where the config has none)
    vocab: int           # vocab_size
    context: int         # max_position_embeddings
    rope_theta: float
    rms_eps: float
    tied: bool           # tie_word_embeddings: no output.weight, the LM head is token_embd
    tokenizer: str       # the GGUF in models/ whose tokenizer.* metadata is copied
    llama3_rope: tuple | None = None  # (factor, low_freq_factor, high_freq_factor, original_max_position)
    sliding_window: int = 0           # Gemma 3's local attention window


SMOLLM2 = "models/SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA3 = "models/gemma-3-270m-q4_k_m.gguf"

SHAPES = {
    # Llama 3.x: rope_scaling {"rope_type": "llama3", factor, low_freq_factor 1, high_freq_factor 4,
    # original_max_position_embeddings 8192}, written as rope_freqs.weight the way convert_hf_to_gguf.py does.
    "llama-3.2-1b": Shape("llama", "meta-llama/Llama-3.2-1B", 2048, 8192, 16, 32, 8, 64, 128256, 131072,
                          500000.0, 1e-5, True, SMOLLM2, llama3_rope=(32.0, 1.0, 4.0, 8192)),
    "llama-3.2-3b": Shape("llama", "meta-llama/Llama-3.2-3B", 3072, 8192, 28, 24, 8, 128, 128256, 131072,
                          500000.0, 1e-5, True, SMOLLM2, llama3_rope=(32.0, 1.0, 4.0, 8192)),
    "llama-3.1-8b": Shape("llama", "meta-llama/Llama-3.1-8B", 4096, 14336, 32, 32, 8, 128, 128256, 131072,
                          500000.0, 1e-5, False, SMOLLM2, llama3_rope=(8.0, 1.0, 4.0, 8192)),
    # Qwen2.5: q/k/v projections have biases; 0.5B and 1.5B tie the embeddings. The 7B's vocab_size is 152064
    # (its embedding matrix is padded further than the small ones' 151936).
    "qwen2.5-0.5b": Shape("qwen2", "Qwen/Qwen2.5-0.5B", 896, 4864, 24, 14, 2, 64, 151936, 32768,
                          1000000.0, 1e-6, True, SMOLLM2),
    "qwen2.5-1.5b": Shape("qwen2", "Qwen/Qwen2.5-1.5B", 1536, 8960, 28, 12, 2, 128, 151936, 131072,
                          1000000.0, 1e-6, True, SMOLLM2),
    "qwen2.5-7b": Shape("qwen2", "Qwen/Qwen2.5-7B", 3584, 18944, 28, 28, 4, 128, 152064, 131072,
                        1000000.0, 1e-6, False, SMOLLM2),
    # Gemma 3 1B: head_dim 256, one KV head, local layers (window 512) five in six; rope_theta is the global
    # layers' base (local ones use 10000, fixed by the architecture); no rope_scaling (the 4B and up have one).
    "gemma-3-1b": Shape("gemma3", "google/gemma-3-1b-pt", 1152, 6912, 26, 4, 1, 256, 262144, 32768,
                        1000000.0, 1e-6, True, GEMMA3, sliding_window=512),
}

# The types llama-quantize is asked for, by its own names; the file suffix is the lower-case name.
QUANT_TYPES = ["Q4_0", "Q8_0", "Q4_K_M", "Q5_K_M", "Q6_K"]
GGML_FILE_TYPE = {"F16": gguf.LlamaFileType.MOSTLY_F16, "BF16": gguf.LlamaFileType.MOSTLY_BF16}

# Rows of random numbers made at once: bounds the float32 scratch to ~64 MiB whatever the tensor.
CHUNK_VALUES = 16 << 20


def llama3_rope_factors(s: Shape) -> np.ndarray:
    """Llama 3.1's per-pair RoPE divisors, as convert_hf_to_gguf.py's LlamaModel writes rope_freqs.weight."""
    factor, low, high, original = s.llama3_rope
    low_wavelen, high_wavelen = original / low, original / high
    out = []
    for i in range(0, s.head_dim, 2):
        wavelen = 2 * math.pi * s.rope_theta ** (i / s.head_dim)
        if wavelen < high_wavelen:
            out.append(1.0)
        elif wavelen > low_wavelen:
            out.append(factor)
        else:
            smooth = (original / wavelen - low) / (high - low)
            out.append(1.0 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def tensor_list(s: Shape):
    """(name, (rows, cols) or (n,), kind) for every tensor, in llama.cpp's order; kind is 'w' (random matrix,
    F16/BF16), 'norm' (ones, F32), 'bias' (random, F32) or 'rope' (rope_freqs.weight, F32)."""
    q, kv = s.heads * s.head_dim, s.kv_heads * s.head_dim
    out = [("token_embd.weight", (s.vocab, s.hidden), "w")]
    if s.llama3_rope:
        out.append(("rope_freqs.weight", (s.head_dim // 2,), "rope"))
    for i in range(s.layers):
        p = f"blk.{i}."
        out.append((p + "attn_norm.weight", (s.hidden,), "norm"))
        out += [(p + "attn_q.weight", (q, s.hidden), "w"), (p + "attn_k.weight", (kv, s.hidden), "w"),
                (p + "attn_v.weight", (kv, s.hidden), "w")]
        if s.arch == "qwen2":
            out += [(p + "attn_q.bias", (q,), "bias"), (p + "attn_k.bias", (kv,), "bias"),
                    (p + "attn_v.bias", (kv,), "bias")]
        if s.arch == "gemma3":
            out += [(p + "attn_q_norm.weight", (s.head_dim,), "norm"),
                    (p + "attn_k_norm.weight", (s.head_dim,), "norm")]
        out.append((p + "attn_output.weight", (s.hidden, q), "w"))
        if s.arch == "gemma3":
            out.append((p + "post_attention_norm.weight", (s.hidden,), "norm"))
        out.append((p + "ffn_norm.weight", (s.hidden,), "norm"))
        out += [(p + "ffn_gate.weight", (s.ffn, s.hidden), "w"), (p + "ffn_up.weight", (s.ffn, s.hidden), "w"),
                (p + "ffn_down.weight", (s.hidden, s.ffn), "w")]
        if s.arch == "gemma3":
            out.append((p + "post_ffw_norm.weight", (s.hidden,), "norm"))
    out.append(("output_norm.weight", (s.hidden,), "norm"))
    if not s.tied:
        out.append(("output.weight", (s.vocab, s.hidden), "w"))
    return out


def copy_tokenizer(w: gguf.GGUFWriter, source: Path, vocab: int):
    """Copies every tokenizer.* key of `source`, padding the token list to `vocab` entries with unused tokens
    (type UNUSED, distinct texts, score 0): ids past the real tokenizer's are never produced by tokenizing
    text, yet the embedding and LM head have their real number of rows."""
    r = gguf.GGUFReader(source)
    n_real = None
    for key, field in r.fields.items():
        if not key.startswith("tokenizer."):
            continue
        vtype = field.types[0]
        value = field.contents()
        sub = None
        if vtype == gguf.GGUFValueType.ARRAY:
            sub = field.types[1]
            value = list(value)
            if key == "tokenizer.ggml.tokens":
                n_real = len(value)
                value += [f"<|plumb_pad_{i}|>" for i in range(n_real, vocab)]
            elif key == "tokenizer.ggml.token_type":
                value += [int(gguf.TokenType.UNUSED)] * (vocab - len(value))
            elif key == "tokenizer.ggml.scores":
                value += [0.0] * (vocab - len(value))
        w.add_key_value(key, value, vtype, sub_type=sub)
    if n_real is None or n_real > vocab:
        raise SystemExit(f"make_models: {source} has no tokenizer of at most {vocab} tokens")


def write_float_model(name: str, s: Shape, path: Path, float_type: str):
    """Writes the F16 (or BF16) file, one tensor at a time, each filled in chunks of rows."""
    tmp = path.with_suffix(".gguf.part")
    w = gguf.GGUFWriter(tmp, s.arch)
    a = s.arch
    w.add_name(f"{name} (random weights, plumb scripts/bench-models)")
    w.add_type("model")
    w.add_file_type(GGML_FILE_TYPE[float_type])
    w.add_uint32(f"{a}.context_length", s.context)
    w.add_uint32(f"{a}.embedding_length", s.hidden)
    w.add_uint32(f"{a}.block_count", s.layers)
    w.add_uint32(f"{a}.feed_forward_length", s.ffn)
    w.add_uint32(f"{a}.attention.head_count", s.heads)
    w.add_uint32(f"{a}.attention.head_count_kv", s.kv_heads)
    w.add_float32(f"{a}.rope.freq_base", s.rope_theta)
    w.add_float32(f"{a}.attention.layer_norm_rms_epsilon", s.rms_eps)
    if a == "llama":
        w.add_uint32(f"{a}.vocab_size", s.vocab)
        w.add_uint32(f"{a}.rope.dimension_count", s.head_dim)
    if a in ("llama", "gemma3"):
        w.add_uint32(f"{a}.attention.key_length", s.head_dim)
        w.add_uint32(f"{a}.attention.value_length", s.head_dim)
    if a == "gemma3":
        w.add_uint32(f"{a}.attention.sliding_window", s.sliding_window)
    copy_tokenizer(w, REPO / s.tokenizer, s.vocab)

    tensors = tensor_list(s)
    wtype = np.float16
    raw = None
    if float_type == "BF16":
        # numpy has no bfloat16: the file holds the top 16 bits of each float32 (truncation is fine for noise).
        wtype, raw = np.uint16, gguf.GGMLQuantizationType.BF16
    for tname, shape, kind in tensors:
        if kind == "w":
            nbytes = int(np.prod(shape)) * 2
            w.add_tensor_info(tname, shape, np.dtype(wtype), nbytes, raw_dtype=raw)
        else:
            w.add_tensor_info(tname, shape, np.dtype(np.float32), int(np.prod(shape)) * 4)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()

    # A fixed seed per shape: the same command makes the same file.
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    start = time.monotonic()
    for i, (tname, shape, kind) in enumerate(tensors):
        if kind == "norm":
            data = np.ones(shape, dtype=np.float32)
        elif kind == "bias":
            data = (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float32)
        elif kind == "rope":
            data = llama3_rope_factors(s)
        else:
            rows, cols = shape
            data = np.empty(shape, dtype=wtype)
            step = max(1, CHUNK_VALUES // cols)
            for r0 in range(0, rows, step):
                chunk = rng.standard_normal((min(step, rows - r0), cols), dtype=np.float32)
                chunk *= 0.02
                if raw is None:
                    data[r0:r0 + step] = chunk
                else:
                    data[r0:r0 + step] = (chunk.view(np.uint32) >> 16).astype(np.uint16)
        w.write_tensor_data(data)
        if sys.stderr.isatty():
            print(f"\rmake_models: {path.name}: tensor {i + 1}/{len(tensors)}", end="", file=sys.stderr)
    w.close()
    if sys.stderr.isatty():
        print(file=sys.stderr)
    os.replace(tmp, path)
    print(f"make_models: wrote {path} ({path.stat().st_size / 1e9:.2f} GB, {time.monotonic() - start:.0f} s)",
          file=sys.stderr)


def quantize(llama_quantize: str, src: Path, dst: Path, qtype: str, threads: int):
    tmp = dst.with_suffix(".gguf.part")
    cmd = [llama_quantize, str(src), str(tmp), qtype] + ([str(threads)] if threads else [])
    start = time.monotonic()
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if done.returncode != 0:
        tmp.unlink(missing_ok=True)
        last = done.stdout.strip().splitlines()[-1:] or ["(no output)"]
        raise SystemExit(f"make_models: llama-quantize {src.name} {qtype} failed: {last[0]}")
    os.replace(tmp, dst)
    print(f"make_models: wrote {dst} ({dst.stat().st_size / 1e9:.2f} GB, {time.monotonic() - start:.0f} s)",
          file=sys.stderr)


def parse_specs(specs):
    """['llama-3.2-1b:Q4_0,Q4_K_M', ...] -> [(shape name, [types])], types upper-cased and checked."""
    out = []
    for spec in specs:
        name, _, types = spec.partition(":")
        if name not in SHAPES:
            raise SystemExit(f"make_models: unknown shape '{name}' (one of {', '.join(SHAPES)})")
        tlist = [t.strip().upper() for t in (types or "Q4_0").split(",") if t.strip()]
        for t in tlist:
            if t not in QUANT_TYPES and t not in GGML_FILE_TYPE:
                raise SystemExit(f"make_models: unknown type '{t}' (one of {', '.join(QUANT_TYPES + ['F16', 'BF16'])})")
        out.append((name, tlist))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("specs", nargs="*", metavar="SHAPE:TYPE[,TYPE...]",
                    help=f"shapes: {', '.join(SHAPES)}; types: {', '.join(QUANT_TYPES)}, F16, BF16 "
                         "(default Q4_0)")
    ap.add_argument("--out", default=str(REPO / "models" / "bench"), help="folder of the files (models/bench)")
    ap.add_argument("--llama-quantize", help="llama.cpp's llama-quantize (needed for the quantized types)")
    ap.add_argument("--keep-f16", action="store_true", help="keep the F16/BF16 file a quantized one was made from")
    ap.add_argument("--f16-type", choices=["f16", "bf16"], default="f16",
                    help="the float type quantized files are made from (f16)")
    ap.add_argument("--threads", type=int, default=0, help="llama-quantize's threads (its default: all cores)")
    ap.add_argument("--list", action="store_true", help="print the shapes table (markdown) and exit")
    args = ap.parse_args()

    if args.list:
        print("| shape | arch | source config | hidden | FFN | layers | heads / KV heads | head dim | vocab "
              "| tied embeddings | RoPE theta | parameters |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for n, s in SHAPES.items():
            print(f"| {n} | {s.arch} | {s.source} | {s.hidden} | {s.ffn} | {s.layers} | {s.heads} / {s.kv_heads} "
                  f"| {s.head_dim} | {s.vocab} | {'yes' if s.tied else 'no'} | {s.rope_theta:g} "
                  f"| {sum(int(np.prod(shape)) for _, shape, _ in tensor_list(s)) / 1e9:.2f} B |")
        return
    if not args.specs:
        ap.error("name at least one SHAPE:TYPE (e.g. llama-3.2-1b:Q4_0)")

    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    float_type = args.f16_type.upper()
    for name, types in parse_specs(args.specs):
        s = SHAPES[name]
        base = out_dir / f"{name}-{float_type.lower()}.gguf"
        wanted = [(t, out_dir / f"{name}-{t.lower()}.gguf") for t in types]
        missing = [(t, p) for t, p in wanted if not p.exists()]
        made_base = False
        if missing and not base.exists():
            write_float_model(name, s, base, float_type)
            made_base = True
        for t, p in missing:
            if t == float_type:
                continue  # the float file itself, just written
            if not args.llama_quantize:
                raise SystemExit(f"make_models: --llama-quantize is needed to make {p}")
            quantize(args.llama_quantize, base, p, t, args.threads)
        # A float file written only to be quantized goes (8B is 16 GB in F16); one asked for, or one an
        # earlier run kept, stays.
        if made_base and float_type not in types and not args.keep_f16:
            base.unlink()
            print(f"make_models: removed {base} (--keep-f16 keeps it)", file=sys.stderr)
        for _, p in wanted:
            print(os.path.relpath(p) if p.resolve().is_relative_to(Path.cwd()) else p)


if __name__ == "__main__":
    main()
