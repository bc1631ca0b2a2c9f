// core/atomic_file and core/directory_lock: the reason a rename failed survives the cleanup, a path under a
// regular file is reported as "not a directory" (not as missing), a killed writer's temporaries are found
// and removed, and a directory has one writer.
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <set>

#include "dew/core/atomic_file.h"
#include "dew/core/directory_lock.h"
#include "test_support.h"

namespace fs = std::filesystem;
using dew::test::error_of;
using dew::test::TempDir;

TEST(TextWriters, AtomicFileOverADirectoryKeepsTheReason) {
  TempDir work;
  fs::create_directories(work / "dir");
  auto message = error_of([&] {
    dew::AtomicFile file(work / "dir");
    file.write("content");
    file.commit();
  });
  EXPECT_NE(message.find("'" + (work / "dir").string() + "' is a directory"), std::string::npos) << message;
  EXPECT_EQ(message.find("Success"), std::string::npos) << message;
  EXPECT_TRUE(fs::is_empty(work / "dir"));
  for (const auto& entry : fs::directory_iterator(work.path())) EXPECT_EQ(entry.path().filename(), "dir");
}

TEST(TextWriters, PathUnderAFileIsNotADirectory) {
  TempDir work;
  dew::test::write_text(work / "file.txt", "text");
  const std::string expected = "'" + (work / "file.txt").string() + "' is not a directory";
  auto read = error_of([&] { dew::read_file(work / "file.txt" / "x"); });
  EXPECT_NE(read.find(expected), std::string::npos) << read;
  auto write = error_of([&] { dew::write_file_atomic(work / "file.txt" / "x", "content"); });
  EXPECT_NE(write.find(expected), std::string::npos) << write;
  auto deeper = error_of([&] { dew::write_file_atomic(work / "file.txt" / "a" / "x", "content"); });
  EXPECT_NE(deeper.find(expected), std::string::npos) << deeper;
  auto directory = error_of([&] { dew::AtomicDirectory dir(work / "file.txt" / "a" / "out"); });
  EXPECT_NE(directory.find(expected), std::string::npos) << directory;
  EXPECT_EQ(dew::test::read_text(work / "file.txt"), "text");
}

// A killed writer's temporaries (named by temporary_sibling: .NAME.TAG-PID-N) are removed when their PID is
// no live process; a live process's are kept, and other destinations' only when no name is given.
TEST(TextWriters, RemoveStaleTemporariesKeepsLiveWritersFiles) {
  TempDir work;
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  const std::string dead = std::to_string(child), live = std::to_string(::getpid());
  auto plant = [&](const std::string& name, bool dir) {
    if (dir) {
      fs::create_directories(work / name);
      dew::test::write_text(work / name / "x.safetensors", "data");
    } else {
      dew::test::write_text(work / name, "data");
    }
  };
  plant("out", true);
  plant(".out.partial-" + dead + "-0", true);
  plant("..out.partial-" + dead + "-0.partial-" + dead + "-1", true);
  plant(".out.old-" + dead + "-2", true);
  plant(".out.tmp-" + dead + "-3", false);
  plant(".out.partial-" + live + "-4", true);
  plant(".other.tmp-" + dead + "-5", false);
  plant(".out.partial-x-5", true);  // not a temporary's name
  plant(".outer.tmp-" + dead + "-6", false);
  EXPECT_EQ(dew::remove_stale_temporaries(work.path(), "out"), 4u);
  std::set<std::string> left;
  for (const auto& entry : fs::directory_iterator(work.path())) left.insert(entry.path().filename().string());
  EXPECT_EQ(left, (std::set<std::string>{"out", ".out.partial-" + live + "-4", ".other.tmp-" + dead + "-5",
                                         ".out.partial-x-5", ".outer.tmp-" + dead + "-6"}));
  EXPECT_EQ(dew::remove_stale_temporaries(work.path()), 2u);  // any destination: .other and .outer
  EXPECT_TRUE(fs::exists(work / (".out.partial-" + live + "-4")));
  EXPECT_TRUE(fs::exists(work / "out" / "x.safetensors"));
}

TEST(TextWriters, DirectoryLockRefusesASecondHolderNamingThePid) {
  TempDir work;
  const auto dir = work / "run";
  {
    dew::DirectoryLock first(dir);  // creates the directory
    EXPECT_TRUE(fs::is_directory(dir));
    auto second = error_of([&] { dew::DirectoryLock again(dir); });
    EXPECT_NE(second.find("'" + dir.string() + "' is in use by another dew process (pid " + std::to_string(::getpid()) + ")"),
              std::string::npos)
        << second;
    // A removed lock file (runs::FreshRunUndo removes it with the run it undoes) is made again by the next locker.
    fs::remove(dir / dew::DirectoryLock::kFileName);
    dew::DirectoryLock after_removal(dir);
    EXPECT_NE(error_of([&] { dew::DirectoryLock third(dir); }).find("in use"), std::string::npos);
  }
  dew::DirectoryLock released(dir);  // both gone: free again
  dew::test::write_text(work / "file.txt", "text");
  auto under_file = error_of([&] { dew::DirectoryLock bad(work / "file.txt" / "run"); });
  EXPECT_NE(under_file.find("'" + (work / "file.txt").string() + "' is not a directory"), std::string::npos) << under_file;
}
