// Baton's optimizer kernels (models/native-adamw.ts calls them), on the memory JS and
// tfjs already hold: the parameter a view of the wasm heap or the cpu backend's array,
// the gradient the float64 microbatch-ordered sum, the moments the optimizer's arrays.
//
//   adamw(p, g, m, v, out, n, w1, b2, w2, eps, step, bc2Sqrt, decay)
//       one AdamW step of n values, exactly as policies/optim/adamw.ts computes it:
//       g_i = float32(g[i]);  m ← m + w1·(g_i − m);  v ← b2·v + w2·g_i·g_i  (stored as float32)
//       Δ = float32(−decay·p − (step·m) / (√v / bc2Sqrt + eps))  with the unrounded m, v
//       out = p + Δ  (float32; out may be p)
//   addTo(sum, g, n)   sum[i] += g[i]: a float32 gradient into its float64 sum
//
// The arithmetic is the JS path's, in double, in the same order and without fused
// multiply-adds, so the results are bitwise those of the JS optimizer.

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include <math.h>
#include "napi_args.h"

enum { W1, B2, W2, EPS, STEP, BC2, DECAY, SCALARS };

static void adamw_loop(const float *p, const double *restrict g, float *restrict m, float *restrict v, float *out,
                       int64_t n, const double k[SCALARS]) {
  const double w1 = k[W1], b2 = k[B2], w2 = k[W2], eps = k[EPS], step = k[STEP], bc2 = k[BC2], decay = k[DECAY];
  for (int64_t i = 0; i < n; i++) {
    const double gi = (double)(float)g[i];
    const double mi = (double)m[i] + w1 * (gi - (double)m[i]);
    const double vi = b2 * (double)v[i] + w2 * gi * gi;
    m[i] = (float)mi;
    v[i] = (float)vi;
    const float d = (float)(-decay * (double)p[i] - (step * mi) / (sqrt(vi) / bc2 + eps));
    out[i] = p[i] + d;
  }
}

static napi_value adamw(napi_env env, napi_callback_info info) {
  const char *usage =
      "baton_native.adamw(p, g, m, v, out, n, w1, b2, w2, eps, step, bc2Sqrt, decay): arrays shorter than n or arguments wrong";
  size_t argc = 6 + SCALARS;
  napi_value argv[6 + SCALARS];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc != 6 + SCALARS) return baton_fail(env, usage);
  float *p, *m, *v, *out;
  double *g;
  size_t lp, lg, lm, lv, lout;
  int64_t n;
  if (!baton_float_array(env, argv[0], "p", &p, &lp) || !baton_double_array(env, argv[1], "g", &g, &lg) ||
      !baton_float_array(env, argv[2], "m", &m, &lm) || !baton_float_array(env, argv[3], "v", &v, &lv) ||
      !baton_float_array(env, argv[4], "out", &out, &lout) || !baton_int_arg(env, argv[5], "n", &n))
    return NULL;
  double k[SCALARS];
  const char *names[SCALARS] = {"w1", "b2", "w2", "eps", "step", "bc2Sqrt", "decay"};
  for (int i = 0; i < SCALARS; i++)
    if (!baton_number_arg(env, argv[6 + i], names[i], &k[i])) return NULL;
  const size_t want = (size_t)n;
  if (lp < want || lg < want || lm < want || lv < want || lout < want) return baton_fail(env, usage);
  adamw_loop(p, g, m, v, out, n, k);
  return NULL;
}

static napi_value add_to(napi_env env, napi_callback_info info) {
  const char *usage = "baton_native.addTo(sum, g, n): arrays shorter than n or arguments wrong";
  size_t argc = 3;
  napi_value argv[3];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc != 3) return baton_fail(env, usage);
  double *sum;
  float *g;
  size_t ls, lg;
  int64_t n;
  if (!baton_double_array(env, argv[0], "sum", &sum, &ls) || !baton_float_array(env, argv[1], "g", &g, &lg) ||
      !baton_int_arg(env, argv[2], "n", &n))
    return NULL;
  if (ls < (size_t)n || lg < (size_t)n) return baton_fail(env, usage);
  for (int64_t i = 0; i < n; i++) sum[i] += (double)g[i];
  return NULL;
}

napi_value baton_optim_init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
    {"adamw", NULL, adamw, NULL, NULL, NULL, napi_default, NULL},
    {"addTo", NULL, add_to, NULL, NULL, NULL, napi_default, NULL},
  };
  CHECK(napi_define_properties(env, exports, sizeof props / sizeof props[0], props));
  return exports;
}
