#include "ir/attribute.h"

#include <charconv>
#include <cmath>

#include "ir/error.h"

namespace kiln {

std::string_view attr_kind_name(AttrKind k) {
  switch (k) {
    case AttrKind::Int:
      return "int";
    case AttrKind::Float:
      return "float";
    case AttrKind::String:
      return "string";
    case AttrKind::Ints:
      return "ints";
    case AttrKind::Floats:
      return "floats";
    case AttrKind::Strings:
      return "strings";
    case AttrKind::Tensor:
      return "tensor";
  }
  return "?";
}

const Attribute* AttrMap::find(const std::string& name) const {
  auto it = map_.find(name);
  return it == map_.end() ? nullptr : &it->second;
}

bool AttrMap::operator==(const AttrMap& o) const {
  if (map_.size() != o.map_.size()) return false;
  for (auto a = map_.begin(), b = o.map_.begin(); a != map_.end(); ++a, ++b) {
    if (a->first != b->first || !(a->second == b->second)) return false;
  }
  return true;
}

namespace {
template <typename T>
const T* typed(const AttrMap& m, const std::string& name, AttrKind want) {
  const Attribute* a = m.find(name);
  if (!a) return nullptr;
  if (const T* v = std::get_if<T>(a)) return v;
  fail("attribute '{}' should be {} but is {}", name, attr_kind_name(want), attr_kind_name(attr_kind(*a)));
}
}  // namespace

int64_t AttrMap::get_int(const std::string& name, int64_t dflt) const {
  const int64_t* v = typed<int64_t>(*this, name, AttrKind::Int);
  return v ? *v : dflt;
}
int64_t AttrMap::require_int(const std::string& name) const {
  const int64_t* v = typed<int64_t>(*this, name, AttrKind::Int);
  if (!v) fail("required attribute '{}' is missing", name);
  return *v;
}
float AttrMap::get_float(const std::string& name, float dflt) const {
  if (const Attribute* a = find(name); a && std::holds_alternative<int64_t>(*a))
    return static_cast<float>(std::get<int64_t>(*a));
  const float* v = typed<float>(*this, name, AttrKind::Float);
  return v ? *v : dflt;
}
std::string AttrMap::get_string(const std::string& name, const std::string& dflt) const {
  const std::string* v = typed<std::string>(*this, name, AttrKind::String);
  return v ? *v : dflt;
}
std::vector<int64_t> AttrMap::get_ints(const std::string& name, const std::vector<int64_t>& dflt) const {
  const auto* v = typed<std::vector<int64_t>>(*this, name, AttrKind::Ints);
  return v ? *v : dflt;
}
std::vector<float> AttrMap::get_floats(const std::string& name, const std::vector<float>& dflt) const {
  const auto* v = typed<std::vector<float>>(*this, name, AttrKind::Floats);
  return v ? *v : dflt;
}
std::vector<std::string> AttrMap::get_strings(const std::string& name) const {
  const auto* v = typed<std::vector<std::string>>(*this, name, AttrKind::Strings);
  return v ? *v : std::vector<std::string>{};
}
const Tensor* AttrMap::get_tensor(const std::string& name) const {
  return typed<Tensor>(*this, name, AttrKind::Tensor);
}

std::string float_repr(float v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, r.ptr);
  // Make it read as a float literal so the parser keeps the kind.
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

std::string double_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

}  // namespace kiln
