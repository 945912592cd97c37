#!/usr/bin/env bash
# run.sh BUILD_DIR SRC_DIR
#
# Installs BUILD_DIR into a scratch tree (meson install --destdir) and builds
# tests/install/consumer.c as C and as C++ against it twice: through the
# installed pkg-config file and through the installed CMake package; each
# binary then runs against the installed library (a context on the first
# OpenCL device when there is one). Exit 77 when no C++ compiler, pkg-config
# or cmake is installed.
set -euo pipefail
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd)
for t in c++ cc pkg-config cmake; do
  command -v "$t" > /dev/null || { echo "SKIP: $t not found"; exit 77; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
meson install -C "$build" --no-rebuild --destdir "$tmp/dest" --quiet > "$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log"; echo "FAIL: meson install"; exit 1; }
pc=$(find "$tmp/dest" -name dsacl.pc)
cfg=$(find "$tmp/dest" -name dsaclConfig.cmake)
[ -n "$pc" ] && [ -n "$cfg" ] || { echo "FAIL: no dsacl.pc or dsaclConfig.cmake installed"; exit 1; }
for h in "$src"/include/dsacl/*.h; do
  [ -n "$(find "$tmp/dest" -path "*/include/dsacl/$(basename "$h")")" ] ||
    { echo "FAIL: header $(basename "$h") not installed"; exit 1; }
done
for t in dsacl-info dsacl-bench dsacl-golden; do
  [ -n "$(find "$tmp/dest" -path "*/bin/$t")" ] || { echo "FAIL: $t not installed"; exit 1; }
done
libdir=$(dirname "$pc")/..
# The installed prefix lies under the destdir: pkg-config prepends it.
export PKG_CONFIG_PATH=$(dirname "$pc") PKG_CONFIG_SYSROOT_DIR=$tmp/dest
read -r -a flags <<< "$(pkg-config --cflags --libs dsacl)"
echo "pkg-config: ${flags[*]}"
w=(-Wall -Wextra -Werror)
cc -std=c11 "${w[@]}" "$src/tests/install/consumer.c" "${flags[@]}" -o "$tmp/pc_c"
c++ -std=c++11 "${w[@]}" -x c++ "$src/tests/install/consumer.cpp" -I "$src/tests/install" \
  "${flags[@]}" -o "$tmp/pc_cxx"
prefix=$(cd "$(dirname "$cfg")/../../../.." && pwd)
[ -f "$prefix/include/dsacl/dsacl.h" ] ||
  prefix=$(cd "$(dirname "$cfg")/../../.." && pwd) # lib/cmake/dsacl without a multiarch folder
# The consumer asks for the installed header's major.minor: the package's
# version file accepts the same minor before 1.0 (an ABI break bumped it)
# and, from 1.0, any later minor of the same major.
want=$(sed -n 's/^#define DSACL_VERSION_\(MAJOR\|MINOR\) \([0-9]*\)$/\2/p' \
         "$prefix/include/dsacl/dsacl.h" | paste -sd.)
cmake -S "$src/tests/install" -B "$tmp/cmake" -DCMAKE_PREFIX_PATH="$prefix" \
  -DDSACL_WANT_VERSION="$want" \
  -DCMAKE_C_FLAGS="${w[*]}" -DCMAKE_CXX_FLAGS="${w[*]}" > "$tmp/cmake.log" 2>&1 ||
  { cat "$tmp/cmake.log"; echo "FAIL: cmake configure"; exit 1; }
cmake --build "$tmp/cmake" > "$tmp/cmake-build.log" 2>&1 ||
  { cat "$tmp/cmake-build.log"; echo "FAIL: cmake build"; exit 1; }
export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for b in "$tmp/pc_c" "$tmp/pc_cxx" "$tmp/cmake/consumer_c" "$tmp/cmake/consumer_cxx"; do
  # The binary must resolve dsacl from the installed tree, not the build.
  ldd "$b" > "$tmp/ldd.txt"
  grep -q "$tmp/dest" "$tmp/ldd.txt" ||
    { cat "$tmp/ldd.txt"; echo "FAIL: $b does not use the installed library"; exit 1; }
  echo "$(basename "$b"): $("$b")"
done
echo "installed tree: pkg-config and CMake consumers, C and C++: ok"
