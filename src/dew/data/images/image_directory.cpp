#include "dew/data/images/image_directory.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <map>
#include <optional>
#include <set>

#include "dew/core/atomic_file.h"
#include "dew/core/error.h"
#include "dew/core/text_lines.h"
#include "dew/data/images/class_names.h"
#include "dew/data/images/image_file.h"

namespace dew::data::images {

namespace fs = std::filesystem;

namespace {

std::string labels_file_name(const fs::path& dir) { return (dir / "labels.txt").string(); }

bool hidden(const fs::path& path) { return path.filename().string().starts_with("."); }

// Image files under `dir` (recursively when asked), hidden ones skipped, sorted by path.
std::vector<fs::path> image_files(const fs::path& dir, bool recursive) {
  std::vector<fs::path> files;
  auto take = [&](const fs::directory_entry& entry) {
    if (entry.is_regular_file() && !hidden(entry.path()) && is_image_file_name(entry.path())) files.push_back(entry.path());
  };
  if (recursive) {
    for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator(); ++it) {
      if (hidden(it->path())) {
        if (it->is_directory()) it.disable_recursion_pending();
        continue;
      }
      take(*it);
    }
  } else {
    for (const auto& entry : fs::directory_iterator(dir)) take(entry);
  }
  std::sort(files.begin(), files.end());
  return files;
}

struct Listing {
  std::vector<fs::path> files;
  std::vector<std::int64_t> labels;
};

// DIR/labels.txt: "FILE LABEL" per line (FILE relative to DIR; it may hold spaces: the label is the last
// field, after a space, tab or comma).
Listing read_labels_file(const fs::path& dir, const fs::path& labels_file) {
  std::string text = dew::read_file(labels_file);
  const std::string where = dew::str("'", labels_file.string(), "'");
  Listing listing;
  std::set<std::string> seen;
  std::int64_t line = 0;
  for (std::string row : dew::text_lines(text)) {
    ++line;
    std::size_t first = row.find_first_not_of(" \t");
    if (first == std::string::npos || row[first] == '#') continue;
    row = row.substr(first);
    std::size_t split = row.find_last_of(" \t,");
    if (split == std::string::npos) {
      dew::fail(where, " line ", line, " is '", row, "': write the image file, a space and its class id (\"cat/1.png 3\")");
    }
    std::string name = row.substr(0, split), value = row.substr(split + 1);
    while (!name.empty() && (name.back() == ' ' || name.back() == '\t' || name.back() == ',')) name.pop_back();
    std::int64_t label = -1;
    auto [ptr, error] = std::from_chars(value.data(), value.data() + value.size(), label);
    if (error != std::errc() || ptr != value.data() + value.size() || label < 0) {
      dew::fail(where, " line ", line, " gives '", name, "' the label '", value, "': labels are class ids 0, 1, 2, ...");
    }
    if (!seen.insert(name).second) dew::fail(where, " line ", line, " lists '", name, "' a second time");
    fs::path file = dir / name;
    std::error_code missing;
    if (!fs::is_regular_file(file, missing)) {
      dew::fail(where, " line ", line, " lists '", name, "', but '", file.string(), "' is not a file; fix the name or remove the line");
    }
    listing.files.push_back(file);
    listing.labels.push_back(label);
  }
  if (listing.files.empty()) dew::fail(where, " lists no images: write one \"FILE LABEL\" line per image");
  return listing;
}

// Decodes every file and stacks them; channels and sizes must agree unless options convert or fit them.
at::Tensor decode_all(const std::vector<fs::path>& files, const ImageReadOptions& options) {
  std::vector<at::Tensor> images;
  images.reserve(files.size());
  for (const fs::path& file : files) {
    at::Tensor image = read_image_file(file, options.channels);
    if (!images.empty()) {
      const at::Tensor& first = images.front();
      if (image.size(0) != first.size(0)) {
        dew::fail("'", file.string(), "' has ", image.size(0), " channels where '", files.front().string(), "' has ",
                  first.size(0), "; set channels to 1 (gray) or 3 (RGB) to convert every image");
      }
    }
    if (options.size > 0) {
      image = fit_images(image, options.size, options.fit, dew::str("'", file.string(), "'"));
    } else if (!images.empty() && (image.size(1) != images.front().size(1) || image.size(2) != images.front().size(2))) {
      dew::fail("'", file.string(), "' is ", image.size(2), "x", image.size(1), " where '", files.front().string(), "' is ",
                images.front().size(2), "x", images.front().size(1),
                "; images must share a size: set a size to resize or pad them all to it");
    }
    images.push_back(image);
  }
  return at::stack(images, 0);
}

}  // namespace

ImageSet read_image_directory(const fs::path& dir, const ImageReadOptions& options) {
  if (!options.split.empty() && options.split != "train") {
    dew::fail("split '", options.split, "' applies to a directory of IDX files, and '", dir.string(),
              "' holds images: point at the split's own directory instead");
  }
  ImageSet set;
  std::vector<fs::path> files;
  std::vector<std::int64_t> labels;
  std::optional<std::vector<std::string>> listed;
  std::string listed_from, labels_from = dew::str("'", labels_file_name(dir), "'");
  const fs::path labels_file = dir / "labels.txt", classes_file = dir / "classes.txt";
  std::error_code error;
  if (fs::is_regular_file(labels_file, error)) {
    Listing listing = read_labels_file(dir, labels_file);
    files = std::move(listing.files);
    labels = std::move(listing.labels);
    if (fs::is_regular_file(classes_file, error)) {
      listed = read_class_list(classes_file);
      listed_from = dew::str("'", classes_file.string(), "'");
    }
    set.source = dew::str("'", dir.string(), "' (labels from labels.txt)");
  } else {
    std::vector<fs::path> classes;
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.is_directory() && !hidden(entry.path())) classes.push_back(entry.path());
    }
    std::sort(classes.begin(), classes.end());
    std::vector<fs::path> flat = image_files(dir, false);
    if (!classes.empty()) {
      if (!flat.empty()) {
        dew::fail("'", dir.string(), "' holds both class subdirectories ('", classes.front().filename().string(),
                  "', ...) and images of its own ('", flat.front().filename().string(),
                  "'); move the images into class subdirectories, or list every image in a labels.txt");
      }
      listed.emplace();
      for (std::size_t c = 0; c < classes.size(); ++c) {
        std::vector<fs::path> members = image_files(classes[c], true);
        if (members.empty()) {
          dew::fail("class directory '", classes[c].string(), "' holds no PNG or JPEG images; add some or remove it");
        }
        listed->push_back(classes[c].filename().string());
        for (fs::path& member : members) {
          files.push_back(std::move(member));
          labels.push_back(static_cast<std::int64_t>(c));
        }
      }
      listed_from = labels_from = dew::str("the subdirectories of '", dir.string(), "'");
      set.source = dew::str("'", dir.string(), "' (", classes.size(), " class subdirectories)");
    } else {
      if (flat.empty()) {
        dew::fail("'", dir.string(), "' holds no IDX files, no PNG or JPEG images and no class subdirectories; ",
                  "point at an IDX images file or a directory of images");
      }
      files = std::move(flat);
      labels.assign(files.size(), 0);
      set.source = dew::str("'", dir.string(), "' (unlabelled)");
    }
  }
  set.pixels = decode_all(files, options);
  set.labels = at::tensor(labels, at::kLong);
  const bool unlabelled = !listed && !fs::is_regular_file(labels_file, error);
  if (!unlabelled) {
    set.class_names = settle_class_names(set.labels, std::move(listed), options.num_classes, labels_from, listed_from);
  }
  return set;
}

}  // namespace dew::data::images
