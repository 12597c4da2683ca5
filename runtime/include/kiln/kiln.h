/* kiln runtime C API: load a compiled plan (`kiln compile MODEL.onnx -o
 * MODEL.plan`) and run it.
 *
 * - Opaque handles. Every call that can fail returns a kiln_status; on failure
 *   kiln_last_error() gives the message (per thread, valid until the next
 *   failing call on that thread). No C++ exception crosses this boundary.
 * - An engine is immutable once created and may be shared by any number of
 *   threads; each thread (or CUDA stream) uses its own context.
 * - Inputs and outputs are bound by name with their dtype and shape, which
 *   must be the model's (queried with kiln_engine_input/output).
 * - Without a usable GPU (no CUDA driver, no device, a plan without GPU
 *   kernels) the engine runs on the CPU reference path; kiln_engine_info()
 *   says which path and why.
 * See docs/embedding.md. */
#ifndef KILN_KILN_H_
#define KILN_KILN_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define KILN_API __attribute__((visibility("default")))
#else
#define KILN_API
#endif

#define KILN_VERSION_MAJOR 0
#define KILN_VERSION_MINOR 1
#define KILN_VERSION_PATCH 0

typedef enum kiln_status {
  KILN_OK = 0,
  KILN_ERROR_INVALID_ARGUMENT = 1, /* null pointer, wrong dtype/shape, unknown backend */
  KILN_ERROR_NOT_FOUND = 2,        /* no input/output of that name, index out of range */
  KILN_ERROR_INVALID_PLAN = 3,     /* the plan does not load (corrupt, truncated, wrong version) */
  KILN_ERROR_UNAVAILABLE = 4,      /* the GPU backend was requested and cannot be used here (no
                                      driver or device, a GPU arch the plan has no code for, a
                                      driver older than its code needs); the text says which */
  KILN_ERROR_RUNTIME = 5,          /* running failed (a CUDA error such as out of memory, also
                                      while creating a GPU engine or context; unbound buffers) */
  KILN_ERROR_INTERNAL = 6,         /* a bug in kiln */
  KILN_ERROR_DEVICE_LOST = 7,      /* the GPU's CUDA context is unusable after a sticky error (an
                                      illegal address, a kernel that failed): CUDA reports it to
                                      every later call in the process; restart the process */
  KILN_STATUS_MAX_ENUM = 0x7fffffff
} kiln_status;

/* Each enum ends in a *_MAX_ENUM member: it makes the enum's range every
   int32, so a value a caller got wrong (e.g. (kiln_dtype)99) is one kiln
   checks and rejects, not undefined behaviour in kiln's C++. Never pass it. */

/* Element types; the numbering is kiln's. f16/bf16 are 16-bit patterns, bool one byte. */
typedef enum kiln_dtype {
  KILN_F32 = 0,
  KILN_F16 = 1,
  KILN_BF16 = 2,
  KILN_F64 = 3,
  KILN_I8 = 4,
  KILN_I16 = 5,
  KILN_I32 = 6,
  KILN_I64 = 7,
  KILN_U8 = 8,
  KILN_U16 = 9,
  KILN_U32 = 10,
  KILN_U64 = 11,
  KILN_BOOL = 12,
  /* ONNX's low-bit types, one element per byte: float codes in the low bits,
     int4/int2 sign-extended, uint4/uint2 zero-extended. */
  KILN_F8E4M3FN = 13,
  KILN_F8E4M3FNUZ = 14,
  KILN_F8E5M2 = 15,
  KILN_F8E5M2FNUZ = 16,
  KILN_F8E8M0 = 17,
  KILN_F4E2M1 = 18,
  KILN_I4 = 19,
  KILN_U4 = 20,
  KILN_I2 = 21,
  KILN_U2 = 22,
  KILN_DTYPE_MAX_ENUM = 0x7fffffff
} kiln_dtype;

typedef enum kiln_backend {
  KILN_BACKEND_AUTO = 0, /* the GPU when usable, else the CPU */
  KILN_BACKEND_CPU = 1,
  KILN_BACKEND_GPU = 2, /* fail with KILN_ERROR_UNAVAILABLE when no usable GPU */
  KILN_BACKEND_MAX_ENUM = 0x7fffffff
} kiln_backend;

typedef enum kiln_memory {
  KILN_MEMORY_HOST = 0,
  KILN_MEMORY_DEVICE = 1, /* a CUdeviceptr (GPU engines only) */
  KILN_MEMORY_MAX_ENUM = 0x7fffffff
} kiln_memory;

typedef struct kiln_engine kiln_engine;
typedef struct kiln_context kiln_context;

/* An input's or output's description; the pointers live as long as the
 * engine. A plan compiled with shape profiles (kiln compile --min-shapes
 * ... --max-shapes) reports -1 for each dynamic dim; a context then takes
 * the shape with kiln_context_set_input_shape. */
typedef struct kiln_tensor_info {
  const char* name;
  kiln_dtype dtype;
  int rank;
  const int64_t* shape;
} kiln_tensor_info;

KILN_API const char* kiln_version(void);
KILN_API const char* kiln_status_message(kiln_status status);
KILN_API const char* kiln_last_error(void);
KILN_API const char* kiln_dtype_name(kiln_dtype dtype);
KILN_API size_t kiln_dtype_size(kiln_dtype dtype);

KILN_API kiln_status kiln_engine_create_from_file(const char* path, kiln_backend backend, kiln_engine** engine);
KILN_API kiln_status kiln_engine_create_from_memory(const void* data, size_t size, kiln_backend backend,
                                                    kiln_engine** engine);
/* The same on CUDA device `device` (an ordinal). The calls above use the
 * device of the calling thread's current CUDA context, else device 0; so
 * does device -1. A device that does not exist is KILN_ERROR_RUNTIME
 * (KILN_BACKEND_AUTO falls back to the CPU and says why). */
KILN_API kiln_status kiln_engine_create_from_file_on_device(const char* path, kiln_backend backend, int device,
                                                            kiln_engine** engine);
KILN_API kiln_status kiln_engine_create_from_memory_on_device(const void* data, size_t size, kiln_backend backend,
                                                              int device, kiln_engine** engine);
/* Contexts keep their engine alive: destroy order does not matter. */
KILN_API void kiln_engine_destroy(kiln_engine* engine);
/* KILN_BACKEND_CPU or KILN_BACKEND_GPU: where this engine runs. */
KILN_API kiln_status kiln_engine_backend(const kiln_engine* engine, kiln_backend* backend);
/* The CUDA device ordinal a GPU engine runs on (the device its buffers
 * must be on: zero-copy and in-place bindings); -1 on a CPU engine. */
KILN_API kiln_status kiln_engine_device(const kiln_engine* engine, int* device);
/* A sentence: the path taken and, for the CPU, why not the GPU. On the CPU
 * it is always "CPU reference path (REASON)": a stable form an application may
 * parse for REASON (kiln run's warning does). */
KILN_API kiln_status kiln_engine_info(const kiln_engine* engine, const char** text);
KILN_API kiln_status kiln_engine_num_inputs(const kiln_engine* engine, int* count);
KILN_API kiln_status kiln_engine_num_outputs(const kiln_engine* engine, int* count);
KILN_API kiln_status kiln_engine_input(const kiln_engine* engine, int index, kiln_tensor_info* info);
KILN_API kiln_status kiln_engine_output(const kiln_engine* engine, int index, kiln_tensor_info* info);
/* The index (for kiln_engine_input/output) of the input/output `name`;
 * KILN_ERROR_NOT_FOUND (the message lists the names) when there is none. */
KILN_API kiln_status kiln_engine_input_index(const kiln_engine* engine, const char* name, int* index);
KILN_API kiln_status kiln_engine_output_index(const kiln_engine* engine, const char* name, int* index);
/* What the plan was compiled for: its target ("sm_90") and precision ("fp32",
 * "fp16", "bf16"), as `kiln inspect PLAN` shows them; they live as long as
 * the engine. */
KILN_API kiln_status kiln_engine_target(const kiln_engine* engine, const char** target);
KILN_API kiln_status kiln_engine_precision(const kiln_engine* engine, const char** precision);

/* Shape profiles (docs/dynamic_shapes.md): a plan compiled with
 * --min-shapes/--opt-shapes/--max-shapes records, per profile, the smallest,
 * preferred and largest shape of each dynamic input; a static plan has 0
 * profiles. kiln_engine_profile_shape writes the bound's dims of input
 * `input` in profile `profile` (a static input: its own shape) into
 * dims[0..capacity) and its rank into *rank; capacity too small is
 * KILN_ERROR_INVALID_ARGUMENT with *rank set. */
typedef enum kiln_profile_bound {
  KILN_PROFILE_MIN = 0,
  KILN_PROFILE_OPT = 1,
  KILN_PROFILE_MAX = 2,
  KILN_PROFILE_BOUND_MAX_ENUM = 0x7fffffff
} kiln_profile_bound;
KILN_API kiln_status kiln_engine_num_profiles(const kiln_engine* engine, int* count);
KILN_API kiln_status kiln_engine_profile_shape(const kiln_engine* engine, int profile, const char* input,
                                               kiln_profile_bound bound, int64_t* dims, int capacity, int* rank);

KILN_API kiln_status kiln_context_create(kiln_engine* engine, kiln_context** context);
KILN_API void kiln_context_destroy(kiln_context* context);
/* The shape of a dynamic input for the context's next runs (a plan with
 * shape profiles). KILN_ERROR_INVALID_ARGUMENT, the message naming the input,
 * the dim and the range, when the shape is outside every profile or differs
 * from a dim the plan fixes; on a static plan any shape but its own.
 * Binding a dynamic input with kiln_context_bind_input sets its shape too. */
KILN_API kiln_status kiln_context_set_input_shape(kiln_context* context, const char* name, const int64_t* dims,
                                                  int rank);
/* The shape of an input, or of an output for the input shapes set (for a
 * plan with profiles, once every dynamic input's shape is set; before that
 * KILN_ERROR_INVALID_ARGUMENT naming the input not set yet). Written as by
 * kiln_engine_profile_shape. Bind outputs with these shapes. An output whose
 * size the data decides (a CPU plan with NonZero, NonMaxSuppression or TopK
 * with a run-time k; -1 in kiln_engine_output): its upper bound before a run,
 * the run's real shape after it, the values at the front of the buffer. */
KILN_API kiln_status kiln_context_input_shape(const kiln_context* context, const char* name, int64_t* dims,
                                              int capacity, int* rank);
KILN_API kiln_status kiln_context_output_shape(const kiln_context* context, const char* name, int64_t* dims,
                                               int capacity, int* rank);
/* The buffers must stay valid until the run (or the enqueued work) ends. */
KILN_API kiln_status kiln_context_bind_input(kiln_context* context, const char* name, const void* data,
                                             kiln_dtype dtype, const int64_t* shape, int rank, kiln_memory memory);
KILN_API kiln_status kiln_context_bind_output(kiln_context* context, const char* name, void* data, kiln_dtype dtype,
                                              const int64_t* shape, int rank, kiln_memory memory);
/* A KV cache bound in place (docs/dynamic_shapes.md), as ORT GenAI's
 * past_present_share_buffer: one buffer `data` is both input `input` (a
 * cache's past) and output `output` (its present: the past with the run's
 * new positions appended along one axis), for the pairs the plan appends in
 * place (a past input of symbolic length concatenated into an output; `kiln
 * inspect` lists them). `capacity` is the buffer's shape: the input's with
 * the appended axis at the most positions it holds (e.g. [1, kv_heads,
 * max_seq, head_dim]). Each run reads the past from the first positions along
 * that axis (as many as the input's shape, set with
 * kiln_context_set_input_shape) and writes only the new positions after them;
 * rows of the dims before the axis lie `capacity` positions apart. The buffer
 * stays bound across shape changes. KILN_ERROR_INVALID_ARGUMENT naming the
 * input and the output when the plan has no such pair, the dtype or a dim
 * off the axis differs, the memory is not the engine's (host memory on the
 * CPU path; device memory, 256-byte aligned, on a GPU engine, whose kernels
 * then read and append to it in place), or a GPU plan cannot run the pair in
 * place (another node reads its past or present densely); a run
 * whose present does not fit the capacity fails (KILN_ERROR_RUNTIME, as for
 * an unbound buffer) naming them. Binding either
 * of the pair again on its own ends the pairing (bind the other again too). */
KILN_API kiln_status kiln_context_bind_in_place(kiln_context* context, const char* input, const char* output,
                                                void* data, kiln_dtype dtype, const int64_t* capacity, int rank,
                                                kiln_memory memory);
/* Zero-copy (GPU engines only; KILN_ERROR_INVALID_ARGUMENT on the CPU): the
 * model's kernels read the input from, or write the output into, the caller's
 * device buffer `ptr` (a CUdeviceptr of the engine's device, holding the
 * model's dtype and shape) directly, where KILN_MEMORY_DEVICE bindings are
 * copied to and from the context's own buffers. The first run with a new set
 * of zero-copy buffers captures the CUDA Graph again with their addresses (a
 * one-time cost, like creating the context); runs with the same buffers
 * replay it. The buffer must stay valid while runs use it; at most one run is
 * in flight (kiln_context_submit refuses a second). The pointer must be
 * 256-byte aligned (as cuMemAlloc returns it): KILN_ERROR_INVALID_ARGUMENT
 * otherwise. */
KILN_API kiln_status kiln_context_bind_input_device(kiln_context* context, const char* name, uint64_t ptr);
KILN_API kiln_status kiln_context_bind_output_device(kiln_context* context, const char* name, uint64_t ptr);
/* Synchronous. */
KILN_API kiln_status kiln_context_run(kiln_context* context);
/* GPU engines: asynchronous on `stream` (a CUstream). CPU engines: `stream`
 * must be NULL and the call runs synchronously. */
KILN_API kiln_status kiln_context_enqueue(kiln_context* context, void* stream);

/* GPU times of a context's last synchronous run (kiln_context_run, or
 * enqueue on a NULL stream), from CUDA events: host inputs are staged through
 * pinned memory and uploaded on a copy stream (upload_ms), the model runs on
 * the compute stream (compute_ms: GPU-only time), outputs are downloaded on
 * the copy stream (download_ms, from the end of the compute). */
typedef struct kiln_run_timing {
  float upload_ms;
  float compute_ms;
  float download_ms;
} kiln_run_timing;
/* KILN_ERROR_UNAVAILABLE on a CPU engine or before a synchronous GPU run. */
KILN_API kiln_status kiln_context_last_timing(const kiln_context* context, kiln_run_timing* timing);

/* Pipelined runs, at most 2 in flight per context. kiln_context_submit
 * starts a run with the bound buffers: host inputs are copied at the call
 * (they may be refilled as soon as it returns). kiln_context_wait finishes
 * the oldest submitted run, writing its outputs into the output buffers that
 * were bound when it was submitted (and sets kiln_context_last_timing). On a
 * GPU engine each run in flight has its own buffers, so one run's uploads and
 * downloads (copy streams) overlap another's compute. On a CPU engine submit
 * runs synchronously and wait only counts. run/enqueue are refused while runs
 * are in flight. */
KILN_API kiln_status kiln_context_submit(kiln_context* context);
KILN_API kiln_status kiln_context_wait(kiln_context* context);

/* Per-kernel profiling. One more synchronous run with the bound buffers (the
 * outputs are written as by kiln_context_run) that times each step: on a GPU
 * engine the launch list is issued un-captured on the context's stream with a
 * CUDA event after each kernel (a replayed CUDA Graph has no per-kernel
 * times; launch gaps make the sum exceed a graph replay's compute_ms); on a
 * CPU engine each node of the reference path, by the wall clock. *entries
 * points at *count entries in run order, valid until the next profile call on
 * this context or its destruction. Refused while submitted runs are in flight. */
typedef struct kiln_profile_entry {
  const char* name; /* the kernel (GPU) or node (CPU); "copy (step N)" for a copy step */
  const char* node; /* the graph node it computes ("" for a copy of an output) */
  const char* op;   /* that node's op ("copy" for a copy step) */
  float ms;
} kiln_profile_entry;
KILN_API kiln_status kiln_context_profile(kiln_context* context, const kiln_profile_entry** entries, int* count);

/* Sizes the data decides in a GPU plan computed at the bounds (NonZero,
 * NonMaxSuppression and the like: docs/dynamic_shapes.md, "Data-dependent
 * sizes in GPU plans"): the count each such node wrote in a run, both those
 * that give an output's dims and those of intermediate results that no
 * output's shape shows. An engine of any other plan has 0 (a CPU plan's
 * data-dependent outputs say their sizes through kiln_context_output_shape).
 * kiln_context_data_dependent_size writes size `index`'s symbol and the
 * node that decides it (both valid while the engine lives), its bound (its
 * range is [0, bound]) and its value in the context's last run:
 * KILN_ERROR_NOT_FOUND for an index out of range, KILN_ERROR_UNAVAILABLE
 * before a run, after a failed run and once an input is bound again. */
typedef struct kiln_data_dependent_size {
  const char* symbol;
  const char* node;
  int64_t bound;
  int64_t value;
} kiln_data_dependent_size;
KILN_API kiln_status kiln_engine_num_data_dependent_sizes(const kiln_engine* engine, int* count);
KILN_API kiln_status kiln_context_data_dependent_size(const kiln_context* context, int index,
                                                      kiln_data_dependent_size* size);

/* Launch variants (a plan with shape profiles compiled with --opt-variants:
 * kernels specialised for a profile's opt shape, GEMM size buckets;
 * docs/dynamic_shapes.md; `kiln inspect` lists them by these indices): the
 * variants the context's last run issued in place of the shape-generic
 * launches, in launch-list order. Their number goes into *count and, unless
 * `variants` is NULL (the count only), the indices into variants[0..count);
 * capacity too small is KILN_ERROR_INVALID_ARGUMENT with *count set. 0 on a
 * CPU engine, for a plan without variants and before a run. */
KILN_API kiln_status kiln_context_launch_variants(const kiln_context* context, int* variants, int capacity, int* count);

/* Messages of the runtime: the backend an engine took and, for the AUTO
 * backend's fallback to the CPU, why (KILN_LOG_WARNING); a GPU made unusable
 * by a sticky CUDA error (KILN_LOG_ERROR). The library prints nothing itself:
 * without a callback the messages are dropped (the same facts stay in
 * kiln_engine_info and the statuses). Process-wide; NULL removes the
 * callback, which is never called after kiln_set_log_callback returns. It may
 * be called from any thread that uses kiln; it must not call
 * kiln_set_log_callback. `message` is valid during the call only. */
typedef enum kiln_log_level {
  KILN_LOG_ERROR = 0,
  KILN_LOG_WARNING = 1,
  KILN_LOG_INFO = 2,
  KILN_LOG_LEVEL_MAX_ENUM = 0x7fffffff
} kiln_log_level;
typedef void (*kiln_log_callback)(kiln_log_level level, const char* message, void* user_data);
KILN_API void kiln_set_log_callback(kiln_log_callback callback, void* user_data);

#ifdef __cplusplus
}
#endif

#endif /* KILN_KILN_H_ */
