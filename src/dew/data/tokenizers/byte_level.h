#pragma once
// GPT-2's byte-level alphabet: every byte 0-255 is written as one printable Unicode character, so a
// vocabulary of byte strings can be stored as text (tokenizer.json, encoder.json, vocab.bpe). Printable
// Latin-1 bytes stand for themselves; the others (controls, space, 0x7F-0xA0, 0xAD) become U+0100 onwards,
// in byte order. A space is therefore 'Ġ' (U+0120) and a newline 'Ċ' (U+010A).
#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace dew::data {

// The UTF-8 text of the character that stands for each byte.
const std::array<std::string, 256>& byte_level_alphabet();

// Raw bytes -> their byte-level text ("a b" -> "aĠb").
std::string to_byte_level(std::string_view raw);

// Byte-level text -> raw bytes, or nullopt if it holds a character outside the alphabet (or is not UTF-8).
std::optional<std::string> from_byte_level(std::string_view text);

}  // namespace dew::data
