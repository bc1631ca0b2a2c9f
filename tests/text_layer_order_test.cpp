// The layer order of docs/architecture.md holds in src/dew: no folder includes one above it or a peer, no
// two folders include each other, every folder has a level. The checker is shown to catch each breach on a
// small planted tree first, so a green result on the real tree means something.
#include <gtest/gtest.h>

#include <stdexcept>

#include "layer_order.h"
#include "test_support.h"

namespace {
namespace fs = std::filesystem;
using dew::test::layer_violations;
using dew::test::parse_layer_order;

fs::path repo_root() { return dew::test::fixtures().parent_path().parent_path(); }

std::string joined(const std::vector<std::string>& lines) {
  std::string all;
  for (const auto& l : lines) all += l + "\n";
  return all;
}

const char* kOrder =
    "text\n"
    "```layer-order\n"
    "core       # bottom\n"
    "nn data\n"
    "runs\n"
    "```\n";

TEST(LayerOrder, ParsesLevelsBottomFirstWithPeersOnOneLine) {
  const auto order = parse_layer_order(kOrder);
  EXPECT_EQ(order.at("core"), 0);
  EXPECT_EQ(order.at("nn"), 1);
  EXPECT_EQ(order.at("data"), 1);
  EXPECT_EQ(order.at("runs"), 2);
  EXPECT_EQ(order.size(), 4u);
  EXPECT_THROW(parse_layer_order("```layer-order\ncore\ncore\n```\n"), std::runtime_error);
  EXPECT_THROW(parse_layer_order("no block here\n"), std::runtime_error);
}

TEST(LayerOrder, CatchesAPlantedUpwardIncludeNamingFileAndLine) {
  dew::test::TempDir tmp;
  fs::create_directories(tmp / "core");
  fs::create_directories(tmp / "runs");
  dew::test::write_text(tmp / "runs" / "run.h", "#pragma once\n#include <string>\n");
  dew::test::write_text(tmp / "runs" / "run.cpp", "#include \"dew/runs/run.h\"\n#include \"dew/core/error.h\"\n");
  dew::test::write_text(tmp / "core" / "error.h", "#pragma once\n#include <string>\n");
  fs::create_directories(tmp / "nn");
  fs::create_directories(tmp / "data");
  EXPECT_EQ(joined(layer_violations(tmp.path(), parse_layer_order(kOrder))), "");

  dew::test::write_text(tmp / "core" / "error.cpp", "#include \"dew/core/error.h\"\n\n#include \"dew/runs/run.h\"\n");
  std::filesystem::remove(tmp / "runs" / "run.cpp");  // else runs and core would include each other
  const auto found = layer_violations(tmp.path(), parse_layer_order(kOrder));
  ASSERT_EQ(found.size(), 1u) << joined(found);
  EXPECT_NE(found[0].find("src/dew/core/error.cpp:3"), std::string::npos) << found[0];
  EXPECT_NE(found[0].find("a higher layer"), std::string::npos) << found[0];
}

TEST(LayerOrder, CatchesPeersMutualIncludesUnlistedFoldersAndRelativeIncludes) {
  dew::test::TempDir tmp;
  for (const char* d : {"core", "nn", "data", "runs", "extra"}) fs::create_directories(tmp / d);
  dew::test::write_text(tmp / "nn" / "a.h", "#include \"dew/data/b.h\"\n");
  dew::test::write_text(tmp / "data" / "b.h", "#include \"dew/nn/a.h\"\n");
  dew::test::write_text(tmp / "runs" / "c.cpp", "#include \"../core/d.h\"\n");
  const std::string found = joined(layer_violations(tmp.path(), parse_layer_order(kOrder)));
  EXPECT_NE(found.find("src/dew/nn/a.h:1: nn includes data, and data includes nn"), std::string::npos) << found;
  EXPECT_NE(found.find("src/dew/data/b.h:1: data includes nn, and nn includes data"), std::string::npos) << found;
  EXPECT_NE(found.find("src/dew/extra/: not in docs/architecture.md's layer-order block"), std::string::npos) << found;
  EXPECT_NE(found.find("src/dew/runs/c.cpp:1: includes \"../core/d.h\""), std::string::npos) << found;
}

TEST(LayerOrder, TheSourceTreeKeepsTheOrderWrittenInArchitectureMd) {
  const auto order = parse_layer_order(dew::test::read_text(repo_root() / "docs" / "architecture.md"));
  const auto found = layer_violations(repo_root() / "src" / "dew", order);
  EXPECT_TRUE(found.empty()) << "the layer order of docs/architecture.md is broken:\n" << joined(found);
}

}  // namespace
