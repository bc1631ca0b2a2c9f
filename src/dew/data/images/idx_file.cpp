#include "dew/data/images/idx_file.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "dew/core/error.h"
#include "dew/data/images/byte_stream.h"

namespace dew::data::images {

namespace {

constexpr std::uint32_t kUnsignedByte = 0x08;

std::uint32_t big_endian(const unsigned char* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | std::uint32_t{p[3]};
}

// Reads exactly `bytes` (or fails naming the file as truncated), growing the buffer as data arrives so a
// header that promises more than the file holds costs no more memory than the file really has.
std::vector<unsigned char> read_exactly(ByteStream& stream, std::uint64_t bytes, const char* kind) {
  std::vector<unsigned char> data;
  constexpr std::uint64_t kFirstChunk = 1 << 20;
  while (data.size() < bytes) {
    std::uint64_t have = data.size();
    std::uint64_t chunk = std::min(bytes - have, std::max<std::uint64_t>(have, kFirstChunk));
    data.resize(have + chunk);
    std::size_t got = stream.read(data.data() + have, chunk);
    if (got < chunk) {
      dew::fail("'", stream.path().string(), "' is truncated: its header promises ", bytes, " bytes of ", kind,
                " but the data ends after ", have + got, "; download or copy the file again");
    }
  }
  return data;
}

// The array of an IDX file with the expected magic (type 0x08 and `dims` dimensions): its dimensions and
// its bytes. `kind` is "images" or "labels" for the messages.
struct IdxArray {
  std::vector<std::int64_t> shape;
  std::vector<unsigned char> data;
};

IdxArray read_idx(const std::filesystem::path& path, std::uint32_t dims, const char* kind) {
  ByteStream stream(path);
  const std::string name = path.string();
  const std::uint32_t expected_magic = (kUnsignedByte << 8) | dims;
  unsigned char head[4];
  if (stream.read(head, 4) < 4) {
    dew::fail("'", name, "' is too short to be an IDX ", kind, " file (fewer than 4 bytes); expected the magic number 0x",
              std::hex, expected_magic);
  }
  std::uint32_t magic = big_endian(head);
  if (magic != expected_magic) {
    std::string hint = magic != ((kUnsignedByte << 8) | (dims == 3 ? 1u : 3u))
                           ? std::string("; is this an IDX file (the MNIST family's format)?")
                       : dims == 3 ? std::string(" (that is an IDX labels file; pass the images file or the directory holding both)")
                                   : std::string(" (that is an IDX images file, not labels)");
    dew::fail("'", name, "' has magic number 0x", std::hex, magic, " where an IDX ", kind, " file has 0x", expected_magic,
              std::dec, hint);
  }
  IdxArray array;
  std::uint64_t count = 1;
  for (std::uint32_t d = 0; d < dims; ++d) {
    unsigned char field[4];
    if (stream.read(field, 4) < 4) dew::fail("'", name, "' is truncated inside its header (dimension ", d, " of ", dims, ")");
    std::uint64_t size = big_endian(field);
    if (size == 0) dew::fail("'", name, "' has dimension ", d, " of size 0: it holds no ", kind);
    // The product must fit an int64 (tensor sizes); uint32 factors make the check exact.
    if (count > static_cast<std::uint64_t>(INT64_MAX) / size) {
      dew::fail("'", name, "' has dimensions whose product overflows 64 bits (dimension ", d, " = ", size,
                "); the header is damaged");
    }
    count *= size;
    array.shape.push_back(static_cast<std::int64_t>(size));
  }
  const std::uint64_t header = 4 + 4 * std::uint64_t{dims};
  // For an uncompressed file the size on disk settles truncation before anything is allocated.
  if (!stream.gzipped() && stream.file_size() < header + count) {
    dew::fail("'", name, "' is truncated: its header promises ", count, " bytes of ", kind, " but the file holds ",
              stream.file_size() - std::min(header, stream.file_size()), " after the header; download or copy the file again");
  }
  array.data = read_exactly(stream, count, kind);
  unsigned char extra;
  if (stream.read(&extra, 1) != 0) {
    dew::fail("'", name, "' holds more data than its header's dimensions say (", count,
              " bytes); the header or the file is damaged");
  }
  return array;
}

}  // namespace

at::Tensor read_idx_images(const std::filesystem::path& path) {
  IdxArray array = read_idx(path, 3, "images");
  const std::int64_t n = array.shape[0], h = array.shape[1], w = array.shape[2];
  at::Tensor pixels = at::empty({n, 1, h, w}, at::kByte);
  std::memcpy(pixels.data_ptr<std::uint8_t>(), array.data.data(), array.data.size());
  return pixels;
}

at::Tensor read_idx_labels(const std::filesystem::path& path) {
  IdxArray array = read_idx(path, 1, "labels");
  at::Tensor labels = at::empty({array.shape[0]}, at::kLong);
  std::int64_t* out = labels.data_ptr<std::int64_t>();
  for (std::size_t i = 0; i < array.data.size(); ++i) out[i] = array.data[i];
  return labels;
}

std::optional<std::filesystem::path> sibling_labels_path(const std::filesystem::path& images) {
  std::string name = images.filename().string();
  std::size_t word = name.find("images"), idx3 = name.find("idx3");
  if (word == std::string::npos || idx3 == std::string::npos) return std::nullopt;
  name.replace(word, 6, "labels");
  name.replace(name.find("idx3"), 4, "idx1");
  std::filesystem::path same = images.parent_path() / name;
  std::error_code error;
  if (std::filesystem::exists(same, error)) return same;
  // The other compression: train-images-idx3-ubyte.gz beside an uncompressed train-labels-idx1-ubyte.
  const bool gz = name.size() > 3 && name.compare(name.size() - 3, 3, ".gz") == 0;
  std::filesystem::path other = images.parent_path() / (gz ? name.substr(0, name.size() - 3) : name + ".gz");
  if (std::filesystem::exists(other, error)) return other;
  return same;
}

}  // namespace dew::data::images
