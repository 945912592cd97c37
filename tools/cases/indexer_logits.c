/* Indexer logits, ragged and paged: the case descriptions (cases.h). */
#include "cases.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

/* Finite e4m3 of moderate size, random sign; ue8m0 scales near 2^0. */
static uint8_t e4m3(uint64_t *s) {
  return (uint8_t)((case_rnd(s, 2) ? 0x80 : 0) | (0x20 + case_rnd(s, 0x30)));
}
static uint8_t ue8m0(uint64_t *s) { return (uint8_t)(110 + case_rnd(s, 30)); }


int case_logits_cmp(const void *got, int bf16, const double *want, int64_t rows, int64_t cols,
                    const char *what, char *msg, size_t msz) {
  double maxref = 0;
  for (int64_t i = 0; i < rows * cols; i++)
    if (isfinite(want[i]) && fabs(want[i]) > maxref) maxref = fabs(want[i]);
  const double lim = CASE_LOGITS_TOL * (maxref > 0 ? maxref : 1);
  for (int64_t i = 0; i < rows * cols; i++) {
    const double g = bf16 ? case_bf16_f(((const uint16_t *)got)[i]) : ((const float *)got)[i];
    const double v = want[i];
    int bad;
    if (isnan(v))
      bad = !isnan(g);
    else if (isinf(v))
      bad = !(isinf(g) && (g < 0) == (v < 0));
    else if (!isfinite(g))
      bad = 1;
    else
      bad = fabs(g - v) - (bf16 ? fabs(v) * 0x1p-8 : 0) > lim;
    if (bad) {
      snprintf(msg, msz, "%s: first difference at [%lld, %lld]: got %.9g, want %.9g (tol %.3g)",
               what, (long long)(i / cols), (long long)(i % cols), g, v, lim);
      return 1;
    }
  }
  return 0;
}

/* Reads out (rows x cols, f32 or bf16) and applies the rule. */
static int read_cmp(const case_dev *d, cl_mem out, int bf16, const double *want, int64_t rows,
                    int64_t cols, const char *what, char *msg, size_t msz) {
  void *got = case_alloc((size_t)(rows * cols) * 4);
  if (!got) return snprintf(msg, msz, "%s: out of memory", what), 1;
  const int rc = case_read(d, out, (size_t)(rows * cols) * (bf16 ? 2 : 4), got, msg, msz) ||
                 case_logits_cmp(got, bf16, want, rows, cols, what, msg, msz);
  free(got);
  return rc;
}

/* ---- ragged ----------------------------------------------------------------- */

static int rag_alloc(case_logits *c) {
  const int64_t m = c->m, h = c->h, d = c->d, n = c->n, qrow = c->fp4 ? d / 2 : d;
  c->owned = 1;
  c->q = case_alloc((size_t)(m * h * qrow));
  c->qs = case_alloc((size_t)(m * h * (d / 32)));
  c->k = case_alloc((size_t)(n * qrow));
  c->kss = case_alloc((size_t)(n * (d / 32)));
  c->ksc = case_alloc((size_t)n * 4);
  c->w = case_alloc((size_t)(m * h) * 4);
  c->ks = case_alloc((size_t)m * 4);
  c->ke = case_alloc((size_t)m * 4);
  return c->q && c->qs && c->k && c->kss && c->ksc && c->w && c->ks && c->ke ? 0 : -1;
}

int case_logits_gen_check(case_logits *c, uint64_t *rng) {
  if (rag_alloc(c)) return -1;
  const int64_t m = c->m, h = c->h, d = c->d, n = c->n, qrow = c->fp4 ? d / 2 : d;
  for (int64_t i = 0; i < m * h * (d / 32); i++) c->qs[i] = ue8m0(rng);
  for (int64_t i = 0; i < n * (d / 32); i++) c->kss[i] = ue8m0(rng);
  if (c->fp4) {
    case_fill_bytes(rng, c->q, (size_t)(m * h * qrow));
    case_fill_bytes(rng, c->k, (size_t)(n * qrow));
  } else {
    for (int64_t i = 0; i < m * h * d; i++) c->q[i] = e4m3(rng);
    for (int64_t i = 0; i < n * d; i++) c->k[i] = e4m3(rng);
    for (int64_t i = 0; i < n; i++) c->ksc[i] = ldexpf(1.0f, (int)case_rnd(rng, 12) - 6);
  }
  for (int64_t i = 0; i < m * h; i++) c->w[i] = (float)case_uniform(rng, -0.6, 1.4);
  for (int64_t i = 0; i < m; i++) {
    int64_t a = case_rnd(rng, n + 1), b = case_rnd(rng, n + 1);
    if (a > b) {
      const int64_t t = a;
      a = b, b = t;
    }
    if (case_rnd(rng, 6) == 0) a = 0, b = n;
    c->ks[i] = (int32_t)a, c->ke[i] = (int32_t)b;
  }
  return 0;
}

int case_logits_gen_bench(case_logits *c) {
  if (rag_alloc(c)) return -1;
  const int64_t m = c->m, h = c->h, n = c->n;
  const int64_t qrow = c->fp4 ? c->d / 2 : c->d;
  uint64_t seed = 0x5eed1002u; /* the row's data since it was written */
  case_fill_bytes(&seed, c->q, (size_t)(m * h * qrow));
  case_fill_bytes(&seed, c->k, (size_t)(n * qrow));
  for (int64_t i = 0; i < m * h; i++) c->w[i] = (float)case_uniform(&seed, -1.0, 1.0);
  for (int64_t i = 0; i < n; i++) c->ksc[i] = 0.0625f;
  memset(c->qs, 127, (size_t)(m * h * (c->d / 32))); /* MXFP4 scales 2^0 */
  memset(c->kss, 127, (size_t)(n * (c->d / 32)));
  for (int64_t i = 0; i < m; i++) c->ks[i] = 0, c->ke[i] = (int32_t)n;
  return 0;
}

int case_logits_upload(const case_dev *dv, case_logits *c, unsigned char out_fill, char *msg,
                       size_t msz) {
  const int64_t m = c->m, h = c->h, d = c->d, n = c->n, qrow = c->fp4 ? d / 2 : d;
  const dsa_dtype vt = c->fp4 ? DSA_E2M1X2 : DSA_E4M3;
  c->mq = case_buf(dv, (size_t)(m * h * qrow), c->q, 0);
  c->mqs = c->fp4 ? case_buf(dv, (size_t)(m * h * (d / 32)), c->qs, 0) : NULL;
  c->mk = case_buf(dv, (size_t)(n * qrow), c->k, 0);
  c->mks = c->fp4 ? case_buf(dv, (size_t)(n * (d / 32)), c->kss, 0)
                  : case_buf(dv, (size_t)n * 4, c->ksc, 0);
  c->mw = case_buf(dv, (size_t)(m * h) * 4, c->w, 0);
  c->mks0 = case_buf(dv, (size_t)m * 4, c->ks, 0);
  c->mke = case_buf(dv, (size_t)m * 4, c->ke, 0);
  c->mo = case_buf(dv, (size_t)(m * n) * (c->bf16 ? 2 : 4), NULL, out_fill);
  if (!c->mq || (c->fp4 && !c->mqs) || !c->mk || !c->mks || !c->mw || !c->mks0 || !c->mke ||
      !c->mo) {
    snprintf(msg, msz, "mqa logits: device buffers for m=%lld n=%lld", (long long)m,
             (long long)n);
    return 1;
  }
  c->tq = dsa_tensor_make(c->mq, 0, vt, 3, (int64_t[]){m, h, qrow});
  if (c->fp4) c->tqs = dsa_tensor_make(c->mqs, 0, DSA_UE8M0, 3, (int64_t[]){m, h, d / 32});
  c->tk = dsa_tensor_make(c->mk, 0, vt, 2, (int64_t[]){n, qrow});
  c->tks = c->fp4 ? dsa_tensor_make(c->mks, 0, DSA_UE8M0, 2, (int64_t[]){n, d / 32})
                  : dsa_tensor_make(c->mks, 0, DSA_F32, 1, &n);
  c->tw = dsa_tensor_make(c->mw, 0, DSA_F32, 2, (int64_t[]){m, h});
  c->tks0 = dsa_tensor_make(c->mks0, 0, DSA_I32, 1, &m);
  c->tke = dsa_tensor_make(c->mke, 0, DSA_I32, 1, &m);
  c->to = dsa_tensor_make(c->mo, 0, c->bf16 ? DSA_BF16 : DSA_F32, 2, (int64_t[]){m, n});
  return 0;
}

dsa_status case_logits_call(dsa_queue *q, const case_logits *c, const dsa_events *ev) {
  dsa_indexer_logits_params p;
  dsa_indexer_logits_params_default(&p);
  p.clean = 1;
  return dsa_indexer_logits(q, &c->tq, c->fp4 ? &c->tqs : NULL, &c->tk, &c->tks, &c->tw,
                            &c->tks0, &c->tke, &c->to, &p, ev);
}

int case_logits_check(const case_dev *d, const case_logits *c, const double *want, char *msg,
                      size_t msz) {
  char what[128];
  snprintf(what, sizeof what, "m=%lld h=%lld d=%lld n=%lld bf16=%d", (long long)c->m,
           (long long)c->h, (long long)c->d, (long long)c->n, c->bf16);
  return read_cmp(d, c->mo, c->bf16, want, c->m, c->n, what, msg, msz);
}

void case_logits_free(case_logits *c) {
  if (c->owned) {
    free(c->q), free(c->qs), free(c->k), free(c->kss), free(c->ksc), free(c->w);
    free(c->ks), free(c->ke);
  }
  case_release(&c->mq), case_release(&c->mqs), case_release(&c->mk), case_release(&c->mks);
  case_release(&c->mw), case_release(&c->mks0), case_release(&c->mke), case_release(&c->mo);
}

double case_logits_bytes(const int64_t *p) {
  const double m = (double)p[0], n = (double)p[1], h = (double)p[2];
  return m * h * (128 + 4) + n * (128 + 4) + m * 8 + m * n * 4;
}
double case_logits_flops(const int64_t *p) {
  return 2.0 * (double)p[0] * (double)p[1] * (double)p[2] * 128;
}

/* ---- paged ------------------------------------------------------------------ */

static int paged_alloc(case_paged_logits *c, int with_cache) {
  const int64_t rows = c->b * c->next_n, qrow = c->fp4 ? 64 : 128;
  const int64_t nctx = c->ctx_rank == 2 ? rows : c->b;
  c->owned = 1;
  c->cache = with_cache ? case_alloc((size_t)(c->nb * c->stride)) : NULL;
  c->q = case_alloc((size_t)(rows * c->h * qrow));
  c->qs = case_alloc((size_t)(rows * c->h * 4));
  c->wt = case_alloc((size_t)(rows * c->h) * 4);
  c->ctx = case_alloc((size_t)nctx * 4);
  c->table = case_alloc((size_t)(c->b * c->w) * 4);
  return (c->cache || !with_cache) && c->q && c->qs && c->wt && c->ctx && c->table ? 0 : -1;
}

int case_paged_logits_gen_check(case_paged_logits *c, uint64_t *rng) {
  const int fp4 = c->fp4;
  const int64_t tokb = fp4 ? 68 : 132, rows = c->b * c->next_n, qrow = fp4 ? 64 : 128;
  const int32_t bs = c->bs;
  c->stride = bs * tokb + 16 * case_rnd(rng, 2);
  c->mml = c->w * bs;
  if (paged_alloc(c, 1)) return -1;
  case_fill_bytes(rng, c->cache, (size_t)(c->nb * c->stride));
  for (int64_t blk = 0; blk < c->nb; blk++) {
    uint8_t *base = c->cache + blk * c->stride;
    for (int32_t t = 0; t < bs; t++) {
      if (fp4) {
        for (int k = 0; k < 4; k++) base[bs * 64 + t * 4 + k] = ue8m0(rng);
      } else {
        for (int k = 0; k < 128; k++) base[t * 128 + k] = e4m3(rng);
        const float s = ldexpf(1.0f, (int)case_rnd(rng, 12) - 6);
        memcpy(base + bs * 128 + t * 4, &s, 4);
      }
    }
  }
  if (fp4) {
    case_fill_bytes(rng, c->q, (size_t)(rows * c->h * qrow));
    for (int64_t i = 0; i < rows * c->h * 4; i++) c->qs[i] = ue8m0(rng);
  } else {
    for (int64_t i = 0; i < rows * c->h * 128; i++) c->q[i] = e4m3(rng);
  }
  for (int64_t i = 0; i < rows * c->h; i++) c->wt[i] = (float)case_uniform(rng, -0.6, 1.4);
  const int64_t nctx = c->ctx_rank == 2 ? rows : c->b;
  for (int64_t i = 0; i < nctx; i++)
    c->ctx[i] = (int32_t)(case_rnd(rng, 4) == 0 ? c->mml : case_rnd(rng, c->mml + 1));
  for (int64_t i = 0; i < c->b * c->w; i++) c->table[i] = (int32_t)case_rnd(rng, c->nb);
  return 0;
}

int case_paged_logits_gen_bench(case_paged_logits *c) {
  c->bs = 64;
  /* 64 tokens of 132 (MXFP4: 68) bytes rounded up to a multiple of 576, as
   * vLLM pads */
  c->stride = c->fp4 ? 4608 : 8640;
  c->w = (c->mml + c->bs - 1) / c->bs;
  c->nb = c->b * c->w;
  c->cache_fill = 0x3c; /* e4m3 1.5 values and finite f32 scales (0.0115) */
  if (paged_alloc(c, 0)) return -1;
  const int64_t rows = c->b * c->next_n, n = c->nb;
  uint64_t seed = 0x5eed1001u; /* the rows' data since they were written */
  case_fill_bytes(&seed, c->q, (size_t)(rows * c->h * (c->fp4 ? 64 : 128)));
  for (int64_t i = 0; i < rows * c->h; i++) c->wt[i] = (float)case_uniform(&seed, -1.0, 1.0);
  memset(c->qs, 127, (size_t)(rows * c->h * 4)); /* MXFP4 scales 2^0 */
  /* The blocks: a random permutation (every sequence reads its own). */
  for (int64_t i = 0; i < n; i++) c->table[i] = (int32_t)i;
  for (int64_t i = 0; i < n; i++) {
    const int64_t j = i + (int64_t)(rng64_next(&seed) % (uint64_t)(n - i));
    const int32_t t = c->table[i];
    c->table[i] = c->table[j], c->table[j] = t;
  }
  for (int64_t i = 0; i < c->b; i++) c->ctx[i] = (int32_t)c->mml;
  return 0;
}

int case_paged_logits_upload(const case_dev *d, case_paged_logits *c, unsigned char out_fill,
                             char *msg, size_t msz) {
  const int fp4 = c->fp4;
  const int64_t b = c->b, nn = c->next_n, h = c->h, rows = b * nn, qrow = fp4 ? 64 : 128;
  const int64_t nctx = c->ctx_rank == 2 ? rows : b;
  c->mc = case_buf(d, (size_t)(c->nb * c->stride), c->cache, c->cache_fill);
  c->mq = case_buf(d, (size_t)(rows * h * qrow), c->q, 0);
  c->mqs = fp4 ? case_buf(d, (size_t)(rows * h * 4), c->qs, 0) : NULL;
  c->mw = case_buf(d, (size_t)(rows * h) * 4, c->wt, 0);
  c->mcl = case_buf(d, (size_t)nctx * 4, c->ctx, 0);
  c->mbt = case_buf(d, (size_t)(b * c->w) * 4, c->table, 0);
  c->mo = case_buf(d, (size_t)(rows * c->mml) * (c->bf16 ? 2 : 4), NULL, out_fill);
  if (!c->mc || !c->mq || (fp4 && !c->mqs) || !c->mw || !c->mcl || !c->mbt || !c->mo) {
    snprintf(msg, msz, "paged mqa logits: device buffers for b=%lld w=%lld", (long long)b,
             (long long)c->w);
    return 1;
  }
  c->pc = (dsa_paged_cache){.mem = c->mc, .offset = 0, .num_blocks = c->nb, .block_size = c->bs,
                            .block_stride = c->stride,
                            .format = fp4 ? DSA_CACHE_INDEXER_MXFP4 : DSA_CACHE_INDEXER_FP8};
  c->tq = dsa_tensor_make(c->mq, 0, fp4 ? DSA_E2M1X2 : DSA_E4M3, 4, (int64_t[]){b, nn, h, qrow});
  if (fp4) c->tqs = dsa_tensor_make(c->mqs, 0, DSA_UE8M0, 4, (int64_t[]){b, nn, h, 4});
  c->tw = dsa_tensor_make(c->mw, 0, DSA_F32, 2, (int64_t[]){rows, h});
  c->tcl = c->ctx_rank == 2 ? dsa_tensor_make(c->mcl, 0, DSA_I32, 2, (int64_t[]){b, nn})
                            : dsa_tensor_make(c->mcl, 0, DSA_I32, 1, &b);
  c->tbt = dsa_tensor_make(c->mbt, 0, DSA_I32, 2, (int64_t[]){b, c->w});
  c->to = dsa_tensor_make(c->mo, 0, c->bf16 ? DSA_BF16 : DSA_F32, 2, (int64_t[]){rows, c->mml});
  return 0;
}

dsa_status case_paged_logits_call(dsa_queue *q, const case_paged_logits *c,
                                  const dsa_events *ev) {
  dsa_indexer_logits_params p;
  dsa_indexer_logits_params_default(&p);
  p.clean = 1;
  return dsa_indexer_paged_logits(q, &c->tq, c->fp4 ? &c->tqs : NULL, &c->tw, &c->tcl, &c->tbt,
                                  &c->pc, &c->to, &p, ev);
}

int case_paged_logits_check(const case_dev *d, const case_paged_logits *c, const double *want,
                            char *msg, size_t msz) {
  char what[160];
  snprintf(what, sizeof what, "b=%lld next_n=%lld h=%lld w=%lld bs=%d rank=%d bf16=%d",
           (long long)c->b, (long long)c->next_n, (long long)c->h, (long long)c->w, c->bs,
           c->ctx_rank, c->bf16);
  return read_cmp(d, c->mo, c->bf16, want, c->b * c->next_n, c->mml, what, msg, msz);
}

void case_paged_logits_free(case_paged_logits *c) {
  if (c->owned) {
    free(c->cache), free(c->q), free(c->qs), free(c->wt), free(c->ctx), free(c->table);
  }
  case_release(&c->mc), case_release(&c->mq), case_release(&c->mqs), case_release(&c->mw);
  case_release(&c->mcl), case_release(&c->mbt), case_release(&c->mo);
}

double case_paged_logits_bytes(const int64_t *p) {
  const double b = (double)p[0], t = (double)p[1], nn = (double)p[2], h = (double)p[3];
  return b * t * 132 + b * nn * h * (128 + 4) + b * (double)((p[1] + 63) / 64) * 4 + b * nn * t * 4;
}
double case_paged_logits_flops(const int64_t *p) {
  return 2.0 * (double)p[0] * (double)p[1] * (double)p[2] * (double)p[3] * 128;
}

CASE_OPS(logits, double, "dsa_indexer_logits")
CASE_OPS(paged_logits, double, "dsa_indexer_paged_logits")
