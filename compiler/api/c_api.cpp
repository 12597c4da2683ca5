// The builder API (include/kiln/kiln_compiler.h) over compile_model: C types
// in, exceptions turned into statuses and a per-thread message out.
#include "kiln/kiln_compiler.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <memory>
#include <map>
#include <exception>
#include <new>
#include <string>

#include "compiler/compile_model.h"
#include "compiler/targets.h"
#include "ir/error.h"

struct kiln_compile_options {
  // Messages name this API's functions, not kiln compile's flags.
  kiln_compile_options() { o.shape_option_names = kiln::ShapeOptionNames::c_api(); }
  kiln::CompileModelOptions o;
  kiln_compile_log_fn log = nullptr;
  void* user_data = nullptr;
};

namespace {

thread_local std::string g_last_error;

kiln_compile_status fail_with(kiln_compile_status s, const std::string& message) {
  g_last_error = message;
  return s;
}

// Runs `f`, mapping kiln's exceptions to statuses as the CLI maps them to exit codes.
template <typename F>
kiln_compile_status guarded(F&& f) {
  try {
    f();
    g_last_error.clear();
    return KILN_COMPILE_OK;
  } catch (const kiln::Unsupported& e) {
    return fail_with(KILN_COMPILE_UNSUPPORTED, e.what());
  } catch (const kiln::Error& e) {
    return fail_with(KILN_COMPILE_MODEL_ERROR, e.what());
  } catch (const std::bad_alloc&) {
    return fail_with(KILN_COMPILE_OUT_OF_MEMORY, "out of host memory");
  } catch (const std::exception& e) {
    return fail_with(KILN_COMPILE_INTERNAL_ERROR, std::string("internal error: ") + e.what());
  }
}

// Sets `field` to `value` once `check` (compiler/targets.h) accepts it.
kiln_compile_status set_checked(const char* value, void (*check)(const std::string&), std::string& field) {
  try {
    check(value);
  } catch (const kiln::Error& e) {
    return fail_with(KILN_COMPILE_INVALID_ARGUMENT, e.what());
  }
  field = value;
  return KILN_COMPILE_OK;
}

kiln_compile_status compile(const kiln::ModelSource& source, const kiln_compile_options* options, uint8_t** plan,
                            size_t* size) {
  if (!plan || !size) return fail_with(KILN_COMPILE_INVALID_ARGUMENT, "plan and size must not be null");
  *plan = nullptr;
  *size = 0;
  kiln_compile_options defaults;
  const kiln_compile_options& opts = options ? *options : defaults;
  kiln::CompileModelOptions o = opts.o;
  o.write_plan = true;
  if (opts.log) {
    o.log = [&opts](const std::string& text) { opts.log(opts.user_data, text.c_str()); };
    // Import and passes report per node and per pass: the log gets their
    // tenths and their end (BERT-base has 1,000+ nodes), kernels every one.
    auto tenths = std::make_shared<std::pair<std::mutex, std::map<std::string, int>>>();
    o.progress = [&opts, tenths](const std::string& step, int done, int total) {
      if (step != "kernels compiled") {
        std::lock_guard<std::mutex> lock(tenths->first);
        const int tenth = total > 0 ? done * 10 / total : 10;
        auto it = tenths->second.try_emplace(step, -1).first;
        if (tenth == it->second && done < total) return;
        it->second = tenth;
      }
      std::string line = step + " " + std::to_string(done) + "/" + std::to_string(total) + "\n";
      opts.log(opts.user_data, line.c_str());
    };
  }
  return guarded([&] {
    kiln::CompileResult r = kiln::compile_model(source, o);
    uint8_t* out = static_cast<uint8_t*>(std::malloc(r.plan.size()));
    if (!out) throw std::bad_alloc();
    std::memcpy(out, r.plan.data(), r.plan.size());
    *plan = out;
    *size = r.plan.size();
  });
}

}  // namespace

extern "C" {

kiln_compile_options* kiln_compile_options_create(void) { return new (std::nothrow) kiln_compile_options(); }

void kiln_compile_options_destroy(kiln_compile_options* options) { delete options; }

kiln_compile_status kiln_compile_options_set_target(kiln_compile_options* options, const char* target) {
  if (!options || !target) return fail_with(KILN_COMPILE_INVALID_ARGUMENT, "target: null argument");
  return set_checked(target, kiln::check_target, options->o.build.pass.target);
}

kiln_compile_status kiln_compile_options_set_precision(kiln_compile_options* options, const char* precision) {
  if (!options || !precision) return fail_with(KILN_COMPILE_INVALID_ARGUMENT, "precision: null argument");
  return set_checked(precision, kiln::check_precision, options->o.build.pass.precision);
}

kiln_compile_status kiln_compile_options_set_input_shape(kiln_compile_options* options, const char* name,
                                                         const int64_t* dims, size_t rank) {
  if (!options || !name || (rank && !dims))
    return fail_with(KILN_COMPILE_INVALID_ARGUMENT, "input shape: null argument");
  kiln::Shape s(dims, dims + rank);
  for (int64_t d : s)
    if (d < 0)
      return fail_with(KILN_COMPILE_INVALID_ARGUMENT,
                       std::string("input shape of \"") + name + "\": dims must not be negative");
  options->o.input_shapes[name] = s;
  return KILN_COMPILE_OK;
}

kiln_compile_status kiln_compile_options_set_input_range(kiln_compile_options* options, const char* name,
                                                         const int64_t* min, const int64_t* opt, const int64_t* max,
                                                         size_t rank) {
  if (!options || !name || (rank && (!min || !max)))
    return fail_with(KILN_COMPILE_INVALID_ARGUMENT, "input range: null argument");
  const std::string what = std::string("input range of \"") + name + "\"";
  for (size_t i = 0; i < rank; ++i) {
    int64_t o = opt ? opt[i] : max[i];
    if (min[i] < 0 || min[i] > o || o > max[i])
      return fail_with(KILN_COMPILE_INVALID_ARGUMENT,
                       what + ": dim " + std::to_string(i) + " needs 0 <= min <= opt <= max, got min " +
                           std::to_string(min[i]) + ", opt " + std::to_string(o) + ", max " + std::to_string(max[i]));
  }
  options->o.min_shapes[name] = kiln::Shape(min, min + rank);
  options->o.max_shapes[name] = kiln::Shape(max, max + rank);
  if (opt) options->o.opt_shapes[name] = kiln::Shape(opt, opt + rank);
  return KILN_COMPILE_OK;
}

kiln_compile_status kiln_compile_options_set_api_names(kiln_compile_options* options, const char* api) {
  if (!options || !api) return fail_with(KILN_COMPILE_INVALID_ARGUMENT, "api names: null argument");
  const std::string a = api;
  if (a == "c") {
    options->o.shape_option_names = kiln::ShapeOptionNames::c_api();
  } else if (a == "c++") {
    options->o.shape_option_names = kiln::ShapeOptionNames::cpp_api();
  } else {
    return fail_with(KILN_COMPILE_INVALID_ARGUMENT, "api names: \"" + a + "\" is neither \"c\" nor \"c++\"");
  }
  return KILN_COMPILE_OK;
}

kiln_compile_status kiln_compile_options_set_cache_dir(kiln_compile_options* options, const char* dir) {
  if (!options) return fail_with(KILN_COMPILE_INVALID_ARGUMENT, "cache dir: null options");
  options->o.build.cache_dir = dir ? dir : "";
  return KILN_COMPILE_OK;
}

kiln_compile_status kiln_compile_options_set_log_callback(kiln_compile_options* options, kiln_compile_log_fn fn,
                                                          void* user_data) {
  if (!options) return fail_with(KILN_COMPILE_INVALID_ARGUMENT, "log callback: null options");
  options->log = fn;
  options->user_data = user_data;
  return KILN_COMPILE_OK;
}

kiln_compile_status kiln_compile_file(const char* path, const kiln_compile_options* options, uint8_t** plan,
                                      size_t* size) {
  if (!path) return fail_with(KILN_COMPILE_INVALID_ARGUMENT, "path must not be null");
  return compile(kiln::ModelSource::file(path), options, plan, size);
}

kiln_compile_status kiln_compile_memory(const void* model, size_t model_size, const char* name,
                                        const kiln_compile_options* options, uint8_t** plan, size_t* size) {
  if (!model && model_size) return fail_with(KILN_COMPILE_INVALID_ARGUMENT, "model must not be null");
  std::string bytes(static_cast<const char*>(model), model_size);
  return compile(kiln::ModelSource::memory(std::move(bytes), name ? name : "<memory>", "."), options, plan, size);
}

void kiln_plan_bytes_free(uint8_t* plan) { std::free(plan); }

const char* kiln_compile_last_error(void) { return g_last_error.c_str(); }

}  // extern "C"
