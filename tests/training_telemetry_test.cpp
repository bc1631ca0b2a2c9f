// The local tracker (scalars.jsonl format, resume trimming, torn lines) and PNG line plots.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "dew/core/atomic_file.h"
#include "dew/core/error.h"
#include "dew/telemetry/local_tracker.h"
#include "dew/telemetry/plot.h"
#include "test_support.h"

namespace {
using namespace dew::telemetry;

std::uint32_t big_endian(const std::string& bytes, std::size_t at) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(bytes[at + i]);
  return v;
}

TEST(LocalTracker, WritesOneRecordPerLineAndTrimsOnResume) {
  dew::test::TempDir dir;
  {
    LocalTracker tracker(dir / "tracking", 0);
    tracker.log(1, {{"loss", 3.5}, {"lr", 1e-3}});
    tracker.log(2, {{"loss", 3.0}, {"val/ce", NAN}});
    tracker.log(3, {{"loss", 2.5}});
  }
  auto text = dew::read_file(dir / "tracking" / "scalars.jsonl");
  auto first = nlohmann::json::parse(text.substr(0, text.find('\n')));
  EXPECT_EQ(first["step"], 1);
  EXPECT_TRUE(first["time"].is_number_float());
  EXPECT_EQ(first["scalars"]["loss"], 3.5);
  EXPECT_EQ(first["scalars"]["lr"], 1e-3);

  auto records = read_scalars(dir / "tracking" / "scalars.jsonl");
  ASSERT_EQ(records.size(), 3u);
  EXPECT_TRUE(std::isnan(records[1].scalars.at("val/ce")));  // non-finite written as null
  EXPECT_EQ(scalar_series(records, "loss"), (std::vector<std::pair<double, double>>{{1, 3.5}, {2, 3.0}, {3, 2.5}}));

  {
    LocalTracker resumed(dir / "tracking", 2);  // resumed from a checkpoint at step 2: step 3 goes
    resumed.log(3, {{"loss", 2.25}});
  }
  records = read_scalars(dir / "tracking" / "scalars.jsonl");
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[2].scalars.at("loss"), 2.25);

  // A torn last line (a kill mid-write) is skipped; a bad line in the middle is an error naming it.
  std::ofstream(dir / "tracking" / "scalars.jsonl", std::ios::app) << "{\"step\": 4, \"sca";
  EXPECT_EQ(read_scalars(dir / "tracking" / "scalars.jsonl").size(), 3u);
  dew::test::write_text(dir / "bad.jsonl", "{\"step\": 1, \"scalars\": {}}\nnot json\n{\"step\": 2, \"scalars\": {}}\n");
  try {
    read_scalars(dir / "bad.jsonl");
    FAIL();
  } catch (const dew::Error& e) {
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
  }
}

TEST(Plot, WritesAPngOfTheRequestedSize) {
  dew::test::TempDir dir;
  std::vector<std::pair<double, double>> loss;
  for (int s = 1; s <= 50; ++s) loss.emplace_back(s, 4.0 * std::exp(-s / 20.0) + 1.0);
  loss.emplace_back(51, NAN);  // breaks the line, not the plot
  write_line_plot(dir / "loss.png", {{"train", loss}, {"val", {{10, 3.9}, {50, 1.6}}}},
                  {.title = "loss", .y_label = "loss", .width = 640, .height = 360});
  auto png = dew::read_file(dir / "loss.png");
  ASSERT_GT(png.size(), 33u);
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_EQ(png.substr(12, 4), "IHDR");
  EXPECT_EQ(big_endian(png, 16), 640u);
  EXPECT_EQ(big_endian(png, 20), 360u);
  EXPECT_THROW(write_line_plot(dir / "tiny.png", {}, {.width = 10, .height = 10}), dew::Error);
}

TEST(Plot, NiceTicksUseOneTwoFiveSpacing) {
  EXPECT_EQ(nice_ticks(0, 100, 6), (std::vector<double>{0, 20, 40, 60, 80, 100}));
  auto ticks = nice_ticks(1.03, 4.2, 6);
  ASSERT_EQ(ticks.size(), 6u);
  EXPECT_NEAR(ticks.front(), 1.5, 1e-12);
  EXPECT_NEAR(ticks[1] - ticks[0], 0.5, 1e-12);
}

}  // namespace
