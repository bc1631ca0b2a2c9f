#pragma once
// A file read front to back as bytes, inflated on the fly when it is gzipped (gzip magic 1f 8b, whatever
// its name), so data formats need not care whether their file was compressed. Concatenated gzip members
// (what `cat a.gz b.gz` makes) read as one stream, as gunzip reads them.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <vector>

namespace dew::data::images {

class ByteStream {
 public:
  // Fails naming the file when it cannot be opened.
  explicit ByteStream(const std::filesystem::path& path);
  ~ByteStream();
  ByteStream(const ByteStream&) = delete;
  ByteStream& operator=(const ByteStream&) = delete;

  // Reads up to `bytes` into `out`; fewer only at the end of the data. Fails naming the file on a read
  // error or damaged gzip data (including a gzip stream cut short).
  std::size_t read(void* out, std::size_t bytes);

  bool gzipped() const { return gzipped_; }
  // The size on disk (the compressed size for a gzipped file).
  std::uint64_t file_size() const { return file_size_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::size_t read_raw(unsigned char* out, std::size_t bytes);
  std::size_t read_inflated(unsigned char* out, std::size_t bytes);

  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
  std::uint64_t file_size_ = 0;
  bool gzipped_ = false;
  struct Inflater;
  std::unique_ptr<Inflater> inflater_;
};

}  // namespace dew::data::images
