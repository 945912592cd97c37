# Device call 1 (run from .device/mla9 inside gpu-check.sh --run: $b = this
# tree's build, $out = results). Main's build: the repository root's folder.
set -u
MB=/tmp/dsacl-build-$(printf %s "$(cd ../.. && pwd)" | sha256sum | cut -c1-12)
S=$out/summary.txt
: > $S
echo "main build $MB" >> $S
bn() { # tag build gu buildopts [extra bench args]
  local tag=$1 bd=$2 gu=$3 opt=$4; shift 4
  MLA9_GU=$gu DSACL_BUILD_OPTIONS="$opt" DSACL_FORCE_PORTABLE=1 timeout 40 \
    $bd/tools/dsacl-bench --only sparse_mla_fused --runs 20 "$@" > $out/b_$tag.txt 2>&1
  echo "$tag $(grep -h 'T=64 H=64 K=128+512' $out/b_$tag.txt | head -1)" >> $S
}
bn main1 $MB 1 ""
bn gu2a $b 2 ""
bn gu1 $b 1 "-DMLA9_GU=1"
bn main2 $MB 1 ""
bn gu2b $b 2 ""
bn gu4 $b 4 "-DMLA9_GU=4"
bn main3 $MB 1 ""
bn gu2c $b 2 ""
bn att0_gu1 $b 1 "-DMLA9_GU=1 -DMLA9_ATT_OFF=1"
bn att0_gu2 $b 2 "-DMLA9_ATT_OFF=1"
bn att0_gu4 $b 4 "-DMLA9_GU=4 -DMLA9_ATT_OFF=1"
bn att0_gu2_nolen $b 2 "-DMLA9_ATT_OFF=1 -DMLA9_NOLEN"
bn att0_gu2_nomask $b 2 "-DMLA9_ATT_OFF=1 -DMLA9_NOMASK"
bn att0_gu1_nomask $b 1 "-DMLA9_GU=1 -DMLA9_ATT_OFF=1 -DMLA9_NOMASK"
timeout 30 $MB/tools/dsacl-bench --only mla_gather_slots --runs 20 > $out/b_slots.txt 2>&1
echo "slots $(grep -h '64x640' $out/b_slots.txt | head -1)" >> $S
# ptxas registers (the gather kernels)
for gu in 1 2; do
  MLA9_GU=$gu DSACL_LOG=5 DSACL_CACHE_DIR=off DSACL_BUILD_OPTIONS="-DMLA9_GU=$gu -cl-nv-verbose" DSACL_FORCE_PORTABLE=1 \
    timeout 30 $b/tools/dsacl-golden --only sparse_mla_decode $PWD/../../.deps/golden > $out/reg$gu.txt 2>&1
  echo "gu$gu golden rc=$? $(grep -A4 "entry function 'sparse_mla_gather_pack'" $out/reg$gu.txt | grep -o 'Used [0-9]* registers' | head -1)" >> $S
done
DSACL_LOG=5 DSACL_CACHE_DIR=off DSACL_BUILD_OPTIONS="-cl-nv-verbose" timeout 30 $MB/tools/dsacl-bench --only mla_gather_slots --runs 1 > $out/regslots.txt 2>&1
echo "slots $(grep -A4 "entry function 'mla_gather_slots'" $out/regslots.txt | grep -o 'Used [0-9]* registers' | head -1)" >> $S
bn main4 $MB 1 ""
bn gu2d $b 2 ""
cat $S
