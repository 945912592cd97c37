#!/usr/bin/env bash
# check.sh LIB HEADER_DIR BASELINE [--update]
#
# The ABI check (issue 11): LIB must export exactly the functions that
# HEADER_DIR's headers declare with DSA_API (tools/abi_symbols.py), and its
# ABI must be compatible with BASELINE, libabigail's description of the last
# released library (abidw). Compatible means: nothing removed, no function,
# type or variable changed; new functions are allowed (--no-added-syms leaves
# them out of the verdict, the report still lists them with --update).
#
#   --update   rewrite BASELINE from LIB (a deliberate ABI break: the
#              soversion in meson.build must change in the same commit; or a
#              1.x release that added functions, to make them the baseline)
#
# Exit 0: compatible; 1: a difference (report printed); 77: abidiff/abidw
# not installed (Debian abigail-tools).
set -euo pipefail
if [ $# -lt 3 ]; then echo "usage: $0 LIB HEADER_DIR BASELINE [--update]" >&2; exit 2; fi
lib=$1 headers=$2 baseline=$3
here=$(cd "$(dirname "$0")" && pwd)

python3 "$here/../../tools/abi_symbols.py" check "$lib" "$headers"/*.h

for t in abidw abidiff; do
  command -v "$t" > /dev/null || { echo "SKIP: $t not found — install abigail-tools"; exit 77; }
done
if [ "${4:-}" = --update ]; then
  abidw --headers-dir "$headers" --no-corpus-path --no-comp-dir-path --short-locs \
    --drop-private-types --type-id-style hash \
    "$lib" --out-file "$baseline"
  echo "wrote $baseline"
  exit 0
fi
rc=0
abidiff --no-added-syms --headers-dir2 "$headers" "$baseline" "$lib" || rc=$?
# abidiff's exit status is a bit set: 1 error, 2 usage error, 4 an ABI
# change, 8 an incompatible change. With added symbols left out, any bit
# is a failure.
if [ "$rc" -ne 0 ]; then
  echo "ABI check failed (abidiff exit $rc) against $baseline."
  echo "A deliberate break: bump the soversion and run $0 $lib $headers $baseline --update"
  exit 1
fi
echo "ABI compatible with $baseline"
