#pragma once
// IDX files, the MNIST family's format (LeCun et al.): a big-endian header, then the raw array.
//
//   bytes 0-1  zero
//   byte  2    element type (0x08 = unsigned byte, the only one image data uses)
//   byte  3    number of dimensions
//   then one big-endian uint32 per dimension, then prod(dims) elements, nothing after them.
//
// Images are magic 0x00000803 ([N, H, W] uint8), labels 0x00000801 ([N] uint8). Files are read whole,
// gzipped (detected by the gzip magic 1f 8b, not by the name) or not; a gzipped file is inflated as a
// stream, and the output never grows past what the header promises, so a damaged header cannot make the
// reader allocate more than the data really holds.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <optional>

namespace dew::data::images {

// uint8 [N, 1, H, W]: every error names the file (wrong magic, truncated or overlong data, dimension
// products that overflow, an empty array).
at::Tensor read_idx_images(const std::filesystem::path& path);
// uint8 labels as int64 [N].
at::Tensor read_idx_labels(const std::filesystem::path& path);

// The labels file that goes with an images file: "images" -> "labels" and "idx3" -> "idx1" in the name
// (train-images-idx3-ubyte.gz -> train-labels-idx1-ubyte.gz, t10k-images.idx3-ubyte -> t10k-labels.idx1-ubyte);
// the same compression suffix is preferred, the other one accepted. nullopt when the name does not follow
// the pattern; the path (that may not exist) otherwise.
std::optional<std::filesystem::path> sibling_labels_path(const std::filesystem::path& images);

}  // namespace dew::data::images
