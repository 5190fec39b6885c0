// A TokenizerSpec written out as Hugging Face tokenizer.json + tokenizer_config.json, so that a checkpoint
// plumb pack makes from a GGUF file carries its tokenizer in the form Hugging Face checkpoints do. The
// mapping is specified in docs/formats.md ("The tokenizer of a GGUF source").
#pragma once

#include <string>

#include "plumb/tokenizer/tokenizer.h"

namespace plumb {

struct TokenizerJsonFiles {
  std::string tokenizer_json;         // tokenizer.json
  std::string tokenizer_config_json;  // tokenizer_config.json: BOS/EOS/PAD, add_bos/eos_token, chat_template
};

// Files that Tokenizer::FromTokenizerJson reads back as a tokenizer that encodes and decodes exactly as
// Tokenizer(spec) does. Byte-level BPE ("gpt2") only: its four pre-tokenizers map onto tokenizer.json's
// ByteLevel / Split / Digits. The spec's eot_id has no tokenizer.json field; callers put it among
// config.json's eos_token_id (plumb stops on those). Throws plumb::Error, naming what cannot be written,
// for a SentencePiece ("llama") spec (tokenizer.json says BPE by merge rank, where llama.cpp merges by
// score, and the two differ on ties) and for token types tokenizer.json cannot express (unused, byte).
TokenizerJsonFiles ExportTokenizerJson(const TokenizerSpec& spec);

}  // namespace plumb
