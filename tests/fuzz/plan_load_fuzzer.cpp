// libFuzzer target: arbitrary bytes as a plan file through the runtime's
// loader (runtime/plan_format.h: header, checksums, every section's parser,
// the cross-section checks) and, when it loads, the plan's graph
// (runtime/plan_graph.h) and a run on the CPU reference path.
//
// Random bytes almost never carry valid xxh64 checksums, so each input is
// also loaded a second time with its checksums recomputed (where the header
// and table can be read): that copy gets past the checksums and exercises the
// bounds checks and parsers behind them, which a damaged-but-checksummed plan
// reaches too. kiln::Error is the expected way to fail; anything else (a
// sanitizer report, another exception, a crash) is a bug.
#include <xxhash.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "ir/error.h"
#include "runtime/engine.h"
#include "tests/fuzz/fuzz_limits.h"

namespace {

constexpr size_t kFixedHeader = 40, kTableEntry = 32, kChecksumAt = 32;

template <typename T>
T load(const std::vector<uint8_t>& b, size_t at) {
  T v;
  std::memcpy(&v, b.data() + at, sizeof(T));
  return v;
}

// The plan with every section checksum that can be computed (entry inside the
// file) and the header checksum rewritten; unchanged when the header cannot
// be read.
std::vector<uint8_t> with_valid_checksums(const uint8_t* data, size_t size) {
  std::vector<uint8_t> b(data, data + size);
  if (size < kFixedHeader) return b;
  uint32_t header_size = load<uint32_t>(b, 12);
  uint32_t count = load<uint32_t>(b, 24);
  if (count > 64 || header_size != kFixedHeader + kTableEntry * count || header_size > size) return b;
  for (uint32_t i = 0; i < count; ++i) {
    size_t e = kFixedHeader + kTableEntry * i;
    uint64_t off = load<uint64_t>(b, e + 8), n = load<uint64_t>(b, e + 16);
    if (off > size || n > size - off) continue;
    uint64_t sum = XXH64(b.data() + off, n, 0);
    std::memcpy(b.data() + e + 24, &sum, 8);
  }
  std::memset(b.data() + kChecksumAt, 0, 8);
  uint64_t sum = XXH64(b.data(), header_size, 0);
  std::memcpy(b.data() + kChecksumAt, &sum, 8);
  return b;
}

void try_load_and_run(const std::vector<uint8_t>& bytes) {
  std::shared_ptr<const kiln::rt::Engine> e;
  try {
    e = kiln::rt::Engine::load(bytes.data(), bytes.size(), "fuzz.plan", kiln::rt::Backend::Cpu);
  } catch (const kiln::Error&) {
    return;
  }
  // A plan that loads runs on zero inputs (bounded: fuzz_limits caps every
  // tensor, and a run failing with kiln::Error is fine).
  size_t io_bytes = 0;
  for (const auto* ds : {&e->inputs(), &e->outputs()})
    for (const auto& d : *ds) io_bytes += d.type.nbytes();
  if (io_bytes > (16u << 20)) return;  // loads, but too big to run within libFuzzer's memory limit
  try {
    kiln::rt::Context ctx(e);
    std::vector<std::vector<uint8_t>> bufs;
    for (const auto& d : e->inputs()) {
      bufs.emplace_back(d.type.nbytes());
      ctx.bind_input(d.name, bufs.back().data(), d.type, false);
    }
    for (const auto& d : e->outputs()) {
      bufs.emplace_back(d.type.nbytes());
      ctx.bind_output(d.name, bufs.back().data(), d.type, false);
    }
    ctx.run();
  } catch (const kiln::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool ready = (kiln::fuzz::set_fuzz_limits(), true);
  (void)ready;
  try_load_and_run(std::vector<uint8_t>(data, data + size));
  try_load_and_run(with_valid_checksums(data, size));
  return 0;
}
