// On-disk cache of compiled kernels. An entry is keyed by everything that
// decides the compiled code: the full source, the NVRTC options, the arch and
// NVRTC's version (make_key). The file name is the key's xxh64, but the entry
// stores the full key and a lookup compares it in full, so a hash collision
// misses instead of returning another kernel. Entries end with an xxh64 of
// their contents; a truncated or corrupt entry is a miss (and is overwritten
// by the next store). Stores write a temporary file in the same directory and
// rename it over the entry, so concurrent writers and crashes never leave a
// torn entry. Failing to write is not an error (the cache is an optimization).
//
// Directory: the constructor's argument if not empty, else $KILN_CACHE_DIR,
// else $XDG_CACHE_HOME/kiln, else $HOME/.cache/kiln; entries live in its
// "kernels" subdirectory.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "codegen/nvrtc/nvrtc_compiler.h"

namespace kiln::codegen {

class KernelCache {
 public:
  explicit KernelCache(std::filesystem::path dir = {});

  static std::string make_key(const std::string& source, const std::vector<std::string>& options,
                              const std::string& arch, const std::string& nvrtc_version);

  // The entry for `key`, or nullopt (absent, other key, corrupt). The result's
  // name is empty: the caller names it.
  std::optional<CompiledKernel> lookup(const std::string& key) const;
  // Returns false if the entry could not be written.
  bool store(const std::string& key, const CompiledKernel& k) const;
  // Why entries cannot be stored here (the folder cannot be made or written:
  // the operating system's reason), or empty when they can. store() fails
  // quietly per entry, so a caller says this once: a cache that never keeps
  // anything makes every build cold without a word otherwise.
  std::string unwritable_reason() const;

  const std::filesystem::path& dir() const { return dir_; }  // the "kernels" directory
  std::filesystem::path path_for(const std::string& key) const;

 private:
  std::filesystem::path dir_;
};

}  // namespace kiln::codegen
