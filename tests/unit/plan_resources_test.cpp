// The plan's optional `resources` section (runtime/plan_format.h): ptxas's
// per-kernel registers/static shared/spill bytes and the memory plan's live
// peak round-trip; a plan without the section (as written before it existed)
// loads with them unknown; a section that disagrees with the kernels section
// is rejected. Also the CUBIN reader's errors on bytes that are not a CUBIN.
#include <gtest/gtest.h>

#include <xxhash.h>

#include <cstring>

#include "ir/error.h"
#include "runtime/cubin_info.h"
#include "runtime/plan_format.h"

namespace kiln {
namespace {

plan::Plan two_kernel_plan() {
  plan::Plan p;
  p.meta = {"0.1.0", "sm_90", "fp32", {"sm_90"}, true, "", 0};
  p.graph_text = "graph @m(%x: f32[4]) -> (f32[4]) {\n  %y = relu(%x) : f32[4]\n  return %y\n}\n";
  for (const char* name : {"a", "b"}) {
    plan::Kernel k;
    k.name = name;
    k.arch = "sm_90";
    k.cubin = {1, 2, 3};
    p.kernels.push_back(k);
  }
  p.kernels[0].registers = 40;
  p.kernels[0].static_shared_bytes = 264;
  p.kernels[0].spill_bytes = 8;
  p.kernels[1].registers = 17;
  p.kernels[1].static_shared_bytes = 0;
  p.kernels[1].spill_bytes = 0;
  p.memory.arena_bytes = 512;
  p.memory.live_peak_bytes = 384;
  return p;
}

struct Entry {
  uint32_t id;
  uint64_t offset, size;
  uint8_t* at;  // the table entry
};

std::vector<Entry> table(std::vector<uint8_t>& b) {
  uint32_t count;
  std::memcpy(&count, b.data() + 24, 4);
  std::vector<Entry> r;
  for (uint32_t i = 0; i < count; ++i) {
    Entry e{};
    e.at = b.data() + 40 + 32 * i;
    std::memcpy(&e.id, e.at, 4);
    std::memcpy(&e.offset, e.at + 8, 8);
    std::memcpy(&e.size, e.at + 16, 8);
    r.push_back(e);
  }
  return r;
}

void reseal(std::vector<uint8_t>& b) {  // section and header checksums after an edit
  uint32_t count;
  std::memcpy(&count, b.data() + 24, 4);
  for (Entry& e : table(b)) {
    uint64_t sum = XXH64(b.data() + e.offset, e.size, 0);
    std::memcpy(e.at + 24, &sum, 8);
  }
  uint64_t zero = 0;
  std::memcpy(b.data() + 32, &zero, 8);
  uint64_t h = XXH64(b.data(), 40 + 32 * count, 0);
  std::memcpy(b.data() + 32, &h, 8);
}

TEST(PlanResources, RoundTrip) {
  plan::Plan p = two_kernel_plan();
  std::vector<uint8_t> b = plan::serialize(p);
  plan::Plan q = plan::deserialize(b.data(), b.size(), "m.plan");
  ASSERT_EQ(q.kernels.size(), 2u);
  EXPECT_EQ(q.kernels[0].registers, 40);
  EXPECT_EQ(q.kernels[0].static_shared_bytes, 264);
  EXPECT_EQ(q.kernels[0].spill_bytes, 8);
  EXPECT_EQ(q.kernels[1].registers, 17);
  EXPECT_EQ(q.memory.live_peak_bytes, 384);
  EXPECT_EQ(plan::serialize(q), b);
}

TEST(PlanResources, PlanWithoutTheSectionLoadsWithResourcesUnknown) {
  std::vector<uint8_t> b = plan::serialize(two_kernel_plan());
  // Drop section 7 from the table (it is last), as a plan written before it.
  std::vector<Entry> t = table(b);
  ASSERT_EQ(t.back().id, 7u);
  uint32_t count = uint32_t(t.size() - 1), header = 40 + 32 * count;
  std::memcpy(b.data() + 24, &count, 4);
  std::memcpy(b.data() + 12, &header, 4);
  reseal(b);
  plan::Plan q = plan::deserialize(b.data(), b.size(), "old.plan");
  EXPECT_EQ(q.kernels[0].registers, -1);
  EXPECT_EQ(q.kernels[0].static_shared_bytes, -1);
  EXPECT_EQ(q.kernels[1].spill_bytes, -1);
  EXPECT_EQ(q.memory.live_peak_bytes, -1);
  EXPECT_EQ(q.memory.arena_bytes, 512u);
}

std::string load_error(const std::vector<uint8_t>& b) {
  try {
    plan::deserialize(b.data(), b.size(), "m.plan");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(PlanResources, SectionThatDisagreesWithTheKernelsIsRejected) {
  std::vector<uint8_t> b = plan::serialize(two_kernel_plan());
  Entry r = table(b).back();
  uint64_t three = 3;
  std::memcpy(b.data() + r.offset + 8, &three, 8);  // after the live peak: the kernel count
  reseal(b);
  EXPECT_EQ(load_error(b), "m.plan: section 'resources': kernel count is 3 but only 24 bytes remain");

  b = plan::serialize(two_kernel_plan());
  r = table(b).back();
  uint64_t one = 1;
  std::memcpy(b.data() + r.offset + 8, &one, 8);
  reseal(b);
  EXPECT_EQ(load_error(b), "m.plan: section 'resources': resources for 1 kernels, the kernels section has 2");

  b = plan::serialize(two_kernel_plan());
  r = table(b).back();
  int32_t bad = -7;
  std::memcpy(b.data() + r.offset + 16, &bad, 4);  // kernel a's registers
  reseal(b);
  EXPECT_EQ(load_error(b), "m.plan: section 'resources': kernel a: resource value -7 is negative");
}

std::string cubin_error(const std::vector<uint8_t>& b) {
  try {
    plan::cubin_kernel_info(b, "k");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(CubinInfo, RejectsWhatIsNotACubin) {
  EXPECT_EQ(cubin_error({1, 2, 3}), "CUBIN: not an ELF file (3 bytes)");
  std::vector<uint8_t> elf(64, 0);
  std::memcpy(elf.data(),
              "\x7f"
              "ELF",
              4);
  elf[4] = 1;  // 32-bit
  elf[5] = 1;
  EXPECT_EQ(cubin_error(elf), "CUBIN: not a 64-bit little-endian ELF file (class 1, data 1)");
  elf[4] = 2;
  uint64_t shoff = 1000;  // past the end
  std::memcpy(elf.data() + 0x28, &shoff, 8);
  uint16_t entsize = 64, num = 2, strndx = 1;
  std::memcpy(elf.data() + 0x3A, &entsize, 2);
  std::memcpy(elf.data() + 0x3C, &num, 2);
  std::memcpy(elf.data() + 0x3E, &strndx, 2);
  EXPECT_EQ(cubin_error(elf), "CUBIN: sh_name at offset 1000 is past the end (64 bytes)");
}

}  // namespace
}  // namespace kiln
