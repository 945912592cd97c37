# The one device call (run from .device/mla9 inside tools/gpu-check.sh --run:
# $b = this tree's build, $out = results). Main: only dsacl-bench, built
# from the repository root into /tmp/mainb.
set -u
S=$out/summary.txt
: > $S
t0=$(date +%s)
( meson setup /tmp/mainb ../.. > $out/mainsetup.log 2>&1 && ninja -C /tmp/mainb tools/dsacl-bench > $out/mainbuild.log 2>&1 ) || tail -5 $out/main*.log >> $S
MB=/tmp/mainb
echo "main built $(( $(date +%s) - t0 )) s; $(git -C ../.. log --oneline -1 2>/dev/null)" >> $S
bn() { # tag build gu buildopts only forced
  local tag=$1 bd=$2 gu=$3 opt=$4 only=$5 f=$6
  MLA9_GU=$gu DSACL_BUILD_OPTIONS="$opt" DSACL_FORCE_PORTABLE=$f timeout 40 \
    $bd/tools/dsacl-bench --only $only --runs 20 > $out/b_$tag.txt 2>&1
  echo "$tag $(grep -h 'T=64 H=64 K=128+512' $out/b_$tag.txt | head -1)" >> $S
}
F=sparse_mla_fused
bn main1 $MB 1 "" $F 1
bn gu2a $b 2 "" $F 1
bn att0_gu1 $b 1 "-DMLA9_GU=1 -DMLA9_ATT_OFF=1" $F 1
bn att0_gu2 $b 2 "-DMLA9_ATT_OFF=1" $F 1
bn main2 $MB 1 "" $F 1
bn gu2b $b 2 "" $F 1
bn gu4 $b 4 "-DMLA9_GU=4" $F 1
bn att0_gu4 $b 4 "-DMLA9_GU=4 -DMLA9_ATT_OFF=1" $F 1
timeout 30 $MB/tools/dsacl-bench --only mla_gather_slots --runs 20 > $out/b_slots.txt 2>&1
echo "slots $(grep -h '64x640' $out/b_slots.txt | head -1)" >> $S
bn main3 $MB 1 "" $F 1
bn gu2c $b 2 "" $F 1
echo "benches done $(( $(date +%s) - t0 )) s" >> $S
for f in 1 0; do
  DSACL_FORCE_PORTABLE=$f timeout 60 $b/tests/test_sparse_mla > $out/t_forced$f.txt 2>&1
  echo "test_sparse_mla forced=$f rc=$? $(tail -1 $out/t_forced$f.txt)" >> $S
  DSACL_FORCE_PORTABLE=$f timeout 20 $b/tools/dsacl-golden --only sparse_mla_decode $PWD/../../.deps/golden > $out/g_forced$f.txt 2>&1
  echo "golden forced=$f rc=$? $(tail -1 $out/g_forced$f.txt)" >> $S
done
echo "tests done $(( $(date +%s) - t0 )) s" >> $S
bn main_2st $MB 1 "" sparse_mla_2stage 0
bn gu2_2st $b 2 "" sparse_mla_2stage 0
bn att0_gu2_nolen $b 2 "-DMLA9_ATT_OFF=1 -DMLA9_NOLEN" $F 1
bn att0_gu2_nomask $b 2 "-DMLA9_ATT_OFF=1 -DMLA9_NOMASK" $F 1
echo "end $(( $(date +%s) - t0 )) s" >> $S
cat $S
