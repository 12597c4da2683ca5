#include "ir/file_io.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "ir/error.h"

namespace kiln {

void reject_directory(const std::string& path, const char* what) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail("{}: is a folder, not {}", path, what);
}

namespace {

// A file being written: a temporary file beside `path`, renamed over it once
// complete, when `path` is absent or a regular file, so a full disk or a
// failed write leaves the old file (or none), never a torn one that a later
// `kiln run` would meet; `path` itself otherwise (/dev/stdout, a FIFO, a
// symbolic link: renaming would replace the device node or the link).
class OutFile {
 public:
  explicit OutFile(const std::string& path) : path_(path) {
    struct stat st {};
    bool absent = ::lstat(path.c_str(), &st) != 0 && errno == ENOENT;
    if (absent || S_ISREG(st.st_mode)) {
      tmp_ = path + ".kiln-tmp-XXXXXX";
      int fd = ::mkstemp(tmp_.data());
      if (fd < 0) fail("{}: cannot write: {}", path, std::strerror(errno));
      // mkstemp makes 0600: give the mode a plain create would (or the old file's).
      mode_t mode = 0;
      if (absent) {
        mode = ::umask(0);
        ::umask(mode);
        mode = 0666 & ~mode;
      } else {
        mode = st.st_mode & 07777;
      }
      ::fchmod(fd, mode);
      f_ = ::fdopen(fd, "wb");
      if (!f_) {
        ::close(fd);
        ::unlink(tmp_.c_str());
        fail("{}: cannot write: {}", path, std::strerror(errno));
      }
    } else {
      f_ = std::fopen(path.c_str(), "wb");
      if (!f_) fail("{}: cannot write: {}", path, std::strerror(errno));
    }
  }
  OutFile(const OutFile&) = delete;
  OutFile& operator=(const OutFile&) = delete;
  ~OutFile() {
    if (!f_) return;
    std::fclose(f_);
    if (!tmp_.empty()) ::unlink(tmp_.c_str());
  }

  void write(const void* data, size_t n) {
    if (!err_ && n && std::fwrite(data, 1, n, f_) != n) err_ = errno ? errno : EIO;
  }

  // Flushes, closes and puts the file in place; fails with strerror.
  void finish() {
    if (std::fflush(f_) != 0 && !err_) err_ = errno;
    if (std::fclose(f_) != 0 && !err_) err_ = errno;
    f_ = nullptr;
    if (!err_ && !tmp_.empty() && std::rename(tmp_.c_str(), path_.c_str()) != 0) err_ = errno;
    if (err_) {
      if (!tmp_.empty()) ::unlink(tmp_.c_str());
      fail("{}: cannot write: {}", path_, std::strerror(err_));
    }
  }

 private:
  std::string path_, tmp_;
  std::FILE* f_ = nullptr;
  int err_ = 0;
};

}  // namespace

void write_file(const std::string& path, const void* data, size_t size) {
  OutFile out(path);
  out.write(data, size);
  out.finish();
}

void write_file_pieces(const std::string& path, const std::function<void(const FilePieceWriter&)>& produce) {
  OutFile out(path);
  produce([&out](const void* data, size_t n) { out.write(data, n); });
  out.finish();
}

}  // namespace kiln
