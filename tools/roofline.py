#!/usr/bin/env python3
"""Roofline chart of a `dsacl-bench --json` run, as a self-contained SVG.

  roofline.py BENCH.json [-o OUT.svg] [--title TEXT]

Two panels, from the run's own measured ceilings (dsacl-bench measures them
on the same device in the same run):
  1. roofline: every row with a FLOP count at (FLOP/byte, GFLOP/s) on log
     axes, under the bandwidth slope (copy ceiling, GB/s x FLOP/byte) capped
     by the fp32 FMA ceiling and, where measured, the matrix-instruction
     ceiling (NVIDIA mma.sync);
  2. bandwidth: every row's GB/s as a bar against the copy ceiling.
No plotting library is needed (the chart is written as SVG text), so the
tool runs wherever Python 3 does. Writes OUT.svg (default: BENCH.svg).
"""
import argparse
import json
import math
import sys
from xml.sax.saxutils import escape

W = 960  # chart width in px
PAD_L, PAD_R, PAD_T = 80, 260, 40
ROOF_H = 420
BAR_ROW = 16


def nice_decades(lo, hi):
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    return [10.0 ** e for e in range(a, b + 1)]


def fmt(v):
    if v >= 1000:
        return "%g" % float("%.3g" % v)
    return "%g" % float("%.2g" % v)


class Svg:
    def __init__(self, w, h):
        self.w, self.h, self.parts = w, h, []

    def add(self, s):
        self.parts.append(s)

    def text(self, x, y, s, size=11, anchor="start", color="#222", weight="normal", rotate=None):
        tr = ' transform="rotate(%d %.1f %.1f)"' % (rotate, x, y) if rotate else ""
        self.add('<text x="%.1f" y="%.1f" font-size="%d" text-anchor="%s" fill="%s" '
                 'font-weight="%s"%s>%s</text>' % (x, y, size, anchor, color, weight, tr, escape(s)))

    def line(self, x1, y1, x2, y2, color="#999", width=1, dash=None):
        d = ' stroke-dasharray="%s"' % dash if dash else ""
        self.add('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="%g"%s/>'
                 % (x1, y1, x2, y2, color, width, d))

    def render(self):
        return ('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
                'viewBox="0 0 %d %d" font-family="sans-serif">\n'
                '<rect width="100%%" height="100%%" fill="white"/>\n%s\n</svg>\n'
                % (self.w, self.h, self.w, self.h, "\n".join(self.parts)))


COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2",
          "#17becf", "#7f7f7f", "#bcbd22"]


def chart(d, title):
    rows = [r for r in d["results"] if r.get("ok")]
    bw = d["ceiling"]["gbs"]
    cc = d.get("compute_ceiling") or {}
    fma = cc.get("fp32_fma_gflops") or 0
    mma = cc.get("matrix_gflops") or 0
    pts = [r for r in rows if r.get("flops", 0) > 0 and r.get("bytes", 0) > 0 and r["gflops"] > 0]
    names = sorted({r["name"] for r in rows})
    color = {n: COLORS[i % len(COLORS)] for i, n in enumerate(names)}

    bars_h = 40 + BAR_ROW * len(rows)
    H = PAD_T + ROOF_H + 70 + bars_h + 20
    svg = Svg(W, H)
    svg.text(W / 2, 22, title, size=15, anchor="middle", weight="bold")

    # ---- panel 1: roofline ----------------------------------------------
    x0, x1 = PAD_L, W - PAD_R
    y0, y1 = PAD_T + 10, PAD_T + ROOF_H
    ai = [r["flops"] / r["bytes"] for r in pts]
    gf = [r["gflops"] for r in pts]
    roofs = [v for v in (fma, mma) if v > 0]
    xlo = min(ai + [0.1]) / 2
    xhi = max([2 * v for v in ai] + [(max(roofs) / bw) * 4 if roofs and bw > 0 else 100])
    ylo = min(gf + [bw * xlo if bw > 0 else 1]) / 2
    yhi = max(gf + roofs + [1]) * 2
    lx0, lx1, ly0, ly1 = math.log10(xlo), math.log10(xhi), math.log10(ylo), math.log10(yhi)

    def X(v):
        return x0 + (math.log10(v) - lx0) / (lx1 - lx0) * (x1 - x0)

    def Y(v):
        return y1 - (math.log10(v) - ly0) / (ly1 - ly0) * (y1 - y0)

    svg.add('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#444"/>'
            % (x0, y0, x1 - x0, y1 - y0))
    for v in nice_decades(xlo, xhi):
        if xlo <= v <= xhi:
            svg.line(X(v), y0, X(v), y1, "#e5e5e5")
            svg.text(X(v), y1 + 15, fmt(v), anchor="middle")
    for v in nice_decades(ylo, yhi):
        if ylo <= v <= yhi:
            svg.line(x0, Y(v), x1, Y(v), "#e5e5e5")
            svg.text(x0 - 6, Y(v) + 4, fmt(v), anchor="end")
    svg.text((x0 + x1) / 2, y1 + 34, "arithmetic intensity (FLOP per byte moved)", anchor="middle")
    svg.text(22, (y0 + y1) / 2, "GFLOP/s", anchor="middle", rotate=-90)

    def roof(peak, label, dash):
        if bw <= 0 or peak <= 0:
            return
        knee = peak / bw
        xa = xlo
        pts_ = [(xa, bw * xa), (min(knee, xhi), bw * min(knee, xhi))]
        if knee < xhi:
            pts_.append((xhi, peak))
        path = " ".join("%s%.1f,%.1f" % ("M" if i == 0 else "L", X(a), Y(max(b, ylo)))
                        for i, (a, b) in enumerate(pts_))
        svg.add('<path d="%s" fill="none" stroke="#333" stroke-width="2"%s/>'
                % (path, ' stroke-dasharray="6,4"' if dash else ""))
        svg.text(x1 - 4, Y(peak) - 5, "%s %s GFLOP/s" % (label, fmt(peak)), anchor="end",
                 color="#333")

    roof(fma, "fp32 FMA", False)
    roof(mma, cc.get("matrix_instruction") or "matrix", True)
    if bw > 0:
        svg.text(X(xlo) + 6, Y(bw * xlo * 1.6) - 4, "copy %s GB/s" % fmt(bw), color="#333")
    for r, a, g in zip(pts, ai, gf):
        svg.add('<circle cx="%.1f" cy="%.1f" r="4.5" fill="%s" fill-opacity="0.85">'
                '<title>%s</title></circle>'
                % (X(a), Y(g), color[r["name"]],
                   escape("%s %s: %.1f us, %.0f GFLOP/s, %.1f FLOP/B" %
                          (r["name"], r["shape"], r["median_us"], g, a))))
    ly = y0 + 8
    for n in names:
        if any(r["name"] == n for r in pts):
            svg.add('<circle cx="%d" cy="%.1f" r="4.5" fill="%s"/>' % (x1 + 16, ly, color[n]))
            svg.text(x1 + 26, ly + 4, n)
            ly += 16

    # ---- panel 2: bandwidth bars -----------------------------------------
    top = y1 + 70
    svg.text(PAD_L, top, "GB/s moved (reads + writes) against the copy ceiling, %s GB/s"
             % fmt(bw), size=13, weight="bold")
    bx0, bx1 = PAD_L + 250, W - 240
    for i, r in enumerate(rows):
        y = top + 14 + i * BAR_ROW
        frac = min(r["gbs"] / bw, 1.0) if bw > 0 else 0
        svg.text(bx0 - 6, y + 11, "%s  %s" % (r["name"], r["shape"]), size=10, anchor="end")
        svg.add('<rect x="%d" y="%.1f" width="%.1f" height="%d" fill="%s"/>'
                % (bx0, y + 2, max(frac * (bx1 - bx0), 1), BAR_ROW - 4, color[r["name"]]))
        svg.add('<rect x="%d" y="%.1f" width="%d" height="%d" fill="none" stroke="#ccc"/>'
                % (bx0, y + 2, bx1 - bx0, BAR_ROW - 4))
        svg.text(bx1 + 6, y + 11, "%s GB/s (%.0f%%), %.1f us"
                 % (fmt(r["gbs"]), 100 * r["gbs"] / bw if bw > 0 else 0, r["median_us"]),
                 size=10)
    return svg.render()


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("bench_json")
    ap.add_argument("-o", "--output")
    ap.add_argument("--title")
    a = ap.parse_args(argv[1:])
    with open(a.bench_json, encoding="utf-8") as f:
        d = json.load(f)
    title = a.title or "dsacl %s on %s (%s, driver %s)" % (
        d.get("dsacl_version", "?"), d.get("device", "?"), d.get("date", "?")[:10],
        d.get("driver", "?"))
    out = a.output or a.bench_json.rsplit(".", 1)[0] + ".svg"
    with open(out, "w", encoding="utf-8") as f:
        f.write(chart(d, title))
    print("wrote " + out, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
