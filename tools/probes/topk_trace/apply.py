#!/usr/bin/env python3
"""Per-group timestamps in the register top-k kernels (NVIDIA only: inline PTX
%globaltimer, %clock64, %smid), for the split's decode rows (split 2) and one group a row (split 0). Writes
the instrumented copy of cl/topk.cl into DIR/topk.cl (DIR: a copy of cl/, to be
run through DSACL_KERNEL_DIR with host.patch applied to src/op_topk.c, which
reserves the room after the scratch lists (or a scratch buffer of its own for split 0) and appends each launch's records to
$DSACL_TOPK_TRACE). Each group's record is 32 ulongs at scratch + groups * k +
group * 32: 0 globaltimer at entry, 1 clock at entry, 2 after the length read,
16 item 0's loads done, 3 after the group max, 17 after level 0's histogram,
18 after its bin pick, 4 select done, 21 collected, 5 sorted, 22 list written,
6 after the row counter's atomic, 19/20/7 the last group's acquire, lists
loaded and merge done (7 also for the others: their end), 8 globaltimer at
the end, 9 SM, 10 the counter's value, 11 candidates | whole << 32, 12 sorted
by counting, 13 the row's length. Anchors are source lines of cl/topk.cl as of
session 23; the script stops where one is missing. Not for production: the
trace kernel writes past the lists, which only the patched host allocates.
Usage: apply.py CL_DIR_COPY"""
import sys

p = sys.argv[1].rstrip('/') + '/topk.cl'
s = open(p).read()


def rep(a, b):
    global s
    if s.count(a) != 1:
        sys.exit('apply.py: anchor not found once: ' + a[:70])
    s = s.replace(a, b, 1)


rep('#include "dsa_common.h"\n', '''#include "dsa_common.h"
DSA_INLINE ulong tr_gt(void) { ulong t; __asm__ __volatile__("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
DSA_INLINE ulong tr_ck(void) { ulong t; __asm__ __volatile__("mov.u64 %0, %%clock64;" : "=l"(t)); return t; }
DSA_INLINE uint tr_sm(void) { uint t; __asm__ __volatile__("mov.u32 %0, %%smid;" : "=r"(t)); return t; }
#define TR(i, v) do { if (tr && tid == 0u) tr[i] = (v); } while (0)
''')
rep('''  const bool bad = TOPK_RANGE(r);
  /* split 2 (no topk_merge)''', '''  __global ulong *tr = (split == 2 || split == 0) && scratch ? scratch + (split ? (ulong)get_num_groups(0) * (ulong)k : 0ul) + g * 32ul : 0;
  TR(0, tr_gt()); TR(1, tr_ck()); TR(9, tr_sm());
  const bool bad = TOPK_RANGE(r);
  if (tr && tid == 0u && re == -12345) tr[15] = 1; /* waits for the length */
  TR(2, tr_ck());
  /* split 2 (no topk_merge)''')
a = '    kmax = topk_group_max(kmax, sel + 3, tid); /* its barriers order the clearing */\n'
rep(a, a + '    TR(3, tr_ck());\n')
a = '  /* ---- collect the m winners at scanned positions'
rep(a, '  TR(4, tr_ck()); TR(11, (ulong)ncand | ((ulong)whole << 32));\n' + a)
a = '  /* split 2 and a row within one chunk: its one group writes the row */'
rep(a, '  TR(5, tr_ck()); TR(12, sorted);\n' + a)
a = '      if (topk_publish(cnt + r, nact, sel, tid)) { /* the same for every item */'
rep(a, '      const bool last_ = topk_publish(cnt + r, nact, sel, tid);\n'
       '      TR(6, tr_ck()); TR(10, sel[0]);\n'
       '      if (last_) {')
rep('''#endif
  }
}

#undef TOPK_KV''', '''#endif
  }
  barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
  TR(7, tr_ck()); TR(8, tr_gt()); TR(13, n);
}

#undef TOPK_KV''')
a = '''#undef TOPK_F32
#undef TOPK_LOAD_KEYS
#undef TOPK_LOAD_VKEYS
'''
rep(a, a + '  if (tr && tid == 0u && kmax == 12345u) tr[15] = 2; /* waits for item 0\'s loads */\n  TR(16, tr_ck());\n')
rep('''      barrier(CLK_LOCAL_MEM_FENCE);
      /* Item t owns the bins [lo, hi)''', '''      barrier(CLK_LOCAL_MEM_FENCE);
      if (level == 0u) TR(17, tr_ck());
      /* Item t owns the bins [lo, hi)''')
a = '''      topk_pick_bin(h, lo, hi, before, sum, rem, sel);
      barrier(CLK_LOCAL_MEM_FENCE);
'''
rep(a, a + '      if (level == 0u) TR(18, tr_ck());\n')
a = '''        if (tid == 0u) atomic_xchg(&cnt[r], 0u);
'''
rep(a, a + '        TR(19, tr_ck());\n')
a = '''          lists[e] = i < min(lw, n - o * chunk) ? src[(ulong)o * k + i] : 0ul;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
'''
rep(a, a + '        TR(20, tr_ck());\n')
rep('''  barrier(CLK_LOCAL_MEM_FENCE);
  __local ulong *res = buf;''', '''  barrier(CLK_LOCAL_MEM_FENCE);
  TR(21, tr_ck());
  __local ulong *res = buf;''')
a = '''    for (uint i = tid; i < m; i += wg) list[i] = res[i];'''
rep(a, a + '\n    TR(22, tr_ck());')
open(p, 'w').write(s)
