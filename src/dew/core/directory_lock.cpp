#include "dew/core/directory_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>

#include "dew/core/atomic_file.h"
#include "dew/core/error.h"

namespace fs = std::filesystem;

namespace dew {
namespace {
// The pid the holder wrote, or "unknown" (it may not have written it yet).
std::string holder_pid(int fd) {
  char buffer[32] = {};
  ssize_t n = ::pread(fd, buffer, sizeof(buffer) - 1, 0);
  std::string pid;
  for (ssize_t i = 0; i < n && buffer[i] >= '0' && buffer[i] <= '9'; ++i) pid += buffer[i];
  return pid.empty() ? std::string("unknown") : pid;
}
}  // namespace

DirectoryLock::DirectoryLock(fs::path dir) : dir_(std::move(dir)) {
  std::error_code ec;
  check_no_file_in_the_way(dir_ / kFileName, str("cannot use '", dir_.string(), "'"));
  if (fs::exists(dir_, ec) && !fs::is_directory(dir_, ec)) {
    fail("'", dir_.string(), "' exists and is not a directory; choose another path");
  }
  fs::create_directories(dir_, ec);
  if (ec) fail("cannot create directory '", dir_.string(), "': ", ec.message());
  const fs::path file = dir_ / kFileName;
  // A holder that removes the lock file (runs::FreshRunUndo, with the directory it created) may do so between our open() and flock(); then
  // we hold a lock on a file nobody else will open. So after locking, check that the path still names the
  // file we locked, and start again if not.
  for (int attempt = 0; attempt < 100; ++attempt) {
    int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) fail("cannot open the lock file '", file.string(), "': ", std::strerror(errno));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int error = errno;
      const std::string pid = error == EWOULDBLOCK ? holder_pid(fd) : std::string();
      ::close(fd);
      if (error == EWOULDBLOCK) {
        fail("'", dir_.string(), "' is in use by another dew process (pid ", pid,
             "); wait for it to finish or stop it, or choose another directory. Two writers would overwrite "
             "each other's checkpoints and run.json");
      }
      fail("cannot lock '", file.string(), "': ", std::strerror(error));
    }
    struct stat locked {}, named {};
    if (::fstat(fd, &locked) != 0 || ::stat(file.c_str(), &named) != 0 || locked.st_ino != named.st_ino ||
        locked.st_dev != named.st_dev) {
      ::close(fd);
      continue;
    }
    const std::string pid = std::to_string(::getpid()) + "\n";
    if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
      // Only the error message of a second writer loses the pid; the lock itself holds.
    }
    fd_ = fd;
    return;
  }
  fail("cannot lock '", file.string(), "': its lock file keeps being replaced");
}

DirectoryLock::~DirectoryLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the lock
}

}  // namespace dew
