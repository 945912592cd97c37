/* Variant tables: the one picker every operator calls, and the list of every
 * operator's table for dsacl-info and the test runner. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

const char *dsa_cap_name(unsigned cap) {
  switch (cap) {
#define DSA_CAP_NAME_(name, bit, str, desc) \
  case DSA_CAP_##name: return str;
    DSA_CAP_MAP(DSA_CAP_NAME_)
#undef DSA_CAP_NAME_
  }
  return NULL;
}

/* "needs nv-ptx (device lacks it)" / "(disabled)". */
static const char *caps_refusal(const dsa_context *c, unsigned need, char *buf, size_t n) {
  unsigned missing = need & ~c->caps_enabled;
  if (!missing) return NULL;
  unsigned bit = missing & (~missing + 1);
  const unsigned has = dsa__caps_bits(&c->caps);
  snprintf(buf, n, "needs %s (%s)", dsa_cap_name(bit) ? dsa_cap_name(bit) : "?",
           (has & bit) ? "disabled" : "device lacks it");
  return buf;
}

const char *dsa__variant_refusal(const dsa_context *c, const dsa_variant *v, const void *shape,
                                 char *buf, size_t n) {
  const char *r = caps_refusal(c, v->caps, buf, n);
  if (!r && v->refuse) r = v->refuse(c, shape, buf, n);
  return r;
}

int dsa__pick(dsa_queue *q, const dsa_variant_table *t, const void *shape) {
  char why[512] = "";
  size_t used = 0;
  for (int i = 0; i < t->n; i++) {
    char buf[160];
    const char *r = dsa__variant_refusal(q->ctx, &t->v[i], shape, buf, sizeof buf);
    if (!r) {
      snprintf(q->last_variant, sizeof q->last_variant, "%s: %s", t->op, t->v[i].name);
      if (used)
        dsa__log(2, "%s: %s (refused:%s)", t->op, t->v[i].name, why);
      else
        dsa__log(2, "%s: %s", t->op, t->v[i].name);
      return i;
    }
    int w = snprintf(why + used, sizeof why - used, " %s: %s;", t->v[i].name, r);
    if (w > 0) used = used + (size_t)w < sizeof why ? used + (size_t)w : sizeof why - 1;
  }
  dsa__fail(DSA_ERR_UNSUPPORTED, 0, "%s: no kernel variant takes this call on this device:%s",
            t->op, why);
  return -1;
}

const char *dsa__queue_last_variant(const dsa_queue *q) { return q ? q->last_variant : ""; }
const char *dsa_queue_last_variant(const dsa_queue *q) { return dsa__queue_last_variant(q); }

const char *dsa__refuse_local_mem(const dsa_context *c, size_t need, char *buf, size_t n) {
  if (need <= c->caps.local_mem) return NULL;
  snprintf(buf, n, "needs %zu B of local memory, the device has %llu", need,
           (unsigned long long)c->caps.local_mem);
  return buf;
}

bool dsa__group_handoff_ok(const dsa_context *c) {
  if ((c->caps.type & CL_DEVICE_TYPE_CPU) && c->caps.vendor == DSA_VENDOR_INTEL) return true;
  return c->caps.vendor == DSA_VENDOR_NVIDIA && (c->caps_enabled & DSA_CAP_NV_PTX);
}

/* A row that is one 32-wide sub-group (cl/dsa_subgroup.h) needs sub-groups
 * of 32 on an Intel device. */
const char *dsa__refuse_no_sg32(const dsa_context *c, const void *shape, char *buf, size_t n) {
  (void)shape;
  (void)buf;
  (void)n;
  return c->caps.intel_sg_sizes & (1u << 5) ? NULL : "needs sub-groups of 32";
}

/* Every operator's table, in the order dsacl-info lists them. A new operator
 * adds its table here. */
#define DSA_VARIANT_TABLES(X)          \
  X(dsa__variants_mla_cache_insert)    \
  X(dsa__variants_mla_gather_slots)    \
  X(dsa__variants_mla_gather_paged)     \
  X(dsa__variants_topk_prefill)         \
  X(dsa__variants_topk_decode)          \
  X(dsa__variants_indexer_k_insert)     \
  X(dsa__variants_indexer_k_gather)     \
  X(dsa__variants_indexer_q_quant)      \
  X(dsa__variants_mla_qnorm)                 \
  X(dsa__variants_compressed_slot_mapping)   \
  X(dsa__variants_swa_indices)               \
  X(dsa__variants_global_topk_indices)       \
  X(dsa__variants_c128_topk_indices)         \
  X(dsa__variants_combine_topk_swa)          \
  X(dsa__variants_mixed_sparse_indices)      \
  X(dsa__variants_mqa_logits)                \
  X(dsa__variants_mqa_logits_mxfp4)          \
  X(dsa__variants_paged_mqa_logits)          \
  X(dsa__variants_paged_mqa_logits_mxfp4)    \
  X(dsa__variants_sparse_attn_bf16)          \
  X(dsa__variants_sparse_mla_decode)         \
  X(dsa__variants_sparse_mla_decode_two_stage) \
  X(dsa__variants_output_quant)              \
  X(dsa__variants_mtp_norm) \
  X(dsa__variants_compressor_save_states)     \
  X(dsa__variants_compressor_compress_insert)

#define DSA_VT_EXTERN_(sym) extern const dsa_variant_table sym;
DSA_VARIANT_TABLES(DSA_VT_EXTERN_)
#undef DSA_VT_EXTERN_

const dsa_variant_table *const dsa__variant_tables[] = {
#define DSA_VT_PTR_(sym) &sym,
    DSA_VARIANT_TABLES(DSA_VT_PTR_)
#undef DSA_VT_PTR_
};
const int dsa__num_variant_tables =
    (int)(sizeof dsa__variant_tables / sizeof dsa__variant_tables[0]);

/* Each program's host-owned constants (DSA_KDEF strings in the op files). */
#define DSA_PROGRAM_DEFINES(X)          \
  X(MLA_CACHE, dsa__defines_mla_cache)  \
  X(TOPK, dsa__defines_topk)            \
  X(INDEXER_K, dsa__defines_indexer_k)  \
  X(MLA_QNORM, dsa__defines_mla_qnorm)  \
  X(INDEX_HELPERS, dsa__defines_index_helpers) \
  X(INDEXER_LOGITS, dsa__defines_indexer_logits) \
  X(SPARSE_MLA, dsa__defines_sparse_mla) \
  X(OUTPUT_QUANT, dsa__defines_output_quant) \
  X(MTP_NORM, dsa__defines_mtp_norm) \
  X(COMPRESSOR, dsa__defines_compressor)

#define DSA_PD_EXTERN_(prog, sym) extern const char sym[];
DSA_PROGRAM_DEFINES(DSA_PD_EXTERN_)
#undef DSA_PD_EXTERN_

const char *dsa__program_defines(dsa_program_id id) {
  switch (id) {
#define DSA_PD_CASE_(prog, sym) \
  case DSA_PROG_##prog: return sym;
    DSA_PROGRAM_DEFINES(DSA_PD_CASE_)
#undef DSA_PD_CASE_
    default: return "";
  }
}

const char *dsa__program_device_options(dsa_program_id id, const dsa_caps *caps,
                                        unsigned enabled) {
  switch (id) {
    case DSA_PROG_SPARSE_MLA: return dsa__sparse_mla_device_options(caps, enabled);
    case DSA_PROG_TOPK: return dsa__topk_device_options(caps);
    case DSA_PROG_INDEXER_LOGITS: return dsa__indexer_logits_device_options(caps, enabled);
    default: return "";
  }
}
