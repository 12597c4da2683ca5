// Image decoding for ImageDecoder (frontend/image_decode/): the hand-read
// BMP and PNM layouts (bottom-up and top-down rows, palettes, bit fields,
// ASCII and binary PNM, maxval scaling), PNG/JPEG/WebP written here with the
// libraries' encoders and read back, and every prefix and some corrupted
// bytes of each ending in a kiln::Error, never a crash (the sanitizer build
// runs this too).
#include <gtest/gtest.h>
#include <jpeglib.h>
#include <png.h>
#include <webp/encode.h>

#include <cstdio>
#include <string>
#include <vector>

#include "frontend/image_decode/image_decode.h"
#include "ir/error.h"

namespace kiln {
namespace {

using Bytes = std::vector<uint8_t>;

void put32(Bytes& b, uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put16(Bytes& b, uint16_t v) {
  b.push_back(static_cast<uint8_t>(v));
  b.push_back(static_cast<uint8_t>(v >> 8));
}

// A BMP with a 40-byte header; `rows` are stored as given (bottom-up unless height < 0).
Bytes bmp(int32_t width, int32_t height, uint16_t bpp, const Bytes& palette, const Bytes& rows) {
  Bytes b = {'B', 'M'};
  const uint32_t at = 54 + static_cast<uint32_t>(palette.size());
  put32(b, at + static_cast<uint32_t>(rows.size()));
  put32(b, 0);
  put32(b, at);
  put32(b, 40);
  put32(b, static_cast<uint32_t>(width));
  put32(b, static_cast<uint32_t>(height));
  put16(b, 1);
  put16(b, bpp);
  for (int i = 0; i < 6; ++i) put32(b, 0);
  b.insert(b.end(), palette.begin(), palette.end());
  b.insert(b.end(), rows.begin(), rows.end());
  return b;
}

image::DecodedImage decode(const Bytes& b) { return image::decode_image(b.data(), b.size()); }

TEST(ImageDecode, Bmp24BottomUpAndTopDown) {
  // 2x2, rows padded to 8 bytes; stored bottom row first: (B,G,R) triples.
  const Bytes rows = {1, 2, 3, 4, 5, 6, 0, 0, 7, 8, 9, 10, 11, 12, 0, 0};
  image::DecodedImage img = decode(bmp(2, 2, 24, {}, rows));
  ASSERT_EQ(img.height, 2);
  ASSERT_EQ(img.width, 2);
  EXPECT_EQ(img.rgb, (Bytes{9, 8, 7, 12, 11, 10, 3, 2, 1, 6, 5, 4}));
  img = decode(bmp(2, -2, 24, {}, rows));
  EXPECT_EQ(img.rgb, (Bytes{3, 2, 1, 6, 5, 4, 9, 8, 7, 12, 11, 10}));
}

TEST(ImageDecode, BmpPaletteAnd32Bit) {
  // 1-bit palette of two colors (B,G,R,0): a 3x1 row 1,0,1.
  image::DecodedImage img = decode(bmp(3, 1, 1, {0, 0, 255, 0, 255, 0, 0, 0}, {0xA0, 0, 0, 0}));
  EXPECT_EQ(img.rgb, (Bytes{0, 0, 255, 255, 0, 0, 0, 0, 255}));
  img = decode(bmp(1, 1, 32, {}, {10, 20, 30, 0}));
  EXPECT_EQ(img.rgb, (Bytes{30, 20, 10}));
  // A palette index past the palette is an error, not a read past it.
  Bytes bad = bmp(1, 1, 8, {}, {200, 0, 0, 0});
  bad[46] = 2;  // two colors used
  bad.insert(bad.begin() + 54, {1, 2, 3, 0, 4, 5, 6, 0});
  bad[10] = 62;
  EXPECT_THROW(decode(bad), Error);
}

TEST(ImageDecode, PnmBinaryAsciiAndMaxval) {
  const std::string p6 = "P6\n# a comment\n2 1\n255\n";
  Bytes b(p6.begin(), p6.end());
  b.insert(b.end(), {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(decode(b).rgb, (Bytes{1, 2, 3, 4, 5, 6}));
  const std::string p2 = "P2 2 1 15\n15 0\n";  // gray, maxval 15 -> 255 and 0
  EXPECT_EQ(decode(Bytes(p2.begin(), p2.end())).rgb, (Bytes{255, 255, 255, 0, 0, 0}));
  const std::string p1 = "P1 2 1 10";  // 1 is black
  EXPECT_EQ(decode(Bytes(p1.begin(), p1.end())).rgb, (Bytes{0, 0, 0, 255, 255, 255}));
  const std::string wide = "P5 1 1 65535\n";
  try {
    decode(Bytes(wide.begin(), wide.end()));
    FAIL() << "16-bit PNM accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("PNM: maxval 65535 is not supported"), std::string::npos) << e.what();
  }
}

Bytes sample_rgb(int w, int h) {
  Bytes px(static_cast<size_t>(w * h * 3));
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>((i * 37) % 251);
  return px;
}

Bytes encode_png(int w, int h) {
  png_image png{};
  png.version = PNG_IMAGE_VERSION;
  png.width = w;
  png.height = h;
  png.format = PNG_FORMAT_RGB;
  const Bytes px = sample_rgb(w, h);
  png_alloc_size_t size = 0;
  EXPECT_TRUE(png_image_write_to_memory(&png, nullptr, &size, 0, px.data(), 0, nullptr));
  Bytes out(size);
  EXPECT_TRUE(png_image_write_to_memory(&png, out.data(), &size, 0, px.data(), 0, nullptr));
  return out;
}

Bytes encode_jpeg(int w, int h) {
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &buf, &size);
  c.image_width = w;
  c.image_height = h;
  c.input_components = 3;
  c.in_color_space = JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_start_compress(&c, TRUE);
  Bytes px = sample_rgb(w, h);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = px.data() + c.next_scanline * w * 3;
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  Bytes out(buf, buf + size);
  std::free(buf);
  return out;
}

Bytes encode_webp(int w, int h) {
  const Bytes px = sample_rgb(w, h);
  uint8_t* out = nullptr;
  const size_t size = WebPEncodeLosslessRGB(px.data(), w, h, w * 3, &out);
  Bytes b(out, out + size);
  WebPFree(out);
  return b;
}

TEST(ImageDecode, LibraryFormatsRoundTrip) {
  EXPECT_EQ(decode(encode_png(5, 3)).rgb, sample_rgb(5, 3));
  EXPECT_EQ(decode(encode_webp(5, 3)).rgb, sample_rgb(5, 3));  // lossless
  const image::DecodedImage j = decode(encode_jpeg(16, 8));
  EXPECT_EQ(j.width, 16);
  EXPECT_EQ(j.height, 8);
  EXPECT_EQ(image::image_format(encode_jpeg(1, 1).data(), 3), "JPEG");
}

// Every prefix of a valid file, and the file with one byte flipped at each of
// a spread of places, decodes or throws kiln::Error.
void expect_no_crash(const Bytes& good, const std::string& what) {
  for (size_t n = 0; n < good.size(); n += (n < 64 ? 1 : 7)) {
    Bytes cut(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n));
    try {
      decode(cut);
    } catch (const Error&) {
    }
  }
  for (size_t at = 0; at < good.size(); at += 3) {
    Bytes bad = good;
    bad[at] ^= 0x5A;
    try {
      decode(bad);
    } catch (const Error&) {
    }
  }
  SUCCEED() << what;
}

TEST(ImageDecode, TruncatedAndCorruptBytesGiveErrors) {
  expect_no_crash(encode_png(7, 5), "png");
  expect_no_crash(encode_jpeg(9, 9), "jpeg");
  expect_no_crash(encode_webp(7, 5), "webp");
  expect_no_crash(bmp(2, 2, 24, {}, {1, 2, 3, 4, 5, 6, 0, 0, 7, 8, 9, 10, 11, 12, 0, 0}), "bmp");
  const std::string p6 = "P6 2 2 255\n123456789012";
  expect_no_crash(Bytes(p6.begin(), p6.end()), "pnm");
  // The cut-off PNG names its format.
  const Bytes png = encode_png(7, 5);
  try {
    decode(Bytes(png.begin(), png.begin() + 40));
    FAIL() << "a truncated PNG decoded";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("PNG: ", 0), 0u) << e.what();
  }
}

}  // namespace
}  // namespace kiln
