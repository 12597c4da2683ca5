// What `kiln run` prints about each output, as polygraphy does: type,
// checksum (to compare runs byte for byte), min / max / mean and the first
// values (to see at a glance whether the numbers are sane), a warning for NaN
// and Inf values (fp16 overflow shows up as Inf), and with --outputs the
// file each output went to.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "ir/tensor.h"

namespace kiln {

// Output names become file names DIR/<file>.npy: every byte outside
// [A-Za-z0-9._-] becomes '_' (so "gpu_0/softmax_1" -> gpu_0_softmax_1.npy), a
// leading '.' becomes '_' (no hidden files, no ".."), an empty name is
// "output_<position>". Two outputs that map to the same file (a/b and a_b)
// both get their position appended ("a_b.0.npy", "a_b.1.npy"), never one
// overwriting the other. Returns the file names (without DIR), in order.
std::vector<std::string> output_file_names(const std::vector<std::string>& names);

// Prints each output's report to stdout and warnings to stderr; writes
// DIR/<file>.npy when dir is set (the folder was checked writable before the
// run). `precision` ("fp16", ...) tailors the NaN/Inf warning.
void report_outputs(const std::vector<std::pair<std::string, Tensor>>& outs, const std::string& dir,
                    const std::string& precision);

}  // namespace kiln
