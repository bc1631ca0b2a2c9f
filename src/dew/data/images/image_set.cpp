#include "dew/data/images/image_set.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "dew/core/error.h"
#include "dew/data/images/class_names.h"
#include "dew/data/images/idx_file.h"
#include "dew/data/images/image_directory.h"
#include "dew/data/images/image_file.h"

namespace dew::data::images {

namespace fs = std::filesystem;

namespace {

bool is_idx_name(const std::string& name) {
  return name.find("idx3") != std::string::npos || name.find("idx1") != std::string::npos;
}

// "train" | "t10k" from a split name ("" and "train" -> train; "t10k" and "test" -> t10k).
std::string idx_split(const std::string& split, const fs::path& dir) {
  if (split.empty() || split == "train") return "train";
  if (split == "t10k" || split == "test") return "t10k";
  dew::fail("split '", split, "' for '", dir.string(), "' is not one of: train, t10k (or test)");
}

// The images file of a split in an IDX directory: SPLIT-images...idx3... (the uncompressed one first when
// both are there: byte-wise order puts it before its .gz).
fs::path idx_images_in(const fs::path& dir, const std::string& split) {
  std::vector<fs::path> candidates;
  std::vector<std::string> present;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::string name = entry.path().filename().string();
    if (!is_idx_name(name)) continue;
    present.push_back(name);
    if (name.starts_with(split + "-images") && name.find("idx3") != std::string::npos) candidates.push_back(entry.path());
  }
  if (candidates.empty()) {
    std::sort(present.begin(), present.end());
    std::string list;
    for (const auto& name : present) list += (list.empty() ? "" : ", ") + name;
    dew::fail("'", dir.string(), "' holds no ", split, "-images-idx3-ubyte[.gz] for split ", split, " (it holds ", list,
              "); choose another split or add the file");
  }
  std::sort(candidates.begin(), candidates.end());
  return candidates.front();
}

ImageSet read_idx_pair(const fs::path& images, const ImageReadOptions& options, const std::string& split_note) {
  std::optional<fs::path> labels_path = sibling_labels_path(images);
  if (!labels_path) {
    dew::fail("cannot tell which labels file goes with '", images.string(),
              "': IDX images are read with their sibling labels file, found by name (train-images-idx3-ubyte[.gz] -> ",
              "train-labels-idx1-ubyte[.gz]); rename the files that way or pass their directory");
  }
  std::error_code error;
  if (!fs::exists(*labels_path, error)) {
    dew::fail("'", images.string(), "' has no labels file beside it: expected '", labels_path->string(), "[.gz]'");
  }
  ImageSet set;
  set.pixels = read_idx_images(images);
  set.labels = read_idx_labels(*labels_path);
  if (set.labels.size(0) != set.pixels.size(0)) {
    dew::fail("'", images.string(), "' holds ", set.pixels.size(0), " images but '", labels_path->string(), "' holds ",
              set.labels.size(0), " labels; they must pair one to one (are they from the same split and data set?)");
  }
  std::optional<std::vector<std::string>> listed;
  std::string listed_from;
  const fs::path classes = images.parent_path() / "classes.txt";
  std::string known;
  if (fs::is_regular_file(classes, error)) {
    listed = read_class_list(classes);
    listed_from = dew::str("'", classes.string(), "'");
  } else if ((listed = known_class_names(set.labels))) {
    listed_from = "the built-in Fashion-MNIST class table";
    known = ", Fashion-MNIST";
    // Asked for a different class count: the table does not apply (the user knows their data).
    if (options.num_classes > 0 && options.num_classes != static_cast<std::int64_t>(listed->size())) listed.reset();
  }
  set.class_names = settle_class_names(set.labels, std::move(listed), options.num_classes,
                                       dew::str("'", labels_path->string(), "'"), listed_from);
  set.source = dew::str("'", images.string(), "'", split_note, known.empty() ? "" : " (Fashion-MNIST)");
  return set;
}

}  // namespace

ImageSet read_images(const fs::path& path, const ImageReadOptions& options) {
  std::error_code error;
  if (!fs::exists(path, error)) {
    dew::fail("'", path.string(), "' does not exist; give an IDX images file (train-images-idx3-ubyte[.gz]), ",
              "a directory of IDX files, or a directory of PNG/JPEG images");
  }
  if (options.channels != 0 && options.channels != 1 && options.channels != 3) {
    dew::fail("channels ", options.channels, " must be 0 (as stored), 1 (gray) or 3 (RGB)");
  }
  if (options.size < 0) dew::fail("image size ", options.size, " must be 0 (as stored) or positive");
  if (fs::is_directory(path, error)) {
    bool has_idx = false;
    for (const auto& entry : fs::directory_iterator(path)) has_idx = has_idx || is_idx_name(entry.path().filename().string());
    if (!has_idx) return read_image_directory(path, options);
    const std::string split = idx_split(options.split, path);
    return read_idx_pair(idx_images_in(path, split), options, dew::str(" (", split, " split)"));
  }
  if (is_image_file_name(path)) {
    dew::fail("'", path.string(), "' is a single image; point at the directory holding the images");
  }
  if (!options.split.empty() && options.split != "train") {
    dew::fail("split '", options.split, "' picks a file in a directory of IDX files, but '", path.string(),
              "' is a file; pass the directory, or the split's own images file without a split");
  }
  return read_idx_pair(path, options, "");
}

bool has_test_split(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return false;
  for (const char* name : {"t10k-images-idx3-ubyte", "t10k-images-idx3-ubyte.gz", "t10k-images.idx3-ubyte"}) {
    if (fs::exists(path / name, ec)) return true;
  }
  return false;
}

ImageSet subset(const ImageSet& set, const std::vector<std::int64_t>& indices) {
  const auto index = at::tensor(indices, at::kLong);
  ImageSet out = set;
  out.pixels = set.pixels.index_select(0, index);
  out.labels = set.labels.index_select(0, index);
  return out;
}

ImageSet read_images(const fs::path& path, const std::string& split) {
  ImageReadOptions options;
  options.split = split;
  return read_images(path, options);
}

}  // namespace dew::data::images
