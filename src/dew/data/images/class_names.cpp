#include "dew/data/images/class_names.h"

#include <ATen/ATen.h>

#include <set>

#include "dew/core/atomic_file.h"
#include "dew/core/error.h"
#include "dew/core/text_lines.h"
#include "dew/core/sha256.h"

namespace dew::data::images {

namespace {

// SHA-256 of the label bytes (after the 8-byte IDX header) of Fashion-MNIST's train-labels-idx1-ubyte and
// t10k-labels-idx1-ubyte (Xiao, Rasul, Vollgraf 2017), computed once with Python: hashlib.sha256(gzip.open(FILE).read()[8:]).hexdigest().
constexpr const char* kFashionTrainLabels = "657fbd221bfc9f4198cc14b5619cc33ec57c58dd0e47af4d99d6650759e869a7";
constexpr const char* kFashionTestLabels = "3d0e6c6ea990b53b6f8f500a41cac93881d981b315f84578b7d915342ade01e9";

}  // namespace

const std::vector<std::string>& fashion_mnist_class_names() {
  static const std::vector<std::string> names = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                 "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  return names;
}

std::vector<std::string> read_class_list(const std::filesystem::path& path) {
  std::string text = dew::read_file(path);
  std::vector<std::string> names;
  std::set<std::string> seen;
  std::int64_t line = 0;
  for (std::string& name : dew::text_lines(text)) {
    ++line;
    if (name.empty()) {
      dew::fail("'", path.string(), "' line ", line, " is blank: every line names one class (line i = class i - 1)");
    }
    if (!seen.insert(name).second) dew::fail("'", path.string(), "' line ", line, " repeats the class name '", name, "'");
    names.push_back(name);
  }
  if (names.empty()) dew::fail("'", path.string(), "' names no classes: write one class name per line");
  return names;
}

std::vector<std::string> class_ids(std::int64_t count) {
  std::vector<std::string> ids;
  for (std::int64_t i = 0; i < count; ++i) ids.push_back(std::to_string(i));
  return ids;
}

std::optional<std::vector<std::string>> known_class_names(const at::Tensor& labels) {
  at::Tensor bytes = labels.to(at::kByte).contiguous();
  std::string hash = dew::sha256_hex(std::string_view(reinterpret_cast<const char*>(bytes.data_ptr<std::uint8_t>()),
                                                      static_cast<std::size_t>(bytes.numel())));
  if (hash == kFashionTrainLabels || hash == kFashionTestLabels) return fashion_mnist_class_names();
  return std::nullopt;
}

void check_label_range(const at::Tensor& labels, std::int64_t count, const std::string& file, const std::string& why) {
  const std::int64_t* values = labels.data_ptr<std::int64_t>();
  for (std::int64_t i = 0; i < labels.numel(); ++i) {
    if (values[i] < 0 || values[i] >= count) {
      dew::fail(file, " gives record ", i, " the label ", values[i], ", outside [0, ", count, ") (", why, ")");
    }
  }
}

std::vector<std::string> settle_class_names(const at::Tensor& labels, std::optional<std::vector<std::string>> listed,
                                            std::int64_t num_classes, const std::string& file,
                                            const std::string& listed_from) {
  if (num_classes < 0) dew::fail("num_classes ", num_classes, " must not be negative (0 = inferred)");
  std::vector<std::string> names;
  if (listed) {
    names = std::move(*listed);
    auto count = static_cast<std::int64_t>(names.size());
    if (num_classes > 0 && num_classes != count) {
      dew::fail(listed_from, " names ", count, " classes but num_classes is ", num_classes, "; make them agree");
    }
    check_label_range(labels, count, file, dew::str(listed_from, " names ", count, " classes"));
    return names;
  }
  if (num_classes > 0) {
    check_label_range(labels, num_classes, file, dew::str("num_classes is ", num_classes));
    return class_ids(num_classes);
  }
  const std::int64_t largest = labels.numel() ? labels.max().item<std::int64_t>() : 0;
  check_label_range(labels, largest + 1, file, "labels are class ids, never negative");
  return class_ids(largest + 1);
}

}  // namespace dew::data::images
