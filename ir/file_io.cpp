#include "ir/file_io.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "ir/error.h"

namespace kiln {

void write_file(const std::string& path, const void* data, size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) fail("{}: cannot write: {}", path, std::strerror(errno));
  size_t n = std::fwrite(data, 1, size, f);
  int werr = n == size ? 0 : errno;
  if (std::fclose(f) != 0 && werr == 0) werr = errno;
  if (werr) fail("{}: cannot write: {}", path, std::strerror(werr));
}

void write_file_pieces(const std::string& path, const std::function<void(const FilePieceWriter&)>& produce) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) fail("{}: cannot write: {}", path, std::strerror(errno));
  int werr = 0;
  try {
    produce([&](const void* data, size_t n) {
      if (!werr && n && std::fwrite(data, 1, n, f) != n) werr = errno ? errno : EIO;
    });
  } catch (...) {
    std::fclose(f);
    throw;
  }
  if (std::fclose(f) != 0 && werr == 0) werr = errno;
  if (werr) fail("{}: cannot write: {}", path, std::strerror(werr));
}

}  // namespace kiln
