// JPEG through libjpeg-turbo, decoded to RGB (libjpeg converts YCbCr and
// grayscale; CMYK files are refused). libjpeg reports errors by calling
// error_exit, which must not return: it longjmps back here, and only plain
// data lives between setjmp and longjmp.
#include <csetjmp>
#include <cstdio>

#include <jpeglib.h>

#include "frontend/image_decode/image_decode.h"
#include "ir/error.h"

namespace kiln::image {

namespace {

struct JpegError {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void on_error(j_common_ptr info) {
  JpegError* e = reinterpret_cast<JpegError*>(info->err);
  (*info->err->format_message)(info, e->message);
  std::longjmp(e->jump, 1);
}

void on_message(j_common_ptr, int) {}  // warnings (e.g. extraneous bytes) are not printed

}  // namespace

DecodedImage decode_jpeg(const uint8_t* data, size_t size) {
  DecodedImage img;
  jpeg_decompress_struct info;
  JpegError err;
  info.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = on_error;
  err.mgr.emit_message = on_message;
  err.message[0] = 0;
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&info);
    fail("JPEG: {}", err.message);
  }
  jpeg_create_decompress(&info);
  jpeg_mem_src(&info, data, static_cast<unsigned long>(size));
  jpeg_read_header(&info, TRUE);
  if (info.jpeg_color_space == JCS_CMYK || info.jpeg_color_space == JCS_YCCK) {
    jpeg_destroy_decompress(&info);
    fail("JPEG: CMYK images are not supported");
  }
  info.out_color_space = JCS_RGB;
  jpeg_start_decompress(&info);
  img.width = info.output_width;
  img.height = info.output_height;
  if (img.width < 1 || img.height < 1 || img.width > kMaxImagePixels / img.height) {
    jpeg_destroy_decompress(&info);
    check_image_size("JPEG", img.width, img.height);  // throws, now that libjpeg is released
  }
  img.rgb.resize(static_cast<size_t>(img.width * img.height * 3));
  while (info.output_scanline < info.output_height) {
    JSAMPROW row = img.rgb.data() + static_cast<size_t>(info.output_scanline) * img.width * 3;
    jpeg_read_scanlines(&info, &row, 1);
  }
  jpeg_finish_decompress(&info);
  jpeg_destroy_decompress(&info);
  return img;
}

}  // namespace kiln::image
