#include "dew/core/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstring>
#include <fstream>
#include <mutex>
#include <set>

#include "dew/core/error.h"

namespace dew {
namespace fs = std::filesystem;

namespace {

// The temporaries being written, for remove_temporaries_in_flight_and_exit. A commit holds the lock while
// it renames, so an interrupt sees each output either before its rename (temporary removed, old output
// kept) or after it (new output complete).
std::mutex& in_flight_mutex() {
  static std::mutex mutex;
  return mutex;
}
std::set<fs::path>& in_flight() {
  static std::set<fs::path> paths;
  return paths;
}
void track(const fs::path& temporary) {
  std::lock_guard lock(in_flight_mutex());
  in_flight().insert(temporary);
}
void untrack(const fs::path& temporary) {
  std::lock_guard lock(in_flight_mutex());
  in_flight().erase(temporary);
}

fs::path temporary_sibling(const fs::path& destination, const char* tag) {
  static std::atomic<int> counter{0};
  auto name = destination.filename().string();
  return destination.parent_path() / str(".", name, ".", tag, "-", ::getpid(), "-", counter++);
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A temporary_sibling name taken apart: ".NAME.TAG-PID-N" -> NAME and PID.
struct TemporaryName {
  std::string destination;
  pid_t pid;
};

std::optional<TemporaryName> parse_temporary(std::string_view file) {
  if (file.size() < 2 || file[0] != '.') return std::nullopt;
  const auto counter_dash = file.rfind('-');
  if (counter_dash == std::string_view::npos || counter_dash == 0 || !all_digits(file.substr(counter_dash + 1))) {
    return std::nullopt;
  }
  const auto pid_dash = file.rfind('-', counter_dash - 1);
  if (pid_dash == std::string_view::npos) return std::nullopt;
  const auto pid_text = file.substr(pid_dash + 1, counter_dash - pid_dash - 1);
  long long pid = 0;
  if (!all_digits(pid_text) || pid_text.size() > 9) return std::nullopt;
  std::from_chars(pid_text.data(), pid_text.data() + pid_text.size(), pid);
  const auto dot = file.rfind('.', pid_dash);
  if (dot == std::string_view::npos || dot < 2) return std::nullopt;
  const auto tag = file.substr(dot + 1, pid_dash - dot - 1);
  if (tag != "tmp" && tag != "partial" && tag != "old") return std::nullopt;
  return TemporaryName{std::string(file.substr(1, dot - 1)), static_cast<pid_t>(pid)};
}

// Whether `file` is a temporary of `name` (directly, or nested: the temporary of a temporary of it).
bool temporary_of(std::string_view file, const std::string& name) {
  auto parsed = parse_temporary(file);
  if (!parsed) return false;
  return parsed->destination == name || temporary_of(parsed->destination, name);
}

bool process_alive(pid_t pid) {
  if (pid <= 0) return true;  // not a pid a writer has; leave it alone
  if (pid == ::getpid()) return true;
  return !(::kill(pid, 0) == -1 && errno == ESRCH);  // EPERM: alive, someone else's
}
}  // namespace

std::optional<fs::path> file_in_the_way(const fs::path& path) {
  fs::path prefix;
  const fs::path parent = path.parent_path();
  for (const auto& part : parent) {
    prefix /= part;
    std::error_code ec;
    auto status = fs::status(prefix, ec);
    if (!fs::exists(status)) return std::nullopt;  // nothing below a missing directory exists either
    if (!fs::is_directory(status)) return prefix;
  }
  return std::nullopt;
}

void check_no_file_in_the_way(const fs::path& path, std::string_view doing) {
  if (auto file = file_in_the_way(path)) {
    fail(doing, ": '", file->string(), "' is not a directory (it is a file); choose a path that does not go through it");
  }
}

std::size_t remove_stale_temporaries(const fs::path& dir, const std::optional<std::string>& name) {
  std::size_t removed = 0;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string file = it->path().filename().string();
    auto parsed = parse_temporary(file);
    if (!parsed || (name && !temporary_of(file, *name)) || process_alive(parsed->pid)) continue;
    std::error_code ignored;
    if (fs::remove_all(it->path(), ignored) > 0) ++removed;
  }
  return removed;
}

AtomicFile::AtomicFile(fs::path destination) : destination_(std::move(destination)) {
  if (destination_.filename().empty()) fail("cannot write '", destination_.string(), "': it names a directory");
  auto parent = destination_.parent_path();
  if (!parent.empty() && !fs::is_directory(parent)) {
    check_no_file_in_the_way(destination_, str("cannot write '", destination_.string(), "'"));
    fail("cannot write '", destination_.string(), "': directory '", parent.string(), "' does not exist");
  }
  temporary_ = temporary_sibling(destination_, "tmp");
  track(temporary_);
  file_ = std::fopen(temporary_.c_str(), "wb");
  if (!file_) {
    int saved = errno;
    untrack(temporary_);
    fail("cannot create '", temporary_.string(), "': ", std::strerror(saved));
  }
}

AtomicFile::~AtomicFile() {
  if (file_) {
    std::fclose(file_);
    std::error_code ignored;
    fs::remove(temporary_, ignored);
    untrack(temporary_);
  }
}

void AtomicFile::write(const void* data, std::size_t bytes) {
  if (!file_) fail("write to '", destination_.string(), "' after commit");
  if (bytes && std::fwrite(data, 1, bytes, file_) != bytes) {
    fail("cannot write '", temporary_.string(), "': ", std::strerror(errno), " (is the disk full?)");
  }
  bytes_written_ += bytes;
}

void AtomicFile::commit() {
  if (!file_) fail("'", destination_.string(), "' committed twice");
  bool ok = std::fflush(file_) == 0 && ::fsync(::fileno(file_)) == 0;
  int saved = errno;
  ok = (std::fclose(file_) == 0) && ok;
  file_ = nullptr;
  if (!ok) {
    std::error_code ignored;
    fs::remove(temporary_, ignored);
    untrack(temporary_);
    fail("cannot finish '", destination_.string(), "': ", std::strerror(saved));
  }
  std::error_code ec;
  {
    std::lock_guard lock(in_flight_mutex());
    fs::rename(temporary_, destination_, ec);
    if (!ec) in_flight().erase(temporary_);
  }
  if (ec) {
    std::error_code ignored;  // not `ec`: the reason to report is the rename's
    fs::remove(temporary_, ignored);
    untrack(temporary_);
    if (ec == std::errc::is_a_directory || fs::is_directory(destination_, ignored)) {
      fail("cannot write '", destination_.string(), "': '", destination_.string(),
           "' is a directory; give the path of a file (inside it or elsewhere)");
    }
    fail("cannot rename into '", destination_.string(), "': ", ec.message());
  }
  sync_directory(destination_.parent_path().empty() ? fs::path(".") : destination_.parent_path());
}

void write_file_atomic(const fs::path& destination, std::string_view content) {
  AtomicFile file(destination);
  file.write(content);
  file.commit();
}

AtomicDirectory::AtomicDirectory(fs::path destination) : destination_(std::move(destination)) {
  if (destination_.filename().empty()) destination_ = destination_.parent_path();
  auto parent = destination_.parent_path();
  std::error_code ec;
  check_no_file_in_the_way(destination_, str("cannot create directory '", destination_.string(), "'"));
  if (!parent.empty()) fs::create_directories(parent, ec);
  if (ec) fail("cannot create directory '", parent.string(), "': ", ec.message());
  temporary_ = temporary_sibling(destination_, "partial");
  track(temporary_);
  fs::create_directory(temporary_, ec);
  if (ec) {
    untrack(temporary_);
    fail("cannot create directory '", temporary_.string(), "': ", ec.message());
  }
}

AtomicDirectory::~AtomicDirectory() {
  if (!committed_) {
    std::error_code ignored;
    fs::remove_all(temporary_, ignored);
    untrack(temporary_);
  }
}

void AtomicDirectory::commit() {
  if (committed_) fail("'", destination_.string(), "' committed twice");
  for (const auto& entry : fs::directory_iterator(temporary_)) {
    if (entry.is_regular_file()) {
      int fd = ::open(entry.path().c_str(), O_RDONLY);
      if (fd >= 0) {
        ::fsync(fd);
        ::close(fd);
      }
    }
  }
  sync_directory(temporary_);
  std::error_code ec;
  fs::path aside;
  {
    // Both renames under the lock: an interrupt never finds the old output aside and the new one not in place.
    std::lock_guard lock(in_flight_mutex());
    if (fs::exists(destination_)) {
      aside = temporary_sibling(destination_, "old");
      fs::rename(destination_, aside, ec);
      if (ec) fail("cannot replace '", destination_.string(), "': ", ec.message());
    }
    fs::rename(temporary_, destination_, ec);
    if (ec) {
      std::error_code ignored;  // not `ec`: the reason to report is the failed rename's
      if (!aside.empty()) fs::rename(aside, destination_, ignored);
      fail("cannot rename into '", destination_.string(), "': ", ec.message());
    }
    committed_ = true;
    in_flight().erase(temporary_);
    if (!aside.empty()) in_flight().insert(aside);  // the old output, now only a temporary to remove
  }
  sync_directory(destination_.parent_path().empty() ? fs::path(".") : destination_.parent_path());
  if (!aside.empty()) {
    fs::remove_all(aside, ec);
    untrack(aside);
  }
}

void remove_temporaries_in_flight_and_exit(int status) {
  in_flight_mutex().lock();  // never released: no commit may start after this point
  for (const auto& path : in_flight()) {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
  // No fflush: another thread may hold a stdio lock indefinitely (chat blocked in a read of stdin holds
  // stdin's), and flushing every stream would wait for it forever.
  ::_exit(status);
}

std::string read_file(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    check_no_file_in_the_way(path, str("cannot read '", path.string(), "'"));
    fail("file '", path.string(), "' does not exist");
  }
  if (fs::is_directory(path, ec)) fail("'", path.string(), "' is a directory, expected a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read '", path.string(), "': ", std::strerror(errno));
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) fail("cannot read '", path.string(), "': I/O error");
  return content;
}

void sync_directory(const fs::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

}  // namespace dew
