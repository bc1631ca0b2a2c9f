// Hub-style MODEL names (org/name[@revision]) resolved offline in a local Hugging Face cache that the test
// lays out itself, as huggingface_hub does (tests/hub_cache_support.h), from the committed tiny llama fixture.
#include <gtest/gtest.h>

#include "dew/runs/hub_cache.h"
#include "dew/runs/model_source.h"
#include "hub_cache_support.h"
#include "test_support.h"

namespace fs = std::filesystem;
using dew::runs::HubName;
using dew::runs::parse_hub_name;
using dew::runs::resolve_hub_snapshot;
using dew::test::add_hub_snapshot;
using dew::test::error_of;
using dew::test::ScopedEnvironment;
using dew::test::TempDir;

namespace {
const std::string kMain = "0123456789abcdef0123456789abcdef01234567";
const std::string kDev = "fedcba9876543210fedcba9876543210fedcba98";
const std::string kOld = "0123ffff9876543210fedcba9876543210fedcba";  // shares "0123" with kMain

fs::path fixture() { return dew::test::fixtures() / "hf" / "llama"; }
}  // namespace

TEST(HubCache, ParsesHubNamesAndRejectsWhatCannotBeOne) {
  auto plain = parse_hub_name("HuggingFaceTB/SmolLM2-135M");
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->repo, "HuggingFaceTB/SmolLM2-135M");
  EXPECT_EQ(plain->revision, "");
  auto pinned = parse_hub_name("Qwen/Qwen2.5-0.5B-Instruct@refs/pr/1");
  ASSERT_TRUE(pinned);
  EXPECT_EQ(pinned->repo, "Qwen/Qwen2.5-0.5B-Instruct");
  EXPECT_EQ(pinned->revision, "refs/pr/1");
  for (const char* not_a_name : {"gpt2", "a/b/c", "/abs/path", "org/", "/name", "org/na me", "org/name@", "org/name@../x",
                                 "org--x/name", "org/-name", "org/name.", "./org", "model.gguf"}) {
    EXPECT_FALSE(parse_hub_name(not_a_name)) << not_a_name;
  }
}

TEST(HubCache, ResolvesMainABranchAFullCommitAndAUniquePrefix) {
  TempDir cache;
  add_hub_snapshot(cache.path(), "tiny-org/tiny-llama", fixture(), kMain, {"main"});
  add_hub_snapshot(cache.path(), "tiny-org/tiny-llama", fixture(), kDev, {"dev", "refs/pr/3"});
  add_hub_snapshot(cache.path(), "tiny-org/tiny-llama", fixture(), kOld, {});
  const fs::path snapshots = cache.path() / "models--tiny-org--tiny-llama" / "snapshots";
  auto resolve = [&](const std::string& revision) {
    return resolve_hub_snapshot(HubName{"tiny-org/tiny-llama", revision}, cache.path());
  };
  EXPECT_EQ(resolve(""), snapshots / kMain);
  EXPECT_EQ(resolve("main"), snapshots / kMain);
  EXPECT_EQ(resolve("dev"), snapshots / kDev);
  EXPECT_EQ(resolve("refs/pr/3"), snapshots / kDev);
  EXPECT_EQ(resolve(kOld), snapshots / kOld);
  EXPECT_EQ(resolve("fedcba98"), snapshots / kDev);
  EXPECT_EQ(resolve("0123f"), snapshots / kOld);
  // The snapshot's files are links into blobs/, and the checkpoint opens through them.
  EXPECT_TRUE(fs::is_symlink(snapshots / kMain / "config.json"));
  EXPECT_EQ(dew::runs::resolve_model_source((snapshots / kMain).string()).kind, dew::runs::ModelSourceKind::hugging_face);

  const std::string ambiguous = error_of([&] { resolve("0123"); });
  EXPECT_NE(ambiguous.find("revision '0123' of Hub model 'tiny-org/tiny-llama' matches 2 snapshots"), std::string::npos)
      << ambiguous;
  EXPECT_NE(ambiguous.find((snapshots / kMain).string()), std::string::npos);
  EXPECT_NE(ambiguous.find((snapshots / kOld).string()), std::string::npos);
}

TEST(HubCache, CacheDirectoryFollowsHuggingFaceHubsVariables) {
  ScopedEnvironment hub("HF_HUB_CACHE", "/caches/hub"), legacy("HUGGINGFACE_HUB_CACHE", "/caches/legacy"),
      home("HF_HOME", "/caches/home"), xdg("XDG_CACHE_HOME", "/caches/xdg"), user("HOME", "/home/someone");
  std::string origin;
  EXPECT_EQ(dew::runs::hub_cache_directory(&origin), fs::path("/caches/hub"));
  EXPECT_EQ(origin, "$HF_HUB_CACHE");
  ::unsetenv("HF_HUB_CACHE");
  EXPECT_EQ(dew::runs::hub_cache_directory(), fs::path("/caches/legacy"));
  ::unsetenv("HUGGINGFACE_HUB_CACHE");
  EXPECT_EQ(dew::runs::hub_cache_directory(), fs::path("/caches/home/hub"));
  ::setenv("HF_HOME", "", 1);  // set but empty counts as unset, as in huggingface_hub
  EXPECT_EQ(dew::runs::hub_cache_directory(), fs::path("/caches/xdg/huggingface/hub"));
  ::unsetenv("XDG_CACHE_HOME");
  EXPECT_EQ(dew::runs::hub_cache_directory(&origin), fs::path("/home/someone/.cache/huggingface/hub"));
  EXPECT_NE(origin.find("default ~/.cache/huggingface/hub"), std::string::npos);
}

TEST(HubCache, ModelArgumentsResolveThroughTheCacheButAnExistingPathWins) {
  TempDir cache, work;
  const fs::path snapshot = add_hub_snapshot(cache.path(), "tiny-org/tiny-llama", fixture(), kMain, {"main"});
  ScopedEnvironment hub("HF_HUB_CACHE", cache.path().string());
  EXPECT_EQ(dew::runs::resolve_model_argument("tiny-org/tiny-llama"), snapshot);
  EXPECT_EQ(dew::runs::resolve_model_argument("tiny-org/tiny-llama@main"), snapshot);
  auto source = dew::runs::resolve_model_source("tiny-org/tiny-llama");
  EXPECT_EQ(source.path, snapshot);
  EXPECT_EQ(source.kind, dew::runs::ModelSourceKind::hugging_face);

  // A directory of that name relative to the working directory is what MODEL means.
  fs::create_directories(work.path() / "tiny-org" / "tiny-llama");
  const fs::path here = fs::current_path();
  fs::current_path(work.path());
  const fs::path local = dew::runs::resolve_model_argument("tiny-org/tiny-llama");
  fs::current_path(here);
  EXPECT_EQ(local, fs::path("tiny-org/tiny-llama"));
  EXPECT_FALSE(dew::runs::names_hub_model(dew::test::fixtures().string()));
}

TEST(HubCache, AMissingModelListsWhereItLookedAndSaysNothingIsDownloaded) {
  TempDir cache;
  add_hub_snapshot(cache.path(), "tiny-org/tiny-llama", fixture(), kMain, {"main"});
  ScopedEnvironment hub("HF_HUB_CACHE", cache.path().string());
  const std::string missing = error_of([] { dew::runs::resolve_model_argument("other-org/absent-model"); });
  const fs::path repo = cache.path() / "models--other-org--absent-model";
  EXPECT_EQ(missing,
            "'other-org/absent-model' is not a file or directory here, so it was read as a Hugging Face Hub name and "
            "looked up offline in the local Hub cache " + cache.path().string() + " ($HF_HUB_CACHE); it is not there. "
            "Looked at:\n  " + (repo / "refs" / "main").string() + " (no such file: no branch or tag 'main' in the cache)"
            "\n  " + repo.string() + " (no such directory: the model is not in the cache)"
            "\ndew downloads nothing. To get the model: on a machine with network access run `huggingface-cli download "
            "other-org/absent-model` (or `hf download`), then copy its models--other-org--absent-model directory into " +
            cache.path().string() + " (or set HF_HUB_CACHE to a cache that has it), or pass the checkpoint's directory "
            "itself as MODEL");

  const std::string no_branch = error_of([] { dew::runs::resolve_model_argument("tiny-org/tiny-llama@v2.0"); });
  EXPECT_NE(no_branch.find("refs/v2.0 (no such file: no branch or tag 'v2.0' in the cache)"), std::string::npos) << no_branch;
  EXPECT_NE(no_branch.find("huggingface-cli download tiny-org/tiny-llama --revision v2.0"), std::string::npos);
  const std::string no_commit = error_of([] { dew::runs::resolve_model_argument("tiny-org/tiny-llama@abcdef12"); });
  EXPECT_NE(no_commit.find("abcdef12* (no snapshot whose commit starts with 'abcdef12')"), std::string::npos) << no_commit;

  // A ref whose snapshot was deleted: the cache is incomplete, and the message says so.
  fs::remove_all(cache.path() / "models--tiny-org--tiny-llama" / "snapshots" / kMain);
  const std::string broken = error_of([] { dew::runs::resolve_model_argument("tiny-org/tiny-llama"); });
  EXPECT_NE(broken.find("it names commit '" + kMain + "', but"), std::string::npos) << broken;
}
