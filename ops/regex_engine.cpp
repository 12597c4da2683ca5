#include "ops/regex_engine.h"

#include <atomic>

namespace kiln::ops {

namespace {
std::atomic<RegexCompiler> g_compiler{nullptr};
}  // namespace

void set_regex_compiler(RegexCompiler compiler) { g_compiler.store(compiler, std::memory_order_release); }

RegexCompiler regex_compiler() { return g_compiler.load(std::memory_order_acquire); }

}  // namespace kiln::ops
