/* Binary cache: SHA-256, keys, entry validation, directory resolution,
 * concurrent writers (unit part), then the runtime's use of the cache
 * (integration part, skipped without an OpenCL device). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "internal.h"
#include "sha256.h"

#define PATHN (sizeof(((dsa_diskcache *)0)->dir) + 256)

static char g_root[256]; /* every directory of this test lives under it */

/* ---- helpers ------------------------------------------------------------- */

static void *slurp(const char *path, size_t *n) {
  *n = 0;
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long sz = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *p = malloc(sz > 0 ? (size_t)sz : 1);
  if (p && fread(p, 1, (size_t)sz, f) != (size_t)sz) free(p), p = NULL;
  fclose(f);
  if (p) *n = (size_t)sz;
  return p;
}

static int spit(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  int ok = fwrite(p, 1, n, f) == n;
  return fclose(f) == 0 && ok ? 0 : -1;
}

static void rm_rf(const char *path) {
  struct stat st;
  if (lstat(path, &st) != 0) return;
  if (S_ISDIR(st.st_mode)) {
    chmod(path, 0700);
    DIR *d = opendir(path);
    struct dirent *e;
    while (d && (e = readdir(d))) {
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
      char sub[PATHN];
      snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
      rm_rf(sub);
    }
    if (d) closedir(d);
    rmdir(path);
  } else {
    unlink(path);
  }
}

/* Paths never come close to PATHN; a truncated one would only fail a check. */
static void join(char *out, const char *a, const char *b) {
  if (snprintf(out, PATHN, "%s%s", a, b) >= (int)PATHN) out[0] = '\0';
}

static void subdir(char *out, const char *name) {
  char rel[PATHN];
  join(rel, "/", name);
  join(out, g_root, rel);
}

/* Counts the directory's entries ending in suffix, and (if names) copies them. */
static int list_suffix(const char *dir, const char *suffix, char names[][256], int max) {
  DIR *d = opendir(dir);
  struct dirent *e;
  int n = 0;
  size_t ls = strlen(suffix);
  while (d && (e = readdir(d))) {
    size_t l = strlen(e->d_name);
    if (l < ls || strcmp(e->d_name + l - ls, suffix) != 0) continue;
    if (names && n < max) snprintf(names[n], 256, "%s", e->d_name);
    n++;
  }
  if (d) closedir(d);
  return n;
}

static int count_entries(const char *dir) { return list_suffix(dir, "", NULL, 0) - 2; }

static void hex(const unsigned char d[32], char out[65]) {
  for (int i = 0; i < 32; i++) sprintf(out + 2 * i, "%02x", d[i]);
}

/* ---- SHA-256 --------------------------------------------------------------- */

static void check_sha(const char *what, const void *p, size_t n, const char *want) {
  unsigned char d[32];
  char h[65];
  dsa__sha256(p, n, d);
  hex(d, h);
  CHECK(!strcmp(h, want), "sha256(%s) = %s, want %s", what, h, want);
}

static void test_sha256(void) {
  check_sha("abc", "abc", 3,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  check_sha("empty", "", 0,
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  check_sha("448-bit", "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56,
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  const char *m896 = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmno"
                     "ijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";
  check_sha("896-bit", m896, strlen(m896),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");

  const char *million = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";
  size_t n = 1000000;
  char *a = malloc(n);
  memset(a, 'a', n);
  check_sha("1M a, one call", a, n, million);
  /* Ragged chunk sizes cross the 64-byte block buffer at every offset. */
  dsa_sha256 s;
  unsigned char d[32];
  char h[65];
  dsa__sha256_init(&s);
  for (size_t off = 0, step = 1; off < n; off += step, step = step % 131 + 1)
    dsa__sha256_update(&s, a + off, off + step > n ? n - off : step);
  dsa__sha256_final(&s, d);
  hex(d, h);
  CHECK(!strcmp(h, million), "sha256(1M a, ragged chunks) = %s", h);
  free(a);
}

/* ---- keys -------------------------------------------------------------------- */

static void key_of(char out[DSA_CACHE_KEY_HEX], const char *a, const char *b, size_t n) {
  const char *parts[2] = {a, b};
  dsa__cache_key(out, parts, n);
}

static void test_keys(void) {
  char k1[DSA_CACHE_KEY_HEX], k2[DSA_CACHE_KEY_HEX], k3[DSA_CACHE_KEY_HEX];
  key_of(k1, "ab", "c", 2);
  key_of(k2, "a", "bc", 2);
  CHECK(strcmp(k1, k2) != 0, "(\"ab\",\"c\") and (\"a\",\"bc\") share key %s", k1);
  key_of(k3, "ab", "c", 2);
  CHECK(!strcmp(k1, k3), "key is not deterministic");
  CHECK(strlen(k1) == 64 && strspn(k1, "0123456789abcdef") == 64, "key %s not 64 hex", k1);
  key_of(k1, "a", "", 2);
  key_of(k2, "a", NULL, 1);
  CHECK(strcmp(k1, k2) != 0, "(\"a\",\"\") and (\"a\") share a key");
  key_of(k1, "a", NULL, 2);
  key_of(k2, "a", "", 2);
  CHECK(strcmp(k1, k2) != 0, "NULL part and \"\" share a key");
}

/* ---- store / load -------------------------------------------------------- */

static unsigned char *pattern(size_t n, uint64_t seed) {
  unsigned char *p = malloc(n);
  uint64_t s = seed | 1;
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(dsa_test_rand(&s) >> 56);
  return p;
}

static bool loads_as(const dsa_diskcache *dc, const char *key, const void *want, size_t n) {
  size_t len = 0;
  void *p = dsa__diskcache_load(dc, key, &len);
  bool ok = p && len == n && memcmp(p, want, n) == 0;
  free(p);
  return ok;
}

static bool misses(const dsa_diskcache *dc, const char *key) {
  size_t len = 123;
  void *p = dsa__diskcache_load(dc, key, &len);
  free(p);
  return p == NULL && len == 0;
}

static void test_roundtrip(void) {
  char dir[PATHN], path[PATHN];
  subdir(dir, "rt");
  dsa_diskcache dc;
  dsa__diskcache_init(&dc, dir, false, NULL, NULL, NULL);
  CHECK(dc.enabled && dc.dir[0], "cache in %s not enabled", dir);

  const char *key = "0123abcd";
  CHECK(misses(&dc, key), "load of a missing entry hit");
  unsigned char *a = pattern(10000, 1), *b = pattern(77, 2);
  CHECK(dsa__diskcache_store(&dc, key, a, 10000) == 0, "store failed");
  CHECK(loads_as(&dc, key, a, 10000), "round trip differs");
  CHECK(dsa__diskcache_store(&dc, key, b, 77) == 0, "overwrite failed");
  CHECK(loads_as(&dc, key, b, 77), "overwrite round trip differs");

  dsa__diskcache_path(&dc, key, path, sizeof path);
  struct stat st;
  CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600, "entry %s mode %o, want 600",
        path, (unsigned)(st.st_mode & 0777));
  size_t flen = 0;
  free(slurp(path, &flen));
  CHECK(flen == 8 + 4 + 4 + strlen(key) + 8 + 32 + 77, "entry size %zu", flen);
  CHECK(list_suffix(dc.dir, ".tmp", NULL, 0) == 0, "temp files left behind");

  /* Keys that could escape the directory are refused, not written. */
  CHECK(dsa__diskcache_store(&dc, "../evil", a, 10) != 0, "key with '/' stored");
  CHECK(dsa__diskcache_store(&dc, "", a, 10) != 0, "empty key stored");
  CHECK(misses(&dc, "../evil"), "key with '/' loaded");
  CHECK(dsa__diskcache_store(&dc, key, a, 0) != 0, "empty payload stored");

  /* A store that cannot rename into place removes its temp file. */
  dsa__diskcache_path(&dc, "blocked", path, sizeof path);
  mkdir(path, 0700);
  CHECK(dsa__diskcache_store(&dc, "blocked", a, 100) != 0, "store onto a directory succeeded");
  CHECK(misses(&dc, "blocked"), "a directory loaded as an entry");
  CHECK(list_suffix(dc.dir, ".tmp", NULL, 0) == 0, "failed store left its temp file");
  free(a);
  free(b);
}

static void test_corruption(void) {
  char dir[PATHN], path[PATHN], path2[PATHN];
  subdir(dir, "corrupt");
  dsa_diskcache dc;
  dsa__diskcache_init(&dc, dir, false, NULL, NULL, NULL);
  const char *key = "feedface", *key2 = "deadbeef";
  const size_t n = 3000, hl = 8 + 4 + 4 + 8 + 8 + 32; /* key length 8 */
  unsigned char *payload = pattern(n, 3);
  CHECK(dsa__diskcache_store(&dc, key, payload, n) == 0, "store failed");
  dsa__diskcache_path(&dc, key, path, sizeof path);
  size_t flen;
  unsigned char *good = slurp(path, &flen), *bad = malloc(flen + 1);
  CHECK(good && flen == hl + n, "entry size %zu, want %zu", flen, hl + n);
  if (!good || flen != hl + n) return;

  const size_t cuts[] = {0, 1, 7, 8, 12, 16, 20, 24, 31, 40, hl - 1, hl, hl + 1, hl + n / 2,
                         flen - 1};
  for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
    spit(path, good, cuts[i]);
    CHECK(misses(&dc, key), "entry truncated to %zu bytes loaded", cuts[i]);
  }

  struct {
    const char *what;
    size_t at;
    unsigned char x;
  } flips[] = {
      {"magic", 0, 0x01},
      {"format version", 8, 0x02},
      {"format version high byte", 11, 0x80},
      {"key length", 12, 0x01},
      {"key", 16 + 3, 0x01},
      {"payload length", 24, 0x01},
      {"payload length high byte", 31, 0x40},
      {"checksum first byte", 32, 0x01},
      {"checksum last byte", hl - 1, 0x80},
      {"payload first byte", hl, 0x01},
      {"payload middle byte", hl + n / 2, 0x10},
      {"payload last byte", flen - 1, 0x80},
  };
  for (size_t i = 0; i < sizeof flips / sizeof flips[0]; i++) {
    memcpy(bad, good, flen);
    bad[flips[i].at] ^= flips[i].x;
    spit(path, bad, flen);
    CHECK(misses(&dc, key), "entry with a flipped %s loaded", flips[i].what);
  }

  /* A different, fully valid format version. */
  memcpy(bad, good, flen);
  bad[8] = DSA_DISKCACHE_FORMAT + 1, bad[9] = bad[10] = bad[11] = 0;
  spit(path, bad, flen);
  CHECK(misses(&dc, key), "entry of format %d loaded", DSA_DISKCACHE_FORMAT + 1);

  /* Absurd lengths must be refused before any allocation. */
  memcpy(bad, good, flen);
  memset(bad + 24, 0xff, 8);
  spit(path, bad, flen);
  CHECK(misses(&dc, key), "entry with length 2^64-1 loaded");
  memcpy(bad, good, flen);
  bad[24 + 5] = 0x01; /* 1 TiB + n */
  spit(path, bad, flen);
  CHECK(misses(&dc, key), "entry with length 1 TiB loaded");

  memcpy(bad, good, flen);
  bad[flen] = 0;
  spit(path, bad, flen + 1);
  CHECK(misses(&dc, key), "entry with a trailing byte loaded");

  spit(path, good, flen);
  CHECK(loads_as(&dc, key, payload, n), "restored entry does not load");

  /* A valid entry of another key, renamed to this key's path. */
  CHECK(dsa__diskcache_store(&dc, key2, payload, n) == 0, "store of key2 failed");
  dsa__diskcache_path(&dc, key2, path2, sizeof path2);
  CHECK(rename(path2, path) == 0, "rename failed");
  CHECK(misses(&dc, key), "entry of another key loaded");

  /* After any miss a store repairs the entry. */
  CHECK(dsa__diskcache_store(&dc, key, payload, n) == 0, "re-store failed");
  CHECK(loads_as(&dc, key, payload, n), "re-stored entry does not load");
  free(good);
  free(bad);
  free(payload);
}

/* ---- directories ------------------------------------------------------------ */

static void test_unusable_dirs(void) {
  char file[PATHN], under[PATHN];
  subdir(file, "plainfile");
  spit(file, "x", 1);
  join(under, file, "/sub/dir");
  dsa_diskcache dc;
  dsa__diskcache_init(&dc, under, false, NULL, NULL, NULL);
  CHECK(!dc.enabled && dc.dir[0] == '\0', "cache under a regular file enabled: %s", dc.dir);
  unsigned char x[16] = {1};
  CHECK(dsa__diskcache_store(&dc, "abc", x, sizeof x) != 0, "store on a disabled cache ok");
  CHECK(misses(&dc, "abc"), "load on a disabled cache hit");
  char path[PATHN] = "junk";
  dsa__diskcache_path(&dc, "abc", path, sizeof path);
  CHECK(path[0] == '\0', "disabled cache has an entry path %s", path);

  dsa__diskcache_init(&dc, file, false, NULL, NULL, NULL);
  CHECK(!dc.enabled, "a regular file used as cache directory");

  if (geteuid() == 0) {
    fprintf(stderr, "note: running as root, read-only directory checks skipped\n");
    return;
  }
  char ro[PATHN], rosub[PATHN];
  subdir(ro, "readonly");
  mkdir(ro, 0700);
  chmod(ro, 0500);
  join(rosub, ro, "/sub");
  dsa__diskcache_init(&dc, rosub, false, NULL, NULL, NULL);
  CHECK(!dc.enabled, "cache below a 0500 directory enabled");
  dsa__diskcache_init(&dc, ro, false, NULL, NULL, NULL);
  CHECK(!dc.enabled, "0500 directory enabled as cache");
  CHECK(dsa__diskcache_store(&dc, "abc", x, sizeof x) != 0, "store into 0500 dir ok");
  chmod(ro, 0700);
}

/* Findings 5 and 6 (unit part): a FIFO or a symlink at an entry's path is a
 * miss without blocking; a directory writable by group or others, or owned
 * by another user, is not used. */
static void on_alarm(int sig) {
  (void)sig;
  static const char m[] = "FAIL: diskcache load blocked on a FIFO\n";
  if (write(2, m, sizeof m - 1) < 0) _exit(1);
  _exit(1);
}

static void test_hostile_entries(void) {
  char dir[PATHN], path[PATHN], other[PATHN];
  subdir(dir, "hostile");
  dsa_diskcache dc;
  dsa__diskcache_init(&dc, dir, false, NULL, NULL, NULL);
  CHECK(dc.enabled, "hostile: cache not enabled");
  const char *key = "0123abcd";
  unsigned char *payload = pattern(1000, 5);
  dsa__diskcache_path(&dc, key, path, sizeof path);
  CHECK(mkfifo(path, 0600) == 0, "mkfifo: %s", strerror(errno));
  signal(SIGALRM, on_alarm);
  alarm(10);
  CHECK(misses(&dc, key), "a FIFO entry loaded");
  alarm(0);
  CHECK(dsa__diskcache_store(&dc, key, payload, 1000) == 0, "store over a FIFO");
  CHECK(loads_as(&dc, key, payload, 1000), "entry replacing a FIFO does not load");
  /* A valid entry of the same key elsewhere, linked to from this path. */
  subdir(other, "hostile-other");
  dsa_diskcache dc2;
  dsa__diskcache_init(&dc2, other, false, NULL, NULL, NULL);
  CHECK(dsa__diskcache_store(&dc2, key, payload, 1000) == 0, "store in other");
  char opath[PATHN];
  dsa__diskcache_path(&dc2, key, opath, sizeof opath);
  unlink(path);
  CHECK(symlink(opath, path) == 0, "symlink: %s", strerror(errno));
  CHECK(misses(&dc, key), "an entry reached through a symlink loaded");
  free(payload);

  /* Directory modes and owner. */
  const mode_t bad[] = {0777, 0770, 0702, 0720};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    chmod(dir, bad[i]);
    dsa__diskcache_init(&dc, dir, false, NULL, NULL, NULL);
    CHECK(!dc.enabled && dc.dir[0] == '\0', "directory of mode %03o used", (unsigned)bad[i]);
  }
  chmod(dir, 0755);
  dsa__diskcache_init(&dc, dir, false, NULL, NULL, NULL);
  CHECK(dc.enabled, "directory of mode 755 refused");
  if (geteuid() == 0) {
    CHECK(chown(dir, 65534, 65534) == 0, "chown: %s", strerror(errno));
    dsa__diskcache_init(&dc, dir, false, NULL, NULL, NULL);
    CHECK(!dc.enabled, "directory owned by uid 65534 used");
    CHECK(chown(dir, 0, 0) == 0, "chown back");
  } else {
    fprintf(stderr, "note: not root, the other-owner directory check is skipped\n");
  }
}

static void test_dir_mode(void) {
  char dir[PATHN], p[PATHN];
  subdir(dir, "mode/a/b/c");
  mode_t old = umask(022);
  dsa_diskcache dc;
  dsa__diskcache_init(&dc, dir, false, NULL, NULL, NULL);
  umask(old);
  CHECK(dc.enabled, "nested cache directory not created");
  const char *levels[] = {"mode", "mode/a", "mode/a/b", "mode/a/b/c"};
  for (int i = 0; i < 4; i++) {
    struct stat st;
    subdir(p, levels[i]);
    CHECK(stat(p, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700,
          "%s mode %o, want 700", p, (unsigned)(st.st_mode & 0777));
  }
  /* An existing directory is used as it is. */
  subdir(p, "existing");
  mkdir(p, 0755);
  dsa__diskcache_init(&dc, p, false, NULL, NULL, NULL);
  CHECK(dc.enabled, "existing directory refused");
}

static const char *env_names[] = {"DSACL_CACHE_DIR", "XDG_CACHE_HOME", "HOME"};

static void set_env(const char *cache, const char *xdg, const char *home) {
  const char *v[] = {cache, xdg, home};
  for (int i = 0; i < 3; i++) v[i] ? setenv(env_names[i], v[i], 1) : unsetenv(env_names[i]);
}

static void expect_dir(const char *what, const char *opt, bool disable, const char *want) {
  dsa_diskcache dc;
  dsa__diskcache_init(&dc, opt, disable, NULL, NULL, NULL);
  if (!want) {
    CHECK(!dc.enabled && dc.dir[0] == '\0', "%s: enabled at %s", what, dc.dir);
    return;
  }
  char *real = realpath(want, NULL);
  CHECK(dc.enabled && real && !strcmp(dc.dir, real), "%s: dir \"%s\", want \"%s\"", what,
        dc.dir, real ? real : want);
  free(real);
}

static void test_env(void) {
  char saved[3][PATHN];
  bool had[3];
  for (int i = 0; i < 3; i++) {
    const char *v = getenv(env_names[i]);
    had[i] = v != NULL;
    snprintf(saved[i], PATHN, "%s", v ? v : "");
  }
  char home[PATHN], xdg[PATHN], env[PATHN], opt[PATHN], w[PATHN];
  subdir(home, "home");
  subdir(xdg, "xdg");
  subdir(env, "envdir");
  subdir(opt, "optdir");
  mkdir(home, 0700);

  set_env(NULL, NULL, home);
  join(w, home, "/.cache/dsacl");
  expect_dir("HOME", NULL, false, w);
  set_env(NULL, "relative/xdg", home);
  expect_dir("relative XDG_CACHE_HOME ignored", NULL, false, w);
  set_env("", "", home);
  expect_dir("empty variables ignored", "", false, w);

  set_env(NULL, xdg, home);
  join(w, xdg, "/dsacl");
  expect_dir("XDG_CACHE_HOME", NULL, false, w);

  set_env(env, xdg, home);
  expect_dir("DSACL_CACHE_DIR", NULL, false, env);
  expect_dir("option over DSACL_CACHE_DIR", opt, false, opt);
  expect_dir("option off", "off", false, NULL);
  expect_dir("disable flag", opt, true, NULL);
  set_env("off", xdg, home);
  expect_dir("DSACL_CACHE_DIR=off", NULL, false, NULL);
  expect_dir("option over DSACL_CACHE_DIR=off", opt, false, opt);
  set_env(NULL, NULL, NULL);
  expect_dir("nothing set", NULL, false, NULL);

  for (int i = 0; i < 3; i++)
    had[i] ? setenv(env_names[i], saved[i], 1) : unsetenv(env_names[i]);
}

/* ---- callbacks ---------------------------------------------------------------- */

#define MEM_MAX 32

typedef struct mem_store {
  int n;
  char key[MEM_MAX][128];
  unsigned char *data[MEM_MAX];
  size_t size[MEM_MAX];
  int loads, hits, stores, fail_store;
} mem_store;

static int mem_find(const mem_store *m, const char *key) {
  for (int i = 0; i < m->n; i++)
    if (!strcmp(m->key[i], key)) return i;
  return -1;
}

static void *mem_load(void *user, const char *key, size_t *size) {
  mem_store *m = user;
  int i = mem_find(m, key);
  m->loads++;
  if (i < 0) return NULL;
  m->hits++;
  void *p = malloc(m->size[i]);
  memcpy(p, m->data[i], m->size[i]);
  *size = m->size[i];
  return p;
}

static int mem_store_fn(void *user, const char *key, const void *data, size_t size) {
  mem_store *m = user;
  int i = mem_find(m, key);
  m->stores++;
  if (m->fail_store || (i < 0 && m->n == MEM_MAX)) return -1;
  if (i < 0) i = m->n++;
  free(m->data[i]);
  m->data[i] = malloc(size);
  memcpy(m->data[i], data, size);
  m->size[i] = size;
  snprintf(m->key[i], sizeof m->key[i], "%s", key);
  return 0;
}

static void mem_free(mem_store *m) {
  for (int i = 0; i < m->n; i++) free(m->data[i]);
}

static void test_callbacks(void) {
  char dir[PATHN];
  subdir(dir, "cbdir");
  mkdir(dir, 0700);
  mem_store m = {0};
  dsa_diskcache dc;
  dsa__diskcache_init(&dc, dir, false, mem_load, mem_store_fn, &m);
  CHECK(dc.enabled && dc.dir[0] == '\0', "callback cache: enabled %d dir \"%s\"", dc.enabled,
        dc.dir);
  unsigned char *a = pattern(500, 9);
  CHECK(misses(&dc, "k1") && m.loads == 1, "callback load not used for a miss");
  CHECK(dsa__diskcache_store(&dc, "k1", a, 500) == 0 && m.stores == 1, "callback store");
  CHECK(loads_as(&dc, "k1", a, 500) && m.loads == 2, "callback load not used for a hit");
  CHECK(count_entries(dir) == 0, "callback cache wrote into the directory");
  m.fail_store = 1;
  CHECK(dsa__diskcache_store(&dc, "k2", a, 500) != 0, "failed callback store reported ok");

  dsa__diskcache_init(&dc, "off", true, mem_load, mem_store_fn, &m);
  CHECK(!dc.enabled, "disable flag does not override callbacks");
  mem_free(&m);
  free(a);
}

/* ---- concurrent writers ----------------------------------------------------- */

/* A payload that proves its own integrity: 8 seed bytes, then the seed's stream. */
static unsigned char *self_payload(uint64_t seed, size_t *n) {
  *n = 8 + 256 + (size_t)(seed % 8192);
  unsigned char *p = pattern(*n, seed);
  memcpy(p, &seed, 8);
  return p;
}

static bool self_valid(const unsigned char *p, size_t n) {
  uint64_t seed;
  size_t want;
  if (n < 8) return false;
  memcpy(&seed, p, 8);
  unsigned char *q = self_payload(seed, &want);
  bool ok = want == n && memcmp(p + 8, q + 8, n - 8) == 0;
  free(q);
  return ok;
}

#define NCHILD 4
#define NSHARED 6
#define NOWN 3
#define ITERS 200

/* Entries are only ever replaced whole, so once this writer has stored a key,
 * every later load of it must hit, whatever the other writers do. */
static int child(const char *dir, int id) {
  dsa_diskcache dc;
  dsa__diskcache_init(&dc, dir, false, NULL, NULL, NULL);
  int errors = !dc.enabled;
  bool stored[NSHARED] = {false};
  for (int i = 0; i < ITERS && !errors; i++) {
    char key[64];
    int k = i / 2 % (i % 2 ? NSHARED : NOWN);
    if (i % 2) snprintf(key, sizeof key, "shared%d", k), stored[k] = true;
    else snprintf(key, sizeof key, "c%d-own%d", id, k);
    size_t n, len;
    unsigned char *p = self_payload((uint64_t)id << 32 | (uint64_t)i * 7919u, &n);
    errors += dsa__diskcache_store(&dc, key, p, n) != 0;
    free(p);
    k = i * 5 % NSHARED;
    snprintf(key, sizeof key, "shared%d", k);
    void *q = dsa__diskcache_load(&dc, key, &len);
    errors += q ? !self_valid(q, len) : stored[k];
    free(q);
  }
  return errors;
}

static void test_concurrent(void) {
  char dir[PATHN];
  subdir(dir, "concurrent");
  fflush(NULL);
  pid_t pids[NCHILD];
  for (int c = 0; c < NCHILD; c++) {
    pids[c] = fork();
    if (pids[c] == 0) _exit(child(dir, c) ? 1 : 0);
  }
  for (int c = 0; c < NCHILD; c++) {
    int st = -1;
    CHECK(pids[c] > 0 && waitpid(pids[c], &st, 0) == pids[c] && WIFEXITED(st) &&
              WEXITSTATUS(st) == 0,
          "writer %d failed (status %d)", c, st);
  }
  dsa_diskcache dc;
  dsa__diskcache_init(&dc, dir, false, NULL, NULL, NULL);
  int bad = 0, found = 0;
  for (int c = 0; c < NCHILD + 1; c++) {
    for (int k = 0; k < (c < NCHILD ? NOWN : NSHARED); k++) {
      char key[64];
      if (c < NCHILD) snprintf(key, sizeof key, "c%d-own%d", c, k);
      else snprintf(key, sizeof key, "shared%d", k);
      size_t len;
      unsigned char *q = dsa__diskcache_load(&dc, key, &len);
      found += q != NULL;
      bad += q && !self_valid(q, len);
      free(q);
    }
  }
  CHECK(found == NCHILD * NOWN + NSHARED && bad == 0, "after concurrent writers: %d of %d "
        "entries load, %d invalid", found, NCHILD * NOWN + NSHARED, bad);
  CHECK(list_suffix(dc.dir, ".tmp", NULL, 0) == 0, "temp files left by concurrent writers");
  CHECK(list_suffix(dc.dir, ".bin", NULL, 0) == count_entries(dc.dir),
        "stray files in the cache directory");
}

/* ---- one builder per key (dsa__diskcache_lock) ------------------------------ */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A child takes the key's lock, says so through the pipe, holds it for
 * hold_ms, stores an entry (store = 1) and exits without unlocking (the
 * kernel drops a dead process's locks). */
static pid_t lock_holder(const char *dir, const char *key, int hold_ms, int store, int *rd) {
  int pfd[2];
  if (pipe(pfd) != 0) return -1;
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    close(pfd[0]);
    dsa_diskcache dc;
    dsa__diskcache_init(&dc, dir, false, NULL, NULL, NULL);
    const int fd = dsa__diskcache_lock(&dc, key, 0, NULL);
    const char ok = fd >= 0 ? 'L' : 'x';
    if (write(pfd[1], &ok, 1) != 1) _exit(2);
    const struct timespec t = {hold_ms / 1000, (long)(hold_ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
    if (store && dsa__diskcache_store(&dc, key, "built by the holder", 19) != 0) _exit(3);
    _exit(fd >= 0 ? 0 : 1);
  }
  close(pfd[1]);
  *rd = pfd[0];
  return pid;
}

static int child_ok(pid_t pid) {
  int st = -1;
  return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static void test_build_lock(void) {
  char dir[PATHN];
  subdir(dir, "lock");
  dsa_diskcache dc;
  dsa__diskcache_init(&dc, dir, false, NULL, NULL, NULL);
  bool waited = true;
  int fd = dsa__diskcache_lock(&dc, "free", 0, &waited);
  CHECK(fd >= 0 && !waited, "an unheld lock: fd %d, waited %d", fd, waited);
  dsa__diskcache_unlock(fd);
  dsa__diskcache_unlock(-1); /* nothing */

  /* Held elsewhere: a waiter returns once the holder is gone, and finds the
   * holder's entry (stored before its lock dropped). */
  int rd = -1;
  char got = 0;
  pid_t pid = lock_holder(dir, "k1", 300, 1, &rd);
  CHECK(pid > 0 && read(rd, &got, 1) == 1 && got == 'L', "holder did not lock (%c)", got);
  const double t0 = now_s();
  fd = dsa__diskcache_lock(&dc, "k1", 60000, &waited);
  const double dt = now_s() - t0;
  size_t len = 0;
  void *e = dsa__diskcache_load(&dc, "k1", &len);
  CHECK(fd >= 0 && waited && dt > 0.1, "waiter: fd %d, waited %d after %.3f s", fd, waited, dt);
  CHECK(e && len == 19 && !memcmp(e, "built by the holder", 19),
        "the waiter does not see the holder's entry");
  free(e);
  dsa__diskcache_unlock(fd);
  CHECK(child_ok(pid), "holder failed");
  close(rd);

  /* The wait is bounded: a holder that keeps it past wait_ms is given up on. */
  pid = lock_holder(dir, "k2", 1500, 0, &rd);
  CHECK(pid > 0 && read(rd, &got, 1) == 1 && got == 'L', "holder did not lock (%c)", got);
  fd = dsa__diskcache_lock(&dc, "k2", 100, &waited);
  CHECK(fd < 0 && waited, "a lock held past the wait: fd %d, waited %d", fd, waited);
  dsa__diskcache_unlock(fd);
  CHECK(child_ok(pid), "holder failed");
  close(rd);

  /* No lock (and no file) without a directory: off, or callbacks. */
  dsa_diskcache off;
  dsa__diskcache_init(&off, "off", false, NULL, NULL, NULL);
  CHECK(dsa__diskcache_lock(&off, "k3", 0, NULL) < 0, "a lock with the cache off");
  CHECK(dsa__diskcache_lock(&dc, "../k3", 0, NULL) < 0, "a lock for a bad key");

  /* End to end: two processes make the same program into an empty cache at
   * once; one builds it, the other waits and loads it (without the lock both
   * would build). Forked before this process touches OpenCL. */
  char edir[PATHN];
  subdir(edir, "lock-e2e");
  pid_t kids[2];
  fflush(NULL);
  for (int i = 0; i < 2; i++) {
    kids[i] = fork();
    if (kids[i] == 0) {
      dsa_context_options o;
      dsa_context_options_default(&o);
      o.cache_dir = edir;
      dsa_context *c = NULL;
      const dsa_status st = dsa_context_create(&c, &o);
      if (st == DSA_ERR_NO_DEVICE) _exit(77);
      cl_program p;
      if (st != DSA_OK || dsa__get_program(c, DSA_PROG_INDEX_HELPERS, &p) != DSA_OK) _exit(2);
      const int loaded = c->from_cache[DSA_PROG_INDEX_HELPERS];
      dsa_context_destroy(&c);
      _exit(loaded ? 1 : 0);
    }
  }
  int built = 0, loaded = 0, other = 0, nodev = 0;
  for (int i = 0; i < 2; i++) {
    int st = -1;
    if (kids[i] <= 0 || waitpid(kids[i], &st, 0) != kids[i] || !WIFEXITED(st)) {
      other++;
      continue;
    }
    const int x = WEXITSTATUS(st);
    built += x == 0, loaded += x == 1, nodev += x == 77, other += x != 0 && x != 1 && x != 77;
  }
  if (nodev) {
    fprintf(stderr, "no OpenCL device: the two-process build skipped\n");
    return;
  }
  CHECK(built == 1 && loaded == 1 && other == 0,
        "two processes, one program: %d built, %d loaded, %d failed", built, loaded, other);
}

/* ---- integration: the runtime's use of the cache ----------------------------- */

#define MAXE 32

typedef struct snap {
  int n;
  char name[MAXE][256];
  struct stat st[MAXE];
} snap;

static void take_snap(const char *dir, snap *s) {
  s->n = list_suffix(dir, ".bin", s->name, MAXE);
  if (s->n > MAXE) s->n = MAXE;
  for (int i = 0; i < s->n; i++) {
    char p[PATHN];
    snprintf(p, sizeof p, "%s/%s", dir, s->name[i]);
    stat(p, &s->st[i]);
  }
}

/* The programs the integration part caches: three, not all of them. Every
 * program takes the same load / miss / store / evict path, and on PoCL each
 * store is the expensive step (CL_PROGRAM_BINARIES compiles every kernel of
 * the program: 230 CPU s for all eleven, against 10 s to build them from
 * source), so the cache semantics are proven on small ones: mla_cache and
 * mtp_norm, plus sparse_mla because test_forged's second operator lives
 * there (it is the largest, so it is the donor and is stored once). */
static const dsa_program_id cached_progs[] = {DSA_PROG_MLA_CACHE, DSA_PROG_MTP_NORM,
                                              DSA_PROG_SPARSE_MLA};

static dsa_status warm_ctx(dsa_context *c) {
  dsa_status st = DSA_OK;
  for (size_t i = 0; st == DSA_OK && i < sizeof cached_progs / sizeof cached_progs[0]; i++) {
    cl_program p;
    st = dsa__get_program(c, cached_progs[i], &p);
  }
  return st;
}

/* A context with these options, those programs made, and destroyed. */
static dsa_status warm(const dsa_context_options *o) {
  dsa_context *c = NULL;
  dsa_status st = dsa_context_create(&c, o);
  if (st == DSA_OK) st = warm_ctx(c);
  dsa_context_destroy(&c);
  return st;
}

/* The same with one (small) program built instead of all of them: the paths
 * below do not depend on which program, and every PoCL build costs seconds. */
static dsa_status warm_one(const dsa_context_options *o) {
  dsa_context *c = NULL;
  dsa_status st = dsa_context_create(&c, o);
  cl_program p;
  if (st == DSA_OK) st = dsa__get_program(c, DSA_PROG_INDEX_HELPERS, &p);
  dsa_context_destroy(&c);
  return st;
}

static void key_from_name(char *key, const char *name) {
  snprintf(key, 128, "%.*s", (int)(strlen(name) - 4), name);
}

static void test_integration(void) {
  char dir[PATHN];
  subdir(dir, "runtime");
  dsa_context_options o;
  dsa_context_options_default(&o);
  o.cache_dir = dir;

  dsa_context *c = NULL;
  dsa_status st = dsa_context_create(&c, &o);
  if (st == DSA_ERR_NO_DEVICE) {
    fprintf(stderr, "no OpenCL device: integration part skipped\n");
    return;
  }
  CHECK_OK(st);
  if (st != DSA_OK) return;
  char *real = realpath(dir, NULL);
  CHECK(real && !strcmp(dsa_context_cache_dir(c), real), "context cache dir \"%s\"",
        dsa_context_cache_dir(c));
  free(real);
  CHECK_OK(warm_ctx(c));
  dsa_context_destroy(&c);

  snap s1, s2;
  take_snap(dir, &s1);
  CHECK(s1.n > 0, "warmup wrote no *.bin entry into %s", dir);
  CHECK(list_suffix(dir, ".tmp", NULL, 0) == 0, "warmup left temp files");
  if (s1.n == 0) return;

  /* A warm start reads every entry and rewrites none (same inode and mtime). */
  CHECK_OK(warm(&o));
  take_snap(dir, &s2);
  bool same = s2.n == s1.n;
  for (int i = 0; same && i < s1.n; i++)
    same = !strcmp(s1.name[i], s2.name[i]) && s1.st[i].st_ino == s2.st[i].st_ino &&
           s1.st[i].st_mtim.tv_sec == s2.st[i].st_mtim.tv_sec &&
           s1.st[i].st_mtim.tv_nsec == s2.st[i].st_mtim.tv_nsec;
  CHECK(same, "second context rewrote cache entries");

  dsa_diskcache dc;
  dsa__diskcache_init(&dc, dir, false, NULL, NULL, NULL);
  unsigned char junk[4096];
  for (size_t i = 0; i < sizeof junk; i++) junk[i] = (unsigned char)(i * 131 + 7);

  /* Two entries suffice: every program takes the same path. The two
   * smallest binaries, whose programs rebuild fastest: each corruption
   * below rebuilds its program twice, seconds for a small one on PoCL and a
   * minute for the largest, more under sanitizers. */
  int pick[2] = {-1, -1};
  for (int i = 0; i < s1.n; i++) {
    if (pick[0] < 0 || s1.st[i].st_size < s1.st[pick[0]].st_size) {
      pick[1] = pick[0], pick[0] = i;
    } else if (pick[1] < 0 || s1.st[i].st_size < s1.st[pick[1]].st_size) {
      pick[1] = i;
    }
  }
  for (int pe = 0; pe < 2 && pick[pe] >= 0; pe++) {
    const int e = pick[pe];
    char key[128], path[PATHN];
    key_from_name(key, s1.name[e]);
    dsa__diskcache_path(&dc, key, path, sizeof path);
    size_t olen = 0;
    unsigned char *orig = dsa__diskcache_load(&dc, key, &olen);
    CHECK(orig != NULL, "entry %s does not load", key);
    if (!orig) continue;

    for (int how = 0; how < 3; how++) {
      static const char *what[] = {"truncated", "payload byte flipped", "driver-rejected"};
      size_t flen;
      unsigned char *f = slurp(path, &flen);
      if (how == 0) spit(path, f, flen / 2);
      if (how == 1) f[flen - olen / 2] ^= 0x5a, spit(path, f, flen);
      if (how == 2) dsa__diskcache_store(&dc, key, junk, sizeof junk);
      free(f);
      CHECK(how == 2 || misses(&dc, key), "%s entry still loads", what[how]);

      dsa_status ws = warm(&o);
      CHECK(ws == DSA_OK, "warmup over a %s entry: %s: %s", what[how], dsa_status_name(ws),
            dsa_last_error());
      size_t len = 0;
      unsigned char *p = dsa__diskcache_load(&dc, key, &len);
      CHECK(p && !(len == sizeof junk && !memcmp(p, junk, len)),
            "%s entry %s not rewritten valid", what[how], key);
      free(p);
      /* The rewrite must be a binary the driver accepts: the next warm-up
       * loads it instead of replacing it. (PoCL binaries of one source differ
       * between builds, even in size, so bytes are not compared.) */
      struct stat st1, st2;
      int ok1 = stat(path, &st1) == 0;
      CHECK(warm(&o) == DSA_OK, "warmup after rewrite");
      CHECK(ok1 && stat(path, &st2) == 0 && st1.st_ino == st2.st_ino &&
                st1.st_mtim.tv_sec == st2.st_mtim.tv_sec &&
                st1.st_mtim.tv_nsec == st2.st_mtim.tv_nsec,
            "%s entry %s: the rewritten binary was not reused", what[how], key);
    }
    free(orig);
  }
  CHECK(list_suffix(dir, ".tmp", NULL, 0) == 0, "rewrites left temp files");

  /* An unusable cache directory never fails the context. */
  char under[PATHN];
  subdir(under, "plainfile2");
  spit(under, "x", 1);
  strcat(under, "/cache");
  o.cache_dir = under;
  CHECK_OK(dsa_context_create(&c, &o));
  if (c) {
    CHECK(!strcmp(dsa_context_cache_dir(c), ""), "unusable dir reported as \"%s\"",
          dsa_context_cache_dir(c));
    cl_program p;
    CHECK_OK(dsa__get_program(c, DSA_PROG_INDEX_HELPERS, &p));
    dsa_context_destroy(&c);
  }
  if (geteuid() != 0) {
    char ro[PATHN];
    subdir(ro, "ro-runtime");
    mkdir(ro, 0500);
    o.cache_dir = ro;
    CHECK_OK(warm_one(&o));
    chmod(ro, 0700);
  }

  /* Disabled: no files anywhere. */
  char offdir[PATHN];
  subdir(offdir, "off-runtime");
  mkdir(offdir, 0700);
  setenv("DSACL_CACHE_DIR", offdir, 1);
  o.cache_dir = "off";
  CHECK_OK(warm_one(&o));
  CHECK(count_entries(offdir) == 0, "disabled cache wrote %d files", count_entries(offdir));
  o.cache_dir = NULL;
  o.flags |= DSA_CONTEXT_NO_BINARY_CACHE;
  CHECK_OK(dsa_context_create(&c, &o));
  CHECK(c && !strcmp(dsa_context_cache_dir(c), ""), "NO_BINARY_CACHE context has cache dir");
  dsa_context_destroy(&c);
  o.flags &= ~(unsigned)DSA_CONTEXT_NO_BINARY_CACHE;

  /* Callbacks: the first context stores, the second one loads and stores nothing. */
  mem_store m = {0};
  o.cache_dir = offdir;
  o.cache_load = mem_load;
  o.cache_store = mem_store_fn;
  o.cache_user = &m;
  CHECK_OK(warm_one(&o));
  CHECK(m.n == 1 && m.stores == 1 && m.hits == 0,
        "cold start with callbacks: %d keys, %d stores, %d hits, want 1, 1, 0", m.n, m.stores,
        m.hits);
  CHECK_OK(warm_one(&o));
  CHECK(m.stores == 1 && m.hits == 1, "warm start with callbacks: %d stores, %d hits, want 1, 1",
        m.stores, m.hits);
  CHECK(count_entries(offdir) == 0, "callback cache wrote into the directory");
  mem_free(&m);
  unsetenv("DSACL_CACHE_DIR");
}

/* Finding 6 (integration): every entry but one replaced by a forged entry
 * with the right key and checksum whose payload is another program's binary.
 * The driver accepts it; the operators must still work (the program that
 * lacks their kernel is evicted and rebuilt, and its entry rewritten). */
static void test_forged(void) {
  char dir[PATHN];
  subdir(dir, "runtime");
  snap s;
  take_snap(dir, &s);
  if (s.n < 2) return;
  dsa_diskcache dc;
  dsa__diskcache_init(&dc, dir, false, NULL, NULL, NULL);
  /* The donor is the largest entry (sparse_mla's): the forged ones are then
   * small programs, each rebuilt and stored in seconds, and one of them
   * (mla_cache) is what the first operator below needs. */
  int d = 0;
  for (int e = 1; e < s.n; e++)
    if (s.st[e].st_size > s.st[d].st_size) d = e;
  char key[128];
  key_from_name(key, s.name[d]);
  size_t dlen = 0;
  unsigned char *donor = dsa__diskcache_load(&dc, key, &dlen);
  CHECK(donor != NULL, "donor entry");
  if (!donor) return;
  for (int e = 0; e < s.n; e++) {
    if (e == d) continue;
    key_from_name(key, s.name[e]);
    CHECK(dsa__diskcache_store(&dc, key, donor, dlen) == 0, "forging %s", key);
  }
  dsa_context_options o;
  dsa_context_options_default(&o);
  o.cache_dir = dir;
  dsa_context *c = NULL;
  dsa_queue *q = NULL;
  CHECK_OK(dsa_context_create(&c, &o));
  if (!c) return;
  CHECK_OK(dsa_queue_create(&q, c, 0));
  cl_context cx = dsa_context_cl_context(c);
  cl_int err;
  cl_mem cache = clCreateBuffer(cx, CL_MEM_READ_WRITE, 4 * 584, NULL, &err);
  cl_mem idx = clCreateBuffer(cx, CL_MEM_READ_WRITE, 64, NULL, &err);
  cl_mem big = clCreateBuffer(cx, CL_MEM_READ_WRITE, 4 * 1024, NULL, &err);
  cl_mem out = clCreateBuffer(cx, CL_MEM_READ_WRITE, 4 * 1024, NULL, &err);
  unsigned char zero[4 * 1024] = {0};
  clEnqueueWriteBuffer(dsa_queue_cl(q), cache, CL_TRUE, 0, 4 * 584, zero, 0, NULL, NULL);
  clEnqueueWriteBuffer(dsa_queue_cl(q), idx, CL_TRUE, 0, 64, zero, 0, NULL, NULL);
  clEnqueueWriteBuffer(dsa_queue_cl(q), big, CL_TRUE, 0, sizeof zero, zero, 0, NULL, NULL);
  dsa_paged_cache pc = {.mem = cache, .offset = 0, .num_blocks = 4, .block_size = 1,
                        .block_stride = 584, .format = DSA_CACHE_MLA_FP8};
  dsa_tensor ti = dsa_tensor_make(idx, 0, DSA_I32, 1, (int64_t[]){1});
  dsa_tensor to = dsa_tensor_make(out, 0, DSA_BF16, 2, (int64_t[]){1, 512});
  CHECK_OK(dsa_mla_gather_slots(q, &ti, &pc, &to, NULL, NULL));
  dsa_tensor tq = dsa_tensor_make(big, 0, DSA_BF16, 3, (int64_t[]){1, 1, 512});
  dsa_tensor tkv = dsa_tensor_make(big, 0, DSA_BF16, 2, (int64_t[]){2, 512});
  dsa_tensor tix = dsa_tensor_make(idx, 0, DSA_I32, 2, (int64_t[]){1, 1});
  dsa_tensor tout = dsa_tensor_make(out, 0, DSA_BF16, 3, (int64_t[]){1, 1, 512});
  CHECK_OK(dsa_sparse_attn_bf16(q, &tq, &tkv, &tix, NULL, NULL, &tout, NULL, NULL, NULL));
  CHECK(clFinish(dsa_queue_cl(q)) == CL_SUCCESS, "finish");
  clReleaseMemObject(cache), clReleaseMemObject(idx), clReleaseMemObject(big);
  clReleaseMemObject(out);
  dsa_queue_destroy(&q);
  dsa_context_destroy(&c);
  int still = 0;
  for (int e = 0; e < s.n; e++) {
    if (e == d) continue;
    size_t len = 0;
    key_from_name(key, s.name[e]);
    unsigned char *p = dsa__diskcache_load(&dc, key, &len);
    still += p && len == dlen && !memcmp(p, donor, len);
    free(p);
  }
  CHECK(still < s.n - 1, "no forged entry was evicted and rewritten (%d of %d)", still, s.n - 1);
  free(donor);
}

int main(void) {
  snprintf(g_root, sizeof g_root, "%s/dsacl-diskcache-XXXXXX",
           getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(g_root)) {
    perror("mkdtemp");
    return 1;
  }
  test_sha256();
  test_keys();
  test_roundtrip();
  test_corruption();
  test_unusable_dirs();
  test_dir_mode();
  test_hostile_entries();
  test_env();
  test_callbacks();
  test_concurrent();
  test_build_lock();
  test_integration();
  test_forged();
  rm_rf(g_root);
  return dsa_test_summary();
}
