"""The robustness corpus's ImageDecoder cases (make_corpus.py calls add()):
damaged image bytes, decoded at import, must give exit 1 naming the node and
the format's problem. Kept apart so make_corpus.py stays under 600 lines."""
import random
import struct

import numpy as np
from onnx import TensorProto, helper, numpy_helper


def png_bytes(width, height):
    """A valid 8-bit RGB PNG, written with zlib: the start of the truncated cases."""
    import zlib

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    rows = b"".join(b"\0" + bytes((x * 7 + y * 13) % 256 for x in range(width * 3)) for y in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def add(mc):
    """ImageDecoder over damaged bytes (a constant, decoded at import): exit 1
    naming the node and the format's problem, never a crash or a huge allocation."""
    rng = random.Random(20)
    garbage = bytes(rng.randrange(256) for _ in range(300))
    png = png_bytes(16, 16)
    bmp_huge = (b"BM" + struct.pack("<IHHI", 0, 0, 0, 54) + struct.pack("<IiiHHIIiiII", 40, 1 << 30, 1 << 30, 1, 24,
                                                                      0, 0, 0, 0, 0, 0))
    cases = {
        "image_garbage": (garbage, "the 300 bytes are no image kiln reads"),
        "image_png_truncated": (png[: len(png) // 2], "PNG: "),
        "image_png_corrupt_crc": (png[:40] + bytes([png[40] ^ 0xFF]) + png[41:], "PNG: "),
        "image_jpeg_garbage": (b"\xff\xd8\xff\xe0" + garbage, "JPEG: "),
        "image_jpeg_only_marker": (b"\xff\xd8\xff", "JPEG: "),
        "image_tiff_garbage": (b"II*\0" + garbage, "TIFF: "),
        "image_webp_garbage": (b"RIFF" + struct.pack("<I", 300) + b"WEBP" + garbage, "WebP: "),
        "image_jpeg2000_garbage": (b"\xff\x4f\xff\x51" + garbage, "JPEG 2000: "),
        "image_bmp_huge": (bmp_huge, "BMP: the image is 1073741824x1073741824 pixels, more than kiln decodes"),
        "image_bmp_truncated": (bmp_huge[:20], "BMP: the data ends before the bitmap header"),
        "image_pnm_truncated": (b"P6\n32 32\n255\n" + garbage[:10], "PNM: the data ends before the last row"),
    }
    for name, (data, expect) in cases.items():
        enc = numpy_helper.from_array(np.frombuffer(data, np.uint8).copy(), "bytes")
        m = mc.model([helper.make_node("ImageDecoder", ["bytes"], ["y"], name="decode")], [],
                  [mc.vi("y", None, TensorProto.UINT8)], inits=[enc], opset=20)
        mc.save(name, m, "cannot decode the image: " + expect)  # compile lists it as node "decode" (ImageDecoder) [invalid]
    # Bytes that come only at run time: the image's size is not known when compiling.
    mc.save("image_runtime_bytes",
         mc.model([helper.make_node("ImageDecoder", ["bytes"], ["y"], name="decode")], [mc.vi("bytes", [64], TensorProto.UINT8)],
               [mc.vi("y", None, TensorProto.UINT8)], opset=20),
         "images that arrive only at run time are not supported")
