#pragma once
// One writer per directory: an exclusive lock that a second writer sees, and that a killed writer cannot
// leave behind.
//
// The lock is flock(LOCK_EX) on DIR/.dew.lock, held for the lock object's lifetime (in practice the
// process's). The kernel drops it when the process ends however it ends (kill -9 included), so there is
// never a stale lock to clear by hand. The file holds the holder's pid, only so that the error can name it.
// Readers (dew eval, generate, export of a run) do not lock: checkpoints appear whole by rename, so a
// reader never sees a half-written one.
#include <filesystem>
#include <string>

namespace dew {

class DirectoryLock {
 public:
  // The lock file's name inside the directory; code that asks "is this directory empty?" ignores it.
  static constexpr const char* kFileName = ".dew.lock";

  // Creates `dir` (and its parents) if missing, then takes the lock. Fails, naming the holder's pid, when
  // another process (or another DirectoryLock in this one) holds it.
  explicit DirectoryLock(std::filesystem::path dir);
  ~DirectoryLock();
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
  int fd_ = -1;
};

}  // namespace dew
