#pragma once
// The safetensors format: an 8-byte little-endian header length, a JSON header naming each tensor's
// dtype, shape and byte range, then the raw little-endian data. Read through a memory map, so opening a
// large checkpoint costs nothing until a tensor is used; written atomically (temp file, fsync, rename).
//
// The header is checked before any tensor is touched: its size, that every byte range lies inside the
// file, that ranges do not overlap, that names are unique and that each shape matches its byte count.
#include <ATen/ATen.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dew/core/mapped_file.h"
#include "dew/formats/safetensors_header.h"

namespace dew::formats {

class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::filesystem::path& path);  // validates the header

  const std::filesystem::path& path() const { return path_; }
  std::vector<std::string> names() const;  // in file order of their data
  bool contains(const std::string& name) const { return entries_.count(name) > 0; }
  const SafetensorsEntry& entry(const std::string& name) const;  // error names the file and tensor
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // A CPU tensor viewing the mapped bytes (kept alive by the tensor), in the file's dtype.
  at::Tensor view(const std::string& name) const;
  // A CPU copy, converted to `dtype` when given.
  at::Tensor load(const std::string& name, std::optional<c10::ScalarType> dtype = std::nullopt) const;
  // After a tensor's bytes were copied out: drops their mapped pages from this process (MappedFile::drop_pages),
  // so loading a model holds one copy of its weights at a time instead of the map and the copy.
  void drop_pages(const std::string& name) const;

 private:
  std::filesystem::path path_;
  std::shared_ptr<MappedFile> map_;
  std::size_t data_start_ = 0;
  std::map<std::string, SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

// Writes tensors (any device; copied to CPU, contiguous) in name order. Refuses non-finite names and
// dtypes safetensors cannot express.
void save_safetensors(const std::filesystem::path& path, const std::map<std::string, at::Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// "F32" <-> at::kFloat, ...; errors name the dtype.
c10::ScalarType safetensors_dtype(const std::string& name, const std::string& context);
std::string safetensors_dtype_name(c10::ScalarType type);

}  // namespace dew::formats
