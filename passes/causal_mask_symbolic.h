// A causal mask computed from ranges, recognised for every value of the
// graph's symbols (recognize-patterns, attention part).
//
// A static graph's causal mask is a constant that recognize_attention reads
// element by element. A graph with shape profiles (a decoder whose queries
// start at `past`) computes it instead, as exporters write it:
//
//   cols = reshape(range(0, past + seq, 1))           [1, past+seq]
//   rows = reshape(range(0, seq, 1) + past)           [seq, 1]
//   mask = where(less_or_equal(cols, rows), 0, -big)  [seq, past+seq]
//
// Such a mask is never folded (its sizes and values change with the shape),
// so the profile plan spent a kernel on it and the attention read it from
// memory. These functions prove, symbolically, that such a value equals the
// attention's causal mask aligned to the bottom right (key j allowed iff
// j <= i + Sk - Sq), so the attention takes causal=1 instead.
#pragma once
#include <cstdint>

#include "ir/graph.h"

namespace kiln::patterns {

// Whether the bool `cond`, read as [..., Sq, Sk] (dims possibly symbolic),
// is true exactly where key j <= i + Sk - Sq for every value of the symbols
// (false there when `masked_when_true`). Recognised: a comparison
// (less_or_equal, less, greater_or_equal, greater) of a value that counts
// along the keys (a range of step 1 plus or minus scalar constants, through
// reshapes) with one that counts along the queries, whose offsets differ by
// Sk - Sq as polynomials; Sk - Sq must be a polynomial with no negative
// coefficient (Sq <= Sk at every shape).
bool symbolic_causal_cond(const Value* cond, int64_t sq, int64_t sk, bool masked_when_true);

// Whether the additive mask `mask` is where(cond, 0, fill) or
// where(cond, fill, 0), fill very negative for dtype `dt` (`very_negative`
// says which), with cond a symbolic causal condition (above).
bool symbolic_causal_additive(const Value* mask, int64_t sq, int64_t sk, bool (*very_negative)(double, DType),
                              DType dt);

}  // namespace kiln::patterns
