#include "ir/file_io.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "ir/error.h"

namespace kiln {

void write_text_file(const std::string& path, const std::string& text) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) fail("{}: cannot write: {}", path, std::strerror(errno));
  size_t n = std::fwrite(text.data(), 1, text.size(), f);
  int werr = n == text.size() ? 0 : errno;
  if (std::fclose(f) != 0 && werr == 0) werr = errno;
  if (werr) fail("{}: cannot write: {}", path, std::strerror(werr));
}

}  // namespace kiln
