#pragma once
// dew's error type and a small message builder.
//
// Everything that comes from outside (files, configs, requests) can be wrong. Such problems are thrown as
// dew::Error whose message names the file, the field, the value and what to do instead; the CLI prints
// the message and exits non-zero. Nothing aborts the process on user input.
#include <sstream>
#include <stdexcept>
#include <string>

namespace dew {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Concatenates anything streamable: str("file ", path, ": ", n, " bytes").
template <class... Args>
std::string str(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

template <class... Args>
[[noreturn]] void fail(const Args&... args) {
  throw Error(::dew::str(args...));
}

}  // namespace dew
