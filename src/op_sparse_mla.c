/* Sparse MLA attention: bf16 sparse attention, sparse MLA decode (fused and
 * two-stage). Kernels: cl/sparse_mla.cl. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "dsacl/sparse_mla.h"

#define MLA_DIM 512
/* Kernel geometry (cl/sparse_mla.cl), passed as build options: the portable
 * attention work-group (WG items: one token x HG heads, tiles of NT entries,
 * DSL d-slices, PSTRIDE partials per head), GROWS rows per gather group, the
 * NVIDIA mma path's SM_NW warps, SM_NT entries per tile and its local row
 * pitches SM_KDP / SM_KVP / SM_PP, and the tile kernels' (cl/dsa_tile.h)
 * MT_WG items for one token x MT_HG heads, tiles of MT_NT entries, MT_KDP
 * words per staged key row (256 dim pairs + 4: fragment loads of 8 or 16
 * rows hit distinct banks). */
#define WG 256
#define HG 16
#define NT 8
#define DSL 32      /* QK items a head pair: two heads x 16 dims an item */
#define PSTRIDE 256 /* NT * DSL partials a head (the kernel swizzles, no padding) */
_Static_assert(PSTRIDE == NT * DSL, "PSTRIDE");
/* NVIDIA (cl_nv_compiler_options): the portable attention kernels are built
 * without reqd_work_group_size and with -cl-nv-maxrregcount=SA_NV_MAXRREG
 * (dsa__sparse_mla_device_options; the option does not bind a kernel with
 * the attribute, whose PTX .reqntid lets ptxas choose alone): at 128 two
 * groups of 256 share an SM. ptxas gave the ring kernel 153 registers with
 * the attribute and its _lm32 twin 163 without the option, one group an SM
 * (H100, T=64 H=64: 450 and 427 us, 313 and 327 with the cap;
 * docs/PERFORMANCE.md). 0: off. */
#ifndef SA_NV_MAXRREG
#define SA_NV_MAXRREG 128
#endif
#define GROWS 8
#define SM_NW 8
#define SM_NT 16
#define SM_KDP 260
#define SM_KVP 520
#define SM_PP 16
#define MT_WG 256
#define MT_HG 32
#define MT_NT 16
#define MT_KDP 260
/* The fused tile kernel's ring of raw tiles (cp.async stages): two fit
 * 48 KiB next to the bf16 tile (fd_local_bytes). */
#define MT_ST 2
#define FD_EB 592 /* ring bytes an entry: 576 data + 8 scale bytes, 16-byte pieces */
/* 1: the fused kernel takes the softmax's max by sub-group shuffles where
 * the back-end has them (one barrier a tile fewer), as the bf16 kernel
 * always does. With one group an SM (214 registers) it was slower on the
 * H200 (T=64 H=64: 142.9 vs 132.5 us); with two (the 128-register cap,
 * session 18) 1 % faster at every shape (T=64 H=64 105.4-106.0 against
 * 106.6-107.1 us, T=128 H=128 577.6 against 583.4; docs/PERFORMANCE.md). */
#define FD_SHFL 1
/* The fused kernel's copy records are written FD_NB tiles at a time, every
 * FD_NB tiles (cl/sparse_mla.cl, fd_record). */
#define FD_NB 2
const char dsa__defines_sparse_mla[] =
    DSA_KDEF(MLA_DIM) DSA_KDEF(WG) DSA_KDEF(HG) DSA_KDEF(NT) DSA_KDEF(DSL) DSA_KDEF(PSTRIDE)
        DSA_KDEF(GROWS) DSA_KDEF(SM_NW) DSA_KDEF(SM_NT) DSA_KDEF(SM_KDP) DSA_KDEF(SM_KVP)
            DSA_KDEF(SM_PP) DSA_KDEF(MT_WG) DSA_KDEF(MT_HG) DSA_KDEF(MT_NT) DSA_KDEF(MT_KDP)
                DSA_KDEF(MT_ST) DSA_KDEF(FD_SHFL) DSA_KDEF(FD_EB) DSA_KDEF(FD_NB);
/* The attention kernels' NVIDIA register cap (SA_NV_MAXRREG above).
 * An emulated matrix back-end (DSACL_MMA / DSACL_EMULATE=amd on Intel's
 * sub-groups: a test device, never a fast one) builds the program
 * unoptimised, as the logits program does (src/op_indexer_logits.c): its
 * tile kernels unroll their MMAs, each emulated as shuffles and FMAs, and
 * Intel's CPU compiler (2026.2) spent 136 CPU s on the nv-mma program and
 * 186 on the amd-mfma one at its default -O, where test_sparse_mla then
 * ran in 13 and 20 s; with -cl-opt-disable the whole test took 46 and 43
 * CPU s (the same 624 checks passing; 2026-11-27, machine under load). */
const char *dsa__sparse_mla_device_options(const dsa_caps *caps, unsigned enabled) {
  bool emu = false;
  (void)dsa__tile_backend(caps, enabled, &emu);
  if (emu) return " -cl-opt-disable";
  if (!caps->nv_compiler_options || !SA_NV_MAXRREG) return "";
  return " -DSA_NV_MAXRREG=" DSA_KSTR_(SA_NV_MAXRREG) " -cl-nv-maxrregcount=" DSA_KSTR_(
      SA_NV_MAXRREG);
}
#define WS_ALIGN 256
/* Kernel index arithmetic is 32-bit: widths and T * Ktot stay below this. */
#define MAX_WIDTH ((int64_t)1 << 24)
#define MAX_ROWS (((int64_t)1 << 31) - 1)

/* Local memory of each attention kernel, from the constants above. */
static size_t attn_local_bytes(int nbuf) {
  return (size_t)nbuf * NT * MLA_DIM * 2 + (size_t)HG * PSTRIDE * 4 + (size_t)HG * NT * 4 * 2 +
         (size_t)HG * 4 * 2 + (size_t)nbuf * NT * 4;
}
static size_t mma_local_bytes(void) {
  return (size_t)SM_NT * SM_KDP * 4 + (size_t)SM_NT / 2 * SM_KVP * 4 +
         (size_t)SM_NW * HG * SM_PP * 4 + (size_t)2 * HG * 8 * 4 + (size_t)HG * 4 * 2 +
         (size_t)SM_NT * 4;
}

/* The tile kernels on this context's matrix back-end (MT_LOCALS in
 * cl/sparse_mla.cl): the tile buffer (kd and vt, or the query rows, or the
 * bf16 output), the query rows again without A in registers, P hi and lo,
 * the QK partials of MT_DS dim slices, the logits, alpha, 1/l, the mask. */
typedef struct mt_geom {
  const dsa_tile_backend *be;
  bool emu;
} mt_geom;
static mt_geom mt_geometry(const dsa_context *c) {
  mt_geom g;
  g.be = &dsa__tile_backends[dsa__tile_backend(&c->caps, c->caps_enabled, &g.emu)];
  return g;
}
static size_t mt_local_bytes(const mt_geom *g) {
  const size_t units = MT_WG / (size_t)g->be->lanes, rb = MT_HG / (size_t)g->be->m;
  const size_t kg = g->be->a_regs ? 1 : MT_NT / (size_t)g->be->n;
  const size_t ds = units / (rb * kg);
  const size_t kv = (size_t)MT_NT * MT_KDP + (size_t)MLA_DIM / 16 * (16 * (MT_NT / 2) + 8);
  const size_t kbuf = kv > (size_t)MT_HG * MT_KDP ? kv : (size_t)MT_HG * MT_KDP;
  const size_t qst = g->be->a_regs ? 4 : (size_t)MT_HG * MT_KDP;
  return 4 * (kbuf + qst + 2 * (size_t)MT_HG * (MT_NT / 2 + 4) + ds * MT_HG * MT_NT +
              (size_t)MT_HG * MT_NT + 2 * (size_t)MT_HG + MT_NT);
}

/* The fused tile kernel (FD_LOCALS): max(the bf16 tile and the ring, the
 * query rows, the bf16 output rows), the query rows again without A in
 * registers, the partials (P hi and lo share their space), the logits,
 * alpha, 1/l, the ring's and the tile's masks. */
static size_t fd_local_bytes(const mt_geom *g) {
  const size_t units = MT_WG / (size_t)g->be->lanes, rb = MT_HG / (size_t)g->be->m;
  const size_t kg = g->be->a_regs ? 1 : MT_NT / (size_t)g->be->n;
  const size_t ds = units / (rb * kg);
  size_t kbuf = (size_t)MT_NT * MT_KDP + (size_t)MT_ST * MT_NT * FD_EB / 4;
  if (kbuf < (size_t)MT_HG * MT_KDP) kbuf = (size_t)MT_HG * MT_KDP;
  if (kbuf < (size_t)MT_HG * MLA_DIM / 2) kbuf = (size_t)MT_HG * MLA_DIM / 2;
  const size_t qst = g->be->a_regs ? 4 : (size_t)MT_HG * MT_KDP;
  /* P hi and lo share the logits' space (FD_SHFL on a back-end with
   * sub-group shuffles) or the partials'. */
  const size_t pw = 2 * (size_t)MT_HG * (MT_NT / 2 + 4);
  size_t part = ds * MT_HG * MT_NT, sl = (size_t)MT_HG * MT_NT;
  if (g->be->lanes >= 8 && FD_SHFL)
    sl = sl > pw ? sl : pw;
  else
    part = part > pw ? part : pw;
  /* + the copy records: FD_NB + 1 tiles' 16 (data, scale) addresses and
   * flags (FD_RS in cl/sparse_mla.cl). */
  return 4 * (kbuf + qst + part + sl + 2 * (size_t)MT_HG + (MT_ST + 1) * MT_NT) +
         (16 + 4) * (FD_NB + 1) * (size_t)MT_NT;
}

static const char *refuse_tile(const dsa_context *c, const void *shape, char *buf, size_t n) {
  (void)shape;
  const mt_geom g = mt_geometry(c);
  return dsa__refuse_local_mem(c, mt_local_bytes(&g), buf, n);
}
static const char *refuse_fd(const dsa_context *c, const void *shape, char *buf, size_t n) {
  (void)shape;
  const mt_geom g = mt_geometry(c);
  return dsa__refuse_local_mem(c, fd_local_bytes(&g), buf, n);
}
static const char *refuse_mma(const dsa_context *c, const void *shape, char *buf, size_t n) {
  (void)shape;
  return dsa__refuse_local_mem(c, mma_local_bytes(), buf, n);
}
static const char *refuse_ring(const dsa_context *c, const void *shape, char *buf, size_t n) {
  (void)shape;
  return dsa__refuse_local_mem(c, attn_local_bytes(3), buf, n);
}
static const char *refuse_1buf(const dsa_context *c, const void *shape, char *buf, size_t n) {
  (void)shape;
  return dsa__refuse_local_mem(c, attn_local_bytes(1), buf, n);
}

/* Best first: the tile kernels on the context's matrix back-end, the NVIDIA
 * tensor-core kernels (inline PTX), then the portable kernel with a ring of
 * three tile buffers (pipelined phases), then its single-buffer twin for
 * 32 KiB devices. */
enum { V_TILE, V_MMA, V_PORTABLE, V_LM32 };
#define SA_VARIANTS(REFUSE_TILE, TILE_NOTE)                                                 \
  {"tile", 0, REFUSE_TILE, TILE_NOTE}, {"nv-mma", DSA_CAP_NV_PTX, refuse_mma, NULL},        \
      {"portable", 0, refuse_ring, NULL}, {"portable-lm32", 0, refuse_1buf, NULL}
DSA_VARIANT_TABLE(dsa__variants_sparse_attn_bf16, "dsa_sparse_attn_bf16",
                  SA_VARIANTS(refuse_tile, "the context's matrix back-end"));
/* The fused decode's shape, for the route's refusal: tokens and the sets'
 * widths. */
typedef struct mla_shape {
  int64_t t, k1, k2;
} mla_shape;
static uint64_t route_bytes(int64_t t, int64_t k1, int64_t k2);
/* "two-stage": without a tile or tensor-core kernel, the fused decode runs
 * as the two-stage form through the queue's scratch (gather-pack into bf16
 * rows, then dsa_sparse_attn_bf16's pick): the gather dequantizes each entry
 * once a token with many small work-groups, the portable fused kernel once
 * per HG-head group inside its tile loop, and the round trip through the
 * workspace costs less than that at every shape measured (NVIDIA H100,
 * DSACL_FORCE_PORTABLE=1, K=128+512, T=64: H=16 fused 232.9 vs two-stage
 * 209.6 us, H=32 209.2 vs 209.4 [the same within noise], H=64 310.8 vs
 * 271.3; at 32 KiB [_lm32 twins] H=64 324.8 vs 283.9;
 * docs/PERFORMANCE.md). Refused where no portable bf16 attention fits, where
 * the workspace would exceed ROUTE_MAX_BYTES (the fused kernels need none),
 * and under DSACL_MLA_TWO_STAGE=off (tests: the fused portable kernels). */
#define ROUTE_MAX_BYTES ((uint64_t)1 << 30)
/* DSACL_MLA_TWO_STAGE, read when the context is made (as DSACL_TOPK). */
void dsa__mla_route_env(dsa_context *c) {
  const char *e = getenv("DSACL_MLA_TWO_STAGE");
  c->mla_route_off = e && (!strcmp(e, "off") || !strcmp(e, "0"));
}
static const char *refuse_route(const dsa_context *c, const void *shape, char *buf, size_t n) {
  const char *r = dsa__refuse_local_mem(c, attn_local_bytes(1), buf, n);
  if (r) return r;
  if (c->mla_route_off) return "DSACL_MLA_TWO_STAGE=off";
  if (!shape) return NULL;
  const mla_shape *s = shape;
  if (route_bytes(s->t, s->k1, s->k2) > ROUTE_MAX_BYTES) {
    snprintf(buf, n, "the workspace for T = %lld, K = %lld exceeds %llu bytes", (long long)s->t,
             (long long)(s->k1 + s->k2), (unsigned long long)ROUTE_MAX_BYTES);
    return buf;
  }
  return NULL;
}
/* Best first: the tile kernel, the NVIDIA tensor-core kernel, the route
 * through the two-stage form (above), the portable kernels. */
enum { VF_TILE, VF_MMA, VF_ROUTE, VF_PORTABLE, VF_LM32 };
DSA_VARIANT_TABLE(dsa__variants_sparse_mla_decode, "dsa_sparse_mla_decode",
                  {"tile", 0, refuse_fd, "the context's matrix back-end, cp.async ring"},
                  {"nv-mma", DSA_CAP_NV_PTX, refuse_mma, NULL},
                  {"two-stage", 0, refuse_route,
                   "a workspace <= 1 GiB: gather, then dsa_sparse_attn_bf16's pick, through "
                   "the queue's scratch"},
                  {"portable", 0, refuse_ring, NULL}, {"portable-lm32", 0, refuse_1buf, NULL});
/* The two-stage form's gather is portable; its attention is the bf16
 * kernel's table. */
DSA_VARIANT_TABLE(dsa__variants_sparse_mla_decode_two_stage, "dsa_sparse_mla_decode_two_stage",
                  {"gather+bf16", 0, NULL, "then dsa_sparse_attn_bf16's pick"});

void dsa_sparse_params_default(dsa_sparse_params *p) {
  if (!p) return;
  memset(p, 0, sizeof *p);
  p->softmax_scale = (float)(1.0 / sqrt((double)MLA_DIM));
}

static dsa_status check_params(const dsa_sparse_params *p, const char *op) {
  if (!p) return DSA_OK;
  if (!isfinite(p->softmax_scale))
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, "%s: p->softmax_scale = %g must be finite", op,
                     (double)p->softmax_scale);
  if (p->flags != 0)
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, "%s: p->flags = 0x%x, must be 0", op, p->flags);
  return DSA_OK;
}

/* query [T, H, 512] bf16, out likewise, attn_sink [H] f32, lse [T, H] f32. */
static dsa_status check_qio(const dsa_tensor *query, const dsa_tensor *attn_sink,
                            const dsa_tensor *out, const dsa_tensor *lse, const char *op) {
  DSA_CHECK(dsa__check_tensor(query, op, "query", DSA_BF16, 3));
  DSA_CHECK(dsa__check_dim(query, op, "query", 2, MLA_DIM));
  DSA_CHECK(dsa__check_unit_inner(query, op, "query"));
  const int64_t t = query->shape[0], h = query->shape[1];
  if (h < 1 || h > MAX_WIDTH)
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, "%s: query has %lld heads, must be >= 1", op,
                     (long long)h);
  if (t > MAX_ROWS)
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, "%s: query has too many tokens (%lld)", op,
                     (long long)t);
  if (attn_sink) {
    DSA_CHECK(dsa__check_tensor(attn_sink, op, "attn_sink", DSA_F32, 1));
    DSA_CHECK(dsa__check_dim(attn_sink, op, "attn_sink", 0, h));
  }
  DSA_CHECK(dsa__check_tensor(out, op, "out", DSA_BF16, 3));
  DSA_CHECK(dsa__check_dim(out, op, "out", 0, t));
  DSA_CHECK(dsa__check_dim(out, op, "out", 1, h));
  DSA_CHECK(dsa__check_dim(out, op, "out", 2, MLA_DIM));
  DSA_CHECK(dsa__check_unit_inner(out, op, "out"));
  if (lse) {
    DSA_CHECK(dsa__check_tensor(lse, op, "lse", DSA_F32, 2));
    DSA_CHECK(dsa__check_dim(lse, op, "lse", 0, t));
    DSA_CHECK(dsa__check_dim(lse, op, "lse", 1, h));
  }
  return DSA_OK;
}

/* indices [T, K] i32 (K < 2^24), lens [T] i32 (NULL allowed when lens_opt). */
static dsa_status check_index(const dsa_tensor *idx, const dsa_tensor *lens, int lens_opt,
                              int64_t t, const char *op, const char *iname, const char *lname) {
  DSA_CHECK(dsa__check_tensor(idx, op, iname, DSA_I32, 2));
  DSA_CHECK(dsa__check_dim(idx, op, iname, 0, t));
  if (idx->shape[1] > MAX_WIDTH)
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, "%s: %s width %lld exceeds %lld", op, iname,
                     (long long)idx->shape[1], (long long)MAX_WIDTH);
  if (!lens && lens_opt) return DSA_OK;
  DSA_CHECK(dsa__check_tensor(lens, op, lname, DSA_I32, 1));
  DSA_CHECK(dsa__check_dim(lens, op, lname, 0, t));
  return DSA_OK;
}

static dsa_status check_set(const dsa_sparse_index_set *s, int64_t t, const char *op,
                            const char *sname) {
  if (!s) return DSA_OK;
  char c[48], i[48], l[48];
  snprintf(c, sizeof c, "%s->cache", sname);
  snprintf(i, sizeof i, "%s->indices", sname);
  snprintf(l, sizeof l, "%s->lens", sname);
  DSA_CHECK(dsa__check_cache(s->cache, op, c, DSA_CACHE_MLA_FP8));
  return check_index(s->indices, s->lens, 1, t, op, i, l);
}

/* The query and output groups of every attention kernel (SA_QUERY,
 * SA_OUTPUT in cl/sparse_mla.cl). */
static void karg_query(dsa_kargs *a, const dsa_tensor *query) {
  dsa__karg_tensor(a, query, 3);
  dsa__karg_i32(a, (cl_int)query->shape[1]);
}
static void karg_output(dsa_kargs *a, const dsa_tensor *sink, const dsa_sparse_params *p,
                        const dsa_tensor *out, const dsa_tensor *lse) {
  dsa_sparse_params d;
  dsa_sparse_params_default(&d);
  dsa__karg_tensor(a, sink, 1);
  dsa__karg_i32(a, sink != NULL);
  dsa__karg_f32(a, p ? p->softmax_scale : d.softmax_scale);
  dsa__karg_tensor(a, out, 3);
  dsa__karg_tensor(a, lse, 2);
  dsa__karg_i32(a, lse != NULL);
  dsa__karg_faults(a);
}
/* SA_SET: an index set (absent: width 0 and stand-ins). */
static void karg_set(dsa_kargs *a, const dsa_sparse_index_set *s) {
  const int empty = !s || s->indices->shape[1] == 0;
  dsa__karg_paged(a, empty ? NULL : s->cache);
  dsa__karg_tensor(a, empty ? NULL : s->indices, 2);
  dsa__karg_i32(a, empty ? 0 : (cl_int)s->indices->shape[1]);
  dsa__karg_tensor(a, empty ? NULL : s->lens, 1);
  dsa__karg_i32(a, !empty && s->lens != NULL); /* NULL lens: the full width */
}

static void attn_grid(int64_t t, int64_t h, size_t wg, int hg, size_t global[3],
                      size_t local[3]) {
  global[0] = wg, global[1] = (size_t)((h + hg - 1) / hg), global[2] = (size_t)t;
  local[0] = wg, local[1] = 1, local[2] = 1;
}

/* The attention kernel of variant v (V_* order): its name, work-group size
 * and heads per work-group. */
static dsa_status attn_kernel_v(dsa_queue *q, const dsa_variant_table *t, int fused, int v,
                                cl_kernel *k, const char **name, size_t *wg, int *hg) {
  static const char *names[2][4] = {
      {"sparse_attn_bf16_tile", "sparse_attn_bf16_mma", "sparse_attn_bf16",
       "sparse_attn_bf16_lm32"},
      {"sparse_mla_decode_fused_tile", "sparse_mla_decode_fused_mma", "sparse_mla_decode_fused",
       "sparse_mla_decode_fused_lm32"}};
  *name = names[fused][v];
  *wg = v == V_TILE ? MT_WG : v == V_MMA ? 32 * SM_NW : WG;
  *hg = v == V_TILE ? MT_HG : HG;
  if (v == V_TILE) {
    const mt_geom g = mt_geometry(q->ctx);
    snprintf(q->last_variant, sizeof q->last_variant, "%s: tile (%s%s)", t->op, g.be->name,
             g.emu ? ", emulated" : "");
  }
  return dsa__get_kernel(q, DSA_PROG_SPARSE_MLA, *name, k);
}

/* The bf16 attention kernel its table picks; *portable (if given): whether
 * it is one of the portable kernels (their stage skips the NaN masking on
 * rows the gather cleaned). */
static dsa_status attn_kernel(dsa_queue *q, cl_kernel *k, const char **name, size_t *wg,
                              int *hg, int *portable) {
  const int v = dsa__pick(q, &dsa__variants_sparse_attn_bf16, NULL);
  if (v < 0) return DSA_ERR_UNSUPPORTED;
  if (portable) *portable = v == V_PORTABLE || v == V_LM32;
  return attn_kernel_v(q, &dsa__variants_sparse_attn_bf16, 0, v, k, name, wg, hg);
}

/* The bf16 attention over kv [rows, 512] with indices [T, K] and optional
 * lens [T] (shared with the two-stage decode, whose workspace views these
 * are). kv_clean: the rows hold no NaN (the gather zeroed them), so the
 * portable kernels' stage skips its NaN masking (same values). */
static dsa_status launch_bf16(dsa_queue *q, const dsa_tensor *query, const dsa_tensor *kv,
                              const dsa_tensor *idx, const dsa_tensor *lens, int has_lens,
                              int kv_clean, const dsa_tensor *sink, const dsa_sparse_params *p,
                              const dsa_tensor *out, const dsa_tensor *lse, const dsa_events *ev) {
  cl_kernel kern;
  const char *kname;
  size_t wg;
  int hg;
  DSA_CHECK(attn_kernel(q, &kern, &kname, &wg, &hg, NULL));
  dsa_kargs a;
  dsa__kargs_init(&a, q);
  karg_query(&a, query);
  dsa__karg_tensor(&a, kv, 2);
  dsa__karg_i64(&a, kv->shape[0]);
  dsa__karg_tensor(&a, idx, 2);
  dsa__karg_i32(&a, (cl_int)idx->shape[1]);
  dsa__karg_tensor(&a, has_lens ? lens : NULL, 1);
  dsa__karg_i32(&a, has_lens);
  dsa__karg_i32(&a, kv_clean);
  karg_output(&a, sink, p, out, lse);
  size_t global[3], local[3];
  attn_grid(query->shape[0], query->shape[1], wg, hg, global, local);
  return dsa__launch_args(q, kern, kname, &a, 3, global, local, ev);
}

dsa_status dsa_sparse_attn_bf16(dsa_queue *q, const dsa_tensor *query, const dsa_tensor *kv,
                                const dsa_tensor *indices, const dsa_tensor *lens,
                                const dsa_tensor *attn_sink, const dsa_tensor *out,
                                const dsa_tensor *lse, const dsa_sparse_params *p,
                                const dsa_events *ev) {
  static const char op[] = "dsa_sparse_attn_bf16";
  dsa__clear_error();
  DSA_CHECK(dsa__check_queue(q, op));
  DSA_CHECK(dsa__check_events(ev, op));
  DSA_CHECK_PARAMS(p, op);
  DSA_CHECK(check_params(p, op));
  DSA_CHECK(check_qio(query, attn_sink, out, lse, op));
  const int64_t t = query->shape[0];
  DSA_CHECK(dsa__check_tensor(kv, op, "kv", DSA_BF16, 2));
  DSA_CHECK(dsa__check_dim(kv, op, "kv", 1, MLA_DIM));
  DSA_CHECK(dsa__check_unit_inner(kv, op, "kv"));
  if (kv->shape[0] > MAX_ROWS)
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, "%s: kv has too many rows (%lld)", op,
                     (long long)kv->shape[0]);
  DSA_CHECK(check_index(indices, lens, 1, t, op, "indices", "lens"));
  if (t == 0) return dsa__launch_nothing(q, ev);

  const int has_k = indices->shape[1] > 0;
  return launch_bf16(q, query, kv, indices, lens, lens != NULL && has_k, 0, attn_sink, p, out, lse,
                     ev);
}

static dsa_status check_decode(dsa_queue *q, const dsa_tensor *query,
                               const dsa_sparse_index_set *main_set,
                               const dsa_sparse_index_set *extra_set, const dsa_tensor *attn_sink,
                               const dsa_sparse_params *p, const dsa_tensor *out,
                               const dsa_tensor *lse, const dsa_events *ev, const char *op) {
  DSA_CHECK(dsa__check_queue(q, op));
  DSA_CHECK(dsa__check_events(ev, op));
  DSA_CHECK_PARAMS(p, op);
  DSA_CHECK(check_params(p, op));
  DSA_CHECK(check_qio(query, attn_sink, out, lse, op));
  DSA_CHECK(check_set(main_set, query->shape[0], op, "main_set"));
  DSA_CHECK(check_set(extra_set, query->shape[0], op, "extra_set"));
  return DSA_OK;
}

static int64_t set_width(const dsa_sparse_index_set *s) { return s ? s->indices->shape[1] : 0; }

/* Split-K scratch: partial rows [T, S, H, 512] f32, then (m, l) [T, S, H, 2]. */
static uint64_t split_bytes(int64_t t, int64_t h, int64_t s) {
  return (uint64_t)t * (uint64_t)s * (uint64_t)h * (MLA_DIM * 4 + 8);
}
#define SPLIT_MAX 64
#define SPLIT_MAX_BYTES ((uint64_t)1 << 30)

/* Split-K (flash-decoding) of the fused tile kernel for few tokens: the
 * entries of a token go to *ns work-groups of *chunk entries each (a multiple
 * of MT_NT), and sparse_mla_split_combine merges their rows by their running
 * max and sum. A GPU whose work-groups would fill at most half its compute
 * units gets about one work-group a unit, each at least 4 tiles long. On
 * NVIDIA, where the kernel is capped at 128 registers (SA_NV_MAXRREG,
 * cl/sparse_mla.cl) and two groups share an SM, groups up to one a unit
 * are split into at most two a unit (rounded down: H200, T = 64 H = 64,
 * 128 groups, split 2 106.2 us, 3 137.2, 4 120.6, unsplit 133.4).
 * DSACL_MLA_SPLIT=N forces N (at most 64; tests). Unsplit: *ns = 1. */
static void split_plan(const dsa_context *c, int64_t t, int64_t h, int64_t ktot, cl_int *ns,
                       cl_int *chunk) {
  const int64_t groups = t * ((h + MT_HG - 1) / MT_HG);
  const int64_t tiles = (ktot + MT_NT - 1) / MT_NT;
  int64_t n = 1;
  const char *f = getenv("DSACL_MLA_SPLIT");
  if (f && *f) {
    char *end;
    const long v = strtol(f, &end, 10);
    if (*end == '\0' && v > 1) n = v;
  } else if ((c->caps.type & CL_DEVICE_TYPE_GPU) && c->caps.nv_compiler_options &&
             SA_NV_MAXRREG > 0) {
    if (groups <= (int64_t)c->caps.compute_units) {
      n = 2 * (int64_t)c->caps.compute_units / groups;
      if (n > tiles / 4) n = tiles / 4;
    }
  } else if ((c->caps.type & CL_DEVICE_TYPE_GPU) && groups * 2 <= (int64_t)c->caps.compute_units) {
    n = ((int64_t)c->caps.compute_units + groups - 1) / groups;
    if (n > tiles / 4) n = tiles / 4;
  }
  if (n > SPLIT_MAX) n = SPLIT_MAX;
  if (n > tiles) n = tiles;
  *ns = 1, *chunk = 0;
  if (n < 2) return;
  const int64_t per = (tiles + n - 1) / n; /* tiles per split */
  n = (tiles + per - 1) / per;
  if (n < 2 || t * h > ((int64_t)1 << 24) || split_bytes(t, h, n) > SPLIT_MAX_BYTES) return;
  *ns = (cl_int)n;
  *chunk = (cl_int)(per * MT_NT);
}

static dsa_status two_stage_run(dsa_queue *q, const dsa_tensor *query,
                                const dsa_sparse_index_set *main_set,
                                const dsa_sparse_index_set *extra_set,
                                const dsa_tensor *attn_sink, const dsa_tensor *out,
                                const dsa_tensor *lse, const dsa_tensor *workspace,
                                const dsa_sparse_params *p, const dsa_events *ev);

dsa_status dsa_sparse_mla_decode(dsa_queue *q, const dsa_tensor *query,
                                 const dsa_sparse_index_set *main_set,
                                 const dsa_sparse_index_set *extra_set, const dsa_tensor *attn_sink,
                                 const dsa_tensor *out, const dsa_tensor *lse,
                                 const dsa_sparse_params *p, const dsa_events *ev) {
  static const char op[] = "dsa_sparse_mla_decode";
  dsa__clear_error();
  DSA_CHECK(check_decode(q, query, main_set, extra_set, attn_sink, p, out, lse, ev, op));
  const int64_t t = query->shape[0];
  if (t == 0) return dsa__launch_nothing(q, ev);

  const int64_t h = query->shape[1], k1 = set_width(main_set), k2 = set_width(extra_set),
                ktot = k1 + k2;
  const mla_shape shape = {t, k1, k2};
  const int vf = dsa__pick(q, &dsa__variants_sparse_mla_decode, &shape);
  if (vf < 0) return DSA_ERR_UNSUPPORTED;
  int v = vf < VF_ROUTE ? vf : vf - 1; /* the kernel's V_* */
  if (vf == VF_ROUTE) {
    char bf[sizeof q->last_variant];
    cl_mem m;
    const uint64_t need = route_bytes(t, k1, k2);
    if (dsa__queue_scratch(q, (size_t)need, &m) == DSA_OK) {
      const dsa_tensor ws = dsa_tensor_make(m, 0, DSA_U8, 1, (int64_t[]){(int64_t)need});
      DSA_CHECK(two_stage_run(q, query, main_set, extra_set, attn_sink, out, lse, &ws, p, ev));
      snprintf(bf, sizeof bf, "%s", q->last_variant);
      snprintf(q->last_variant, sizeof q->last_variant, "%s: two-stage (%.58s)", op, bf);
      return DSA_OK;
    }
    /* No scratch of that size: the fused kernel, which needs none. */
    dsa__clear_error();
    v = dsa__variant_refusal(q->ctx, &dsa__variants_sparse_mla_decode.v[VF_PORTABLE], &shape, bf,
                             sizeof bf)
            ? V_LM32
            : V_PORTABLE;
    snprintf(q->last_variant, sizeof q->last_variant, "%s: %s (no scratch for two-stage)", op,
             v == V_LM32 ? "portable-lm32" : "portable");
  }
  cl_kernel kern;
  const char *kname;
  size_t wg;
  int hg;
  DSA_CHECK(attn_kernel_v(q, &dsa__variants_sparse_mla_decode, 1, v, &kern, &kname, &wg, &hg));
  const int tile = v == V_TILE;
  cl_int nsplit = 1, chunk = 0;
  if (tile) split_plan(q->ctx, t, h, ktot, &nsplit, &chunk);
  /* Split-K: the combine kernel and the scratch are had before anything is
   * enqueued, so a failure leaves no half-done operation behind. */
  cl_kernel comb = NULL;
  cl_mem ws = NULL;
  if (nsplit > 1) {
    DSA_CHECK(dsa__get_kernel(q, DSA_PROG_SPARSE_MLA, "sparse_mla_split_combine", &comb));
    DSA_CHECK(dsa__queue_scratch(q, (size_t)split_bytes(t, h, nsplit), &ws));
    const size_t n = strlen(q->last_variant);
    snprintf(q->last_variant + n, sizeof q->last_variant - n, ", split %d", (int)nsplit);
  }
  dsa_kargs a;
  dsa__kargs_init(&a, q);
  karg_query(&a, query);
  karg_set(&a, main_set);
  karg_set(&a, extra_set);
  karg_output(&a, attn_sink, p, out, lse);
  if (tile) {
    dsa__karg_i32(&a, nsplit);
    dsa__karg_i32(&a, chunk);
    dsa__karg_mem(&a, ws);
  }
  size_t global[3], local[3];
  attn_grid(t, h, wg, hg, global, local);
  if (nsplit == 1) return dsa__launch_args(q, kern, kname, &a, 3, global, local, ev);
  global[0] *= (size_t)nsplit;
  const dsa_events first = {ev ? ev->num_wait : 0, ev ? ev->wait : NULL, NULL};
  DSA_CHECK(dsa__launch_args(q, kern, kname, &a, 3, global, local, &first));
  /* In-order queue: the combine follows. */
  dsa__kargs_init(&a, q);
  dsa__karg_i32(&a, (cl_int)h);
  dsa__karg_i32(&a, nsplit);
  dsa__karg_mem(&a, ws);
  karg_output(&a, attn_sink, p, out, lse);
  const size_t cglobal[3] = {64, (size_t)h, (size_t)t}, clocal[3] = {64, 1, 1};
  const dsa_events second = {0, NULL, ev ? ev->done : NULL};
  return dsa__launch_args(q, comb, "sparse_mla_split_combine", &a, 3, cglobal, clocal, &second);
}

static uint64_t round_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

/* Workspace layout: rows [T*Ktot, 512] bf16 | indices [T, Ktot] i32 | lens [T] i32,
 * each part starting on a WS_ALIGN boundary. */
static int ws_layout(int64_t t, int64_t k1, int64_t k2, uint64_t *idx_off, uint64_t *len_off,
                     uint64_t *total) {
  if (t < 0 || k1 < 0 || k2 < 0 || t > MAX_ROWS || k1 > MAX_WIDTH || k2 > MAX_WIDTH) return -1;
  const uint64_t rows = (uint64_t)t * (uint64_t)(k1 + k2);
  if (rows > (uint64_t)MAX_ROWS) return -1;
  *idx_off = round_up(rows * MLA_DIM * 2, WS_ALIGN);
  *len_off = *idx_off + round_up(rows * 4, WS_ALIGN);
  *total = *len_off + round_up((uint64_t)t * 4, WS_ALIGN);
  if (*total > (uint64_t)SIZE_MAX) return -1;
  return 0;
}

/* The workspace bytes of the two-stage form at T, K1, K2 (UINT64_MAX past
 * the kernels' row range). */
static uint64_t route_bytes(int64_t t, int64_t k1, int64_t k2) {
  uint64_t io, lo, total;
  return ws_layout(t, k1, k2, &io, &lo, &total) ? UINT64_MAX : total;
}

/* A contiguous view of the workspace's bytes from byte off on, in the
 * workspace's memory (buffer or pointer kind). */
static dsa_tensor ws_view(const dsa_tensor *ws, uint64_t off, dsa_dtype dt, int ndim,
                          const int64_t *shape) {
  dsa_tensor v = dsa_tensor_make(ws->mem, ws->offset + (size_t)off, dt, ndim, shape);
  v.kind = ws->kind, v.ptr = ws->ptr, v.ptr_bytes = ws->ptr_bytes;
  return v;
}

size_t dsa_sparse_mla_decode_workspace_size(int64_t t, int64_t k1, int64_t k2) {
  uint64_t io, lo, total;
  return ws_layout(t, k1, k2, &io, &lo, &total) ? 0 : (size_t)total;
}

dsa_status dsa_sparse_mla_decode_two_stage(
    dsa_queue *q, const dsa_tensor *query, const dsa_sparse_index_set *main_set,
    const dsa_sparse_index_set *extra_set, const dsa_tensor *attn_sink, const dsa_tensor *out,
    const dsa_tensor *lse, const dsa_tensor *workspace, const dsa_sparse_params *p,
    const dsa_events *ev) {
  static const char op[] = "dsa_sparse_mla_decode_two_stage";
  dsa__clear_error();
  DSA_CHECK(check_decode(q, query, main_set, extra_set, attn_sink, p, out, lse, ev, op));
  const int64_t t = query->shape[0], k1 = set_width(main_set), k2 = set_width(extra_set);
  uint64_t idx_off, len_off, need;
  if (ws_layout(t, k1, k2, &idx_off, &len_off, &need))
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0,
                     "%s: workspace for T = %lld, K1 = %lld, K2 = %lld exceeds the kernels' "
                     "32-bit row range",
                     op, (long long)t, (long long)k1, (long long)k2);
  if (t == 0) return dsa__launch_nothing(q, ev);
  /* A u8 [bytes] tensor of any memory kind, contiguous, from a WS_ALIGN
   * boundary (the gather kernel's 1024-byte rows and the three parts below
   * start aligned; for a pointer kind the address, as for element alignment). */
  DSA_CHECK(dsa__check_tensor(workspace, op, "workspace", DSA_U8, 1));
  DSA_CHECK(dsa__check_unit_inner(workspace, op, "workspace"));
  if ((uint64_t)workspace->shape[0] < need)
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0,
                     "%s: workspace has %lld bytes, needs %llu "
                     "(dsa_sparse_mla_decode_workspace_size)",
                     op, (long long)workspace->shape[0], (unsigned long long)need);
  const uintptr_t base = workspace->kind == DSA_MEM_BUFFER ? 0 : (uintptr_t)workspace->ptr;
  if ((base + workspace->offset) % WS_ALIGN)
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0,
                     "%s: workspace address (offset %zu) is not a multiple of %d", op,
                     workspace->offset, WS_ALIGN);

  if (dsa__pick(q, &dsa__variants_sparse_mla_decode_two_stage, NULL) < 0)
    return DSA_ERR_UNSUPPORTED;
  return two_stage_run(q, query, main_set, extra_set, attn_sink, out, lse, workspace, p, ev);
}

/* The two-stage decode on checked arguments and a workspace of at least
 * dsa_sparse_mla_decode_workspace_size bytes from a WS_ALIGN boundary
 * (also the fused decode's route, on the queue's scratch). */
static dsa_status two_stage_run(dsa_queue *q, const dsa_tensor *query,
                                const dsa_sparse_index_set *main_set,
                                const dsa_sparse_index_set *extra_set,
                                const dsa_tensor *attn_sink, const dsa_tensor *out,
                                const dsa_tensor *lse, const dsa_tensor *workspace,
                                const dsa_sparse_params *p, const dsa_events *ev) {
  const int64_t t = query->shape[0], k1 = set_width(main_set), k2 = set_width(extra_set);
  uint64_t idx_off, len_off, need;
  if (ws_layout(t, k1, k2, &idx_off, &len_off, &need))
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, "two-stage decode: workspace layout");
  const int64_t ktot = k1 + k2;
  /* The workspace as three tensors: rows [T*Ktot, 512] bf16 (rows of 1024
   * bytes from a WS_ALIGN boundary), indices [T, Ktot] i32, lengths [T] i32. */
  dsa_tensor ws_rows = ws_view(workspace, 0, DSA_BF16, 2, (int64_t[]){t * ktot, MLA_DIM});
  dsa_tensor ws_idx = ws_view(workspace, idx_off, DSA_I32, 2, (int64_t[]){t, ktot});
  dsa_tensor ws_len = ws_view(workspace, len_off, DSA_I32, 1, (int64_t[]){t});
  /* Nothing to gather: the attention alone writes zeros and -inf. */
  if (ktot == 0)
    return launch_bf16(q, query, &ws_rows, &ws_idx, &ws_len, 0, 0, attn_sink, p, out, lse, ev);

  cl_kernel kern;
  DSA_CHECK(dsa__get_kernel(q, DSA_PROG_SPARSE_MLA, "sparse_mla_gather_pack", &kern));
  /* The attention kernel is looked up before anything is enqueued, so a
   * failure cannot leave a half-done operation behind. */
  cl_kernel attn;
  const char *aname;
  size_t awg;
  int ahg, clean;
  DSA_CHECK(attn_kernel(q, &attn, &aname, &awg, &ahg, &clean));
  (void)attn, (void)aname, (void)awg, (void)ahg;
  dsa_kargs a;
  dsa__kargs_init(&a, q);
  karg_set(&a, main_set);
  karg_set(&a, extra_set);
  dsa__karg_tensor(&a, &ws_rows, 2);
  dsa__karg_tensor(&a, &ws_idx, 2);
  dsa__karg_tensor(&a, &ws_len, 1);
  /* Under a portable attention kernel the gather zeroes NaN halves and that
   * kernel skips its own masking (H100, forced portable: -2.5 %); the tile
   * kernels mask their tiles, so their gather is left as it was. */
  dsa__karg_i32(&a, clean);
  dsa__karg_faults(&a);
  const size_t global[3] = {32, (size_t)round_up((uint64_t)ktot, GROWS), (size_t)t},
               local[3] = {32, GROWS, 1};
  const dsa_events first = {ev ? ev->num_wait : 0, ev ? ev->wait : NULL, NULL};
  DSA_CHECK(dsa__launch_args(q, kern, "sparse_mla_gather_pack", &a, 3, global, local, &first));
  /* In-order queue: the attention follows the gather. */
  const dsa_events second = {0, NULL, ev ? ev->done : NULL};
  return launch_bf16(q, query, &ws_rows, &ws_idx, &ws_len, 1, clean, attn_sink, p, out, lse,
                     &second);
}
