// Argument checks shared by Baton's native kernels (baton_native.c, fused.c): every
// array is a typed array of the expected type and every length is checked before a
// byte is written, so a wrong call throws a JS error naming the argument.

#ifndef BATON_NAPI_ARGS_H
#define BATON_NAPI_ARGS_H

#include <node_api.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CHECK(call)                                                              \
  do {                                                                           \
    if ((call) != napi_ok) {                                                     \
      napi_throw_error(env, NULL, "baton_native: Node-API call failed: " #call); \
      return NULL;                                                               \
    }                                                                            \
  } while (0)

napi_value baton_fail(napi_env env, const char *msg);
/** The float32 data of v and its length in floats; false (with a JS TypeError) if v is not a Float32Array. */
bool baton_float_array(napi_env env, napi_value v, const char *name, float **data, size_t *len);
/** The float64 data of v and its length in doubles; false (with a JS TypeError) if v is not a Float64Array. */
bool baton_double_array(napi_env env, napi_value v, const char *name, double **data, size_t *len);
/** The int32 data of v and its length; false (with a JS TypeError) if v is not an Int32Array. */
bool baton_int32_array(napi_env env, napi_value v, const char *name, int32_t **data, size_t *len);
/** An integer in [0, 2^31); false with a JS RangeError otherwise. */
bool baton_int_arg(napi_env env, napi_value v, const char *name, int64_t *out);
/** A finite number; false with a JS RangeError otherwise. */
bool baton_number_arg(napi_env env, napi_value v, const char *name, double *out);

/** *out = a·b; false if the product does not fit in 64 bits (a length check on a wrapped product would pass). */
static inline bool baton_mul(uint64_t a, uint64_t b, uint64_t *out) { return !__builtin_mul_overflow(a, b, out); }

#endif
