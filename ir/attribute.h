// Node attributes: a small tagged union, kept in a sorted map so printing is
// deterministic. Floats are f32 like ONNX's and print in shortest round-trip form.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "ir/tensor.h"

namespace kiln {

using Attribute = std::variant<int64_t, float, std::string, std::vector<int64_t>, std::vector<float>,
                               std::vector<std::string>, Tensor>;

enum class AttrKind { Int, Float, String, Ints, Floats, Strings, Tensor };
inline AttrKind attr_kind(const Attribute& a) { return static_cast<AttrKind>(a.index()); }
std::string_view attr_kind_name(AttrKind k);

class AttrMap {
 public:
  bool has(const std::string& name) const { return map_.count(name) != 0; }
  const Attribute* find(const std::string& name) const;
  void set(const std::string& name, Attribute a) { map_[name] = std::move(a); }
  void erase(const std::string& name) { map_.erase(name); }
  bool empty() const { return map_.empty(); }
  auto begin() const { return map_.begin(); }
  auto end() const { return map_.end(); }
  bool operator==(const AttrMap& o) const;

  // Typed getters. A missing attribute gives the default; a present attribute
  // of the wrong kind throws kiln::Error naming it.
  int64_t get_int(const std::string& name, int64_t dflt) const;
  int64_t require_int(const std::string& name) const;
  float get_float(const std::string& name, float dflt) const;
  std::string get_string(const std::string& name, const std::string& dflt) const;
  std::vector<int64_t> get_ints(const std::string& name, const std::vector<int64_t>& dflt = {}) const;
  std::vector<float> get_floats(const std::string& name, const std::vector<float>& dflt = {}) const;
  std::vector<std::string> get_strings(const std::string& name) const;
  const Tensor* get_tensor(const std::string& name) const;

 private:
  std::map<std::string, Attribute> map_;
};

// Shortest text that parses back to exactly the same float.
std::string float_repr(float v);
std::string double_repr(double v);

}  // namespace kiln
