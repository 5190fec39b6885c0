// The tokenizer of a GGUF model written as the files of a packed (Hugging Face style) checkpoint, so that a
// checkpoint plumb pack makes from a GGUF file carries its tokenizer and loads it back exactly. The mapping
// is specified in docs/formats.md ("The tokenizer of a GGUF source"); why each model gets the files it gets
// is in docs/tokenizers.md ("Packed checkpoints").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plumb/tokenizer/tokenizer.h"

namespace plumb {

class GgufFile;

struct TokenizerJsonFiles {
  std::string tokenizer_json;         // tokenizer.json
  std::string tokenizer_config_json;  // tokenizer_config.json: BOS/EOS/PAD, add_bos/eos_token, chat_template
};

// Files that Tokenizer::FromTokenizerJson reads back as a tokenizer that encodes and decodes exactly as
// Tokenizer(spec) does. Byte-level BPE ("gpt2") only: its four pre-tokenizers map onto tokenizer.json's
// ByteLevel / Split / Digits. The spec's eot_id has no tokenizer.json field; callers put it among
// config.json's eos_token_id (plumb stops on those). Throws plumb::Error, naming what cannot be written,
// for a SentencePiece ("llama") spec (tokenizer.json says BPE by merge rank, where llama.cpp merges by
// score, and the two differ on ties: use ExportTokenizerGguf) and for token types tokenizer.json cannot
// express (unused, byte).
TokenizerJsonFiles ExportTokenizerJson(const TokenizerSpec& spec);

// tokenizer_config.json of a spec: bos/eos/pad/unk token texts, add_bos_token, add_eos_token, chat_template,
// and tokenizer_class for a byte-level spec. For other tools: plumb reads the tokenizer from tokenizer.json
// or tokenizer.gguf.
std::string TokenizerConfigJson(const TokenizerSpec& spec);

// A vocab-only GGUF (no tensors) holding `source`'s general.architecture and general.name and every
// tokenizer.* key (tokenizer.ggml.*, tokenizer.chat_template, ...) as stored, so that Tokenizer::FromGguf
// of it is Tokenizer::FromGguf(source), whatever the tokenizer model. Throws plumb::Error naming the file
// when it has no tokenizer.ggml.model.
std::vector<std::uint8_t> ExportTokenizerGguf(const GgufFile& source);

struct TokenizerFile {
  std::string name;      // a file name: "tokenizer.json", "tokenizer.gguf", "tokenizer_config.json"
  std::string contents;  // its bytes
};

// The tokenizer files of a checkpoint packed from the GGUF `source`, by tokenizer.ggml.model:
//   "gpt2"  (byte-level BPE): tokenizer.json and tokenizer_config.json (ExportTokenizerJson);
//   "llama" (SentencePiece):  tokenizer.gguf (ExportTokenizerGguf) and tokenizer_config.json.
// Throws plumb::Error as TokenizerSpecFromGguf and the two exporters do.
std::vector<TokenizerFile> ExportGgufTokenizer(const GgufFile& source);

}  // namespace plumb
