// What a CUBIN (an ELF file from ptxas/NVRTC) says about one of its kernels,
// read from its global `.nv.info` section the way cuobjdump reads it: the
// entries are (format u8, attribute u8, size u16, payload); the ones read here
// have the payload (symbol index u32, value u32):
//   EIATTR_REGCOUNT   (0x2f) registers per thread
//   EIATTR_FRAME_SIZE (0x11) bytes of local memory per thread in the stack
//                            frame (spills and local arrays)
// The kernel's symbol index comes from `.symtab`. The kernel's own
// `.nv.info.<kernel>` section holds entries of any format (SVAL as above with
// no symbol; the others 4 bytes: format, attribute, u16 value); read here:
//   EIATTR_MAX_THREADS      (0x05, SVAL x, y, z u32) its __launch_bounds__
//   EIATTR_CBANK_PARAM_SIZE (0x19, HVAL) bytes of kernel parameters `kiln inspect` shows these
// next to what ptxas reported at compile time (the plan's `resources`
// section) and uses them for plans written before that section existed.
// Static shared memory is not read here: the `.nv.shared.<kernel>` section
// also holds the 1 KiB sm_80+ reserve, so its size is not what ptxas reports.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::plan {

struct CubinKernelInfo {
  int registers = -1;          // -1: no EIATTR_REGCOUNT for the kernel
  int frame_bytes = -1;        // -1: no EIATTR_FRAME_SIZE for the kernel
  long long max_threads = -1;  // x * y * z of EIATTR_MAX_THREADS; -1: no launch bound
  int param_bytes = -1;        // -1: no EIATTR_CBANK_PARAM_SIZE
};

// Throws kiln::Error when `cubin` is not a 64-bit little-endian ELF file, a
// section or entry lies outside it, or it has no symbol named `kernel`.
CubinKernelInfo cubin_kernel_info(const std::vector<uint8_t>& cubin, const std::string& kernel);

}  // namespace kiln::plan
