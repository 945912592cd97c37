#!/usr/bin/env python3
"""Reads the records apply.py's kernel and host.patch's host write
($DSACL_TOPK_TRACE) and prints, for each launch shape (rows x chunks), the
median over its launches of each phase's median and largest time over the
launch's groups (us; clock64 at CLOCK_GHZ, default 1.98, the H200's and
H100's boost clock), and of the launch's span from the first group's start
to the last group's end (globaltimer). One group a row (chunks 1): the
phases up to the sort, then its output.
Usage: analyze.py TRACE_FILE [CLOCK_GHZ]"""
import statistics as st
import struct
import sys

d = open(sys.argv[1], 'rb').read()
ghz = float(sys.argv[2]) if len(sys.argv) > 2 else 1.98
phases = [(1, 2, 'length read'), (2, 16, 'loads (item 0)'), (16, 3, 'group max'),
          (3, 17, 'level-0 histogram'), (17, 18, 'scan, bin pick'), (18, 4, 'masks, stop'),
          (4, 21, 'collect'), (21, 5, 'sort')]
split = [(5, 22, 'list written'), (22, 6, 'fence, counter')]
last = [(6, 19, 'acquire, counter reset'), (19, 20, 'lists loaded'), (20, 7, 'ranks, output')]
shapes = {}
pos = 0
while pos < len(d):
    rows, nch = struct.unpack_from('<QQ', d, pos)
    pos += 16
    G = rows * nch
    g = [struct.unpack_from('<32Q', d, pos + i * 256) for i in range(G)]
    pos += G * 256
    if nch > 1:
        sets = [(phases + split, g), (last, [x for x in g if x[10] == nch - 1])]
    else:
        sets = [(phases + [(5, 7, 'output written')], g)]
    row = []
    for ph, sel in sets:
        for a, b, name in ph:
            v = sorted((x[b] - x[a]) / (ghz * 1e3) for x in sel)
            row.append((name, st.median(v), v[-1]))
    t0 = min(x[0] for x in g)
    row.append(('span (globaltimer)', (max(x[8] for x in g) - t0) / 1e3, 0.0))
    shapes.setdefault((rows, nch), []).append(row)
for (rows, nch), runs in shapes.items():
    print(f'{rows} rows x {nch} chunks: {len(runs)} launches (medians over them)')
    for i, (name, _, _) in enumerate(runs[0]):
        med = st.median(r[i][1] for r in runs)
        mx = st.median(r[i][2] for r in runs)
        print(f'  {name:24s} median {med:5.2f}' + (f'  largest {mx:5.2f}' if mx else ''))
    print(f'  sum of the phases {sum(st.median(r[i][1] for r in runs) for i in range(len(runs[0]) - 1)):.2f}')
