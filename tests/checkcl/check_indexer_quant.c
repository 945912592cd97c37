/* Indexer quantization: Q RoPE + FP8/MXFP4 quant, K insert into the paged
 * indexer cache, K gather. Byte-exact against tests/ref (as
 * tests/test_indexer_q.c / test_indexer_k.c): every output byte (rows the
 * call must not write included) and the fault word. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "checkcl.h"
#include "ref_indexer_quant.h"

/* ---- Q: the case is tools/cases/indexer_quant.c's ---------------------------------- */

static case_q_quant *qq_make(cc_env *e, int64_t T, int64_t H, int64_t D, int64_t R, int64_t P,
                             int mx, int mode, int bad) {
  case_q_quant *s = cc_xmalloc(sizeof *s);
  *s = (case_q_quant){.mx = mx, .bad = bad, .e2m1 = mode ? DSA_E2M1_LEGACY : DSA_E2M1_RNE,
                      .t = T, .h = H, .d = D, .r = R, .np = P};
  char msg[256] = "out of memory";
  if (case_q_quant_gen_check(s, &e->rng) ||
      case_q_quant_upload(&(case_dev){e->clctx, e->clq}, s, 0, msg, sizeof msg)) {
    fprintf(stderr, "checkcl: indexer q case: %s\n", msg);
    exit(2);
  }
  return s;
}
static void qq_free(void *p) {
  if (!p) return;
  case_q_quant_free(p);
  free(p);
}
static dsa_status qq_call(cc_env *e, case_q_quant *s, cl_event *done) {
  dsa_events ev = {0, NULL, done};
  dsa_status st = case_q_quant_call(e->q, s, &ev);
  cc_after_call(e);
  return st;
}

static int q_case(cc_env *e, int64_t T, int64_t H, int64_t D, int64_t R, int64_t P, int mx,
                  int mode, int bad, char *msg, size_t ms) {
  case_q_quant *s = qq_make(e, T, H, D, R, P, mx, mode, bad);
  int rc;
  if (qq_call(e, s, NULL) != DSA_OK) {
    rc = CC_FAIL(msg, ms, "dsa_indexer_q_quant: %s", dsa_last_error());
  } else {
    const int64_t qd = mx ? D / 2 : D;
    uint8_t *oq = cc_xmalloc((size_t)(T * H * qd)), *os = cc_xmalloc((size_t)(T * H * (D / 32)));
    float *ow = cc_xmalloc((size_t)(T * H) * 4);
    const dsa_indexer_q_quant_params prm = case_q_quant_params(s);
    ref_indexer_q_args a = {T, H, D, R, P, s->pos, 0, 1, s->q, H * D, D, s->cs, 0, R, s->w, 0,
                            H, 1, prm.softmax_scale, prm.head_scale, mx, mode,
                            oq, H * qd, qd, os, H * (D / 32), D / 32, ow, H, 1};
    const unsigned want_f = ref_indexer_q(&a);
    rc = case_q_quant_check(&(case_dev){e->clctx, e->clq}, s, &(case_q_quant_want){oq, os, ow},
                            msg, ms) ||
         case_faults(e->q, want_f, "indexer q quant", msg, ms);
    free(oq), free(os), free(ow);
  }
  qq_free(s);
  return rc;
}

static int check_q(cc_env *e, char *msg, size_t ms) {
  static const int64_t Hs[] = {1, 8, 64}, Ds[] = {32, 64, 128};
  if (q_case(e, 1, 1, 128, 64, 16, 0, 0, 0, msg, ms) || q_case(e, 5, 64, 128, 64, 99, 1, 0, 1, msg, ms) ||
      q_case(e, 3, 8, 64, 0, 4, 1, 1, 0, msg, ms))
    return 1;
  for (int it = 0; it < (e->quick ? 2 : 10); it++) {
    const int64_t D = Ds[cc_rnd(e, 3)];
    if (q_case(e, 1 + cc_rnd(e, 9), Hs[cc_rnd(e, 3)], D, 2 * cc_rnd(e, D / 2 + 1),
               1 + cc_rnd(e, 50), (int)cc_rnd(e, 2), (int)cc_rnd(e, 2), (int)cc_rnd(e, 2), msg, ms))
      return 1;
  }
  return 0;
}

/* --bench: dsacl-bench's FP8 row at T = 8192 (its second) and its inputs. */
#define Q_ROW(name, mx, t, qt) {mx, t, qt},
static const int64_t q_row[][3] = {CASE_Q_QUANT_ROWS(Q_ROW)};
static int b_q_setup(cc_env *e, int small, void **st) {
  const int64_t *r = q_row[1];
  case_q_quant *c = cc_xmalloc(sizeof *c);
  *c = (case_q_quant){.mx = (int)r[0], .t = small ? r[2] : r[1], .h = 64,
                      .np = small ? 4096 : 65536};
  char msg[256];
  *st = c;
  return case_q_quant_gen_bench(c) ||
         case_q_quant_upload(&(case_dev){e->clctx, e->clq}, c, 0, msg, sizeof msg);
}
static int b_q_run(cc_env *e, void *st, cl_event *done) { return qq_call(e, st, done) != DSA_OK; }

/* ---- K insert / gather -------------------------------------------------------------- */

typedef struct kc {
  uint8_t *img;
  size_t size;
  ref_idx_cache ref;
  cl_mem mem;
  dsa_paged_cache dc;
} kc;

static kc kc_make(cc_env *e, int64_t nb, int32_t bs, int mx) {
  kc c;
  const int64_t stride = (int64_t)bs * (mx ? 68 : 132) + 4 * cc_rnd(e, 3);
  c.size = (size_t)(nb * stride);
  c.img = cc_xmalloc(c.size);
  cc_fill_bytes(e, c.img, c.size);
  c.ref = (ref_idx_cache){c.img, nb, bs, stride, mx};
  c.mem = cc_buf(e, c.size, c.img);
  c.dc = (dsa_paged_cache){.mem = c.mem, .offset = 0, .num_blocks = nb, .block_size = bs,
                           .block_stride = stride,
                           .format = mx ? DSA_CACHE_INDEXER_MXFP4 : DSA_CACHE_INDEXER_FP8};
  return c;
}

/* The insert's case is tools/cases/indexer_quant.c's; the reference runs on
 * a copy of the starting image. */
static int kins_case(cc_env *e, int64_t n, int64_t nb, int32_t bs, int mx, int mode, char *msg,
                     size_t ms) {
  case_k_insert c = {.mx = mx, .e2m1 = mode ? DSA_E2M1_LEGACY : DSA_E2M1_RNE, .n = n, .nb = nb,
                     .bs = bs};
  const case_dev d = {e->clctx, e->clq};
  if (case_k_insert_gen_check(&c, &e->rng) || case_k_insert_upload(&d, &c, 0, msg, ms)) {
    fprintf(stderr, "checkcl: k insert case: %s\n", msg);
    exit(2);
  }
  int rc;
  const dsa_status s_ = case_k_insert_call(e->q, &c, NULL);
  cc_after_call(e);
  if (s_ != DSA_OK) {
    rc = CC_FAIL(msg, ms, "dsa_indexer_k_insert: %s", dsa_last_error());
  } else {
    const size_t size = (size_t)(nb * c.stride);
    uint8_t *want = cc_xmalloc(size);
    memcpy(want, c.cache, size);
    ref_idx_cache rc_ = {want, nb, bs, c.stride, mx};
    const unsigned want_f = ref_indexer_k_insert(&rc_, c.k, 128, c.slots, n, mode);
    rc = case_k_insert_check(&d, &c, want, msg, ms) ||
         case_faults(e->q, want_f, "k insert", msg, ms);
    free(want);
  }
  case_k_insert_free(&c);
  return rc;
}

/* --bench: dsacl-bench's N = 8192 row (its second) and its inputs. */
#define K_ROW(n, qn) {n, qn},
static const int64_t k_row[][2] = {CASE_K_INSERT_ROWS(K_ROW)};
static int b_k_setup(cc_env *e, int small, void **st) {
  case_k_insert *c = cc_xmalloc(sizeof *c);
  const double pool = small ? CASE_K_POOL_BYTES_QUICK : CASE_K_POOL_BYTES;
  *c = (case_k_insert){.n = k_row[1][small], .nb = (int64_t)ceil(pool / 8640)};
  char msg[256];
  *st = c;
  return case_k_insert_gen_bench(c) ||
         case_k_insert_upload(&(case_dev){e->clctx, e->clq}, c, 0, msg, sizeof msg);
}
static int b_k_run(cc_env *e, void *st, cl_event *done) {
  dsa_events ev = {0, NULL, done};
  const dsa_status s = case_k_insert_call(e->q, st, &ev);
  cc_after_call(e);
  return s != DSA_OK;
}
static void b_k_free(void *p) {
  if (!p) return;
  case_k_insert_free(p);
  free(p);
}

static int check_kins(cc_env *e, char *msg, size_t ms) {
  static const int32_t bss[] = {1, 3, 16, 64};
  if (kins_case(e, 1, 1, 1, 0, 0, msg, ms) || kins_case(e, 40, 3, 16, 1, 0, msg, ms)) return 1;
  for (int it = 0; it < (e->quick ? 3 : 12); it++)
    if (kins_case(e, 1 + cc_rnd(e, 80), 1 + cc_rnd(e, 6), bss[cc_rnd(e, 4)], (int)cc_rnd(e, 2),
                  (int)cc_rnd(e, 2), msg, ms))
      return 1;
  return 0;
}

static int kgat_case(cc_env *e, int64_t R, int64_t W, int64_t nb, int32_t bs, int mx, char *msg,
                     size_t ms) {
  kc c = kc_make(e, nb, bs, mx);
  int32_t *bt = cc_xmalloc((size_t)(R * W) * 4), *cu = cc_xmalloc((size_t)(R + 1) * 4);
  for (int64_t i = 0; i < R * W; i++) {
    const int64_t x = cc_rnd(e, 20);
    bt[i] = (int32_t)(x == 0 ? -1 : x == 1 ? nb + cc_rnd(e, 2) : cc_rnd(e, nb));
  }
  cu[0] = 0;
  for (int64_t r = 0; r < R; r++) cu[r + 1] = cu[r] + (int32_t)cc_rnd(e, W * bs + 1);
  const int64_t total = cu[R] + cc_rnd(e, 3);
  const int64_t kb = mx ? 64 : 128;
  const size_t ob = (size_t)(total * kb), sb = (size_t)total * 4;
  uint8_t *out = cc_xmalloc(ob), *want = cc_xmalloc(ob), *sc = cc_xmalloc(sb), *wsc = cc_xmalloc(sb);
  cc_fill_bytes(e, out, ob), cc_fill_bytes(e, sc, sb);
  memcpy(want, out, ob), memcpy(wsc, sc, sb);
  cl_mem bm = cc_buf(e, (size_t)(R * W) * 4, bt), cm = cc_buf(e, (size_t)(R + 1) * 4, cu);
  cl_mem om = cc_buf(e, ob, out), smm = cc_buf(e, sb, sc);
  dsa_tensor btt = cc_t(bm, DSA_I32, 2, (int64_t[]){R, W});
  dsa_tensor cut = cc_t(cm, DSA_I32, 1, (int64_t[]){R + 1});
  dsa_tensor ot = cc_t(om, mx ? DSA_E2M1X2 : DSA_E4M3, 2, (int64_t[]){total, kb});
  dsa_tensor st = mx ? cc_t(smm, DSA_UE8M0, 2, (int64_t[]){total, 4})
                     : cc_t(smm, DSA_F32, 1, (int64_t[]){total});
  int rc;
  dsa_status s_ = dsa_indexer_k_gather(e->q, &cut, &btt, &c.dc, &ot, &st, NULL);
  cc_after_call(e);
  if (s_ != DSA_OK) {
    rc = CC_FAIL(msg, ms, "dsa_indexer_k_gather: %s", dsa_last_error());
  } else {
    const uint32_t f = cc_faults(e);
    const unsigned want_f =
        ref_indexer_k_gather(&c.ref, bt, R, W, W, 1, cu, 1, total, want, kb, wsc, 4);
    char what[128];
    snprintf(what, sizeof what, "k_gather R=%lld W=%lld bs=%d mx=%d", (long long)R,
             (long long)W, bs, mx);
    char w2[160];
    cc_read(e, om, ob, out);
    snprintf(w2, sizeof w2, "%s k_out", what);
    rc = cc_cmp_bytes(out, want, ob, 1, w2, msg, ms);
    if (!rc) {
      cc_read(e, smm, sb, sc);
      snprintf(w2, sizeof w2, "%s k_scale", what);
      rc = cc_cmp_bytes(sc, wsc, sb, 4, w2, msg, ms);
    }
    if (!rc && f != want_f) rc = CC_FAIL(msg, ms, "%s: faults 0x%x, want 0x%x", what, f, want_f);
  }
  cc_free(&bm), cc_free(&cm), cc_free(&om), cc_free(&smm), cc_free(&c.mem);
  free(bt), free(cu), free(out), free(want), free(sc), free(wsc), free(c.img);
  return rc;
}

static int check_kgat(cc_env *e, char *msg, size_t ms) {
  static const int32_t bss[] = {1, 4, 16, 64};
  if (kgat_case(e, 1, 1, 1, 1, 0, msg, ms) || kgat_case(e, 3, 4, 6, 16, 1, msg, ms)) return 1;
  for (int it = 0; it < (e->quick ? 3 : 12); it++)
    if (kgat_case(e, 1 + cc_rnd(e, 4), 1 + cc_rnd(e, 4), 1 + cc_rnd(e, 8), bss[cc_rnd(e, 4)],
                  (int)cc_rnd(e, 2), msg, ms))
      return 1;
  return 0;
}

const cc_op cc_ops_indexer_quant[] = {
    {"dsa_indexer_q_quant", check_q, "T=8192 H=64 D=128 R=64", b_q_setup, b_q_run, qq_free},
    {"dsa_indexer_k_insert", check_kins, "N=8192 FP8", b_k_setup, b_k_run, b_k_free},
    {"dsa_indexer_k_gather", check_kgat, "", NULL, NULL, NULL},
    {0}};
