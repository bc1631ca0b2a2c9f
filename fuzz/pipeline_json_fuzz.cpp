// Feeds arbitrary bytes to the general tokenizer.json pipeline reader (pipeline_tokenizer.h) as a file's text.
// Bad input may only raise dew::Error; whatever loads must encode a few strings (special tokens allowed or
// not), decode what it encoded, and apply its post-processor, without crashing.
// Seeds: the fixtures' tokenizer.json files, e.g.
//   mkdir -p fuzz/corpus-pipeline_json && cp tests/fixtures/pipeline_tokenizers/*/tokenizer.json ...
#include <cstdint>
#include <string>

#include "dew/core/error.h"
#include "dew/data/tokenizers/pipeline_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    dew::data::PipelineTokenizer tokenizer(dew::data::read_tokenizer_pipeline(text, "fuzz/tokenizer.json"), "fuzz");
    for (std::string sample : {std::string("Hello, world! It's 2024. Café ﬁ ① 日本"), std::string("\xff\xfe a\xc3  \t\n"),
                               std::string(text.substr(0, 64))}) {
      for (bool special : {false, true}) {
        auto ids = tokenizer.encode(sample, special);
        tokenizer.decode(ids);
        tokenizer.add_special_tokens(ids);
      }
    }
  } catch (const dew::Error&) {
    // Refused with a message: what the reader is for.
  }
  return 0;
}
