#pragma once
// MODEL given as a Hugging Face Hub name, `org/name` or `org/name@revision`, found offline in the local
// cache that huggingface_hub (`huggingface-cli download`, `hf download`, transformers) fills. Nothing is
// ever downloaded.
//
// Which cache, as huggingface_hub chooses it: $HF_HUB_CACHE, else $HUGGINGFACE_HUB_CACHE (its older name),
// else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub. In it:
//
//   models--org--name/refs/main          the commit hash that branch `main` points at (also tags, other
//                                        branches, refs/pr/N)
//   models--org--name/snapshots/<hash>/  the checkpoint's files as of that commit (symlinks into blobs/)
//
// The revision is a branch or tag name (read from refs/), or a commit hash or a unique prefix of one (at
// least 4 hex digits, matched against snapshots/). Without one it is `main`.
//
// A path that exists always wins: `org/name` that is a directory relative to the working directory is that
// directory, never the cache's copy.
#include <filesystem>
#include <optional>
#include <string>

namespace dew::runs {

struct HubName {
  std::string repo;      // "org/name"
  std::string revision;  // "" when none was given (then "main")
};

// `text` read as a Hub name, or nullopt when it is not one (no slash, two slashes, characters a Hub repo id
// cannot hold, an empty or `..` revision).
std::optional<HubName> parse_hub_name(const std::string& text);

// The cache directory, and in `origin` which variable (or default) chose it, for messages.
std::filesystem::path hub_cache_directory(std::string* origin = nullptr);

// The snapshot directory `name` resolves to in `cache`. When it is not there: an error that lists every
// place it looked, says nothing is downloaded and how to get the model into the cache.
std::filesystem::path resolve_hub_snapshot(const HubName& name, const std::filesystem::path& cache);

// MODEL as the user typed it -> the path to open: the path itself when it exists or is not a Hub name,
// else the snapshot in the cache (resolve_hub_snapshot's error when it is missing).
std::filesystem::path resolve_model_argument(const std::string& model);

// Whether resolve_model_argument would look `model` up in the Hub cache (it does not exist as a path and
// reads as a Hub name).
bool names_hub_model(const std::string& model);

}  // namespace dew::runs
