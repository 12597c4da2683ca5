// WebP (lossy and lossless) through libwebp's one-call decoder.
#include <webp/decode.h>

#include <cstring>

#include "frontend/image_decode/image_decode.h"
#include "ir/error.h"

namespace kiln::image {

DecodedImage decode_webp(const uint8_t* data, size_t size) {
  int width = 0, height = 0;
  if (!WebPGetInfo(data, size, &width, &height)) fail("WebP: the header is corrupt or truncated");
  check_image_size("WebP", width, height);
  uint8_t* rgb = WebPDecodeRGB(data, size, &width, &height);
  if (!rgb) fail("WebP: the image data is corrupt or truncated");
  DecodedImage img;
  img.width = width;
  img.height = height;
  img.rgb.assign(rgb, rgb + static_cast<size_t>(width) * height * 3);
  WebPFree(rgb);
  return img;
}

}  // namespace kiln::image
