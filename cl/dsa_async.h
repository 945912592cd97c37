/* Asynchronous copies from global to local memory, and fragment loads from
 * local memory, for the tile kernels' pipelines.
 *
 *   dsa_async_copy16_if(dst, src, p)   16 bytes where p (nonzero), both
 *                                16-byte aligned; NVIDIA: one predicated
 *                                instruction (a branch over an asm
 *                                statement stays a branch)
 *   dsa_async_copy8_if(dst, src, p)    8 bytes where p, both 8-byte aligned
 *   dsa_async_commit()           closes the group of copies issued since the
 *                                last commit (every work-item calls it)
 *   dsa_async_wait(N)            waits until at most N committed groups of
 *                                this work-item are still in flight (N a
 *                                literal); a barrier must follow before other
 *                                work-items read what was copied
 *   DSA_ASYNC                    1 where the copies really are asynchronous
 *
 * NVIDIA (sm_80+): cp.async. NVIDIA's OpenCL compiler passes a __local
 * pointer's shared-window address as (uint)(size_t)p, so the PTX reaches
 * the instruction (measured on an H200 with a random 576-byte gather: 1.4x
 * the bandwidth of plain loads at one 256-item work-group per SM). cg (L2
 * only, 16 bytes) for streams read once; ca for 8 bytes, which cg lacks.
 * Everywhere else the copy is a plain load and store, done when it returns,
 * so commit and wait are empty and the same kernel body runs on PoCL,
 * Intel, AMD and Oclgrind. */
#ifndef DSA_ASYNC_H
#define DSA_ASYNC_H

#if DSA_HAS_NV_PTX && defined(DSA_NV_SM) && DSA_NV_SM >= 80
#define DSA_ASYNC 1
DSA_INLINE uint dsa_lds_addr(__local const void *p) { return (uint)(size_t)p; }
DSA_INLINE void dsa_async_copy16_if(__local void *dst, __global const void *src, int p) {
  __asm__ __volatile__(
      "{ .reg .pred q; setp.ne.s32 q, %2, 0; @q cp.async.cg.shared.global [%0], [%1], 16; }" ::"r"(
          dsa_lds_addr(dst)),
      "l"(src), "r"(p)
      : "memory");
}
DSA_INLINE void dsa_async_copy8_if(__local void *dst, __global const void *src, int p) {
  __asm__ __volatile__(
      "{ .reg .pred q; setp.ne.s32 q, %2, 0; @q cp.async.ca.shared.global [%0], [%1], 8; }" ::"r"(
          dsa_lds_addr(dst)),
      "l"(src), "r"(p)
      : "memory");
}
DSA_INLINE void dsa_async_commit(void) {
  __asm__ __volatile__("cp.async.commit_group;" ::: "memory");
}
#define dsa_async_wait(N) __asm__ __volatile__("cp.async.wait_group %0;" ::"n"(N) : "memory")

/* ldmatrix: four 8x8 b16 matrices from local memory. Lane l gives the
 * address of row l % 8 of matrix l / 8 (16-byte aligned: 8 b16); register j
 * of lane l gets matrix j's row l / 4, elements 2 (l % 4) and 2 (l % 4) + 1
 * (low half first): the mma.m16n8k16 A fragment when matrices 0..3 are
 * (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15,
 * k 8-15). _t: transposed (register j holds column l / 4 of matrix j). */
DSA_INLINE void dsa_nv_ldsm_x4(uint *r, __local const void *row) {
  __asm__ __volatile__("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                       : "r"(dsa_lds_addr(row)));
}
/* Two matrices (lanes 0-15 give the row addresses), transposed. */
DSA_INLINE void dsa_nv_ldsm_x2_t(uint *r, __local const void *row) {
  __asm__ __volatile__("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                       : "=r"(r[0]), "=r"(r[1])
                       : "r"(dsa_lds_addr(row)));
}
DSA_INLINE void dsa_nv_ldsm_x4_t(uint *r, __local const void *row) {
  __asm__ __volatile__("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                       : "r"(dsa_lds_addr(row)));
}
#else
#define DSA_ASYNC 0
DSA_INLINE void dsa_async_copy16_if(__local void *dst, __global const void *src, int p) {
  if (p) *(__local uint4 *)dst = *(__global const uint4 *)src;
}
DSA_INLINE void dsa_async_copy8_if(__local void *dst, __global const void *src, int p) {
  if (p) *(__local uint2 *)dst = *(__global const uint2 *)src;
}
DSA_INLINE void dsa_async_commit(void) {}
#define dsa_async_wait(N) ((void)0)
#endif

#endif
