#include "codegen/core/deciding_only.h"

namespace kiln::codegen {

namespace {
// Per thread: NVRTC builds and the sim backend emit from several threads.
thread_local bool g_deciding_only = false;
}  // namespace

bool deciding_only() { return g_deciding_only; }

DecidingOnly::DecidingOnly() : previous_(g_deciding_only) { g_deciding_only = true; }

DecidingOnly::~DecidingOnly() { g_deciding_only = previous_; }

}  // namespace kiln::codegen
