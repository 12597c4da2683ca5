#include "tools/kiln/dump_dir_staging.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "ir/error.h"

namespace kiln {

namespace fs = std::filesystem;

namespace {

// What the signal handler removes, in storage it can read without locks.
char g_staging[4096];
char g_made_final[4096];  // DIR when kiln made it, else empty
constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
struct sigaction g_old[3];

// The kernel's getdents64 record.
struct DirEntry64 {
  uint64_t ino;
  int64_t off;
  unsigned short reclen;
  unsigned char type;
  char name[1];
};

// Removes `name` under the folder `parent` (a file, or a folder and all in
// it) with async-signal-safe calls only: no malloc, no opendir. Deleting
// while reading a folder may skip entries, so each folder is read again
// until it is empty (a few rounds: another thread may still be writing).
void remove_tree_at(int parent, const char* name, int depth) {
  if (::unlinkat(parent, name, 0) == 0 || (errno != EISDIR && errno != EPERM)) return;
  for (int round = 0; round < 4; ++round) {
    int fd = ::openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return;
    alignas(8) char buf[4096];
    long n;
    while ((n = ::syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0) {
      for (long at = 0; at < n;) {
        const auto* e = reinterpret_cast<const DirEntry64*>(buf + at);
        at += e->reclen;
        if (std::strcmp(e->name, ".") == 0 || std::strcmp(e->name, "..") == 0) continue;
        if (depth < 16) remove_tree_at(fd, e->name, depth + 1);
      }
    }
    ::close(fd);
    if (::unlinkat(parent, name, AT_REMOVEDIR) == 0 || errno != ENOTEMPTY) return;
  }
}

void on_signal(int sig) {
  const int saved = errno;
  if (g_staging[0]) remove_tree_at(AT_FDCWD, g_staging, 0);
  if (g_made_final[0]) ::rmdir(g_made_final);  // only when still empty
  errno = saved;
  // Die of the signal, as without the handler (the shell sees it).
  std::signal(sig, SIG_DFL);
  ::raise(sig);
}

void install_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  for (int s : kSignals) sigaddset(&sa.sa_mask, s);  // one cleanup at a time
  // A signal ignored when kiln started (SIGINT and SIGHUP of a background
  // job or under nohup) stays ignored, as the shell meant.
  for (int i = 0; i < 3; ++i) {
    ::sigaction(kSignals[i], nullptr, &g_old[i]);
    if (g_old[i].sa_handler != SIG_IGN) ::sigaction(kSignals[i], &sa, nullptr);
  }
}

void restore_handlers() {
  for (int i = 0; i < 3; ++i) ::sigaction(kSignals[i], &g_old[i], nullptr);
  g_staging[0] = g_made_final[0] = '\0';
}

bool copy_path(char (&to)[4096], const std::string& from) {
  if (from.size() >= sizeof to) return false;
  std::memcpy(to, from.c_str(), from.size() + 1);
  return true;
}

// Moves everything under `from` into `to` (both folders), replacing files of
// the same name; folders are merged.
void merge_into(const fs::path& from, const fs::path& to) {
  for (const fs::directory_entry& e : fs::directory_iterator(from)) {
    const fs::path dest = to / e.path().filename();
    if (e.is_directory() && !e.is_symlink() && fs::is_directory(dest)) {
      merge_into(e.path(), dest);
    } else {
      if (fs::is_directory(dest) && !fs::is_symlink(dest)) fs::remove_all(dest);
      fs::rename(e.path(), dest);
    }
  }
}

}  // namespace

StagedDumpDir::StagedDumpDir(std::initializer_list<CompileOptions*> opts) {
  for (CompileOptions* o : opts)
    if (o && !o->pipeline.dump_dir.empty()) {
      users_.push_back(o);
      final_ = o->pipeline.dump_dir;
    }
  if (final_.empty()) return;
  std::error_code ec;
  existed_ = fs::exists(final_, ec);
}

void StagedDumpDir::begin() {
  if (final_.empty()) return;
  // Beside DIR (the same file system, so the rename at the end is one step).
  const std::string stem = fs::path(final_).lexically_normal().string();
  const std::string base = (stem.ends_with('/') && stem.size() > 1 ? stem.substr(0, stem.size() - 1) : stem);
  for (int n = 0;; ++n) {
    std::string candidate = fmt::format("{}.kiln-tmp-{}-{}", base, ::getpid(), n);
    if (::mkdir(candidate.c_str(), 0777) == 0) {
      staging_ = candidate;
      break;
    }
    if (errno != EEXIST || n > 100)
      fail("{}: cannot write (--dump-dir): cannot make {}: {}", final_, candidate, std::strerror(errno));
  }
  for (CompileOptions* o : users_) o->pipeline.dump_dir = staging_;
  if (copy_path(g_staging, staging_) && (existed_ || copy_path(g_made_final, final_))) install_handlers();
}

StagedDumpDir::~StagedDumpDir() {
  if (staging_.empty()) return;
  restore_handlers();
  try {
    std::error_code ec;
    if (fs::is_empty(final_, ec) || !fs::exists(final_)) {
      fs::remove(final_, ec);  // an empty folder (the output checks made it)
      fs::rename(staging_, final_);
    } else {
      merge_into(staging_, final_);
      fs::remove_all(staging_);
    }
  } catch (const std::exception& e) {
    std::cerr << fmt::format("error: --dump-dir {}: the dump could not be moved there ({}); it is in {}\n", final_,
                             e.what(), staging_);
  }
}

}  // namespace kiln
