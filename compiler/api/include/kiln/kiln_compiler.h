/* kiln builder API: compile an ONNX model into a plan from an application,
 * without the kiln CLI (as TensorRT's IBuilder or ONNX Runtime's session
 * creation do). The plan bytes are what `kiln compile -o` writes for the same
 * options (one pipeline: compiler/compile_model.h); load them with the
 * runtime's kiln_engine_create_from_memory (kiln/kiln.h).
 *
 *   kiln_compile_options* o = kiln_compile_options_create();
 *   kiln_compile_options_set_target(o, "sm_90");
 *   uint8_t* plan; size_t size;
 *   if (kiln_compile_file("model.onnx", o, &plan, &size) != KILN_COMPILE_OK)
 *     fprintf(stderr, "%s\n", kiln_compile_last_error());   names the file and node
 *   ... kiln_engine_create_from_memory(plan, size, KILN_BACKEND_AUTO, &engine) ...
 *   kiln_plan_bytes_free(plan);
 *   kiln_compile_options_destroy(o);
 *
 * Thread safety: separate calls may run on separate threads; the last error
 * is per thread. Library: libkiln_compiler.so (CMake: kiln::compiler;
 * pkg-config: kiln-compiler). See docs/embedding.md. */
#ifndef KILN_KILN_COMPILER_H_
#define KILN_KILN_COMPILER_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define KILN_COMPILER_API __attribute__((visibility("default")))
#else
#define KILN_COMPILER_API
#endif

typedef enum kiln_compile_status {
  KILN_COMPILE_OK = 0,
  KILN_COMPILE_INVALID_ARGUMENT = 1, /* a null pointer, an unknown target or precision, a bad shape */
  KILN_COMPILE_MODEL_ERROR = 2,      /* the model cannot be read or is invalid (file, node named) */
  KILN_COMPILE_UNSUPPORTED = 3,      /* valid ONNX kiln cannot compile yet (every such node listed) */
  KILN_COMPILE_OUT_OF_MEMORY = 4,
  KILN_COMPILE_INTERNAL_ERROR = 5 /* a kiln bug: please report it with the message */
} kiln_compile_status;

typedef struct kiln_compile_options kiln_compile_options;

/* Messages a person reads (the kernels line, the summary, progress of long
 * steps), one or more whole lines each, ending in '\n'. Called on the
 * compiling thread or, for progress, on NVRTC's worker threads. */
typedef void (*kiln_compile_log_fn)(void* user_data, const char* message);

/* Defaults: target "auto" (as `kiln compile`: this machine's GPU arch when a
 * CUDA driver with a device is present, else "portable"; never a CPU-only
 * plan unless "cpu" is set), precision "fp32", default passes, the default
 * kernel cache ($KILN_CACHE_DIR, $XDG_CACHE_HOME/kiln, ~/.cache/kiln), no log. */
KILN_COMPILER_API kiln_compile_options* kiln_compile_options_create(void);
KILN_COMPILER_API void kiln_compile_options_destroy(kiln_compile_options* options);
/* "auto", "portable", "cpu", "sm_80", "sm_86", "sm_89" or "sm_90" (as
 * `kiln compile --target`; compiler/targets.h). */
KILN_COMPILER_API kiln_compile_status kiln_compile_options_set_target(kiln_compile_options* options,
                                                                      const char* target);
/* "fp32", "tf32", "fp16" or "bf16" (as --precision). */
KILN_COMPILER_API kiln_compile_status kiln_compile_options_set_precision(kiln_compile_options* options,
                                                                         const char* precision);
/* Fixes the shape of input `name` (as --shapes name:d0xd1x...). */
KILN_COMPILER_API kiln_compile_status kiln_compile_options_set_input_shape(kiln_compile_options* options,
                                                                           const char* name, const int64_t* dims,
                                                                           size_t rank);
/* Gives input `name` a range of shapes (as --min-shapes/--opt-shapes/
 * --max-shapes name:d0xd1x...; one shape profile, docs/dynamic_shapes.md):
 * the plan runs at any shape within [min, max] (kiln_context_set_input_shape).
 * `opt` may be NULL (the largest). For a GPU target every node with symbolic
 * sizes needs a shape-generic kernel (pointwise, softmax, layer norm, 2-D f32
 * gemm with a symbolic M for now); the compile names any other node. */
KILN_COMPILER_API kiln_compile_status kiln_compile_options_set_input_range(kiln_compile_options* options,
                                                                           const char* name, const int64_t* min,
                                                                           const int64_t* opt, const int64_t* max,
                                                                           size_t rank);
/* Which API's names messages use for the shape options: "c" (the default:
 * kiln_compile_options_set_input_shape / _set_input_range) or "c++"
 * (kiln::Compiler::input_shape / input_range, which kiln_compiler.hpp sets),
 * so a caller reads the names of the calls it made, not kiln compile's
 * flags. */
KILN_COMPILER_API kiln_compile_status kiln_compile_options_set_api_names(kiln_compile_options* options,
                                                                         const char* api);
/* Kernel cache folder (as --cache-dir); NULL or "": the default. */
KILN_COMPILER_API kiln_compile_status kiln_compile_options_set_cache_dir(kiln_compile_options* options,
                                                                         const char* dir);
/* Where messages go; NULL: nowhere. */
KILN_COMPILER_API kiln_compile_status kiln_compile_options_set_log_callback(kiln_compile_options* options,
                                                                            kiln_compile_log_fn fn, void* user_data);

/* Compiles the ONNX file `path` (options may be NULL: the defaults). On
 * success *plan (free with kiln_plan_bytes_free) holds *size bytes. */
KILN_COMPILER_API kiln_compile_status kiln_compile_file(const char* path, const kiln_compile_options* options,
                                                        uint8_t** plan, size_t* size);
/* Compiles a model held in memory; `name` is what messages call it, external
 * data files are looked up in the current folder. */
KILN_COMPILER_API kiln_compile_status kiln_compile_memory(const void* model, size_t model_size, const char* name,
                                                          const kiln_compile_options* options, uint8_t** plan,
                                                          size_t* size);
KILN_COMPILER_API void kiln_plan_bytes_free(uint8_t* plan);

/* The message of this thread's last failed call ("" if none): names the
 * model file, and the node when one is at fault. */
KILN_COMPILER_API const char* kiln_compile_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* KILN_KILN_COMPILER_H_ */
