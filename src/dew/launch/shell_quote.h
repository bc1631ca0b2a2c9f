#pragma once
// POSIX shell quoting, for the command lines dew launch prints (--dry-run) and hands to ssh: a remote
// command is one string that the remote login shell splits again, so every word must survive that split
// byte for byte (spaces, quotes, `$`, globs, newlines).
#include <string>
#include <string_view>
#include <vector>

namespace dew::launch {

// `word` as one shell word: unchanged when it holds only characters no shell treats specially, else in
// single quotes with each ' written as '\''. The empty word is ''.
std::string shell_quote(std::string_view word);

// The words quoted and joined with single spaces.
std::string shell_join(const std::vector<std::string>& words);

}  // namespace dew::launch
