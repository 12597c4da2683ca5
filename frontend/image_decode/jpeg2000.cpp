// JPEG 2000 through OpenJPEG: a .jp2 file or a raw codestream (.j2k), read
// from memory through an opj_stream with our own read/skip/seek functions.
// One, two (gray + alpha), three or four components; precision above 8 bits
// is scaled down to 8. OpenJPEG's messages go to a handler that keeps the
// last error for kiln's message.
#include <openjpeg.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "frontend/image_decode/image_decode.h"
#include "ir/error.h"

namespace kiln::image {

namespace {

struct Source {
  const uint8_t* data;
  OPJ_UINT64 size;
  OPJ_UINT64 pos = 0;
};

OPJ_SIZE_T read_fn(void* buf, OPJ_SIZE_T n, void* user) {
  Source* s = static_cast<Source*>(user);
  if (s->pos >= s->size) return static_cast<OPJ_SIZE_T>(-1);
  const OPJ_SIZE_T k = static_cast<OPJ_SIZE_T>(std::min<OPJ_UINT64>(n, s->size - s->pos));
  std::memcpy(buf, s->data + s->pos, k);
  s->pos += k;
  return k;
}
OPJ_OFF_T skip_fn(OPJ_OFF_T n, void* user) {
  Source* s = static_cast<Source*>(user);
  const OPJ_UINT64 target = std::min<OPJ_UINT64>(s->size, s->pos + static_cast<OPJ_UINT64>(std::max<OPJ_OFF_T>(n, 0)));
  const OPJ_OFF_T moved = static_cast<OPJ_OFF_T>(target - s->pos);
  s->pos = target;
  return moved;
}
OPJ_BOOL seek_fn(OPJ_OFF_T to, void* user) {
  Source* s = static_cast<Source*>(user);
  if (to < 0 || static_cast<OPJ_UINT64>(to) > s->size) return OPJ_FALSE;
  s->pos = static_cast<OPJ_UINT64>(to);
  return OPJ_TRUE;
}

void on_error(const char* msg, void* user) {
  std::string* s = static_cast<std::string*>(user);
  *s = msg;
  while (!s->empty() && (s->back() == '\n' || s->back() == ' ')) s->pop_back();
}
void on_quiet(const char*, void*) {}

// Releases what OpenJPEG allocated, whichever way decoding ends.
struct Handles {
  opj_codec_t* codec = nullptr;
  opj_stream_t* stream = nullptr;
  opj_image_t* image = nullptr;
  ~Handles() {
    if (image) opj_image_destroy(image);
    if (stream) opj_stream_destroy(stream);
    if (codec) opj_destroy_codec(codec);
  }
};

}  // namespace

DecodedImage decode_jpeg2000(const uint8_t* data, size_t size) {
  const bool jp2 = size >= 4 && data[0] == 0 && data[1] == 0 && data[2] == 0 && data[3] == 0x0C;
  std::string message = "the data is corrupt or truncated";
  Source src{data, static_cast<OPJ_UINT64>(size)};
  Handles h;
  h.codec = opj_create_decompress(jp2 ? OPJ_CODEC_JP2 : OPJ_CODEC_J2K);
  opj_set_error_handler(h.codec, on_error, &message);
  opj_set_warning_handler(h.codec, on_quiet, nullptr);
  opj_set_info_handler(h.codec, on_quiet, nullptr);
  opj_dparameters_t params;
  opj_set_default_decoder_parameters(&params);
  if (!opj_setup_decoder(h.codec, &params)) fail("JPEG 2000: {}", message);
  h.stream = opj_stream_create(OPJ_J2K_STREAM_CHUNK_SIZE, OPJ_TRUE);
  opj_stream_set_user_data(h.stream, &src, nullptr);
  opj_stream_set_user_data_length(h.stream, src.size);
  opj_stream_set_read_function(h.stream, read_fn);
  opj_stream_set_skip_function(h.stream, skip_fn);
  opj_stream_set_seek_function(h.stream, seek_fn);
  if (!opj_read_header(h.stream, h.codec, &h.image)) fail("JPEG 2000: {}", message);
  const int64_t width = static_cast<int64_t>(h.image->x1) - h.image->x0;
  const int64_t height = static_cast<int64_t>(h.image->y1) - h.image->y0;
  check_image_size("JPEG 2000", width, height);
  if (!opj_decode(h.codec, h.stream, h.image) || !opj_end_decompress(h.codec, h.stream)) fail("JPEG 2000: {}", message);
  const opj_image_t* im = h.image;
  const OPJ_UINT32 n = im->numcomps;
  if (n < 1 || n > 4) fail("JPEG 2000: {} components (kiln reads 1 to 4)", n);
  const OPJ_UINT32 colors = n >= 3 ? 3 : 1;
  for (OPJ_UINT32 c = 0; c < colors; ++c) {
    const opj_image_comp_t& comp = im->comps[c];
    if (comp.w != static_cast<OPJ_UINT32>(width) || comp.h != static_cast<OPJ_UINT32>(height) || !comp.data)
      fail("JPEG 2000: component {} is {}x{} in a {}x{} image (subsampled components are not supported)", c, comp.w,
           comp.h, width, height);
    if (comp.prec < 1 || comp.prec > 16) fail("JPEG 2000: component {} has {} bits", c, comp.prec);
  }
  DecodedImage img;
  img.width = width;
  img.height = height;
  img.rgb.resize(static_cast<size_t>(width * height * 3));
  for (int64_t i = 0; i < width * height; ++i)
    for (int k = 0; k < 3; ++k) {
      const opj_image_comp_t& comp = im->comps[colors == 3 ? k : 0];
      int64_t v = comp.data[i];
      if (comp.sgnd) v += int64_t(1) << (comp.prec - 1);
      if (comp.prec > 8) v >>= (comp.prec - 8);
      else if (comp.prec < 8) v = v * 255 / ((int64_t(1) << comp.prec) - 1);
      img.rgb[3 * i + k] = static_cast<uint8_t>(std::clamp<int64_t>(v, 0, 255));
    }
  return img;
}

}  // namespace kiln::image
