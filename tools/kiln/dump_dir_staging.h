// --dump-dir DIR is written whole or not at all, as -o writes the plan beside
// and renames it (ir/file_io.h): the passes and the index write into a fresh
// folder beside DIR (DIR.kiln-tmp-PID-N), moved into DIR when the command
// ends -- on success, and on an error too (the dumps up to a failing pass are
// what finds it). A command interrupted by SIGINT, SIGTERM or SIGHUP removes
// that folder, and DIR as well when kiln made it (still empty), before it
// dies of the signal: a half-written dump never reads as a whole one. Into an
// existing DIR that holds files the dump is merged file by file (a newer file
// replaces an older one of the same name, other files stay), as before.
#pragma once
#include <initializer_list>
#include <string>
#include <vector>

#include "compiler/compile.h"

namespace kiln {

class StagedDumpDir {
 public:
  // Before the output checks create DIR: finds the one --dump-dir given among
  // `opts` (the subcommands' options; none: this does nothing) and notes
  // whether DIR exists.
  explicit StagedDumpDir(std::initializer_list<CompileOptions*> opts);
  // After them: makes the folder beside DIR, points the options at it and
  // installs the signal handlers. Throws kiln::Error naming DIR and the
  // operating system's reason when the folder cannot be made.
  void begin();
  // Moves the dump into DIR (reporting a failure on stderr, naming where the
  // dump is) and restores the signal handlers.
  ~StagedDumpDir();
  StagedDumpDir(const StagedDumpDir&) = delete;
  StagedDumpDir& operator=(const StagedDumpDir&) = delete;

 private:
  std::vector<CompileOptions*> users_;
  std::string final_, staging_;
  bool existed_ = false;
};

}  // namespace kiln
