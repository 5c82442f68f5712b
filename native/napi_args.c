// Argument checks shared by Baton's native kernels (napi_args.h).

#include "napi_args.h"

#include <math.h>
#include <stdio.h>

napi_value baton_fail(napi_env env, const char *msg) {
  napi_throw_range_error(env, NULL, msg);
  return NULL;
}

static bool typed_array(napi_env env, napi_value v, const char *name, napi_typedarray_type want, const char *what,
                        void **data, size_t *len) {
  bool is_ta = false;
  char msg[160];
  napi_typedarray_type type;
  napi_value buffer;
  size_t offset = 0;
  if (napi_is_typedarray(env, v, &is_ta) != napi_ok || !is_ta ||
      napi_get_typedarray_info(env, v, &type, len, data, &buffer, &offset) != napi_ok || type != want) {
    snprintf(msg, sizeof msg, "baton_native: argument %s must be %s", name, what);
    napi_throw_type_error(env, NULL, msg);
    return false;
  }
  return true;
}

bool baton_float_array(napi_env env, napi_value v, const char *name, float **data, size_t *len) {
  void *p = NULL;
  if (!typed_array(env, v, name, napi_float32_array, "a Float32Array", &p, len)) return false;
  *data = (float *)p;
  return true;
}

bool baton_double_array(napi_env env, napi_value v, const char *name, double **data, size_t *len) {
  void *p = NULL;
  if (!typed_array(env, v, name, napi_float64_array, "a Float64Array", &p, len)) return false;
  *data = (double *)p;
  return true;
}

bool baton_int32_array(napi_env env, napi_value v, const char *name, int32_t **data, size_t *len) {
  void *p = NULL;
  if (!typed_array(env, v, name, napi_int32_array, "an Int32Array", &p, len)) return false;
  *data = (int32_t *)p;
  return true;
}

bool baton_int_arg(napi_env env, napi_value v, const char *name, int64_t *out) {
  if (napi_get_value_int64(env, v, out) != napi_ok || *out < 0 || *out > INT32_MAX) {
    char msg[160];
    snprintf(msg, sizeof msg, "baton_native: argument %s must be an integer in [0, 2^31)", name);
    napi_throw_range_error(env, NULL, msg);
    return false;
  }
  return true;
}

bool baton_number_arg(napi_env env, napi_value v, const char *name, double *out) {
  if (napi_get_value_double(env, v, out) != napi_ok || !isfinite(*out)) {
    char msg[160];
    snprintf(msg, sizeof msg, "baton_native: argument %s must be a finite number", name);
    napi_throw_range_error(env, NULL, msg);
    return false;
  }
  return true;
}
