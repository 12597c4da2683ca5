// Reading and writing whole files with errors that name the path and the
// operating system's reason (strerror), for the models, plans, reports and
// results kiln reads and writes.
#pragma once
#include <cstddef>
#include <functional>
#include <string>

namespace kiln {

// Fails with "PATH: is a folder, not WHAT" when `path` names a directory.
// Opening a directory as a file succeeds on Linux and reading it fails later
// with a confusing reason (a size of 2^63, "basic_filebuf::underflow"), so
// every reader of a user-named file asks first.
void reject_directory(const std::string& path, const char* what);

// Writes `n` bytes at `data` to `path` (created or replaced), failing with
// the path and strerror. A regular file is written beside and renamed into
// place, so a failed write (a full disk) leaves the old file or none.
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
