#include "dew/data/tokenizers/tokenizer_fingerprint.h"

#include <cstdint>

#include "dew/core/error.h"
#include "dew/core/sha256.h"

namespace dew::data {

namespace {
void append_u32(std::string& out, std::uint64_t v) {
  for (int b = 0; b < 4; ++b) out += static_cast<char>((v >> (8 * b)) & 0xff);
}
}  // namespace

std::string tokenizer_sha256(const Tokenizer& tokenizer) {
  // What the tokenizer does, not how it is stored: the same vocabulary loaded from tokenizer.json, from
  // encoder.json + vocab.bpe or from a GGUF gives the same description. The EOS id is left out: a copy
  // saved without tokenizer_config.json has the same ids without naming one.
  std::string description = "dew tokenizer fingerprint 1\n";
  const std::int64_t vocab = tokenizer.vocab_size();
  append_u32(description, static_cast<std::uint64_t>(vocab));
  for (std::int64_t id = 0; id < vocab; ++id) {
    const TokenId one[1] = {static_cast<TokenId>(id)};
    std::string bytes;
    try {
      bytes = tokenizer.decode(one);
    } catch (const Error&) {
      bytes = "\xff(undecodable)";  // still part of the description, the same way each time
    }
    append_u32(description, bytes.size());
    description += bytes;
  }
  // Ids alone do not show the merges' priorities or the pre-tokenizer: a probe's encoding does.
  const std::string probe = "Once upon a time, in 1813, Mr. Darcy said:\n\t\"It's naïve — déjà vu 🦄!\"  The quick brown "
                            "fox jumps over the lazy dog 0123456789 ,.;:?!()[]{}<>'\"`~@#$%^&*-_=+/\\|";
  for (TokenId id : tokenizer.encode(probe)) append_u32(description, static_cast<std::uint32_t>(id));
  return sha256_hex(description);
}

}  // namespace dew::data
