#!/usr/bin/env python3
"""Writes the tokenizer oracle fixtures in fixtures/tokenizer/ (see docs/tokenizers.md).

Independent tokenizers (pinned in tools/reference/requirements.txt) encode every entry of
fixtures/tokenizer/corpus.json; the C++ tests must reproduce their ids exactly.

  expected-<pre>.json    HF `tokenizers` with the SmolLM2 GGUF vocabulary and merges (read with gguf-py) and
                         the pre-tokenizer llama.cpp names <pre> (smollm, llama-bpe, qwen2, gpt2): the same
                         vocabulary under four pre-tokenizers. Nothing derived from the model is committed
                         but these ids.
  bpe-tiny*/             a small byte-level BPE trained here with BpeTrainer on gpl-3.txt + the corpus, saved
                         as tokenizer.json (three pre-tokenizer forms: Split(Llama-3 regex)+ByteLevel,
                         Digits+ByteLevel, ByteLevel) + tokenizer_config.json, with expected.json.
  spm-tiny.gguf          a SentencePiece BPE (byte_fallback) trained here with `sentencepiece` on gpl-3.txt,
                         exported as a tokenizer-only GGUF with gguf-py; expected-spm.json holds
                         sentencepiece's own encodings of the corpus.
  spm-tiny/              the same model as a Llama-2 style tokenizer.json (Prepend+Replace normalizer, BPE
                         with byte_fallback), with HF's encodings in expected.json.
  spm-tiny-metaspace/    the same with a Metaspace(prepend_scheme="first") pre-tokenizer instead.
  expected-gemma3.json   `sentencepiece` with a ModelProto built from the Gemma 3 GGUF's vocabulary (tokens,
                         scores, types; the normalizer and trainer settings of Gemma's tokenizer.model), its
                         ids of the corpus; written only when the GGUF (--gemma3-model) is there.
  expected-utf8.json     Python's errors="replace" decoding of the corpus entries that are not UTF-8.

Every expected file holds, per corpus entry, "plain" (special-token texts are ordinary text) and, where the
oracle can parse special tokens, "special" (their texts become their ids). Entries that are not valid UTF-8
(corpus entries {"bytes": [...]}) are given to every oracle decoded with errors="replace": each maximal
invalid subsequence becomes U+FFFD, which is what plumb's tokenizer does with them too.

Usage: python tools/reference/make_tokenizer_fixtures.py [--model models/SmolLM2-135M-Instruct.Q4_1.gguf]
           [--gemma3-model models/gemma-3-270m-q4_k_m.gguf] [--out DIR]
The output is deterministic: regenerating into a scratch DIR and comparing with `diff -r` (ignoring the two
inputs) checks that the committed fixtures are what this script writes.
"""
import argparse
import json
import os
import shutil
import struct
import tempfile

import gguf
import sentencepiece as spm
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(ROOT, "fixtures", "tokenizer")  # inputs: corpus.json, gpl-3.txt
OUT = FIXTURES  # where the fixtures are written (--out)

# The pre-tokenizer regexes exactly as the models' tokenizer.json files spell them.
GPT2_REGEX = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")

CHAT_TEMPLATE = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
                 "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
                 "{% endif %}")


def load_corpus():
    with open(os.path.join(FIXTURES, "corpus.json"), encoding="utf-8") as f:
        entries = json.load(f)
    return [e if isinstance(e, str) else bytes(e["bytes"]).decode("utf-8", errors="replace") for e in entries]


def pre_tokenizer(pre):
    byte_level_regex = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    byte_level_plain = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    if pre == "gpt2":
        return byte_level_regex
    if pre == "smollm":
        return pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level_regex])
    regex = {"llama-bpe": LLAMA3_REGEX, "qwen2": QWEN2_REGEX}[pre]
    return pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False), byte_level_plain])


def encode_all(tokenizer, texts, special):
    if not special:
        tokenizer.encode_special_tokens = True  # special-token texts are plain text
    out = [tokenizer.encode(t, add_special_tokens=False).ids for t in texts]
    tokenizer.encode_special_tokens = False
    return out


def write_json(path, value):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, ensure_ascii=True, separators=(",", ":"))
        f.write("\n")


def expected(tokenizer, texts, source, with_special=True):
    result = {"source": source, "plain": encode_all(tokenizer, texts, special=False)}
    if with_special:
        result["special"] = encode_all(tokenizer, texts, special=True)
    return result


def piece_lengths(pre, texts):
    """The UTF-8 byte length of each piece the pre-tokenizer alone splits each text into."""
    out = []
    for text in texts:
        pieces = pre_tokenizer(pre).pre_tokenize_str(text)
        out.append([len(text[begin:end].encode("utf-8")) for _, (begin, end) in pieces])
    return out


# ---------------------------------------------------------------------------------------------------------
# SmolLM2 vocabulary under four pre-tokenizers


def smollm_fixtures(model_path, texts):
    reader = gguf.GGUFReader(model_path)
    tokens = reader.fields["tokenizer.ggml.tokens"].contents()
    types = reader.fields["tokenizer.ggml.token_type"].contents()
    merges = [tuple(m.split(" ", 1)) for m in reader.fields["tokenizer.ggml.merges"].contents()]
    vocab = {t: i for i, t in enumerate(tokens)}
    specials = [AddedToken(t, special=True, normalized=False) for t, ty in zip(tokens, types) if ty == 3]
    gpl = open(os.path.join(FIXTURES, "gpl-3.txt"), encoding="utf-8").read()
    for pre in ("smollm", "llama-bpe", "qwen2", "gpt2"):
        # llama.cpp sets ignore_merges for the Llama-3 pre-tokenizer, as Llama-3's tokenizer.json does.
        tok = Tokenizer(models.BPE(vocab, merges, ignore_merges=(pre == "llama-bpe")))
        tok.pre_tokenizer = pre_tokenizer(pre)
        tok.decoder = decoders.ByteLevel()
        tok.add_special_tokens(specials)
        result = expected(tok, texts, f"tokenizers with the SmolLM2 vocabulary, pre-tokenizer {pre}")
        result["piece_lengths"] = piece_lengths(pre, texts)
        if pre == "smollm":
            result["gpl3"] = tok.encode(gpl, add_special_tokens=False).ids
        write_json(os.path.join(OUT, f"expected-{pre}.json"), result)


# ---------------------------------------------------------------------------------------------------------
# A small byte-level BPE trained here, saved as tokenizer.json in three pre-tokenizer forms


def bpe_tiny_fixtures(texts):
    training = [open(os.path.join(FIXTURES, "gpl-3.txt"), encoding="utf-8").read()] + texts
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizer("llama-bpe")
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1000, min_frequency=2, show_progress=False,
                                  special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(training, trainer=trainer)
    # A non-special added token: matched in text even when special tokens are not parsed (user-defined).
    tok.add_tokens([AddedToken("<tool>", special=False, normalized=False)])
    variants = {"bpe-tiny": "llama-bpe", "bpe-tiny-digits": "smollm", "bpe-tiny-gpt2": "gpt2"}
    for name, pre in variants.items():
        tok.pre_tokenizer = pre_tokenizer(pre)
        directory = os.path.join(OUT, name)
        os.makedirs(directory, exist_ok=True)
        tok.save(os.path.join(directory, "tokenizer.json"))
        write_json(os.path.join(directory, "expected.json"),
                   expected(Tokenizer.from_file(os.path.join(directory, "tokenizer.json")), texts,
                            f"tokenizers, BpeTrainer vocabulary, pre-tokenizer {pre}"))
    config = {"add_bos_token": True, "add_eos_token": False, "bos_token": "<|endoftext|>",
              "eos_token": "<|im_end|>", "chat_template": CHAT_TEMPLATE}
    with open(os.path.join(OUT, "bpe-tiny", "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
        f.write("\n")


# ---------------------------------------------------------------------------------------------------------
# SentencePiece BPE with byte fallback, as GGUF and as a Llama-2 style tokenizer.json


def spm_fixtures(texts):
    scratch = tempfile.mkdtemp(prefix="plumb-spm-")
    try:
        spm.SentencePieceTrainer.train(
            input=os.path.join(FIXTURES, "gpl-3.txt"), model_prefix=os.path.join(scratch, "spm"),
            model_type="bpe", vocab_size=800, byte_fallback=True, character_coverage=1.0,
            normalization_rule_name="identity", remove_extra_whitespaces=False, add_dummy_prefix=True,
            split_digits=False, num_threads=1, seed_sentencepiece_size=100000, minloglevel=2)
        sp = spm.SentencePieceProcessor(model_file=os.path.join(scratch, "spm.model"))
    finally:
        shutil.rmtree(scratch)
    n = sp.get_piece_size()
    tokens = [sp.id_to_piece(i) for i in range(n)]
    scores = [sp.get_score(i) for i in range(n)]

    def token_type(i):
        if sp.is_unknown(i):
            return 2
        if sp.is_control(i):
            return 3
        if sp.is_byte(i):
            return 6
        if sp.is_unused(i):
            return 5
        return 1

    types = [token_type(i) for i in range(n)]
    writer = gguf.GGUFWriter(os.path.join(OUT, "spm-tiny.gguf"), "llama")
    writer.add_name("spm-tiny (plumb tokenizer fixture)")
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_bos_token_id(sp.bos_id())
    writer.add_eos_token_id(sp.eos_id())
    writer.add_unk_token_id(sp.unk_id())
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    writer.add_add_space_prefix(True)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    write_json(os.path.join(OUT, "expected-spm.json"),
               {"source": f"sentencepiece {spm.__version__}, trained on gpl-3.txt",
                "plain": [sp.encode(t) for t in texts]})

    # The same model the way HF's LlamaConverter writes it: merges are every split of a piece into two pieces,
    # ranked by the merged piece's id (a SentencePiece BPE's ids are in score order).
    vocab = {t: i for i, t in enumerate(tokens)}
    merges = []
    for piece, piece_id in vocab.items():
        if types[piece_id] != 1:
            continue
        for k in range(1, len(piece)):
            left, right = piece[:k], piece[k:]
            if left in vocab and right in vocab and types[vocab[left]] == 1 and types[vocab[right]] == 1:
                merges.append((piece_id, vocab[left], vocab[right], left, right))
    merges.sort()
    tok = Tokenizer(models.BPE(vocab, [(m[3], m[4]) for m in merges], unk_token="<unk>", byte_fallback=True,
                               fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tok.add_special_tokens([AddedToken(tokens[i], special=True, normalized=False)
                            for i in range(n) if types[i] in (2, 3)])
    directory = os.path.join(OUT, "spm-tiny")
    os.makedirs(directory, exist_ok=True)
    tok.save(os.path.join(directory, "tokenizer.json"))
    write_json(os.path.join(directory, "expected.json"),
               expected(Tokenizer.from_file(os.path.join(directory, "tokenizer.json")), texts,
                        "tokenizers, Llama-2 style tokenizer.json of spm-tiny"))
    config = {"add_bos_token": True, "add_eos_token": False, "bos_token": "<s>", "eos_token": "</s>",
              "unk_token": "<unk>"}
    with open(os.path.join(directory, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
        f.write("\n")

    # Newer Llama-2 style files do the escaping in a Metaspace pre-tokenizer, with the space put only in front
    # of the text's start ("first"), not after every special token as the Prepend normalizer does.
    tok.normalizer = None
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first", split=False)
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="first", split=False)
    directory = os.path.join(OUT, "spm-tiny-metaspace")
    os.makedirs(directory, exist_ok=True)
    tok.save(os.path.join(directory, "tokenizer.json"))
    write_json(os.path.join(directory, "expected.json"),
               expected(Tokenizer.from_file(os.path.join(directory, "tokenizer.json")), texts,
                        "tokenizers, Metaspace(prepend_scheme=first) tokenizer.json of spm-tiny"))


# ---------------------------------------------------------------------------------------------------------
# Gemma 3: sentencepiece running a ModelProto made from the GGUF's vocabulary

GEMMA3_MODEL = os.path.join(ROOT, "models", "gemma-3-270m-q4_k_m.gguf")
# Texts about what Gemma's vocabulary has and the corpus does not exercise (kept here, not in corpus.json,
# whose additions would retrain bpe-tiny): its turn markers, user-defined HTML tags, whitespace runs longer
# than the longest run token (31), and its other special tokens.
GEMMA3_EXTRA = [
    "<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n4<end_of_turn>\n",
    "<table><tr><td>1</td><td>2</td></tr></table>\n<b>bold</b> <i>it</i> <s>struck</s> <code>x = 1</code>",
    " " * 40 + "x" + "\n" * 35 + "y" + "\t" * 33 + "z  \n  \n\t \t",
    "<start_of_image><end_of_image>[multimodal]<mask><unused0><pad><eos><bos><unk>",
    "<start_of_turn <start_of_turn> start_of_turn><end_of_turn",
]


def proto_varint(n):
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def proto_bytes(field, data):
    return proto_varint(field << 3 | 2) + proto_varint(len(data)) + data


def proto_int(field, value):  # int32, bool and enum fields (varint); negatives as 64-bit two's complement
    return proto_varint(field << 3) + proto_varint(value & 0xFFFFFFFFFFFFFFFF)


def proto_float(field, value):
    return proto_varint(field << 3 | 5) + struct.pack("<f", value)


def gemma3_model_proto(tokens, scores, types, unk_id, bos_id, eos_id, pad_id):
    """A sentencepiece ModelProto (protobuf wire format, written here so that no protobuf package is needed;
    the field numbers are those of sentencepiece_model.proto as sentencepiece 0.2.1's sentencepiece_model_pb2
    declares them). The pieces are the GGUF's, with two conversions undone:
      - llama.cpp's converter writes user-defined pieces with U+2581 turned into a space ("pre-normalize
        user-defined spaces", convert_hf_to_gguf.py), so Gemma's runs of "\u2581" are runs of spaces in the
        GGUF; sentencepiece matches user-defined pieces in the escaped text, so they get their U+2581 back;
      - it marks <unk> CONTROL (it is special in tokenizer_config.json); sentencepiece needs it UNKNOWN.
    Settings as Gemma's tokenizer.model has them (transformers' GemmaConverter lists the trainer spec; its
    normalizer is Replace(" ", "\u2581") alone): BPE with byte fallback; identity normalization, no dummy
    prefix, extra whitespace kept, spaces escaped."""
    pieces = bytearray()
    for i, (piece, score, token_type) in enumerate(zip(tokens, scores, types)):
        if token_type == 4:
            piece = piece.replace(" ", "\u2581")
        if i == unk_id:
            token_type = 2
        pieces += proto_bytes(1, proto_bytes(1, piece.encode("utf-8")) + proto_float(2, score) +
                              proto_int(3, token_type))
    trainer = b"".join([
        proto_int(3, 2),  # model_type BPE
        proto_int(4, len(tokens)),  # vocab_size
        proto_int(21, 1), proto_int(23, 1), proto_int(22, 1),  # split_by_unicode_script, _number, _whitespace
        proto_int(24, 0),  # treat_whitespace_as_suffix
        proto_int(26, 1), proto_int(25, 1),  # allow_whitespace_only_pieces, split_digits
        proto_int(35, 1),  # byte_fallback
        proto_int(40, unk_id), proto_int(41, bos_id), proto_int(42, eos_id), proto_int(43, pad_id),
        proto_bytes(45, tokens[unk_id].encode()), proto_bytes(46, tokens[bos_id].encode()),
        proto_bytes(47, tokens[eos_id].encode()), proto_bytes(48, tokens[pad_id].encode()),
    ])
    normalizer = b"".join([
        proto_bytes(1, b"identity"),
        proto_int(3, 0),  # add_dummy_prefix
        proto_int(4, 0),  # remove_extra_whitespaces
        proto_int(5, 1),  # escape_whitespaces
    ])
    return bytes(pieces + proto_bytes(2, trainer) + proto_bytes(3, normalizer))


def split_at_special(text, specials):
    """The text cut at the special-token texts (at each position the longest that starts there, leftmost
    first, as HF's added-token matcher and plumb do): a list of str fragments and int ids."""
    by_length = sorted(specials, key=lambda t: -len(t))
    out, start, i = [], 0, 0
    while i < len(text):
        match = next((t for t in by_length if text.startswith(t, i)), None)
        if match is None:
            i += 1
            continue
        if start < i:
            out.append(text[start:i])
        out.append(specials[match])
        i += len(match)
        start = i
    if start < len(text):
        out.append(text[start:])
    return out


def gemma3_fixtures(model_path, texts):
    if not os.path.isfile(model_path):
        print(f"make_tokenizer_fixtures: {model_path} is absent: expected-gemma3.json not written")
        return
    reader = gguf.GGUFReader(model_path)
    field = lambda key: reader.fields[key].contents()  # noqa: E731
    tokens, scores, types = field("tokenizer.ggml.tokens"), field("tokenizer.ggml.scores"), field(
        "tokenizer.ggml.token_type")
    unk_id, bos_id = field("tokenizer.ggml.unknown_token_id"), field("tokenizer.ggml.bos_token_id")
    eos_id, pad_id = field("tokenizer.ggml.eos_token_id"), field("tokenizer.ggml.padding_token_id")
    sp = spm.SentencePieceProcessor(
        model_proto=gemma3_model_proto(tokens, scores, types, unk_id, bos_id, eos_id, pad_id))
    # The proto says what was meant: the ids and types sentencepiece reads back are the GGUF's.
    assert (sp.unk_id(), sp.bos_id(), sp.eos_id(), sp.pad_id()) == (unk_id, bos_id, eos_id, pad_id)
    assert all(sp.is_byte(i) == (t == 6) and sp.is_control(i) == (t == 3 and i != unk_id)
               for i, t in enumerate(types))
    # sentencepiece never reads control tokens from text; "special" splits at them first and encodes the
    # fragments (no dummy prefix, so a fragment encodes the same wherever it stands), as llama.cpp and HF do.
    specials = {t: i for i, (t, ty) in enumerate(zip(tokens, types)) if ty in (2, 3)}

    def with_special(text):
        ids = []
        for part in split_at_special(text, specials):
            ids += [part] if isinstance(part, int) else sp.encode(part)
        return ids

    write_json(os.path.join(OUT, "expected-gemma3.json"),
               {"source": f"sentencepiece {spm.__version__}, a ModelProto from the vocabulary of "
                          f"{os.path.basename(model_path)} ({len(tokens)} tokens)",
                "plain": [sp.encode(t) for t in texts], "special": [with_special(t) for t in texts],
                "extra": {"texts": GEMMA3_EXTRA, "plain": [sp.encode(t) for t in GEMMA3_EXTRA],
                          "special": [with_special(t) for t in GEMMA3_EXTRA]}})


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    parser.add_argument("--out", default=FIXTURES, help="write here instead of fixtures/tokenizer (to compare)")
    parser.add_argument("--gemma3-model", default=GEMMA3_MODEL,
                        help="the Gemma 3 GGUF whose vocabulary gives expected-gemma3.json (skipped if absent)")
    args = parser.parse_args()
    global OUT
    OUT = args.out
    os.makedirs(OUT, exist_ok=True)
    texts = load_corpus()
    with open(os.path.join(FIXTURES, "corpus.json"), encoding="utf-8") as f:
        raw = json.load(f)
    # Python's errors="replace" decoding of the corpus entries that are not UTF-8: the oracle for plumb's.
    write_json(os.path.join(OUT, "expected-utf8.json"),
               {"source": "bytes.decode('utf-8', errors='replace')",
                "replaced": [t if isinstance(e, dict) else None for e, t in zip(raw, texts)]})
    smollm_fixtures(args.model, texts)
    bpe_tiny_fixtures(texts)
    spm_fixtures(texts)
    gemma3_fixtures(args.gemma3_model, texts)


if __name__ == "__main__":
    main()
