#pragma once
// Files and directories that appear whole or not at all.
//
// Output is written under a temporary name next to its destination, flushed to disk, then renamed over
// it; a crash or kill at any moment leaves either the old file or the new one, never a half-written one.
#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>

namespace dew {

// Writes a file through a temporary sibling (NAME.tmp-PID-N). commit() fsyncs and renames it into place;
// destruction without commit() removes the temporary.
class AtomicFile {
 public:
  explicit AtomicFile(std::filesystem::path destination);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, std::size_t bytes);
  void write(std::string_view text) { write(text.data(), text.size()); }
  std::size_t bytes_written() const { return bytes_written_; }
  void commit();

  const std::filesystem::path& destination() const { return destination_; }
  const std::filesystem::path& temporary() const { return temporary_; }

 private:
  std::filesystem::path destination_;
  std::filesystem::path temporary_;
  std::FILE* file_ = nullptr;
  std::size_t bytes_written_ = 0;
};

void write_file_atomic(const std::filesystem::path& destination, std::string_view content);

// Builds a directory under a temporary sibling name; commit() renames it into place. An existing
// destination is replaced only after the new one is complete (renamed aside, then removed).
class AtomicDirectory {
 public:
  explicit AtomicDirectory(std::filesystem::path destination);
  ~AtomicDirectory();
  AtomicDirectory(const AtomicDirectory&) = delete;
  AtomicDirectory& operator=(const AtomicDirectory&) = delete;

  // Where to write the contents while building.
  const std::filesystem::path& path() const { return temporary_; }
  const std::filesystem::path& destination() const { return destination_; }
  void commit();

 private:
  std::filesystem::path destination_;
  std::filesystem::path temporary_;
  bool committed_ = false;
};

// Reads a whole file; the error names the file.
std::string read_file(const std::filesystem::path& path);

// fsyncs a directory so a rename inside it survives a power cut.
void sync_directory(const std::filesystem::path& dir);

}  // namespace dew
