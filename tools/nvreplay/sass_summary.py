#!/usr/bin/env python3
"""Summarise an Nsight Compute source page (ncu --page source --csv
--print-source sass): the instruction mix (warp-level executions by opcode,
with each opcode's share of the warp-stall samples), the stall reasons, and
the hottest straight-line blocks (consecutive instructions executed the same
number of times: a loop body, usually).

usage: sass_summary.py K.sass.csv [--blocks N]
"""
import collections
import csv
import re
import sys


def main():
    args = sys.argv[1:]
    if not args:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    nblocks = 8
    if "--blocks" in args:
        i = args.index("--blocks")
        nblocks = int(args[i + 1])
        del args[i:i + 2]
    rows = list(csv.reader(open(args[0], newline="")))
    # Row 0 names the kernel, row 1 the columns.
    hdr = rows[1]
    ix = {h: i for i, h in enumerate(hdr)}
    data = [r for r in rows[2:] if len(r) >= len(hdr)]
    stalls = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]

    def num(r, col):
        v = r[ix[col]].replace(",", "")
        return int(float(v)) if v not in ("", "-") else 0

    def opcode(src):
        return re.sub(r"^@!?U?P\w+\s+", "", src.strip()).split(" ")[0].split(".")[0]

    ops, opsamp, tot = collections.Counter(), collections.Counter(), collections.Counter()
    samples = 0
    blocks, cur = [], None
    for r in data:
        n = num(r, "Instructions Executed")
        s = num(r, "Warp Stall Sampling (All Samples)")
        op = opcode(r[ix["Source"]])
        ops[op] += n
        opsamp[op] += s
        samples += s
        for h in stalls:
            tot[h] += num(r, h)
        if cur and cur["n"] == n:
            cur["len"] += 1
            cur["s"] += s
            cur["ops"][op] += 1
        else:
            cur = {"at": r[0][-5:], "n": n, "len": 1, "s": s, "ops": collections.Counter([op])}
            blocks.append(cur)
    total = sum(ops.values()) or 1
    samples = samples or 1
    print(f"{rows[0][1] if len(rows[0]) > 1 else ''}: {total} warp-level instructions, "
          f"{samples} stall samples")
    print("opcode       executed   share  stall samples")
    for k, v in ops.most_common(16):
        print(f"  {k:10s} {v:11d} {100 * v / total:6.1f}% {100 * opsamp[k] / samples:6.1f}%")
    print("stall reasons (share of all samples):")
    for k, v in tot.most_common(10):
        print(f"  {k[6:]:20s} {100 * v / samples:5.1f}%")
    print("hottest blocks (address, executions, length, share of instructions, of samples):")
    for b in sorted(blocks, key=lambda b: -b["n"] * b["len"])[:nblocks]:
        mix = ", ".join(f"{o} {c}" for o, c in b["ops"].most_common(5))
        print(f"  {b['at']} {b['n']:10d} x {b['len']:3d} {100 * b['n'] * b['len'] / total:5.1f}% "
              f"{100 * b['s'] / samples:5.1f}%  {mix}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
