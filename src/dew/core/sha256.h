#pragma once
// SHA-256 (FIPS 180-4) of a byte string, as lowercase hex: fingerprints of small canonical descriptions
// (a tokenizer's vocabulary), not of large files.
#include <string>
#include <string_view>

namespace dew {

std::string sha256_hex(std::string_view data);

}  // namespace dew
