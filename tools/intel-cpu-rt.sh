#!/usr/bin/env bash
# Installs Intel's OpenCL CPU runtime (OpenCL 3.0, cl_intel_subgroups,
# required sub-group sizes, fp16, USM) from PyPI into a folder of its own and
# writes two ICD vendor folders beside it, one per device under test:
#
#   <prefix>/lib          the runtime's libraries (its libOpenCL.so removed:
#                         the system ICD loader stays the one loaded)
#   <prefix>/icd-intel/   intel.icd only  -> OCL_ICD_VENDORS for the Intel runs
#   <prefix>/icd-pocl/    pocl.icd only   -> OCL_ICD_VENDORS for the PoCL runs
#
#   tools/intel-cpu-rt.sh [prefix]     default prefix: ~/.cache/dsacl/intel-cpu-rt
#
# Prints the environment to use it, one `export` per line (eval-able).
# Idempotent: wheels are downloaded once and kept in <prefix>/wheels.
set -euo pipefail

prefix=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/dsacl/intel-cpu-rt}
wheels=(intel-opencl-rt==2026.2.0 intel-cmplr-lib-rt==2026.2.0 tbb==2023.2.0 tcmlib==1.6.0)

mkdir -p "$prefix/wheels"
if [ ! -f "$prefix/lib/libintelocl.so" ]; then
  if ! ls "$prefix"/wheels/intel_opencl_rt-*.whl > /dev/null 2>&1; then
    python3 -m pip download --quiet --no-deps -d "$prefix/wheels" "${wheels[@]}" >&2
  fi
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  for w in "$prefix"/wheels/*.whl; do python3 -m zipfile -e "$w" "$tmp/"; done
  rm -rf "$prefix/lib.new"
  mkdir -p "$prefix/lib.new"
  cp -a "$tmp"/*.data/data/lib/. "$prefix/lib.new/"
  # Its own ICD loader would shadow the system one that also finds PoCL.
  rm -f "$prefix"/lib.new/libOpenCL.so*
  rm -rf "$prefix/lib"
  mv "$prefix/lib.new" "$prefix/lib"
fi

mkdir -p "$prefix/icd-intel" "$prefix/icd-pocl"
echo "$prefix/lib/libintelocl.so" > "$prefix/icd-intel/intel.icd"
pocl_icd=/etc/OpenCL/vendors/pocl.icd
if [ -f "$pocl_icd" ]; then cp "$pocl_icd" "$prefix/icd-pocl/pocl.icd"; fi

echo "export DSACL_INTEL_CPU_RT=$prefix"
echo "export LD_LIBRARY_PATH=$prefix/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
