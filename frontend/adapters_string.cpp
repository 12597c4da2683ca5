// The string ops (ops/string_ops.cpp; reference backend only): StringConcat,
// StringSplit, RegexFullMatch (opset 20), StringNormalizer (opset 10) and
// ai.onnx.ml's LabelEncoder in all its attribute forms. Equal, Cast, CastLike
// and Identity on strings are in adapters_elementwise.cpp.
//
// LabelEncoder's forms, each turned into label_encoder's keys, values and
// default tensors:
//  - ml opset 1: classes_strings with default_int64 / default_string; a
//    string X maps to its class's index, an i64 X to the class it indexes.
//  - ml opset 2: keys_{strings,int64s,floats} and values_{...}, defaults
//    default_string ("_Unused"), default_int64 (-1), default_float (-0.0).
//  - ml opset 4: keys_tensor / values_tensor / default_tensor, in any mix
//    with the lists (a one-element default_tensor of the values' dtype).
#include "frontend/import_context.h"

namespace kiln::adapters {

namespace {

void require_string_input(ImportContext& c, int i, const char* name) {
  if (c.input(i)->dtype() != DType::String)
    c.fail("{} has dtype {}; {} takes string tensors", name, dtype_name(c.input(i)->dtype()), c.op_type());
}

void string_concat(ImportContext& c) {
  c.only_attrs({});
  require_string_input(c, 0, "X");
  require_string_input(c, 1, "Y");
  c.set_outputs({c.emit1("string_concat", {c.input(0), c.input(1)})});
}

void string_split(ImportContext& c) {
  c.only_attrs({"delimiter", "maxsplit"});
  require_string_input(c, 0, "X");
  AttrMap a;
  a.set("delimiter", c.attrs().get_string("delimiter", ""));
  if (c.attrs().has("maxsplit")) {
    const int64_t m = c.attrs().get_int("maxsplit", -1);
    if (m < 0) c.fail("maxsplit is {}; it must be 0 or more", m);
    a.set("maxsplit", m);
  }
  c.set_outputs(c.emit("string_split", {c.input(0)}, a, 2));
}

void regex_full_match(ImportContext& c) {
  c.only_attrs({"pattern"});
  require_string_input(c, 0, "X");
  if (!c.attrs().has("pattern")) c.fail("attribute 'pattern' is missing");
  AttrMap a;
  a.set("pattern", c.attrs().get_string("pattern", ""));
  c.set_outputs({c.emit1("regex_full_match", {c.input(0)}, a)});
}

void string_normalizer(ImportContext& c) {
  c.only_attrs({"case_change_action", "is_case_sensitive", "locale", "stopwords"});
  require_string_input(c, 0, "X");
  AttrMap a;
  a.set("case_change_action", c.attrs().get_string("case_change_action", "NONE"));
  a.set("is_case_sensitive", c.attrs().get_int("is_case_sensitive", 0));
  if (c.attrs().has("locale")) a.set("locale", c.attrs().get_string("locale", ""));
  if (c.attrs().has("stopwords")) a.set("stopwords", c.attrs().get_strings("stopwords"));
  c.set_outputs({c.emit1("string_normalizer", {c.input(0)}, a)});
}

// ---- LabelEncoder ----

Tensor strings_tensor(const std::vector<std::string>& v) {
  return Tensor::from_strings({static_cast<int64_t>(v.size())}, v);
}

Tensor ints_tensor(const std::vector<int64_t>& v) { return Tensor::from(DType::I64, {int64_t(v.size())}, v); }

Tensor floats_tensor(const std::vector<float>& v) { return Tensor::from(DType::F32, {int64_t(v.size())}, v); }

// The one of keys_strings / keys_int64s / keys_floats / keys_tensor given
// (prefix "keys") or of the values'.
Tensor list_form(ImportContext& c, const std::string& prefix) {
  const AttrMap& a = c.attrs();
  std::vector<Tensor> given;
  if (a.has(prefix + "_strings")) given.push_back(strings_tensor(a.get_strings(prefix + "_strings")));
  if (a.has(prefix + "_int64s")) given.push_back(ints_tensor(a.get_ints(prefix + "_int64s")));
  if (a.has(prefix + "_floats")) given.push_back(floats_tensor(a.get_floats(prefix + "_floats")));
  if (a.has(prefix + "_tensor")) given.push_back(*a.get_tensor(prefix + "_tensor"));
  if (given.size() != 1)
    c.fail("needs exactly one of {0}_strings, {0}_int64s, {0}_floats, {0}_tensor; {1} given", prefix, given.size());
  if (given[0].rank() != 1) c.fail("{}_tensor is {}; it must be 1-D", prefix, given[0].type().str());
  return given[0];
}

Tensor default_for(ImportContext& c, DType values) {
  const AttrMap& a = c.attrs();
  if (a.has("default_tensor")) {
    const Tensor& t = *a.get_tensor("default_tensor");
    if (t.numel() != 1 || t.dtype() != values)
      c.fail("default_tensor is {}; it must hold one {} like the values", t.type().str(), dtype_name(values));
    return t.reshaped({});
  }
  if (values == DType::String) return Tensor::from_strings({}, {a.get_string("default_string", "_Unused")});
  if (is_float(values)) return Tensor::scalar(values, a.get_float("default_float", -0.0f));
  return Tensor::scalar(values, static_cast<double>(a.get_int("default_int64", -1)));
}

void label_encoder(ImportContext& c) {
  c.only_attrs({"classes_strings", "default_float", "default_int64", "default_string", "default_tensor", "keys_floats",
                "keys_int64s", "keys_strings", "keys_tensor", "values_floats", "values_int64s", "values_strings",
                "values_tensor"});
  Value* x = c.input(0);
  AttrMap a;
  if (c.attrs().has("classes_strings")) {  // ml opset 1
    const std::vector<std::string> classes = c.attrs().get_strings("classes_strings");
    std::vector<int64_t> index(classes.size());
    for (size_t i = 0; i < index.size(); ++i) index[i] = static_cast<int64_t>(i);
    const bool to_int = x->dtype() == DType::String;
    a.set("keys", to_int ? strings_tensor(classes) : ints_tensor(index));
    a.set("values", to_int ? ints_tensor(index) : strings_tensor(classes));
    a.set("default", to_int ? Tensor::scalar(DType::I64, double(c.attrs().get_int("default_int64", -1)))
                            : Tensor::from_strings({}, {c.attrs().get_string("default_string", "_Unused")}));
  } else {
    Tensor keys = list_form(c, "keys");
    Tensor values = list_form(c, "values");
    a.set("default", default_for(c, values.dtype()));
    a.set("keys", std::move(keys));
    a.set("values", std::move(values));
  }
  c.set_outputs({c.emit1("label_encoder", {x}, a)});
}

}  // namespace

void register_string(AdapterTable& t) {
  t.add("StringConcat", since_opset(20, string_concat));
  t.add("StringSplit", since_opset(20, string_split));
  t.add("RegexFullMatch", since_opset(20, regex_full_match));
  t.add("StringNormalizer", since_opset(10, string_normalizer));
  t.add(domain_adapter_key("ai.onnx.ml", "LabelEncoder"), label_encoder);
}

}  // namespace kiln::adapters
