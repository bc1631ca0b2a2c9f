#include "dew/core/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "dew/core/error.h"

namespace dew {
namespace fs = std::filesystem;

namespace {
fs::path temporary_sibling(const fs::path& destination, const char* tag) {
  static std::atomic<int> counter{0};
  auto name = destination.filename().string();
  return destination.parent_path() / str(".", name, ".", tag, "-", ::getpid(), "-", counter++);
}
}  // namespace

AtomicFile::AtomicFile(fs::path destination) : destination_(std::move(destination)) {
  if (destination_.filename().empty()) fail("cannot write '", destination_.string(), "': it names a directory");
  auto parent = destination_.parent_path();
  if (!parent.empty() && !fs::is_directory(parent)) {
    fail("cannot write '", destination_.string(), "': directory '", parent.string(), "' does not exist");
  }
  temporary_ = temporary_sibling(destination_, "tmp");
  file_ = std::fopen(temporary_.c_str(), "wb");
  if (!file_) fail("cannot create '", temporary_.string(), "': ", std::strerror(errno));
}

AtomicFile::~AtomicFile() {
  if (file_) {
    std::fclose(file_);
    std::error_code ignored;
    fs::remove(temporary_, ignored);
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
    fail("cannot finish '", destination_.string(), "': ", std::strerror(saved));
  }
  std::error_code ec;
  fs::rename(temporary_, destination_, ec);
  if (ec) {
    fs::remove(temporary_, ec);
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
  if (!parent.empty()) fs::create_directories(parent, ec);
  if (ec) fail("cannot create directory '", parent.string(), "': ", ec.message());
  temporary_ = temporary_sibling(destination_, "partial");
  fs::create_directory(temporary_, ec);
  if (ec) fail("cannot create directory '", temporary_.string(), "': ", ec.message());
}

AtomicDirectory::~AtomicDirectory() {
  if (!committed_) {
    std::error_code ignored;
    fs::remove_all(temporary_, ignored);
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
  if (fs::exists(destination_)) {
    aside = temporary_sibling(destination_, "old");
    fs::rename(destination_, aside, ec);
    if (ec) fail("cannot replace '", destination_.string(), "': ", ec.message());
  }
  fs::rename(temporary_, destination_, ec);
  if (ec) {
    if (!aside.empty()) fs::rename(aside, destination_, ec);
    fail("cannot rename into '", destination_.string(), "': ", ec.message());
  }
  committed_ = true;
  sync_directory(destination_.parent_path().empty() ? fs::path(".") : destination_.parent_path());
  if (!aside.empty()) fs::remove_all(aside, ec);
}

std::string read_file(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) fail("file '", path.string(), "' does not exist");
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
