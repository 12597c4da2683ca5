#include "tests/unit/test_source_dir.h"

namespace kiln {

std::string test_source_dir() { return KILN_TEST_SOURCE_DIR; }

}  // namespace kiln
