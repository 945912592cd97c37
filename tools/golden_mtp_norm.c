/* Golden runners for the MTP RMSNorms (include/dsacl/mtp_norm.h), cases
 * written by tools/golden-gen/mtp_rmsnorm.py from vLLM's Triton kernels:
 *   mtp_input_rmsnorm/<case>: inputs_embeds, positions, previous_hidden,
 *     enorm_weight, hnorm_weight (f32 or bf16: meta weight_dtype), eps ->
 *     out_enorm, out_hnorm
 *   mtp_shared_head_rmsnorm/<case>: x, weight, eps -> out
 * vLLM divides with div.full.f32 and takes rsqrt.approx, this library rounds
 * both correctly: values may differ by 1 bf16 ulp (counted and printed);
 * more fails. NaN matches NaN whatever its payload (vLLM's is 0x7FFF, this
 * library's 0x7FC0). The outputs start as 0xA5 bytes, so every byte the
 * operator must write is checked. The case and its rule are the shared
 * description's (tools/cases/mtp_norm.c). */
#include "golden.h"

#include <stdio.h>
#include <string.h>

/* Meta weight_dtype: 1 bf16, 0 f32, -1 (a failure) otherwise. */
static int weight_bf16(gcase *c) {
  const char *wd = golden_meta_str(c, "weight_dtype");
  return !wd ? -1 : !strcmp(wd, "f32") ? 0 : 1;
}

static void notes(gcase *c, const char *name, size_t off1, size_t count) {
  if (off1)
    fprintf(stderr, "note: %s: %zu of %zu values 1 bf16 ulp off vLLM (%s)\n", name, off1, count,
            c->dir);
}

static int run_input(gcase *c) {
  npy_array *emb = golden_load(c, "inputs_embeds", NPY_U2, 2),
            *pos = golden_load(c, "positions", NPY_I8, 1),
            *prev = golden_load(c, "previous_hidden", NPY_U2, 3),
            *oe = golden_load(c, "out_enorm", NPY_U2, 2),
            *oh = golden_load(c, "out_hnorm", NPY_U2, 3);
  double eps;
  if (c->failed || golden_meta_f64(c, "eps", &eps)) return -1;
  const int bf16 = weight_bf16(c);
  if (bf16 < 0) return -1;
  npy_array *we = golden_load(c, "enorm_weight", bf16 ? NPY_U2 : NPY_F4, 1),
            *wh = golden_load(c, "hnorm_weight", bf16 ? NPY_U2 : NPY_F4, 1);
  if (c->failed) return -1;
  const int64_t t = emb->shape[0], h = emb->shape[1], hc = prev->shape[1];
  if (golden_shapes_agree(c, pos->shape[0] == t && prev->shape[0] == t && prev->shape[2] == h &&
                                 we->shape[0] == h && wh->shape[0] == h && oe->shape[0] == t &&
                                 oe->shape[1] == h && oh->shape[0] == t && oh->shape[1] == hc &&
                                 oh->shape[2] == h,
                          "inputs_embeds and out_enorm [T, H], positions [T], previous_hidden "
                          "and out_hnorm [T, HC, H], weights [H]"))
    return -1;
  case_mtp mc = {.w_bf16 = bf16, .t = t, .h = h, .hc = hc, .eps = (float)eps,
                 .emb = emb->data, .prev = prev->data, .pos = pos->data, .we = we->data,
                 .wh = wh->data};
  size_t off_e = 0, off_h = 0;
  const case_mtp_want want = {oe->data, oh->data, 1, &off_e, &off_h};
  const int rc = golden_run_case(c, &case_mtp_ops, &mc, 0xA5, &want);
  if (!rc) notes(c, "out_enorm", off_e, oe->count), notes(c, "out_hnorm", off_h, oh->count);
  return rc;
}

static int run_shared_head(gcase *c) {
  npy_array *x = golden_load(c, "x", NPY_U2, 2), *out = golden_load(c, "out", NPY_U2, 2);
  double eps;
  if (c->failed || golden_meta_f64(c, "eps", &eps)) return -1;
  const int bf16 = weight_bf16(c);
  if (bf16 < 0) return -1;
  npy_array *w = golden_load(c, "weight", bf16 ? NPY_U2 : NPY_F4, 1);
  if (c->failed) return -1;
  const int64_t t = x->shape[0], h = x->shape[1];
  if (golden_shapes_agree(c, w->shape[0] == h && out->shape[0] == t && out->shape[1] == h,
                          "x and out [T, H], weight [H]"))
    return -1;
  case_mtp mc = {.head = 1, .w_bf16 = bf16, .t = t, .h = h, .eps = (float)eps, .emb = x->data,
                 .we = w->data};
  size_t off = 0;
  const case_mtp_want want = {out->data, NULL, 1, &off, NULL};
  const int rc = golden_run_case(c, &case_mtp_head_ops, &mc, 0xA5, &want);
  if (!rc) notes(c, "out", off, out->count);
  return rc;
}

const golden_op golden_ops_mtp_norm[] = {
    {"mtp_input_rmsnorm", run_input},
    {"mtp_shared_head_rmsnorm", run_shared_head},
    {NULL, NULL},
};
