// Where kiln writes what the user asked for (-o, --json, --export-json,
// --outputs, --dump-dir): checked before any compile or run, so a typo in a
// path costs milliseconds instead of the whole build, and every failure says
// why in the operating system's words (strerror), exit 1.
#pragma once
#include <string>

#include "ir/file_io.h"

namespace CLI {
class App;
}

namespace kiln {

// Checks the paths a parsed subcommand was given to write: -o/--output,
// --json, --export-json (files); --outputs, --dump-dir (folders, created).
void check_output_flags(const CLI::App& cmd);

// The file can be created or overwritten: its folder exists and takes a new
// file, or the file exists, is not a folder and opens for writing. Nothing is
// left behind (an existing file is not truncated). `flag` names the option in
// the message: "error: /ro/m.plan: cannot write (-o): Read-only file system".
void check_writable_file(const std::string& flag, const std::string& path);

// The folder exists or is created (with its parents) and takes a new file.
void check_writable_dir(const std::string& flag, const std::string& dir);

}  // namespace kiln
