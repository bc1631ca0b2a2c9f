#pragma once
// A read-only memory map of a whole file: token arrays far larger than memory are read in place.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>

namespace dew {

class MappedFile {
 public:
  MappedFile() = default;
  explicit MappedFile(const std::filesystem::path& path);  // error names the file
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }
  std::span<const std::uint8_t> bytes() const { return {data_, size_}; }
  const std::filesystem::path& path() const { return path_; }

  // Drops this process's pages of bytes [offset, offset + length) (the whole pages inside it): a caller that
  // has copied them out stops paying their resident memory. Reading them again later maps them back from the
  // page cache, so this changes memory, never contents. Best effort: a refusal by the kernel is ignored.
  void drop_pages(std::size_t offset, std::size_t length) const;

 private:
  void release();
  std::filesystem::path path_;
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace dew
