#pragma once
// Class names and label checks shared by the IDX and image-directory readers.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace dew::data::images {

// The names in a classes.txt (one per line, line i = class i; trailing blanks and a final empty line
// dropped). A blank or repeated name is refused naming the file and the line.
std::vector<std::string> read_class_list(const std::filesystem::path& path);

// "0", "1", ..., "count - 1".
std::vector<std::string> class_ids(std::int64_t count);

// Names for a data set whose int64 labels came from IDX bytes, when their SHA-256 is one the built-in
// table knows (Fashion-MNIST's train and t10k labels); nullopt otherwise.
std::optional<std::vector<std::string>> known_class_names(const at::Tensor& labels);

// Fails naming `file` and the first record whose label is outside [0, count), with what to do.
void check_label_range(const at::Tensor& labels, std::int64_t count, const std::string& file, const std::string& why);

// The class names of labelled data: `listed` (from a classes.txt or a table) if any, else ids up to the
// largest label; with num_classes > 0 the labels must be below it and the ids are padded up to it.
// `file` and `listed_from` name where labels and names came from, for errors.
std::vector<std::string> settle_class_names(const at::Tensor& labels, std::optional<std::vector<std::string>> listed,
                                            std::int64_t num_classes, const std::string& file,
                                            const std::string& listed_from);

}  // namespace dew::data::images
