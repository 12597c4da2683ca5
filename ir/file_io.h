// Writing whole files with errors that name the path and the operating
// system's reason (strerror), for reports and results kiln writes.
#pragma once
#include <cstddef>
#include <functional>
#include <string>

namespace kiln {

// Writes `n` bytes at `data` to `path` (created or truncated), failing with
// the path and strerror.
void write_file(const std::string& path, const void* data, size_t n);
// Writes `path` from the pieces `produce` hands to the writer it is given,
// in order, without the whole file in memory; errors as write_file's.
using FilePieceWriter = std::function<void(const void* data, size_t n)>;
void write_file_pieces(const std::string& path, const std::function<void(const FilePieceWriter&)>& produce);
// Writes `text` to `path`, failing with the path and strerror.
inline void write_text_file(const std::string& path, const std::string& text) {
  write_file(path, text.data(), text.size());
}

}  // namespace kiln
