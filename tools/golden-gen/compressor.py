#!/usr/bin/env python3
"""Golden vectors for the DeepSeek-V4 KV compressor, from vLLM's own Triton
kernels, for dsacl-golden (tools/golden_compressor.c; layout of
shared/golden/README.md: <op>/<case>/meta.txt + one .npy per tensor).

Needs a CUDA GPU with torch + triton; vLLM need NOT be installed: the two
kernel files are loaded from a vLLM source tree given on the command line,
with the few `vllm.*` modules they import replaced by small stubs here. No
vLLM code is copied into dsacl.

  python3 tools/golden-gen/compressor.py --vllm-src /path/to/vllm --out DIR

Files used (found under --vllm-src; override with --save-file/--compress-file):
  vllm/models/deepseek_v4/common/ops/save_partial_states.py
  vllm/models/deepseek_v4/common/ops/fused_compress_quant_cache.py
    (its relative import .fused_indexer_q is loaded from the same folder)

Cases written:
  compressor_save_states/<case>      kv_score, ape, positions, slot_mapping,
                                     state_in -> state_out (byte-exact in dsacl)
  compressor_compress_insert/<case>  state, block_table, token_to_req,
                                     positions, slot_mapping, cache_slot_mapping,
                                     norm_weight, cos_sin, cache_in -> cache_out
                                     (dsacl compares within one code / ulp)
The MXFP4 indexer kernel uses PTX cvt.rn.satfinite.e2m1x2.f32, which exists
only on sm_100+; on older GPUs (--fp4-emulate auto) the script substitutes a
Triton emulation of that instruction (round to nearest even on the E2M1
grid, saturating, sign copied), as SPEC-reference §2.4 describes.
"""
import argparse
import glob
import importlib.abc
import importlib.machinery
import importlib.util
import os
import subprocess
import sys
import types

import numpy as np
import torch
import triton
import triton.language as tl

# ---------------------------------------------------------------------------
# vllm.* stubs
# ---------------------------------------------------------------------------


class _Falsy:
    """Stand-in for any other vllm attribute: callable, indexable, false."""

    def __call__(self, *a, **k):
        return _Falsy()

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Falsy()

    def __getitem__(self, k):
        return self

    def __bool__(self):
        return False


class _StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Falsy()


class _Platform:
    def is_rocm(self):
        return False

    def is_cuda(self):
        return True

    def is_xpu(self):
        return False

    def is_cpu(self):
        return False

    device_type = "cuda"


class _JitKernelBase:
    """vllm.model_executor.warmup.jit_warmup_triton_helper.VllmTritonJitKernel."""

    def __class_getitem__(cls, item):
        return cls

    def __init__(self, *a, **k):
        pass


def _identity_decorator(f=None, **k):
    return f if f is not None else (lambda g: g)


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Last on sys.meta_path: any vllm.* module nobody else provides."""

    def find_spec(self, fullname, path, target=None):
        if fullname == "vllm" or fullname.startswith("vllm."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        m = _StubModule(spec.name)
        m.__path__ = []
        return m

    def exec_module(self, module):
        pass


def _stub(name, **attrs):
    m = _StubModule(name)
    m.__path__ = []
    for k, v in attrs.items():
        setattr(m, k, v)
    sys.modules[name] = m
    return m


def install_stubs():
    sys.meta_path.append(_StubFinder())
    _stub("vllm")
    _stub("vllm.triton_utils", tl=tl, triton=triton)
    _stub("vllm.platforms", current_platform=_Platform())
    _stub("vllm.utils")
    _stub("vllm.utils.math_utils", next_power_of_2=triton.next_power_of_2,
          cdiv=lambda a, b: -(-a // b))
    _stub("vllm.utils.import_utils", has_cutedsl=lambda: False)
    _stub("vllm.model_executor")
    _stub("vllm.model_executor.warmup")
    _stub("vllm.model_executor.warmup.jit_warmup_triton_helper",
          VllmTritonJitKernel=_JitKernelBase, kernel_launcher=_identity_decorator,
          LaunchSpec=tuple, TritonWarmupTensor=_Falsy)


def load_file(src_root, path):
    """Loads path (inside src_root) as its dotted module name; its folder
    becomes a real package so sibling relative imports load real files."""
    rel = os.path.relpath(os.path.abspath(path), os.path.abspath(src_root))
    parts = rel[:-3].split(os.sep)
    pkg = ".".join(parts[:-1])
    for i in range(1, len(parts)):
        name = ".".join(parts[:i])
        if name not in sys.modules:
            _stub(name)
    sys.modules[pkg].__path__ = [os.path.dirname(os.path.abspath(path))]
    modname = ".".join(parts)
    spec = importlib.util.spec_from_file_location(modname, path)
    mod = importlib.util.module_from_spec(spec)
    mod.__package__ = pkg
    sys.modules[modname] = mod
    spec.loader.exec_module(mod)
    return mod


def find_file(src, name, override):
    if override:
        return override
    pref = os.path.join(src, "vllm", "models", "deepseek_v4", "common", "ops", name)
    if os.path.exists(pref):
        return pref
    hits = sorted(glob.glob(os.path.join(src, "vllm", "**", name), recursive=True))
    if not hits:
        sys.exit(f"{name} not found under {src}")
    return hits[0]


def jit_functions(mod):
    """Every triton JITFunction of the module and of its classes."""
    out = {}
    for k, v in vars(mod).items():
        if isinstance(v, triton.runtime.jit.JITFunction):
            out[k] = v
        elif isinstance(v, type):
            for kk, vv in vars(v).items():
                f = vv.__func__ if isinstance(vv, staticmethod) else vv
                if isinstance(f, triton.runtime.jit.JITFunction):
                    out[f"{k}.{kk}"] = f
    return out


def kernel_named(mod, name):
    """The JITFunction `name` of mod (module level or inside a class)."""
    fns = jit_functions(mod)
    for k, f in fns.items():
        if k == name or k.endswith("." + name) or f.__name__ == name:
            return f
    sys.exit(f"{mod.__name__}: no Triton kernel {name}; it has {sorted(fns)}")


def launch(fn, grid, args, **opts):
    """Calls a raw JITFunction with the arguments its signature names."""
    missing = [a for a in fn.arg_names if a not in args]
    if missing:
        sys.exit(f"{fn.__name__}: no value for {missing} (a newer kernel signature?)")
    fn[grid](**{a: args[a] for a in fn.arg_names}, **opts)


# ---------------------------------------------------------------------------
# MXFP4 conversion emulation (pre-sm_100 GPUs)
# ---------------------------------------------------------------------------


@triton.jit
def _e2m1_code(x):
    a = tl.abs(x)
    c = ((a > 0.25).to(tl.uint32) + (a >= 0.75).to(tl.uint32) + (a > 1.25).to(tl.uint32)
         + (a >= 1.75).to(tl.uint32) + (a > 2.5).to(tl.uint32) + (a >= 3.5).to(tl.uint32)
         + (a > 5.0).to(tl.uint32))
    s = (x.to(tl.uint32, bitcast=True) >> 31) & 1
    return c | (s << 3)


@triton.jit
def _fp32x2_to_fp4x2_emulated(x_lo, x_hi):
    return (_e2m1_code(x_lo) | (_e2m1_code(x_hi) << 4)).to(tl.uint8)


# ---------------------------------------------------------------------------
# case writing
# ---------------------------------------------------------------------------

_DT = {np.uint8: "uint8", np.uint16: "uint16", np.int32: "int32", np.int64: "int64",
       np.float32: "float32"}


def write_case(root, op, case, meta, tensors):
    d = os.path.join(root, op, case)
    os.makedirs(d, exist_ok=True)
    lines = [f"op={op}"] + [f"{k}={v}" for k, v in meta.items()]
    for name, arr in tensors.items():
        arr = np.ascontiguousarray(arr)
        np.save(os.path.join(d, name + ".npy"), arr)
        lines.append(f"tensor.{name}={_DT[arr.dtype.type]}[{', '.join(map(str, arr.shape))}]")
    with open(os.path.join(d, "meta.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote", d)


def np_of(t):
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).cpu().numpy().view(np.uint16)
    return t.cpu().numpy()


def cos_sin_table(n):
    i = torch.arange(32, dtype=torch.float64)
    th = torch.arange(n, dtype=torch.float64)[:, None] * torch.pow(10000.0, -2 * i / 64)[None, :]
    return torch.cat([torch.cos(th), torch.sin(th)], 1).float()


# ---------------------------------------------------------------------------
# save_partial_states
# ---------------------------------------------------------------------------


def gen_save(fns, out, g, name, T, hd, ratio, dev):
    fn = next((f for k, f in fns.items() if "ape_ptr" in f.arg_names), None)
    if fn is None:
        sys.exit("save_partial_states.py: no Triton kernel with an ape_ptr argument")
    coff = 2 if ratio == 4 else 1
    W = coff * hd
    bs = 4 if ratio == 4 else 8
    nb = (T + bs - 1) // bs + 2
    kv_score = (torch.randn(T, 2 * W, generator=g) * 2).to(dev)
    ape = torch.randn(ratio, W, generator=g).to(dev)
    positions = torch.randint(0, 4096, (T,), generator=g, dtype=torch.int64).to(dev)
    perm = torch.randperm(nb * bs, generator=g)[:T].to(torch.int64)
    perm[torch.rand(T, generator=g) < 0.1] = -1  # padding tokens
    slots = perm.to(dev)
    state = torch.randn(nb, bs, 2 * W, generator=g).to(dev)
    state_in = state.clone()
    kv, score = kv_score[:, :W], kv_score[:, W:]
    args = dict(kv_ptr=kv, kv_stride=kv.stride(0), score_ptr=score, score_stride=score.stride(0),
                ape_ptr=ape, ape_stride=ape.stride(0), positions_ptr=positions,
                state_cache_ptr=state, state_cache_stride0=state.stride(0),
                state_cache_stride1=state.stride(1), slot_mapping_ptr=slots, block_size=bs,
                HEAD_SIZE=W, TRITON_BLOCK_SIZE=triton.next_power_of_2(W), STATE_WIDTH=W,
                COMPRESS_RATIO=ratio)
    launch(fn, (T,), args)
    torch.cuda.synchronize()
    write_case(out, "compressor_save_states", name,
               dict(compress_ratio=ratio, head_dim=hd, T=T, W=W, num_blocks=nb, block_size=bs,
                    vllm_kernel=fn.__name__),
               dict(kv_score=np_of(kv_score), ape=np_of(ape), positions=np_of(positions),
                    slot_mapping=np_of(slots), state_in=np_of(state_in),
                    state_out=np_of(state)))


# ---------------------------------------------------------------------------
# fused compress -> norm -> RoPE -> quant -> insert
# ---------------------------------------------------------------------------

_FMT = {
    # name: (head_dim, kernel, quant_block, token_stride, scale_dim, bytes/token allocated, warps)
    "mla": (512, "_fused_kv_compress_norm_rope_insert_sparse_attn", 64, 576, 8, 584, 4),
    "indexer_fp8": (128, "_fused_kv_compress_norm_rope_insert_indexer_attn", 128, 128, 4, 132, 1),
    "indexer_mxfp4": (128, "_fused_kv_compress_norm_rope_insert_indexer_mxfp4_attn", 32, 64, 4,
                      132, 1),
}


def gen_compress(mod, out, g, name, fmt, ratio, lens, chunk, family, wbf16, dev,
                 two_stage=False):
    hd, kname, qblock, tstride, sdim, tok_alloc, warps = _FMT[fmt]
    coff = 2 if ratio == 4 else 1
    SW = coff * hd
    bs = 4 if ratio == 4 else 8               # state block size (vLLM)
    cbs = 2 if (fmt == "mla" and ratio == 128) else 64  # compressed cache block size
    R = len(lens)
    # State: one block table per request, random contents (kv | score + ape).
    Wb = max((L + bs - 1) // bs for L in lens)
    nbs = R * Wb + 1
    sscale = {"normal": 1.0, "peaked": 20.0, "flat": 1e-3}[family]
    state = torch.empty(nbs, bs, 2 * SW)
    state[:, :, :SW] = torch.randn(nbs, bs, SW, generator=g) * 2
    state[:, :, SW:] = torch.randn(nbs, bs, SW, generator=g) * sscale
    if family == "flat":
        state[:, :, :SW][torch.rand(nbs, bs, SW, generator=g) < 0.2] = 0.0
    perm = torch.randperm(nbs - 1, generator=g) + 1
    bt = perm[: R * Wb].reshape(R, Wb).to(torch.int32)
    # Tokens: the last `chunk` positions of each request (prefill chunk or,
    # with chunk 1, decode), then two padding tokens (slot -1).
    tok_req, pos = [], []
    for r, L in enumerate(lens):
        for p in range(max(0, L - chunk), L):
            tok_req.append(r)
            pos.append(p)
    T = len(pos) + 2
    tok_req += [0, 0]
    pos += [0, 0]
    slots, cslots = [], []
    ncomp = [(L // ratio) for L in lens]
    cW = max(1, max((n + cbs - 1) // cbs for n in ncomp))
    cnb = R * cW + 1
    cperm = torch.randperm(cnb, generator=g)[: R * cW].reshape(R, cW)
    for i in range(T):
        if i >= T - 2:
            slots.append(-1)
            cslots.append(-1)
            continue
        r, p = tok_req[i], pos[i]
        slots.append(int(bt[r, p // bs]) * bs + p % bs)
        if (p + 1) % ratio == 0:  # §10.1 compressed slot mapping
            c = p // ratio
            cslots.append(int(cperm[r, c // cbs]) * cbs + c % cbs)
        else:
            cslots.append(-1)
    stride = (cbs * tok_alloc + 575) // 576 * 576
    cache = torch.randint(0, 256, (cnb, stride), generator=g, dtype=torch.uint8)
    cache_in = cache.clone()
    w = 1.0 + 0.3 * torch.randn(hd, generator=g)
    w[torch.rand(hd, generator=g) < 0.2] *= -1
    w = w.to(torch.bfloat16) if wbf16 else w
    ncs = max(lens) + 1
    cs = cos_sin_table(ncs)
    eps = 1e-6

    state_d, bt_d = state.to(dev), bt.to(dev)
    req_d = torch.tensor(tok_req, dtype=torch.int32, device=dev)
    pos_d = torch.tensor(pos, dtype=torch.int64, device=dev)
    sl_d = torch.tensor(slots, dtype=torch.int64, device=dev)
    csl_d = torch.tensor(cslots, dtype=torch.int64, device=dev)
    w_d, cs_d, cache_d = w.to(dev), cs.to(dev), cache.to(dev)
    kv_cache = torch.as_strided(cache_d, (cnb, cbs, tok_alloc), (stride, tok_alloc, 1))
    args = dict(
        state_cache_ptr=state_d, state_cache_stride0=state_d.stride(0),
        state_cache_stride1=state_d.stride(1), token_to_req_indices_ptr=req_d,
        positions_ptr=pos_d, slot_mapping_ptr=sl_d, block_table_ptr=bt_d,
        block_table_stride=bt_d.stride(0), block_size=bs, rms_norm_weight_ptr=w_d,
        rms_norm_eps=eps, cos_sin_cache_ptr=cs_d, cos_sin_stride=cs_d.stride(0),
        k_cache_ptr=kv_cache, kv_slot_mapping_ptr=csl_d, kv_cache_block_size=cbs,
        HEAD_SIZE=hd, TRITON_BLOCK_SIZE=triton.next_power_of_2(hd), STATE_WIDTH=SW,
        COMPRESS_RATIO=ratio, OVERLAP=ratio == 4, ROPE_HEAD_DIM=64, FP8_MAX=448.0,
        QUANT_BLOCK=qblock, TOKEN_STRIDE=tstride, SCALE_DIM=sdim, KV_BLOCK_STRIDE=stride,
        SANITIZE_CACHE_NANS=False)
    if two_stage:
        # vLLM's C128 prefill split: stage 1 per (token, head tile) into an
        # fp32 scratch, stage 2 norm/quant/RoPE/store.
        ns = 4
        scratch = torch.empty(T, hd, dtype=torch.float32, device=dev)
        s1 = kernel_named(mod, "_compress_gather_split_sparse_attn")
        s2 = kernel_named(mod, "_finalize_norm_rope_quant_store_sparse_attn")
        a1 = dict(args, scratch_ptr=scratch, scratch_stride=scratch.stride(0), NUM_SPLITS=ns,
                  HEAD_TILE=hd // ns)
        launch(s1, (T * ns,), a1)
        launch(s2, (T,), dict(args, scratch_ptr=scratch, scratch_stride=scratch.stride(0)))
        kname = s1.__name__ + "+" + s2.__name__
    else:
        launch(kernel_named(mod, kname), (T,), args, num_warps=warps)
    torch.cuda.synchronize()
    write_case(out, "compressor_compress_insert", name,
               dict(compress_ratio=ratio, cache_format=fmt, head_dim=hd, block_size=cbs,
                    state_block_size=bs, num_blocks=cnb, block_stride_bytes=stride,
                    eps=repr(eps), T=T, R=R, vllm_kernel=kname),
               dict(state=np_of(state), block_table=np_of(bt),
                    token_to_req=np.array(tok_req, dtype=np.int32),
                    positions=np.array(pos, dtype=np.int64),
                    slot_mapping=np.array(slots, dtype=np.int64),
                    cache_slot_mapping=np.array(cslots, dtype=np.int64),
                    norm_weight=np_of(w), cos_sin=np_of(cs), cache_in=np_of(cache_in),
                    cache_out=np_of(cache_d)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vllm-src", required=True, help="root of a vLLM source tree")
    ap.add_argument("--out", required=True, help="golden root (case dirs go below it)")
    ap.add_argument("--save-file", help="path of save_partial_states.py (default: found)")
    ap.add_argument("--compress-file", help="path of fused_compress_quant_cache.py")
    ap.add_argument("--fp4-emulate", choices=["auto", "always", "never"], default="auto")
    ap.add_argument("--seed", type=int, default=20261125)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("needs a CUDA device")
    dev = torch.device("cuda")
    install_stubs()
    save_mod = load_file(a.vllm_src, find_file(a.vllm_src, "save_partial_states.py", a.save_file))
    comp_mod = load_file(a.vllm_src,
                         find_file(a.vllm_src, "fused_compress_quant_cache.py", a.compress_file))
    emulate = a.fp4_emulate == "always" or (
        a.fp4_emulate == "auto" and torch.cuda.get_device_capability()[0] < 10)
    if emulate:
        comp_mod._fp32x2_to_fp4x2 = _fp32x2_to_fp4x2_emulated
    try:
        commit = subprocess.run(["git", "-C", a.vllm_src, "rev-parse", "HEAD"], text=True,
                                capture_output=True).stdout.strip()
    except OSError:
        commit = ""
    print(f"vLLM source {a.vllm_src} {commit or '(no git)'}; fp4 emulation: {emulate}")
    g = torch.Generator().manual_seed(a.seed)
    fns = jit_functions(save_mod)
    gen_save(fns, a.out, g, "c4_mla", 37, 512, 4, dev)
    gen_save(fns, a.out, g, "c128_mla", 29, 512, 128, dev)
    gen_save(fns, a.out, g, "c4_indexer", 41, 128, 4, dev)
    # name, format, ratio, request lengths, tokens per request, score family, bf16 weight
    cases = [
        ("c4_mla_prefill", "mla", 4, [64, 37], 64, "normal", True),
        ("c4_mla_decode", "mla", 4, [8, 100, 4, 252], 1, "normal", True),
        ("c4_mla_first_windows", "mla", 4, [4, 8, 12], 12, "peaked", False),
        ("c4_mla_flat", "mla", 4, [40], 40, "flat", True),
        ("c128_mla_prefill", "mla", 128, [384, 256], 384, "normal", True),
        ("c128_mla_decode", "mla", 128, [128, 640], 1, "peaked", True),
        ("c4_indexer_fp8_prefill", "indexer_fp8", 4, [64, 29], 64, "normal", True),
        ("c4_indexer_fp8_decode", "indexer_fp8", 4, [8, 96, 400], 1, "flat", False),
        ("c4_indexer_mxfp4_prefill", "indexer_mxfp4", 4, [64, 29], 64, "normal", True),
        ("c4_indexer_mxfp4_decode", "indexer_mxfp4", 4, [8, 96, 400], 1, "peaked", True),
    ]
    for name, fmt, ratio, lens, chunk, fam, wbf in cases:
        gen_compress(comp_mod, a.out, g, name, fmt, ratio, lens, chunk, fam, wbf, dev)
    if any(f.__name__ == "_compress_gather_split_sparse_attn"
           for f in jit_functions(comp_mod).values()):
        gen_compress(comp_mod, a.out, g, "c128_mla_two_stage", "mla", 128, [512, 300], 512,
                     "normal", True, dev, two_stage=True)


if __name__ == "__main__":
    main()
