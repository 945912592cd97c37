#!/usr/bin/env python3
"""Golden cases for dsa_output_inv_rope_fp8_quant from vLLM's own Triton kernel.

Runs vLLM's fused_inv_rope_fp8_quant (DeepSeek-V4 inverse RoPE + block-scaled
FP8 quantization of the attention output) on a CUDA GPU, WITHOUT vLLM
installed: the kernel file is loaded from a vLLM source checkout given on the
command line, and the few `vllm.*` names it imports are stubbed here
(vllm.triton_utils -> triton / triton.language, vllm.platforms.current_platform,
vllm.utils.torch_utils.direct_register_custom_op, vllm.utils.deep_gemm).
No vLLM code is copied into this repository.

    python3 tools/golden-gen/inv_rope_fp8_quant.py --vllm-src ~/vllm --out /tmp/golden
    build/tools/dsacl-golden --only inv_rope_fp8_quant /tmp/golden

Writes DIR/inv_rope_fp8_quant/<case>/{meta.txt, *.npy} in the layout of
golden/README.md (bf16 as uint16 bit patterns, e4m3 as bytes):
  inputs   o u2 [T, H, 512], positions i8 [T], cos_sin f4 [P, 64]
  meta     n_groups, heads_per_group, tma_aligned_scales (0: f32, 1: packed
           UE8M0 int32), padded_tokens (Tp), nonfinite (1: o holds NaN/inf,
           outside vLLM's contract), vllm_kernel (path read), torch/triton
           versions, device
  expected out_fp8 u1 [G, T, hpg*512]  (vLLM's fp8 buffer in memory order;
           the returned o_fp8 is its transpose(0, 1))
           out_scales f4 [G, 4*hpg, Tp] or i4 [G, hpg, Tp] (the whole scale
           buffer in memory order, TMA padding columns t >= T included; the
           returned o_scale is its permute(2, 0, 1)[:T])
Requires torch and triton (numpy optional). Exits non-zero on any problem.
"""
import argparse
import importlib.util
import json
import math
import os
import struct
import sys
import types

KERNEL_PATHS = [
    "vllm/models/deepseek_v4/common/ops/fused_inv_rope_fp8_quant.py",
    "vllm/v1/attention/ops/deepseek_v4_ops/fused_inv_rope_fp8_quant.py",
]
OP = "inv_rope_fp8_quant"


def die(msg):
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(1)


# ---- stubs for the vllm.* imports of the kernel file ------------------------


def install_stubs(torch, triton, tl, pdl):
    """Registers minimal vllm.* modules in sys.modules (only if vllm is absent)."""
    try:
        import vllm  # noqa: F401

        die("a vllm package is importable here; run in an environment without vllm "
            "(the kernel file must come from --vllm-src, with these stubs)")
    except ImportError:
        pass

    def mod(name):
        m = types.ModuleType(name)
        m.__path__ = []  # a package, so submodules resolve
        sys.modules[name] = m
        return m

    vllm = mod("vllm")
    tu = mod("vllm.triton_utils")
    tu.triton, tu.tl = triton, tl
    vllm.triton_utils = tu

    class Platform:
        """current_platform: CUDA, float8_e4m3fn; PDL (launch_pdl / GDC) off unless --pdl
        (it changes scheduling, not numerics)."""

        def fp8_dtype(self):
            return torch.float8_e4m3fn

        def is_rocm(self):
            return False

        def is_cuda(self):
            return True

        def is_xpu(self):
            return False

        def has_device_capability(self, cap):
            if not pdl:
                return False
            major, minor = torch.cuda.get_device_capability()
            want = cap if isinstance(cap, int) else cap[0] * 10 + cap[1]
            return major * 10 + minor >= want

        def is_arch_support_pdl(self):
            return pdl and self.has_device_capability(90)

        def get_device_capability(self):
            return torch.cuda.get_device_capability()

        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            die(f"the kernel file asks current_platform.{name}, which the stub lacks; "
                "extend Platform in this script")

    plat = mod("vllm.platforms")
    plat.current_platform = Platform()
    vllm.platforms = plat

    utils = mod("vllm.utils")
    vllm.utils = utils
    tut = mod("vllm.utils.torch_utils")

    def direct_register_custom_op(op_name, op_func, mutates_args=None, fake_impl=None, **kw):
        # The wrapper calls torch.ops.vllm.<op_name>(...): expose the Python
        # implementation there directly (no torch.library schema needed).
        setattr(torch.ops.vllm, op_name, op_func)

    tut.direct_register_custom_op = direct_register_custom_op
    utils.torch_utils = tut

    dg = mod("vllm.utils.deep_gemm")

    def get_tma_aligned_size(x, element_size):
        # DeepGEMM: TMA needs 16-byte aligned rows of the MN-major scale tensor.
        align = 16 // element_size
        return (x + align - 1) // align * align

    dg.get_tma_aligned_size = get_tma_aligned_size
    utils.deep_gemm = dg


class _LaunchPdlArg:
    """A Triton kernel whose signature declares `launch_pdl: tl.constexpr`
    (vLLM @ 391ed5c: "triton metadata") gets it from the launch only when
    PDL is on (`pdl_kwargs`); Triton 3.6's binder then misses the parameter
    ("dynamic_func() missing 1 required positional argument: 'launch_pdl'").
    This passes launch_pdl=False, the value the kernel sees on a GPU without
    PDL; the kernel body never reads it."""

    def __init__(self, jit_fn):
        self.jit_fn = jit_fn

    def __getitem__(self, grid):
        launch = self.jit_fn[grid]

        def call(*a, **k):
            k.setdefault("launch_pdl", False)
            return launch(*a, **k)

        return call


def pass_launch_pdl(triton, kmod, pdl):
    if pdl:
        return
    for name, obj in list(vars(kmod).items()):
        if isinstance(obj, triton.runtime.jit.JITFunction) and "launch_pdl" in obj.arg_names:
            setattr(kmod, name, _LaunchPdlArg(obj))


def load_kernel(src_root, kernel_file):
    path = kernel_file
    if path is None:
        for rel in KERNEL_PATHS:
            cand = os.path.join(src_root, rel)
            if os.path.isfile(cand):
                path = cand
                break
    if path is None or not os.path.isfile(path):
        die(f"no fused_inv_rope_fp8_quant.py under {src_root} (tried {', '.join(KERNEL_PATHS)}); "
            "pass --kernel-file")
    spec = importlib.util.spec_from_file_location("dsacl_vllm_fused_inv_rope_fp8_quant", path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    if not hasattr(m, "fused_inv_rope_fp8_quant"):
        die(f"{path} has no fused_inv_rope_fp8_quant")
    return m, path


# ---- .npy / meta writers ----------------------------------------------------

NPY_DESCR = {"uint8": "|u1", "uint16": "<u2", "int32": "<i4", "int64": "<i8", "float32": "<f4"}


def to_bytes(t):
    import torch

    t = t.detach().cpu().contiguous()
    try:
        import numpy  # noqa: F401

        return t.view(torch.uint8).numpy().tobytes()
    except ImportError:
        return bytes(t.view(torch.uint8).flatten().tolist())


def write_npy(path, kind, shape, data):
    descr = NPY_DESCR[kind]
    shp = "(" + "".join(f"{d}, " for d in shape)[:-2] + ("," if len(shape) == 1 else "") + ")"
    if not shape:
        shp = "()"
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shp)
    pad = 64 - (10 + len(header) + 1) % 64
    header = header + " " * pad + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("ascii"))
        f.write(data)
    n = 1
    for d in shape:
        n *= d
    size = {"|u1": 1, "<u2": 2, "<i4": 4, "<i8": 8, "<f4": 4}[descr]
    if len(data) != n * size:
        die(f"{path}: {len(data)} bytes for shape {shape} {kind}")


def write_case(out_dir, name, meta, tensors):
    d = os.path.join(out_dir, OP, name)
    os.makedirs(d, exist_ok=True)
    lines = [f"op={OP}"]
    for k, v in meta.items():
        lines.append(f"{k}={v!r}" if isinstance(v, float) else f"{k}={v}")
    for tname, (kind, shape, data) in tensors.items():
        write_npy(os.path.join(d, tname + ".npy"), kind, shape, data)
        lines.append(f"tensor.{tname}={kind}[{', '.join(str(s) for s in shape)}]")
    with open(os.path.join(d, "meta.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {d}: " + ", ".join(f"{t}{list(s)}" for t, (_, s, _) in tensors.items()))


# ---- cases --------------------------------------------------------------------


def rope_table(torch, npos, base=10000.0):
    i = torch.arange(32, dtype=torch.float64)
    inv = base ** (-2.0 * i / 64)
    ang = torch.arange(npos, dtype=torch.float64)[:, None] * inv[None, :]
    return torch.cat([ang.cos(), ang.sin()], dim=1).to(torch.float32)


def boundary_table(torch, gen, npos):
    """cos = 1, sin = +-j 2^-23: rotated RoPE pairs land j-ish ulps above a
    power of two, which probes how vLLM's fp32 log2 rounds there."""
    cs = torch.empty(npos, 64, dtype=torch.float32)
    cs[:, :32] = 1.0
    j = torch.randint(0, 48, (npos, 32), generator=gen).to(torch.float64)
    sign = torch.randint(0, 2, (npos, 32), generator=gen).to(torch.float64) * 2 - 1
    cs[:, 32:] = (j * sign * 2.0 ** -23).to(torch.float32)
    return cs


def make_o(torch, gen, t, h, kind):
    """bf16 [t, h, 512] of one value family (see the case list)."""
    def randn(*s):
        return torch.randn(*s, generator=gen, dtype=torch.float32)

    o = randn(t, h, 512)
    if kind == "normal":
        return o.to(torch.bfloat16)
    if kind == "edge":
        scales = torch.tensor([1, 3000, 1e4, 1e-5, 1e-6, 0.01, 1e-30, 1e25, 1e37, 1e-12])
        pick = torch.randint(0, len(scales), (t, h, 1), generator=gen)
        o = o * scales[pick]
        x = o.to(torch.bfloat16).view(torch.int16)
        for ti in range(t):
            for hi in range(h):
                r = int(torch.randint(0, 6, (1,), generator=gen))
                if r == 0:
                    x[ti, hi] = 0  # all-zero head: amax floor 1e-10
                elif r == 1:
                    sgn = torch.randint(0, 2, (512,), generator=gen).to(torch.int16)
                    x[ti, hi] = sgn * -32768  # signed zeros
                elif r == 2:
                    sub = torch.randint(0, 0x80, (512,), generator=gen).to(torch.int16)
                    x[ti, hi] = sub  # bf16 subnormals
                elif r == 3:
                    b = int(torch.randint(0, 4, (1,), generator=gen))
                    x[ti, hi, 128 * b:128 * b + 128] = 0  # one block zero
        return x.view(torch.bfloat16)
    if kind == "boundary":
        x = torch.empty(t, h, 512, dtype=torch.bfloat16)
        for ti in range(t):
            for hi in range(h):
                q = int(torch.randint(-34, 126, (1,), generator=gen))
                v = (randn(512) * 2.0 ** (q - 2)).to(torch.bfloat16)
                i = int(torch.randint(0, 32, (1,), generator=gen))
                big = torch.tensor(1.75 * 2.0 ** q, dtype=torch.float32).to(torch.bfloat16)
                v[448 + 2 * i] = big
                v[449 + 2 * i] = big if int(torch.randint(0, 3, (1,), generator=gen)) else -big
                x[ti, hi] = v
        return x
    if kind == "nonfinite":
        x = o.to(torch.bfloat16).view(torch.int16)
        specials = [0x7FC0, -64, 0x7F80, -128, 0x7F81]  # +NaN, -NaN (0xFFC0), +inf, -inf (0xFF80), sNaN-ish
        for ti in range(t):
            for hi in range(h):
                if int(torch.randint(0, 2, (1,), generator=gen)):
                    for _ in range(1 + int(torch.randint(0, 3, (1,), generator=gen))):
                        d = int(torch.randint(0, 512, (1,), generator=gen))
                        x[ti, hi, d] = specials[int(torch.randint(0, 5, (1,), generator=gen))]
        return x.view(torch.bfloat16)
    die(f"unknown kind {kind}")


CASES = [
    # name, T, H, G, tma_aligned_scales, value kind, table kind, P
    ("small_f32", 5, 8, 2, False, "normal", "rope", 64),
    ("small_packed", 7, 16, 2, True, "normal", "rope", 64),
    ("flash_decode_f32", 64, 64, 8, False, "normal", "rope", 4096),
    ("flash_decode_packed", 64, 64, 8, True, "normal", "rope", 4096),
    ("pro_t1_packed", 1, 128, 16, True, "normal", "rope", 4096),
    ("pro_t3_f32", 3, 128, 16, False, "normal", "rope", 4096),
    ("edge_f32", 9, 8, 1, False, "edge", "rope", 100),
    ("edge_packed", 10, 8, 2, True, "edge", "rope", 100),
    ("log2_boundary_f32", 32, 16, 2, False, "boundary", "boundary", 64),
    ("log2_boundary_packed", 32, 16, 2, True, "boundary", "boundary", 64),
    ("nonfinite_f32", 4, 8, 2, False, "nonfinite", "rope", 64),
    ("nonfinite_packed", 4, 8, 2, True, "nonfinite", "rope", 64),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vllm-src", required=True, help="vLLM source root (a git checkout)")
    ap.add_argument("--out", required=True, help="golden root: writes OUT/%s/<case>/" % OP)
    ap.add_argument("--kernel-file", help="explicit path of fused_inv_rope_fp8_quant.py")
    ap.add_argument("--seed", type=int, default=20261125)
    ap.add_argument("--pdl", action="store_true", help="let the kernel use PDL/GDC on sm_90+")
    ap.add_argument("--only", action="append", help="case name (repeatable)")
    args = ap.parse_args()

    import torch
    import triton
    import triton.language as tl

    if not torch.cuda.is_available():
        die("no CUDA device")
    install_stubs(torch, triton, tl, args.pdl)
    kmod, kpath = load_kernel(args.vllm_src, args.kernel_file)
    pass_launch_pdl(triton, kmod, args.pdl)
    dev = torch.device("cuda")
    devname = torch.cuda.get_device_name()
    cap = torch.cuda.get_device_capability()
    print(f"kernel: {kpath}\ndevice: {devname} sm_{cap[0]}{cap[1]}, torch {torch.__version__}, "
          f"triton {triton.__version__}")
    commit = ""
    head = os.path.join(args.vllm_src, ".git", "HEAD")
    try:
        import subprocess

        commit = subprocess.run(["git", "-C", args.vllm_src, "rev-parse", "HEAD"],
                                capture_output=True, text=True, check=True).stdout.strip()
    except Exception:
        commit = "unknown" if not os.path.exists(head) else open(head).read().strip()

    written = 0
    for (name, t, h, g, tma, kind, table, npos) in CASES:
        if args.only and name not in args.only:
            continue
        gen = torch.Generator().manual_seed(args.seed + written * 7919 + t * 131 + h)
        o = make_o(torch, gen, t, h, kind)
        cs = rope_table(torch, npos) if table == "rope" else boundary_table(torch, gen, npos)
        pos = torch.randint(0, npos, (t,), generator=gen, dtype=torch.int64)
        if t >= 2:
            pos[0], pos[-1] = 0, npos - 1
        hpg = h // g
        # vLLM passes o as a head slice of a padded buffer: do the same.
        o_pad = torch.zeros(t, h + 8, 512, dtype=torch.bfloat16, device=dev)
        o_pad[:, :h] = o.to(dev)
        o_dev = o_pad[:, :h, :]
        fp8, scale = kmod.fused_inv_rope_fp8_quant(
            o_dev, pos.to(dev), cs.to(dev), n_groups=g, heads_per_group=hpg,
            nope_dim=448, rope_dim=64, tma_aligned_scales=tma)
        torch.cuda.synchronize()
        tp = (t + 3) // 4 * 4
        kk = hpg if tma else 4 * hpg
        # Checks of the layout this script (and dsacl) assume.
        if tuple(fp8.shape) != (t, g, hpg * 512) or fp8.dtype != torch.float8_e4m3fn:
            die(f"{name}: o_fp8 {tuple(fp8.shape)} {fp8.dtype}")
        if t > 0 and fp8.stride() != (hpg * 512, t * hpg * 512, 1):
            die(f"{name}: o_fp8 strides {fp8.stride()}")
        if tuple(scale.shape) != (t, g, kk) or scale.stride() != (1, kk * tp, tp):
            die(f"{name}: o_scale {tuple(scale.shape)} strides {scale.stride()}")
        want_dtype = torch.int32 if tma else torch.float32
        if scale.dtype != want_dtype:
            die(f"{name}: o_scale dtype {scale.dtype}")
        fp8_mem = fp8.transpose(0, 1).contiguous()  # [G, T, D], vLLM's buffer
        sc_mem = torch.as_strided(scale, (g, kk, tp), (kk * tp, tp, 1), 0).contiguous()
        nonfinite = int(not bool(torch.isfinite(o.float()).all()))
        meta = {
            "num_tokens": t, "num_heads": h, "n_groups": g, "heads_per_group": hpg,
            "tma_aligned_scales": int(tma), "padded_tokens": tp, "nonfinite": nonfinite,
            "value_kind": kind, "table_kind": table, "vllm_kernel": os.path.relpath(kpath, args.vllm_src),
            "vllm_commit": commit, "device": devname.replace(" ", "_"),
            "torch": torch.__version__, "triton": triton.__version__,
        }
        tensors = {
            "o": ("uint16", (t, h, 512), to_bytes(o.view(torch.int16))),
            "positions": ("int64", (t,), to_bytes(pos)),
            "cos_sin": ("float32", (npos, 64), to_bytes(cs)),
            "out_fp8": ("uint8", (g, t, hpg * 512), to_bytes(fp8_mem.view(torch.uint8))),
            "out_scales": ("int32" if tma else "float32", (g, kk, tp), to_bytes(sc_mem)),
        }
        write_case(args.out, name, meta, tensors)
        written += 1
    if written == 0:
        die("no case written (check --only)")
    print(f"{written} cases under {os.path.join(args.out, OP)}")


if __name__ == "__main__":
    main()
