// ONNX sequence ops, unrolled at import. kiln has no sequence type: a
// sequence whose length and positions are known at compile time is a list of
// kiln values (see ImportContext::sequence_input), and each sequence op
// becomes list surgery plus ordinary kiln ops (split, reshape, concat).
// SequenceMap inlines its body once per element. A sequence graph input or
// output is its elements' tensors (ImportOptions::composite_inputs); a
// sequence whose length or positions depend on runtime data (a Loop with a
// runtime trip count carrying one) is unsupported.
#include "frontend/import_context.h"

namespace kiln::adapters {

namespace {

const std::vector<Value*>& seq(ImportContext& c, int i) {
  const std::vector<Value*>* s = c.sequence_input(i);
  if (!s) c.fail("operand {} must be a sequence", i);
  return *s;
}

// A position operand (scalar, may be negative) checked against [lo, n].
int64_t position(ImportContext& c, int i, int64_t n, int64_t dflt, bool allow_end) {
  if (!c.has_input(i)) return dflt;
  const Tensor& t = c.require_value(i, "sequence position");
  if (t.numel() != 1) c.fail("sequence position must be a scalar");
  int64_t p = t.get_int(0);
  int64_t limit = allow_end ? n : n - 1;
  if (p < -n || p > limit) c.fail("sequence position {} is out of range for a sequence of {} elements", p, n);
  return p < 0 ? p + n : p;
}

Value* reshape(ImportContext& c, Value* v, Shape s) {
  AttrMap a;
  a.set("shape", std::vector<int64_t>(s.begin(), s.end()));
  return c.emit1("reshape", {v}, a);
}

}  // namespace

void register_sequence(AdapterTable& t) {
  t.add("SequenceEmpty", [](ImportContext& c) { c.set_sequence_output(0, {}); });
  t.add("SequenceConstruct", [](ImportContext& c) {
    std::vector<Value*> els;
    for (int i = 0; i < c.num_inputs(); ++i) els.push_back(c.input(i));
    for (Value* v : els)
      if (v->dtype() != els[0]->dtype()) c.fail("sequence elements have different dtypes");
    c.set_sequence_output(0, els);
  });
  t.add("SequenceLength",
        [](ImportContext& c) { c.set_outputs({c.constant(Tensor::scalar(DType::I64, double(seq(c, 0).size())))}); });
  t.add("SequenceAt", [](ImportContext& c) {
    const auto& s = seq(c, 0);
    c.set_outputs({s[position(c, 1, static_cast<int64_t>(s.size()), -1, false)]});
  });
  t.add("SequenceInsert", [](ImportContext& c) {
    std::vector<Value*> s = seq(c, 0);
    int64_t n = static_cast<int64_t>(s.size());
    s.insert(s.begin() + position(c, 2, n, n, true), c.input(1));
    c.set_sequence_output(0, std::move(s));
  });
  t.add("SequenceErase", [](ImportContext& c) {
    std::vector<Value*> s = seq(c, 0);
    int64_t n = static_cast<int64_t>(s.size());
    if (n == 0) c.fail("cannot erase from an empty sequence");
    s.erase(s.begin() + position(c, 1, n, n - 1, false));
    c.set_sequence_output(0, std::move(s));
  });
  t.add("SplitToSequence", [](ImportContext& c) {
    Value* x = c.input(0);
    int rank = x->type().rank();
    if (rank == 0) c.fail("cannot split a scalar");
    int64_t axis = c.attrs().get_int("axis", 0);
    if (axis < -rank || axis >= rank) c.fail("axis {} is out of range for rank {}", axis, rank);
    if (axis < 0) axis += rank;
    int64_t dim = x->shape()[axis];
    bool keepdims = c.attrs().get_int("keepdims", 1) != 0;
    std::vector<int64_t> sizes;
    bool squeeze = false;
    if (!c.has_input(1)) {  // one element per index along axis
      sizes.assign(dim, 1);
      squeeze = !keepdims;
    } else {
      const Tensor& sp = c.require_value(1, "split");
      if (sp.rank() == 0) {
        int64_t chunk = sp.get_int(0);
        if (chunk <= 0) c.fail("split size {} must be positive", chunk);
        for (int64_t left = dim; left > 0; left -= chunk) sizes.push_back(std::min(chunk, left));
      } else {
        sizes = sp.to_int_vector();
      }
    }
    if (sizes.empty()) {
      c.set_sequence_output(0, {});
      return;
    }
    AttrMap a;
    a.set("axis", axis);
    a.set("split", sizes);
    std::vector<Value*> parts = c.emit("split", {x}, a, static_cast<int>(sizes.size()));
    if (squeeze) {
      for (Value*& p : parts) {
        Shape s = p->shape();
        s.erase(s.begin() + axis);
        p = reshape(c, p, s);
      }
    }
    c.set_sequence_output(0, std::move(parts));
  });
  t.add("SequenceMap", since_opset(17, [](ImportContext& c) {
          c.only_attrs({"body"});
          ImportedValue first = c.operand(0);
          if (!first.is_sequence()) c.fail("operand 0 must be a sequence");
          const size_t n = first.elements.size();
          std::vector<ImportedValue> ops;
          for (int i = 0; i < c.num_inputs(); ++i) {
            ops.push_back(c.operand(i));
            if (ops.back().is_empty()) c.fail("operand {} is missing", i);
            if (ops.back().is_sequence() && ops.back().elements.size() != n)
              c.fail("operand {} is a sequence of {} elements but operand 0 has {}", i, ops.back().elements.size(), n);
          }
          // One copy of the body per element: the k-th elements of the sequence
          // operands and the tensor operands as they are.
          std::vector<std::vector<Value*>> results(c.num_outputs());
          if (n == 0) c.skip_subgraph("body");
          for (size_t k = 0; k < n; ++k) {
            std::vector<ImportedValue> ins;
            for (const ImportedValue& o : ops) ins.push_back(o.is_sequence() ? ImportedValue::of(o.elements[k]) : o);
            std::vector<ImportedValue> outs = c.inline_subgraph_values("body", ins);
            if (outs.size() != results.size())
              c.fail("the body returns {} values for {} outputs", outs.size(), results.size());
            for (size_t j = 0; j < outs.size(); ++j) {
              if (!outs[j].is_tensor())
                c.fail("body output {} must be a tensor (it becomes element {} of output {})", j, k, j);
              results[j].push_back(outs[j].tensor);
            }
          }
          std::vector<ImportedValue> outs;
          for (auto& r : results) outs.push_back(ImportedValue::sequence(std::move(r)));
          c.set_output_values(outs);
        }));
  t.add("ConcatFromSequence", [](ImportContext& c) {
    const auto& s = seq(c, 0);
    if (s.empty()) c.fail("cannot concatenate an empty sequence");
    bool new_axis = c.attrs().get_int("new_axis", 0) != 0;
    int rank = s[0]->type().rank() + (new_axis ? 1 : 0);
    int64_t axis = c.attrs().require_int("axis");
    if (axis < -rank || axis >= rank) c.fail("axis {} is out of range for rank {}", axis, rank);
    if (axis < 0) axis += rank;
    std::vector<Value*> parts = s;
    if (new_axis) {
      for (Value*& p : parts) {
        Shape sh = p->shape();
        sh.insert(sh.begin() + axis, 1);
        p = reshape(c, p, sh);
      }
    }
    AttrMap a;
    a.set("axis", axis);
    c.set_outputs({c.emit1("concat", parts, a)});
  });
}

}  // namespace kiln::adapters
