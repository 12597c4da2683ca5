// ImageDecoder (opset 20): encoded image bytes (u8, 1-D) to pixels [H, W, C]
// u8, in RGB, BGR or Grayscale (C = 1; ITU-R 601-2 luma, as the ONNX
// reference computes it through Pillow).
//
// The result's height and width are in the encoded bytes, so kiln decodes at
// import, when the bytes are known when compiling (a constant, or an input
// the caller supplies at compile time, as the conformance runner does), and
// the node becomes a constant. Bytes that come only at run time are refused
// by name: kiln has no value whose two dims only the data decides. Decoding
// is frontend/image_decode/ (Debian's libraries; BMP and PNM by hand).
#include "frontend/image_decode/image_decode.h"
#include "frontend/import_context.h"

namespace kiln::adapters {

namespace {

// Luma with 16-bit fixed-point weights round(65536 * {0.299, 0.587, 0.114}),
// rounded to nearest: the integer form of ITU-R 601-2 that Pillow's "L"
// conversion uses, so kiln's gray values equal the ONNX reference's.
uint8_t luma(const uint8_t* rgb) {
  return static_cast<uint8_t>((rgb[0] * 19595u + rgb[1] * 38470u + rgb[2] * 7471u + 0x8000u) >> 16);
}

void image_decoder(ImportContext& c) {
  c.only_attrs({"pixel_format"});
  const std::string format = c.attrs().get_string("pixel_format", "RGB");
  if (format != "RGB" && format != "BGR" && format != "Grayscale")
    c.fail("pixel_format '{}' is not RGB, BGR or Grayscale", format);
  Value* in = c.input(0);
  if (in->dtype() != DType::U8) c.fail("encoded_stream has dtype {}; it must be u8", dtype_name(in->dtype()));
  if (in->type().rank() != 1) c.fail("encoded_stream {} must be 1-D (the file's bytes)", in->type().str());
  const Tensor* bytes = c.value(0);
  if (!bytes)
    c.unsupported(
        "the decoded image's height and width are in the encoded bytes, so kiln needs them when compiling (an "
        "initializer or Constant in the model, or an input given in ImportOptions::known_inputs, as the conformance "
        "runner gives its test inputs); images that arrive only at run time are not supported");
  image::DecodedImage img;
  try {
    img = image::decode_image(bytes->data<uint8_t>(), static_cast<size_t>(bytes->numel()));
  } catch (const Error& e) {
    c.fail("cannot decode the image: {}", e.what());
  }
  const int64_t pixels = img.height * img.width;
  const int64_t channels = format == "Grayscale" ? 1 : 3;
  Tensor out(DType::U8, {img.height, img.width, channels});
  uint8_t* o = out.data<uint8_t>();
  for (int64_t i = 0; i < pixels; ++i) {
    const uint8_t* p = img.rgb.data() + 3 * i;
    if (format == "Grayscale") {
      o[i] = luma(p);
    } else if (format == "BGR") {
      o[3 * i] = p[2], o[3 * i + 1] = p[1], o[3 * i + 2] = p[0];
    } else {
      o[3 * i] = p[0], o[3 * i + 1] = p[1], o[3 * i + 2] = p[2];
    }
  }
  c.set_outputs({c.constant(std::move(out), "decoded_image")});
}

}  // namespace

void register_image_decoder(AdapterTable& t) { t.add("ImageDecoder", since_opset(20, image_decoder)); }

}  // namespace kiln::adapters
