// Image data: IDX files (raw and gzipped) and image directories read into an ImageSet, every refusal naming
// its file, real Fashion-MNIST when installed, and ImageBatches' order, sharding, flips and resume.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dew/core/atomic_file.h"
#include "dew/core/error.h"
#include "dew/data/images/idx_file.h"
#include "dew/data/images/image_file.h"
#include "dew/data/images/image_batches.h"
#include "dew/data/images/image_set.h"
#include "dew/data/images/png.h"
#include "test_support.h"

namespace {

namespace fs = std::filesystem;
using namespace dew::data::images;
using dew::test::error_of;
using dew::test::TempDir;

std::string header(std::uint32_t magic, const std::vector<std::uint32_t>& dims) {
  std::string out;
  auto put = [&](std::uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xff));
  };
  put(magic);
  for (std::uint32_t d : dims) put(d);
  return out;
}

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// One gzip member holding `bytes` (what gzip(1) writes).
std::string gzip_bytes(const std::string& bytes) {
  TempDir dir;
  fs::path file = dir / "member.gz";
  gzFile gz = gzopen(file.c_str(), "wb");
  gzwrite(gz, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(gz);
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// n images of h x w: pixel (i, y, x) = (i * 37 + y * 11 + x * 3) mod 256, so every image, row and column differs.
std::string pixel_bytes(std::uint32_t n, std::uint32_t h, std::uint32_t w) {
  std::string data;
  for (std::uint32_t i = 0; i < n; ++i)
    for (std::uint32_t y = 0; y < h; ++y)
      for (std::uint32_t x = 0; x < w; ++x) data.push_back(static_cast<char>((i * 37 + y * 11 + x * 3) % 256));
  return data;
}

std::string label_bytes(const std::vector<int>& labels) {
  std::string data;
  for (int l : labels) data.push_back(static_cast<char>(l));
  return data;
}

// Writes PREFIX-images-idx3-ubyte[.gz] and PREFIX-labels-idx1-ubyte[.gz]; returns the images path.
fs::path write_idx_pair(const fs::path& dir, const std::string& prefix, std::uint32_t h, std::uint32_t w,
                        const std::vector<int>& labels, bool gz) {
  const auto n = static_cast<std::uint32_t>(labels.size());
  std::string images = header(0x803, {n, h, w}) + pixel_bytes(n, h, w);
  std::string label_file = header(0x801, {n}) + label_bytes(labels);
  const std::string suffix = gz ? ".gz" : "";
  fs::path images_path = dir / (prefix + "-images-idx3-ubyte" + suffix);
  write_bytes(images_path, gz ? gzip_bytes(images) : images);
  write_bytes(dir / (prefix + "-labels-idx1-ubyte" + suffix), gz ? gzip_bytes(label_file) : label_file);
  return images_path;
}

std::vector<std::int64_t> values(const at::Tensor& t) {
  at::Tensor c = t.to(at::kLong).contiguous();
  return {c.data_ptr<std::int64_t>(), c.data_ptr<std::int64_t>() + c.numel()};
}

at::Tensor expected_pixels(std::int64_t n, std::int64_t h, std::int64_t w) {
  std::string bytes = pixel_bytes(static_cast<std::uint32_t>(n), static_cast<std::uint32_t>(h), static_cast<std::uint32_t>(w));
  return at::from_blob(bytes.data(), {n, 1, h, w}, at::kByte).clone();
}

// The message names the file, and says what is wrong.
void expect_refusal(const std::function<void()>& body, const fs::path& file, const std::string& says) {
  std::string message = error_of(body);
  EXPECT_NE(message.find(file.string()), std::string::npos) << message;
  EXPECT_NE(message.find(says), std::string::npos) << message;
}

TEST(ImageIdx, RawAndGzippedFilesReadBackExactly) {
  for (bool gz : {false, true}) {
    TempDir dir;
    fs::path images = write_idx_pair(dir.path(), "train", 3, 4, {2, 0, 1, 2, 1}, gz);
    ImageSet set = read_images(images);
    EXPECT_EQ(set.pixels.sizes(), (std::vector<std::int64_t>{5, 1, 3, 4}));
    EXPECT_EQ(set.pixels.scalar_type(), at::kByte);
    EXPECT_TRUE(at::equal(set.pixels, expected_pixels(5, 3, 4))) << "gz " << gz;
    EXPECT_EQ(values(set.labels), (std::vector<std::int64_t>{2, 0, 1, 2, 1}));
    EXPECT_EQ(set.labels.scalar_type(), at::kLong);
    EXPECT_EQ(set.class_names, (std::vector<std::string>{"0", "1", "2"}));  // ids up to the largest label
    EXPECT_NE(set.source.find(images.string()), std::string::npos);
  }
}

TEST(ImageIdx, GzippedImagesPairWithUncompressedLabelsAndConcatenatedMembersReadAsOne) {
  TempDir dir;
  std::string images = header(0x803, {4, 2, 3}) + pixel_bytes(4, 2, 3);
  // Two gzip members, split mid-array: gunzip reads them as one stream, so must dew.
  write_bytes(dir / "train-images-idx3-ubyte.gz", gzip_bytes(images.substr(0, 17)) + gzip_bytes(images.substr(17)));
  write_bytes(dir / "train-labels-idx1-ubyte", header(0x801, {4}) + label_bytes({3, 1, 0, 2}));
  ImageSet set = read_images(dir / "train-images-idx3-ubyte.gz");
  EXPECT_TRUE(at::equal(set.pixels, expected_pixels(4, 2, 3)));
  EXPECT_EQ(values(set.labels), (std::vector<std::int64_t>{3, 1, 0, 2}));
  EXPECT_EQ(sibling_labels_path(dir / "t10k-images.idx3-ubyte"), dir / "t10k-labels.idx1-ubyte");
  EXPECT_EQ(sibling_labels_path(dir / "pictures.bin"), std::nullopt);
}

TEST(ImageIdx, ADirectoryPicksTheSplitAndClassesTxtNamesTheClasses) {
  TempDir dir;
  write_idx_pair(dir.path(), "train", 2, 2, {0, 1, 1}, true);
  write_idx_pair(dir.path(), "t10k", 2, 2, {1, 0}, true);
  EXPECT_EQ(read_images(dir.path()).size(), 3);
  EXPECT_EQ(read_images(dir.path(), "train").size(), 3);
  ImageSet test = read_images(dir.path(), "t10k");
  EXPECT_EQ(values(test.labels), (std::vector<std::int64_t>{1, 0}));
  EXPECT_NE(test.source.find("t10k"), std::string::npos);
  EXPECT_EQ(read_images(dir.path(), "test").size(), 2);  // "test" is t10k
  expect_refusal([&] { read_images(dir.path(), "validation"); }, dir.path(), "split 'validation'");

  dew::test::write_text(dir / "classes.txt", "cat\ndog\n");
  EXPECT_EQ(read_images(dir.path()).class_names, (std::vector<std::string>{"cat", "dog"}));
  ImageReadOptions four;
  four.num_classes = 4;
  EXPECT_NE(error_of([&] { read_images(dir.path(), four); }).find("names 2 classes but num_classes is 4"), std::string::npos);
  dew::test::write_text(dir / "classes.txt", "cat\n");
  expect_refusal([&] { read_images(dir.path()); }, dir / "train-labels-idx1-ubyte.gz", "the label 1, outside [0, 1)");
}

TEST(ImageIdx, NumClassesBoundsTheLabelsAndPadsTheNames) {
  TempDir dir;
  fs::path images = write_idx_pair(dir.path(), "train", 2, 2, {0, 3, 1}, false);
  ImageReadOptions options;
  options.num_classes = 5;
  EXPECT_EQ(read_images(images, options).class_names, (std::vector<std::string>{"0", "1", "2", "3", "4"}));
  options.num_classes = 3;
  expect_refusal([&] { read_images(images, options); }, dir / "train-labels-idx1-ubyte", "record 1 the label 3, outside [0, 3)");
}

TEST(ImageIdx, RefusalsNameTheFile) {
  TempDir dir;
  const fs::path images = dir / "train-images-idx3-ubyte", labels = dir / "train-labels-idx1-ubyte";
  const std::string good_images = header(0x803, {3, 2, 2}) + pixel_bytes(3, 2, 2);
  const std::string good_labels = header(0x801, {3}) + label_bytes({0, 1, 2});
  auto reset = [&] {
    write_bytes(images, good_images);
    write_bytes(labels, good_labels);
  };
  reset();
  ASSERT_EQ(read_images(images).size(), 3);  // the files the cases below damage are good as written

  write_bytes(images, header(0x802, {3, 2, 2}) + pixel_bytes(3, 2, 2));
  expect_refusal([&] { read_images(images); }, images, "magic number 0x802 where an IDX images file has 0x803");
  write_bytes(images, good_labels);
  expect_refusal([&] { read_images(images); }, images, "that is an IDX labels file");
  reset();

  write_bytes(images, good_images.substr(0, good_images.size() - 1));
  expect_refusal([&] { read_images(images); }, images, "is truncated");
  write_bytes(images, good_images.substr(0, 10));
  expect_refusal([&] { read_images(images); }, images, "truncated inside its header");
  write_bytes(images, good_images + "x");
  expect_refusal([&] { read_images(images); }, images, "more data than its header");
  write_bytes(images, header(0x803, {0xffffffffu, 0xffffffffu, 4}));
  expect_refusal([&] { read_images(images); }, images, "overflows 64 bits");
  write_bytes(images, header(0x803, {0, 2, 2}));
  expect_refusal([&] { read_images(images); }, images, "size 0");
  reset();

  write_bytes(labels, header(0x801, {2}) + label_bytes({0, 1}));
  expect_refusal([&] { read_images(images); }, images, "holds 3 images but");
  expect_refusal([&] { read_images(images); }, labels, "holds 2 labels");
  write_bytes(labels, header(0x803, {3, 1, 1}) + label_bytes({0, 1, 2}));
  expect_refusal([&] { read_images(images); }, labels, "magic number 0x803 where an IDX labels file has 0x801");
  fs::remove(labels);
  expect_refusal([&] { read_images(images); }, images, "has no labels file beside it");
  reset();

  // Gzipped: cut short, and damaged in the middle (the deflate data or its CRC-32 no longer check out).
  const fs::path gz = dir / "t10k-images-idx3-ubyte.gz";
  write_bytes(dir / "t10k-labels-idx1-ubyte.gz", gzip_bytes(good_labels));
  const std::string packed = gzip_bytes(good_images);
  write_bytes(gz, packed);
  ASSERT_EQ(read_images(gz).size(), 3);
  write_bytes(gz, packed.substr(0, packed.size() - 6));
  expect_refusal([&] { read_images(gz); }, gz, "is truncated");
  std::string damaged = packed;
  for (std::size_t i = 12; i < damaged.size() - 8; ++i) damaged[i] = static_cast<char>(damaged[i] ^ 0x5a);
  write_bytes(gz, damaged);
  expect_refusal([&] { read_images(gz); }, gz, "damaged gzip data");

  expect_refusal([&] { read_images(dir / "missing-images-idx3-ubyte"); }, dir / "missing-images-idx3-ubyte", "does not exist");
  write_bytes(dir / "pictures.bin", good_images);
  expect_refusal([&] { read_images(dir / "pictures.bin"); }, dir / "pictures.bin", "cannot tell which labels file");
}

// A directory of PNG files, written with write_png (its own round trip is tested in image_png_test.cpp).
void write_gray_png(const fs::path& path, std::int64_t h, std::int64_t w, int value) {
  fs::create_directories(path.parent_path());
  write_png(path, at::full({1, h, w}, value, at::kByte));
}

// Files written by Pillow, decoded by dew (stb_image) and compared with what Pillow decodes
// (tools/reference/make_image_fixtures.py). PNG is lossless: exact. The JPEG's pixels come from two IDCTs
// (libjpeg's, stb's), each within about one level of the exact transform, so they may differ by 2.
TEST(ImageFile, DecodesWhatPillowWrote) {
  const fs::path dir = dew::test::fixtures() / "images";
  auto expected = nlohmann::json::parse(dew::read_file(dir / "expected.json"));
  for (const auto& [name, want] : expected.items()) {
    at::Tensor image = read_image_file(dir / name, name == "palette.png" ? 3 : 0);
    std::vector<std::int64_t> shape = want["shape"].get<std::vector<std::int64_t>>();
    std::vector<std::int64_t> pixels = want["pixels"].get<std::vector<std::int64_t>>();
    ASSERT_EQ(image.sizes(), shape) << name;
    const std::int64_t tolerance = name == "gray.jpg" ? 2 : 0;
    at::Tensor difference = (image.to(at::kLong).reshape({-1}) - at::tensor(pixels, at::kLong)).abs();
    EXPECT_LE(difference.max().item<std::int64_t>(), tolerance) << name;
  }
  ASSERT_EQ(expected.size(), 4u);
  // The same files as a labelled directory: converted to RGB they stack, as the reader promises.
  TempDir tree;
  for (const char* name : {"palette.png", "rgba.png", "gray16.png", "gray.jpg"}) {
    fs::create_directories(tree / "all");
    fs::copy_file(dir / name, tree / "all" / name);
  }
  ImageReadOptions rgb;
  rgb.channels = 3;
  rgb.size = 8;
  EXPECT_EQ(read_images(tree.path(), rgb).pixels.sizes(), (std::vector<std::int64_t>{4, 3, 8, 8}));
}

TEST(ImageDirectory, SubdirectoriesAreSortedClasses) {
  TempDir dir;
  write_gray_png(dir / "zebra" / "b.png", 3, 3, 10);
  write_gray_png(dir / "zebra" / "a.png", 3, 3, 20);
  write_gray_png(dir / "ant" / "x.png", 3, 3, 30);
  write_gray_png(dir / ".hidden" / "y.png", 5, 5, 40);  // hidden: skipped
  dew::test::write_text(dir / "README", "not an image");
  ImageSet set = read_images(dir.path());
  EXPECT_EQ(set.class_names, (std::vector<std::string>{"ant", "zebra"}));
  EXPECT_EQ(values(set.labels), (std::vector<std::int64_t>{0, 1, 1}));
  EXPECT_EQ(set.pixels.sizes(), (std::vector<std::int64_t>{3, 1, 3, 3}));
  // Sorted by path within a class: ant/x (30), zebra/a (20), zebra/b (10).
  EXPECT_EQ(values(set.pixels.amax({1, 2, 3})), (std::vector<std::int64_t>{30, 20, 10}));
  EXPECT_EQ(values(set.pixels.amin({1, 2, 3})), (std::vector<std::int64_t>{30, 20, 10}));
}

TEST(ImageDirectory, LabelsTxtAndClassesTxtOrNothing) {
  TempDir dir;
  write_gray_png(dir / "one.png", 2, 2, 1);
  write_gray_png(dir / "two words.png", 2, 2, 2);
  write_gray_png(dir / "three.png", 2, 2, 3);
  ImageSet unlabelled = read_images(dir.path());
  EXPECT_TRUE(unlabelled.class_names.empty());
  EXPECT_EQ(values(unlabelled.labels), (std::vector<std::int64_t>{0, 0, 0}));

  dew::test::write_text(dir / "labels.txt", "# file label\ntwo words.png 2\none.png,0\n\nthree.png\t1\n");
  ImageSet set = read_images(dir.path());
  EXPECT_EQ(values(set.labels), (std::vector<std::int64_t>{2, 0, 1}));
  EXPECT_EQ(values(set.pixels.amax({1, 2, 3})), (std::vector<std::int64_t>{2, 1, 3}));  // labels.txt's order
  EXPECT_EQ(set.class_names, (std::vector<std::string>{"0", "1", "2"}));
  dew::test::write_text(dir / "classes.txt", "a\nb\nc\n");
  EXPECT_EQ(read_images(dir.path()).class_names, (std::vector<std::string>{"a", "b", "c"}));
  dew::test::write_text(dir / "classes.txt", "a\nb\n");
  expect_refusal([&] { read_images(dir.path()); }, dir / "labels.txt", "the label 2, outside [0, 2)");

  dew::test::write_text(dir / "labels.txt", "one.png 0\nmissing.png 1\n");
  expect_refusal([&] { read_images(dir.path()); }, dir / "labels.txt", "line 2 lists 'missing.png'");
  dew::test::write_text(dir / "labels.txt", "one.png cat\n");
  expect_refusal([&] { read_images(dir.path()); }, dir / "labels.txt", "the label 'cat'");
  dew::test::write_text(dir / "labels.txt", "one.png 0\none.png 1\n");
  expect_refusal([&] { read_images(dir.path()); }, dir / "labels.txt", "a second time");
}

TEST(ImageDirectory, RefusesUnreadableMixedAndAmbiguousImages) {
  TempDir dir;
  write_gray_png(dir / "a" / "1.png", 4, 4, 9);
  dew::test::write_text(dir / "a" / "2.png", "this is not a PNG");
  expect_refusal([&] { read_images(dir.path()); }, dir / "a" / "2.png", "cannot decode");

  write_gray_png(dir / "a" / "2.png", 4, 5, 9);
  expect_refusal([&] { read_images(dir.path()); }, dir / "a" / "2.png", "images must share a size");
  ImageReadOptions fit;
  fit.size = 6;
  EXPECT_EQ(read_images(dir.path(), fit).pixels.sizes(), (std::vector<std::int64_t>{2, 1, 6, 6}));

  write_png(dir / "a" / "2.png", at::full({3, 4, 4}, 9, at::kByte));
  expect_refusal([&] { read_images(dir.path()); }, dir / "a" / "2.png", "has 3 channels where");
  ImageReadOptions rgb;
  rgb.channels = 3;
  ImageSet converted = read_images(dir.path(), rgb);
  EXPECT_EQ(converted.pixels.sizes(), (std::vector<std::int64_t>{2, 3, 4, 4}));
  EXPECT_EQ(converted.pixels.min().item<int>(), 9);  // gray 9 -> RGB (9, 9, 9); RGB (9, 9, 9) stays
  EXPECT_EQ(converted.pixels.max().item<int>(), 9);

  fs::create_directories(dir / "b");
  expect_refusal([&] { read_images(dir.path()); }, dir / "b", "holds no PNG or JPEG images");
  fs::remove(dir / "b");
  write_gray_png(dir / "loose.png", 4, 4, 1);
  expect_refusal([&] { read_images(dir.path()); }, dir.path(), "both class subdirectories");
  expect_refusal([&] { read_images(dir / "loose.png"); }, dir / "loose.png", "single image");
  TempDir empty;
  expect_refusal([&] { read_images(empty.path()); }, empty.path(), "holds no IDX files, no PNG");
}

TEST(ImageFit, ResizeKeepsConstantsAndPadCentres) {
  at::Tensor constant = at::full({2, 1, 4, 4}, 77, at::kByte);
  // Bilinear weights sum to 1, so a constant image stays that constant when growing or (antialiased) shrinking.
  EXPECT_TRUE(at::equal(fit_images(constant, 7, Fit::resize, "t"), at::full({2, 1, 7, 7}, 77, at::kByte)));
  EXPECT_TRUE(at::equal(fit_images(constant, 3, Fit::resize, "t"), at::full({2, 1, 3, 3}, 77, at::kByte)));
  at::Tensor padded = fit_images(constant, 7, Fit::pad, "t");
  // 7 - 4 = 3 px of margin: 1 before, 2 after.
  EXPECT_EQ(padded.sum().item<std::int64_t>(), 2 * 16 * 77);
  EXPECT_EQ(padded[0][0][1][1].item<int>(), 77);
  EXPECT_EQ(padded[0][0][4][4].item<int>(), 77);
  EXPECT_EQ(padded[0][0][0][1].item<int>(), 0);
  EXPECT_EQ(padded[0][0][5][5].item<int>(), 0);
  EXPECT_NE(error_of([&] { fit_images(constant, 3, Fit::pad, "'small'"); }).find("'small' holds 4x4 images, larger than the 3x3"),
            std::string::npos);
  EXPECT_EQ(parse_fit("pad"), Fit::pad);
  EXPECT_NE(error_of([] { parse_fit("crop"); }).find("'crop'"), std::string::npos);
}

// Fashion-MNIST as Debian's dataset-fashion-mnist installs it. The sums were computed once with Python:
//   numpy.frombuffer(gzip.open(F).read()[16:], numpy.uint8).astype(numpy.int64).sum()   (images; [8:] for labels)
TEST(ImageFashionMnist, ReadsTheInstalledFiles) {
  const fs::path dir = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(dir / "train-images-idx3-ubyte.gz")) GTEST_SKIP() << dir << " is not installed (dataset-fashion-mnist)";
  ImageSet train = read_images(dir, "train");
  EXPECT_EQ(train.pixels.sizes(), (std::vector<std::int64_t>{60000, 1, 28, 28}));
  EXPECT_EQ(train.pixels.sum(at::kLong).item<std::int64_t>(), 3431114169);
  EXPECT_EQ(train.pixels[0].to(at::kLong).sum().item<std::int64_t>(), 76247);
  EXPECT_EQ(values(train.labels.narrow(0, 0, 10)), (std::vector<std::int64_t>{9, 0, 0, 3, 0, 2, 7, 2, 5, 5}));
  EXPECT_EQ(train.labels.sum().item<std::int64_t>(), 270000);  // 6000 of each class 0..9
  ASSERT_EQ(train.class_names.size(), 10u);
  EXPECT_EQ(train.class_names[0], "T-shirt/top");
  EXPECT_EQ(train.class_names[9], "Ankle boot");  // train label[0]
  EXPECT_NE(train.source.find("Fashion-MNIST"), std::string::npos);

  ImageSet test = read_images(dir / "t10k-images-idx3-ubyte.gz");
  EXPECT_EQ(test.pixels.sizes(), (std::vector<std::int64_t>{10000, 1, 28, 28}));
  EXPECT_EQ(test.pixels.sum(at::kLong).item<std::int64_t>(), 573469082);
  EXPECT_EQ(values(test.labels.narrow(0, 0, 10)), (std::vector<std::int64_t>{9, 2, 1, 1, 6, 1, 4, 6, 5, 7}));
  EXPECT_EQ(test.labels.sum().item<std::int64_t>(), 45000);
  EXPECT_EQ(test.class_names, fashion_mnist_class_names());
}

// n images of 1 x 2 x 3 whose pixels encode the image index and column: (i, y, x) -> 10 * i + x, labels i.
ImageSet numbered_set(std::int64_t n) {
  ImageSet set;
  set.pixels = (at::arange(n, at::kLong).view({n, 1, 1, 1}) * 10 + at::arange(3, at::kLong).view({1, 1, 1, 3}))
                   .expand({n, 1, 2, 3})
                   .to(at::kByte)
                   .contiguous();
  set.labels = at::arange(n, at::kLong);
  set.source = "'numbered'";
  return set;
}

struct Taken {
  std::vector<std::int64_t> labels;
  std::vector<at::Tensor> images;
};

Taken take(ImageBatches& batches, std::int64_t count, std::int64_t rows) {
  Taken taken;
  for (std::int64_t b = 0; b < count; ++b) {
    dew::data::Batch batch = batches.next_batch(rows);
    for (std::int64_t l : values(batch.get("labels"))) taken.labels.push_back(l);
    taken.images.push_back(batch.get("images"));
  }
  return taken;
}

TEST(ImageBatches, AnEpochVisitsEveryImageOnceScaledToUnitRange) {
  ImageBatchOptions options;
  options.seed = 5;
  ImageBatches batches(numbered_set(20), options);
  EXPECT_EQ(batches.records(), 20);
  dew::data::Batch first = batches.next_batch(4);
  const at::Tensor& images = first.get("images");
  EXPECT_EQ(images.sizes(), (std::vector<std::int64_t>{4, 1, 2, 3}));
  EXPECT_EQ(images.scalar_type(), at::kFloat);
  EXPECT_EQ(first.get("labels").scalar_type(), at::kLong);
  // Unflipped (flip is off): row r is image labels[r], pixel x / 127.5 - 1 exactly (one rounding of a
  // float division and subtraction: within 1 ulp of 1, checked at 1e-6).
  std::vector<std::int64_t> labels = values(first.get("labels"));
  for (std::int64_t r = 0; r < 4; ++r) {
    at::Tensor expected = (at::arange(3, at::kFloat) + 10.0 * static_cast<double>(labels[r])) / 127.5 - 1.0;
    EXPECT_TRUE(at::allclose(images[r][0][1], expected, 0, 1e-6)) << images[r];
  }
  Taken rest = take(batches, 4, 4);
  std::vector<std::int64_t> epoch = labels;
  epoch.insert(epoch.end(), rest.labels.begin(), rest.labels.end());
  std::sort(epoch.begin(), epoch.end());
  std::vector<std::int64_t> all(20);
  for (int i = 0; i < 20; ++i) all[i] = i;
  EXPECT_EQ(epoch, all);
  EXPECT_NE(labels, (std::vector<std::int64_t>{0, 1, 2, 3}));  // shuffled (a 1 in 20*19*18*17 chance to fail by luck)

  // Full range: 0 -> -1 and 255 -> 1 exactly.
  ImageSet extremes;
  extremes.pixels = at::tensor({0, 255}, at::kByte).view({2, 1, 1, 1});
  extremes.labels = at::zeros({2}, at::kLong);
  extremes.source = "'extremes'";
  ImageBatchOptions in_order;
  in_order.shuffle = false;
  ImageBatches range(extremes, in_order);
  EXPECT_EQ(values(range.next_batch(2).get("images").view({2}).mul(1000)), (std::vector<std::int64_t>{-1000, 1000}));
}

TEST(ImageBatches, ShardsAreDisjointAndCoverTheGlobalBatch) {
  const std::int64_t world = 3, rows = 2, n = 12;
  std::vector<std::int64_t> seen;
  std::vector<std::vector<std::int64_t>> by_rank(world);
  for (std::int64_t rank = 0; rank < world; ++rank) {
    ImageBatchOptions options;
    options.seed = 9;
    options.rank = rank;
    options.world = world;
    options.flip = true;
    ImageBatches batches(numbered_set(n), options);
    Taken taken = take(batches, 2, rows);  // 2 global batches of 6 = one epoch
    EXPECT_EQ(batches.position(), n);
    by_rank[rank] = taken.labels;
    seen.insert(seen.end(), taken.labels.begin(), taken.labels.end());
  }
  std::sort(seen.begin(), seen.end());
  std::vector<std::int64_t> all(n);
  for (int i = 0; i < n; ++i) all[i] = i;
  EXPECT_EQ(seen, all);  // disjoint (no repeats in 12 draws) and covering
  // The shards are the single-process order dealt round robin.
  ImageBatchOptions single;
  single.seed = 9;
  ImageBatches one(numbered_set(n), single);
  std::vector<std::int64_t> order = take(one, 1, n).labels;
  for (std::int64_t p = 0; p < n; ++p) {
    const std::int64_t rank = p % world, batch = p / (rows * world), slot = (p % (rows * world)) / world;
    EXPECT_EQ(by_rank[rank][batch * rows + slot], order[p]) << "position " << p;
  }
}

TEST(ImageBatches, ResumeGivesTheIdenticalNextBatchesFlipsIncluded) {
  ImageBatchOptions options;
  options.seed = 11;
  options.flip = true;
  ImageBatches straight(numbered_set(10), options);
  Taken reference = take(straight, 9, 3);  // 27 records: through epochs 0, 1 and into 2

  // Flips happen, are horizontal, and only some: each row is its image, either as is or reversed along x.
  std::int64_t flipped = 0, kept = 0;
  ImageSet set = numbered_set(10);
  for (std::size_t b = 0; b < reference.images.size(); ++b) {
    for (std::int64_t r = 0; r < 3; ++r) {
      at::Tensor source = to_unit_range(set.pixels[reference.labels[b * 3 + r]]);
      at::Tensor row = reference.images[b][r];
      if (at::equal(row, source)) {
        ++kept;
      } else {
        EXPECT_TRUE(at::equal(row, source.flip({-1})));
        ++flipped;
      }
    }
  }
  EXPECT_GT(flipped, 0);  // 27 fair coins: all one side has chance 2^-26
  EXPECT_GT(kept, 0);

  for (std::int64_t stop : {1, 3, 4, 7}) {
    ImageBatches first(numbered_set(10), options);
    take(first, stop, 3);
    ImageBatches resumed(numbered_set(10), options);
    resumed.set_position(first.position());
    Taken after = take(resumed, 9 - stop, 3);
    for (std::int64_t b = 0; b < 9 - stop; ++b) {
      EXPECT_TRUE(at::equal(after.images[b], reference.images[stop + b])) << "resumed after " << stop << ", batch " << b;
    }
    EXPECT_EQ(after.labels, std::vector<std::int64_t>(reference.labels.begin() + stop * 3, reference.labels.end()));
  }
  // A different seed flips differently (the flip is drawn from the seed, not fixed).
  ImageBatchOptions other = options;
  other.seed = 12;
  std::int64_t differ = 0;
  ImageBatches a(numbered_set(10), options), b(numbered_set(10), other);
  for (std::int64_t p = 0; p < 64; ++p) differ += a.flipped_at(p) != b.flipped_at(p);
  EXPECT_GT(differ, 0);
}

TEST(ImageBatches, SubsetsSizesAndHoldout) {
  ImageBatchOptions options;
  options.shuffle = false;
  ImageBatches subset(numbered_set(10), {7, 2, 5}, options);
  EXPECT_EQ(subset.records(), 3);
  EXPECT_EQ(take(subset, 2, 3).labels, (std::vector<std::int64_t>{7, 2, 5, 7, 2, 5}));
  EXPECT_NE(error_of([&] { ImageBatches bad(numbered_set(10), {1, 10}, options); }).find("image index 10 is outside 'numbered'"),
            std::string::npos);
  EXPECT_NE(error_of([&] { ImageBatches bad(numbered_set(10), {1, 1}, options); }).find("chosen twice"), std::string::npos);
  EXPECT_NE(error_of([&] { subset.next_batch(4); }).find("fewer than one batch of 4 images"), std::string::npos);

  options.size = 5;
  options.fit = Fit::pad;
  ImageBatches padded(numbered_set(4), options);
  at::Tensor image = padded.next_batch(1).get("images");
  EXPECT_EQ(image.sizes(), (std::vector<std::int64_t>{1, 1, 5, 5}));
  EXPECT_EQ(image[0][0][0][0].item<float>(), -1.0f);  // padding is black
  EXPECT_EQ(image.max().item<float>(), 2.0f / 127.5f - 1.0f);  // image 0's brightest pixel, 2

  auto [train, val] = holdout_split(100, 0.1, 3);
  EXPECT_EQ(val.size(), 10u);
  EXPECT_EQ(train.size(), 90u);
  std::set<std::int64_t> both(train.begin(), train.end());
  both.insert(val.begin(), val.end());
  EXPECT_EQ(both.size(), 100u);
  EXPECT_TRUE(std::is_sorted(val.begin(), val.end()));
  EXPECT_EQ(holdout_split(100, 0.1, 3).second, val);
  EXPECT_NE(holdout_split(100, 0.1, 4).second, val);
  EXPECT_EQ(holdout_split(100, 0.0, 3).second.size(), 0u);
  EXPECT_EQ(holdout_split(5, 0.01, 3).second.size(), 1u);  // a non-zero fraction holds one back
  EXPECT_NE(error_of([] { holdout_split(1, 0.5, 0); }).find("none to train on"), std::string::npos);
  EXPECT_NE(error_of([] { holdout_split(10, 1.0, 0); }).find("val_fraction 1"), std::string::npos);
}

}  // namespace
