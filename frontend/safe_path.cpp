#include "frontend/safe_path.h"

#include <sys/stat.h>

#include <filesystem>

#include "ir/error.h"

namespace kiln {

std::string resolve_external_data_path(const std::string& base_dir, const std::string& location,
                                       const std::string& ctx) {
  namespace fs = std::filesystem;
  if (location.find('\0') != std::string::npos) fail("{}: external data location contains a NUL byte", ctx);
  fs::path loc(location);
  if (loc.is_absolute() || location.starts_with("/") || location.starts_with("\\"))
    fail("{}: external data location '{}' is absolute; it must be relative to the model's folder", ctx, location);
  fs::path norm = loc.lexically_normal();
  for (const auto& part : norm)
    if (part == "..") fail("{}: external data location '{}' leaves the model's folder", ctx, location);
  if (norm.empty() || norm == ".") fail("{}: external data location '{}' names no file", ctx, location);
  // Walk each component from the model folder and refuse symlinks, so the
  // file read is really inside that folder.
  fs::path cur = base_dir.empty() ? fs::path(".") : fs::path(base_dir);
  for (const auto& part : norm) {
    cur /= part;
    struct stat st {};
    if (::lstat(cur.c_str(), &st) != 0) fail("{}: external data file '{}' does not exist", ctx, location);
    if (S_ISLNK(st.st_mode)) fail("{}: external data path '{}' goes through a symbolic link", ctx, location);
  }
  struct stat st {};
  ::lstat(cur.c_str(), &st);
  if (!S_ISREG(st.st_mode)) fail("{}: external data '{}' is not a regular file", ctx, location);
  return cur.string();
}

}  // namespace kiln
