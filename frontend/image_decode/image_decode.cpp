// Dispatch by the leading bytes of the data (the "magic numbers" each format
// starts with).
#include "frontend/image_decode/image_decode.h"

#include <cstring>

#include "ir/error.h"

namespace kiln::image {

namespace {

bool starts(const uint8_t* d, size_t n, const char* magic, size_t len, size_t at = 0) {
  return n >= at + len && std::memcmp(d + at, magic, len) == 0;
}

}  // namespace

std::string image_format(const uint8_t* d, size_t n) {
  if (starts(d, n, "\xFF\xD8\xFF", 3)) return "JPEG";
  if (starts(d, n, "\x89PNG\r\n\x1A\n", 8)) return "PNG";
  if (starts(d, n, "II*\0", 4) || starts(d, n, "MM\0*", 4)) return "TIFF";
  if (starts(d, n, "RIFF", 4) && starts(d, n, "WEBP", 4, 8)) return "WebP";
  if (starts(d, n, "\0\0\0\x0CjP  \r\n\x87\n", 12) || starts(d, n, "\xFF\x4F\xFF\x51", 4)) return "JPEG 2000";
  if (starts(d, n, "BM", 2)) return "BMP";
  if (n >= 2 && d[0] == 'P' && d[1] >= '1' && d[1] <= '6') return "PNM";
  return "";
}

DecodedImage decode_image(const uint8_t* d, size_t n) {
  const std::string f = image_format(d, n);
  if (f == "JPEG") return decode_jpeg(d, n);
  if (f == "PNG") return decode_png(d, n);
  if (f == "TIFF") return decode_tiff(d, n);
  if (f == "WebP") return decode_webp(d, n);
  if (f == "JPEG 2000") return decode_jpeg2000(d, n);
  if (f == "BMP") return decode_bmp(d, n);
  if (f == "PNM") return decode_pnm(d, n);
  fail("the {} bytes are no image kiln reads (JPEG, PNG, TIFF, WebP, JPEG 2000, BMP or PNM, told by their first bytes)",
       n);
}

void check_image_size(const char* format, int64_t width, int64_t height) {
  if (width < 1 || height < 1) fail("{}: the image is {}x{} pixels", format, width, height);
  if (width > kMaxImagePixels / height)
    fail("{}: the image is {}x{} pixels, more than kiln decodes ({})", format, width, height, kMaxImagePixels);
}

}  // namespace kiln::image
