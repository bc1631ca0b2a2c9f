#include <gtest/gtest.h>

#include "dew/core/config.h"
#include "test_support.h"

namespace {
using dew::config::Json;

struct ModelSection {
  int num_layers = 4;
  double rope_theta = 10000.0;
  std::vector<int> windows{};
  template <class V>
  void fields(V& v) {
    v("num_layers", num_layers, "decoder blocks");
    v("rope_theta", rope_theta, "rotary base");
    v("windows", windows, "sliding windows");
  }
};

struct RunSection {
  std::string name = "run";
  bool pack = false;
  std::optional<std::int64_t> seed;
  ModelSection model;
  template <class V>
  void fields(V& v) {
    v("name", name);
    v("pack", pack);
    v("seed", seed);
    v("model", model);
  }
};

TEST(Config, RoundTripsThroughJson) {
  RunSection original;
  original.name = "x";
  original.seed = 7;
  original.model.windows = {128, 0};
  Json j = dew::config::to_json(original);
  EXPECT_EQ(j.dump(), R"({"name":"x","pack":false,"seed":7,"model":{"num_layers":4,"rope_theta":10000.0,"windows":[128,0]}})");
  RunSection back;
  dew::config::from_json(j, back, "test");
  EXPECT_EQ(dew::config::to_json(back), j);
}

TEST(Config, RefusesUnknownFieldByName) {
  RunSection cfg;
  try {
    dew::config::from_json(Json::parse(R"({"model":{"num_layerz":3}})"), cfg, "run.json");
    FAIL() << "accepted an unknown field";
  } catch (const dew::Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("'model.num_layerz'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("run.json"), std::string::npos) << msg;
    EXPECT_NE(msg.find("num_layers"), std::string::npos) << msg;  // lists the known ones
  }
}

TEST(Config, RefusesWrongTypeByName) {
  RunSection cfg;
  try {
    dew::config::from_json(Json::parse(R"({"model":{"num_layers":"four"}})"), cfg, "c.json");
    FAIL();
  } catch (const dew::Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("'model.num_layers'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("integer"), std::string::npos) << msg;
    EXPECT_NE(msg.find("\"four\""), std::string::npos) << msg;
  }
  EXPECT_THROW(dew::config::from_json(Json::parse(R"({"model":{"num_layers":2.5}})"), cfg, "c"), dew::Error);
  EXPECT_THROW(dew::config::from_json(Json::parse(R"({"pack":1})"), cfg, "c"), dew::Error);
}

TEST(Config, FileThenOverrides) {
  dew::test::TempDir dir;
  dew::test::write_text(dir / "c.json", R"({"name": "from-file", "model": {"num_layers": 8}})");
  auto cfg = dew::config::load<RunSection>(dir / "c.json",
                                           {"model.rope_theta=5e5", "name=123", "seed=3", "model.windows=[1,2]", "pack=true"});
  EXPECT_EQ(cfg.model.num_layers, 8);
  EXPECT_DOUBLE_EQ(cfg.model.rope_theta, 5e5);
  EXPECT_EQ(cfg.name, "123");  // a string field takes the text as it is
  EXPECT_EQ(cfg.seed, 3);
  EXPECT_EQ(cfg.model.windows, (std::vector<int>{1, 2}));
  EXPECT_TRUE(cfg.pack);
}

TEST(Config, OverrideErrorsNameTheField) {
  try {
    dew::config::load<RunSection>(std::nullopt, {"model.heads=4"});
    FAIL();
  } catch (const dew::Error& e) {
    EXPECT_NE(std::string(e.what()).find("'model.heads'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(dew::config::load<RunSection>(std::nullopt, {"model.num_layers=many"}), dew::Error);
  EXPECT_THROW(dew::config::load<RunSection>(std::nullopt, {"no_equals_sign"}), dew::Error);
  EXPECT_THROW(dew::config::load<RunSection>(std::nullopt, {"model=3"}), dew::Error);
}

TEST(Config, MalformedFileNamesLine) {
  dew::test::TempDir dir;
  dew::test::write_text(dir / "bad.json", "{\n  \"name\": \"x\",\n  oops\n}");
  try {
    dew::config::load<RunSection>(dir / "bad.json", {});
    FAIL();
  } catch (const dew::Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("bad.json"), std::string::npos) << msg;
    EXPECT_NE(msg.find("line 3"), std::string::npos) << msg;
  }
}

TEST(Config, DescribeListsEveryField) {
  auto text = dew::config::describe<RunSection>();
  EXPECT_NE(text.find("model.rope_theta = 10000.0"), std::string::npos) << text;
  EXPECT_NE(text.find("seed = null"), std::string::npos) << text;
}

}  // namespace
