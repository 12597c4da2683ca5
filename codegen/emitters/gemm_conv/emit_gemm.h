// Tiled GEMM kernels: matmul (numpy semantics) and gemm, alone or as the
// anchor of a gemm_epilogue fused node, and the shared-memory tiled SIMT
// core that conv (codegen/emitters/gemm_conv/emit_conv.h) reuses as an implicit GEMM.
//
// The core computes, for each batch index z, C_z[M,N] = A_z[M,K] B_z[K,N]
// where the emitter supplies how an element A(m,k) / B(k,n) is loaded (any
// index map: strided, transposed, im2col...) and what happens with each
// accumulator (the anchor's finishing step -- alpha/beta, bias -- and then
// the Epilogue of codegen/emitters/gemm_conv/emit_epilogue.h). One block of 256 threads computes
// a BM x BN tile of one batch index (block index = (z * tilesM + tm) * tilesN
// + tn, one flat grid); per K-tile of 16 it stages A and B into shared memory
// in the compute type and each thread accumulates a (BM/16) x (BN/16) micro
// tile in registers (rows ty + 16i, columns tx + 16j). After the main loop the
// accumulators go through shared memory once more (a BM x BN staging tile)
// and the epilogue runs once per element, threads sweeping the tile
// row-major (coalesced stores, one copy of the epilogue code).
//
// Tensor cores (emit_gemm_mma.cpp, docs/codegen.md "Tensor cores in
// matmul/gemm/conv"): for f16/bf16 operands, and f32 operands of a node
// marked tf32=1, the main loop is mma.sync instead (warps of 16x8 mma tiles,
// a multi-stage shared-memory pipeline, cp.async for operands that give
// 16-byte chunks); it leaves the accumulators in the same kind of staging
// tile, so the loaders' index maps, the `store` code and the epilogue are
// shared. Tile shapes: codegen/emitters/gemm_conv/gemm_tiles.h.
//
// Compute types: float for f16/bf16/f32 (f16/bf16 widened when staged),
// double for f64, unsigned long long for integers (wrapping like the
// reference).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "codegen/core/size_expr.h"
#include "codegen/emitters/gemm_conv/emit_epilogue.h"
#include "codegen/emitters/gemm_conv/gemm_tiles.h"
#include "ir/dtype.h"

namespace kiln::codegen {

// A launch of an anchored kernel (the sim backend turns it into a NodeKernel).
struct ComputeKernel {
  std::string name;
  std::string source;
  unsigned grid = 0;  // 0: empty result, nothing to launch
  unsigned block = 256;
  size_t shared_bytes = 0;    // dynamic shared memory (the tiled kernels use static shared memory: 0)
  int64_t workspace_f32 = 0;  // scratch it binds after its buffers (NodeKernel::workspace_f32)
  int64_t tile_counters = 0;  // zeroed u32 counters it binds after the scratch (NodeKernel::tile_counters)
  // Shape-generic (symbolic sizes): the kernel's kiln_syms and its grid per
  // shape (NodeKernel::symbols; y and z: one block unless set).
  std::vector<std::string> symbols;
  GridAxisExpr grid_expr, grid_expr_y{1, 1, 0, 1}, grid_expr_z{1, 1, 0, 1};
};

// How one GEMM operand is read.
struct OperandLoad {
  // Whether k is the contiguous index in memory: threads then sweep k
  // fastest when staging (coalesced reads), else the row (m or n) index.
  bool k_fast = true;
  // Statements run once per thread and staging slot: `row` names an int
  // variable with the slot's row (m for A, n for B; possibly >= the row
  // count, then the loads are skipped, so the setup must not read memory),
  // `s` is a suffix for the variables it declares. `bz` (the batch index) is
  // in scope.
  std::function<void(const std::string& row, const std::string& s, std::string& b)> setup;
  // Statements (indented 8) that set `v` (of the compute type, 0 before) to
  // the element at (row, k) (k: an int variable < K, row < the row count),
  // or leave it 0 (padding); may use the slot's variables.
  std::function<std::string(const std::string& k, const std::string& s)> load;
  // Optional, tensor cores only: 16-byte chunks for cp.async. Set it only
  // when every chunk is W = 16 / sizeof(element) contiguous, 16-byte aligned
  // elements of `chunk_buffer` (an operand slot such as "in1"): along k
  // (`chunk_k_fast`; then K % W == 0) or along the row (then the row count
  // is a multiple of W). Statements (indented 8) run after the slot's setup
  // with `row` < the row count and `k` < K (chunk starts) that set `ok`
  // (bool, false before: the chunk is zero, e.g. conv padding) and `off`
  // (the index type) to the chunk's first element.
  std::function<std::string(const std::string& k, const std::string& s)> chunk;
  bool chunk_k_fast = true;
  std::string chunk_buffer;
};

// Element-by-element staging of one operand's k-tile of `rows` x `bk` into
// shared memory (any index map, so no cp.async): iteration j holds element
// l = tid + threads * j, k fastest across threads when k is the contiguous
// index in memory. `p` prefixes the slot's variables (`<p>e_r`, `<p>e_kk`);
// `base` is the tile's first row, `count` the operand's rows and `k_text` K
// (C text); `slot(v)` gives the shared-memory element that (v_r, v_kk) lands
// in, and `value` what is stored there (`v`, the loaded compute-type value,
// is in scope). A loop unrolled 4 times (not straight-line code): im2col
// index maps cost registers per slot. The mma.sync and wgmma kernels share it.
std::string stage_operand_elements(const OperandLoad& ld, const std::string& p, int rows, int bk, int threads,
                                   const std::string& base, const std::string& count, const std::string& k_text,
                                   const std::function<std::string(const std::string& v)>& slot,
                                   const std::string& value);

struct TiledGemm {
  std::string label;  // kernel name prefix
  DType dtype;        // operand dtype: decides the compute type
  // Any of them may be a symbolic dim (then `syms` reads it): a plan with
  // shape profiles (an encoder's batch/M/N/K, an NCHW conv's batch of images).
  int64_t batch = 1, M = 0, N = 0, K = 0;
  KernelSymbols syms;
  OperandLoad a, b;
  // Statements run once per thread before the main loop (batch offsets...), `bz` in scope.
  std::string prologue;
  // Statements for one tile element: `bz`, `gm`, `gn` (int, inside the
  // result) and `acc` (compute type) in scope; they finish the anchor's value
  // and run the epilogue.
  std::string store;
  // The vectorized store of the tensor-core kernel (emit_gemm_mma.cpp; docs/codegen.md,
  // "Vectorized GEMM/conv epilogues"): where the result index of (gm, gn) is
  // `vstore_row` + gn (an expression of bz, gm and the prologue's variables,
  // always a multiple of `vstore_align`), the kernel hands the epilogue
  // (Epilogue::vector_code) V consecutive columns gn0 .. gn0 + V - 1 at once:
  // `vstore_pre` runs once for them (gm, gn0 in scope; it may declare arrays
  // of V elements, e.g. a bias read as one vector), then per column j (gn,
  // acc in scope) `vstore_finish` (the anchor's finishing step, as in
  // `store`) and `vstore_value` (the epilogue's accumulator expression). The
  // text may use @V@ for the width. Empty vstore_row: element by element.
  std::string vstore_row, vstore_pre, vstore_finish, vstore_value;
  int64_t vstore_align = 0;
  // f32 operands may use TF32 tensor cores (the node's tf32=1 attribute).
  bool tf32 = false;
  // The epilogue slots the main loop reads (A, B and their zero points): a
  // split-K reduction kernel does not touch them (perf/plan_work.cpp counts
  // each launch's bytes from its source's "// buffers:" line).
  std::vector<int> operand_slots;
  // Bytes of the GEMM operands in memory (GemmProblem::operand_bytes; 0: unknown).
  int64_t operand_bytes = 0;
};

// The compute type of a GEMM over `dtype`: float, double or unsigned long long.
std::string gemm_compute_type(DType dtype);
// A stored operand element (an expression of the dtype's storage type) as the compute type.
std::string gemm_load_as(DType dtype, const std::string& stored);
// The accumulator as the epilogue expects it (Epilogue::code's `acc`).
std::string gemm_acc_for_epilogue(DType dtype, const std::string& acc);

// The math a TiledGemm runs on (tensor cores for f16/bf16, f32 with tf32).
GemmMath gemm_math(const TiledGemm& g);

// The problem a shape-generic GEMM's tile is chosen for: its symbolic dims
// at a large representative size (M 4096, N and K 512; the batch 1 over a
// symbolic M, 4096 over a static one), since one tile serves every shape and
// each tail is guarded.
GemmProblem generic_gemm_problem(const TiledGemm& g);
// Representative rows for generic_gemm_problem instead of its defaults (a
// symbolic M at `rows`, a symbolic batch at rows / M images). A GEMM size bucket (a launch variant for a
// range of rows, compiler/plan_writer_variants.h) emits the shape-generic
// kernels once more under a smaller or larger value, so their tile is the
// one for that range. Scoped, per thread.
class ScopedGenericGemmRows {
 public:
  explicit ScopedGenericGemmRows(int64_t rows);
  ~ScopedGenericGemmRows();
  ScopedGenericGemmRows(const ScopedGenericGemmRows&) = delete;
  ScopedGenericGemmRows& operator=(const ScopedGenericGemmRows&) = delete;

 private:
  int64_t previous_;
};
// The tile of `g`: choose_gemm_tile_config for its sizes, or for a
// shape-generic GEMM for generic_gemm_problem, never a wgmma tile and never
// a split-K: the split is decided from the grid, which grows with the
// symbols, and its workspace and per-tile counters are sized by it (the
// default's split is dropped, a chooser returning one is an error).
GemmTileConfig generic_gemm_tile(const TiledGemm& g, GemmMath math);
// A shape-generic GEMM's launch with tile bm x bn into `k` (symbols, grid
// per shape): one flat x axis of ceil(M / bm) x batch x column tiles when
// the batch and N are static, else x row tiles, y column tiles, z the batch
// (returns true: the kernel reads blockIdx.x/y/z).
bool generic_gemm_grid(const TiledGemm& g, int bm, int bn, ComputeKernel& k);

// The complete kernels (source, name, launch) for `g`, in launch order; `ep`
// gives the buffers and the simulator entry. One kernel, or two when the
// tile splits K (GemmTileConfig::split_k > 1, emit_gemm_mma.cpp): the GEMM
// writes each split's f32 partial tile to the workspace, then a reduction
// kernel sums the splits in a fixed order and runs `store` (the anchor's
// finishing step and the epilogue) once per element. A folded split
// (GemmTileConfig::fold_split) is one kernel again: the last block of each
// tile to finish sums that tile's partial tiles in the same fixed order and
// runs `store` itself.
std::vector<ComputeKernel> emit_tiled_gemm(const TiledGemm& g, const Epilogue& ep);
// The tensor-core kernel(s) for `g` with tile `c` (emit_gemm_mma.cpp); `math` is not Simt.
std::vector<ComputeKernel> emit_mma_gemm(const TiledGemm& g, const Epilogue& ep, GemmMath math,
                                         const GemmTileConfig& c);

// The same on Hopper's warpgroup MMA (emit_gemm_wgmma_tiled.cpp; c.wgmma, sm_90a).
std::vector<ComputeKernel> emit_wgmma_tiled_gemm(const TiledGemm& g, const Epilogue& ep, GemmMath math,
                                                 const GemmTileConfig& c);

// matmul / gemm, bare (Epilogue::from_node) or anchoring a fused node.
// Throws kiln::Unsupported for what is not handled (say which).
std::vector<ComputeKernel> emit_matmul_gemm(const Epilogue& ep);

}  // namespace kiln::codegen
