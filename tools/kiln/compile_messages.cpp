#include "tools/kiln/compile_messages.h"

#include <unistd.h>

#include <iostream>

namespace kiln {

StderrCompileMessages::StderrCompileMessages(bool forced) : forced_(forced), tty_(::isatty(2)) {}

std::function<void(int, int)> StderrCompileMessages::step(const std::string& name) {
  // Kernel compilation has always been shown (it is the long step of a GPU
  // compile); import and passes only where someone watches, or when asked.
  const bool kernels = name == "kernels compiled";
  if (!kernels && !tty_ && !forced_) return {};
  // On a terminal a small model's import and passes stay quiet: only a step
  // still running after a second is shown.
  const double delay_s = kernels || forced_ ? 0.0 : 1.0;
  // Made on the first call, which the import and the pass manager make with
  // 0 done when the step starts: the seconds shown are the step's own.
  return [this, name, delay_s](int done, int total) {
    Progress* p;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto& slot = shown_[name];
      if (!slot) slot = std::make_unique<Progress>(name, delay_s);
      p = slot.get();
    }
    p->update(done, total);
  };
}

void StderrCompileMessages::attach(CompileModelOptions& o) {
  o.log = [](const std::string& text) { std::cerr << text; };
  // compile_model() names the step with each call; the step's Progress is
  // made on first use (kernels report from several threads).
  o.progress = [this](const std::string& name, int done, int total) {
    const std::function<void(int, int)>* f;
    {
      std::lock_guard<std::mutex> lock(callbacks_mu_);
      auto it = callbacks_.find(name);
      if (it == callbacks_.end()) it = callbacks_.emplace(name, step(name)).first;
      f = &it->second;  // map nodes stay where they are
    }
    if (*f) (*f)(done, total);
  };
}

void StderrCompileMessages::attach(ImportOptions& io, CompileOptions& c) {
  io.progress = step("nodes imported");
  c.pipeline.progress = step("passes run");
}

}  // namespace kiln
