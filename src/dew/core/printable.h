#pragma once
// Names read from files (GGUF keys, tensor names) are quoted in error messages. They can hold any byte:
// a NUL would cut the message where it is printed as a C string, and control bytes garble the terminal.
#include <string>
#include <string_view>

namespace dew {

// `text` with NUL, control bytes (< 0x20, 0x7f) and backslashes escaped as \xNN (\\ for a backslash);
// every other byte, UTF-8 included, as is.
std::string printable(std::string_view text);

}  // namespace dew
