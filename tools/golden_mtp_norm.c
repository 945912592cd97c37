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
 * operator must write is checked. */
#include "golden.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* bf16 bit patterns as a monotone integer line (-0 and +0 both 0). */
static int64_t line(uint16_t h) { return (h & 0x8000) ? -(int64_t)(h & 0x7FFF) : (int64_t)h; }
static int is_nan(uint16_t h) { return (h & 0x7FFF) > 0x7F80; }

/* got (device buffer m) against want: exact but for 1-ulp steps and NaN payloads. */
static int compare_ulp1(gcase *c, const char *name, cl_mem m, const npy_array *want) {
  uint16_t *got = malloc(want->nbytes ? want->nbytes : 1);
  if (!got) return golden_fail(c, "out of memory");
  cl_int e = clEnqueueReadBuffer(dsa_queue_cl(c->q), m, CL_TRUE, 0, want->nbytes, got, 0, NULL,
                                 NULL);
  if (e != CL_SUCCESS) {
    free(got);
    return golden_fail(c, "reading %s: OpenCL error %d", name, (int)e);
  }
  const uint16_t *w = want->data;
  size_t off1 = 0, bad = 0, first = 0;
  for (size_t i = 0; i < want->count; i++) {
    if (got[i] == w[i] || (is_nan(got[i]) && is_nan(w[i]))) continue;
    const int64_t d = line(got[i]) - line(w[i]);
    if (!is_nan(got[i]) && !is_nan(w[i]) && (d == 1 || d == -1 || d == 0)) {
      off1 += d != 0; /* d == 0: +0 against -0 is a difference */
      if (d == 0 && !bad++) first = i;
    } else if (!bad++) {
      first = i;
    }
  }
  int rc = 0;
  if (bad)
    rc = golden_fail(c, "%s: %zu values differ by more than 1 bf16 ulp (or in sign of zero), "
                        "first at %zu: got 0x%04X want 0x%04X",
                     name, bad, first, got[first], w[first]);
  else if (off1)
    fprintf(stderr, "note: %s: %zu of %zu values 1 bf16 ulp off vLLM (%s)\n", name, off1,
            want->count, c->dir);
  free(got);
  return rc;
}

/* The weight array of meta weight_dtype (f32 or bf16) as a device tensor. */
static int load_weight(gcase *c, const char *name, dsa_tensor *t) {
  const char *wd = golden_meta_str(c, "weight_dtype");
  if (!wd) return -1;
  const int f32 = !strcmp(wd, "f32");
  npy_array *w = golden_load(c, name, f32 ? NPY_F4 : NPY_U2, 1);
  if (!w) return -1;
  cl_mem m = golden_to_device(c, w->data, w->nbytes);
  if (!m) return -1;
  *t = golden_tensor_of(m, w, f32 ? DSA_F32 : DSA_BF16);
  return 0;
}

static int run_input(gcase *c) {
  npy_array *emb = golden_load(c, "inputs_embeds", NPY_U2, 2),
            *pos = golden_load(c, "positions", NPY_I8, 1),
            *prev = golden_load(c, "previous_hidden", NPY_U2, 3),
            *oe = golden_load(c, "out_enorm", NPY_U2, 2),
            *oh = golden_load(c, "out_hnorm", NPY_U2, 3);
  double eps;
  if (c->failed || golden_meta_f64(c, "eps", &eps)) return -1;
  dsa_tensor we, wh;
  if (load_weight(c, "enorm_weight", &we) || load_weight(c, "hnorm_weight", &wh)) return -1;
  cl_mem em = golden_to_device(c, emb->data, emb->nbytes),
         pm = golden_to_device(c, pos->data, pos->nbytes),
         hm = golden_to_device(c, prev->data, prev->nbytes),
         eom = golden_filled(c, oe->nbytes, 0xA5), hom = golden_filled(c, oh->nbytes, 0xA5);
  if (c->failed) return -1;
  dsa_tensor et = golden_tensor_of(em, emb, DSA_BF16), pt = golden_tensor_of(pm, pos, DSA_I64),
             ht = golden_tensor_of(hm, prev, DSA_BF16), eot = golden_tensor_of(eom, oe, DSA_BF16),
             hot = golden_tensor_of(hom, oh, DSA_BF16);
  dsa_mtp_params p;
  dsa_mtp_params_default(&p);
  p.eps = (float)eps;
  if (golden_op_status(c, "dsa_mtp_input_rmsnorm",
                       dsa_mtp_input_rmsnorm(c->q, &et, &pt, &ht, &we, &wh, &eot, &hot, &p, NULL)))
    return -1;
  if (golden_no_faults(c)) return -1;
  const int r1 = compare_ulp1(c, "out_enorm", eom, oe);
  const int r2 = compare_ulp1(c, "out_hnorm", hom, oh);
  return r1 || r2 ? -1 : 0;
}

static int run_shared_head(gcase *c) {
  npy_array *x = golden_load(c, "x", NPY_U2, 2), *out = golden_load(c, "out", NPY_U2, 2);
  double eps;
  if (c->failed || golden_meta_f64(c, "eps", &eps)) return -1;
  dsa_tensor wt;
  if (load_weight(c, "weight", &wt)) return -1;
  cl_mem xm = golden_to_device(c, x->data, x->nbytes), om = golden_filled(c, out->nbytes, 0xA5);
  if (c->failed) return -1;
  dsa_tensor xt = golden_tensor_of(xm, x, DSA_BF16), ot = golden_tensor_of(om, out, DSA_BF16);
  dsa_mtp_params p;
  dsa_mtp_params_default(&p);
  p.eps = (float)eps;
  if (golden_op_status(c, "dsa_mtp_shared_head_rmsnorm",
                       dsa_mtp_shared_head_rmsnorm(c->q, &xt, &wt, &ot, &p, NULL)))
    return -1;
  return golden_no_faults(c) || compare_ulp1(c, "out", om, out) ? -1 : 0;
}

const golden_op golden_ops_mtp_norm[] = {
    {"mtp_input_rmsnorm", run_input},
    {"mtp_shared_head_rmsnorm", run_shared_head},
    {NULL, NULL},
};
