# The second (last) device call: as call1.sh; main's dsacl-bench in /tmp/mainb.
set -u
S=$out/summary.txt
: > $S
t0=$(date +%s)
( meson setup /tmp/mainb ../.. > $out/mainsetup.log 2>&1; ninja -C /tmp/mainb tools/dsacl-bench > $out/mainbuild.log 2>&1 ) || tail -5 $out/main*.log >> $S
MB=/tmp/mainb
echo "main built $(( $(date +%s) - t0 )) s" >> $S
bn() { # tag build buildopts only forced [env...]
  local tag=$1 bd=$2 opt=$3 only=$4 f=$5; shift 5
  env "$@" DSACL_BUILD_OPTIONS="$opt" DSACL_FORCE_PORTABLE=$f timeout 40 \
    $bd/tools/dsacl-bench --only $only --runs 20 > $out/b_$tag.txt 2>&1
  echo "$tag $(grep -h 'T=64 H=64 K=128+512' $out/b_$tag.txt | head -1 | cut -c1-75)" >> $S
}
F=sparse_mla_fused
SM=-DMLA9_SELMASK=1
bn main1 $MB "" $F 1
bn spec1 $b "" $F 1
bn sel1 $b "$SM" $F 1
bn main2 $MB "" $F 1
bn spec2 $b "" $F 1
bn sel2 $b "$SM" $F 1
bn main3 $MB "" $F 1
bn spec3 $b "" $F 1
bn sel3 $b "$SM" $F 1
bn nospec $b "-DMLA9_SPEC=0" $F 1
bn att0_nospec $b "-DMLA9_SPEC=0 -DMLA9_ATT_OFF=1" $F 1
bn att0_spec $b "-DMLA9_ATT_OFF=1" $F 1
bn att0_sel $b "$SM -DMLA9_ATT_OFF=1" $F 1
bn main4 $MB "" $F 1
bn spec4 $b "" $F 1
bn sel4 $b "$SM" $F 1
echo "forced benches done $(( $(date +%s) - t0 )) s" >> $S
bn main_2st1 $MB "" sparse_mla_2stage 0
bn spec_2st1 $b "" sparse_mla_2stage 0
bn main_2st2 $MB "" sparse_mla_2stage 0
bn spec_2st2 $b "" sparse_mla_2stage 0
bn main_lm32 $MB "" $F 1 DSACL_LOCAL_MEM_LIMIT=32768
bn spec_lm32 $b "" $F 1 DSACL_LOCAL_MEM_LIMIT=32768
bn sel_lm32 $b "$SM" $F 1 DSACL_LOCAL_MEM_LIMIT=32768
echo "benches done $(( $(date +%s) - t0 )) s" >> $S
G=$PWD/../../.deps/golden
tt() { # tag buildopts env...
  local tag=$1 opt=$2; shift 2
  env "$@" DSACL_BUILD_OPTIONS="$opt" timeout 60 $b/tests/test_sparse_mla > $out/t_$tag.txt 2>&1
  echo "test $tag rc=$? $(tail -1 $out/t_$tag.txt)" >> $S
  env "$@" DSACL_BUILD_OPTIONS="$opt" timeout 20 $b/tools/dsacl-golden --only sparse_mla_decode $G > $out/g_$tag.txt 2>&1
  echo "golden $tag rc=$? $(tail -1 $out/g_$tag.txt)" >> $S
}
tt forced "" DSACL_FORCE_PORTABLE=1
tt forced32k "" DSACL_FORCE_PORTABLE=1 DSACL_LOCAL_MEM_LIMIT=32768
tt default ""
tt forced_fused "" DSACL_FORCE_PORTABLE=1 DSACL_MLA_TWO_STAGE=off
tt forced_split2 "" DSACL_FORCE_PORTABLE=1 DSACL_MLA_SPLIT=2
tt default_split2 "" DSACL_MLA_SPLIT=2
tt sel_forced "$SM" DSACL_FORCE_PORTABLE=1
tt sel_forced32k "$SM" DSACL_FORCE_PORTABLE=1 DSACL_LOCAL_MEM_LIMIT=32768
tt sel_default "$SM"
echo "tests done $(( $(date +%s) - t0 )) s" >> $S
timeout 30 $MB/tools/dsacl-bench --only mla_gather_slots --runs 20 > $out/b_slots.txt 2>&1
echo "slots $(grep -h '64x640' $out/b_slots.txt | head -1 | cut -c1-75)" >> $S
bn main5 $MB "" $F 1
bn spec5 $b "" $F 1
bn sel5 $b "$SM" $F 1
echo "end $(( $(date +%s) - t0 )) s" >> $S
cat $S
