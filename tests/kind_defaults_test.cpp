// Each run kind's defaults come from configs/kinds/KIND.json, built into the binary: every file names a
// kind of the table, the embedded text is the file's (the build is in step with the source), and the
// kind's default config (what --print-config shows) holds every value the file sets.
#include <gtest/gtest.h>

#include <filesystem>

#include "dew/runs/kind_defaults.h"
#include "dew/runs/run_kind.h"
#include "test_support.h"

namespace fs = std::filesystem;

namespace {

fs::path kinds_dir() { return dew::test::fixtures().parent_path().parent_path() / "configs" / "kinds"; }

// Every leaf of `part` equals the value at the same path in `whole`.
void expect_contains(const dew::config::Json& whole, const dew::config::Json& part, const std::string& path) {
  if (part.is_object()) {
    ASSERT_TRUE(whole.is_object()) << path;
    for (const auto& [key, value] : part.items()) {
      ASSERT_TRUE(whole.contains(key)) << path << "." << key;
      expect_contains(whole[key], value, path + "." + key);
    }
    return;
  }
  EXPECT_EQ(whole, part) << path;
}

TEST(KindDefaults, EveryFileIsBuiltInAndShapesItsKindsDefaultConfig) {
  std::size_t files = 0;
  for (const auto& entry : fs::directory_iterator(kinds_dir())) {
    if (entry.path().extension() != ".json") continue;
    ++files;
    const std::string kind = entry.path().stem().string();
    const auto& embedded = dew::runs::kind_default_files();
    ASSERT_TRUE(embedded.count(kind)) << entry.path() << " is not built in: re-run the build";
    EXPECT_EQ(std::string(embedded.at(kind)), dew::test::read_text(entry.path())) << entry.path() << " changed since the build";
    const dew::runs::RunKind& row = dew::runs::find_run_kind(kind, entry.path().string());
    const dew::config::Json defaults = row.load_config(nullptr, std::nullopt, {});
    expect_contains(defaults, dew::runs::kind_defaults(kind), kind);
  }
  EXPECT_EQ(files, dew::runs::kind_default_files().size());
  EXPECT_GE(files, 7u);  // sft, dpo, grpo, mdlm, diffusion, classifier, jepa
}

TEST(KindDefaults, AKindWithoutAFileKeepsTheSharedDefaults) {
  EXPECT_TRUE(dew::runs::kind_defaults("lm").empty());
  const auto& jepa = dew::runs::kind_defaults("jepa");
  EXPECT_EQ(jepa["trainer"]["steps"], 2000);
}

}  // namespace
