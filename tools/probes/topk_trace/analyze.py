#!/usr/bin/env python3
"""Reads the records apply.py's kernel and host.patch's host write
($DSACL_TOPK_TRACE) and prints, for a few launches, the median and largest
time of each phase over the launch's groups (us; clock64 at CLOCK_GHZ,
default 1.98, the H200's and H100's boost clock) and the launch's span from
the first group's start to the last group's end (globaltimer).
Usage: analyze.py TRACE_FILE [CLOCK_GHZ]"""
import statistics as st
import struct
import sys

d = open(sys.argv[1], 'rb').read()
ghz = float(sys.argv[2]) if len(sys.argv) > 2 else 1.98
pos, recs = 0, []
while pos < len(d):
    rows, nch = struct.unpack_from('<QQ', d, pos)
    pos += 16
    G = rows * nch
    recs.append((nch, [struct.unpack_from('<32Q', d, pos + i * 256) for i in range(G)]))
    pos += G * 256
print(f'{len(recs)} launches')
phases = [(1, 2, 'length read'), (2, 16, 'loads (item 0)'), (16, 3, 'group max'),
          (3, 17, 'level-0 histogram'), (17, 18, 'scan, bin pick'), (18, 4, 'masks, stop'),
          (4, 21, 'collect'), (21, 5, 'sort'), (5, 22, 'list written'), (22, 6, 'fence, counter')]
last = [(6, 19, 'acquire, counter reset'), (19, 20, 'lists loaded'), (20, 7, 'ranks, output')]
for i in sorted({min(5, len(recs) - 1), len(recs) // 2, len(recs) - 1}):
    nch, g = recs[i]
    t0 = min(x[0] for x in g)
    print(f'launch {i}: span {(max(x[8] for x in g) - t0) / 1e3:.2f} us, {len(g)} groups')
    tot = 0.0
    for rows, sel in ((phases, g), (last, [x for x in g if x[10] == nch - 1])):
        for a, b, name in rows:
            v = sorted((x[b] - x[a]) / (ghz * 1e3) for x in sel)
            tot += st.median(v)
            print(f'  {name:24s} median {st.median(v):5.2f} max {v[-1]:5.2f}')
    print(f'  sum of medians {tot:.2f}')
