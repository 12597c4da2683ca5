#include "tools/kiln/output_paths.h"

#include <CLI/CLI.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "ir/error.h"

namespace kiln {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void cannot_write(const std::string& path, const std::string& flag, int err) {
  fail("{}: cannot write ({}): {}", path, flag, std::strerror(err));
}

// "-" is standard output to many tools; kiln would make a file named "-"
// (and a plan or JSON on stdout would mix with the report printed there).
// An empty name would fail later with a bare ": No such file".
void reject_special_names(const std::string& path, const std::string& flag) {
  if (path.empty()) fail("{}: the file name is empty", flag);
  if (path == "-")
    fail("{} -: kiln writes files, not standard output; give a file name (./- for a file named '-')", flag);
}

}  // namespace

void check_writable_file(const std::string& flag, const std::string& path) {
  reject_special_names(path, flag);
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) cannot_write(path, flag, EISDIR);
    // O_APPEND without O_TRUNC: probing must not destroy the old file when
    // the compile fails later.
    int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0) cannot_write(path, flag, errno);
    ::close(fd);
    return;
  }
  if (errno != ENOENT) cannot_write(path, flag, errno);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) cannot_write(path, flag, errno);
  ::close(fd);
  ::unlink(path.c_str());
}

void check_writable_dir(const std::string& flag, const std::string& dir) {
  reject_special_names(dir, flag);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail("{}: cannot create folder ({}): {}", dir, flag, ec.message());
  if (!fs::is_directory(dir, ec)) fail("{}: cannot write ({}): not a folder", dir, flag);
  // Permissions alone do not say it (root, read-only mounts, ACLs): make a file.
  std::string probe = (fs::path(dir) / ".kiln-write-test-XXXXXX").string();
  std::vector<char> buf(probe.begin(), probe.end());
  buf.push_back('\0');
  int fd = ::mkstemp(buf.data());
  if (fd < 0) cannot_write(dir, flag, errno);
  ::close(fd);
  ::unlink(buf.data());
}

void check_output_flags(const CLI::App& cmd) {
  for (const char* name : {"--output", "--save-engine", "--json", "--export-json"})
    if (const CLI::Option* o = cmd.get_option_no_throw(name); o && o->count() > 0)
      check_writable_file(std::string(name) == "--output" ? "-o" : name, o->as<std::string>());
  for (const char* name : {"--outputs", "--dump-dir"})
    if (const CLI::Option* o = cmd.get_option_no_throw(name); o && o->count() > 0)
      check_writable_dir(name, o->as<std::string>());
}

}  // namespace kiln
