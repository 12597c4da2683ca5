// TIFF through libtiff, read from memory with TIFFClientOpen and decoded by
// TIFFReadRGBAImageOriented (every photometric interpretation and
// compression libtiff knows, top row first). libtiff's errors go to a
// handler that keeps the last message for kiln's error instead of stderr.
#include <tiffio.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>

#include "frontend/image_decode/image_decode.h"
#include "ir/error.h"

namespace kiln::image {

namespace {

struct MemoryFile {
  const uint8_t* data;
  toff_t size;
  toff_t pos = 0;
};

tmsize_t read_fn(thandle_t h, void* buf, tmsize_t n) {
  MemoryFile* f = static_cast<MemoryFile*>(h);
  const toff_t left = f->pos < f->size ? f->size - f->pos : 0;
  const toff_t k = std::min<toff_t>(left, static_cast<toff_t>(n));
  std::memcpy(buf, f->data + f->pos, k);
  f->pos += k;
  return static_cast<tmsize_t>(k);
}
tmsize_t write_fn(thandle_t, void*, tmsize_t) { return 0; }
toff_t seek_fn(thandle_t h, toff_t off, int whence) {
  MemoryFile* f = static_cast<MemoryFile*>(h);
  if (whence == SEEK_SET) f->pos = off;
  else if (whence == SEEK_CUR) f->pos += off;
  else f->pos = f->size + off;
  return f->pos;
}
int close_fn(thandle_t) { return 0; }
toff_t size_fn(thandle_t h) { return static_cast<MemoryFile*>(h)->size; }
int map_fn(thandle_t, void**, toff_t*) { return 0; }
void unmap_fn(thandle_t, void*, toff_t) {}

thread_local std::string tiff_message;

void on_error(const char* module, const char* fmt, va_list ap) {
  char buf[512];
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  tiff_message = module ? std::string(module) + ": " + buf : std::string(buf);
}
void on_warning(const char*, const char*, va_list) {}

}  // namespace

DecodedImage decode_tiff(const uint8_t* data, size_t size) {
  // libtiff's handlers are process-wide; kiln sets the same ones every time.
  TIFFSetErrorHandler(on_error);
  TIFFSetWarningHandler(on_warning);
  tiff_message = "the data is corrupt or truncated";
  MemoryFile file{data, static_cast<toff_t>(size)};
  TIFF* tif = TIFFClientOpen("image", "rm", &file, read_fn, write_fn, seek_fn, close_fn, size_fn, map_fn, unmap_fn);
  if (!tif) fail("TIFF: {}", tiff_message);
  uint32_t width = 0, height = 0;
  TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &width);
  TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &height);
  try {
    check_image_size("TIFF", width, height);
  } catch (...) {
    TIFFClose(tif);
    throw;
  }
  std::vector<uint32_t> rgba(static_cast<size_t>(width) * height);
  const int ok = TIFFReadRGBAImageOriented(tif, width, height, rgba.data(), ORIENTATION_TOPLEFT, 0);
  TIFFClose(tif);
  if (!ok) fail("TIFF: {}", tiff_message);
  DecodedImage img;
  img.width = width;
  img.height = height;
  img.rgb.resize(rgba.size() * 3);
  for (size_t i = 0; i < rgba.size(); ++i) {
    img.rgb[3 * i] = static_cast<uint8_t>(TIFFGetR(rgba[i]));
    img.rgb[3 * i + 1] = static_cast<uint8_t>(TIFFGetG(rgba[i]));
    img.rgb[3 * i + 2] = static_cast<uint8_t>(TIFFGetB(rgba[i]));
  }
  return img;
}

}  // namespace kiln::image
