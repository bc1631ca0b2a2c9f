// Issue 8, the torch-free part: names read from a file are quoted in messages with their odd bytes
// escaped, so a GGUF key holding a NUL does not cut the message short.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "dew/core/error.h"
#include "dew/core/printable.h"
#include "dew/formats/gguf_file.h"
#include "test_support.h"

namespace {

// A GGUF v3 header, little-endian, built field by field.
struct GgufBytes {
  std::vector<std::uint8_t> data;
  template <class T>
  GgufBytes& put(T v) {
    const auto* p = reinterpret_cast<const std::uint8_t*>(&v);
    data.insert(data.end(), p, p + sizeof(T));
    return *this;
  }
  GgufBytes& str(const std::string& s) {
    put<std::uint64_t>(s.size());
    data.insert(data.end(), s.begin(), s.end());
    return *this;
  }
};

TEST(ReliabilityRuntimeText, PrintableEscapesNulAndControlBytes) {
  EXPECT_EQ(dew::printable(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(dew::printable("tab\there\n\x7f"), "tab\\x09here\\x0a\\x7f");
  EXPECT_EQ(dew::printable("back\\slash"), "back\\\\slash");
  EXPECT_EQ(dew::printable("general.name caf\xc3\xa9"), "general.name caf\xc3\xa9");  // UTF-8 stays
}

TEST(ReliabilityRuntimeText, GgufKeyWithANulIsQuotedWhole) {
  const std::string key("bad\0key", 7);
  GgufBytes b;
  b.put<std::uint32_t>(0x46554747).put<std::uint32_t>(3).put<std::uint64_t>(0).put<std::uint64_t>(1);
  b.str(key).put<std::uint32_t>(13).put<std::uint32_t>(0);  // value type 13 does not exist
  // what() is a C string: before the fix it ended at the NUL, "...key 'bad".
  auto message = dew::test::error_of([&] { dew::formats::GgufFile(b.data, "nul.gguf"); });
  EXPECT_NE(message.find("'nul.gguf': key 'bad\\x00key' has unknown value type 13"), std::string::npos) << message;

  GgufBytes twice;  // and a key that appears twice
  twice.put<std::uint32_t>(0x46554747).put<std::uint32_t>(3).put<std::uint64_t>(0).put<std::uint64_t>(2);
  twice.str(key).put<std::uint32_t>(4).put<std::uint32_t>(1);
  twice.str(key).put<std::uint32_t>(4).put<std::uint32_t>(2);
  message = dew::test::error_of([&] { dew::formats::GgufFile(twice.data, "nul.gguf"); });
  EXPECT_NE(message.find("metadata key 'bad\\x00key' appears twice"), std::string::npos) << message;

  // A value of the wrong type, read through GgufValue.
  GgufBytes typed;
  typed.put<std::uint32_t>(0x46554747).put<std::uint32_t>(3).put<std::uint64_t>(0).put<std::uint64_t>(1);
  typed.str(key).put<std::uint32_t>(4).put<std::uint32_t>(7);  // uint32
  dew::formats::GgufFile file(typed.data, "typed.gguf");
  message = dew::test::error_of([&] { (void)file.at(key).as_string(); });
  EXPECT_NE(message.find("GGUF key 'bad\\x00key' is a uint32"), std::string::npos) << message;
}

}  // namespace
