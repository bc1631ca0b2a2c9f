#include "dew/data/token_files.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

#include "dew/core/atomic_file.h"
#include "dew/core/config.h"
#include "dew/core/error.h"
#include "dew/data/tokenizers/tokenizer_fingerprint.h"

namespace dew::data {
namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

TokenDtype dtype_for_vocab(std::int64_t vocab_size) {
  if (vocab_size <= 0) dew::fail("vocab_size must be positive, got ", vocab_size);
  if (vocab_size <= (std::int64_t{1} << 8)) return TokenDtype::uint8;
  if (vocab_size <= (std::int64_t{1} << 16)) return TokenDtype::uint16;
  if (vocab_size <= (std::int64_t{1} << 32)) return TokenDtype::uint32;
  dew::fail("vocab_size ", vocab_size, " does not fit in 32-bit token ids");
}

std::size_t dtype_bytes(TokenDtype dtype) {
  switch (dtype) {
    case TokenDtype::uint8: return 1;
    case TokenDtype::uint16: return 2;
    case TokenDtype::uint32: return 4;
  }
  return 0;
}

const char* dtype_name(TokenDtype dtype) {
  switch (dtype) {
    case TokenDtype::uint8: return "uint8";
    case TokenDtype::uint16: return "uint16";
    case TokenDtype::uint32: return "uint32";
  }
  return "?";
}

TokenDtype parse_dtype(const std::string& name, const std::string& source) {
  if (name == "uint8") return TokenDtype::uint8;
  if (name == "uint16") return TokenDtype::uint16;
  if (name == "uint32") return TokenDtype::uint32;
  dew::fail(source, ": dtype \"", name, "\" is not a token dtype; use \"uint8\", \"uint16\" or \"uint32\"");
}

const char* split_file_name(Split split) { return split == Split::train ? "train.bin" : "val.bin"; }

// ---- meta.json ----------------------------------------------------------------------------------------

std::string meta_to_json_text(const TokenMeta& meta) {
  Json j = Json::object();
  j["tokenizer"] = meta.tokenizer;
  j["tokenizer_source"] = meta.tokenizer_source;
  j["vocab_size"] = meta.vocab_size;
  j["dtype"] = dtype_name(meta.dtype);
  j["train_tokens"] = meta.train_tokens;
  j["val_tokens"] = meta.val_tokens;
  j["eos_id"] = meta.eos_id ? Json(*meta.eos_id) : Json(nullptr);
  j["packed"] = meta.packed;
  j["documents"] = meta.documents;
  if (!meta.tokenizer_sha256.empty()) j["tokenizer_sha256"] = meta.tokenizer_sha256;
  return j.dump(2) + "\n";
}

void write_token_meta(const fs::path& dir, const TokenMeta& meta) {
  write_file_atomic(dir / "meta.json", meta_to_json_text(meta));
}

namespace {

const Json& field(const Json& j, const char* name, const std::string& source) {
  auto it = j.find(name);
  if (it == j.end()) {
    dew::fail(source, ": field '", name, "' is missing; the directory was not written by dew tokenize, or by an "
              "older version: tokenize the corpus again");
  }
  return *it;
}

std::string string_field(const Json& j, const char* name, const std::string& source) {
  const Json& v = field(j, name, source);
  if (!v.is_string()) dew::fail(source, ": field '", name, "' must be a string, got ", v.dump());
  return v.get<std::string>();
}

std::int64_t count_field(const Json& j, const char* name, const std::string& source) {
  const Json& v = field(j, name, source);
  if (!v.is_number_integer()) dew::fail(source, ": field '", name, "' must be an integer, got ", v.dump());
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    dew::fail(source, ": field '", name, "' is too large: ", v.dump());
  }
  auto n = v.get<std::int64_t>();
  if (n < 0) dew::fail(source, ": field '", name, "' must not be negative, got ", n);
  return n;
}

}  // namespace

TokenMeta read_token_meta(const fs::path& dir) {
  fs::path file = dir / "meta.json";
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    dew::fail("token directory '", dir.string(), "' does not exist; write it with `dew tokenize --out ", dir.string(), "`");
  }
  if (!fs::exists(file, ec)) {
    dew::fail("'", file.string(), "' does not exist: '", dir.string(), "' is not a token directory written by dew tokenize");
  }
  const std::string source = file.string();
  Json j = config::parse_json_file(file);
  if (!j.is_object()) dew::fail(source, ": must hold a JSON object, got ", config::json_kind(j));

  TokenMeta meta;
  meta.tokenizer = string_field(j, "tokenizer", source);
  if (meta.tokenizer.empty()) dew::fail(source, ": field 'tokenizer' is empty");
  meta.tokenizer_source = string_field(j, "tokenizer_source", source);
  meta.vocab_size = count_field(j, "vocab_size", source);
  if (meta.vocab_size == 0) dew::fail(source, ": field 'vocab_size' must be positive");
  meta.dtype = parse_dtype(string_field(j, "dtype", source), source);
  if (meta.vocab_size - 1 > static_cast<std::int64_t>((std::uint64_t{1} << (8 * dtype_bytes(meta.dtype))) - 1)) {
    dew::fail(source, ": dtype ", dtype_name(meta.dtype), " cannot hold ids up to vocab_size - 1 = ",
              meta.vocab_size - 1, "; expected ", dtype_name(dtype_for_vocab(meta.vocab_size)));
  }
  meta.train_tokens = count_field(j, "train_tokens", source);
  meta.val_tokens = count_field(j, "val_tokens", source);
  const Json& eos = field(j, "eos_id", source);
  if (!eos.is_null()) {
    if (!eos.is_number_integer()) dew::fail(source, ": field 'eos_id' must be an integer or null, got ", eos.dump());
    auto id = eos.get<std::int64_t>();
    if (id < 0 || id >= meta.vocab_size) {
      dew::fail(source, ": eos_id ", id, " is outside the vocabulary [0, ", meta.vocab_size, ")");
    }
    meta.eos_id = id;
  }
  const Json& packed = field(j, "packed", source);
  if (!packed.is_boolean()) dew::fail(source, ": field 'packed' must be true or false, got ", packed.dump());
  meta.packed = packed.get<bool>();
  meta.documents = count_field(j, "documents", source);
  if (meta.packed && !meta.eos_id) dew::fail(source, ": 'packed' is true but 'eos_id' is null");
  if (auto sha = j.find("tokenizer_sha256"); sha != j.end()) {  // optional: older directories lack it
    const std::string text = sha->is_string() ? sha->get<std::string>() : std::string();
    const bool hex = text.size() == 64 && std::all_of(text.begin(), text.end(), [](char c) {
      return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
    });
    if (!hex) dew::fail(source, ": field 'tokenizer_sha256' must be 64 lowercase hex digits, got ", sha->dump());
    meta.tokenizer_sha256 = text;
  }
  return meta;
}

// ---- reading ids --------------------------------------------------------------------------------------

namespace {
[[noreturn]] void id_out_of_vocab(const fs::path& file, std::int64_t position, std::int64_t id, std::int64_t vocab) {
  dew::fail("'", file.string(), "': token ", position, " has id ", id, ", outside the vocabulary [0, ", vocab,
            "); the file does not belong to this meta.json's tokenizer: tokenize the corpus again");
}
}  // namespace

void TokenArray::copy_checked(std::int64_t start, std::int64_t count, std::int64_t* out, std::int64_t vocab_size) const {
  if (start < 0 || count < 0 || start + count > size_) {
    dew::fail("'", file_.string(), "': read of ids [", start, ", ", start + count, ") outside its ", size_, " tokens");
  }
  for (std::int64_t i = 0; i < count; ++i) {
    std::int64_t id = (*this)[start + i];
    if (id >= vocab_size) id_out_of_vocab(file_, start + i, id, vocab_size);
    out[i] = id;
  }
}

namespace {
// The largest id of n little-endian T at p: a plain loop over the map that the compiler vectorizes.
template <class T>
std::int64_t max_id(const std::uint8_t* p, std::int64_t n) {
  T m = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, p + static_cast<std::size_t>(i) * sizeof(T), sizeof(T));
    m = std::max(m, v);
  }
  return static_cast<std::int64_t>(m);
}
}  // namespace

void check_ids_in_vocab(const TokenArray& ids, std::int64_t vocab_size) {
  if (ids.dtype() == TokenDtype::uint8 && vocab_size >= 256) return;
  if (ids.dtype() == TokenDtype::uint16 && vocab_size >= 65536) return;
  if constexpr (std::endian::native == std::endian::little) {
    std::int64_t max = 0;
    switch (ids.dtype()) {
      case TokenDtype::uint8: max = max_id<std::uint8_t>(ids.data(), ids.size()); break;
      case TokenDtype::uint16: max = max_id<std::uint16_t>(ids.data(), ids.size()); break;
      case TokenDtype::uint32: max = max_id<std::uint32_t>(ids.data(), ids.size()); break;
    }
    if (max < vocab_size) return;
  }
  for (std::int64_t i = 0; i < ids.size(); ++i) {  // find the first offender for the message
    std::int64_t id = ids[i];
    if (id >= vocab_size) id_out_of_vocab(ids.file(), i, id, vocab_size);
  }
}

TokenFiles::TokenFiles(const fs::path& dir) : dir_(dir), meta_(read_token_meta(dir)) {
  for (Split s : {Split::train, Split::val}) {
    fs::path file = dir / split_file_name(s);
    std::error_code ec;
    if (!fs::exists(file, ec)) dew::fail("'", file.string(), "' does not exist (meta.json lists ", meta_.tokens(s), " tokens)");
    MappedFile mapped(file);
    std::uint64_t expected = static_cast<std::uint64_t>(meta_.tokens(s)) * dtype_bytes(meta_.dtype);
    if (mapped.size() != expected) {
      dew::fail("'", file.string(), "' has ", mapped.size(), " bytes, expected ", expected, " (", meta_.tokens(s), " ",
                dtype_name(meta_.dtype), " tokens as meta.json says); the directory is damaged or was changed: "
                "tokenize the corpus again");
    }
    (s == Split::train ? train_ : val_) = std::move(mapped);
  }
}

TokenArray TokenFiles::split(Split s) const {
  const MappedFile& m = s == Split::train ? train_ : val_;
  TokenArray ids(m.data(), meta_.tokens(s), meta_.dtype, dir_ / split_file_name(s));
  check_ids_in_vocab(ids, meta_.vocab_size);
  return ids;
}

std::unique_ptr<Tokenizer> load_token_tokenizer(const fs::path& dir, const TokenMeta& meta) {
  if (meta.tokenizer == "byte") return load_tokenizer("byte");
  return load_tokenizer((dir / meta.tokenizer).string());
}

std::string token_tokenizer_sha256(const fs::path& dir, const TokenMeta& meta) {
  if (!meta.tokenizer_sha256.empty()) return meta.tokenizer_sha256;
  return tokenizer_sha256(*load_token_tokenizer(dir, meta));
}

// ---- writing ids --------------------------------------------------------------------------------------

namespace {
constexpr std::size_t kWriteBuffer = 1 << 20;
}

TokenWriter::TokenWriter(const fs::path& file, TokenDtype dtype) : file_(file), dtype_(dtype) {
  out_ = std::fopen(file.c_str(), "wb");
  if (!out_) dew::fail("cannot create '", file.string(), "': ", std::strerror(errno));
  buffer_.reserve(kWriteBuffer);
}

TokenWriter::~TokenWriter() {
  if (out_) std::fclose(out_);
}

void TokenWriter::flush_buffer() {
  if (buffer_.empty()) return;
  if (std::fwrite(buffer_.data(), 1, buffer_.size(), out_) != buffer_.size()) {
    dew::fail("cannot write '", file_.string(), "': ", std::strerror(errno), " (is the disk full?)");
  }
  buffer_.clear();
}

void TokenWriter::write(const TokenId* ids, std::size_t count) {
  if (!out_) dew::fail("write to '", file_.string(), "' after close");
  const std::size_t width = dtype_bytes(dtype_);
  const std::uint64_t limit = width == 4 ? 0xFFFFFFFFull : (std::uint64_t{1} << (8 * width)) - 1;
  for (std::size_t i = 0; i < count; ++i) {
    if (ids[i] < 0 || static_cast<std::uint64_t>(ids[i]) > limit) {
      dew::fail("token id ", ids[i], " does not fit ", dtype_name(dtype_), " (writing '", file_.string(), "')");
    }
    auto v = static_cast<std::uint32_t>(ids[i]);
    for (std::size_t b = 0; b < width; ++b) buffer_.push_back(static_cast<std::uint8_t>(v >> (8 * b)));
    if (buffer_.size() >= kWriteBuffer) flush_buffer();
  }
  bytes_ += count * width;
}

void TokenWriter::write_bytes(const void* data, std::size_t bytes) {
  if (!out_) dew::fail("write to '", file_.string(), "' after close");
  flush_buffer();
  if (bytes && std::fwrite(data, 1, bytes, out_) != bytes) {
    dew::fail("cannot write '", file_.string(), "': ", std::strerror(errno), " (is the disk full?)");
  }
  bytes_ += bytes;
}

void TokenWriter::close() {
  if (!out_) return;
  flush_buffer();
  bool ok = std::fflush(out_) == 0;
  int saved = errno;
  ok = std::fclose(out_) == 0 && ok;
  out_ = nullptr;
  if (!ok) dew::fail("cannot finish '", file_.string(), "': ", std::strerror(saved), " (is the disk full?)");
}

}  // namespace dew::data
