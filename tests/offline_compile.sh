#!/usr/bin/env bash
# offline_compile.sh TARGET OPTIONS_TOOL CL_DIR
#
# Compiles every CL_DIR/*.cl for a GPU we do not have, with the build options
# the library would use on it (OPTIONS_TOOL PROFILE, i.e. dsacl-cl-options).
#   pvc, dg2               Intel, ocloc (package intel-opencl-icd)
#   gfx90a, gfx940, gfx1030 AMD, clang -target amdgcn-amd-amdhsa + ROCm device libs
#   gfx1100               AMD RDNA3 (the WMMA tiles): the same clang, compiled to
#                          an object with -nogpulib (Debian's device libs stop
#                          at gfx10), so the WMMA builtins are checked, not linked
#   nvptx                  NVIDIA (the H100 profile, sm_90, inline PTX on): clang
#                          -target nvptx64 with libclc (package libclc-15) to PTX,
#                          then ptxas -arch=sm_90 when the CUDA toolkit is there
#                          (it assembles the inline PTX and prints shared memory
#                          per kernel); without ptxas only the clang stage runs.
# Exit 0: all compiled; 1: a compiler rejected a kernel (a bug); 77: the
# compiler is not installed (meson reports the test as skipped).
#
# The clang targets (AMD, nvptx) compile with -Werror: a kernel warning is a
# failure, as the host code's are (every kernel compiled clean in session 26,
# after sparse_mla_split_combine's unappliable unroll pragma). ocloc's
# register-spill notes are reports about the code it made, not warnings
# about the source; the Intel targets pass them through.
#
# AMD: clBuildProgram without -cl-std compiles as the highest OpenCL C 1.x,
# so we pass -cl-std=CL1.2 too (a -cl-std in the library's options comes
# later and wins). CL2.0 would accept generic-address-space pointers that
# ROCm, NVIDIA and PoCL reject at their default 1.2.
#
# Environment: CLANG (default clang-15), ROCM_DEVICE_LIB_PATH (default the
# Debian rocm-device-libs bitcode folder), OCLOC (default ocloc).
set -euo pipefail

if [ $# -ne 3 ]; then
  echo "usage: $0 TARGET OPTIONS_TOOL CL_DIR  (TARGET: pvc dg2 gfx90a gfx940 gfx1030 gfx1100 nvptx)" >&2
  exit 2
fi
target=$1 tool=$2 cldir=$3

skip() { echo "SKIP: $*"; exit 77; }

case $target in
  pvc | dg2)
    profile=intel-$target
    ocloc=${OCLOC:-ocloc}
    command -v "$ocloc" > /dev/null || skip "$ocloc not found — install intel-opencl-icd"
    ;;
  gfx90a | gfx940 | gfx1030 | gfx1100)
    profile=amd-$target
    clang=${CLANG:-clang-15}
    libs=${ROCM_DEVICE_LIB_PATH:-/usr/lib/x86_64-linux-gnu/amdgcn/bitcode}
    command -v "$clang" > /dev/null || skip "$clang not found — install clang-15"
    [ "$target" = gfx1100 ] || [ -f "$libs/ockl.bc" ] ||
      skip "no ROCm device libs in $libs — install rocm-device-libs"
    ;;
  nvptx)
    profile=nvidia
    clang=${CLANG:-clang-15}
    libclc=${LIBCLC:-/usr/lib/clc/nvptx64--nvidiacl.bc}
    command -v "$clang" > /dev/null || skip "$clang not found — install clang-15"
    [ -f "$libclc" ] || skip "no $libclc — install libclc-15"
    ptxas=${PTXAS:-$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)}
    [ -x "$ptxas" ] || ptxas=
    ;;
  *)
    echo "unknown target '$target' (pvc dg2 gfx90a gfx940 gfx1030 gfx1100 nvptx)" >&2
    exit 2
    ;;
esac

[ -d "$cldir" ] || { echo "FAIL: $cldir is not a directory" >&2; exit 1; }
cldir=$(cd "$cldir" && pwd)
shopt -s nullglob
sources=("$cldir"/*.cl)
if [ ${#sources[@]} -eq 0 ]; then
  echo "FAIL: no .cl file in $cldir" >&2
  exit 1
fi

opts=$("$tool" "$profile") || { echo "FAIL: $tool $profile failed" >&2; exit 1; }
read -r -a optv <<< "$opts"
echo "target $target, profile $profile"
echo "options: $opts"

# meson test fills each test's fresh heap memory with a random byte
# (MALLOC_PERTURB_); ocloc 22.43 reads heap memory it never wrote and aborts
# on topk.cl for pvc with some of those bytes (77 does it every time, 0 never:
# a CI failure, reproduced by hand). The compilers run unperturbed.
export MALLOC_PERTURB_=0

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

failed=0
for src in "${sources[@]}"; do
  name=$(basename "$src" .cl)
  log=$work/$name.log
  # The device's options plus the program's own constants (host-owned).
  opts=$("$tool" "$profile" "$name.cl") || { echo "FAIL: $tool $profile $name.cl failed" >&2; exit 1; }
  read -r -a optv <<< "$opts"
  # Run inside the temp dir: ocloc may drop files into the working directory.
  if [ "$profile" = nvidia ]; then
    # clang's PTX says .target sm_20 / an old .version: the inline PTX (mma,
    # cvt e4m3x2) needs sm_90 and PTX 7.8, so the header is raised before ptxas.
    cmd=(bash -c '"$0" -x cl -cl-std=CL1.2 -Werror -target nvptx64-unknown-nvidiacl \
         -Xclang -finclude-default-header -Xclang -mlink-bitcode-file -Xclang "$1" \
         "${@:5}" -I "$2" -S -O2 "$3" -o "$4.ptx" &&
         sed -i "s/^\.version .*/.version 7.8/; s/^\.target .*/.target sm_90/" "$4.ptx" &&
         if [ -n "$PTXAS" ]; then "$PTXAS" -arch=sm_90 -v "$4.ptx" -o "$4.cubin" 2>&1 |
           grep -E "error|Compiling entry|Used" | sed "s/^ptxas info *: //"; exit "${PIPESTATUS[0]}";
         fi' "$clang" "$libclc" "$cldir" "$src" "$work/$name" "${optv[@]}")
    export PTXAS=$ptxas
  elif [ "$profile" = "${profile#amd-}" ]; then
    cmd=("$ocloc" compile -file "$src" -device "$target" -options "$opts -I $cldir"
         -output_no_suffix -out_dir "$work" -output "$name")
  elif [ "$target" = gfx1100 ]; then
    cmd=("$clang" -x cl -cl-std=CL1.2 -Werror -target amdgcn-amd-amdhsa -mcpu="$target" -nogpulib -c
         -Xclang -finclude-default-header "${optv[@]}" -I "$cldir" "$src" -o "$work/$name.o")
  else
    cmd=("$clang" -x cl -cl-std=CL1.2 -Werror -target amdgcn-amd-amdhsa -mcpu="$target"
         --rocm-device-lib-path="$libs" -Xclang -finclude-default-header
         "${optv[@]}" -I "$cldir" "$src" -o "$work/$name.hsaco")
  fi
  rc=0
  (cd "$work" && "${cmd[@]}") > "$log" 2>&1 < /dev/null || rc=$?
  if [ "$rc" -eq 0 ]; then
    echo "ok    $name.cl"
  else
    echo "FAIL  $name.cl"
    printf 'command:'; printf ' %q' "${cmd[@]}"; echo
    failed=$((failed + 1))
  fi
  cat "$log"
done

echo "$target: $((${#sources[@]} - failed)) of ${#sources[@]} compiled"
[ "$failed" -eq 0 ]
