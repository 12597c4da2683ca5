#include "ir/limits.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "ir/error.h"

namespace kiln {

namespace {

int64_t physical_memory_bytes() {
  long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return int64_t(16) << 30;
  return int64_t(pages) * page;
}

Limits initial_limits() {
  Limits l;
  // One tensor may take half the machine's memory (capped at 16 GiB), all
  // weights together the whole of it (capped at 64 GiB): a larger request
  // cannot succeed here and would otherwise end in the OOM killer.
  int64_t mem = physical_memory_bytes();
  l.max_tensor_bytes = std::min(int64_t(16) << 30, mem / 2);
  l.max_total_bytes = std::min(int64_t(64) << 30, mem);
  if (const char* e = std::getenv("KILN_MAX_TENSOR_BYTES"); e && *e)
    l.max_tensor_bytes = parse_byte_size(e, "KILN_MAX_TENSOR_BYTES");
  if (const char* e = std::getenv("KILN_MAX_TOTAL_BYTES"); e && *e)
    l.max_total_bytes = parse_byte_size(e, "KILN_MAX_TOTAL_BYTES");
  return l;
}

}  // namespace

Limits& limits() {
  static Limits l = initial_limits();
  return l;
}

int64_t parse_byte_size(const std::string& text, const std::string& what) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  std::string suffix = text.substr(digits);
  int shift = -1;
  if (suffix.empty()) shift = 0;
  else if (suffix.size() == 1 || (suffix.size() == 3 && (suffix.substr(1) == "iB" || suffix.substr(1) == "ib")))
    switch (suffix[0]) {
      case 'k':
      case 'K':
        shift = 10;
        break;
      case 'm':
      case 'M':
        shift = 20;
        break;
      case 'g':
      case 'G':
        shift = 30;
        break;
      case 't':
      case 'T':
        shift = 40;
        break;
      default:
        break;
    }
  if (digits == 0 || digits > 15 || shift < 0)
    fail("{}: '{}' is not a byte size (a number with an optional k, M, G or T suffix)", what, text);
  int64_t v = std::stoll(text.substr(0, digits));
  if (v > (INT64_MAX >> shift)) fail("{}: '{}' is too large", what, text);
  return v << shift;
}

int64_t check_tensor_bytes(const TensorType& type, const std::string& context) {
  int64_t numel = 0;
  try {
    numel = shape_numel(type.shape);
  } catch (const Error& e) {
    fail("{}{}{}", context, context.empty() ? "" : ": ", e.what());
  }
  int64_t elem = int64_t(dtype_size(type.dtype));
  int64_t limit = limits().max_tensor_bytes;
  if (numel > limit / elem)
    fail(
        "{}{}{} needs {} bytes, over the limit of {} bytes per tensor (raise it with --max-tensor-bytes or "
        "KILN_MAX_TENSOR_BYTES)",
        context, context.empty() ? "" : ": ", type.str(), numel > INT64_MAX / elem ? INT64_MAX : numel * elem, limit);
  return numel * elem;
}

}  // namespace kiln
