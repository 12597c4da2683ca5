// The three matchers the recognize-patterns pass runs (one file each). Each
// rewrites every match it finds in `g`, counts it in `stats` and returns how
// many it rewrote.
#pragma once
#include "passes/pass.h"

namespace kiln::patterns {

int recognize_gelu(Graph& g, PassStats& stats);        // recognize_gelu.cpp
int recognize_layer_norm(Graph& g, PassStats& stats);  // recognize_layernorm.cpp
int recognize_attention(Graph& g, PassStats& stats);   // recognize_attention.cpp

}  // namespace kiln::patterns
