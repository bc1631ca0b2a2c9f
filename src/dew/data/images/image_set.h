#pragma once
// A labelled image data set held in memory, and the one entry point that reads one from disk.
//
// What `path` may be:
//   - an IDX images file (train-images-idx3-ubyte[.gz], gzipped or not): its labels are the sibling file
//     (train-labels-idx1-ubyte[.gz]; see idx_file.h);
//   - a directory holding IDX files: options.split picks "train" or "t10k" ("test" is taken as t10k);
//   - a directory of PNG/JPEG images, labelled either by subdirectory (DIR/<class>/*.png: classes are the
//     subdirectory names sorted byte-wise, class id = rank in that order) or by a labels file DIR/labels.txt
//     beside flat images (one "FILE LABEL" line per image, LABEL a class id, '#' comments and blank lines
//     skipped; class names from DIR/classes.txt, one per line, else the ids). A flat directory without
//     labels.txt is unlabelled: every label 0 and no class names.
// Images are sorted by path (within a class for subdirectories), so a directory reads the same everywhere.
//
// Class names of IDX data: a classes.txt beside the IDX files (one name per line) if there is one; else
// the built-in table for Fashion-MNIST, recognised by the SHA-256 of its label bytes (its file names are
// MNIST's, so the name cannot tell them apart); else the ids "0", "1", ...
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "dew/data/images/image_fit.h"

namespace dew::data::images {

struct ImageSet {
  at::Tensor pixels;                     // uint8 [N, C, H, W]
  at::Tensor labels;                     // int64 [N], each in [0, class_names.size()) (all 0 when unlabelled)
  std::vector<std::string> class_names;  // empty = unlabelled
  std::string source;                    // what was read, for messages and run.json ("'DIR' (train split)")

  std::int64_t size() const { return pixels.size(0); }
  std::int64_t channels() const { return pixels.size(1); }
  std::int64_t height() const { return pixels.size(2); }
  std::int64_t width() const { return pixels.size(3); }
  std::int64_t num_classes() const { return static_cast<std::int64_t>(class_names.size()); }
};

struct ImageReadOptions {
  std::string split = "train";  // IDX directories: train | t10k (or test); must stay "train" or empty otherwise
  // > 0: labels must lie in [0, num_classes) (and class names are padded with ids up to it); 0: inferred.
  std::int64_t num_classes = 0;
  // Image directories: 0 keeps the stored channels (all files must agree); 1 or 3 converts every file.
  int channels = 0;
  // Image directories: 0 requires every image to have one size; > 0 fits each to size x size as `fit` says.
  std::int64_t size = 0;
  Fit fit = Fit::resize;
};

ImageSet read_images(const std::filesystem::path& path, const ImageReadOptions& options = {});
// Shorthand for the split alone.
ImageSet read_images(const std::filesystem::path& path, const std::string& split);

// Whether `path` is an IDX directory with a t10k (test) split beside its train split.
bool has_test_split(const std::filesystem::path& path);

// The images of `set` at `indices` (labels, names and source kept).
ImageSet subset(const ImageSet& set, const std::vector<std::int64_t>& indices);

// Fashion-MNIST's class names (T-shirt/top, Trouser, ...), in id order.
const std::vector<std::string>& fashion_mnist_class_names();

}  // namespace dew::data::images
