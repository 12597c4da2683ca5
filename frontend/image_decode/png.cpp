// PNG through libpng's simplified API (png_image), which reports errors in
// image.message instead of longjmp: every color type and bit depth becomes
// 8-bit RGB (alpha is composited onto black, as libpng's simplified API does
// when the requested format has none).
#include <png.h>

#include "frontend/image_decode/image_decode.h"
#include "ir/error.h"

namespace kiln::image {

DecodedImage decode_png(const uint8_t* data, size_t size) {
  png_image png{};
  png.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&png, data, size)) fail("PNG: {}", png.message);
  DecodedImage img;
  img.width = png.width;
  img.height = png.height;
  try {
    check_image_size("PNG", img.width, img.height);
  } catch (...) {
    png_image_free(&png);
    throw;
  }
  png.format = PNG_FORMAT_RGB;
  img.rgb.resize(PNG_IMAGE_SIZE(png));
  if (!png_image_finish_read(&png, nullptr, img.rgb.data(), 0, nullptr)) {
    const std::string message = png.message;
    png_image_free(&png);
    fail("PNG: {}", message);
  }
  return img;
}

}  // namespace kiln::image
