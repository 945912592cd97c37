/* checkcl: every kernel variant against the C reference, checkasm-style.
 *
 *   checkcl [--build DIR] [--golden DIR] [--masked-only] [--bench] [--quick] [--list]
 *
 * The variant tables (src/variant.c) say which variant each operator picks
 * under a capability mask. The runner walks the masks the device allows
 * (everything enabled, each enabled capability disabled alone, everything
 * disabled, a 32 KiB local-memory device, and the AMD paths emulated where
 * DSACL_EMULATE=amd can run), keeps the masks whose picks differ from every
 * mask before them (as checkasm re-runs a function only when the CPU flags
 * change what it gets), and under each runs the test programs of the
 * operators whose pick is new: the per-family tests (tests/test_*.c), which
 * compare with tests/ref/ on random shapes and edge cases, and dsacl-golden.
 * The programs log every pick (DSACL_LOG=2), so the table at the end says,
 * per operator and variant, which ran and passed, which failed, and why the
 * others cannot run here. --bench times the operators (dsacl-bench) under
 * each kept mask, side by side. Exit status: 1 if anything failed.
 *
 * --masked-only skips the all-enabled mask (the test suite itself runs it)
 * and, under the AMD emulation, the programs the suite runs under
 * DSACL_EMULATE=amd itself (amd_suite below: the same environment),
 * which is how `meson test` runs checkcl. Each program runs under `timeout`
 * (CHECKCL_PROG_TIMEOUT seconds, default 400). */
#include <stdio.h>
#include <stdlib.h>
#include <dirent.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#ifndef CHECKCL_BUILD_DIR
#define CHECKCL_BUILD_DIR "."
#endif

/* The test programs and the operators each one exercises. */
static const struct prog {
  const char *path; /* relative to the build dir */
  int golden;       /* takes the golden directory as its argument */
  const char *ops[8];
  /* The suite runs this program under DSACL_EMULATE=amd itself (its
   * *-amd-emu / *-amd-mfma tests, tests/meson.build): the same environment
   * as the "amd emulated" mask, so --masked-only leaves it to them. */
  int amd_suite;
} progs[] = {
    {"tests/test_mla_cache", 0,
     {"dsa_mla_cache_insert", "dsa_mla_gather_slots", "dsa_mla_gather_paged"}, 1},
    {"tests/test_mla_qnorm", 0, {"dsa_mla_qnorm_rope_kv_insert"}, 1},
    {"tests/test_indexer_q", 1, {"dsa_indexer_q_quant"}, 0},
    {"tests/test_indexer_k", 1, {"dsa_indexer_k_insert", "dsa_indexer_k_gather"}, 0},
    {"tests/test_indexer_logits", 0,
     {"dsa_indexer_logits", "dsa_indexer_logits", "dsa_indexer_paged_logits",
      "dsa_indexer_paged_logits"},
     1},
    {"tests/test_topk", 0, {"dsa_topk_prefill", "dsa_topk_decode"}, 0},
    {"tests/test_index_helpers", 0,
     {"dsa_index_compressed_slot_mapping", "dsa_index_swa", "dsa_index_global_topk",
      "dsa_index_c128_topk", "dsa_index_combine_topk_swa", "dsa_index_mixed_sparse"}, 0},
    {"tests/test_sparse_mla", 0,
     {"dsa_sparse_attn_bf16", "dsa_sparse_mla_decode", "dsa_sparse_mla_decode_two_stage"},
     1},
    {"tests/test_output_quant", 0, {"dsa_output_inv_rope_fp8_quant"}, 0},
    {"tests/test_mtp_norm", 0, {"dsa_mtp_input_rmsnorm"}, 1},
    {"tests/test_compressor", 0,
     {"dsa_compressor_save_states", "dsa_compressor_compress_insert"}, 0},
    {"tools/dsacl-golden", 1, {NULL}, 0}, /* every operator with golden vectors */
};
#define NPROGS (int)(sizeof progs / sizeof progs[0])

typedef struct mask {
  char name[64];
  unsigned disable;   /* dsa_cap_bits */
  unsigned local_mem; /* 0: the device's */
  int emulate_amd;
  int pick[64];       /* device-level pick per table, -1: none */
} mask;

#define MAXT 64
#define MAXV 8
enum { ST_NONE = 0, ST_OK, ST_FAIL, ST_SUITE };
static int status[MAXT][MAXV];
static char where[MAXT][MAXV][64];

static void set_env(const mask *m) {
  char buf[32];
  snprintf(buf, sizeof buf, "%u", m->disable);
  setenv("DSACL_DISABLE_CAPS", buf, 1);
  if (m->local_mem) {
    snprintf(buf, sizeof buf, "%u", m->local_mem);
    setenv("DSACL_LOCAL_MEM_LIMIT", buf, 1);
  } else {
    unsetenv("DSACL_LOCAL_MEM_LIMIT");
  }
  if (m->emulate_amd)
    setenv("DSACL_EMULATE", "amd", 1);
  else
    unsetenv("DSACL_EMULATE");
}

/* The device-level picks under m (shape-dependent refusals pass); 0 if the
 * library cannot make such a context here (an emulation the device lacks). */
static int picks(mask *m) {
  set_env(m);
  dsa_context_options o;
  dsa_context_options_default(&o);
  o.cache_dir = "off";
  dsa_context *c = NULL;
  if (dsa_context_create(&c, &o) != DSA_OK) return 0;
  for (int t = 0; t < dsa__num_variant_tables && t < MAXT; t++) {
    const dsa_variant_table *vt = dsa__variant_tables[t];
    m->pick[t] = -1;
    for (int i = 0; i < vt->n; i++) {
      char buf[160];
      if (!dsa__variant_refusal(c, &vt->v[i], NULL, buf, sizeof buf)) {
        m->pick[t] = i;
        break;
      }
    }
  }
  dsa_context_destroy(&c);
  return 1;
}

static int table_of(const char *op) {
  for (int t = 0; t < dsa__num_variant_tables; t++)
    if (!strcmp(dsa__variant_tables[t]->op, op)) return t;
  return -1;
}
static int variant_of(int t, const char *name) {
  for (int i = 0; i < dsa__variant_tables[t]->n; i++)
    if (!strcmp(dsa__variant_tables[t]->v[i].name, name)) return i;
  return -1;
}

/* Runs a program under m with DSACL_LOG=2; marks every (op, variant) it
 * logged as picked ok or FAIL by its exit status. Returns its status. */
static int run_prog(const char *build, const char *golden, const struct prog *p, const mask *m,
                    const char *extra, int quiet) {
  set_env(m);
  setenv("DSACL_LOG", "2", 1);
  char log[] = "/tmp/checkcl-XXXXXX";
  int fd = mkstemp(log);
  if (fd < 0) return -1;
  close(fd);
  /* Each program under a time limit of its own (coreutils timeout): a
   * vendor compiler that hangs (Intel's CPU compiler after corrupting its
   * heap did, in CI) then fails that program with its output, instead of
   * the whole runner running into meson's limit with nothing said. */
  const char *lim = getenv("CHECKCL_PROG_TIMEOUT");
  char cmd[8192];
  snprintf(cmd, sizeof cmd, "timeout -k 10 %s '%s/%s'%s %s%s%s > '%s' 2>&1", lim ? lim : "400",
           build, p->path, extra, p->golden ? "'" : "", p->golden ? golden : "",
           p->golden ? "'" : "", log);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  const int rc = system(cmd);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  const double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  const int ok = rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 0;
  if (rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 124)
    fprintf(stderr, "checkcl: %s ran past %s s under [%s]\n", p->path, lim ? lim : "400",
            m->name);
  unsetenv("DSACL_LOG");
  FILE *f = fopen(log, "r");
  char line[1024];
  int seen = 0;
  while (f && fgets(line, sizeof line, f)) {
    char op[128], var[64];
    /* "dsacl: dsa_op: variant" or "... variant (refused: ...)" */
    if (sscanf(line, "dsacl: %127[a-z0-9_]: %63[a-z0-9_+-]", op, var) != 2) continue;
    const int t = table_of(op);
    const int v = t >= 0 ? variant_of(t, var) : -1;
    if (t < 0 || v < 0 || t >= MAXT || v >= MAXV) continue;
    seen++;
    /* Keep the first mask that ran it, or the first that failed it. */
    if (status[t][v] == ST_NONE || (!ok && status[t][v] == ST_OK)) {
      status[t][v] = ok ? ST_OK : ST_FAIL;
      snprintf(where[t][v], sizeof where[t][v], "%s", m->name);
    }
  }
  if (!ok && !quiet) {
    fprintf(stderr, "checkcl: %s failed under [%s]; its output:\n", p->path, m->name);
    if (f) {
      rewind(f);
      int n = 0;
      while (fgets(line, sizeof line, f))
        if (strncmp(line, "dsacl: ", 7) != 0 && n++ < 40) fputs(line, stderr);
    }
  }
  if (f) fclose(f);
  remove(log);
  printf("  %-28s %s (%d picks, %.1f s)\n", p->path, ok ? "ok" : "FAIL", seen, secs);
  fflush(stdout);
  return ok ? 0 : 1;
}

/* Which operators each golden folder's cases run (dsacl-golden with
 * DSACL_LOG=2 on PoCL: the picks each case logs). Under a mask, dsacl-golden
 * runs only the folders of operators whose pick is new there (--only), as
 * the test programs do: the other folders would build their programs under
 * the mask for picks an earlier mask ran (Intel's CPU runtime: 45-47 s a
 * mask for all of them). A folder missing here always runs. Under a
 * local-memory limit, also those of operators with shape-dependent picks. */
static const struct {
  const char *folder;
  const char *ops[3];
} golden_ops[] = {
    {"combine_topk_swa_indices", {"dsa_index_combine_topk_swa"}},
    {"dequant_gather_k_cache", {"dsa_mla_gather_paged"}},
    {"dequant_gather_slots", {"dsa_mla_gather_slots"}},
    {"global_topk_indices", {"dsa_index_global_topk"}},
    {"indexer_k_cache_fp8", {"dsa_indexer_k_insert"}},
    {"indexer_q_fp8", {"dsa_indexer_q_quant"}},
    {"indexer_q_mxfp4", {"dsa_indexer_q_quant"}},
    {"mixed_sparse_indices", {"dsa_index_mixed_sparse"}},
    {"mla_cache_insert", {"dsa_mla_cache_insert"}},
    {"mqa_logits", {"dsa_indexer_logits"}},
    {"paged_mqa_logits", {"dsa_indexer_paged_logits"}},
    {"qnorm_rope_kv_insert", {"dsa_mla_qnorm_rope_kv_insert"}},
    {"sparse_mla_decode",
     {"dsa_sparse_mla_decode", "dsa_sparse_mla_decode_two_stage", "dsa_sparse_attn_bf16"}},
    {"topk_per_row", {"dsa_topk_prefill", "dsa_topk_decode"}},
};

/* " --only F" for each golden folder under root that holds a case of an
 * operator in fresh[] (by table index) or is not in golden_ops; returns the
 * number of folders (0: nothing to run). */
static int golden_only(const char *root, const int *fresh, char *out, size_t n) {
  out[0] = '\0';
  size_t used = 0;
  int count = 0;
  DIR *d = opendir(root);
  struct dirent *e;
  while (d && (e = readdir(d))) {
    const char *name = e->d_name;
    char path[4600];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", root, name);
    if (name[0] == '.' || stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    int known = 0, run = 0;
    for (size_t g = 0; g < sizeof golden_ops / sizeof golden_ops[0]; g++) {
      if (strcmp(golden_ops[g].folder, name)) continue;
      known = 1;
      for (int i = 0; i < 3 && golden_ops[g].ops[i]; i++) {
        const int t = table_of(golden_ops[g].ops[i]);
        run |= t < 0 || fresh[t];
      }
    }
    if (known && !run) continue;
    const int w = snprintf(out + used, n - used, " --only '%s'", name);
    if (w < 0 || used + (size_t)w >= n) break;
    used += (size_t)w;
    count++;
  }
  if (d) closedir(d);
  return count;
}

/* Lines of dsacl-bench --json: "name", "shape", "median_us". */
static int bench(const char *build, const mask *m, int quick, char rows[][96], double us[][8],
                 int col, int nrows) {
  set_env(m);
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "'%s/tools/dsacl-bench' --json%s 2>/dev/null", build,
           quick ? " --quick" : "");
  FILE *f = popen(cmd, "r");
  if (!f) return nrows;
  char line[4096];
  while (fgets(line, sizeof line, f)) {
    const char *n = strstr(line, "\"name\": \""), *s = strstr(line, "\"shape\": \""),
               *u = strstr(line, "\"median_us\": ");
    if (!n || !s || !u) continue;
    char key[96];
    int a = (int)(strchr(n + 9, '"') - (n + 9)), b = (int)(strchr(s + 10, '"') - (s + 10));
    snprintf(key, sizeof key, "%.*s %.*s", a, n + 9, b, s + 10);
    int r = 0;
    while (r < nrows && strcmp(rows[r], key)) r++;
    if (r == nrows) {
      if (nrows >= 256) continue;
      snprintf(rows[nrows++], 96, "%s", key);
      for (int k = 0; k < 8; k++) us[r][k] = -1;
    }
    us[r][col] = atof(u + 13);
  }
  pclose(f);
  return nrows;
}

/* A program left to the suite under mask m (amd_suite): every variant of
 * its operators' tables (FP8 and MXFP4 alike) that m's context does not
 * refuse is marked as the suite's to run there, not as never run. Which of
 * them the suite's shapes pick is not known here (a shape-dependent pick). */
static void mark_suite(const mask *m, const struct prog *p) {
  set_env(m);
  dsa_context_options o;
  dsa_context_options_default(&o);
  o.cache_dir = "off";
  dsa_context *c = NULL;
  if (dsa_context_create(&c, &o) != DSA_OK) return;
  for (int t = 0; t < dsa__num_variant_tables && t < MAXT; t++) {
    const dsa_variant_table *vt = dsa__variant_tables[t];
    int mine = 0;
    for (int i = 0; i < 8 && p->ops[i] && !mine; i++) {
      const size_t n = strlen(p->ops[i]);
      mine = !strncmp(vt->op, p->ops[i], n) && (vt->op[n] == '\0' || vt->op[n] == ' ');
    }
    for (int v = 0; mine && v < vt->n && v < MAXV; v++) {
      char buf[160];
      if (status[t][v] != ST_NONE || dsa__variant_refusal(c, &vt->v[v], NULL, buf, sizeof buf))
        continue;
      status[t][v] = ST_SUITE;
      snprintf(where[t][v], sizeof where[t][v], "%s", m->name);
    }
  }
  dsa_context_destroy(&c);
}

int main(int argc, char **argv) {
  const char *build = CHECKCL_BUILD_DIR, *golden = "../shared/golden";
  int masked_only = 0, do_bench = 0, quick = 0, list = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--build") && i + 1 < argc) build = argv[++i];
    else if (!strcmp(argv[i], "--golden") && i + 1 < argc) golden = argv[++i];
    else if (!strcmp(argv[i], "--masked-only")) masked_only = 1;
    else if (!strcmp(argv[i], "--bench")) do_bench = 1;
    else if (!strcmp(argv[i], "--quick")) quick = 1;
    else if (!strcmp(argv[i], "--list")) list = 1;
    else {
      fprintf(stderr, "usage: checkcl [--build DIR] [--golden DIR] [--masked-only] [--bench] "
                      "[--quick] [--list]\n");
      return 2;
    }
  }
  /* Masks from the device's capabilities. */
  dsa_context_options o;
  dsa_context_options_default(&o);
  o.cache_dir = "off";
  dsa_context *c = NULL;
  if (dsa_context_create(&c, &o) != DSA_OK) {
    fprintf(stderr, "SKIP: %s\n", dsa_last_error());
    return 77;
  }
  const unsigned has = dsa_context_caps(c);
  printf("checkcl on %s (capabilities:", dsa_context_device_name(c));
  for (unsigned b = 1; b & DSA_CAP_ALL; b <<= 1)
    if (has & b) printf(" %s", dsa_cap_name(b));
  printf(")\n");
  dsa_context_destroy(&c);

  mask all[16];
  int n = 0;
  memset(all, 0, sizeof all);
  snprintf(all[n++].name, 64, "all enabled");
  for (unsigned b = 1; b & DSA_CAP_ALL; b <<= 1)
    if (has & b) {
      all[n].disable = b;
      snprintf(all[n++].name, 64, "-%s", dsa_cap_name(b));
    }
  all[n].disable = DSA_CAP_ALL;
  snprintf(all[n++].name, 64, "none");
  all[n].local_mem = 32768;
  snprintf(all[n++].name, 64, "32 KiB local");
  all[n].emulate_amd = 1;
  snprintf(all[n++].name, 64, "amd emulated");

  mask kept[16];
  int nk = 0;
  for (int i = 0; i < n; i++) {
    if (!picks(&all[i])) continue; /* e.g. no AMD emulation on this device */
    int dup = 0;
    for (int k = 0; k < nk && !dup; k++)
      dup = !memcmp(kept[k].pick, all[i].pick, sizeof all[i].pick) &&
            kept[k].emulate_amd == all[i].emulate_amd;
    if (!dup) kept[nk++] = all[i];
  }

  if (list) {
    for (int k = 0; k < nk; k++) {
      printf("[%s]\n", kept[k].name);
      for (int t = 0; t < dsa__num_variant_tables; t++)
        printf("  %-34s %s\n", dsa__variant_tables[t]->op,
               kept[k].pick[t] >= 0 ? dsa__variant_tables[t]->v[kept[k].pick[t]].name : "-");
    }
    return 0;
  }

  int failed = 0;
  for (int k = masked_only ? 1 : 0; k < nk; k++) {
    printf("[%s]\n", kept[k].name);
    for (int p = 0; p < NPROGS; p++) {
      /* Run a program when one of its operators picks a variant that no
       * earlier mask picked (every program under the first mask run). */
      int fresh = k == (masked_only ? 1 : 0) && !masked_only;
      for (int i = 0; i < 8 && progs[p].ops[i] && !fresh; i++) {
        const int t = table_of(progs[p].ops[i]);
        if (t < 0) continue;
        int before = 0;
        for (int j = 0; j < k; j++) before |= kept[j].pick[t] == kept[k].pick[t];
        fresh = !before;
      }
      char extra[1024] = "";
      if (progs[p].golden && !progs[p].ops[0]) {
        /* dsacl-golden: the folders of the operators whose pick is new. */
        int fresh_t[MAXT] = {0}, any = 0;
        for (int t = 0; t < dsa__num_variant_tables && t < MAXT; t++) {
          int before = 0;
          for (int j = 0; j < k; j++) before |= kept[j].pick[t] == kept[k].pick[t];
          fresh_t[t] = !before;
          /* A local-memory limit moves shape-dependent picks (the plans of
           * top-k, the logits, the attention) that the device-level pick
           * does not show: those operators' goldens run under it too (as
           * checkcl-cases runs their cases). */
          for (int i = 0; kept[k].local_mem && i < dsa__variant_tables[t]->n; i++)
            fresh_t[t] |= dsa__variant_tables[t]->v[i].refuse != NULL;
          any |= fresh_t[t];
        }
        fresh = fresh || (any && golden_only(golden, fresh_t, extra, sizeof extra) > 0);
      }
      if (fresh && masked_only && kept[k].emulate_amd && progs[p].amd_suite) {
        /* The suite's own run under the same environment (amd_suite). */
        printf("  %-28s left to the suite's DSACL_EMULATE=amd test\n", progs[p].path);
        mark_suite(&kept[k], &progs[p]);
        continue;
      }
      if (fresh) failed |= run_prog(build, golden, &progs[p], &kept[k], extra, 0);
    }
  }

  printf("\nvariant                                   result\n");
  for (int t = 0; t < dsa__num_variant_tables && t < MAXT; t++) {
    const dsa_variant_table *vt = dsa__variant_tables[t];
    for (int v = 0; v < vt->n && v < MAXV; v++) {
      char what[200];
      if (status[t][v] == ST_OK)
        snprintf(what, sizeof what, "ok  [%s]", where[t][v]);
      else if (status[t][v] == ST_FAIL)
        snprintf(what, sizeof what, "FAIL [%s]", where[t][v]);
      else if (status[t][v] == ST_SUITE)
        snprintf(what, sizeof what, "allowed under [%s]: left to the suite's test there",
                 where[t][v]);
      else {
        int dev_pick = 0;
        for (int k = 0; k < nk; k++) dev_pick |= kept[k].pick[t] == v;
        if (masked_only && kept[0].pick[t] == v)
          snprintf(what, sizeof what, "run by the test suite [all enabled]");
        else if (dev_pick)
          snprintf(what, sizeof what, "picked for no tested shape");
        else {
          set_env(&all[0]);
          dsa_context *cc = NULL;
          char buf[160] = "";
          const char *why = "?";
          if (dsa_context_create(&cc, &o) == DSA_OK) {
            why = dsa__variant_refusal(cc, &vt->v[v], NULL, buf, sizeof buf);
            if (!why) why = "shape-dependent: no tested shape picks it";
            dsa_context_destroy(&cc);
          }
          snprintf(what, sizeof what, "not run here: %s", why);
        }
      }
      char name[96];
      snprintf(name, sizeof name, "%s: %s", vt->op, vt->v[v].name);
      printf("  %-40s %s\n", name, what);
    }
  }

  if (do_bench) {
    static char rows[256][96];
    static double us[256][8];
    int nrows = 0;
    const int ncol = nk < 8 ? nk : 8;
    for (int k = 0; k < ncol; k++) nrows = bench(build, &kept[k], quick, rows, us, k, nrows);
    printf("\nbench (median us, dsacl-bench%s)\n  %-52s", quick ? " --quick" : "", "row");
    for (int k = 0; k < ncol; k++) printf(" %14.14s", kept[k].name);
    printf("\n");
    for (int r = 0; r < nrows; r++) {
      printf("  %-52.52s", rows[r]);
      for (int k = 0; k < ncol; k++)
        if (us[r][k] >= 0)
          printf(" %14.1f", us[r][k]);
        else
          printf(" %14s", "-");
      printf("\n");
    }
  }
  printf("\n%s\n", failed ? "checkcl: FAIL" : "checkcl: all variants run here passed");
  return failed ? 1 : 0;
}
