/* Indexer MQA logits: ragged prefill and paged decode, FP8 and MXFP4
 * (SPEC-reference §6). Kernels: cl/indexer_logits.cl. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef cl_ulong u64;

#define NT 256
/* Column limit: tile starts stay below 2^31 in the kernel's int arithmetic. */
#define MAX_COLS (INT32_MAX - 4096)
/* Work-groups per launch: global sizes stay far below 2^32 work-items.
 * (Overridable at build time only to test the splitting with tiny values.) */
#ifdef DSA_IL_MAX_GROUPS
#define MAX_GROUPS_PER_LAUNCH ((unsigned)DSA_IL_MAX_GROUPS)
#else
#define MAX_GROUPS_PER_LAUNCH (1u << 22)
#endif

#define BAD(...) dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0, __VA_ARGS__)

/* Kernel geometry (cl/indexer_logits.cl): portable groups of HG x KG items
 * (IL_W_NT for the wide tile, IL_NT for the narrow one), each item RH heads
 * x RK keys in registers, DC dims per chunk; the wide tile for many heads,
 * the narrow one for few. Both fit 32 KiB of local memory. Wide 8 x 8 per
 * item: 64 FMAs per 16 floats read from local memory, against 16 per 8 for
 * 4 x 4 (H200, forced portable: paged B = 64 1218 -> 984 us, prefill 9615
 * -> 7654 us; 8 x 4 and 4 x 8 with DC 32 were no faster). Groups of 128
 * items (64 heads x 128 keys, four groups an SM on NVIDIA at 128
 * registers) beat 256 (64 x 256, two an SM) once the chunks were double
 * buffered: H100 paged B = 64 826.9 -> 816.0 us, prefill 6402 -> 6356; 8
 * x 16 keys an item (RK 16, 128 items, 168 registers) ran 945 us
 * (docs/PERFORMANCE.md, "Portable logits, round 3"). Overridable at build
 * time for tuning runs (-Dc_args=-DIL_W_RK=4 ...; the kernel checks the
 * geometry).
 *
 * The tile kernels (cl/dsa_tile.h back-ends): TL_NT items, TL_SUB
 * sub-tiles of TL_KT_* keys staged at TL_PITCH words per key (64 bf16 pairs
 * + 4: the fragment loads of 8 or 16 rows hit distinct banks), TL_RMAX_*
 * query rows (tokens x padded heads) per group; *_REGS for back-ends that
 * keep A in registers, *_LOCAL for the portable one. */
#ifndef IL_NT
#define IL_NT NT
#endif
#ifndef IL_W_NT
#define IL_W_NT 128
#endif
#ifndef IL_W_HG
#define IL_W_HG 8
#endif
#ifndef IL_W_KG
#define IL_W_KG 16
#endif
#ifndef IL_W_RH
#define IL_W_RH 8
#endif
#ifndef IL_W_RK
#define IL_W_RK 8
#endif
#ifndef IL_W_DC
#define IL_W_DC 16
#endif
#ifndef IL_N_HG
#define IL_N_HG 4
#endif
#ifndef IL_N_KG
#define IL_N_KG 64
#endif
#ifndef IL_N_RH
#define IL_N_RH 4
#endif
#ifndef IL_N_RK
#define IL_N_RK 4
#endif
#ifndef IL_N_DC
#define IL_N_DC 16
#endif
/* Two geometries of the tile kernels (cl/indexer_logits.cl): groups of
 * TL_NT items over TL_RMAX1_REGS rows (one token: paged next_n = 1), and of
 * TL_NT2 items over TL_RMAX_REGS rows (tokens sharing each key tile). H100,
 * one machine: the first is 14 % faster at next_n = 1 (fewer A fragments
 * per item, more groups per SM), the second 9-10 % at next_n = 2 and in
 * prefill (docs/PERFORMANCE.md, session 5). */
#ifndef TL_NT
#define TL_NT 128
#endif
#ifndef TL_NT2
#define TL_NT2 256
#endif
#ifndef TL_RMAX1_REGS
#define TL_RMAX1_REGS 64
#endif
#define TL_PITCH 68
/* (Overridable at build time for tuning runs: -DTL_SUB=8.) */
#ifndef TL_SUB
#define TL_SUB 8
#endif
/* Key blocks per pass of a unit (independent accumulations in flight; on
 * the H100 1 beats 2 and 4: registers, hence occupancy, cost more). */
#ifndef TL_KP
#define TL_KP 1
#endif
#define TL_KT_REGS 64
#ifndef TL_RMAX_REGS
#define TL_RMAX_REGS 128
#endif
#define TL_KT_LOCAL 32
#define TL_RMAX_LOCAL 64
/* The "keys" kernel (keys as the MMA's M, cl/indexer_logits.cl, every
 * matrix back-end): KM_NT work-items, KM_KPG keys per group, KM_MT m-tiles
 * (M keys) per chunk of a unit (warp, sub-group, wave), KM_COLS columns
 * (token x head) of B fragments per unit (64: KM_COLS / N n-tiles, on
 * NVIDIA 8 of 8 columns, 128 registers, all 64 heads of a token; columns
 * per token are H rounded up to KM_COLS). H200, one machine
 * (docs/PERFORMANCE.md): 64 columns (NTW 8) with 1024 keys a group beat 32
 * (two warps sharing each key chunk) with 512 or 1024, MT 2, 256
 * work-items and L2 prefetches. (Overridable at build time for tuning runs:
 * -Dc_args=-DKM_COLS=32, with -DKM_QL=0.) */
#ifndef KM_NT
#define KM_NT 128
#endif
#ifndef KM_KPG
#define KM_KPG 1024
#endif
#ifndef KM_MT
#define KM_MT 1
#endif
#ifndef KM_COLS
#define KM_COLS 64
#endif
/* KM_QL 1: B fragments and weights in local memory (236 -> 121 registers,
 * 16 warps an SM: H200 B = 64 next_n = 1 238 -> 175 us); KM_PF chunks of
 * key loads in flight a warp (2 and 3 measured 1-3 % slower than 1). The
 * round-1 kernel (fragments in registers) is -Dc_args=-DKM_QL=0 with
 * DSACL_IL_KEYS=128. */
#ifndef KM_QL
#define KM_QL 1
#endif
#ifndef KM_PF
#define KM_PF 1
#endif
/* Warps an SM runs of this kernel (16 at <= 128 registers), for the choice
 * of group size. */
#ifndef KM_WARPS_CU
#define KM_WARPS_CU 16
#endif
const char dsa__defines_indexer_logits[] =
    DSA_KDEF(IL_NT) DSA_KDEF(IL_W_NT) DSA_KDEF(IL_W_HG) DSA_KDEF(IL_W_KG) DSA_KDEF(IL_W_RH) DSA_KDEF(IL_W_RK)
        DSA_KDEF(IL_W_DC) DSA_KDEF(IL_N_HG) DSA_KDEF(IL_N_KG) DSA_KDEF(IL_N_RH) DSA_KDEF(IL_N_RK)
            DSA_KDEF(IL_N_DC) DSA_KDEF(TL_NT) DSA_KDEF(TL_NT2) DSA_KDEF(TL_RMAX1_REGS) DSA_KDEF(TL_SUB) DSA_KDEF(TL_KP) DSA_KDEF(TL_PITCH)
            DSA_KDEF(TL_KT_REGS) DSA_KDEF(TL_RMAX_REGS) DSA_KDEF(TL_KT_LOCAL)
                DSA_KDEF(TL_RMAX_LOCAL) DSA_KDEF(KM_NT) DSA_KDEF(KM_KPG) DSA_KDEF(KM_MT)
                    DSA_KDEF(KM_COLS) DSA_KDEF(KM_QL) DSA_KDEF(KM_PF);

/* Local memory of a portable tile (IL_KERNEL): nb q and k chunks, the
 * head-group partials in the k chunks' place (as large as the larger of the
 * two), the head chunk's weights, and per key its two offsets, scale and
 * state. */
static size_t tile_local_bytes(int hg, int kg, int rh, int rk, int dc, int nb) {
  const size_t tk = (size_t)rk * kg, th = (size_t)rh * hg;
  return (size_t)nb * (th * dc * 4 + tk * (size_t)(dc > hg ? dc : hg) * 4) + th * 4 + tk * 24;
}

/* The tile kernels' geometry on this context's back-end, flavour 1 (one
 * token per group) or 2; the portable back-end has one geometry. */
typedef struct tl_geom {
  const dsa_tile_backend *be;
  bool emu;
  int kt, rmax, nt;
} tl_geom;
static tl_geom tl_geometry(const dsa_context *c, int flavour) {
  tl_geom g;
  const int t = dsa__tile_backend(&c->caps, c->caps_enabled, &g.emu);
  g.be = &dsa__tile_backends[t];
  g.kt = g.be->a_regs ? TL_KT_REGS : TL_KT_LOCAL;
  g.rmax = !g.be->a_regs ? TL_RMAX_LOCAL : flavour == 1 ? TL_RMAX1_REGS : TL_RMAX_REGS;
  g.nt = g.be->a_regs && flavour == 2 ? TL_NT2 : TL_NT;
  return g;
}
/* IL_TILE_KERNEL's local memory: staged keys (and queries, without A in
 * registers), row-block partials, per key two offsets, scale and state. */
static size_t tl_local_bytes(const tl_geom *g) {
  const size_t q = g->be->a_regs ? 16 : (size_t)g->rmax * TL_PITCH * 4; /* uint4 */
  return (size_t)g->kt * TL_PITCH * 4 + q + (size_t)(g->rmax / g->be->m) * g->kt * 4 +
         (size_t)g->kt * 24 + (size_t)(g->rmax / 16) * 8;
}

void dsa_indexer_logits_params_default(dsa_indexer_logits_params *p) {
  if (!p) return;
  memset(p, 0, sizeof *p);
  p->clean = 1;
}

/* Everything a logits launch needs. q / qs are rank-4 views [B, next_n, H,
 * D] (ragged: [M, 1, H, D]); absent tensors are NULL. */
typedef struct il_job {
  dsa_tensor q, qs;
  const dsa_tensor *w, *kv, *ksc, *lim, *lim2, *bt, *out;
  const dsa_paged_cache *cache;
  cl_int H, D, next_n, ctx_rank, ncols, clean, out_bf16;
  cl_long W;
  int64_t rows;
  int paged, fp4;
} il_job;

/* ---- variants ------------------------------------------------------------------ */

/* D = 128 (the staged rows), H <= 128 (one token's rows in a group). */
static const char *refuse_tile(const dsa_context *c, const void *shape, char *buf, size_t n) {
  /* Both flavours live in one program: both must fit. */
  const tl_geom g1 = tl_geometry(c, 1), g = tl_geometry(c, 2);
  const size_t lm1 = tl_local_bytes(&g1), lm2 = tl_local_bytes(&g);
  /* Without a matrix unit the portable-h64/h16 kernels are faster (H100,
   * B=64 ctx=32768: 1928 us for the portable tile, 1208 us for h64), so
   * the portable tile runs only when DSACL_MMA names it (tests, porting). */
  if (g.be == &dsa__tile_backends[DSA_TILE_PORTABLE] && !c->caps.tile_forced) {
    snprintf(buf, n, "no matrix unit: portable-h64/h16 are faster (DSACL_MMA=portable forces it)");
    return buf;
  }
  const char *r = dsa__refuse_local_mem(c, lm1 > lm2 ? lm1 : lm2, buf, n);
  if (r || !shape) return r;
  const il_job *j = shape;
  if (j->D != 128) {
    snprintf(buf, n, "D = %d, the tile kernels need 128", (int)j->D);
    return buf;
  }
  if (((j->H + 15) & ~15) > g.rmax) {
    snprintf(buf, n, "H = %d > %d", (int)j->H, g.rmax);
    return buf;
  }
  return NULL;
}

/* The wide tile serves H > 16 (with fewer heads the narrow one wastes less);
 * with two chunk buffers where they fit. */
static const char *refuse_wide_nb(const dsa_context *c, const void *shape, char *buf, size_t n,
                                  int nb) {
  const char *r = dsa__refuse_local_mem(
      c, tile_local_bytes(IL_W_HG, IL_W_KG, IL_W_RH, IL_W_RK, IL_W_DC, nb), buf, n);
  if (r || !shape) return r;
  const il_job *j = shape;
  if (j->H <= IL_N_RH * IL_N_HG) {
    snprintf(buf, n, "H = %d <= %d: the narrow tile", (int)j->H, IL_N_RH * IL_N_HG);
    return buf;
  }
  return NULL;
}
static const char *refuse_wide2(const dsa_context *c, const void *shape, char *buf, size_t n) {
  return refuse_wide_nb(c, shape, buf, n, 2);
}
static const char *refuse_wide(const dsa_context *c, const void *shape, char *buf, size_t n) {
  return refuse_wide_nb(c, shape, buf, n, 1);
}

/* portable-h64pre: the query (and for the ragged operator the keys) are
 * decoded into f32 chunks in the queue's scratch first (cl/indexer_logits.cl,
 * il_predecode_q / _k), so the wide tile's staging is float4 copies. The
 * scratch: pq, rows x the head chunks x the chunks' TH x DC floats; pk
 * (ragged), D x the keys rounded up to whole tiles. */
#define PRE_MAX_BYTES ((uint64_t)1 << 30)
static uint64_t pre_pk_np(const il_job *j) {
  const uint64_t tk = (uint64_t)IL_W_RK * IL_W_KG;
  return ((uint64_t)j->ncols + tk - 1) / tk * tk;
}
static uint64_t pre_pq_floats(const il_job *j) {
  const uint64_t th = (uint64_t)IL_W_RH * IL_W_HG, dc = IL_W_DC;
  return (uint64_t)j->rows * (((uint64_t)j->H + th - 1) / th * th) *
         (((uint64_t)j->D + dc - 1) / dc * dc);
}
static uint64_t pre_bytes(const il_job *j) {
  /* rows < 2^31, H and D <= 2^16, ncols < 2^31: no overflow. */
  return 4 * (pre_pq_floats(j) + (j->paged ? 0 : pre_pk_np(j) * (uint64_t)j->D));
}
static const char *refuse_pre(const dsa_context *c, const void *shape, char *buf, size_t n) {
  if (c->il_pre < 0) return "DSACL_IL_PRE=off";
  /* h64db's local memory and the head-group partials' own (IL_KERNEL_PRE):
   * 32,000 B, within 32 KiB. */
  const size_t lm = tile_local_bytes(IL_W_HG, IL_W_KG, IL_W_RH, IL_W_RK, IL_W_DC, 2) +
                    (size_t)IL_W_HG * IL_W_RK * IL_W_KG * 4;
  const char *r = dsa__refuse_local_mem(c, lm, buf, n);
  if (r || !shape) return r;
  const il_job *j = shape;
  if (j->H <= IL_N_RH * IL_N_HG) {
    snprintf(buf, n, "H = %d <= %d: the narrow tile", (int)j->H, IL_N_RH * IL_N_HG);
    return buf;
  }
  if (j->fp4) return "FP8 only";
  /* (The cap also keeps the predecode grids' second and third dimensions,
   * D / 16 and the rows, below 65,536: NVIDIA's grid limit.) */
  if (pre_bytes(j) > PRE_MAX_BYTES) {
    snprintf(buf, n, "its scratch (%llu B) exceeds %llu B",
             (unsigned long long)pre_bytes(j), (unsigned long long)PRE_MAX_BYTES);
    return buf;
  }
  return NULL;
}
static const char *refuse_pre_no(const dsa_context *c, const void *shape, char *buf, size_t n) {
  (void)c, (void)shape, (void)buf, (void)n;
  return "FP8 only";
}

static const char *refuse_narrow(const dsa_context *c, const void *shape, char *buf, size_t n) {
  (void)shape;
  return dsa__refuse_local_mem(
      c, tile_local_bytes(IL_N_HG, IL_N_KG, IL_N_RH, IL_N_RK, IL_N_DC, 1), buf, n);
}

/* keys: local memory of a group (cl/indexer_logits.cl, km_body), the same
 * on every back-end: the B fragments hold each f16 element of a token's
 * KM_COLS columns x 128 dims once (the kernel's #error checks its layout). */
static size_t km_local_bytes(size_t ntok) {
  const size_t tq = 128 / KM_COLS; /* most tokens a group */
  if (KM_QL) /* offsets, scales, byte states; per token held 16 KiB of B fragments, 256 B of
                weights (the one-token kernels hold one, the others tq) */
    return (size_t)KM_KPG * (8 + 4 + 1) + ntok * (KM_COLS * 128 * 2 + KM_COLS * 4) + 32;
  return (size_t)KM_KPG * (8 + 4 + 4) + tq * KM_KPG * 4 + 32;
}

/* Tokens per keys group: a power of two with tq * HP <= 128 columns (HP =
 * H rounded up to a unit's KM_COLS), so the column slices (tq * HP /
 * KM_COLS) divide the units (KM_NT / lanes); paged, at most next_n. The
 * kernels for tq = 1 (paged) hold one token's B fragments, the others
 * 128 / KM_COLS (cl/indexer_logits.cl, KM_KERNEL's NTOK): km_local_bytes. */
static int km_tq(const dsa_context *c, const il_job *j) {
  const int lanes = tl_geometry(c, 1).be->lanes, next_n = j->paged ? (int)j->next_n : 1 << 20;
  const int cols = KM_COLS, hp = ((int)j->H + cols - 1) / cols * cols;
  int tq = 1;
  while (tq * 2 <= next_n && tq * 2 * hp <= 128 && tq * 2 * hp / cols <= KM_NT / lanes) tq *= 2;
  return tq;
}

/* An emulated matrix back-end (DSACL_MMA / DSACL_EMULATE=amd on Intel's
 * sub-groups: a test device, never a fast one) builds this program
 * unoptimised. Its keys and tile kernels unroll dozens of MMAs, each
 * emulated as 64-128 shuffles and FMAs: Intel's CPU compiler took 1-2
 * minutes a back-end at its default -O (amd-wmma: 130 s; 4 s with
 * -cl-opt-disable; test_indexer_logits 123 -> 25 CPU s, the same 923
 * checks passing). The sparse MLA program does the same
 * (dsa__sparse_mla_device_options). */
const char *dsa__indexer_logits_device_options(const dsa_caps *caps, unsigned enabled) {
  bool emu = false;
  (void)dsa__tile_backend(caps, enabled, &emu);
  return emu ? " -cl-opt-disable" : "";
}

/* DSACL_IL_KEYS, read when the context is made (as DSACL_TOPK): "off"
 * refuses the keys variant (the tile kernel runs: old-vs-new timing in
 * one build), "128" / "256" force its group size (tests), "auto" or unset
 * lets the grid decide. */
dsa_status dsa__il_keys_env(dsa_context *c) {
  c->il_keys = 0;
  /* DSACL_IL_PRE: "off" refuses portable-h64pre (tests of portable-h64db
   * on FP8; old-vs-new timing in one build), "on" or unset allows it. */
  c->il_pre = 0;
  const char *pv = getenv("DSACL_IL_PRE");
  if (pv && !strcmp(pv, "off")) {
    c->il_pre = -1;
  } else if (pv && *pv && strcmp(pv, "on")) {
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0,
                     "DSACL_IL_PRE = \"%s\": known values are on and off", pv);
  }
  const char *v = getenv("DSACL_IL_KEYS");
  if (!v || !*v || !strcmp(v, "auto")) return DSA_OK;
  if (!strcmp(v, "off")) {
    c->il_keys = -1;
  } else if (!strcmp(v, DSA_KSTR_(KM_NT))) {
    c->il_keys = KM_NT;
  } else if (atoi(v) == 2 * KM_NT && strspn(v, "0123456789") == strlen(v)) {
    c->il_keys = 2 * KM_NT;
  } else {
    return dsa__fail(DSA_ERR_INVALID_ARGUMENT, 0,
                     "DSACL_IL_KEYS = \"%s\": known values are auto, off, %d and %d", v, KM_NT,
                     2 * KM_NT);
  }
  return DSA_OK;
}

/* FP8 (paged or ragged) on any matrix back-end (native or emulated), H <=
 * 64. Not on the portable one: its unit is one work-item with a 4 x 4 atom
 * and no f16 product, so a unit's 64 columns would be 256 f32 accumulators
 * and the keys' per-lane loads would be whole rows; the portable-h64/h16
 * kernels are its FP32 path. DSACL_IL_KEYS=off refuses it (old-vs-new
 * timing in one build). */
static const char *refuse_keys(const dsa_context *c, const void *shape, char *buf, size_t n) {
  bool emu;
  if (dsa__tile_backend(&c->caps, c->caps_enabled, &emu) == DSA_TILE_PORTABLE)
    return "needs a matrix back-end (native or emulated; the portable one has no f16 "
           "fragments)";
  if (c->il_keys < 0) return "DSACL_IL_KEYS=off";
  /* Without a shape: whether some job (paged next_n = 1) fits. */
  const il_job *j = shape;
  const int one = !j || (j->paged && km_tq(c, j) == 1);
  const char *r = dsa__refuse_local_mem(c, km_local_bytes(one ? 1 : 128 / KM_COLS), buf, n);
  if (r || !shape) return r;
  if (j->D != 128) {
    snprintf(buf, n, "D = %d, needs 128", (int)j->D);
    return buf;
  }
  if (j->H > 64) {
    snprintf(buf, n, "H = %d > 64", (int)j->H);
    return buf;
  }
  return NULL;
}

/* The MXFP4 operators: no keys kernel (yet). */
static const char *refuse_keys_no(const dsa_context *c, const void *shape, char *buf, size_t n) {
  (void)c, (void)shape, (void)buf, (void)n;
  return "FP8 only";
}

enum { V_KEYS, V_TILE, V_PRE, V_WIDE2, V_WIDE, V_NARROW };
#define IL_VARIANTS(KEYS, PRE)                                                                 \
  {"keys", 0, KEYS, "FP8, D = 128, H <= 64; a matrix back-end"},                             \
      {"tile", 0, refuse_tile, "D = 128, H <= 128 (64 portable); the context's matrix back-end"}, \
      {"portable-h64pre", 0, PRE, "FP8, H > 16; operands decoded first (the queue's scratch)"}, \
      {"portable-h64db", 0, refuse_wide2, "H > 16; two chunk buffers"},                        \
      {"portable-h64", 0, refuse_wide, "H > 16"},                                              \
      {"portable-h16", 0, refuse_narrow, "any H"}

DSA_VARIANT_TABLE(dsa__variants_mqa_logits, "dsa_indexer_logits", IL_VARIANTS(refuse_keys, refuse_pre));
DSA_VARIANT_TABLE(dsa__variants_mqa_logits_mxfp4, "dsa_indexer_logits (mxfp4)",
                  IL_VARIANTS(refuse_keys_no, refuse_pre_no));
DSA_VARIANT_TABLE(dsa__variants_paged_mqa_logits, "dsa_indexer_paged_logits",
                  IL_VARIANTS(refuse_keys, refuse_pre));
DSA_VARIANT_TABLE(dsa__variants_paged_mqa_logits_mxfp4, "dsa_indexer_paged_logits (mxfp4)",
                  IL_VARIANTS(refuse_keys_no, refuse_pre_no));

static dsa_status launch(dsa_queue *q, const il_job *j, const dsa_variant_table *table,
                         const dsa_events *ev) {
  static const char *names[2][2][3] = {
      {{"mqa_logits_h16", "mqa_logits_h64", "mqa_logits_h64db"},
       {"paged_mqa_logits_h16", "paged_mqa_logits_h64", "paged_mqa_logits_h64db"}},
      {{"mqa_logits_mxfp4_h16", "mqa_logits_mxfp4_h64", "mqa_logits_mxfp4_h64db"},
       {"paged_mqa_logits_mxfp4_h16", "paged_mqa_logits_mxfp4_h64",
        "paged_mqa_logits_mxfp4_h64db"}}};
  int v = dsa__pick(q, table, j);
  if (v < 0) return DSA_ERR_UNSUPPORTED;
  /* portable-h64pre's scratch, had before anything is enqueued; without it
   * (allocation failed) portable-h64db, which fits wherever h64pre does. */
  cl_mem pre = NULL;
  if (v == V_PRE && dsa__queue_scratch(q, (size_t)pre_bytes(j), &pre) != DSA_OK) {
    dsa__clear_error();
    dsa__log(2, "%s: portable-h64db (no scratch of %llu B for portable-h64pre)", table->op,
             (unsigned long long)pre_bytes(j));
    snprintf(q->last_variant, sizeof q->last_variant, "%s: portable-h64db (no scratch)",
             table->op);
    v = V_WIDE2;
  }
  const char *kname = names[j->fp4][j->paged][v == V_WIDE2 ? 2 : v == V_WIDE ? 1 : 0];
  const int wide = v == V_WIDE || v == V_WIDE2 || v == V_PRE;
  cl_int tk = wide ? IL_W_RK * IL_W_KG : IL_N_RK * IL_N_KG;
  size_t nt = wide ? IL_W_NT : IL_NT;
  /* Rows of the grid: query rows, or for the tile kernels groups of tq
   * tokens (paged: of one sequence). */
  int64_t rows = j->rows;
  cl_int tq = 1;
  if (v == V_TILE) {
    static const char *tnames[2][2] = {{"mqa_logits_tile", "paged_mqa_logits_tile"},
                                       {"mqa_logits_mxfp4_tile", "paged_mqa_logits_mxfp4_tile"}};
    static const char *tnames1[2][2] = {
        {"mqa_logits_tile1", "paged_mqa_logits_tile1"},
        {"mqa_logits_mxfp4_tile1", "paged_mqa_logits_mxfp4_tile1"}};
    /* Flavour 1 for one token per group (paged next_n = 1 with H <= its
     * rows), else flavour 2. */
    const int hp = (j->H + 15) & ~15;
    const tl_geom g1 = tl_geometry(q->ctx, 1);
    const int flavour = g1.be->a_regs && j->paged && j->next_n == 1 && hp <= g1.rmax ? 1 : 2;
    const tl_geom g = flavour == 1 ? g1 : tl_geometry(q->ctx, 2);
    kname = flavour == 1 ? tnames1[j->fp4][j->paged] : tnames[j->fp4][j->paged];
    tk = g.kt * TL_SUB;
    nt = (size_t)g.nt;
    tq = (cl_int)(g.rmax / hp);
    if (j->paged) {
      if (tq > j->next_n) tq = j->next_n;
      rows = (j->rows / j->next_n) * ((j->next_n + tq - 1) / tq);
    } else {
      rows = (j->rows + tq - 1) / tq;
    }
    snprintf(q->last_variant, sizeof q->last_variant, "%s: tile (%s%s)", table->op, g.be->name,
             g.emu ? ", emulated" : "");
  } else if (v == V_KEYS) {
    /* Groups of tq tokens of one sequence (ragged: tq consecutive query
     * rows) x KM_KPG keys. */
    tk = KM_KPG;
    const int lanes = tl_geometry(q->ctx, 1).be->lanes;
    tq = (cl_int)km_tq(q->ctx, j);
    rows = j->paged ? (j->rows / j->next_n) * ((j->next_n + tq - 1) / tq)
                    : (j->rows + tq - 1) / tq;
    /* Groups of 2 KM_NT work-items when KM_NT ones would leave the device
     * short of warps (KM_WARPS_CU an SM at 121 registers): B = 8 at 32K
     * context, 256 groups on the H200's 132 SMs, 34.3 -> 29.4 us (next_n
     * 1) and 56.9 -> 48.8 (next_n 2); at B = 64 KM_NT ones are faster
     * (174.6 against 183.0 us).
     * DSACL_IL_KEYS=128 / 256 (KM_NT / 2 KM_NT) forces one (tests). */
    const int64_t groups = rows * (((int64_t)j->ncols + tk - 1) / tk);
    int wide = groups * (KM_NT / lanes) < (int64_t)q->ctx->caps.compute_units * KM_WARPS_CU;
    if (q->ctx->il_keys == KM_NT) wide = 0;
    if (q->ctx->il_keys == 2 * KM_NT) wide = 1;
    if (q->ctx->caps.max_wg < 2 * KM_NT) wide = 0;
    /* Two tokens a group (ragged, paged next_n >= 2): the kernels whose
     * warps take both (cl/indexer_logits.cl, tpw 2). */
    static const char *knames[3][2] = {{"mqa_logits_keys", "mqa_logits_keys2"},
                                       {"paged_mqa_logits_keys", "paged_mqa_logits_keys2"},
                                       {"paged_mqa_logits_keys_t2", "paged_mqa_logits_keys2_t2"}};
    kname = knames[j->paged ? (tq > 1 ? 2 : 1) : 0][wide];
    nt = wide ? 2 * KM_NT : KM_NT;
  }
  cl_kernel k;
  /* portable-h64pre: the twin with one head chunk (and D = 128) as
   * constants where H fits one chunk and D is 128 (always, paged; the
   * prefill shape, ragged; cl/indexer_logits.cl, H1). */
  if (v == V_PRE) {
    const int h1 = j->H <= IL_W_RH * IL_W_HG && j->D == 128;
    kname = j->paged ? (h1 ? "paged_mqa_logits_h64pre1" : "paged_mqa_logits_h64pre")
                     : (h1 ? "mqa_logits_h64pre1" : "mqa_logits_h64pre");
  }
  DSA_CHECK(dsa__get_kernel(q, DSA_PROG_INDEXER_LOGITS, kname, &k));
  /* portable-h64pre: the operands decoded into the scratch first (the
   * kernels had before anything is enqueued). */
  int waited = 0; /* the predecode launches took ev's wait list */
  const uint64_t pk_off = v == V_PRE ? pre_pq_floats(j) : 0, pk_np = v == V_PRE ? pre_pk_np(j) : 0;
  if (v == V_PRE) {
    cl_kernel kq, kk = NULL;
    DSA_CHECK(dsa__get_kernel(q, DSA_PROG_INDEXER_LOGITS, "il_predecode_q", &kq));
    if (!j->paged) DSA_CHECK(dsa__get_kernel(q, DSA_PROG_INDEXER_LOGITS, "il_predecode_k", &kk));
    const dsa_events first = {ev ? ev->num_wait : 0, ev ? ev->wait : NULL, NULL};
    /* Groups of 64 items along the heads of a chunk (TH, a multiple of 64)
     * or the keys (rounded up to a tile). */
    const size_t pl[3] = {64, 1, 1};
    {
      const size_t th = (size_t)IL_W_RH * IL_W_HG;
      const size_t g[3] = {th, (size_t)j->D / 16, (size_t)(j->rows / j->next_n)};
      dsa_kargs a;
      dsa__kargs_init(&a, q);
      dsa__karg_tensor(&a, &j->q, 4);
      dsa__karg_i32(&a, j->H);
      dsa__karg_i32(&a, j->D);
      dsa__karg_i32(&a, j->next_n);
      dsa__karg_mem(&a, pre);
      DSA_CHECK(dsa__launch_args(q, kq, "il_predecode_q", &a, 3, g, pl, &first));
    }
    if (kk) {
      const size_t g[2] = {(size_t)pk_np, (size_t)j->D / 16};
      dsa_kargs a;
      dsa__kargs_init(&a, q);
      dsa__karg_tensor(&a, j->kv, 2);
      dsa__karg_i32(&a, j->ncols);
      dsa__karg_u64(&a, pk_np);
      /* pk follows pq in the scratch (pk_off floats in). */
      dsa__karg_mem(&a, pre);
      dsa__karg_u64(&a, pk_off);
      const dsa_events none = {0, NULL, NULL};
      DSA_CHECK(dsa__launch_args(q, kk, "il_predecode_k", &a, 2, g, pl, &none));
    }
    waited = 1;
  }

  /* Launches of at most MAX_GROUPS_PER_LAUNCH groups: tiles of the row in
   * chunks, rows in chunks. */
  const int64_t total_tiles = ((int64_t)j->ncols + tk - 1) / tk;
  const int64_t tiles_per =
      total_tiles < (int64_t)MAX_GROUPS_PER_LAUNCH ? total_tiles : (int64_t)MAX_GROUPS_PER_LAUNCH;
  const int64_t rows_cap = (int64_t)MAX_GROUPS_PER_LAUNCH / tiles_per;
  const int64_t rows_per = rows_cap > 0 ? rows_cap : 1;
  for (int64_t t0 = 0; t0 < total_tiles; t0 += tiles_per)
  for (int64_t r0 = 0; r0 < rows; r0 += rows_per) {
    const int64_t nr = rows - r0 < rows_per ? rows - r0 : rows_per;
    const cl_int ntiles = (cl_int)(total_tiles - t0 < tiles_per ? total_tiles - t0 : tiles_per);
    dsa_kargs a;
    dsa__kargs_init(&a, q);
    dsa__karg_tensor(&a, &j->q, 4);
    dsa__karg_tensor(&a, j->fp4 ? &j->qs : NULL, 4);
    dsa__karg_i32(&a, j->H);
    dsa__karg_i32(&a, j->D);
    dsa__karg_i32(&a, j->next_n);
    dsa__karg_tensor(&a, j->w, 2);
    dsa__karg_tensor(&a, j->kv, 2);
    dsa__karg_tensor(&a, j->ksc, 2);
    dsa__karg_tensor(&a, j->lim, 2);
    dsa__karg_tensor(&a, j->lim2, 1);
    dsa__karg_i32(&a, j->ctx_rank);
    dsa__karg_paged(&a, j->cache);
    dsa__karg_tensor(&a, j->bt, 2);
    dsa__karg_i64(&a, j->W);
    dsa__karg_i32(&a, j->ncols);
    dsa__karg_i32(&a, j->clean);
    dsa__karg_tensor(&a, j->out, 2);
    dsa__karg_i32(&a, j->out_bf16);
    dsa__karg_i32(&a, ntiles);
    dsa__karg_i32(&a, (cl_int)t0);
    dsa__karg_u32(&a, (cl_uint)r0);
    dsa__karg_faults(&a);
    if (v == V_TILE || v == V_KEYS) {
      dsa__karg_i32(&a, tq);
      dsa__karg_i32(&a, (cl_int)j->rows);
    }
    if (v == V_PRE) {
      dsa__karg_mem(&a, pre);
      dsa__karg_u64(&a, pk_off / 4);
      dsa__karg_u64(&a, pk_np);
    }
    /* In-order queue: the first launch waits, the last returns the event. */
    const int first = !waited && t0 == 0 && r0 == 0,
              last = t0 + ntiles >= total_tiles && r0 + nr >= rows;
    dsa_events sub = {first && ev ? ev->num_wait : 0, first && ev ? ev->wait : NULL,
                      last && ev ? ev->done : NULL};
    const size_t global = (size_t)nr * (size_t)ntiles * nt, local = nt;
    DSA_CHECK(dsa__launch_args(q, k, kname, &a, 1, &global, &local, &sub));
  }
  return DSA_OK;
}

/* ---- validation helpers ------------------------------------------------------ */

/* dsa__check_tensor with either of two dtypes. */
static dsa_status check_tensor2(const dsa_tensor *t, const char *op, const char *arg,
                                dsa_dtype a, dsa_dtype b, int ndim) {
  if (t && t->dtype == b && a != b) return dsa__check_tensor(t, op, arg, b, ndim);
  return dsa__check_tensor(t, op, arg, a, ndim);
}

static dsa_status check_params(const dsa_indexer_logits_params *p, const char *op) {
  if (p && p->clean != 0 && p->clean != 1)
    return BAD("%s: p->clean = %d, must be 0 or 1", op, (int)p->clean);
  return DSA_OK;
}

static dsa_status check_logits(const dsa_tensor *t, const char *op, int64_t rows, int64_t cols) {
  DSA_CHECK(check_tensor2(t, op, "logits", DSA_F32, DSA_BF16, 2));
  DSA_CHECK(dsa__check_dim(t, op, "logits", 0, rows));
  DSA_CHECK(dsa__check_dim(t, op, "logits", 1, cols));
  DSA_CHECK(dsa__check_unit_inner(t, op, "logits"));
  if (cols > MAX_COLS)
    return BAD("%s: logits has %lld columns, at most %d are supported", op, (long long)cols,
               MAX_COLS);
  return DSA_OK;
}

static void set_logits(il_job *j, const dsa_tensor *t, const dsa_indexer_logits_params *p) {
  j->out = t;
  j->out_bf16 = t->dtype == DSA_BF16;
  j->ncols = (cl_int)t->shape[1];
  j->clean = p ? p->clean : 1;
}

/* A rank-3 [M, H, D] tensor as the rank-4 view [M, 1, H, D]. */
static dsa_tensor as_rank4(const dsa_tensor *t) {
  dsa_tensor v = *t;
  v.ndim = 4;
  v.shape[0] = t->shape[0], v.stride[0] = t->stride[0];
  v.shape[1] = 1, v.stride[1] = 0;
  v.shape[2] = t->shape[1], v.stride[2] = t->stride[1];
  v.shape[3] = t->shape[2], v.stride[3] = t->stride[2];
  return v;
}

static dsa_status check_head_dim(int64_t d, const char *op, const char *arg, int dim) {
  if (d < 32 || d % 32 != 0 || d > 65536)
    return BAD("%s: %s shape[%d] = %lld: the head dim D must be a positive multiple of 32 "
               "(at most 65536)",
               op, arg, dim, (long long)d);
  return DSA_OK;
}

static dsa_status check_heads(int64_t h, const char *op, const char *arg, int dim) {
  if (h < 1 || h > 65536)
    return BAD("%s: %s shape[%d] = %lld heads, must be in [1, 65536]", op, arg, dim,
               (long long)h);
  return DSA_OK;
}

/* The format is the query's dtype tag: e4m3 is FP8 (query_scale NULL),
 * e2m1x2 is MXFP4 (query_scale ue8m0 required). *fp4 gets which. */
static dsa_status query_format(const dsa_tensor *query, const dsa_tensor *query_scale,
                               const char *op, int *fp4) {
  if (!query) return BAD("%s: query is NULL", op);
  if (query->dtype != DSA_E4M3 && query->dtype != DSA_E2M1X2)
    return BAD("%s: query has dtype %s; the format is the query's dtype: e4m3 (FP8) or "
               "e2m1x2 (MXFP4)",
               op, dsa_dtype_name(query->dtype));
  *fp4 = query->dtype == DSA_E2M1X2;
  if (*fp4 && !query_scale) return BAD("%s: query_scale is NULL but the query is MXFP4", op);
  if (!*fp4 && query_scale)
    return BAD("%s: query_scale is given but the query is FP8 (e4m3); it must be NULL", op);
  return DSA_OK;
}

/* ---- ragged prefill ------------------------------------------------------------ */

dsa_status dsa_indexer_logits(dsa_queue *q, const dsa_tensor *query,
                              const dsa_tensor *query_scale, const dsa_tensor *k,
                              const dsa_tensor *k_scale, const dsa_tensor *weights,
                              const dsa_tensor *ks, const dsa_tensor *ke,
                              const dsa_tensor *logits, const dsa_indexer_logits_params *p,
                              const dsa_events *ev) {
  static const char op[] = "dsa_indexer_logits";
  dsa__clear_error();
  DSA_CHECK(dsa__check_queue(q, op));
  DSA_CHECK(dsa__check_events(ev, op));
  DSA_CHECK_PARAMS(p, op);
  DSA_CHECK(check_params(p, op));
  int fp4;
  DSA_CHECK(query_format(query, query_scale, op, &fp4));
  const dsa_dtype vt = fp4 ? DSA_E2M1X2 : DSA_E4M3;
  DSA_CHECK(dsa__check_tensor(query, op, "query", vt, 3));
  DSA_CHECK(dsa__check_unit_inner(query, op, "query"));
  const int64_t m = query->shape[0], h = query->shape[1];
  const int64_t d = fp4 ? query->shape[2] * 2 : query->shape[2];
  DSA_CHECK(check_heads(h, op, "query", 1));
  DSA_CHECK(check_head_dim(d, op, "query", 2));
  if (fp4) {
    DSA_CHECK(dsa__check_tensor(query_scale, op, "query_scale", DSA_UE8M0, 3));
    DSA_CHECK(dsa__check_dim(query_scale, op, "query_scale", 0, m));
    DSA_CHECK(dsa__check_dim(query_scale, op, "query_scale", 1, h));
    DSA_CHECK(dsa__check_dim(query_scale, op, "query_scale", 2, d / 32));
  }
  DSA_CHECK(dsa__check_tensor(k, op, "k", vt, 2));
  DSA_CHECK(dsa__check_dim(k, op, "k", 1, fp4 ? d / 2 : d));
  DSA_CHECK(dsa__check_unit_inner(k, op, "k"));
  const int64_t n = k->shape[0];
  if (fp4) {
    DSA_CHECK(dsa__check_tensor(k_scale, op, "k_scale", DSA_UE8M0, 2));
    DSA_CHECK(dsa__check_dim(k_scale, op, "k_scale", 0, n));
    DSA_CHECK(dsa__check_dim(k_scale, op, "k_scale", 1, d / 32));
  } else {
    DSA_CHECK(dsa__check_tensor(k_scale, op, "k_scale", DSA_F32, 1));
    DSA_CHECK(dsa__check_dim(k_scale, op, "k_scale", 0, n));
  }
  DSA_CHECK(dsa__check_tensor(weights, op, "weights", DSA_F32, 2));
  DSA_CHECK(dsa__check_dim(weights, op, "weights", 0, m));
  DSA_CHECK(dsa__check_dim(weights, op, "weights", 1, h));
  DSA_CHECK(dsa__check_tensor(ks, op, "ks", DSA_I32, 1));
  DSA_CHECK(dsa__check_dim(ks, op, "ks", 0, m));
  DSA_CHECK(dsa__check_tensor(ke, op, "ke", DSA_I32, 1));
  DSA_CHECK(dsa__check_dim(ke, op, "ke", 0, m));
  DSA_CHECK(check_logits(logits, op, m, n));
  if (m > INT32_MAX) return BAD("%s: query has %lld rows, at most 2^31 - 1", op, (long long)m);

  if (m == 0 || n == 0) return dsa__launch_nothing(q, ev);

  il_job j;
  memset(&j, 0, sizeof j);
  j.paged = 0;
  j.fp4 = fp4;
  j.rows = m;
  j.q = as_rank4(query);
  if (fp4) j.qs = as_rank4(query_scale);
  j.H = (cl_int)h;
  j.D = (cl_int)d;
  j.next_n = 1;
  j.w = weights;
  j.kv = k;
  j.ksc = k_scale;
  j.lim = ks;
  j.lim2 = ke;
  set_logits(&j, logits, p);
  return launch(q, &j, fp4 ? &dsa__variants_mqa_logits_mxfp4 : &dsa__variants_mqa_logits, ev);
}

/* ---- paged decode ------------------------------------------------------------ */

#define PAGED_D 128

/* A rank-3 [T, H, X] tensor (T = B * next_n rows, Q quant's layout) as
 * the rank-4 view [B, next_n, H, X]. */
static dsa_tensor split_rows(const dsa_tensor *t, int64_t b, int64_t next_n) {
  dsa_tensor v = *t;
  v.ndim = 4;
  /* (The caller checked that stride[0] * next_n fits.) */
  v.shape[0] = b, v.stride[0] = t->stride[0] * next_n;
  v.shape[1] = next_n, v.stride[1] = t->stride[0];
  v.shape[2] = t->shape[1], v.stride[2] = t->stride[1];
  v.shape[3] = t->shape[2], v.stride[3] = t->stride[2];
  return v;
}

dsa_status dsa_indexer_paged_logits(dsa_queue *q, const dsa_tensor *query_in,
                                    const dsa_tensor *query_scale_in, const dsa_tensor *weights,
                                    const dsa_tensor *context_lens,
                                    const dsa_tensor *block_tables, const dsa_paged_cache *cache,
                                    const dsa_tensor *logits, const dsa_indexer_logits_params *p,
                                    const dsa_events *ev) {
  static const char op[] = "dsa_indexer_paged_logits";
  dsa__clear_error();
  DSA_CHECK(dsa__check_queue(q, op));
  DSA_CHECK(dsa__check_events(ev, op));
  DSA_CHECK_PARAMS(p, op);
  DSA_CHECK(check_params(p, op));
  int fp4;
  DSA_CHECK(query_format(query_in, query_scale_in, op, &fp4));
  const dsa_dtype vt = fp4 ? DSA_E2M1X2 : DSA_E4M3;
  /* The query is [B, next_n, H, D] or Q quant's [T, H, D] with T = B *
   * next_n; next_n then comes from 2-D lengths [B, next_n], else T / B. */
  const int qrank = query_in->ndim == 3 ? 3 : 4;
  DSA_CHECK(dsa__check_tensor(query_in, op, "query", vt, qrank));
  DSA_CHECK(dsa__check_unit_inner(query_in, op, "query"));
  if (!context_lens) return BAD("%s: context_lens is NULL", op);
  const int rank = context_lens->ndim == 2 ? 2 : 1;
  DSA_CHECK(dsa__check_tensor(context_lens, op, "context_lens", DSA_I32, rank));
  dsa_tensor qv = *query_in, qsv;
  const dsa_tensor *query = &qv, *query_scale = query_scale_in;
  if (qrank == 3) {
    const int64_t tq = query_in->shape[0], nb = context_lens->shape[0];
    const int64_t nn = rank == 2 ? context_lens->shape[1] : nb > 0 ? tq / nb : 1;
    int64_t rows, qs0, ss0;
    /* Hostile shapes and strides must not overflow the view (fuzz_validation
     * found stride 2^40 x next_n 2.2e10). */
    if (nn >= 1 && (__builtin_mul_overflow(query_in->stride[0], nn, &qs0) ||
                    (fp4 && query_scale_in &&
                     __builtin_mul_overflow(query_scale_in->stride[0], nn, &ss0))))
      return BAD("%s: query stride[0] x next_n (%lld) overflows", op, (long long)nn);
    if (nn < 1 || __builtin_mul_overflow(nb, nn, &rows) || tq != rows)
      return BAD("%s: query has %lld rows, which is not B x next_n for context_lens [%lld%s%lld]",
                 op, (long long)tq, (long long)nb, rank == 2 ? ", " : "",
                 rank == 2 ? (long long)context_lens->shape[1] : 0ll);
    qv = split_rows(query_in, nb, nn);
    if (fp4) {
      DSA_CHECK(dsa__check_tensor(query_scale_in, op, "query_scale", DSA_UE8M0, 3));
      DSA_CHECK(dsa__check_dim(query_scale_in, op, "query_scale", 0, tq));
      qsv = split_rows(query_scale_in, nb, nn);
      query_scale = &qsv;
    }
  }
  const int64_t b = query->shape[0], next_n = query->shape[1], h = query->shape[2];
  if (next_n < 1 || next_n > 65536)
    return BAD("%s: query shape[1] = next_n = %lld, must be in [1, 65536]", op,
               (long long)next_n);
  DSA_CHECK(check_heads(h, op, "query", qrank - 2));
  DSA_CHECK(dsa__check_dim(query, op, "query", 3, fp4 ? PAGED_D / 2 : PAGED_D));
  if (fp4) {
    DSA_CHECK(dsa__check_tensor(query_scale, op, "query_scale", DSA_UE8M0, 4));
    for (int i = 0; i < 3; i++)
      DSA_CHECK(dsa__check_dim(query_scale, op, "query_scale", i, query->shape[i]));
    DSA_CHECK(dsa__check_dim(query_scale, op, "query_scale", 3, PAGED_D / 32));
  }
  DSA_CHECK(dsa__check_cache(cache, op, "cache",
                             fp4 ? DSA_CACHE_INDEXER_MXFP4 : DSA_CACHE_INDEXER_FP8));
  const int64_t rows = b * next_n;
  DSA_CHECK(dsa__check_tensor(weights, op, "weights", DSA_F32, 2));
  DSA_CHECK(dsa__check_dim(weights, op, "weights", 0, rows));
  DSA_CHECK(dsa__check_dim(weights, op, "weights", 1, h));
  DSA_CHECK(dsa__check_dim(context_lens, op, "context_lens", 0, b));
  if (rank == 2) DSA_CHECK(dsa__check_dim(context_lens, op, "context_lens", 1, next_n));
  DSA_CHECK(dsa__check_tensor(block_tables, op, "block_tables", DSA_I32, 2));
  DSA_CHECK(dsa__check_dim(block_tables, op, "block_tables", 0, b));
  if (!logits) return BAD("%s: logits is NULL", op);
  DSA_CHECK(check_logits(logits, op, rows, logits->shape[1]));
  if (rows > INT32_MAX)
    return BAD("%s: query has %lld rows (B x next_n), at most 2^31 - 1", op, (long long)rows);

  const int64_t mml = logits->shape[1];
  if (rows == 0 || mml == 0) return dsa__launch_nothing(q, ev);

  il_job j;
  memset(&j, 0, sizeof j);
  j.paged = 1;
  j.fp4 = fp4;
  j.rows = rows;
  j.q = *query;
  if (fp4) j.qs = *query_scale;
  j.H = (cl_int)h;
  j.D = PAGED_D;
  j.next_n = (cl_int)next_n;
  j.w = weights;
  j.lim = context_lens;
  j.ctx_rank = rank;
  j.cache = cache;
  j.bt = block_tables;
  /* The kernels clamp each row's limit to min(max_model_len, W * bs) in
   * 64-bit: a zero-stride block table of width 2^40 with a block size of
   * 2^23 would overflow it. Columns past max_model_len are never read, so W
   * is capped at the blocks those columns span (same limits, same faults). */
  const int64_t bs = cache->block_size, w_need = (mml + bs - 1) / bs;
  j.W = block_tables->shape[1] < w_need ? block_tables->shape[1] : w_need;
  set_logits(&j, logits, p);
  return launch(q, &j,
                fp4 ? &dsa__variants_paged_mqa_logits_mxfp4 : &dsa__variants_paged_mqa_logits, ev);
}
