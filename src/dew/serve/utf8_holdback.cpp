#include "dew/serve/utf8_holdback.h"

#include <cstdint>

namespace dew::serve {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

// How many bytes the sequence starting with `lead` has (0 for a byte that cannot start one).
int sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;  // continuation bytes, overlong leads C0/C1, F5..FF
}

// Whether the i-th byte (i >= 1) after `lead` is allowed: 80..BF, narrowed for the second byte so
// overlong forms, surrogates and code points past U+10FFFF are refused (RFC 3629's table).
bool continuation_ok(unsigned char lead, int i, unsigned char byte) {
  if (i == 1) {
    if (lead == 0xE0) return byte >= 0xA0 && byte <= 0xBF;
    if (lead == 0xED) return byte >= 0x80 && byte <= 0x9F;
    if (lead == 0xF0) return byte >= 0x90 && byte <= 0xBF;
    if (lead == 0xF4) return byte >= 0x80 && byte <= 0x8F;
  }
  return byte >= 0x80 && byte <= 0xBF;
}

// Appends the valid characters of bytes[0..) to `out`, replacing invalid sequences; returns how many
// bytes at the end form an unfinished (but so far valid) sequence, which are not consumed.
std::size_t decode_into(std::string_view bytes, std::string& out) {
  std::size_t i = 0;
  while (i < bytes.size()) {
    auto lead = static_cast<unsigned char>(bytes[i]);
    int length = sequence_length(lead);
    if (length == 0) {
      out += kReplacement;
      ++i;
      continue;
    }
    int have = 1;
    bool broken = false;
    while (have < length && i + have < bytes.size()) {
      if (!continuation_ok(lead, have, static_cast<unsigned char>(bytes[i + have]))) {
        broken = true;
        break;
      }
      ++have;
    }
    if (broken) {  // the valid prefix is one replaced character; the breaking byte starts afresh
      out += kReplacement;
      i += have;
      continue;
    }
    if (have < length) return bytes.size() - i;  // the end of the input came first: hold it
    out.append(bytes.substr(i, length));
    i += length;
  }
  return 0;
}

}  // namespace

std::string Utf8Holdback::push(std::string_view bytes) {
  pending_.append(bytes);
  std::string out;
  std::size_t held = decode_into(pending_, out);
  pending_.erase(0, pending_.size() - held);
  return out;
}

std::string Utf8Holdback::flush() {
  std::string out;
  if (!pending_.empty()) out = std::string(kReplacement);
  pending_.clear();
  return out;
}

std::string valid_utf8(std::string_view bytes) {
  std::string out;
  if (decode_into(bytes, out) > 0) out += kReplacement;
  return out;
}

std::size_t utf8_length(std::string_view text) {
  std::size_t count = 0;
  for (char c : text) count += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return count;
}

}  // namespace dew::serve
