/* serving-loop-check: examples/serving_loop.c run with hooks that keep a host
 * image of every cache (each insert the loop makes replayed through the C
 * reference of tests/ref) and check every decode step against the reference:
 * indexer Q quant bytes, logits (max |d| / max |ref| <= 1e-5, identical -inf
 * mask), top-k of the device's logits, global C4 slots, SWA slots, q norm
 * and the SWA insert of the new tokens (bytes), and the attention output
 * against an fp64 reference over the device's (checked) indices (SPEC.md's
 * tolerance: |d| <= 1e-2 max(1, |ref|) elementwise, relative L2 <= 4e-3, lse
 * within 1e-4, relative above |lse| = 16: ref_lse_tol), and the output
 * quantized for the O projection (inverse RoPE + FP8 of the device's
 * attention output: bytes and scales). At the end the three device caches
 * must equal their images byte for byte. The loop runs on
 * the program's own cl_context and queue.
 *
 *   serving-loop-check [--requests N] [--batch B] [--seed S]
 * Exit 0: all checks passed; 1: a check failed; 77: no OpenCL device. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"
#include "ref_index_helpers.h"
#include "ref_indexer_logits.h"
#include "ref_indexer_quant.h"
#include "ref_mla_qnorm.h"
#include "ref_output_quant.h"
#include "ref_sparse_mla.h"
#include "ref_topk.h"
#include "serving_loop.h"

typedef struct checker {
  cl_command_queue clq;
  int64_t heads;
  /* Host images of the caches, grown on first use to the loop's pools. */
  uint8_t *img[3];
  int64_t nb[3];
  int checks, failures, steps;
} checker;

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) {
    fprintf(stderr, "serving-loop-check: out of memory\n");
    exit(1);
  }
  return p;
}

static void check(checker *c, int ok, int step, const char *what, const char *detail) {
  c->checks++;
  if (!ok) {
    c->failures++;
    if (c->failures <= 20) printf("FAIL step %d: %s %s\n", step, what, detail ? detail : "");
  }
}

static void read_t(checker *c, const dsa_tensor *t, void *dst) {
  size_t n = dsa_dtype_size(t->dtype);
  for (int i = 0; i < t->ndim; i++) n *= (size_t)t->shape[i];
  if (clEnqueueReadBuffer(c->clq, t->mem, CL_TRUE, t->offset, n, dst, 0, NULL, NULL) != CL_SUCCESS) {
    fprintf(stderr, "serving-loop-check: clEnqueueReadBuffer failed\n");
    exit(1);
  }
}

/* The pools' sizes are the loop's; the first insert into a cache tells the
 * checker nothing about them, so the images are made for the largest pool
 * the default config may use and grown when a slot lies beyond. */
static void ensure(checker *c, int which, int64_t slot) {
  const int64_t stride = which == 2 ? SERVE_IDX_STRIDE : SERVE_MLA_STRIDE;
  const int64_t need = slot / (which ? SERVE_CMP_BS : SERVE_SWA_BS) + 1;
  if (need <= c->nb[which]) return;
  int64_t nb = need * 2;
  uint8_t *p = realloc(c->img[which], (size_t)(nb * stride));
  if (!p) exit(1);
  memset(p + c->nb[which] * stride, 0, (size_t)((nb - c->nb[which]) * stride));
  c->img[which] = p, c->nb[which] = nb;
}

static void on_insert(void *user, int which, const uint16_t *rows, int dim, const int64_t *slots,
                      int64_t n) {
  checker *c = user;
  for (int64_t i = 0; i < n; i++) ensure(c, which, slots[i]);
  if (which == 2) {
    ref_idx_cache rc = {c->img[2], c->nb[2], SERVE_CMP_BS, SERVE_IDX_STRIDE, 0};
    ref_indexer_k_insert(&rc, rows, dim, slots, n, REF_E2M1_RNE);
  } else {
    ref_mla_cache rc = {c->img[which], c->nb[which], which ? SERVE_CMP_BS : SERVE_SWA_BS,
                        SERVE_MLA_STRIDE};
    ref_mla_insert(&rc, rows, dim, slots, n);
  }
}

static void on_step(void *user, const serving_step *s) {
  checker *c = user;
  c->steps++;
  const int64_t T = s->T, H = c->heads, cols = s->logits_cols, K = s->topk->shape[1];
  const int64_t W = s->swa_slots->shape[1];
  const size_t iq_n = (size_t)(T * SERVE_IDX_HEADS * SERVE_IDX_DIM);
  const size_t q_n = (size_t)(T * H * SERVE_MLA_DIM);
  char msg[160];
  for (int64_t t = 0; t < T; t++) ensure(c, 0, s->kv_slots[t]);

  /* 1. indexer Q RoPE + FP8 quant */
  uint8_t *iq = xmalloc(iq_n), *want_q = xmalloc(iq_n);
  float *iw = xmalloc((size_t)(T * SERVE_IDX_HEADS) * 4);
  float *want_w = xmalloc((size_t)(T * SERVE_IDX_HEADS) * 4);
  dsa_indexer_q_quant_params qp;
  dsa_indexer_q_quant_params_default(&qp);
  ref_indexer_q_args qa = {T, SERVE_IDX_HEADS, SERVE_IDX_DIM, SERVE_ROPE_DIM, s->cos_rows,
                           s->positions, 0, 1, s->index_q, SERVE_IDX_HEADS * SERVE_IDX_DIM,
                           SERVE_IDX_DIM, s->cos_sin, 0, SERVE_ROPE_DIM, s->index_w, 1,
                           SERVE_IDX_HEADS, 1, qp.softmax_scale, qp.head_scale, 0, 0, want_q,
                           SERVE_IDX_HEADS * SERVE_IDX_DIM, SERVE_IDX_DIM, NULL, 0, 0, want_w,
                           SERVE_IDX_HEADS, 1};
  ref_indexer_q(&qa);
  read_t(c, s->iq_fp8, iq);
  read_t(c, s->iq_weights, iw);
  check(c, !memcmp(iq, want_q, iq_n), s->step, "indexer q", "bytes differ");
  check(c, !memcmp(iw, want_w, (size_t)(T * SERVE_IDX_HEADS) * 4), s->step, "indexer weights",
        "differ");

  /* 2. paged logits (of the device's q and weights, checked above) */
  float *lg = xmalloc((size_t)(T * cols) * 4);
  double *want_lg = xmalloc((size_t)(T * cols) * sizeof(double));
  ref_il_cache ic = {c->img[2], c->nb[2], SERVE_CMP_BS, SERVE_IDX_STRIDE};
  ref_paged_mqa_logits(0, T, 1, SERVE_IDX_HEADS, iq, NULL, &ic, iw, s->context_lens, 2,
                       s->cmp_table, s->cmp_w, cols, 1, want_lg);
  read_t(c, s->logits, lg);
  double maxref = 0, maxd = 0;
  int64_t mask_bad = 0;
  for (int64_t i = 0; i < T * cols; i++) {
    double w = want_lg[i], g = lg[i];
    if (isinf(w)) {
      mask_bad += !(isinf(g) && g < 0);
    } else if (!isfinite(g)) {
      mask_bad++;
    } else {
      maxref = fmax(maxref, fabs(w));
      maxd = fmax(maxd, fabs(g - w));
    }
  }
  snprintf(msg, sizeof msg, "mask differs in %lld, max |d|/max |ref| %.2e", (long long)mask_bad,
           maxref > 0 ? maxd / maxref : maxd);
  check(c, mask_bad == 0 && maxd <= 1e-5 * fmax(maxref, 1e-30), s->step, "logits", msg);

  /* 3. top-k of the device's logits */
  int32_t *tk = xmalloc((size_t)(T * K) * 4), *want_tk = xmalloc((size_t)(T * K) * 4);
  ref_topk_decode(lg, T, cols, cols, s->context_lens, 2, 1, (int32_t)K, want_tk, K, 1);
  read_t(c, s->topk, tk);
  check(c, !memcmp(tk, want_tk, (size_t)(T * K) * 4), s->step, "top-k", "indices differ");

  /* 4. global C4 slots; 5. SWA slots */
  ref_table cmp_rt = {s->cmp_table, T, s->cmp_w, s->cmp_w};
  ref_table swa_rt = {s->swa_table, T, s->swa_w, s->swa_w};
  int32_t *gi = xmalloc((size_t)(T * K) * 4), *gl = xmalloc((size_t)T * 4);
  int32_t *want_gi = xmalloc((size_t)(T * K) * 4), *want_gl = xmalloc((size_t)T * 4);
  ref_global_topk(tk, K, K, s->token_to_req, cmp_rt, NULL, SERVE_CMP_BS, want_gi, K, want_gl, T);
  read_t(c, s->c4_slots, gi);
  read_t(c, s->c4_lens, gl);
  check(c, !memcmp(gi, want_gi, (size_t)(T * K) * 4) && !memcmp(gl, want_gl, (size_t)T * 4),
        s->step, "global C4 slots", "differ");
  int32_t *si = xmalloc((size_t)(T * W) * 4), *sl = xmalloc((size_t)T * 4);
  int32_t *want_si = xmalloc((size_t)(T * W) * 4), *want_sl = xmalloc((size_t)T * 4);
  ref_swa_indices(s->positions, s->token_to_req, NULL, swa_rt, (int32_t)W, SERVE_SWA_BS,
                  want_si, W, W, want_sl, T);
  read_t(c, s->swa_slots, si);
  read_t(c, s->swa_lens, sl);
  check(c, !memcmp(si, want_si, (size_t)(T * W) * 4) && !memcmp(sl, want_sl, (size_t)T * 4),
        s->step, "SWA slots", "differ");

  /* 6. q RMSNorm + RoPE; the new tokens' kv into the SWA image */
  uint16_t *qn = xmalloc(q_n * 2), *want_qn = xmalloc(q_n * 2);
  dsa_mla_qnorm_rope_kv_insert_params np;
  dsa_mla_qnorm_rope_kv_insert_params_default(&np);
  ref_mla_cache swa_rc = {c->img[0], c->nb[0], SERVE_SWA_BS, SERVE_MLA_STRIDE};
  ref_mla_qnorm_rope_kv_insert(&swa_rc, s->q, H * SERVE_MLA_DIM, SERVE_MLA_DIM, want_qn,
                               H * SERVE_MLA_DIM, SERVE_MLA_DIM, H, s->kv, SERVE_MLA_DIM,
                               s->positions, s->cos_sin, SERVE_ROPE_DIM, s->cos_rows,
                               s->kv_slots, np.eps, T);
  read_t(c, s->q_normed, qn);
  check(c, !memcmp(qn, want_qn, q_n * 2), s->step, "q norm", "bytes differ");

  /* 7. attention with the sink, fp64, over the device's indices */
  uint16_t *out = xmalloc(q_n * 2);
  float *lse = xmalloc((size_t)(T * H) * 4);
  double *want = xmalloc(q_n * sizeof(double)), *want_lse = xmalloc((size_t)(T * H) * 8);
  ref_mla_cache c4_rc = {c->img[1], c->nb[1], SERVE_CMP_BS, SERVE_MLA_STRIDE};
  ref_mla_set rm = {&swa_rc, si, W, W, 1, sl}, rx = {&c4_rc, gi, K, K, 1, gl};
  dsa_sparse_params ap;
  dsa_sparse_params_default(&ap);
  ref_sparse_mla_decode(qn, T, H, H * SERVE_MLA_DIM, SERVE_MLA_DIM, &rm, &rx, s->sink,
                        ap.softmax_scale, want, want_lse);
  read_t(c, s->out, out);
  read_t(c, s->lse, lse);
  int64_t bad = 0, lse_bad = 0;
  double d2 = 0, r2 = 0;
  for (size_t i = 0; i < q_n; i++) {
    double g = ref_bf16_to_float(out[i]), w = want[i];
    bad += !(fabs(g - w) <= 1e-2 * fmax(1.0, fabs(w)));
    d2 += (g - w) * (g - w), r2 += w * w;
  }
  for (int64_t i = 0; i < T * H; i++) {
    double g = lse[i], w = want_lse[i];
    lse_bad += !(isinf(w) ? isinf(g) && (g < 0) == (w < 0) : fabs(g - w) <= ref_lse_tol(w));
  }
  const double rel = r2 > 0 ? sqrt(d2 / r2) : sqrt(d2);
  snprintf(msg, sizeof msg, "%lld values and %lld lse beyond tolerance, rel L2 %.2e",
           (long long)bad, (long long)lse_bad, rel);
  check(c, bad == 0 && lse_bad == 0 && rel <= 4e-3, s->step, "attention", msg);

  /* 8. inverse RoPE + FP8 quant of the device's attention output (exact) */
  const int64_t G = s->o_fp8->shape[0], hpg = H / G, Tp = s->o_scales->shape[2];
  uint8_t *of = xmalloc(q_n), *want_of = xmalloc(q_n);
  const size_t sc_n = (size_t)(G * hpg * 4 * Tp);
  float *os = xmalloc(sc_n * 4), *want_os = xmalloc(sc_n * 4);
  ref_inv_rope_fp8_quant(out, H * SERVE_MLA_DIM, SERVE_MLA_DIM, T, H, s->positions, s->cos_sin,
                         SERVE_ROPE_DIM, s->cos_rows, G, want_of, T * hpg * SERVE_MLA_DIM,
                         hpg * SERVE_MLA_DIM, want_os, 0, hpg * 4 * Tp, Tp, 1, Tp);
  read_t(c, s->o_fp8, of);
  read_t(c, s->o_scales, os);
  check(c, !memcmp(of, want_of, q_n) && !memcmp(os, want_os, sc_n * 4), s->step,
        "output quant", "bytes or scales differ");
  free(of), free(want_of), free(os), free(want_os);

  free(iq), free(want_q), free(iw), free(want_w), free(lg), free(want_lg), free(tk);
  free(want_tk), free(gi), free(gl), free(want_gi), free(want_gl), free(si), free(sl);
  free(want_si), free(want_sl), free(qn), free(want_qn), free(out), free(lse), free(want);
  free(want_lse);
}

int main(int argc, char **argv) {
  serving_config cfg;
  serving_config_default(&cfg);
  /* Seconds on a 2-core CPU device; the GPU run takes the defaults. */
  cfg.requests = 6, cfg.max_batch = 3, cfg.max_prompt = 160, cfg.heads = 8, cfg.topk = 32;
  cfg.window = 32;
  if (getenv("SERVING_LOOP_FULL")) serving_config_default(&cfg);
  for (int i = 1; i + 1 < argc; i += 2) {
    const int v = atoi(argv[i + 1]);
    if (!strcmp(argv[i], "--requests")) cfg.requests = v;
    else if (!strcmp(argv[i], "--batch")) cfg.max_batch = v;
    else if (!strcmp(argv[i], "--seed")) cfg.seed = (uint64_t)v;
    else {
      fprintf(stderr, "usage: serving-loop-check [--requests N] [--batch B] [--seed S]\n");
      return 2;
    }
  }
  cl_context clctx;
  cl_command_queue clq;
  cl_device_id dev;
  int rc = serving_open_cl(&clctx, &clq, &dev);
  if (rc) {
    fprintf(stderr, "serving-loop-check: %s\n", rc == 77 ? "no OpenCL device" : "OpenCL setup failed");
    return rc;
  }
  dsa_context_options o;
  dsa_context_options_default(&o);
  dsa_context *ctx = NULL;
  dsa_queue *q = NULL;
  dsa_status st = dsa_context_create_from_cl(&ctx, clctx, dev, &o);
  if (st == DSA_OK) st = dsa_queue_create_from_cl(&q, ctx, clq);
  checker c;
  memset(&c, 0, sizeof c);
  c.clq = clq, c.heads = cfg.heads;
  serving_hooks hooks = {&c, on_insert, on_step};
  serving_stats stats;
  serving_caches caches;
  if (st == DSA_OK) st = serving_loop_run(q, &cfg, &hooks, &stats, &caches);
  if (st != DSA_OK) {
    printf("FAIL: %s: %s\n", dsa_status_name(st), dsa_last_error());
    return 1;
  }
  /* The caches, whole, against their images. */
  const dsa_paged_cache *cc[3] = {&caches.swa, &caches.c4, &caches.ik};
  static const char *const names[3] = {"SWA cache", "C4 cache", "indexer cache"};
  for (int w = 0; w < 3; w++) {
    const size_t bytes = (size_t)(cc[w]->num_blocks * cc[w]->block_stride);
    uint8_t *dev_img = xmalloc(bytes);
    clEnqueueReadBuffer(clq, cc[w]->mem, CL_TRUE, 0, bytes, dev_img, 0, NULL, NULL);
    if (c.nb[w] < cc[w]->num_blocks) ensure(&c, w, cc[w]->num_blocks * cc[w]->block_size - 1);
    check(&c, !memcmp(dev_img, c.img[w], bytes), -1, names[w], "differs from its image");
    free(dev_img);
  }
  printf("serving-loop-check on %s: %d requests, %d steps (batch up to %d), %lld tokens "
         "decoded, %lld prefilled: %d checks, %d failed\n",
         dsa_context_device_name(ctx), stats.requests_done, stats.steps, stats.max_batch_seen,
         (long long)stats.tokens_decoded, (long long)stats.tokens_prefilled, c.checks,
         c.failures);
  serving_caches_release(&caches);
  for (int w = 0; w < 3; w++) free(c.img[w]);
  dsa_queue_destroy(&q);
  dsa_context_destroy(&ctx);
  clReleaseCommandQueue(clq);
  clReleaseContext(clctx);
  const int ok = c.failures == 0 && c.steps == stats.steps && stats.steps > 0 &&
                 stats.requests_done == cfg.requests;
  printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
