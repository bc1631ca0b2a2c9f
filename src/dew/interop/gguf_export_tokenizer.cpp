// A PretrainedTokenizer as llama.cpp's tokenizer.* metadata (the inverse of gguf_file_tokenizer.cpp).
#include <map>

#include "dew/core/error.h"
#include "dew/data/tokenizers/bpe_tokenizer.h"
#include "dew/data/tokenizers/gguf_tokenizer.h"
#include "dew/interop/gguf_export.h"

namespace dew::interop {
namespace {

// llama.cpp's token types.
constexpr std::int32_t kNormal = 1, kControl = 3, kUserDefined = 4, kUnused = 5;

// The llama.cpp pre-tokenizer name whose regexes (and whole-token rule) are the tokenizer's. One name per
// distinct behaviour, spelled as llama.cpp's llama-vocab.cpp spells it: it refuses a name it does not know
// ("unknown pre-tokenizer type"), and GPT-2's is "gpt-2" there; dew's reader also takes "gpt2", which dew
// wrote before, but llama.cpp does not.
std::string infer_pre(const data::BpeDefinition& definition) {
  for (const char* name : {"gpt-2", "smollm", "qwen2", "llama-bpe"}) {
    data::GgufPreTokenizer pre = data::gguf_pre_tokenizer(name, "(export)");
    if (pre.split_patterns == definition.split_patterns && pre.ignore_merges == definition.ignore_merges) return name;
  }
  std::string patterns;
  for (const auto& p : definition.split_patterns) patterns += (patterns.empty() ? "" : ", ") + p;
  dew::fail("GGUF export: the tokenizer's pre-tokenizer (split patterns [", patterns, "], ignore_merges ",
            definition.ignore_merges, ") matches no llama.cpp tokenizer.ggml.pre name dew knows (gpt-2, smollm, "
            "qwen2, llama-bpe); set GgufExportOptions::tokenizer_pre if you know the right one");
}

}  // namespace

void add_gguf_tokenizer(formats::GgufWriter& writer, const data::PretrainedTokenizer& tokenizer,
                        std::int64_t vocab_size, const std::string& pre) {
  const auto* bpe = dynamic_cast<const data::BpeTokenizer*>(tokenizer.tokenizer.get());
  if (!bpe)
    dew::fail("GGUF export: the tokenizer is '", tokenizer.tokenizer ? tokenizer.tokenizer->name() : "(none)",
              "', not byte-level BPE; GGUF's tokenizer.ggml.model \"gpt2\" needs a BPE vocabulary (a byte "
              "tokenizer has no GPT-2 byte-level tokens llama.cpp would pre-tokenize the same way)");
  const data::BpeDefinition& definition = bpe->definition();
  if (bpe->vocab_size() > vocab_size)
    dew::fail("GGUF export: the tokenizer has ", bpe->vocab_size(), " token ids but the model's vocab_size is ",
              vocab_size, "; ids beyond the embedding matrix cannot be written");

  std::map<data::TokenId, const data::AddedToken*> added;
  for (const auto& token : definition.added_tokens) added[token.id] = &token;
  std::vector<std::string> tokens(static_cast<std::size_t>(vocab_size));
  std::vector<std::int32_t> types(tokens.size(), kNormal);
  for (std::size_t id = 0; id < tokens.size(); ++id) {
    if (auto it = added.find(static_cast<data::TokenId>(id)); it != added.end()) {
      // As convert_hf_to_gguf.py stores added tokens: their content, not byte-level text.
      tokens[id] = it->second->content;
      types[id] = it->second->special ? kControl : kUserDefined;
    } else if (id < definition.vocab.size() && !definition.vocab[id].empty()) {
      tokens[id] = definition.vocab[id];
    } else {
      tokens[id] = "[PAD" + std::to_string(id) + "]";
      types[id] = kUnused;
    }
  }
  std::vector<std::string> merges;
  merges.reserve(definition.merges.size());
  for (const auto& [left, right] : definition.merges) merges.push_back(left + " " + right);

  writer.set_string("tokenizer.ggml.model", "gpt2");
  writer.set_string("tokenizer.ggml.pre", pre.empty() ? infer_pre(definition) : pre);
  writer.set_strings("tokenizer.ggml.tokens", tokens);
  writer.set_int32s("tokenizer.ggml.token_type", types);
  writer.set_strings("tokenizer.ggml.merges", merges);
  auto set_id = [&](const char* key, std::optional<data::TokenId> id) {
    if (id) writer.set_uint32(key, static_cast<std::uint32_t>(*id));
  };
  set_id("tokenizer.ggml.bos_token_id", tokenizer.bos_id);
  set_id("tokenizer.ggml.eos_token_id", tokenizer.eos_id);
  set_id("tokenizer.ggml.padding_token_id", tokenizer.pad_id);
  // Stop ids after EOS: llama.cpp knows two more kinds, end of turn and end of message.
  std::vector<data::TokenId> extra_stops;
  for (data::TokenId id : tokenizer.stop_ids)
    if (!tokenizer.eos_id || id != *tokenizer.eos_id) extra_stops.push_back(id);
  if (extra_stops.size() > 2)
    dew::fail("GGUF export: the tokenizer has ", extra_stops.size() + 1, " stop ids; GGUF stores three at most "
              "(tokenizer.ggml.eos_token_id, eot_token_id, eom_token_id)");
  if (!extra_stops.empty()) set_id("tokenizer.ggml.eot_token_id", extra_stops[0]);
  if (extra_stops.size() > 1) set_id("tokenizer.ggml.eom_token_id", extra_stops[1]);
  writer.set_bool("tokenizer.ggml.add_bos_token", tokenizer.add_bos);
  writer.set_bool("tokenizer.ggml.add_eos_token", false);
  if (tokenizer.chat_template) writer.set_string("tokenizer.chat_template", tokenizer.chat_template->source());
}

}  // namespace dew::interop
