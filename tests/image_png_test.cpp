// PNG output: write_png round trips through stb_image exactly, floats map to bytes as documented, grids
// place cells, gutters and captions where the layout says, and output is atomic.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <filesystem>

#include "dew/core/error.h"
#include "dew/data/images/image_file.h"
#include "dew/data/images/png.h"
#include "test_support.h"

namespace {

namespace fs = std::filesystem;
using namespace dew::data::images;
using dew::test::error_of;
using dew::test::TempDir;

at::Tensor random_bytes(std::vector<std::int64_t> shape, std::uint64_t seed) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randint(0, 256, shape, generator, at::kLong).to(at::kByte);
}

TEST(ImagePng, Uint8ImagesRoundTripExactly) {
  TempDir dir;
  for (std::int64_t c : {1, 2, 3, 4}) {
    at::Tensor image = random_bytes({c, 5, 7}, 40 + static_cast<std::uint64_t>(c));
    fs::path file = dir / ("c" + std::to_string(c) + ".png");
    write_png(file, image);
    at::Tensor back = read_image_file(file);  // stb_image, channels as stored
    EXPECT_EQ(back.sizes(), image.sizes());
    EXPECT_TRUE(at::equal(back, image)) << c << " channels";
  }
  // [H, W] is one gray channel.
  at::Tensor gray = random_bytes({4, 6}, 7);
  write_png(dir / "gray.png", gray);
  EXPECT_TRUE(at::equal(read_image_file(dir / "gray.png"), gray.unsqueeze(0)));
  // Nothing but the outputs is left behind (atomic writes remove their temporaries).
  std::int64_t files = 0;
  for (const auto& entry : fs::directory_iterator(dir.path())) files += entry.is_regular_file();
  EXPECT_EQ(files, 5);
}

TEST(ImagePng, FloatsInUnitRangeMapToRoundedBytes) {
  TempDir dir;
  at::Tensor values = at::tensor({-1.0f, -0.999f, 0.0f, 0.5f, 1.0f, 3.0f, -7.0f, NAN}).view({1, 2, 4});
  write_png(dir / "f.png", values);
  at::Tensor back = read_image_file(dir / "f.png").view({8});
  // round((x + 1) * 127.5) after clamping to [-1, 1]; NaN as -1. (-0.999 + 1) * 127.5 = 0.1275 -> 0;
  // 0 -> 127.5 -> 128 (round half away from zero); 0.5 -> 191.25 -> 191.
  std::vector<int> expected = {0, 0, 128, 191, 255, 255, 0, 0};
  for (std::int64_t i = 0; i < 8; ++i) EXPECT_EQ(back[i].item<int>(), expected[static_cast<std::size_t>(i)]) << i;
}

TEST(ImagePng, RefusesWhatAPngCannotHold) {
  TempDir dir;
  EXPECT_NE(error_of([&] { write_png(dir / "x.png", at::zeros({5, 2, 2}, at::kByte)); }).find("1 to 4 channels"), std::string::npos);
  std::string message = error_of([&] { write_png(dir / "y.png", at::zeros({1, 1, 2, 2}, at::kByte)); });
  EXPECT_NE(message.find((dir / "y.png").string()), std::string::npos) << message;
  EXPECT_NE(message.find("[C, H, W]"), std::string::npos) << message;
  EXPECT_NE(error_of([&] { write_png(dir / "z.png", at::zeros({1, 2, 2}, at::kInt)); }).find("uint8 pixels or floating"),
            std::string::npos);
  message = error_of([&] { write_png(dir / "missing" / "deeper" / "a.png", at::zeros({1, 2, 2}, at::kByte)); });
  EXPECT_NE(message.find("missing"), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(dir / "x.png"));
}

TEST(ImageGrid, CellsAndGuttersSitWhereTheLayoutSays) {
  // 5 gray 3x4 images in 2 columns: 3 rows, the last one short. Image i is the constant 40 * i (in [-1, 1]).
  const std::int64_t n = 5, h = 3, w = 4, g = 2;
  at::Tensor images = (at::arange(n, at::kFloat) * 40.0 / 127.5 - 1.0).view({n, 1, 1, 1}).expand({n, 1, h, w});
  at::Tensor grid = image_grid(images, 2);
  EXPECT_EQ(grid.sizes(), (std::vector<std::int64_t>{1, g + 3 * (h + g), g + 2 * (w + g)}));
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t top = g + (i / 2) * (h + g), left = g + (i % 2) * (w + g);
    at::Tensor cell = grid[0].narrow(0, top, h).narrow(1, left, w);
    EXPECT_TRUE(at::equal(cell, at::full({h, w}, 40 * i, at::kByte))) << "cell " << i << "\n" << grid;
  }
  EXPECT_EQ(grid[0][0][0].item<int>(), 255);           // gutter: white
  EXPECT_EQ(grid[0][g + h][g].item<int>(), 255);       // between rows
  at::Tensor empty_cell = grid[0].narrow(0, g + 2 * (h + g), h).narrow(1, g + w + g, w);
  EXPECT_EQ(empty_cell.min().item<int>(), 255);         // the short last row's missing cell

  // scale 2: each pixel drawn 2x2, so the grid is the scaled images with the same gutters.
  GridOptions big;
  big.scale = 2;
  at::Tensor scaled = image_grid(random_bytes({2, 3, 2, 2}, 3), 2, {}, big);
  EXPECT_EQ(scaled.sizes(), (std::vector<std::int64_t>{3, g + 4 + g, g + 2 * (4 + g)}));
}

TEST(ImageGrid, CaptionsGoInALeftColumnOnePerRow) {
  const std::int64_t n = 4, h = 28, w = 28, g = 2;
  at::Tensor images = at::full({n, 3, h, w}, 0.0f);  // mid gray, 128
  at::Tensor plain = image_grid(images, 2);
  at::Tensor captioned = image_grid(images, 2, {"Ankle boot", "T-shirt/top"});
  EXPECT_EQ(captioned.size(1), plain.size(1));
  const std::int64_t label_w = captioned.size(2) - plain.size(2);
  EXPECT_GT(label_w, 40);  // ten characters of a 2x font
  // The caption column holds black ink in each row band and nothing but black or white.
  for (std::int64_t r = 0; r < 2; ++r) {
    at::Tensor band = captioned.narrow(1, g + r * (h + g), h).narrow(2, 0, label_w);
    EXPECT_EQ(band.min().item<int>(), 0) << "row " << r;
    EXPECT_EQ(at::logical_or(band == 0, band == 255).all().item<bool>(), true);
  }
  // The cells moved right by the column's width, unchanged.
  EXPECT_TRUE(at::equal(captioned.narrow(2, label_w, plain.size(2)), plain));
  // Non-ASCII bytes are drawn as '?', never handed to the font table.
  EXPECT_EQ(image_grid(images, 2, {"caf\xc3\xa9", "x"}).dim(), 3);

  TempDir dir;
  write_image_grid(dir / "grid.png", images, 2, {"a", "b"});
  EXPECT_TRUE(at::equal(read_image_file(dir / "grid.png"), image_grid(images, 2, {"a", "b"})));
  std::string message = error_of([&] { write_image_grid(dir / "bad.png", images, 2, {"only one"}); });
  EXPECT_NE(message.find("2 rows but 1 row labels"), std::string::npos) << message;
  EXPECT_NE(message.find("bad.png"), std::string::npos) << message;
  EXPECT_NE(error_of([&] { image_grid(at::zeros({2, 2, 4, 4}), 2); }).find("1 (gray) or 3 (RGB)"), std::string::npos);
  EXPECT_NE(error_of([&] { image_grid(images, 0); }).find("at least 1 column"), std::string::npos);
}

}  // namespace
