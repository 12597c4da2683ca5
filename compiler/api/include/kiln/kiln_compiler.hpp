// C++ wrapper of the builder API (kiln/kiln_compiler.h): options as a value
// with chained setters, a failed call throws kiln::compile_error carrying the
// status and kiln's message (file and node), plans come back as a vector.
//
//   std::vector<uint8_t> plan = kiln::Compiler().target("sm_90").precision("fp16").compile_file("m.onnx");
//   kiln::Engine engine = kiln::Engine::from_memory(plan.data(), plan.size());   // kiln/kiln.hpp
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "kiln/kiln_compiler.h"

namespace kiln {

class compile_error : public std::runtime_error {
 public:
  compile_error(kiln_compile_status status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  kiln_compile_status status() const { return status_; }

 private:
  kiln_compile_status status_;
};

class Compiler {
 public:
  Compiler() : options_(kiln_compile_options_create(), kiln_compile_options_destroy) {
    if (!options_) throw compile_error(KILN_COMPILE_OUT_OF_MEMORY, "kiln_compile_options_create failed");
    check(kiln_compile_options_set_api_names(options_.get(), "c++"));  // messages name input_shape / input_range
  }

  Compiler& target(const std::string& t) { return check(kiln_compile_options_set_target(options_.get(), t.c_str())); }
  Compiler& precision(const std::string& p) {
    return check(kiln_compile_options_set_precision(options_.get(), p.c_str()));
  }
  Compiler& input_shape(const std::string& name, const std::vector<int64_t>& dims) {
    return check(kiln_compile_options_set_input_shape(options_.get(), name.c_str(), dims.data(), dims.size()));
  }
  // A range of shapes for input `name` (one shape profile; kiln_compile_options_set_input_range).
  Compiler& input_range(const std::string& name, const std::vector<int64_t>& min, const std::vector<int64_t>& max) {
    if (min.size() != max.size())
      throw compile_error(KILN_COMPILE_INVALID_ARGUMENT, "input range of \"" + name + "\": min and max differ in rank");
    return check(kiln_compile_options_set_input_range(options_.get(), name.c_str(), min.data(), nullptr, max.data(),
                                                      min.size()));
  }
  Compiler& cache_dir(const std::string& dir) {
    return check(kiln_compile_options_set_cache_dir(options_.get(), dir.c_str()));
  }
  // Messages (whole lines) go to `f`; the Compiler must outlive its compiles.
  Compiler& on_log(std::function<void(const std::string&)> f) {
    log_ = std::make_shared<std::function<void(const std::string&)>>(std::move(f));
    return check(kiln_compile_options_set_log_callback(
        options_.get(),
        [](void* user, const char* msg) { (*static_cast<std::function<void(const std::string&)>*>(user))(msg); },
        log_.get()));
  }

  std::vector<uint8_t> compile_file(const std::string& path) const {
    uint8_t* plan = nullptr;
    size_t size = 0;
    check_status(kiln_compile_file(path.c_str(), options_.get(), &plan, &size));
    return take(plan, size);
  }
  std::vector<uint8_t> compile_memory(const void* model, size_t size, const std::string& name) const {
    uint8_t* plan = nullptr;
    size_t plan_size = 0;
    check_status(kiln_compile_memory(model, size, name.c_str(), options_.get(), &plan, &plan_size));
    return take(plan, plan_size);
  }

 private:
  static void check_status(kiln_compile_status s) {
    if (s != KILN_COMPILE_OK) throw compile_error(s, kiln_compile_last_error());
  }
  Compiler& check(kiln_compile_status s) {
    check_status(s);
    return *this;
  }
  static std::vector<uint8_t> take(uint8_t* plan, size_t size) {
    std::vector<uint8_t> v(plan, plan + size);
    kiln_plan_bytes_free(plan);
    return v;
  }

  std::unique_ptr<kiln_compile_options, void (*)(kiln_compile_options*)> options_;
  std::shared_ptr<std::function<void(const std::string&)>> log_;
};

}  // namespace kiln
