#include "dew/data/tokenizers/byte_level.h"

#include <cstdint>

namespace dew::data {
namespace {

std::string utf8(std::uint32_t code_point) {
  std::string out;
  if (code_point < 0x80) {
    out += static_cast<char>(code_point);
  } else {  // the alphabet stays below U+0800: two bytes suffice
    out += static_cast<char>(0xC0 | (code_point >> 6));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  }
  return out;
}

bool stands_for_itself(int byte) {
  return (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) || (byte >= 0xAE && byte <= 0xFF);
}

struct Tables {
  std::array<std::string, 256> alphabet;
  std::array<std::int16_t, 0x180> byte_of_code_point;  // -1: not in the alphabet
  Tables() {
    byte_of_code_point.fill(-1);
    std::uint32_t next = 256;
    for (int byte = 0; byte < 256; ++byte) {
      std::uint32_t code_point = stands_for_itself(byte) ? static_cast<std::uint32_t>(byte) : next++;
      alphabet[byte] = utf8(code_point);
      byte_of_code_point[code_point] = static_cast<std::int16_t>(byte);
    }
  }
};

const Tables& tables() {
  static const Tables instance;
  return instance;
}

}  // namespace

const std::array<std::string, 256>& byte_level_alphabet() { return tables().alphabet; }

std::string to_byte_level(std::string_view raw) {
  const auto& alphabet = tables().alphabet;
  std::string out;
  out.reserve(raw.size() * 2);
  for (unsigned char byte : raw) out += alphabet[byte];
  return out;
}

std::optional<std::string> from_byte_level(std::string_view text) {
  const auto& table = tables().byte_of_code_point;
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    auto lead = static_cast<unsigned char>(text[i]);
    std::uint32_t code_point;
    if (lead < 0x80) {
      code_point = lead;
      i += 1;
    } else if ((lead & 0xE0) == 0xC0 && i + 1 < text.size() && (static_cast<unsigned char>(text[i + 1]) & 0xC0) == 0x80) {
      code_point = ((lead & 0x1Fu) << 6) | (static_cast<unsigned char>(text[i + 1]) & 0x3Fu);
      i += 2;
      if (code_point < 0x80) return std::nullopt;  // an overlong form is not UTF-8
    } else {
      return std::nullopt;  // three- and four-byte characters are all outside the alphabet
    }
    if (code_point >= table.size() || table[code_point] < 0) return std::nullopt;
    out += static_cast<char>(table[code_point]);
  }
  return out;
}

}  // namespace dew::data
