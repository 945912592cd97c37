/* The attention output's inverse RoPE + FP8 quant case description
 * (cases.h). */
#include "cases.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

static int64_t kk_of(const case_oq *c) { return c->packed ? c->h / c->g : 4 * (c->h / c->g); }

static int oq_alloc(case_oq *c) {
  c->owned = 1;
  c->o = case_alloc((size_t)(c->t * c->h) * 1024);
  c->pos = case_alloc((size_t)c->t * 8);
  c->cs = case_alloc((size_t)(c->np * 64) * 4);
  if (!c->o || !c->pos || !c->cs) return -1;
  for (int64_t r = 0; r < c->np; r++)
    for (int i = 0; i < 32; i++) {
      const double a = (double)r * pow(10000.0, -2.0 * i / 64);
      c->cs[r * 64 + i] = (float)cos(a), c->cs[r * 64 + 32 + i] = (float)sin(a);
    }
  return 0;
}

int case_oq_gen_check(case_oq *c, uint64_t *rng) {
  static const double scales[] = {1, 3000, 1e4, 1e-5, 1e-6, 0.01, 1e-30, 1e25, 1e37, 1e-12};
  static const uint16_t specials[] = {0x7FC0, 0xFFC0, 0x7F80, 0xFF80, 0x7F81};
  c->tp = c->t + case_rnd(rng, 5);
  if (oq_alloc(c)) return -1;
  for (int64_t row = 0; row < c->t * c->h; row++) {
    uint16_t *v = c->o + row * 512;
    for (int b = 0; b < 4; b++) {
      const int kind = (int)case_rnd(rng, 8);
      const double s = scales[case_rnd(rng, 10)];
      for (int d = 128 * b; d < 128 * b + 128; d++)
        v[d] = kind == 0   ? (uint16_t)(case_rnd(rng, 2) ? 0x8000 : 0)
               : kind == 1 ? (uint16_t)(case_rnd(rng, 0x80) | (case_rnd(rng, 2) << 15))
                           : case_bf16((float)(case_uniform(rng, -2, 2) * s));
    }
    if (case_rnd(rng, 16) == 0) v[case_rnd(rng, 512)] = specials[case_rnd(rng, 5)];
  }
  for (int64_t i = 0; i < c->t; i++)
    c->pos[i] = c->bad && case_rnd(rng, 6) == 0 ? c->np + case_rnd(rng, 3) : case_rnd(rng, c->np);
  return 0;
}

int case_oq_gen_bench(case_oq *c) {
  c->np = CASE_OQ_POS, c->tp = (c->t + 3) / 4 * 4;
  if (oq_alloc(c)) return -1;
  uint64_t seed = 0x5eed0a11u; /* the rows' data since they were written */
  for (int64_t i = 0; i < c->t * c->h * 512; i++)
    c->o[i] = case_bf16((float)case_uniform(&seed, -4, 4));
  for (int64_t i = 0; i < c->t; i++) c->pos[i] = (int64_t)(rng64_next(&seed) % CASE_OQ_POS);
  return 0;
}

int case_oq_upload(const case_dev *d, case_oq *c, unsigned char out_fill, char *msg, size_t msz) {
  const int64_t hpg = c->h / c->g, kk = kk_of(c);
  c->mo = case_buf(d, (size_t)(c->t * c->h) * 1024, c->o, 0);
  c->mp = case_buf(d, (size_t)c->t * 8, c->pos, 0);
  c->mcs = case_buf(d, (size_t)(c->np * 64) * 4, c->cs, 0);
  c->mf = case_buf(d, (size_t)(c->t * c->h) * 512, NULL, out_fill);
  c->msc = case_buf(d, (size_t)(c->g * kk * c->tp) * 4, NULL, out_fill);
  if (!c->mo || !c->mp || !c->mcs || !c->mf || !c->msc) {
    snprintf(msg, msz, "output quant: device buffers for t=%lld h=%lld", (long long)c->t,
             (long long)c->h);
    return 1;
  }
  c->to = dsa_tensor_make(c->mo, 0, DSA_BF16, 3, (int64_t[]){c->t, c->h, 512});
  c->tpos = dsa_tensor_make(c->mp, 0, DSA_I64, 1, &c->t);
  c->tcs = dsa_tensor_make(c->mcs, 0, DSA_F32, 2, (int64_t[]){c->np, 64});
  c->tf = dsa_tensor_make(c->mf, 0, DSA_E4M3, 3, (int64_t[]){c->g, c->t, hpg * 512});
  c->tsc = dsa_tensor_make(c->msc, 0, c->packed ? DSA_I32 : DSA_F32, 3,
                           (int64_t[]){c->g, kk, c->tp});
  return 0;
}

dsa_status case_oq_call(dsa_queue *q, const case_oq *c, const dsa_events *ev) {
  return dsa_output_inv_rope_fp8_quant(q, &c->to, &c->tpos, &c->tcs, &c->tf, &c->tsc, NULL, ev);
}

/* 1 when block b (128 dims) of head (t, h) holds a NaN or inf input. */
static int block_nonfinite(const case_oq *c, int64_t t, int64_t h, int b) {
  const uint16_t *v = c->o + (t * c->h + h) * 512 + 128 * b;
  for (int d = 0; d < 128; d++)
    if ((v[d] & 0x7F80) == 0x7F80) return 1;
  return 0;
}

/* The nonfinite rule: block by block, NaN/inf blocks noted. */
static int cmp_blocks(const case_oq *c, const uint8_t *got, const uint32_t *gsc,
                      const case_oq_want *want, char *msg, size_t msz) {
  const uint8_t *w = want->out;
  const uint32_t *wsc = want->scales;
  const int64_t hpg = c->h / c->g, kk = kk_of(c), tp = c->tp;
  size_t bad = 0, noted = 0;
  char first[160] = "";
  for (int64_t ti = 0; ti < c->t; ti++)
    for (int64_t hh = 0; hh < c->h; hh++)
      for (int b = 0; b < 4; b++) {
        const int64_t gi = hh / hpg, hi = hh % hpg;
        const size_t base = (size_t)((gi * c->t + ti) * hpg * 512 + hi * 512 + 128 * b);
        const int64_t k = c->packed ? hi : 4 * hi + b;
        const size_t si = (size_t)((gi * kk + k) * tp + ti);
        int differs = memcmp(got + base, w + base, 128) != 0;
        if (c->packed) {
          const uint32_t m = 0xFFu << (8 * b);
          differs |= (gsc[si] & m) != (wsc[si] & m);
        } else {
          differs |= gsc[si] != wsc[si];
        }
        if (!differs) continue;
        if (block_nonfinite(c, ti, hh, b)) {
          noted++;
        } else if (!bad++) {
          snprintf(first, sizeof first, "token %lld head %lld block %d", (long long)ti,
                   (long long)hh, b);
        }
      }
  for (int64_t gi = 0; gi < c->g; gi++) /* the padding columns too */
    for (int64_t k = 0; k < kk; k++)
      for (int64_t ti = c->t; ti < tp; ti++)
        if (gsc[(gi * kk + k) * tp + ti] != 0 && !bad++)
          snprintf(first, sizeof first, "padding scale g %lld k %lld t %lld", (long long)gi,
                   (long long)k, (long long)ti);
  if (want->noted) *want->noted = noted;
  if (bad) snprintf(msg, msz, "output quant: %zu finite blocks differ, first: %s", bad, first);
  return bad != 0;
}

int case_oq_check(const case_dev *d, const case_oq *c, const case_oq_want *want, char *msg,
                  size_t msz) {
  const size_t fb = (size_t)(c->t * c->h) * 512, sb = (size_t)(c->g * kk_of(c) * c->tp) * 4;
  char what[128];
  snprintf(what, sizeof what, "T=%lld H=%lld G=%lld Tp=%lld packed=%d", (long long)c->t,
           (long long)c->h, (long long)c->g, (long long)c->tp, c->packed);
  uint8_t *got = case_alloc(fb);
  uint32_t *gsc = case_alloc(sb);
  int rc = 1;
  if (!got || !gsc) {
    snprintf(msg, msz, "%s: out of memory", what);
  } else if (!case_read(d, c->mf, fb, got, msg, msz) && !case_read(d, c->msc, sb, gsc, msg, msz)) {
    if (want->nonfinite) {
      rc = cmp_blocks(c, got, gsc, want, msg, msz);
    } else {
      char w2[160];
      snprintf(w2, sizeof w2, "%s out", what);
      rc = case_cmp_bytes(got, want->out, fb, 1, w2, msg, msz);
      snprintf(w2, sizeof w2, "%s scales", what);
      if (!rc) rc = case_cmp_bytes(gsc, want->scales, sb, 4, w2, msg, msz);
    }
  }
  free(got), free(gsc);
  return rc;
}

void case_oq_free(case_oq *c) {
  if (c->owned) free(c->o), free(c->pos), free(c->cs);
  case_release(&c->mo), case_release(&c->mp), case_release(&c->mcs), case_release(&c->mf);
  case_release(&c->msc);
}

/* Read: o, positions, the cos_sin rows; written: the e4m3 output and the
 * scales (padding included). */
double case_oq_bytes(const int64_t *p) {
  const double t = (double)p[0], h = (double)p[1], tp = (double)((p[0] + 3) / 4 * 4);
  const double sc = p[3] ? tp * h : tp * h * 4;
  return t * h * 512 * 2 + t * (8 + 64 * 4) + t * h * 512 + sc * 4;
}

double case_oq_flops(const int64_t *p) {
  (void)p;
  return 0; /* memory-bound */
}

CASE_OPS(oq, case_oq_want, "dsa_output_inv_rope_fp8_quant")
