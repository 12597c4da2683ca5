#include "tools/kiln/compile_messages.h"

#include <unistd.h>

#include <iostream>

#include <fmt/format.h>

namespace kiln {

StderrCompileMessages::StderrCompileMessages(bool forced) : forced_(forced), tty_(::isatty(2)) {}

bool StderrCompileMessages::shows(const std::string& name) const {
  // Kernel compilation has always been shown (it is the long step of a GPU
  // compile); import and passes only where someone watches, or when asked.
  return name == "kernels compiled" || tty_ || forced_;
}

double StderrCompileMessages::delay_s(const std::string& name) const {
  // On a terminal a small model's import and passes stay quiet: only a step
  // still running after a second is shown.
  return name == "kernels compiled" || forced_ ? 0.0 : 1.0;
}

Progress* StderrCompileMessages::progress(const std::string& name) {
  // Made on the first call, which the import and the pass manager make with
  // 0 done when the step starts: the seconds shown are the step's own.
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = shown_[name];
  if (!slot) slot = std::make_unique<Progress>(name, delay_s(name));
  return slot.get();
}

std::function<void(int, int)> StderrCompileMessages::step(const std::string& name) {
  if (!shows(name)) return {};
  return [this, name](int done, int total) { progress(name)->update(done, total); };
}

void StderrCompileMessages::attach_heartbeat(PipelineOptions& po) {
  if (!shows("passes run")) return;
  po.heartbeat = [this](const std::string& what, double s) {
    progress("passes run")->note(fmt::format("{} running for {:.1f} s", what, s));
  };
  po.heartbeat_after_s = 3;
  po.heartbeat_every_s = tty_ ? 1 : 3;
}

void StderrCompileMessages::attach(CompileModelOptions& o) {
  attach_heartbeat(o.build.pipeline);  // compile_model() keeps the pipeline options it is given
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
  attach_heartbeat(c.pipeline);
}

}  // namespace kiln
