#pragma once
// The lines of a small text file (class lists, label lists), for readers that report errors by line number.
#include <string>
#include <vector>

namespace dew {

// `text` split at '\n', each line with trailing whitespace (spaces, tabs, '\r') removed; lines[i] is line
// i + 1. A final newline does not start another (empty) line.
std::vector<std::string> text_lines(const std::string& text);

}  // namespace dew
