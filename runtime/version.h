// kiln's version as recorded in plan files and reported by the runtime.
#pragma once

namespace kiln {
inline constexpr const char* kKilnVersion = "0.1.0";
}
