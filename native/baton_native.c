// Baton's native kernels: single-precision matrix products through the system's CBLAS
// (OpenBLAS on Debian), on the memory tfjs already holds (the wasm heap, or the cpu
// backend's typed arrays). Node-API in C, so it builds against the Node-API headers
// alone and loads in any Node that speaks Node-API 8.
//
//   sgemm(a, b, c, batch, aBatched, bBatched, m, n, k, transA, transB, bias, relu)
//     c[i] = act(op(a[i]) · op(b[i]) + bias) for i < batch, row-major, in place in c;
//     a[i] is a itself when !aBatched (broadcast), likewise b; bias is null, or n
//     values added to every row; act is max(0, x) when relu, else the identity.
//   colSum(x, out, rows, cols)
//     out[j] = Σ_i x[i·cols + j], rows in order (a bias gradient: the sum over leading axes).
//   setThreads(n), threads(), config(): the BLAS library's thread count and build.
//   The fused elementwise kernels (LayerNorm, GELU, causal softmax, segment sums) are in fused.c.
//
// Every length is checked against the typed arrays before a byte is written: a wrong
// call throws a RangeError naming the argument, never writes past an array.

#include <cblas.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "napi_args.h"

#define fail baton_fail
#define float_array baton_float_array
#define int_arg baton_int_arg

napi_value baton_fused_init(napi_env env, napi_value exports);
napi_value baton_optim_init(napi_env env, napi_value exports);

static bool bool_arg(napi_env env, napi_value v, bool *out) {
  return napi_get_value_bool(env, v, out) == napi_ok;
}

static napi_value sgemm(napi_env env, napi_callback_info info) {
  size_t argc = 13;
  napi_value argv[13];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc != 13) return fail(env, "baton_native.sgemm: expected 13 arguments (a, b, c, batch, aBatched, bBatched, m, n, k, transA, transB, bias, relu)");
  float *a, *b, *c, *bias = NULL;
  size_t la, lb, lc, lbias = 0;
  if (!float_array(env, argv[0], "a", &a, &la) || !float_array(env, argv[1], "b", &b, &lb) || !float_array(env, argv[2], "c", &c, &lc)) return NULL;
  int64_t batch, m, n, k;
  bool aBatched, bBatched, transA, transB, relu;
  if (!int_arg(env, argv[3], "batch", &batch) || !int_arg(env, argv[6], "m", &m) || !int_arg(env, argv[7], "n", &n) || !int_arg(env, argv[8], "k", &k)) return NULL;
  if (!bool_arg(env, argv[4], &aBatched) || !bool_arg(env, argv[5], &bBatched) || !bool_arg(env, argv[9], &transA) ||
      !bool_arg(env, argv[10], &transB) || !bool_arg(env, argv[12], &relu))
    return fail(env, "baton_native.sgemm: aBatched, bBatched, transA, transB and relu must be booleans");
  napi_valuetype bt;
  CHECK(napi_typeof(env, argv[11], &bt));
  if (bt != napi_null && bt != napi_undefined) {
    if (!float_array(env, argv[11], "bias", &bias, &lbias)) return NULL;
    if ((int64_t)lbias != n) return fail(env, "baton_native.sgemm: bias must hold n values");
  }
  // Each product is checked: a batch of products of two factors below 2^31 can pass 2^64, and a wrapped total would pass the length check.
  uint64_t sa, sb, sc, na, nb, nc;
  if (!baton_mul((uint64_t)m, (uint64_t)k, &sa) || !baton_mul((uint64_t)k, (uint64_t)n, &sb) || !baton_mul((uint64_t)m, (uint64_t)n, &sc) ||
      !baton_mul(sa, aBatched ? (uint64_t)batch : 1, &na) || !baton_mul(sb, bBatched ? (uint64_t)batch : 1, &nb) || !baton_mul(sc, (uint64_t)batch, &nc))
    return fail(env, "baton_native.sgemm: the shape's sizes overflow 64 bits");
  if ((uint64_t)la < na) return fail(env, "baton_native.sgemm: a is shorter than its shape");
  if ((uint64_t)lb < nb) return fail(env, "baton_native.sgemm: b is shorter than its shape");
  if ((uint64_t)lc < nc) return fail(env, "baton_native.sgemm: c is shorter than its shape");
  const int lda = transA ? (int)m : (int)k;
  const int ldb = transB ? (int)k : (int)n;
  for (int64_t i = 0; i < batch; i++) {
    const float *ai = a + (aBatched ? i * sa : 0);
    const float *bi = b + (bBatched ? i * sb : 0);
    float *ci = c + i * sc;
    float beta = 0.0f;
    if (bias) {
      for (int64_t r = 0; r < m; r++) memcpy(ci + r * n, bias, (size_t)n * sizeof(float));
      beta = 1.0f;
    }
    if (k == 0) {
      if (!bias) memset(ci, 0, (size_t)sc * sizeof(float));
    } else if (m > 0 && n > 0) {
      cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k, 1.0f, ai, lda, bi, ldb, beta, ci, (int)n);
    }
    if (relu)
      for (uint64_t j = 0; j < sc; j++)
        if (ci[j] < 0.0f) ci[j] = 0.0f;
  }
  return NULL;
}

static napi_value col_sum(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc != 4) return fail(env, "baton_native.colSum: expected 4 arguments (x, out, rows, cols)");
  float *x, *out;
  size_t lx, lout;
  int64_t rows, cols;
  if (!float_array(env, argv[0], "x", &x, &lx) || !float_array(env, argv[1], "out", &out, &lout)) return NULL;
  if (!int_arg(env, argv[2], "rows", &rows) || !int_arg(env, argv[3], "cols", &cols)) return NULL;
  uint64_t nx;
  if (!baton_mul((uint64_t)rows, (uint64_t)cols, &nx) || (uint64_t)lx < nx) return fail(env, "baton_native.colSum: x is shorter than rows x cols");
  if ((int64_t)lout < cols) return fail(env, "baton_native.colSum: out is shorter than cols");
  memset(out, 0, (size_t)cols * sizeof(float));
  for (int64_t i = 0; i < rows; i++) {
    const float *xi = x + i * cols;
    for (int64_t j = 0; j < cols; j++) out[j] += xi[j];
  }
  return NULL;
}

static napi_value set_threads(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  int64_t n = 0;
  if (argc != 1 || napi_get_value_int64(env, argv[0], &n) != napi_ok || n < 1 || n > 1024) return fail(env, "baton_native.setThreads: n must be an integer in [1, 1024]");
  openblas_set_num_threads((int)n);
  return NULL;
}

static napi_value threads(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value out;
  CHECK(napi_create_int32(env, openblas_get_num_threads(), &out));
  return out;
}

static napi_value config(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value out;
  const char *c = openblas_get_config();
  CHECK(napi_create_string_utf8(env, c ? c : "unknown", NAPI_AUTO_LENGTH, &out));
  return out;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
    {"sgemm", NULL, sgemm, NULL, NULL, NULL, napi_default, NULL},
    {"colSum", NULL, col_sum, NULL, NULL, NULL, napi_default, NULL},
    {"setThreads", NULL, set_threads, NULL, NULL, NULL, napi_default, NULL},
    {"threads", NULL, threads, NULL, NULL, NULL, napi_default, NULL},
    {"config", NULL, config, NULL, NULL, NULL, napi_default, NULL},
  };
  CHECK(napi_define_properties(env, exports, sizeof props / sizeof props[0], props));
  return baton_fused_init(env, exports) ? baton_optim_init(env, exports) : NULL;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
