#!/usr/bin/env python3
"""roofline_check.py ROOFLINE_PY SAMPLE_JSON: tools/roofline.py renders the
sample dsacl-bench JSON into well-formed SVG with one point per row that has
a FLOP count, one bar per successful row and a line per measured ceiling."""
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

tool, sample = sys.argv[1], sys.argv[2]
with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, "r.svg")
    subprocess.run([sys.executable, tool, sample, "-o", out], check=True)
    root = ET.parse(out).getroot()
ns = "{http://www.w3.org/2000/svg}"
d = json.load(open(sample))
ok = [r for r in d["results"] if r.get("ok")]
flop_rows = [r for r in ok if r.get("flops", 0) > 0]
points = [c for c in root.iter(ns + "circle") if c.find(ns + "title") is not None]
paths = list(root.iter(ns + "path"))
texts = " ".join(t.text or "" for t in root.iter(ns + "text"))
bad = []
if len(points) != len(flop_rows):
    bad.append("%d points for %d rows with FLOPs" % (len(points), len(flop_rows)))
if len(paths) != 2:
    bad.append("%d roof lines, expected 2 (fp32 FMA and matrix)" % len(paths))
for r in ok:
    if r["shape"] not in texts:
        bad.append("no bar for %s %s" % (r["name"], r["shape"]))
if "failed row" in texts:
    bad.append("a failed row was drawn")
for b in bad:
    print("FAIL: " + b)
print("roofline: %d points, %d roofs, %d bars" % (len(points), len(paths), len(ok)))
sys.exit(1 if bad else 0)
