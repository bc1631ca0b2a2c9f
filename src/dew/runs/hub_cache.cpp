#include "dew/runs/hub_cache.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <system_error>
#include <vector>

#include "dew/core/atomic_file.h"
#include "dew/core/error.h"

namespace fs = std::filesystem;

namespace dew::runs {

namespace {

// One part of a Hub repo id, by huggingface_hub's rule: letters, digits, '-', '_', '.', not starting or
// ending with '-' or '.', no "--" (the cache's separator) and no "..".
bool repo_part(const std::string& part) {
  if (part.empty() || part.size() > 96) return false;
  for (char c : part) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
    if (!ok) return false;
  }
  auto edge = [](char c) { return c == '-' || c == '.'; };
  return !edge(part.front()) && !edge(part.back()) && part.find("--") == std::string::npos &&
         part.find("..") == std::string::npos;
}

bool revision_ok(const std::string& revision) {
  if (revision.empty() || revision.front() == '/' || revision.back() == '/') return false;
  for (char c : revision)
    if (static_cast<unsigned char>(c) <= ' ' || c == '\\') return false;
  std::stringstream parts(revision);
  for (std::string part; std::getline(parts, part, '/');)
    if (part.empty() || part == "." || part == "..") return false;
  return true;
}

bool hex_prefix(const std::string& text) {
  return text.size() >= 4 && text.size() <= 40 &&
         std::all_of(text.begin(), text.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

const char* environment(const char* name) {
  const char* value = std::getenv(name);
  return value && *value ? value : nullptr;
}

std::string trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  return text;
}

// The snapshot directories whose commit hash starts with `prefix`.
std::vector<std::string> snapshots_starting_with(const fs::path& snapshots, const std::string& prefix) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(snapshots, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string hash = it->path().filename().string();
    if (hash.starts_with(prefix) && fs::is_directory(it->path(), ec)) out.push_back(hash);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::optional<HubName> parse_hub_name(const std::string& text) {
  const std::size_t at = text.find('@');
  const std::string repo = text.substr(0, at);
  const std::size_t slash = repo.find('/');
  if (slash == std::string::npos || repo.find('/', slash + 1) != std::string::npos) return std::nullopt;
  if (!repo_part(repo.substr(0, slash)) || !repo_part(repo.substr(slash + 1))) return std::nullopt;
  HubName name{.repo = repo, .revision = at == std::string::npos ? std::string() : text.substr(at + 1)};
  if (at != std::string::npos && !revision_ok(name.revision)) return std::nullopt;
  return name;
}

fs::path hub_cache_directory(std::string* origin) {
  auto chosen = [&](const fs::path& path, const std::string& why) {
    if (origin) *origin = why;
    return path;
  };
  if (const char* v = environment("HF_HUB_CACHE")) return chosen(v, "$HF_HUB_CACHE");
  if (const char* v = environment("HUGGINGFACE_HUB_CACHE")) return chosen(v, "$HUGGINGFACE_HUB_CACHE (HF_HUB_CACHE is not set)");
  if (const char* v = environment("HF_HOME")) return chosen(fs::path(v) / "hub", "$HF_HOME/hub (HF_HUB_CACHE is not set)");
  if (const char* v = environment("XDG_CACHE_HOME"))
    return chosen(fs::path(v) / "huggingface" / "hub", "$XDG_CACHE_HOME/huggingface/hub (HF_HUB_CACHE and HF_HOME are not set)");
  const char* home = environment("HOME");
  return chosen(fs::path(home ? home : "~") / ".cache" / "huggingface" / "hub",
                "the default ~/.cache/huggingface/hub (HF_HUB_CACHE, HF_HOME and XDG_CACHE_HOME are not set)");
}

fs::path resolve_hub_snapshot(const HubName& name, const fs::path& cache) {
  std::string repo_dir = "models--" + name.repo;
  repo_dir.replace(repo_dir.find('/'), 1, "--");
  const fs::path repo = cache / repo_dir;
  const fs::path snapshots = repo / "snapshots";
  const std::string revision = name.revision.empty() ? "main" : name.revision;
  std::vector<std::string> looked;
  std::error_code ec;

  const fs::path ref = repo / "refs" / revision;
  if (fs::is_regular_file(ref, ec)) {
    const std::string hash = trimmed(read_file(ref));
    const fs::path snapshot = snapshots / hash;
    if (!hash.empty() && fs::is_directory(snapshot, ec)) return snapshot;
    looked.push_back(str(ref.string(), " (found: it names commit '", hash, "', but ", snapshot.string(),
                         " is missing: the cache is incomplete)"));
  } else {
    looked.push_back(str(ref.string(), " (no such file: no branch or tag '", revision, "' in the cache)"));
  }
  if (hex_prefix(revision)) {
    auto matches = snapshots_starting_with(snapshots, revision);
    if (matches.size() == 1) return snapshots / matches.front();
    if (matches.size() > 1) {
      std::string list;
      for (const auto& m : matches) list += "\n  " + (snapshots / m).string();
      fail("revision '", revision, "' of Hub model '", name.repo, "' matches ", matches.size(),
           " snapshots in the local Hub cache; give more of the commit hash:", list);
    }
    looked.push_back(str(snapshots.string(), "/", revision, "* (no snapshot whose commit starts with '", revision, "')"));
  }
  std::string origin;
  const fs::path chosen = hub_cache_directory(&origin);
  std::string list;
  for (const auto& place : looked) list += "\n  " + place;
  if (!fs::is_directory(repo, ec)) list += str("\n  ", repo.string(), " (no such directory: the model is not in the cache)");
  fail("'", name.repo, name.revision.empty() ? "" : "@" + name.revision, "' is not a file or directory here, so it "
       "was read as a Hugging Face Hub name and looked up offline in the local Hub cache ", cache.string(),
       chosen == cache ? " (" + origin + ")" : std::string(), "; it is not there. Looked at:", list,
       "\ndew downloads nothing. To get the model: on a machine with network access run `huggingface-cli download ",
       name.repo, name.revision.empty() ? "" : " --revision " + name.revision, "` (or `hf download`), then copy its ",
       repo_dir, " directory into ", cache.string(), " (or set HF_HUB_CACHE to a cache that has it), or pass the "
       "checkpoint's directory itself as MODEL");
}

bool names_hub_model(const std::string& model) {
  std::error_code ec;
  return !fs::exists(fs::path(model), ec) && parse_hub_name(model).has_value();
}

fs::path resolve_model_argument(const std::string& model) {
  if (!names_hub_model(model)) return model;
  return resolve_hub_snapshot(*parse_hub_name(model), hub_cache_directory());
}

}  // namespace dew::runs
