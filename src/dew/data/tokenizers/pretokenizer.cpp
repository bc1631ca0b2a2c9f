#include "dew/data/tokenizers/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "dew/core/error.h"
#include "dew/data/tokenizers/gpt2_split.h"

namespace dew::data {
namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof buffer);
  return reinterpret_cast<const char*>(buffer);
}

// Match data and a JIT stack for each thread: a compiled pattern is shared, matching state is not.
struct MatchScratch {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 16 * 1024 * 1024, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  MatchScratch() {
    if (!data || !stack || !context) throw std::bad_alloc();
    pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~MatchScratch() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(data);
  }
};

MatchScratch& scratch() {
  thread_local MatchScratch instance;
  return instance;
}

// Patterns for which a cut before a space between two ASCII letters is proven not to change the pieces
// (bpe_tokenizer.cpp, safe_cut, says why). tiktoken spells GPT-2's contractions differently.
bool keeps_words_apart(std::string_view pattern) {
  return pattern == kGpt2Pattern || pattern == kLlama3Pattern || pattern == kQwen2Pattern ||
         pattern == kEachDigitPattern || pattern == kDigitRunPattern ||
         pattern == R"('(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
}

}  // namespace

struct PreTokenizer::Step {
  pcre2_code* code = nullptr;
  bool jit = false;
  bool gpt2 = false;  // kGpt2Pattern: try the hand-written ASCII matcher first
  ~Step() { pcre2_code_free(code); }
};

PreTokenizer::PreTokenizer(std::vector<std::string> patterns) : patterns_(std::move(patterns)) {
  cuts_between_words_ = true;
  for (std::size_t i = 0; i < patterns_.size(); ++i) {
    const std::string& pattern = patterns_[i];
    auto step = std::make_unique<Step>();
    int error = 0;
    PCRE2_SIZE error_offset = 0;
    step->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                               PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &error_offset, nullptr);
    if (!step->code)
      fail("pre-tokenizer regex '", pattern, "' is not valid for PCRE2 at offset ", error_offset, ": ",
           pcre2_message(error));
    // Without JIT (PCRE2 built without it, or no executable memory) the interpreter gives the same matches.
    step->jit = pcre2_jit_compile(step->code, PCRE2_JIT_COMPLETE) == 0;
    step->gpt2 = pattern == kGpt2Pattern;
    cuts_between_words_ = cuts_between_words_ && keeps_words_apart(pattern);
    steps_.push_back(std::move(step));
  }
}

PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;

bool PreTokenizer::find(std::size_t step_index, std::string_view subject, std::size_t offset, std::size_t& start,
                        std::size_t& end) const {
  const Step& step = *steps_[step_index];
  if (step.gpt2) {
    if (std::size_t fast_end = gpt2_ascii_match_end(subject, offset)) {
      start = offset;
      end = fast_end;
      return true;
    }
  }
  MatchScratch& s = scratch();
  auto text = reinterpret_cast<PCRE2_SPTR>(subject.data());
  int rc = step.jit ? pcre2_jit_match(step.code, text, subject.size(), offset, 0, s.data, s.context)
                    : pcre2_match(step.code, text, subject.size(), offset, 0, s.data, s.context);
  if (rc == PCRE2_ERROR_JIT_STACKLIMIT)  // the interpreter keeps its backtracking on the heap instead
    rc = pcre2_match(step.code, text, subject.size(), offset, 0, s.data, s.context);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0)
    fail("pre-tokenizer regex '", patterns_[step_index], "' failed on a ", subject.size(),
         "-byte piece at offset ", offset, ": ", pcre2_message(rc));
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(s.data);
  start = ovector[0];
  end = ovector[1];
  return true;
}

}  // namespace dew::data
