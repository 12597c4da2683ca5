#include "tools/kiln/model_stdin.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string_view>

#include "ir/error.h"
#include "ir/file_io.h"
#include "runtime/plan_format.h"
#include "tools/kiln/run_inputs.h"

namespace kiln {

namespace {

// Standard input's bytes, for `who` ("the model", "--inputs x:-"): it can be
// read once, so a second reader is an error naming both.
std::string take_stdin(const std::string& who) {
  static std::string first;
  if (!first.empty())
    fail("{}: {} and {} both read standard input; give one of them as a file", kStdinName, first, who);
  first = who;
  if (::isatty(STDIN_FILENO))
    fail(
        "{}: {} is read from standard input, which is a terminal: pipe it in (kiln run - < model.onnx) or name "
        "the file",
        kStdinName, who);
  std::string b;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
    if (n > 0) b.append(buf, static_cast<size_t>(n));
    else if (n == 0) break;
    else if (errno != EINTR) fail("{}: cannot read standard input: {}", kStdinName, std::strerror(errno));
  }
  if (b.empty()) fail("{}: standard input is empty ({} is read from it)", kStdinName, who);
  return b;
}

// Replaces every `from` in `text` by `to`.
std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

}  // namespace

ModelSource model_source_of(const std::string& arg) {
  if (!is_stdin_arg(arg)) return ModelSource::file(arg);
  std::string bytes = take_stdin("the model");
  if (std::string_view(bytes).starts_with(std::string_view(plan::kMagic, sizeof plan::kMagic)))
    fail(
        "{}: standard input holds a kiln plan; kiln reads plans from files: save it and give its path (kiln run "
        "model.plan)",
        kStdinName);
  // No base folder: external data is refused by name (frontend/tensor_proto.cpp).
  return ModelSource::memory(std::move(bytes), kStdinName);
}

Tensor read_input_from_stdin(const std::string& name) {
  const std::string bytes = take_stdin(fmt::format("--inputs {}:-", name));
  // The .npy and TensorProto readers take files: a private temporary one,
  // removed however the read ends; messages name <stdin>, not it.
  namespace fs = std::filesystem;
  std::string tmp = (fs::temp_directory_path() / "kiln-stdin-XXXXXX").string();
  int fd = ::mkstemp(tmp.data());
  if (fd < 0) fail("{}: cannot make a temporary file for --inputs {}:-: {}", kStdinName, name, std::strerror(errno));
  ::close(fd);
  struct Remove {
    std::string path;
    ~Remove() { ::unlink(path.c_str()); }
  } remove{tmp};
  write_file(tmp, bytes.data(), bytes.size());
  try {
    return read_input_file(tmp);
  } catch (const Error& e) {
    fail("{}", replace_all(e.what(), tmp, kStdinName));
  }
}

}  // namespace kiln
