#!/usr/bin/env bash
# Build, test and bench on a machine with NVIDIA's OpenCL driver installed but
# not registered (the lent GPU machines). Debian packages for the OpenCL
# headers and ICD loader are unpacked from DEPS (default .deps/*.deb) and the
# golden vectors read from DEPS/golden. Results go to OUT (default ./gpu-out).
#   usage: tools/gpu-check.sh [--bench-only | --run 'COMMANDS']
# --run: after the build, only COMMANDS (bash; $b is the build folder, $out
# the results folder), for a quick measurement.
# Prepare .deps on a Debian machine first (it is git-ignored; carry it along):
#   mkdir -p .deps && (cd .deps && apt-get download opencl-c-headers \
#     ocl-icd-opencl-dev ocl-icd-libopencl1 pkgconf pkgconf-bin libpkgconf3 pkg-config)
#   cp -r ../shared/golden .deps/golden
set -uo pipefail
deps=${DEPS:-.deps}
out=${OUT:-gpu-out}
mkdir -p "$out" /tmp/dsacl-deps /tmp/dsacl-icd
for f in "$deps"/*.deb; do dpkg -x "$f" /tmp/dsacl-deps; done
lib=$(ls /usr/lib/libnvidia-opencl.so.1 /usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1 \
      /usr/local/nvidia/lib64/libnvidia-opencl.so.1 2>/dev/null | head -n 1)
echo "${lib:-libnvidia-opencl.so.1}" > /tmp/dsacl-icd/nvidia.icd
export OCL_ICD_VENDORS=/tmp/dsacl-icd
# The GPU runs take every random case the tests have (CI on 2 CPU cores
# runs fewer: tests/common.h, dsa_test_large).
export DSACL_TEST_LARGE=1
d=/tmp/dsacl-deps/usr
export CPATH=$d/include LIBRARY_PATH=$d/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$d/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PKG_CONFIG_PATH=$d/lib/x86_64-linux-gnu/pkgconfig PATH=$d/bin:$PATH
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv \
  | tee "$out/gpu.txt"
# One build folder per source tree: a machine still warm from an earlier call
# keeps /tmp, and a folder configured for another tree (a copy under .device/,
# say) would otherwise be rebuilt from that tree, silently.
b=/tmp/dsacl-build-$(printf %s "$PWD" | sha256sum | cut -c1-12)
meson setup "$b" -Dgolden_dir="$PWD/$deps/golden" >"$out/setup.log" 2>&1 \
  && ninja -C "$b" >"$out/build.log" 2>&1 || { tail -40 "$out"/*.log; exit 1; }
if [ "${1:-}" = "--run" ]; then
  out=$out b=$b bash -c "$2"
  exit
fi
$b/tools/dsacl-info --variants | tee "$out/info.txt" | head -40
if [ "${1:-}" != "--bench-only" ]; then
  meson test -C $b --no-suite vendor --print-errorlogs --num-processes 4 2>&1 \
    | tee "$out/test.log" | tail -15
  # The logits keys kernel at each group size and the tile kernel's f16
  # path, each forced over the whole reference test (CI runs only the
  # goldens so under its emulations: tests/meson.build).
  for il in 128 256 off; do
    echo "DSACL_IL_KEYS=$il: $(DSACL_IL_KEYS=$il $b/tests/test_indexer_logits 2>&1 | tail -1)"
  done | tee "$out/il-keys.txt"
  # Every other variant this GPU can run (capabilities masked one by one,
  # a 32 KiB device), against the reference tests and the goldens.
  if [ -x $b/tests/checkcl ]; then
    $b/tests/checkcl --masked-only --bench --golden "$PWD/$deps/golden" 2>&1 | tee "$out/checkcl.txt" | tail -50
  fi
  # Every variant side by side at the cases' V4 shapes, under each mask
  # (meson test above ran checkcl-cases' checks; this is its timing).
  if [ -x $b/tests/checkcl-cases ]; then
    $b/tests/checkcl-cases --bench 2>&1 | tee "$out/checkcl-cases-bench.txt" | tail -60
  fi
  if [ -x $b/tests/test_bigmem ]; then
    $b/tests/test_bigmem 2>&1 | tee "$out/bigmem.txt" | tail -10
  fi
fi
$b/tools/dsacl-bench | tee "$out/bench.txt"
$b/tools/dsacl-bench --json > "$out/bench.json"
