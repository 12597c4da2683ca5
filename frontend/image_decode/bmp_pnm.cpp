// BMP and PNM (PBM/PGM/PPM), read by hand: none of the Debian libraries kiln
// uses reads them (libnetpbm would be one more dependency for a format whose
// whole grammar is a text header and raw samples), and both are plain
// layouts of uncompressed pixels, so a short reader with a bounds check on
// every read is safer than another library.
//
// BMP: the Windows header forms (12-byte core, 40-byte info, V4, V5), 1, 4
// and 8 bits through a palette, 16, 24 and 32 bits (BI_RGB or BI_BITFIELDS
// masks), rows bottom-up or top-down; RLE and embedded JPEG/PNG are refused.
// PNM: P1-P6, maxval up to 255 (scaled to 0..255), comments.
#include <cctype>
#include <cstring>
#include <string>

#include "frontend/image_decode/image_decode.h"
#include "ir/error.h"

namespace kiln::image {

namespace {

class Bytes {
 public:
  Bytes(const uint8_t* d, size_t n, const char* format) : d_(d), n_(n), format_(format) {}
  void need(size_t at, size_t len, const char* what) const {
    if (at > n_ || len > n_ - at)
      fail("{}: the data ends before the {} (needs {} bytes, has {})", format_, what, at + len, n_);
  }
  uint32_t u32(size_t at, const char* what) const {
    need(at, 4, what);
    return uint32_t(d_[at]) | uint32_t(d_[at + 1]) << 8 | uint32_t(d_[at + 2]) << 16 | uint32_t(d_[at + 3]) << 24;
  }
  uint16_t u16(size_t at, const char* what) const {
    need(at, 2, what);
    return static_cast<uint16_t>(d_[at] | d_[at + 1] << 8);
  }
  const uint8_t* at(size_t i) const { return d_ + i; }

 private:
  const uint8_t* d_;
  size_t n_;
  const char* format_;
};

int lowest_bit(uint32_t m) {
  int s = 0;
  while (m && !(m & 1u)) m >>= 1, ++s;
  return s;
}

uint8_t masked(uint32_t px, uint32_t mask) {
  if (!mask) return 0;
  const int s = lowest_bit(mask);
  const uint32_t max = mask >> s;
  return static_cast<uint8_t>((((px & mask) >> s) * 255 + max / 2) / max);
}

}  // namespace

DecodedImage decode_bmp(const uint8_t* data, size_t size) {
  Bytes b(data, size, "BMP");
  const uint32_t pixels_at = b.u32(10, "file header");
  const uint32_t header = b.u32(14, "bitmap header");
  int64_t width = 0, height = 0;
  uint32_t bpp = 0, compression = 0, colors_used = 0;
  if (header == 12) {
    width = b.u16(18, "bitmap header");
    height = static_cast<int16_t>(b.u16(20, "bitmap header"));
    bpp = b.u16(24, "bitmap header");
  } else if (header >= 40) {
    width = static_cast<int32_t>(b.u32(18, "bitmap header"));
    height = static_cast<int32_t>(b.u32(22, "bitmap header"));
    bpp = b.u16(28, "bitmap header");
    compression = b.u32(30, "bitmap header");
    colors_used = b.u32(46, "bitmap header");
  } else {
    fail("BMP: a bitmap header of {} bytes is not one kiln reads (12, 40 or more)", header);
  }
  const bool top_down = height < 0;
  if (top_down) height = -height;
  check_image_size("BMP", width, height);
  if (compression != 0 && compression != 3)
    fail("BMP: compression {} (RLE or embedded JPEG/PNG) is not supported; kiln reads uncompressed bitmaps",
         compression);
  if (bpp != 1 && bpp != 4 && bpp != 8 && bpp != 16 && bpp != 24 && bpp != 32)
    fail("BMP: {} bits per pixel is not supported", bpp);
  uint32_t rmask = 0, gmask = 0, bmask = 0;
  if (bpp == 16) rmask = 0x7C00, gmask = 0x03E0, bmask = 0x001F;
  if (bpp == 32) rmask = 0x00FF0000, gmask = 0x0000FF00, bmask = 0x000000FF;
  if (compression == 3) {
    if (bpp != 16 && bpp != 32) fail("BMP: bit-field masks with {} bits per pixel", bpp);
    rmask = b.u32(54, "color masks");
    gmask = b.u32(58, "color masks");
    bmask = b.u32(62, "color masks");
  }
  const size_t palette_at = 14 + header + (compression == 3 && header == 40 ? 12 : 0);
  const size_t entry = header == 12 ? 3 : 4;
  const size_t colors = bpp <= 8 ? (colors_used ? colors_used : size_t(1) << bpp) : 0;
  if (colors > 256) fail("BMP: a palette of {} colors", colors);
  if (colors) b.need(palette_at, colors * entry, "palette");
  const size_t stride = ((static_cast<size_t>(width) * bpp + 31) / 32) * 4;
  b.need(pixels_at, stride * static_cast<size_t>(height), "pixel rows");
  DecodedImage img;
  img.width = width;
  img.height = height;
  img.rgb.resize(static_cast<size_t>(width * height * 3));
  for (int64_t y = 0; y < height; ++y) {
    const uint8_t* row = b.at(pixels_at + stride * static_cast<size_t>(top_down ? y : height - 1 - y));
    uint8_t* out = img.rgb.data() + y * width * 3;
    for (int64_t x = 0; x < width; ++x, out += 3) {
      if (bpp <= 8) {
        const size_t bit = static_cast<size_t>(x) * bpp;
        const uint32_t index = (row[bit / 8] >> (8 - bpp - bit % 8)) & ((1u << bpp) - 1);
        if (index >= colors) fail("BMP: pixel ({}, {}) uses color {} of a {}-color palette", x, y, index, colors);
        const uint8_t* c = b.at(palette_at + index * entry);
        out[0] = c[2], out[1] = c[1], out[2] = c[0];
      } else if (bpp == 24) {
        const uint8_t* p = row + x * 3;
        out[0] = p[2], out[1] = p[1], out[2] = p[0];
      } else {
        const uint8_t* p = row + x * (bpp / 8);
        const uint32_t px = bpp == 16
                                ? uint32_t(p[0] | p[1] << 8)
                                : uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
        out[0] = masked(px, rmask), out[1] = masked(px, gmask), out[2] = masked(px, bmask);
      }
    }
  }
  return img;
}

DecodedImage decode_pnm(const uint8_t* data, size_t size) {
  size_t pos = 2;
  const char kind = static_cast<char>(data[1]);
  auto skip_space = [&] {
    while (pos < size && (std::isspace(data[pos]) || data[pos] == '#')) {
      if (data[pos] == '#')
        while (pos < size && data[pos] != '\n') ++pos;
      else ++pos;
    }
  };
  auto number = [&](const char* what) -> int64_t {
    skip_space();
    if (pos >= size || !std::isdigit(data[pos])) fail("PNM: the header has no {}", what);
    int64_t v = 0;
    while (pos < size && std::isdigit(data[pos])) {
      v = v * 10 + (data[pos++] - '0');
      if (v > (int64_t(1) << 31)) fail("PNM: the {} is too large", what);
    }
    return v;
  };
  const bool bits = kind == '1' || kind == '4';
  const bool ascii = kind <= '3';
  const int channels = (kind == '3' || kind == '6') ? 3 : 1;
  const int64_t width = number("width");
  const int64_t height = number("height");
  check_image_size("PNM", width, height);
  const int64_t maxval = bits ? 1 : number("maxval");
  if (maxval < 1 || maxval > 255) fail("PNM: maxval {} is not supported (1 to 255)", maxval);
  if (!ascii) {
    if (pos >= size || !std::isspace(data[pos])) fail("PNM: no whitespace after the header");
    ++pos;
  }
  const int64_t samples = width * height * channels;
  std::vector<uint8_t> v(static_cast<size_t>(samples));
  if (kind == '4') {
    const size_t stride = static_cast<size_t>((width + 7) / 8);
    if (size - pos < stride * static_cast<size_t>(height)) fail("PNM: the data ends before the last row");
    for (int64_t y = 0; y < height; ++y)
      for (int64_t x = 0; x < width; ++x)
        v[y * width + x] = (data[pos + y * stride + x / 8] >> (7 - x % 8)) & 1 ? 0 : 255;  // 1 is black
  } else if (!ascii) {
    if (size - pos < static_cast<size_t>(samples)) fail("PNM: the data ends before the last row");
    for (int64_t i = 0; i < samples; ++i) v[i] = static_cast<uint8_t>((data[pos + i] * 255 + maxval / 2) / maxval);
  } else {
    for (int64_t i = 0; i < samples; ++i) {
      int64_t s = 0;
      if (bits) {  // P1 digits need no separators
        skip_space();
        if (pos >= size || (data[pos] != '0' && data[pos] != '1')) fail("PNM: the data ends before the last row");
        v[i] = data[pos++] == '1' ? 0 : 255;
        continue;
      }
      s = number("sample");
      if (s > maxval) fail("PNM: sample {} is above maxval {}", s, maxval);
      v[i] = static_cast<uint8_t>((s * 255 + maxval / 2) / maxval);
    }
  }
  DecodedImage img;
  img.width = width;
  img.height = height;
  img.rgb.resize(static_cast<size_t>(width * height * 3));
  for (int64_t i = 0; i < width * height; ++i)
    for (int k = 0; k < 3; ++k) img.rgb[3 * i + k] = v[channels == 3 ? 3 * i + k : i];
  return img;
}

}  // namespace kiln::image
