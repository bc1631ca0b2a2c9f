#include "dew/objectives/rewards/builtin_rewards.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "dew/core/error.h"
#include "dew/core/printable.h"

namespace dew::objectives::rewards {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alnum(char c) { return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// Digits, commas and at most one '.' -> canonical form: no commas, no leading zeros in the integer part, no
// trailing zeros in the fraction, no "-0".
std::string canonical(bool negative, std::string_view token) {
  std::string integer, fraction;
  auto dot = token.find('.');
  for (char c : token.substr(0, dot)) {
    if (is_digit(c)) integer += c;
  }
  if (dot != std::string_view::npos) fraction = std::string(token.substr(dot + 1));
  auto first = integer.find_first_not_of('0');
  integer = first == std::string::npos ? "0" : integer.substr(first);
  while (!fraction.empty() && fraction.back() == '0') fraction.pop_back();
  std::string out = integer;
  if (!fraction.empty()) out += "." + fraction;
  if (negative && out != "0") out = "-" + out;
  return out;
}

}  // namespace

std::string_view trim_whitespace(std::string_view text) {
  constexpr std::string_view kSpace = " \t\n\r\f\v";
  auto begin = text.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  return text.substr(begin, text.find_last_not_of(kSpace) - begin + 1);
}

std::optional<std::string> last_number(std::string_view text) {
  std::optional<std::string> last;
  std::size_t i = 0, n = text.size();
  while (i < n) {
    bool starts = is_digit(text[i]) || (text[i] == '.' && i + 1 < n && is_digit(text[i + 1]));
    if (!starts) {
      ++i;
      continue;
    }
    std::size_t start = i, j = i;
    while (j < n && is_digit(text[j])) ++j;
    // Thousands groups: only after a leading group of 1-3 digits, each exactly 3 digits long.
    if (j > start && j - start <= 3) {
      while (j + 3 < n && text[j] == ',' && is_digit(text[j + 1]) && is_digit(text[j + 2]) && is_digit(text[j + 3]) &&
             (j + 4 >= n || !is_digit(text[j + 4]))) {
        j += 4;
      }
    }
    if (j + 1 < n && text[j] == '.' && is_digit(text[j + 1])) {
      ++j;
      while (j < n && is_digit(text[j])) ++j;
    }
    bool negative = start > 0 && text[start - 1] == '-' && (start < 2 || !is_alnum(text[start - 2]));
    last = canonical(negative, text.substr(start, j - start));
    i = j;
  }
  return last;
}

std::vector<double> ExactMatchReward::score(const std::vector<RewardInput>& batch) {
  std::vector<double> out;
  out.reserve(batch.size());
  for (const auto& row : batch) {
    out.push_back(trim_whitespace(row.completion) == trim_whitespace(row.ground_truth) ? 1.0 : 0.0);
  }
  return out;
}

std::vector<double> LastNumberReward::score(const std::vector<RewardInput>& batch) {
  std::vector<double> out;
  out.reserve(batch.size());
  for (const auto& row : batch) {
    auto want = last_number(row.ground_truth);
    if (!want) {
      dew::fail("reward last_number: the ground truth '", printable(row.ground_truth.substr(0, 200)),
                "' holds no number; this reward needs numeric ground truths (use exact_match or a --reward-cmd)");
    }
    auto got = last_number(row.completion);
    out.push_back(got && *got == *want ? 1.0 : 0.0);
  }
  return out;
}

struct RegexReward::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

namespace {
std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof buffer);
  return reinterpret_cast<const char*>(buffer);
}
}  // namespace

RegexReward::RegexReward(const std::string& pattern) : pattern_(pattern), compiled_(std::make_unique<Compiled>()) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  // MATCH_INVALID_UTF: a completion cut mid-character by a byte-level tokenizer is matched, not refused.
  compiled_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                  PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &offset, nullptr);
  if (!compiled_->code) {
    dew::fail("reward regex:", pattern, " is not a valid PCRE2 pattern at offset ", offset, ": ", pcre2_message(error));
  }
  pcre2_jit_compile(compiled_->code, PCRE2_JIT_COMPLETE);  // without JIT pcre2_match interprets: same matches
}

RegexReward::~RegexReward() = default;

std::vector<double> RegexReward::score(const std::vector<RewardInput>& batch) {
  std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> data(
      pcre2_match_data_create_from_pattern(compiled_->code, nullptr), pcre2_match_data_free);
  std::vector<double> out;
  out.reserve(batch.size());
  for (const auto& row : batch) {
    int rc = pcre2_match(compiled_->code, reinterpret_cast<PCRE2_SPTR>(row.completion.data()), row.completion.size(), 0,
                         0, data.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) {
      out.push_back(0.0);
    } else if (rc < 0) {
      dew::fail("reward regex:", pattern_, " failed on a ", row.completion.size(), "-byte completion: ",
                pcre2_message(rc), "; simplify the pattern");
    } else {
      out.push_back(1.0);
    }
  }
  return out;
}

}  // namespace dew::objectives::rewards
