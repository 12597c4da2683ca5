/* embed_c: loads a kiln plan, fills every input with a fixed ramp, runs it
 * and prints the outputs, through the C API. Usage: embed_c MODEL.plan */
#include <kiln/kiln.h>

#include <stdio.h>
#include <stdlib.h>

/* Every failing call returns a status; kiln_last_error() says why. */
#define CHECK(call)                                                                   \
  do {                                                                                \
    kiln_status s_ = (call);                                                          \
    if (s_ != KILN_OK) {                                                              \
      fprintf(stderr, "error: %s: %s\n", kiln_status_message(s_), kiln_last_error()); \
      goto done;                                                                      \
    }                                                                                 \
  } while (0)

static int64_t numel(const kiln_tensor_info* t) {
  int64_t n = 1;
  for (int i = 0; i < t->rank; ++i) n *= t->shape[i];
  return n;
}

static void print_type(const kiln_tensor_info* t) {
  printf("%s[", kiln_dtype_name(t->dtype));
  for (int i = 0; i < t->rank; ++i) printf("%s%lld", i ? "," : "", (long long)t->shape[i]);
  printf("]\n");
}

int main(int argc, char** argv) {
  kiln_engine* engine = NULL;
  kiln_context* ctx = NULL;
  void* buffers[64] = {0};
  int n_in = 0, n_out = 0, rc = 1;
  const char* info = NULL;
  if (argc != 2) {
    fprintf(stderr, "usage: %s MODEL.plan\n", argv[0]);
    return 2;
  }
  CHECK(kiln_engine_create_from_file(argv[1], KILN_BACKEND_AUTO, &engine));
  CHECK(kiln_engine_info(engine, &info));
  printf("engine: %s\n", info);
  CHECK(kiln_context_create(engine, &ctx));
  CHECK(kiln_engine_num_inputs(engine, &n_in));
  CHECK(kiln_engine_num_outputs(engine, &n_out));
  if (n_in + n_out > 64) {
    fprintf(stderr, "error: too many inputs and outputs for this example\n");
    goto done;
  }
  for (int i = 0; i < n_in; ++i) {
    kiln_tensor_info t;
    CHECK(kiln_engine_input(engine, i, &t));
    printf("input \"%s\": ", t.name);
    print_type(&t);
    buffers[i] = calloc((size_t)numel(&t), kiln_dtype_size(t.dtype));
    if (t.dtype == KILN_F32)
      for (int64_t k = 0; k < numel(&t); ++k) ((float*)buffers[i])[k] = (float)(k % 17 - 8) / 8.0f; /* the ramp */
    CHECK(kiln_context_bind_input(ctx, t.name, buffers[i], t.dtype, t.shape, t.rank, KILN_MEMORY_HOST));
  }
  for (int o = 0; o < n_out; ++o) {
    kiln_tensor_info t;
    CHECK(kiln_engine_output(engine, o, &t));
    buffers[n_in + o] = calloc((size_t)numel(&t), kiln_dtype_size(t.dtype));
    CHECK(kiln_context_bind_output(ctx, t.name, buffers[n_in + o], t.dtype, t.shape, t.rank, KILN_MEMORY_HOST));
  }

  CHECK(kiln_context_run(ctx));

  for (int o = 0; o < n_out; ++o) {
    kiln_tensor_info t;
    CHECK(kiln_engine_output(engine, o, &t));
    printf("output \"%s\": ", t.name);
    print_type(&t);
    printf("%s:", t.name);
    if (t.dtype != KILN_F32) {
      printf(" (%lld elements, not f32)\n", (long long)numel(&t));
      continue;
    }
    for (int64_t k = 0; k < numel(&t) && k < 16; ++k) printf(" %.6g", ((const float*)buffers[n_in + o])[k]);
    printf("%s\n", numel(&t) > 16 ? " ..." : "");
  }
  rc = 0;
done:
  for (int i = 0; i < 64; ++i) free(buffers[i]);
  kiln_context_destroy(ctx);
  kiln_engine_destroy(engine);
  return rc;
}
