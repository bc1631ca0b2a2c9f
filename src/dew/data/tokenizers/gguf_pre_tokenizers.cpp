// tokenizer.ggml.pre names -> the regex splits llama.cpp applies before BPE (its llama-vocab.cpp, release
// shipped in llama-cpp-python 0.3.36), one row per group of names that share a set.
#include <string_view>

#include "dew/core/error.h"
#include "dew/data/tokenizers/gguf_tokenizer.h"

namespace dew::data {
namespace {

constexpr std::string_view kDefaultPunctuation = R"([\p{P}\$\+<=>\^~\|]+)";
constexpr std::string_view kDigitRuns = R"(\p{N}+)";
constexpr std::string_view kThreeDigits = R"([0-9][0-9][0-9])";
// DeepSeek LLM's letter ranges, written as code points so that look-alike letters (the Kelvin and Ohm signs) stay apart.
constexpr std::string_view kDeepseekLetters =
    R"(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)";
constexpr std::string_view kCjkRuns = R"([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)";
constexpr std::string_view kQwen35Pattern =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kChatGlm4Pattern =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kBloomPattern = R"( ?[^(\s|.,!?…。，、।۔،)]+)";
constexpr std::string_view kTekkenPattern =
    R"([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kGpt4oPattern =
    R"([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct Row {
  std::vector<std::string_view> names;
  std::vector<std::string_view> patterns;
  bool ignore_merges = false;
  bool add_bos = false;
};

const std::vector<Row>& table() {
  static const std::vector<Row> rows = {
      {{"default"}, {kDefaultPunctuation, kGpt2Pattern, kDigitRuns, kThreeDigits}},
      {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"},
       {kLlama3Pattern}, true, true},
      {{"dbrx", "smaug-bpe"}, {kLlama3Pattern}},
      {{"deepseek-llm"},
       {"[\r\n]", kDeepseekLetters, R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)", R"(\s+$)", kCjkRuns, kDigitRuns}},
      {{"deepseek-coder"}, {"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kCjkRuns, R"(\p{N})"}},
      {{"falcon"}, {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2Pattern, kThreeDigits}},
      {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"},
       {kEachDigitPattern, kGpt2Pattern}},
      {{"gpt-2", "gpt2", "phi-2", "mpt", "olmo", "jais", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de",
        "a.x-4.0", "mellum", "modern-bert", "trillion", "granite-docling", "exaone4", "roberta-bpe", "jina-v1-en",
        "jina-v2-code"},
       {kGpt2Pattern}},
      {{"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez", "stablelm2"}, {kQwen2Pattern}},
      {{"qwen35"}, {kQwen35Pattern}},
      {{"poro-chat", "bloom", "gpt3-finnish"}, {kBloomPattern}},
      {{"viking"}, {kBloomPattern, R"(\p{N})"}},
      {{"chatglm-bpe"}, {kChatGlm4Pattern}},
      {{"glm4", "glm5"}, {kChatGlm4Pattern}, true},
      {{"tekken"}, {kTekkenPattern}, true, true},
      {{"gpt-4o", "llama4", "kanana2", "talkie"}, {kGpt4oPattern}},
  };
  return rows;
}

std::string known_names() {
  std::string out;
  for (const Row& row : table())
    for (std::string_view name : row.names) out += (out.empty() ? "" : ", ") + std::string(name);
  return out;
}

}  // namespace

GgufPreTokenizer gguf_pre_tokenizer(const std::string& pre, const std::string& file) {
  if (pre.empty())
    fail(file, ": metadata 'tokenizer.ggml.pre' is missing, so the pre-tokenizer the vocabulary was trained with "
         "is unknown; supported: ", known_names());
  for (const Row& row : table())
    for (std::string_view name : row.names)
      if (pre == name) {
        GgufPreTokenizer out;
        for (std::string_view pattern : row.patterns) out.split_patterns.emplace_back(pattern);
        out.ignore_merges = row.ignore_merges;
        out.add_bos_default = row.add_bos;
        return out;
      }
  fail(file, ": metadata 'tokenizer.ggml.pre' is \"", pre, "\", a pre-tokenizer dew does not know; supported: ",
       known_names());
}

}  // namespace dew::data
