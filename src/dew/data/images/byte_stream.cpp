#include "dew/data/images/byte_stream.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>

#include "dew/core/error.h"

namespace dew::data::images {

struct ByteStream::Inflater {
  z_stream stream{};
  std::vector<unsigned char> input = std::vector<unsigned char>(1 << 16);
  bool input_ended = false;   // the file has no more bytes
  bool member_ended = false;  // inflate reached the end of a gzip member
  ~Inflater() { inflateEnd(&stream); }
};

ByteStream::ByteStream(const std::filesystem::path& path) : path_(path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) dew::fail("'", path.string(), "' is a directory, not a file");
  file_ = std::fopen(path.c_str(), "rb");
  if (!file_) dew::fail("cannot open '", path.string(), "': ", std::strerror(errno));
  file_size_ = std::filesystem::file_size(path, error);
  unsigned char magic[2] = {0, 0};
  std::size_t got = std::fread(magic, 1, 2, file_);
  gzipped_ = got == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
  std::rewind(file_);
  if (gzipped_) {
    inflater_ = std::make_unique<Inflater>();
    // 16 + MAX_WBITS: a gzip wrapper (header and CRC-32 trailer checked by zlib), not a raw zlib stream.
    if (inflateInit2(&inflater_->stream, 16 + MAX_WBITS) != Z_OK) {
      std::fclose(file_);
      dew::fail("cannot start inflating '", path.string(), "' (zlib out of memory)");
    }
  }
}

ByteStream::~ByteStream() {
  if (file_) std::fclose(file_);
}

std::size_t ByteStream::read(void* out, std::size_t bytes) {
  auto* target = static_cast<unsigned char*>(out);
  return gzipped_ ? read_inflated(target, bytes) : read_raw(target, bytes);
}

std::size_t ByteStream::read_raw(unsigned char* out, std::size_t bytes) {
  std::size_t got = std::fread(out, 1, bytes, file_);
  if (got < bytes && std::ferror(file_)) dew::fail("cannot read '", path_.string(), "': ", std::strerror(errno));
  return got;
}

std::size_t ByteStream::read_inflated(unsigned char* out, std::size_t bytes) {
  Inflater& z = *inflater_;
  std::size_t produced = 0;
  while (produced < bytes) {
    if (z.stream.avail_in == 0 && !z.input_ended) {
      std::size_t got = std::fread(z.input.data(), 1, z.input.size(), file_);
      if (got == 0) {
        if (std::ferror(file_)) dew::fail("cannot read '", path_.string(), "': ", std::strerror(errno));
        z.input_ended = true;
      }
      z.stream.next_in = z.input.data();
      z.stream.avail_in = static_cast<uInt>(got);
    }
    if (z.member_ended) {
      if (z.stream.avail_in == 0) break;  // the end of the last member: the end of the data
      inflateReset(&z.stream);           // another member follows (concatenated .gz files)
      z.member_ended = false;
    }
    // Chunks below 1 GiB keep avail_out within zlib's 32-bit counter.
    std::size_t chunk = std::min<std::size_t>(bytes - produced, std::size_t{1} << 30);
    z.stream.next_out = out + produced;
    z.stream.avail_out = static_cast<uInt>(chunk);
    int status = inflate(&z.stream, Z_NO_FLUSH);
    produced += chunk - z.stream.avail_out;
    if (status == Z_STREAM_END) {
      z.member_ended = true;
    } else if (status == Z_BUF_ERROR) {
      // No progress without more input: fine unless the file has none left.
      if (z.stream.avail_in == 0 && z.input_ended) {
        dew::fail("'", path_.string(), "' is truncated: its gzip data ends in the middle of the stream; ",
                  "download or copy the file again");
      }
    } else if (status != Z_OK) {
      dew::fail("'", path_.string(), "' holds damaged gzip data (zlib: ", z.stream.msg ? z.stream.msg : "error ",
                z.stream.msg ? "" : std::to_string(status), "); download or copy the file again");
    }
  }
  return produced;
}

}  // namespace dew::data::images
