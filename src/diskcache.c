/* Binary cache: directory resolution, keys, validated entry files. */
#include "diskcache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "sha256.h"

#define MAGIC "DSACLBIN"
#define MAX_KEY 128
/* Program binaries are megabytes; a larger length field is corruption and must
 * not turn into a huge allocation. */
#define MAX_PAYLOAD ((uint64_t)1 << 30)
#define HDR_FIXED (8 + 4 + 4 + 8 + 32)
/* The directory plus "/.<key>.<pid>.<random>.tmp". */
#define PATH_MAX_ (sizeof(((dsa_diskcache *)0)->dir) + MAX_KEY + 64)

static bool callbacks(const dsa_diskcache *dc) { return dc->load || dc->store; }

/* Keys become file names: only characters that cannot escape the directory. */
static bool key_ok(const char *key) {
  size_t n = key ? strlen(key) : 0;
  if (n == 0 || n > MAX_KEY) return false;
  for (size_t i = 0; i < n; i++) {
    char c = key[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          c == '-' || c == '_'))
      return false;
  }
  return true;
}

static void put_u32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put_u64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get_u32(const unsigned char *p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--) v = v << 8 | p[i];
  return v;
}
static uint64_t get_u64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

/* Existing components are fine even when mkdir reports something other than
 * EEXIST for them (read-only file systems answer EROFS). */
static int mkdir_p(const char *dir) {
  char p[sizeof(((dsa_diskcache *)0)->dir)];
  size_t n = strlen(dir);
  struct stat st;
  if (n == 0 || n >= sizeof p) return ENAMETOOLONG;
  memcpy(p, dir, n + 1);
  for (char *s = p + 1;; s++) {
    if (*s != '/' && *s != '\0') continue;
    char c = *s;
    *s = '\0';
    if (mkdir(p, 0700) != 0 && errno != EEXIST) {
      int err = errno;
      if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode)) return err;
    }
    *s = c;
    if (!c) break;
  }
  if (stat(p, &st) != 0) return errno;
  if (!S_ISDIR(st.st_mode)) return ENOTDIR;
  if (access(p, W_OK | X_OK) != 0) return errno;
  return 0;
}

void dsa__diskcache_init(dsa_diskcache *dc, const char *opt_dir, bool disable,
                         dsa_cache_load_fn load, dsa_cache_store_fn store, void *user) {
  memset(dc, 0, sizeof *dc);
  if (disable) return;
  if (load || store) {
    dc->load = load, dc->store = store, dc->user = user;
    dc->enabled = true;
    return;
  }
  const char *env = getenv("DSACL_CACHE_DIR");
  const char *src = opt_dir && *opt_dir ? opt_dir : env && *env ? env : NULL;
  int n;
  if (src) {
    if (strcmp(src, "off") == 0) return;
    n = snprintf(dc->dir, sizeof dc->dir, "%s", src);
  } else if ((env = getenv("XDG_CACHE_HOME")) && env[0] == '/') { /* XDG: relative is invalid */
    n = snprintf(dc->dir, sizeof dc->dir, "%s/dsacl", env);
  } else if ((env = getenv("HOME")) && *env) {
    n = snprintf(dc->dir, sizeof dc->dir, "%s/.cache/dsacl", env);
  } else {
    dsa__log(2, "binary cache disabled: neither DSACL_CACHE_DIR, XDG_CACHE_HOME nor HOME is set");
    return;
  }
  if (n < 0 || (size_t)n >= sizeof dc->dir) {
    dsa__log(2, "binary cache disabled: directory path too long");
    dc->dir[0] = '\0';
    return;
  }
  int err = mkdir_p(dc->dir);
  if (err) {
    dsa__log(2, "binary cache disabled: %s: %s", dc->dir, strerror(err));
    dc->dir[0] = '\0';
    return;
  }
  /* Binaries loaded from here run as this process's code on the device: a
   * directory someone else owns, or others may write to, is not used. */
  struct stat st;
  memset(&st, 0, sizeof st);
  if (stat(dc->dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
      (st.st_mode & (S_IWGRP | S_IWOTH))) {
    dsa__log(1, "binary cache disabled: %s is not a directory owned by uid %u and writable "
             "only by it (mode %03o, owner %u)", dc->dir, (unsigned)geteuid(),
             (unsigned)(st.st_mode & 0777), (unsigned)st.st_uid);
    dc->dir[0] = '\0';
    return;
  }
  /* An absolute path survives a later chdir() of the host process. */
  char *abs = realpath(dc->dir, NULL);
  if (abs && strlen(abs) < sizeof dc->dir) strcpy(dc->dir, abs);
  free(abs);
  dc->enabled = true;
}

void dsa__cache_key(char out[DSA_CACHE_KEY_HEX], const char *const *parts, size_t nparts) {
  static const char hex[] = "0123456789abcdef";
  dsa_sha256 s;
  unsigned char le[8], d[32];
  dsa__sha256_init(&s);
  for (size_t i = 0; i < nparts; i++) {
    /* NULL gets a length no string can have, so it differs from "". */
    uint64_t n = parts[i] ? strlen(parts[i]) : UINT64_MAX;
    put_u64(le, n);
    dsa__sha256_update(&s, le, sizeof le);
    if (parts[i]) dsa__sha256_update(&s, parts[i], (size_t)n);
  }
  dsa__sha256_final(&s, d);
  for (int i = 0; i < 32; i++) out[2 * i] = hex[d[i] >> 4], out[2 * i + 1] = hex[d[i] & 15];
  out[64] = '\0';
}

void dsa__diskcache_path(const dsa_diskcache *dc, const char *key, char *buf, size_t n) {
  if (n == 0) return;
  int r = dc && dc->dir[0] && key ? snprintf(buf, n, "%s/%s.bin", dc->dir, key) : -1;
  if (r < 0 || (size_t)r >= n) buf[0] = '\0';
}

static bool read_full(int fd, void *buf, size_t n) {
  unsigned char *p = buf;
  while (n) {
    ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r, n -= (size_t)r;
  }
  return true;
}

static bool write_full(int fd, const void *buf, size_t n) {
  const unsigned char *p = buf;
  while (n) {
    ssize_t r = write(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r, n -= (size_t)r;
  }
  return true;
}

static void *miss(int fd, void *buf, const char *path, const char *why) {
  dsa__log(3, "binary cache miss: %s: %s", path, why);
  if (fd >= 0) close(fd);
  free(buf);
  return NULL;
}

void *dsa__diskcache_load(const dsa_diskcache *dc, const char *key, size_t *len) {
  *len = 0;
  if (!dc || !dc->enabled || !key_ok(key)) return NULL;
  if (callbacks(dc)) {
    size_t n = 0;
    void *p = dc->load ? dc->load(dc->user, key, &n) : NULL;
    if (p && n == 0) free(p), p = NULL;
    if (p) *len = n;
    return p;
  }
  char path[PATH_MAX_];
  dsa__diskcache_path(dc, key, path, sizeof path);
  /* Untrusted directory content: no blocking on a FIFO or device, no
   * following a symlink; only a regular file is read. */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
  if (fd < 0) return errno == ENOENT ? NULL : miss(-1, NULL, path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return miss(fd, NULL, path, "not a file");
  size_t klen = strlen(key), hlen = HDR_FIXED + klen;
  unsigned char h[HDR_FIXED + MAX_KEY];
  if ((uint64_t)st.st_size < hlen || !read_full(fd, h, hlen))
    return miss(fd, NULL, path, "short header");
  if (memcmp(h, MAGIC, 8) != 0) return miss(fd, NULL, path, "bad magic");
  if (get_u32(h + 8) != DSA_DISKCACHE_FORMAT) return miss(fd, NULL, path, "other format");
  if (get_u32(h + 12) != klen || memcmp(h + 16, key, klen) != 0)
    return miss(fd, NULL, path, "other key");
  uint64_t n = get_u64(h + 16 + klen);
  if (n == 0 || n > MAX_PAYLOAD || n != (uint64_t)st.st_size - hlen)
    return miss(fd, NULL, path, "bad length");
  unsigned char *buf = malloc((size_t)n);
  if (!buf) return miss(fd, NULL, path, "out of memory");
  if (!read_full(fd, buf, (size_t)n)) return miss(fd, buf, path, "short payload");
  unsigned char d[32];
  dsa__sha256(buf, (size_t)n, d);
  if (memcmp(d, h + 24 + klen, 32) != 0) return miss(fd, buf, path, "checksum mismatch");
  close(fd);
  *len = (size_t)n;
  return buf;
}

int dsa__diskcache_lock(const dsa_diskcache *dc, const char *key, long wait_ms, bool *waited) {
  if (waited) *waited = false;
  if (!dc || !dc->enabled || callbacks(dc) || !key_ok(key) || !dc->dir[0]) return -1;
  char path[PATH_MAX_];
  snprintf(path, sizeof path, "%s/.%s.lock", dc->dir, key);
  const int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return -1;
  struct flock fl;
  memset(&fl, 0, sizeof fl);
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET; /* the whole file: start 0, length 0 */
  /* Polled, not F_SETLKW: a bounded wait needs no signal (a library must not
   * install handlers), and a compile takes seconds to minutes. */
  const struct timespec nap = {0, 20 * 1000 * 1000};
  for (long slept = 0;; slept += 20) {
    if (fcntl(fd, F_SETLK, &fl) == 0) return fd;
    if ((errno != EACCES && errno != EAGAIN) || slept >= wait_ms) break;
    if (waited) *waited = true;
    nanosleep(&nap, NULL);
  }
  close(fd);
  return -1;
}

void dsa__diskcache_unlock(int fd) {
  if (fd >= 0) close(fd); /* closing drops the process's record locks on the file */
}

static int store_fail(int fd, const char *tmp, const char *path, const char *what) {
  dsa__log(2, "binary cache store failed: %s: %s: %s", path, what, strerror(errno));
  if (fd >= 0) close(fd);
  if (tmp) unlink(tmp);
  return -1;
}

int dsa__diskcache_store(const dsa_diskcache *dc, const char *key, const void *data,
                         size_t len) {
  if (!dc || !dc->enabled || !key_ok(key) || !data || len == 0 || len > MAX_PAYLOAD)
    return -1;
  if (callbacks(dc)) return dc->store && dc->store(dc->user, key, data, len) == 0 ? 0 : -1;

  size_t klen = strlen(key), hlen = HDR_FIXED + klen;
  unsigned char h[HDR_FIXED + MAX_KEY];
  memcpy(h, MAGIC, 8);
  put_u32(h + 8, DSA_DISKCACHE_FORMAT);
  put_u32(h + 12, (uint32_t)klen);
  memcpy(h + 16, key, klen);
  put_u64(h + 16 + klen, len);
  dsa__sha256(data, len, h + 24 + klen);

  /* A private temp name per writer, renamed into place: readers see either the
   * old entry or the whole new one, and concurrent writers never share a file.
   * No fsync: a torn entry after a crash fails its checksum and is a miss. */
  static atomic_uint_fast64_t counter;
  char path[PATH_MAX_], tmp[PATH_MAX_];
  dsa__diskcache_path(dc, key, path, sizeof path);
  int fd = -1;
  for (int tries = 0; fd < 0 && tries < 8; tries++) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t rnd = ((uint64_t)ts.tv_sec << 30 ^ (uint64_t)ts.tv_nsec) +
                   atomic_fetch_add(&counter, 1) * 0x9e3779b97f4a7c15ull;
    snprintf(tmp, sizeof tmp, "%s/.%s.%ld.%016llx.tmp", dc->dir, key, (long)getpid(),
             (unsigned long long)rnd);
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) return store_fail(-1, NULL, path, "create temp file");
  if (!write_full(fd, h, hlen) || !write_full(fd, data, len))
    return store_fail(fd, tmp, path, "write");
  if (close(fd) != 0) return store_fail(-1, tmp, path, "close");
  if (rename(tmp, path) != 0) return store_fail(-1, tmp, path, "rename");
  return 0;
}
