// Feeds arbitrary bytes to the tokenizer.json reader as a file's text. Bad input may only raise dew::Error;
// whatever loads must encode and round-trip a few strings: exactly when the vocabulary has a token for each
// of the 256 bytes; otherwise (SmolLM2 lacks 21) encoding drops the bytes it has no token for, as Hugging
// Face's BPE without an unknown token does, so the round trip can only be shorter.
// Seeds: fuzz/seeds/tokenizer_json/.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "dew/core/error.h"
#include "dew/data/tokenizers/bpe_tokenizer.h"
#include "dew/data/tokenizers/tokenizer_json.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    dew::data::BpeTokenizer tokenizer(dew::data::parse_tokenizer_json(text, "fuzz/tokenizer.json"), "fuzz");
    bool every_byte = true;
    for (int byte = 0; byte < 256; ++byte) every_byte = every_byte && tokenizer.token_id(std::string(1, static_cast<char>(byte)));
    for (std::string sample : {std::string("Hello, world! It's 2024."), std::string("\xff\xfe a\xc3"), std::string(text.substr(0, 64))}) {
      for (bool special : {false, true}) {
        auto ids = tokenizer.encode(sample, special);
        const std::string back = tokenizer.decode(ids);
        if (every_byte ? back != sample : back.size() > sample.size()) std::abort();
      }
    }
    if (dew::data::parse_tokenizer_json(dew::data::write_tokenizer_json(tokenizer.definition()), "saved").vocab !=
        tokenizer.definition().vocab)
      std::abort();
  } catch (const dew::Error&) {
    // Refused with a message: what the reader is for.
  }
  return 0;
}
