#!/usr/bin/env python3
"""Golden vectors for dsacl's MTP RMSNorms from vLLM's own Triton kernels.

Runs vLLM's fused_mtp_input_rmsnorm and mtp_shared_head_rmsnorm (DeepSeek-V4
MTP draft layer) on small seeded cases and writes them in the layout of
shared/golden/README.md:

    OUT/mtp_input_rmsnorm/<case>/{meta.txt, *.npy}
    OUT/mtp_shared_head_rmsnorm/<case>/{meta.txt, *.npy}

Needs a CUDA machine with torch and triton; vLLM need NOT be installed: the
kernel file is loaded from a vLLM source tree (--vllm-src, the repository
root) and every `vllm.*` import it makes is answered by a small stub
(triton_utils -> the real triton / triton.language; next_power_of_2; the
JIT-warm-up base class of newer vLLM versions). Nothing of vLLM is copied.

    python3 tools/golden-gen/mtp_rmsnorm.py --vllm-src ~/vllm --out /tmp/golden-mtp
    build/tools/dsacl-golden /tmp/golden-mtp

bf16 tensors are stored as uint16 bit patterns, positions as int64, f32
weights as float32. Expected outputs: out_enorm, out_hnorm (input norm) and
out (shared head). meta.txt also records the vLLM file, its git commit when
known, and the torch / triton versions and the GPU.
"""

import argparse
import importlib.abc
import importlib.machinery
import importlib.util
import os
import re
import subprocess
import sys
import types

import numpy as np

# ---- stubs for vllm.* ------------------------------------------------------


def _next_power_of_2(n):
    n = int(n)
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def _cdiv(a, b):
    return -(a // -b)


class _VllmJitKernel:
    """Stand-in for vllm.model_executor.warmup.jit_warmup.VllmJitKernel:
    subscriptable base class; warm-up hooks do nothing."""

    def __class_getitem__(cls, item):
        return cls

    def __init__(self, *a, **k):
        pass

    def _trace_dispatch(self, fn):
        return lambda **kw: [fn(**kw)]

    def warmup(self, *a, **k):
        return None


class _TritonWarmupTensor:
    def __init__(self, dtype, *a, **k):
        self.dtype = dtype


class _Anything:
    """Whatever else a vllm module is asked for: callable, subscriptable,
    usable as a decorator or a base class."""

    def __init__(self, *a, **k):
        pass

    def __call__(self, *a, **k):
        if len(a) == 1 and callable(a[0]) and not k:
            return a[0]
        return _Anything()

    def __getattr__(self, name):
        return _Anything()

    def __class_getitem__(cls, item):
        return cls

    def __getitem__(self, item):
        return _Anything()


def _known(modname):
    import triton
    import triton.language as tl

    table = {
        "vllm.triton_utils": {"tl": tl, "triton": triton, "HAS_TRITON": True},
        "vllm.utils.math_utils": {"next_power_of_2": _next_power_of_2, "cdiv": _cdiv},
        "vllm.utils": {"next_power_of_2": _next_power_of_2, "cdiv": _cdiv},
        "vllm.model_executor.warmup.jit_warmup": {"VllmJitKernel": _VllmJitKernel},
        "vllm.model_executor.warmup.jit_warmup_triton_helper": {
            "TritonWarmupTensor": _TritonWarmupTensor
        },
    }
    return table.get(modname, {})


class _StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything()


class _VllmFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers `vllm` and `vllm.*` with stub packages (the kernel modules we
    load by path are registered under their real names first)."""

    def find_spec(self, fullname, path, target=None):
        if fullname == "vllm" or fullname.startswith("vllm."):
            if fullname in sys.modules:
                return None
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        m = _StubModule(spec.name)
        m.__path__ = []
        for k, v in _known(spec.name).items():
            setattr(m, k, v)
        return m

    def exec_module(self, module):
        pass


def load_vllm_module(src_root, relpath):
    """Loads vllm/<...>.py from the source tree under its dotted name."""
    path = os.path.join(src_root, relpath)
    name = relpath[:-3].replace(os.sep, ".").replace("/", ".")
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod, path


def find_def(src_root, func, candidates):
    """The first candidate file (relative to src_root) defining `def func(`,
    else any .py under vllm/ that does."""
    pat = re.compile(r"^def\s+" + re.escape(func) + r"\s*\(", re.M)
    for rel in candidates:
        p = os.path.join(src_root, rel)
        if os.path.isfile(p) and pat.search(open(p, encoding="utf-8").read()):
            return rel
    for dirpath, _, files in os.walk(os.path.join(src_root, "vllm")):
        for f in files:
            if f.endswith(".py"):
                p = os.path.join(dirpath, f)
                try:
                    text = open(p, encoding="utf-8").read()
                except (OSError, UnicodeDecodeError):
                    continue
                if pat.search(text):
                    return os.path.relpath(p, src_root)
    return None


def git_commit(src_root, rel):
    try:
        out = subprocess.run(
            ["git", "-C", src_root, "log", "-1", "--format=%H", "--", rel],
            capture_output=True, text=True, timeout=30,
        )
        h = out.stdout.strip()
        return h if re.fullmatch(r"[0-9a-f]{40}", h) else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


# ---- case data ----------------------------------------------------------------


def bf16_bits(t):
    import torch

    assert t.dtype == torch.bfloat16
    return t.contiguous().view(torch.int16).cpu().numpy().view(np.uint16)


def np_dtype_name(a):
    return {np.dtype("<u2"): "uint16", np.dtype("<i8"): "int64", np.dtype("<f4"): "float32",
            np.dtype("|u1"): "uint8", np.dtype("<i4"): "int32"}[a.dtype]


def write_case(root, op, case, scalars, arrays):
    d = os.path.join(root, op, case)
    os.makedirs(d, exist_ok=True)
    lines = [f"op={op}"]
    for k, v in scalars.items():
        lines.append(f"{k}={v!r}" if isinstance(v, float) else f"{k}={v}")
    for name, a in arrays.items():
        a = np.ascontiguousarray(a)
        np.save(os.path.join(d, name + ".npy"), a, allow_pickle=False)
        shape = ", ".join(str(s) for s in a.shape)
        lines.append(f"tensor.{name}={np_dtype_name(a)}[{shape}]")
    with open(os.path.join(d, "meta.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {d}")


def make_rows(g, n, h, kind, device):
    """n rows of h bf16 values: kind 'gauss' (scale 1), or an edge mix."""
    import torch

    x = torch.randn(n, h, generator=g, device="cpu", dtype=torch.float32)
    if kind == "edge":
        scales = [1.0, 3000.0, 1e4, 1e-5, 1e-6, 1e-19, 1e25, 1e30]
        for i in range(n):
            r = i % 11
            if r == 0:
                x[i] = 0.0  # all-zero row
            elif r == 1:
                x[i] = torch.where(torch.rand(h, generator=g) < 0.5, -0.0, 0.0)  # signed zeros
            elif r == 2:
                x[i, :] = 0.0
                x[i, h // 3] = 5.0  # one non-zero element
            else:
                x[i] *= scales[r % len(scales)]
    return x.to(torch.bfloat16).to(device)


def make_weight(g, h, dtype, edge, device):
    import torch

    w = 1.0 + 0.25 * torch.randn(h, generator=g, dtype=torch.float32)
    if dtype == "f32":
        w = w * (1.0 + 1e-3 * torch.randn(h, generator=g))  # not bf16-representable
    if edge:
        idx = torch.randperm(h, generator=g)
        w[idx[: h // 16]] = 0.0
        w[idx[h // 16: h // 8]] *= -1.0
    w = w.to(torch.float32 if dtype == "f32" else torch.bfloat16)
    return w.to(device)


def weight_np(w):
    import torch

    return w.cpu().numpy().astype("<f4") if w.dtype == torch.float32 else bf16_bits(w)


def positions_for(g, t, edge):
    import torch

    p = torch.randint(1, 100000, (t,), generator=g, dtype=torch.int64)
    p[0] = 0  # a request's first token
    if t > 3:
        p[t // 2] = 0
    if edge and t > 5:
        p[1] = -1  # not 0: kept
        p[2] = 1
    return p


# ---- summation-order probe -------------------------------------------------------
# Our own two-line Triton kernel with the reduction of vLLM's _rmsnorm_row
# (a masked bf16 row load, .to(fp32), tl.sum(x * x, axis=0), default 4 warps)
# stores the fp32 sums; numpy replays candidate orders. dsacl's contract is
# candidate A; the report says which candidates reproduce this Triton.


def _probe_kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def probe_sumsq(x_ptr, out_ptr, HIDDEN: tl.constexpr, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        block = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * HIDDEN + block, mask=block < HIDDEN, other=0.0)
        x = x.to(tl.float32)
        tl.store(out_ptr + row, tl.sum(x * x, axis=0))

    return probe_sumsq


def _lane_chunks(sq, h):
    """sq: (rows, h) float32 squares -> per lane (128) list of chunks in
    register order, each an array (rows, V)."""
    v = min(h & -h, 8)
    lanes = [[] for _ in range(128)]
    for c in range(h // v):
        lanes[c % 128].append(sq[:, c * v:(c + 1) * v])
    return lanes


def _butterfly(s, masks=(16, 8, 4, 2, 1, 64, 32)):
    s = s.copy()
    for m in masks:
        s = (s + s[:, np.arange(128) ^ m]).astype(np.float32)
    return s[:, 0]


def _tree(cols):
    cols = list(cols)
    while len(cols) > 1:
        nxt = [(cols[i] + cols[i + 1]).astype(np.float32) for i in range(0, len(cols) - 1, 2)]
        if len(cols) % 2:
            nxt.append(cols[-1])
        cols = nxt
    return cols[0]


def _candidates(x_bits, h):
    f = (x_bits.astype(np.uint32) << 16).view(np.float32)
    sq = (f * f).astype(np.float32)
    rows = sq.shape[0]
    lanes = _lane_chunks(sq, h)
    out = {}
    for name in ("A_seq_into_acc", "B_chunk_seq_then_add", "C_chunk_tree_then_add",
                 "D_lane_tree", "E_seq_into_acc_shuffles_1_to_16"):
        s = np.zeros((rows, 128), np.float32)
        for l, chunks in enumerate(lanes):
            if not chunks:
                continue
            if name.startswith("A_") or name.startswith("E_"):
                acc = np.zeros(rows, np.float32)
                for ch in chunks:
                    for j in range(ch.shape[1]):
                        acc = (acc + ch[:, j]).astype(np.float32)
            elif name == "D_lane_tree":
                acc = _tree([ch[:, j] for ch in chunks for j in range(ch.shape[1])])
            else:
                acc = None
                for ch in chunks:
                    if name == "B_chunk_seq_then_add":
                        p = ch[:, 0]
                        for j in range(1, ch.shape[1]):
                            p = (p + ch[:, j]).astype(np.float32)
                    else:
                        p = _tree([ch[:, j] for j in range(ch.shape[1])])
                    acc = p if acc is None else (acc + p).astype(np.float32)
            s[:, l] = acc
        out[name] = _butterfly(s, (1, 2, 4, 8, 16, 32, 64) if name.startswith("E_") else
                               (16, 8, 4, 2, 1, 64, 32))
    return out


def run_probe(out_dir, g, dev):
    import torch
    import triton

    kern = _probe_kernel()
    lines = ["# tl.sum(x*x) order probe: fraction of rows whose Triton sum equals each",
             "# candidate order (dsacl = A_seq_into_acc). GPU %s, triton %s"
             % (torch.cuda.get_device_name(0), triton.__version__)]
    data = {}
    for h in (7168, 4096, 4100, 1030, 1029):
        rows = 256
        # per-element scales: squares of many exponents, so sums round
        x = torch.randn(rows, h, generator=g) * torch.exp(3 * torch.randn(rows, h, generator=g))
        xb = x.to(torch.bfloat16).to(dev)
        ss = torch.empty(rows, dtype=torch.float32, device=dev)
        kern[(rows,)](xb, ss, HIDDEN=h, BLOCK=triton.next_power_of_2(h))
        torch.cuda.synchronize()
        got = ss.cpu().numpy()
        bits = bf16_bits(xb)
        cands = _candidates(bits, h)
        res = ", ".join("%s %.3f" % (k, float(np.mean(v.view(np.uint32) == got.view(np.uint32))))
                        for k, v in cands.items())
        lines.append("H=%d: %s" % (h, res))
        data["x_h%d" % h] = bits
        data["ss_h%d" % h] = got
    with open(os.path.join(out_dir, "mtp_rmsnorm_probe.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    np.savez(os.path.join(out_dir, "mtp_rmsnorm_probe.npz"), **data)
    print("\n".join(lines))


# ---- main ------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vllm-src", required=True, help="vLLM source tree (repository root)")
    ap.add_argument("--out", required=True, help="output directory (golden root)")
    ap.add_argument("--seed", type=int, default=20261125)
    ap.add_argument("--quick", action="store_true", help="fewer, smaller cases")
    ap.add_argument("--no-probe", action="store_true",
                    help="skip the tl.sum order probe (OUT/mtp_rmsnorm_probe.txt)")
    args = ap.parse_args()

    import torch
    import triton

    if not torch.cuda.is_available():
        sys.exit("mtp_rmsnorm.py: needs a CUDA device")
    dev = "cuda"
    src = os.path.abspath(os.path.expanduser(args.vllm_src))
    if not os.path.isdir(os.path.join(src, "vllm")):
        sys.exit(f"mtp_rmsnorm.py: {src} has no vllm/ directory (give the repository root)")

    sys.meta_path.insert(0, _VllmFinder())
    cands = [
        "vllm/models/deepseek_v4/common/ops/fused_mtp_input_rmsnorm.py",
        "vllm/v1/attention/ops/deepseek_v4_ops/fused_mtp_input_rmsnorm.py",
    ]
    rel_in = find_def(src, "fused_mtp_input_rmsnorm", cands)
    if rel_in is None:
        sys.exit("mtp_rmsnorm.py: no `def fused_mtp_input_rmsnorm(` under " + src)
    mod_in, path_in = load_vllm_module(src, rel_in)
    fused = mod_in.fused_mtp_input_rmsnorm
    head = getattr(mod_in, "mtp_shared_head_rmsnorm", None)
    rel_head = rel_in
    if head is None:
        rel_head = find_def(src, "mtp_shared_head_rmsnorm", [])
        if rel_head is not None:
            head = load_vllm_module(src, rel_head)[0].mtp_shared_head_rmsnorm
        else:
            print("warning: no mtp_shared_head_rmsnorm in this vLLM tree; "
                  "only the input norm is generated", file=sys.stderr)

    common = {
        "vllm_file": rel_in,
        "vllm_commit": git_commit(src, rel_in),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "gpu": torch.cuda.get_device_name(0).replace(" ", "_"),
    }
    g = torch.Generator().manual_seed(args.seed)

    # (name, T, HC, H, weight dtype, edge, eps)
    in_cases = [
        ("flash_t5_hc4_f32w", 5, 4, 4096, "f32", False, 1e-6),
        ("pro_t3_hc4_f32w", 3, 4, 7168, "f32", False, 1e-6),
        ("pro_t4_hc4_bf16w", 4, 4, 7168, "bf16", False, 1e-6),
        ("pro_t11_hc2_edge", 11, 2, 7168, "f32", True, 1e-6),
        ("h1000_t6_hc1_v8", 6, 1, 1000, "bf16", True, 1e-6),     # V = 8
        ("h4100_t4_hc4_v4", 4, 4, 4100, "f32", False, 1e-6),     # V = 4
        ("h1030_t4_hc3_v2", 4, 3, 1030, "f32", False, 1e-5),     # V = 2
        ("h1029_t4_hc4_v1", 4, 4, 1029, "bf16", False, 1e-6),    # V = 1
        ("h7168_t1_hc4_eps1e-3", 1, 4, 7168, "f32", True, 1e-3),
    ]
    if not args.quick:
        in_cases.append(("pro_t32_hc4_f32w_stats", 32, 4, 7168, "f32", False, 1e-6))
    for name, t, hc, h, wdt, edge, eps in in_cases:
        emb = make_rows(g, t, h, "edge" if edge else "gauss", dev)
        prev = make_rows(g, t * hc, h, "edge" if edge else "gauss", dev).view(t, hc, h)
        pos = positions_for(g, t, edge).to(dev)
        we = make_weight(g, h, wdt, edge, dev)
        wh = make_weight(g, h, wdt, edge, dev)
        eo, ho = fused(emb, pos, prev.contiguous(), we, wh, eps, hc)
        torch.cuda.synchronize()
        write_case(args.out, "mtp_input_rmsnorm", name,
                   {**common, "T": t, "HC": hc, "H": h, "eps": float(eps), "weight_dtype": wdt},
                   {"inputs_embeds": bf16_bits(emb), "positions": pos.cpu().numpy().astype("<i8"),
                    "previous_hidden": bf16_bits(prev), "enorm_weight": weight_np(we),
                    "hnorm_weight": weight_np(wh), "out_enorm": bf16_bits(eo),
                    "out_hnorm": bf16_bits(ho)})

    if head is not None:
        head_common = dict(common, vllm_file=rel_head, vllm_commit=git_commit(src, rel_head))
        head_cases = [
            ("pro_t8_f32w", 8, 7168, "f32", False, 1e-6),
            ("flash_t8_bf16w", 8, 4096, "bf16", False, 1e-6),
            ("pro_t11_edge", 11, 7168, "f32", True, 1e-6),
            ("h1029_t5_v1", 5, 1029, "f32", True, 1e-6),
        ]
        if not args.quick:
            head_cases.append(("pro_t64_f32w_stats", 64, 7168, "f32", False, 1e-6))
        for name, t, h, wdt, edge, eps in head_cases:
            x = make_rows(g, t, h, "edge" if edge else "gauss", dev)
            w = make_weight(g, h, wdt, edge, dev)
            out = head(x, w, eps)
            torch.cuda.synchronize()
            write_case(args.out, "mtp_shared_head_rmsnorm", name,
                       {**head_common, "T": t, "H": h, "eps": float(eps), "weight_dtype": wdt},
                       {"x": bf16_bits(x), "weight": weight_np(w), "out": bf16_bits(out)})

    if not args.no_probe:
        try:
            run_probe(args.out, g, dev)
        except Exception as e:  # the goldens above are written already
            print("warning: order probe failed: %r" % (e,), file=sys.stderr)


if __name__ == "__main__":
    main()
