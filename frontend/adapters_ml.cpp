// Ops of domain ai.onnx.ml (versions 1 to 5) that are kiln ops in another
// form, decomposed at import. Registered as "ai.onnx.ml:Op"
// (domain_adapter_key). The tree ensembles are in adapters_tree_ensemble.cpp;
// the others (SVMClassifier, LabelEncoder, which needs
// string tensors, ...) are unsupported, named.
//
//  - Binarizer: 1 where x > threshold, else 0, in x's dtype (NaN gives 0).
//  - ArrayFeatureExtractor: the entries of x's last axis at the given
//    indices (flattened), shaped [..., k]; a 1-D x gives [1, k], as ONNX's
//    reference does.
#include "frontend/import_context.h"

namespace kiln::adapters {

namespace {

constexpr const char* kMlDomain = "ai.onnx.ml";

void binarizer(ImportContext& c) {
  c.only_attrs({"threshold"});
  Value* x = c.input(0);
  const DType dt = x->dtype();
  if (dt != DType::F32 && dt != DType::F64 && dt != DType::I64 && dt != DType::I32)
    c.fail("X has dtype {}; Binarizer takes f32, f64, i64 or i32", dtype_name(dt));
  Value* threshold = c.constant(Tensor::scalar(dt, c.attrs().get_float("threshold", 0.f)), "threshold");
  AttrMap to;
  to.set("to", std::string(dtype_name(dt)));
  c.set_outputs({c.emit1("cast", {c.emit1("greater", {x, threshold})}, to)});
}

void array_feature_extractor(ImportContext& c) {
  c.only_attrs({});
  Value* x = c.input(0);
  Value* idx = c.input(1);
  if (idx->dtype() != DType::I64) c.fail("Y (the indices) has dtype {}; it must be i64", dtype_name(idx->dtype()));
  const int rank = x->type().rank();
  if (rank == 0) c.fail("X is a scalar; it needs at least one axis to extract from");
  const int64_t k = idx->type().numel();
  auto reshape = [&](Value* v, std::vector<int64_t> s) {
    AttrMap a;
    a.set("shape", s);
    return c.emit1("reshape", {v}, a);
  };
  if (idx->type().rank() != 1) idx = reshape(idx, {k});
  AttrMap a;
  a.set("axis", int64_t(rank - 1));
  Value* y = c.emit1("gather", {x, idx}, a);
  if (rank == 1) y = reshape(y, {1, k});
  c.set_outputs({y});
}

}  // namespace

void register_ml(AdapterTable& t) {
  t.add(domain_adapter_key(kMlDomain, "Binarizer"), binarizer);
  t.add(domain_adapter_key(kMlDomain, "ArrayFeatureExtractor"), array_feature_extractor);
}

}  // namespace kiln::adapters
