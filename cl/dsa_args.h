/* Kernel argument groups: the device half of src/kargs.c. A kernel declares
 * each tensor or paged cache with one macro, and the launcher appends it with
 * the matching dsa__karg_* call, in the same order:
 *
 *   DSA_TENSOR<R>(t)  / DSA_CTENSOR<R>(t)  <- dsa__karg_tensor(a, t, R)
 *       t_mem    buffer (a stand-in the kernel never touches when empty)
 *       t_off    byte offset of element 0
 *       t_s0..   R byte strides, outermost first
 *       t_al     alignment: the largest power of two <= 256 dividing t_off
 *                and every stride but the last (dims of extent 1 skipped);
 *                a kernel compares it with the width of its vector accesses
 *   DSA_PAGED(c) / DSA_CPAGED(c)           <- dsa__karg_paged(a, c)
 *       c_mem, c_off, c_nb (blocks, long), c_bs (tokens per block, int),
 *       c_bstride (bytes between blocks), c_al (alignment of off and stride)
 *   DSA_FAULTS                             <- dsa__karg_faults(a)
 *
 * The C prefix marks an input (const data). Shapes travel as plain scalars
 * where a kernel needs them. */
#ifndef DSA_ARGS_H
#define DSA_ARGS_H

#define DSA_TENSOR1(t) __global uchar *t##_mem, ulong t##_off, ulong t##_s0, uint t##_al
#define DSA_TENSOR2(t) \
  __global uchar *t##_mem, ulong t##_off, ulong t##_s0, ulong t##_s1, uint t##_al
#define DSA_TENSOR3(t) \
  __global uchar *t##_mem, ulong t##_off, ulong t##_s0, ulong t##_s1, ulong t##_s2, uint t##_al
#define DSA_TENSOR4(t)                                                                    \
  __global uchar *t##_mem, ulong t##_off, ulong t##_s0, ulong t##_s1, ulong t##_s2, ulong t##_s3, \
      uint t##_al
#define DSA_CTENSOR1(t) __global const uchar *t##_mem, ulong t##_off, ulong t##_s0, uint t##_al
#define DSA_CTENSOR2(t) \
  __global const uchar *t##_mem, ulong t##_off, ulong t##_s0, ulong t##_s1, uint t##_al
#define DSA_CTENSOR3(t)                                                                  \
  __global const uchar *t##_mem, ulong t##_off, ulong t##_s0, ulong t##_s1, ulong t##_s2, \
      uint t##_al

#define DSA_CTENSOR4(t)                                                                   \
  __global const uchar *t##_mem, ulong t##_off, ulong t##_s0, ulong t##_s1, ulong t##_s2,      \
      ulong t##_s3, uint t##_al

#define DSA_PAGED(c) \
  __global uchar *c##_mem, ulong c##_off, long c##_nb, int c##_bs, ulong c##_bstride, uint c##_al
#define DSA_CPAGED(c)                                                                   \
  __global const uchar *c##_mem, ulong c##_off, long c##_nb, int c##_bs, ulong c##_bstride, \
      uint c##_al

#define DSA_FAULTS __global volatile uint *faults

/* The names of an argument group, for passing a kernel's groups on to an
 * inlined body (a body instantiated by several kernels). */
#define DSA_TENSOR1_ARGS(t) t##_mem, t##_off, t##_s0, t##_al
#define DSA_TENSOR2_ARGS(t) t##_mem, t##_off, t##_s0, t##_s1, t##_al
#define DSA_TENSOR3_ARGS(t) t##_mem, t##_off, t##_s0, t##_s1, t##_s2, t##_al
#define DSA_PAGED_ARGS(c) c##_mem, c##_off, c##_nb, c##_bs, c##_bstride, c##_al

/* A paged cache inside a kernel: block b starts at base + b * block_stride;
 * a block holds block_size tokens' data (token_data bytes each), then their
 * scales (token_scale bytes each). */
typedef struct dsa_paged {
  __global uchar *base; /* cache buffer + offset */
  long num_blocks;
  int block_size;
  ulong block_stride;
  uint align;
  long capacity; /* num_blocks * block_size slots */
} dsa_paged;

DSA_INLINE dsa_paged dsa_paged_make(__global const uchar *mem, ulong off, long nb, int bs,
                                    ulong bstride, uint al) {
  dsa_paged c;
  c.base = (__global uchar *)mem + off;
  c.num_blocks = nb;
  c.block_size = bs;
  c.block_stride = bstride;
  c.align = al;
  c.capacity = nb * (long)bs;
  return c;
}
/* The struct of a DSA_PAGED / DSA_CPAGED argument group. */
#define DSA_PAGED_OF(c) dsa_paged_make(c##_mem, c##_off, c##_nb, c##_bs, c##_bstride, c##_al)

/* Token data and scale addresses of slot s (0 <= s < capacity; the caller
 * range-checks, so faults are reported where the index is read). */
DSA_INLINE void dsa_paged_slot(const dsa_paged *c, long s, uint token_data, uint token_scale,
                               __global uchar **data, __global uchar **scale) {
  const long blk = dsa_div_nonneg(s, c->block_size);
  const long t = s - blk * c->block_size;
  __global uchar *b = c->base + (ulong)blk * c->block_stride;
  *data = b + (ulong)t * token_data;
  *scale = b + (ulong)c->block_size * token_data + (ulong)t * token_scale;
}

/* The same for (block, token-in-block) already split, as block tables give. */
DSA_INLINE void dsa_paged_at(const dsa_paged *c, long blk, long t, uint token_data,
                             uint token_scale, __global uchar **data, __global uchar **scale) {
  __global uchar *b = c->base + (ulong)blk * c->block_stride;
  *data = b + (ulong)t * token_data;
  *scale = b + (ulong)c->block_size * token_data + (ulong)t * token_scale;
}

#endif
