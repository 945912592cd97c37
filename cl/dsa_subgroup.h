/* Sub-group layer, named by capability rather than vendor: a "row" of 32
 * work-items, consecutive in x and starting at a multiple of 32 of the
 * linear local id, whose lanes exchange values by xor shuffles without local
 * memory or barriers.
 *
 *   DSA_HAS_SG32            1 when this build has such rows:
 *       NVIDIA inline PTX   a warp, shfl.sync.bfly (cl/dsa_nv.h)
 *       Intel sub-groups    a sub-group of 32 (cl_intel_subgroups with 32 in
 *                           CL_DEVICE_SUB_GROUP_SIZES_INTEL: DSA_INTEL_SG32),
 *                           intel_sub_group_shuffle_xor
 *   DSA_SG32_KERNEL         attribute for kernels that use the layer (Intel:
 *                           intel_reqd_sub_group_size(32), so that a row is
 *                           one sub-group; empty elsewhere)
 *   dsa_sg32_shfl_xor_u32/_f32(v, m)   the value of lane (this lane ^ m)
 *
 * Every lane of a row must call the shuffles (uniform control flow). The
 * host's variant tables name the back-end each operator gets ("nv-shfl",
 * "intel-sg32"); the portable path uses local memory. Included by
 * dsa_common.h. */
#ifndef DSA_SUBGROUP_H
#define DSA_SUBGROUP_H

#if DSA_HAS_NV_PTX
#define DSA_HAS_SG32 1
#define DSA_SG32_KERNEL
DSA_INLINE uint dsa_sg32_shfl_xor_u32(uint v, int m) { return dsa_nv_shfl_xor_u32(v, m); }
DSA_INLINE float dsa_sg32_shfl_xor_f32(float v, int m) { return dsa_nv_shfl_xor_f32(v, m); }
#elif DSA_HAS_INTEL_SUBGROUPS && defined(DSA_INTEL_SG32) && DSA_INTEL_SG32
#define DSA_HAS_SG32 1
#define DSA_SG32_KERNEL __attribute__((intel_reqd_sub_group_size(32)))
DSA_INLINE uint dsa_sg32_shfl_xor_u32(uint v, int m) {
  return intel_sub_group_shuffle_xor(v, (uint)m);
}
DSA_INLINE float dsa_sg32_shfl_xor_f32(float v, int m) {
  return intel_sub_group_shuffle_xor(v, (uint)m);
}
#else
#define DSA_HAS_SG32 0
#define DSA_SG32_KERNEL
#endif

#endif
