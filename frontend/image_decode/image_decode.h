// Decoding of encoded images (ONNX ImageDecoder-20) into 8-bit RGB, with
// Debian's libraries: JPEG (libjpeg-turbo), PNG (libpng), TIFF (libtiff),
// WebP (libwebp), JPEG 2000 (OpenJPEG, .jp2 files and raw .j2k streams).
// BMP and PNM are read by hand (bmp_pnm.cpp says why). The format is told by
// the leading bytes. Every failure is a kiln::Error naming the format and what
// is wrong (truncated data, a variant kiln does not read, a library's own
// message); nothing is printed, nothing aborts.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::image {

struct DecodedImage {
  int64_t height = 0;
  int64_t width = 0;
  std::vector<uint8_t> rgb;  // height * width * 3, rows top to bottom
};

// "JPEG", "PNG", ... or "" when the leading bytes match no format kiln reads.
std::string image_format(const uint8_t* data, size_t size);

// Decodes any of the formats above.
DecodedImage decode_image(const uint8_t* data, size_t size);

// The per-format decoders (one file each).
DecodedImage decode_jpeg(const uint8_t* data, size_t size);
DecodedImage decode_png(const uint8_t* data, size_t size);
DecodedImage decode_tiff(const uint8_t* data, size_t size);
DecodedImage decode_webp(const uint8_t* data, size_t size);
DecodedImage decode_jpeg2000(const uint8_t* data, size_t size);
DecodedImage decode_bmp(const uint8_t* data, size_t size);
DecodedImage decode_pnm(const uint8_t* data, size_t size);

// The largest image kiln decodes (pixels): bigger ones are refused before any
// memory is taken, since the size comes from the file.
inline constexpr int64_t kMaxImagePixels = int64_t(1) << 28;

// Checks width and height against kMaxImagePixels; kiln::Error naming the format.
void check_image_size(const char* format, int64_t width, int64_t height);

}  // namespace kiln::image
