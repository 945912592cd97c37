/* Indexer top-k: the case description (cases.h). */
#include "cases.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"



static int alloc_host(case_topk *c) {
  c->owned = 1;
  c->logits = case_alloc((size_t)(c->rows * c->n) * (c->bf16 ? 2 : 4));
  c->lens = case_alloc((size_t)c->rows * 4 + 4);
  c->ends = case_alloc((size_t)c->rows * 4 + 4);
  return c->logits && c->lens && c->ends ? 0 : -1;
}

int case_topk_gen_check(case_topk *c, uint64_t *rng) {
  const int bad = c->bad;
  if (alloc_host(c)) return -1;
  const int64_t n = c->n;
  for (int64_t i = 0; i < c->rows * n; i++) {
    const int64_t r = case_rnd(rng, 50);
    const float v = r == 0 ? -INFINITY
                    : r == 1 ? NAN
                    : r < 6  ? (float)case_rnd(rng, 4)
                             : (float)case_uniform(rng, -10, 10);
    if (c->bf16)
      ((uint16_t *)c->logits)[i] = isfinite(v) ? case_bf16(v) : r == 0 ? 0xff80 : 0x7fc0;
    else
      ((float *)c->logits)[i] = v;
  }
  if (!c->decode) {
    for (int64_t r = 0; r < c->rows; r++) {
      int64_t x = case_rnd(rng, n + 1), y = case_rnd(rng, n + 1);
      if (x > y) {
        const int64_t t = x;
        x = y, y = t;
      }
      if (case_rnd(rng, 4) == 0) x = 0, y = n;
      if (bad && case_rnd(rng, 5) == 0) y = n + 1;
      c->lens[r] = (int32_t)x, c->ends[r] = (int32_t)y;
    }
  } else {
    const int64_t nl = c->lens_rank == 2 ? c->rows : c->b;
    for (int64_t i = 0; i < nl; i++) c->lens[i] = (int32_t)(case_rnd(rng, 4) == 0 ? n : case_rnd(rng, n + 1));
    if (bad) c->lens[0] = (int32_t)(n + 2);
  }
  return 0;
}

int case_topk_gen_bench(case_topk *c) {
  if (alloc_host(c)) return -1;
  uint64_t seed = 0x5eed3001u; /* the rows' data since they were written */
  for (int64_t i = 0; i < c->rows * c->n; i++) {
    const float v = (float)case_uniform(&seed, -10, 10);
    if (c->bf16)
      ((uint16_t *)c->logits)[i] = case_bf16(v);
    else
      ((float *)c->logits)[i] = v;
  }
  for (int64_t i = 0; i < c->rows; i++) c->lens[i] = c->decode ? (int32_t)c->n : 0;
  for (int64_t i = 0; i < c->rows; i++) c->ends[i] = (int32_t)c->n;
  return 0;
}

int case_topk_upload(const case_dev *d, case_topk *c, unsigned char out_fill, char *msg,
                     size_t msz) {
  const int64_t rows = c->rows, nl = c->decode && c->lens_rank == 1 ? c->b : rows;
  c->ml = case_buf(d, (size_t)(rows * c->n) * (c->bf16 ? 2 : 4), c->logits, 0);
  c->ma = case_buf(d, (size_t)nl * 4, c->lens, 0);
  c->mb = c->decode ? NULL : case_buf(d, (size_t)rows * 4, c->ends, 0);
  c->mo = case_buf(d, (size_t)(rows * c->k) * 4, NULL, out_fill);
  if (!c->ml || !c->ma || (!c->decode && !c->mb) || !c->mo) {
    snprintf(msg, msz, "top-k: device buffers for %lldx%lld k=%d", (long long)rows,
             (long long)c->n, c->k);
    return 1;
  }
  c->tl = dsa_tensor_make(c->ml, 0, c->bf16 ? DSA_BF16 : DSA_F32, 2, (int64_t[]){rows, c->n});
  c->ta = c->decode && c->lens_rank == 2
              ? dsa_tensor_make(c->ma, 0, DSA_I32, 2, (int64_t[]){c->b, c->next_n})
              : dsa_tensor_make(c->ma, 0, DSA_I32, 1, &nl);
  if (!c->decode) c->tb = dsa_tensor_make(c->mb, 0, DSA_I32, 1, &rows);
  c->to = dsa_tensor_make(c->mo, 0, DSA_I32, 2, (int64_t[]){rows, c->k});
  return 0;
}

dsa_status case_topk_call(dsa_queue *q, const case_topk *c, const dsa_events *ev) {
  dsa_topk_params p;
  dsa_topk_params_default(&p);
  p.k = c->k;
  p.next_n = c->decode ? c->next_n : 0;
  return c->decode ? dsa_topk_decode(q, &c->tl, &c->ta, &c->to, &p, ev)
                   : dsa_topk_prefill(q, &c->tl, &c->ta, &c->tb, &c->to, &p, ev);
}

int case_topk_check(const case_dev *d, const case_topk *c, const int32_t *want, char *msg,
                    size_t msz) {
  char what[128];
  snprintf(what, sizeof what, "%s rows=%lld n=%lld k=%d rank=%d indices",
           c->decode ? "decode" : "prefill", (long long)c->rows, (long long)c->n, c->k,
           c->lens_rank);
  return case_read_cmp(d, c->mo, (size_t)(c->rows * c->k) * 4, want, 4, what, msg, msz);
}

void case_topk_free(case_topk *c) {
  if (c->owned) free(c->logits), free(c->lens), free(c->ends);
  c->logits = NULL, c->lens = c->ends = NULL;
  case_release(&c->ml), case_release(&c->ma), case_release(&c->mb), case_release(&c->mo);
}

double case_topk_bytes(const int64_t *p) {
  return (double)p[0] * ((double)p[1] * (p[3] ? 2 : 4) + 4 + (double)p[2] * 4);
}

double case_topk_flops(const int64_t *p) {
  (void)p;
  return 0; /* memory-bound */
}

CASE_OPS(topk, int32_t, "dsa_topk")
