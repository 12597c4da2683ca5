// The runtime's messages to the embedding application (kiln_set_log_callback
// in include/kiln/kiln.h): what the engine chose and why (the AUTO backend's
// fallback to the CPU, a GPU made unusable by a sticky error). A library
// prints nothing itself: without a callback the messages are dropped, and the
// same facts stay available through kiln_engine_info and the statuses.
#pragma once
#include <functional>
#include <string>

namespace kiln::rt {

// The numbering is kiln.h's kiln_log_level.
enum class LogLevel { Error = 0, Warning = 1, Info = 2 };

using LogCallback = std::function<void(LogLevel, const std::string&)>;

// Process-wide; an empty `fn` removes the callback. Thread-safe: messages
// from any thread go to the callback installed when they are logged, and a
// replaced callback is never called after set_log_callback returns.
void set_log_callback(LogCallback fn);
void log(LogLevel level, const std::string& message);

}  // namespace kiln::rt
