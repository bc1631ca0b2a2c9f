#include "dew/data/tokenizers/base64.h"

#include <array>

namespace dew::data {

bool base64_decode(std::string_view text, std::string& out) {
  static const std::array<int, 256> values = [] {
    std::array<int, 256> table{};
    table.fill(-1);
    const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int i = 0; i < 64; ++i) table[static_cast<unsigned char>(alphabet[i])] = i;
    return table;
  }();
  while (!text.empty() && text.back() == '=') text.remove_suffix(1);
  if (text.size() % 4 == 1) return false;
  out.clear();
  out.reserve(text.size() * 3 / 4);
  unsigned bits = 0;
  int count = 0;
  for (unsigned char c : text) {
    int v = values[c];
    if (v < 0) return false;
    bits = (bits << 6) | static_cast<unsigned>(v);
    count += 6;
    if (count >= 8) {
      count -= 8;
      out += static_cast<char>((bits >> count) & 0xFF);
    }
  }
  return true;
}

}  // namespace dew::data
