// The string ops' files (ops/string_ops.cpp registers them all) and what
// their unit tests reach directly.
#pragma once
#include <string>

#include "ir/op_registry.h"

namespace kiln::ops {

void register_string_normalizer(OpRegistry& r);  // string_normalizer.cpp
void register_string_cast(OpRegistry& r);        // string_cast.cpp: cast_string
void register_label_encoder(OpRegistry& r);      // label_encoder_op.cpp

// Element i of a numeric tensor as ONNX's reference casts it to a string
// (numpy's astype(str)): integers in decimal, bool "True"/"False", floats
// in their shortest round-trip digits, positional from 1e-4 up to 1e16
// (f64), 1e7 (f32, bf16) or 1e3 (f16), else "1.5e-05" style; "nan", "inf", "-inf".
std::string number_to_string(const Tensor& t, int64_t i);
// Parses `s` into element i of numeric tensor t as ONNX's Cast from string
// does; kiln::Error naming `label` and the string when it is no number.
void string_to_number(const std::string& s, Tensor& t, int64_t i, const std::string& label);

// Upper- or lower-cases UTF-8 text code point by code point in the named
// locale ("" for C.UTF-8); kiln::Error when the locale is not installed.
std::string change_case(const std::string& utf8, bool upper, const std::string& locale, const std::string& label);

}  // namespace kiln::ops
