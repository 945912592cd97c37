#!/usr/bin/env python3
"""Markdown table of a `dsacl-bench --json` run (for docs/PERFORMANCE.md)."""
import json
import sys

d = json.load(open(sys.argv[1]) if len(sys.argv) > 1 else sys.stdin)
c = d["ceiling"]
print(f"{d['device']}, driver {d['driver']}, {d['platform']}, {d['date']}; "
      f"copy ceiling {c['gbs']:.0f} GB/s, launch floor {d['launch_floor_us']:.1f} µs, "
      f"median of {d['runs']} runs.\n")
print("| operator | shape | median µs | GB/s | % of ceiling | % of same-size copy | GFLOP/s |")
print("|---|---|---:|---:|---:|---:|---:|")
for r in d["results"]:
    if not r["ok"]:
        print(f"| `{r['name']}` | {r['shape']} | failed | | | | |")
        continue
    fl = f"{r['gflops']:.0f}" if r["flops"] else ""
    print(f"| `{r['name']}` | {r['shape']} | {r['median_us']:.1f} | {r['gbs']:.0f} | "
          f"{r['pct_ceiling']:.1f} % | {r['pct_same_size_copy']:.1f} % | {fl} |")
