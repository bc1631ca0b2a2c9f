// tokenizer.* metadata of a GGUF file -> data::GgufTokenizerMetadata -> PretrainedTokenizer.
#include "dew/data/tokenizers/gguf_tokenizer.h"
#include "dew/interop/gguf_model.h"

namespace dew::interop {

data::PretrainedTokenizer gguf_file_tokenizer(const formats::GgufFile& file) {
  return data::gguf_pretrained_tokenizer(data::gguf_tokenizer_metadata(file), file.name());
}

}  // namespace dew::interop
