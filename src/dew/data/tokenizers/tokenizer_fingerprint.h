#pragma once
// A tokenizer's fingerprint: SHA-256 over a canonical description of what it does, so that a token
// directory and a run can tell whether their ids come from the same vocabulary (meta.json and run.json
// record it as tokenizer_sha256).
#include <string>

#include "dew/data/tokenizers/tokenizer.h"

namespace dew::data {

// Lowercase hex SHA-256 of: the vocabulary size, the bytes of every id (decode of the id alone), and the
// ids of a fixed probe text (prose, digits, whitespace, accents, emoji: the merges and pre-tokenizer at
// work). Equal for the same tokenizer however it was loaded (its file, a saved copy, a GGUF's metadata);
// different for the byte tokenizer and any BPE, and for two BPEs of one size that map an id differently.
std::string tokenizer_sha256(const Tokenizer& tokenizer);

}  // namespace dew::data
