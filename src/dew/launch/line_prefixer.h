#pragma once
// One output stream of one rank, cut into lines that each start with the rank's prefix ("[rank 3] ").
// The launcher writes whole lines only, so lines of different ranks never mix mid-line however the
// ranks' writes arrive.
#include <cstddef>
#include <string>
#include <string_view>

namespace dew::launch {

class LinePrefixer {
 public:
  // A line longer than `max_line` bytes (a progress bar redrawn with '\r', a binary dump) is passed on
  // in pieces of that size, each ended with '\n', so a stream without newlines cannot grow the buffer.
  explicit LinePrefixer(std::string prefix, std::size_t max_line = 64 * 1024);

  // Takes the next bytes of the stream; returns the lines they complete, each prefixed and ended with '\n'.
  std::string feed(std::string_view bytes);

  // The unfinished last line, prefixed and ended with '\n' ("" when the stream ended with a newline):
  // what the rank wrote before it exited is never lost.
  std::string finish();

 private:
  std::string prefix_;
  std::string partial_;
  std::size_t max_line_;
};

}  // namespace dew::launch
