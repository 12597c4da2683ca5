#include "frontend/batch_dim.h"

#include <onnx/onnx_pb.h>

#include <set>

#include "ir/error.h"
#include "ir/short_name.h"

namespace kiln {

std::map<std::string, Shape> batch_input_shapes(const onnx::GraphProto& g, int64_t batch,
                                                const std::map<std::string, Shape>& given, const std::string& file) {
  std::set<std::string> inits;
  for (const auto& t : g.initializer()) inits.insert(t.name());
  std::map<std::string, Shape> shapes;
  for (const auto& vi : g.input()) {
    if (inits.count(vi.name()) || given.count(vi.name())) continue;
    if (!vi.type().has_tensor_type() || !vi.type().tensor_type().has_shape()) continue;
    const auto& shape = vi.type().tensor_type().shape();
    if (shape.dim_size() == 0) continue;
    const auto& d0 = shape.dim(0);
    if (d0.has_dim_value() && d0.dim_value() != 1) continue;
    Shape s{batch};
    for (int i = 1; i < shape.dim_size(); ++i) {
      const auto& d = shape.dim(i);
      if (!d.has_dim_value() || d.dim_value() < 0)
        fail("{}: --batch: input \"{}\" dim {} is not fixed; set the full shape with --shapes", file,
             short_name(vi.name()), i);
      s.push_back(d.dim_value());
    }
    shapes[vi.name()] = s;
  }
  if (shapes.empty())
    fail("{}: --batch: no input has a batch dim first (a symbolic dim or 1); set shapes with --shapes", file);
  return shapes;
}

}  // namespace kiln
