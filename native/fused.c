// Baton's fused elementwise kernels: one call each for what tfjs composes from several
// kernels (models/fused-ops.ts registers them on the wasm and cpu backends), in place on
// the memory tfjs holds. Rows are the last axis; every loop runs in index order, so a
// result depends only on its inputs (no threads here).
//
//   layerNorm(x, g, b, y, rows, cols, eps)        y = (x − μ)·rstd·g + b per row,
//                                                 rstd = 1/√(mean((x − μ)²) + eps)
//   layerNormGradX(dy, x, g, dx, rows, cols, eps) dx = rstd·(d − mean(d) − x̂·mean(d·x̂)), d = dy·g
//   layerNormGradParams(dy, x, dg, db, rows, cols, eps)  dg = Σ_rows dy·x̂, db = Σ_rows dy
//   gelu(x, y, n)                                 y = x·σ(2c(x + 0.044715x³)), c = √(2/π)
//   geluGrad(dy, x, dx, n)                        dx = dy·(σ(u) + x·σ(u)(1 − σ(u))·2c(1 + 3·0.044715x²))
//   causalSoftmax(s, y, batch, t, scale)          y = softmax over j ≤ i of scale·s[i, j], 0 for j > i
//   causalSoftmaxGrad(dy, y, ds, batch, t, scale) ds = scale·y·(dy − Σ_j dy·y)
//   segmentSum(x, ids, out, rows, width, segments) out[ids[r]] += x[r] (rows in order; ids outside dropped)
//   gatherRows(x, ids, out, n, width, rows)       out[i] = x[ids[i]]; false (nothing written) if an id is outside [0, rows)
//
// Row statistics are accumulated in double. exp is exp_approx below (a few ulp of
// expf, in straight-line code the compiler vectorizes; glibc's expf is a call per value);
// the elementwise loops are built twice, for x86-64-v3 (AVX2, FMA) and the baseline,
// and the CPU picks at load, so results can differ in the last bits between CPUs.

#include <math.h>
#include <string.h>
#include "napi_args.h"

#define GELU_A 0.044715f

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define VECTOR_CLONES
#endif

// e^x for float x: x = n·ln2 + r with |r| ≤ ln2/2 (Cody–Waite, two-part ln2), e^r by
// Cephes's degree-6 polynomial, 2^n from the exponent bits. Finite inputs are clamped to
// [−87.3, 88.3] (e^x stays a normal float; n stays in [−126, 128], so the conversion and
// the shift are defined); within 2 ulp of expf there. NaN gives NaN, +inf gives +inf and
// −inf gives 0, as expf does: they are replaced by 0 before the arithmetic (converting a
// NaN to int is undefined behaviour in C) and chosen by a select after it, so the loops
// still vectorize.
static inline float exp_approx(float x) {
  const bool nan = x != x;
  float c = nan ? 0.0f : x;
  c = c < -87.3f ? -87.3f : c;
  c = c > 88.3f ? 88.3f : c;
  const float shifted = c * 1.44269504088896341f + 12582912.0f;  // round to nearest by the 1.5·2^23 shift
  const float n = shifted - 12582912.0f;
  float r = c - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e = p * r * r + r + 1.0f;
  const int32_t bits = ((int32_t)n + 127) << 23;
  float scale;
  memcpy(&scale, &bits, sizeof scale);
  const float v = e * scale;
  return nan ? x : x == INFINITY ? INFINITY : x == -INFINITY ? 0.0f : v;
}

static bool args(napi_env env, napi_callback_info info, size_t want, napi_value *argv, const char *usage) {
  size_t argc = want;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc != want) {
    baton_fail(env, usage);
    return false;
  }
  return true;
}

// Row mean and rstd of x[r·cols .. r·cols + cols).
static void row_stats(const float *x, int64_t cols, float eps, float *mean, float *rstd) {
  double s = 0.0;
  for (int64_t j = 0; j < cols; j++) s += x[j];
  const double mu = s / (double)cols;
  double v = 0.0;
  for (int64_t j = 0; j < cols; j++) {
    const double d = x[j] - mu;
    v += d * d;
  }
  *mean = (float)mu;
  *rstd = (float)(1.0 / sqrt(v / (double)cols + (double)eps));
}

// Reads (a, b, c, d, rows, cols, eps) with a, b, c, d Float32Arrays of the given minimum lengths in units of rows·cols (0: cols).
static bool ln_args(napi_env env, napi_callback_info info, const char *usage, float *p[4], const int full[4], int64_t *rows,
                    int64_t *cols, float *eps) {
  napi_value argv[7];
  if (!args(env, info, 7, argv, usage)) return false;
  const char *names[4] = {"first", "second", "third", "fourth"};
  size_t len[4];
  for (int i = 0; i < 4; i++)
    if (!baton_float_array(env, argv[i], names[i], &p[i], &len[i])) return false;
  double e;
  if (!baton_int_arg(env, argv[4], "rows", rows) || !baton_int_arg(env, argv[5], "cols", cols) ||
      !baton_number_arg(env, argv[6], "eps", &e))
    return false;
  uint64_t n;
  bool fits = baton_mul((uint64_t)*rows, (uint64_t)*cols, &n);
  for (int i = 0; i < 4 && fits; i++) fits = (uint64_t)len[i] >= (full[i] ? n : (uint64_t)*cols);
  if (!fits) {
    baton_fail(env, usage);
    return false;
  }
  *eps = (float)e;
  return true;
}

static napi_value layer_norm(napi_env env, napi_callback_info info) {
  float *p[4];
  const int full[4] = {1, 0, 0, 1};
  int64_t rows, cols;
  float eps;
  if (!ln_args(env, info, "baton_native.layerNorm(x, g, b, y, rows, cols, eps): arrays too short or arguments wrong", p, full,
               &rows, &cols, &eps))
    return NULL;
  const float *g = p[1], *b = p[2];
  for (int64_t r = 0; r < rows; r++) {
    const float *x = p[0] + r * cols;
    float *y = p[3] + r * cols;
    float mu, rs;
    row_stats(x, cols, eps, &mu, &rs);
    for (int64_t j = 0; j < cols; j++) y[j] = (x[j] - mu) * rs * g[j] + b[j];
  }
  return NULL;
}

static napi_value layer_norm_grad_x(napi_env env, napi_callback_info info) {
  float *p[4];
  const int full[4] = {1, 1, 0, 1};
  int64_t rows, cols;
  float eps;
  if (!ln_args(env, info, "baton_native.layerNormGradX(dy, x, g, dx, rows, cols, eps): arrays too short or arguments wrong", p,
               full, &rows, &cols, &eps))
    return NULL;
  const float *g = p[2];
  for (int64_t r = 0; r < rows; r++) {
    const float *dy = p[0] + r * cols, *x = p[1] + r * cols;
    float *dx = p[3] + r * cols;
    float mu, rs;
    row_stats(x, cols, eps, &mu, &rs);
    double sd = 0.0, sdx = 0.0;
    for (int64_t j = 0; j < cols; j++) {
      const double d = (double)dy[j] * g[j];
      sd += d;
      sdx += d * ((x[j] - mu) * rs);
    }
    const float md = (float)(sd / (double)cols), mdx = (float)(sdx / (double)cols);
    for (int64_t j = 0; j < cols; j++) dx[j] = rs * (dy[j] * g[j] - md - (x[j] - mu) * rs * mdx);
  }
  return NULL;
}

static napi_value layer_norm_grad_params(napi_env env, napi_callback_info info) {
  float *p[4];
  const int full[4] = {1, 1, 0, 0};
  int64_t rows, cols;
  float eps;
  if (!ln_args(env, info,
               "baton_native.layerNormGradParams(dy, x, dg, db, rows, cols, eps): arrays too short or arguments wrong", p,
               full, &rows, &cols, &eps))
    return NULL;
  float *dg = p[2], *db = p[3];
  memset(dg, 0, (size_t)cols * sizeof(float));
  memset(db, 0, (size_t)cols * sizeof(float));
  for (int64_t r = 0; r < rows; r++) {
    const float *dy = p[0] + r * cols, *x = p[1] + r * cols;
    float mu, rs;
    row_stats(x, cols, eps, &mu, &rs);
    for (int64_t j = 0; j < cols; j++) {
      dg[j] += dy[j] * ((x[j] - mu) * rs);
      db[j] += dy[j];
    }
  }
  return NULL;
}

// Reads (a, b, c, n) or (a, b, n) Float32Arrays of at least n values each.
static bool flat_args(napi_env env, napi_callback_info info, size_t arrays, const char *usage, float *p[3], int64_t *n) {
  napi_value argv[4];
  if (!args(env, info, arrays + 1, argv, usage)) return false;
  size_t len[3];
  for (size_t i = 0; i < arrays; i++)
    if (!baton_float_array(env, argv[i], i == 0 ? "first" : i == 1 ? "second" : "third", &p[i], &len[i])) return false;
  if (!baton_int_arg(env, argv[arrays], "n", n)) return false;
  for (size_t i = 0; i < arrays; i++)
    if ((int64_t)len[i] < *n) {
      baton_fail(env, usage);
      return false;
    }
  return true;
}

static const float GELU_2C = 1.5957691216057308f;  // 2·√(2/π)

VECTOR_CLONES static void gelu_loop(const float *restrict x, float *restrict y, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    const float v = x[i];
    const float u = (v + v * v * v * GELU_A) * GELU_2C;
    y[i] = v / (1.0f + exp_approx(-u));
  }
}

VECTOR_CLONES static void gelu_grad_loop(const float *restrict dy, const float *restrict x, float *restrict dx, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    const float v = x[i];
    const float u = (v + v * v * v * GELU_A) * GELU_2C;
    const float s = 1.0f / (1.0f + exp_approx(-u));
    dx[i] = dy[i] * (s + v * s * (1.0f - s) * GELU_2C * (1.0f + 3.0f * GELU_A * v * v));
  }
}

static napi_value gelu(napi_env env, napi_callback_info info) {
  float *p[3];
  int64_t n;
  if (!flat_args(env, info, 2, "baton_native.gelu(x, y, n): arrays shorter than n or arguments wrong", p, &n)) return NULL;
  gelu_loop(p[0], p[1], n);
  return NULL;
}

static napi_value gelu_grad(napi_env env, napi_callback_info info) {
  float *p[3];
  int64_t n;
  if (!flat_args(env, info, 3, "baton_native.geluGrad(dy, x, dx, n): arrays shorter than n or arguments wrong", p, &n))
    return NULL;
  gelu_grad_loop(p[0], p[1], p[2], n);
  return NULL;
}

// Reads (a, b, c, batch, t, scale) with a, b, c Float32Arrays of at least batch·t·t values.
static bool softmax_args(napi_env env, napi_callback_info info, size_t arrays, const char *usage, float *p[3],
                         int64_t *batch, int64_t *t, float *scale) {
  napi_value argv[6];
  if (!args(env, info, arrays + 3, argv, usage)) return false;
  size_t len[3];
  for (size_t i = 0; i < arrays; i++)
    if (!baton_float_array(env, argv[i], i == 0 ? "first" : i == 1 ? "second" : "third", &p[i], &len[i])) return false;
  double s;
  if (!baton_int_arg(env, argv[arrays], "batch", batch) || !baton_int_arg(env, argv[arrays + 1], "t", t) ||
      !baton_number_arg(env, argv[arrays + 2], "scale", &s))
    return false;
  // batch·t·t can pass 2^64 (three factors below 2^31): refused, or a wrapped product would pass the length check.
  uint64_t bt, n;
  bool fits = baton_mul((uint64_t)*batch, (uint64_t)*t, &bt) && baton_mul(bt, (uint64_t)*t, &n);
  for (size_t i = 0; i < arrays && fits; i++) fits = (uint64_t)len[i] >= n;
  if (!fits) {
    baton_fail(env, usage);
    return false;
  }
  *scale = (float)s;
  return true;
}

VECTOR_CLONES static void softmax_exp(const float *restrict s, float *restrict y, int64_t n, float scale, float mx) {
  for (int64_t j = 0; j < n; j++) y[j] = exp_approx(s[j] * scale - mx);
}

static napi_value causal_softmax(napi_env env, napi_callback_info info) {
  float *p[3];
  int64_t batch, t;
  float scale;
  if (!softmax_args(env, info, 2, "baton_native.causalSoftmax(s, y, batch, t, scale): arrays too short or arguments wrong", p,
                    &batch, &t, &scale))
    return NULL;
  for (int64_t r = 0; r < batch * t; r++) {
    const int64_t i = r % t;  // the query's position: keys 0..i are visible
    const float *s = p[0] + r * t;
    float *y = p[1] + r * t;
    float mx = s[0] * scale;
    for (int64_t j = 1; j <= i; j++)
      if (s[j] * scale > mx) mx = s[j] * scale;
    softmax_exp(s, y, i + 1, scale, mx);
    double sum = 0.0;
    for (int64_t j = 0; j <= i; j++) sum += y[j];
    const float inv = (float)(1.0 / sum);
    for (int64_t j = 0; j <= i; j++) y[j] *= inv;
    for (int64_t j = i + 1; j < t; j++) y[j] = 0.0f;
  }
  return NULL;
}

static napi_value causal_softmax_grad(napi_env env, napi_callback_info info) {
  float *p[3];
  int64_t batch, t;
  float scale;
  if (!softmax_args(env, info, 3,
                    "baton_native.causalSoftmaxGrad(dy, y, ds, batch, t, scale): arrays too short or arguments wrong", p,
                    &batch, &t, &scale))
    return NULL;
  for (int64_t r = 0; r < batch * t; r++) {
    const float *dy = p[0] + r * t, *y = p[1] + r * t;
    float *ds = p[2] + r * t;
    double dot = 0.0;
    for (int64_t j = 0; j < t; j++) dot += (double)dy[j] * y[j];
    const float d = (float)dot;
    for (int64_t j = 0; j < t; j++) ds[j] = scale * y[j] * (dy[j] - d);
  }
  return NULL;
}

static napi_value segment_sum(napi_env env, napi_callback_info info) {
  const char *usage = "baton_native.segmentSum(x, ids, out, rows, width, segments): arrays too short or arguments wrong";
  napi_value argv[6];
  if (!args(env, info, 6, argv, usage)) return NULL;
  float *x, *out;
  int32_t *ids;
  size_t lx, lids, lout;
  int64_t rows, width, segments;
  if (!baton_float_array(env, argv[0], "x", &x, &lx) || !baton_int32_array(env, argv[1], "ids", &ids, &lids) ||
      !baton_float_array(env, argv[2], "out", &out, &lout) || !baton_int_arg(env, argv[3], "rows", &rows) ||
      !baton_int_arg(env, argv[4], "width", &width) || !baton_int_arg(env, argv[5], "segments", &segments))
    return NULL;
  uint64_t nx, nout;
  if (!baton_mul((uint64_t)rows, (uint64_t)width, &nx) || !baton_mul((uint64_t)segments, (uint64_t)width, &nout) ||
      (uint64_t)lx < nx || (int64_t)lids < rows || (uint64_t)lout < nout)
    return baton_fail(env, usage);
  memset(out, 0, (size_t)segments * (size_t)width * sizeof(float));
  for (int64_t r = 0; r < rows; r++) {
    const int64_t s = ids[r];
    if (s < 0 || s >= segments) continue;
    const float *xr = x + r * width;
    float *o = out + s * width;
    for (int64_t j = 0; j < width; j++) o[j] += xr[j];
  }
  return NULL;
}

static napi_value gather_rows(napi_env env, napi_callback_info info) {
  const char *usage = "baton_native.gatherRows(x, ids, out, n, width, rows): arrays too short or arguments wrong";
  napi_value argv[6];
  if (!args(env, info, 6, argv, usage)) return NULL;
  float *x, *out;
  int32_t *ids;
  size_t lx, lids, lout;
  int64_t n, width, rows;
  if (!baton_float_array(env, argv[0], "x", &x, &lx) || !baton_int32_array(env, argv[1], "ids", &ids, &lids) ||
      !baton_float_array(env, argv[2], "out", &out, &lout) || !baton_int_arg(env, argv[3], "n", &n) ||
      !baton_int_arg(env, argv[4], "width", &width) || !baton_int_arg(env, argv[5], "rows", &rows))
    return NULL;
  uint64_t nx, nout;
  if (!baton_mul((uint64_t)rows, (uint64_t)width, &nx) || !baton_mul((uint64_t)n, (uint64_t)width, &nout) ||
      (uint64_t)lx < nx || (int64_t)lids < n || (uint64_t)lout < nout)
    return baton_fail(env, usage);
  bool ok = true;
  for (int64_t i = 0; i < n; i++)
    if (ids[i] < 0 || ids[i] >= rows) ok = false;
  if (ok)
    for (int64_t i = 0; i < n; i++) memcpy(out + i * width, x + (int64_t)ids[i] * width, (size_t)width * sizeof(float));
  napi_value result;
  CHECK(napi_get_boolean(env, ok, &result));
  return result;
}

napi_value baton_fused_init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
    {"layerNorm", NULL, layer_norm, NULL, NULL, NULL, napi_default, NULL},
    {"layerNormGradX", NULL, layer_norm_grad_x, NULL, NULL, NULL, napi_default, NULL},
    {"layerNormGradParams", NULL, layer_norm_grad_params, NULL, NULL, NULL, napi_default, NULL},
    {"gelu", NULL, gelu, NULL, NULL, NULL, napi_default, NULL},
    {"geluGrad", NULL, gelu_grad, NULL, NULL, NULL, napi_default, NULL},
    {"causalSoftmax", NULL, causal_softmax, NULL, NULL, NULL, napi_default, NULL},
    {"causalSoftmaxGrad", NULL, causal_softmax_grad, NULL, NULL, NULL, napi_default, NULL},
    {"segmentSum", NULL, segment_sum, NULL, NULL, NULL, napi_default, NULL},
    {"gatherRows", NULL, gather_rows, NULL, NULL, NULL, napi_default, NULL},
  };
  CHECK(napi_define_properties(env, exports, sizeof props / sizeof props[0], props));
  return exports;
}
