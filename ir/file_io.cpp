#include "ir/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
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
    int fd = -1;
    if (absent || S_ISREG(st.st_mode)) {
      // A name of this process and call, created as a plain create would
      // (0666 less the umask, which the kernel applies), then the old
      // file's mode.
      static std::atomic<unsigned> counter{0};
      tmp_ = fmt::format("{}.kiln-tmp-{}-{}", path, ::getpid(), counter++);
      fd = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      // A file the user may write in a folder they may not: in place, as before.
      if (fd < 0 && !absent) tmp_.clear();
      else if (fd < 0) fail("{}: cannot write: {}", path, std::strerror(errno));
    }
    if (fd >= 0) {
      if (!absent) ::fchmod(fd, st.st_mode & 07777);
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
