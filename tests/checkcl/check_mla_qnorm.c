/* Q RMSNorm + RoPE and KV RoPE + insert: q_out and the whole cache image
 * byte-exact against tests/ref (as tests/test_mla_qnorm.c), and the fault
 * word. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkcl.h"
#include "ref_mla_qnorm.h"

typedef struct qn {
  int64_t t, h, npos, nb;
  int32_t bs;
  uint16_t *q, *kv;
  float *cs;
  int64_t *pos, *slots;
  uint8_t *img;
  size_t csize;
  ref_mla_cache ref;
  cl_mem mq, mo, mkv, mp, mcs, msl, mc;
  dsa_tensor tq, to, tkv, tp, tcs, tsl;
  dsa_paged_cache dc;
} qn;

static qn *qn_make(cc_env *e, int64_t t, int64_t h, int64_t nb, int32_t bs, int64_t npos, int bad) {
  qn *s = cc_xmalloc(sizeof *s);
  *s = (qn){.t = t, .h = h, .npos = npos, .nb = nb, .bs = bs};
  s->q = cc_xmalloc((size_t)(t * h) * 1024 + 2);
  for (int64_t i = 0; i < t * h; i++) {
    const double sc = ldexp(1.0, (int)cc_rnd(e, 20) - 10);
    for (int d = 0; d < 512; d++) s->q[i * 512 + d] = cc_bf16((float)(cc_uniform(e, -1, 1) * sc));
  }
  s->kv = cc_xmalloc((size_t)t * 1024 + 2);
  for (int64_t i = 0; i < t * 512; i++) s->kv[i] = cc_bf16((float)cc_uniform(e, -3, 3));
  s->cs = cc_xmalloc((size_t)(npos * 64) * 4);
  for (int64_t p = 0; p < npos; p++)
    for (int i = 0; i < 32; i++) {
      const double th = (double)p * pow(10000.0, -i / 32.0);
      s->cs[p * 64 + i] = (float)cos(th), s->cs[p * 64 + 32 + i] = (float)sin(th);
    }
  const int64_t cap = nb * bs;
  s->pos = cc_xmalloc((size_t)t * 8 + 8);
  s->slots = cc_xmalloc((size_t)t * 8 + 8);
  int64_t *perm = cc_xmalloc((size_t)cap * 8 + 8);
  for (int64_t i = 0; i < cap; i++) perm[i] = i;
  for (int64_t i = 0; i < t; i++) {
    s->pos[i] = bad && cc_rnd(e, 6) == 0 ? npos + cc_rnd(e, 3) : cc_rnd(e, npos);
    if (i < cap) {
      const int64_t j = i + cc_rnd(e, cap - i), x = perm[i];
      perm[i] = perm[j], perm[j] = x;
    }
    const int64_t r = cc_rnd(e, 10);
    s->slots[i] = i >= cap || r == 0 ? -1 : r == 1 && bad ? cap : perm[i];
  }
  free(perm);
  const int64_t stride = (int64_t)bs * REF_MLA_TOKEN_BYTES;
  s->csize = (size_t)(nb * stride);
  s->img = cc_xmalloc(s->csize);
  cc_fill_bytes(e, s->img, s->csize);
  s->ref = (ref_mla_cache){s->img, nb, bs, stride};
  s->mq = cc_buf(e, (size_t)(t * h) * 1024, s->q);
  s->mo = cc_buf(e, (size_t)(t * h) * 1024, NULL);
  s->mkv = cc_buf(e, (size_t)t * 1024, s->kv);
  s->mp = cc_buf(e, (size_t)t * 8, s->pos);
  s->mcs = cc_buf(e, (size_t)(npos * 64) * 4, s->cs);
  s->msl = cc_buf(e, (size_t)t * 8, s->slots);
  s->mc = cc_buf(e, s->csize, s->img);
  s->tq = cc_t(s->mq, DSA_BF16, 3, (int64_t[]){t, h, 512});
  s->to = cc_t(s->mo, DSA_BF16, 3, (int64_t[]){t, h, 512});
  s->tkv = cc_t(s->mkv, DSA_BF16, 2, (int64_t[]){t, 512});
  s->tp = cc_t(s->mp, DSA_I64, 1, (int64_t[]){t});
  s->tcs = cc_t(s->mcs, DSA_F32, 2, (int64_t[]){npos, 64});
  s->tsl = cc_t(s->msl, DSA_I64, 1, (int64_t[]){t});
  s->dc = (dsa_paged_cache){.mem = s->mc, .offset = 0, .num_blocks = nb, .block_size = bs,
                            .block_stride = stride, .format = DSA_CACHE_MLA_FP8};
  return s;
}
static void qn_free(void *p) {
  qn *s = p;
  if (!s) return;
  free(s->q), free(s->kv), free(s->cs), free(s->pos), free(s->slots), free(s->img);
  cc_free(&s->mq), cc_free(&s->mo), cc_free(&s->mkv), cc_free(&s->mp), cc_free(&s->mcs);
  cc_free(&s->msl), cc_free(&s->mc);
  free(s);
}
static dsa_status qn_call(cc_env *e, qn *s, cl_event *done) {
  dsa_events ev = {0, NULL, done};
  dsa_status st = dsa_mla_qnorm_rope_kv_insert(e->q, &s->tq, &s->tkv, &s->tp, &s->tcs, &s->tsl,
                                               &s->dc, &s->to, NULL, &ev);
  cc_after_call(e);
  return st;
}

static int qn_case(cc_env *e, int64_t t, int64_t h, int64_t nb, int32_t bs, int64_t npos, int bad,
                   char *msg, size_t ms) {
  qn *s = qn_make(e, t, h, nb, bs, npos, bad);
  int rc;
  if (qn_call(e, s, NULL) != DSA_OK) {
    rc = CC_FAIL(msg, ms, "dsa_mla_qnorm_rope_kv_insert: %s", dsa_last_error());
  } else {
    const uint32_t f = cc_faults(e);
    const size_t qb = (size_t)(t * h) * 1024;
    uint16_t *want = cc_xmalloc(qb), *got = cc_xmalloc(qb);
    dsa_mla_qnorm_rope_kv_insert_params p;
    dsa_mla_qnorm_rope_kv_insert_params_default(&p);
    const unsigned wf = ref_mla_qnorm_rope_kv_insert(&s->ref, s->q, h * 512, 512, want, h * 512,
                                                     512, h, s->kv, 512, s->pos, s->cs, 64,
                                                     s->npos, s->slots, p.eps, t);
    char what[128], w2[160];
    snprintf(what, sizeof what, "T=%lld H=%lld nb=%lld bs=%d", (long long)t, (long long)h,
             (long long)nb, bs);
    cc_read(e, s->mo, qb, got);
    snprintf(w2, sizeof w2, "%s q_out", what);
    rc = cc_cmp_bytes(got, want, qb, 2, w2, msg, ms);
    if (!rc) {
      uint8_t *img = cc_xmalloc(s->csize);
      cc_read(e, s->mc, s->csize, img);
      snprintf(w2, sizeof w2, "%s cache", what);
      rc = cc_cmp_bytes(img, s->img, s->csize, 1, w2, msg, ms);
      free(img);
    }
    if (!rc && f != wf) rc = CC_FAIL(msg, ms, "%s: faults 0x%x, want 0x%x", what, f, wf);
    free(want), free(got);
  }
  qn_free(s);
  return rc;
}

static int check_qnorm(cc_env *e, char *msg, size_t ms) {
  static const int64_t hs[] = {0, 1, 16, 64, 128};
  if (qn_case(e, 1, 1, 1, 1, 4, 0, msg, ms) || qn_case(e, 9, 64, 3, 16, 50, 1, msg, ms)) return 1;
  for (int it = 0; it < (e->quick ? 2 : 10); it++)
    if (qn_case(e, 1 + cc_rnd(e, 12), hs[cc_rnd(e, 5)], 1 + cc_rnd(e, 4), 16, 1 + cc_rnd(e, 100),
                (int)cc_rnd(e, 2), msg, ms))
      return 1;
  return 0;
}

static int b_setup(cc_env *e, int small, void **st) {
  *st = small ? qn_make(e, 16, 64, 4, 64, 1024, 0) : qn_make(e, 64, 128, 64, 64, 8192, 0);
  return 0;
}
static int b_run(cc_env *e, void *st, cl_event *done) { return qn_call(e, st, done) != DSA_OK; }

const cc_op cc_ops_mla_qnorm[] = {
    {"dsa_mla_qnorm_rope_kv_insert", check_qnorm, "T=64 H=128", b_setup, b_run, qn_free}, {0}};
