/* Sub-group layer, named by capability rather than vendor: a "row" of 32
 * work-items, consecutive in x and starting at a multiple of 32 of the
 * linear local id, whose lanes exchange values by xor shuffles without local
 * memory or barriers.
 *
 *   DSA_HAS_SG32            1 when this build has such rows:
 *       NVIDIA inline PTX   a warp, shfl.sync.bfly (cl/dsa_nv.h)
 *       AMD builtins        a wave32 or half a wave64, ds_bpermute
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
#elif DSA_HAS_AMD_BUILTINS
/* AMD: a row is a wave32 or half a wave64 (waves take consecutive linear
 * ids), and lane ^ m (m < 32) stays inside it; ds_bpermute reads the value
 * of the lane whose byte address it is given. Under DSA_AMD_EMU (tests on
 * Intel's CPU runtime, DSACL_EMULATE=amd) an Intel sub-group of 32 stands in
 * for a wave32 and a sub-group shuffle for ds_bpermute; the lane arithmetic
 * is the real one. (Intel's CPU runtime forms sub-groups along x only, so a
 * (32, 8) group cannot make a 64-wide one: the wave64 halves are not
 * emulated; for xor masks below 32 they behave as wave32.) */
#define DSA_HAS_SG32 1
#if defined(DSA_AMD_EMU) && DSA_AMD_EMU
#define DSA_SG32_KERNEL __attribute__((intel_reqd_sub_group_size(32)))
DSA_INLINE uint dsa_amd_lane(void) { return get_sub_group_local_id(); }
DSA_INLINE uint dsa_amd_bpermute(uint byte_addr, uint v) {
  return intel_sub_group_shuffle(v, byte_addr >> 2);
}
#else
#define DSA_SG32_KERNEL
DSA_INLINE uint dsa_amd_lane(void) {
  return __builtin_amdgcn_mbcnt_hi(~0u, __builtin_amdgcn_mbcnt_lo(~0u, 0u));
}
DSA_INLINE uint dsa_amd_bpermute(uint byte_addr, uint v) {
  return (uint)__builtin_amdgcn_ds_bpermute((int)byte_addr, (int)v);
}
#endif
DSA_INLINE uint dsa_sg32_shfl_xor_u32(uint v, int m) {
  return dsa_amd_bpermute((dsa_amd_lane() ^ (uint)m) << 2, v);
}
DSA_INLINE float dsa_sg32_shfl_xor_f32(float v, int m) {
  return as_float(dsa_sg32_shfl_xor_u32(as_uint(v), m));
}
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
