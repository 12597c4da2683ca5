// Writing whole files with errors that name the path and the operating
// system's reason (strerror), for reports and results kiln writes.
#pragma once
#include <string>

namespace kiln {

// Writes `text` to `path`, failing with the path and strerror.
void write_text_file(const std::string& path, const std::string& text);

}  // namespace kiln
