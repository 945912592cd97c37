#!/usr/bin/env bash
# Profile dsacl kernels on NVIDIA with Nsight Compute (ncu), which does not
# see NVIDIA OpenCL's launches ("No kernels were profiled", driver 580).
# clrecord.c (LD_PRELOAD) records one launch of each named kernel from any
# dsacl program (its PTX, arguments and buffers); ptxreplay.c launches that
# PTX with those inputs through the CUDA driver API, checks that it writes
# the same bytes as the OpenCL launch did, times it, and ncu profiles it.
#
#   tools/nvreplay/run.sh BUILD OUT KERNELS -- COMMAND...
#     BUILD    a dsacl build folder (for COMMAND's paths; not used otherwise)
#     OUT      where the reports go: K.replay.txt (registers, shared memory,
#              blocks an SM, byte check, median of 20 runs), K.details.txt
#              (ncu --set full, every section), K.sass.csv (per SASS
#              instruction: executions and warp-stall samples), K.raw.csv
#     KERNELS  comma-separated kernel names
#     COMMAND  what launches them (e.g. BUILD/tools/dsacl-bench --only
#              paged_mqa_logits --runs 1); the third launch of each kernel is
#              recorded (DSACL_REC_NTH), i.e. inside the bench's warm-up of
#              the first shape that uses it
#   Environment: NCU_ARGS (default "--set full --clock-control none": the
#   GPU's own clocks, as dsacl-bench sees them), CUDA (default
#   /usr/local/cuda), OCL_ICD_VENDORS etc. as for COMMAND.
# Needs gcc, the CUDA toolkit's cuda.h and ncu, and the OpenCL headers
# (tools/gpu-check.sh unpacks them to /tmp/dsacl-deps). The recordings (all
# of each launch's buffers, twice) go to /tmp/clrec: a paged logits launch
# at B = 64 is ~600 MB.
# tools/nvreplay/sass_summary.py OUT/K.sass.csv prints the instruction mix
# and the stall reasons.
set -euo pipefail
if [ $# -lt 5 ] || [ "$4" != "--" ]; then sed -n "2,30p" "$0"; exit 2; fi
build=$1 out=$2 kernels=$3
shift 4
here=$(cd "$(dirname "$0")" && pwd)
cuda=${CUDA:-/usr/local/cuda}
ncu_args=${NCU_ARGS:---set full --clock-control none}
mkdir -p "$out"
: "${build:?}"
gcc -O2 -Wall -Wextra -Werror -shared -fPIC "$here/clrecord.c" -o /tmp/libclrecord.so -ldl
gcc -O2 -Wall -Wextra -Werror "$here/ptxreplay.c" -I"$cuda/include" -L"$cuda/lib64/stubs" \
  -lcuda -o /tmp/ptxreplay
rm -rf /tmp/clrec
DSACL_REC_DIR=/tmp/clrec DSACL_REC_KERNEL=$kernels LD_PRELOAD=/tmp/libclrecord.so "$@" \
  > "$out/command.txt" 2>&1 || true
grep clrecord "$out/command.txt" || true
for k in ${kernels//,/ }; do
  d=/tmp/clrec/$k
  [ -d "$d" ] || { echo "$k: not launched (or not recorded)"; continue; }
  # NVREPLAY_ALLOW_DIFF=1 profiles a replay whose bytes differ from the
  # OpenCL launch's, for its timing and instruction mix. The fused decode's
  # split workspace differs (26-39 thousand of 17.8 MB bytes, a different
  # count each replay) where three OpenCL launches of the same case write
  # the same bytes: the replay's words at the workspace's start are (m, l)
  # pairs, which the kernel writes past the partial rows at an offset of
  # get_num_groups(2) rows: in the replay that is evidently 0 and its groups
  # race on the first rows (session 26). A replay artifact, not the kernel's.
  /tmp/ptxreplay "$d" 20 | tee "$out/$k.replay.txt" || [ -n "${NVREPLAY_ALLOW_DIFF:-}" ]
  # shellcheck disable=SC2086
  ncu $ncu_args -k "$k" --launch-count 1 -f -o "/tmp/rep_$k" /tmp/ptxreplay "$d" 0 \
    > "$out/$k.ncu.log" 2>&1 || [ -n "${NVREPLAY_ALLOW_DIFF:-}" ] || { tail -5 "$out/$k.ncu.log"; continue; }
  ncu --import "/tmp/rep_$k.ncu-rep" --page details > "$out/$k.details.txt"
  ncu --import "/tmp/rep_$k.ncu-rep" --page source --csv --print-source sass > "$out/$k.sass.csv"
  ncu --import "/tmp/rep_$k.ncu-rep" --page raw --csv > "$out/$k.raw.csv"
  python3 "$here/sass_summary.py" "$out/$k.sass.csv" | tee "$out/$k.summary.txt"
done
