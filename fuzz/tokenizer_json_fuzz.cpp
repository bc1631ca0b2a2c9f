// Feeds arbitrary bytes to the tokenizer.json reader as a file's text. Bad input may only raise dew::Error;
// whatever loads must encode and round-trip a few strings. Seeds: fuzz/seeds/tokenizer_json/.
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
    for (std::string sample : {std::string("Hello, world! It's 2024."), std::string("\xff\xfe a\xc3"), std::string(text.substr(0, 64))}) {
      for (bool special : {false, true}) {
        auto ids = tokenizer.encode(sample, special);
        if (tokenizer.decode(ids) != sample) std::abort();
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
