/* On-disk (or caller-supplied) store of built program binaries.
 *
 * Entry file <dir>/<key>.bin:
 *   magic "DSACLBIN" (8) | format version u32 LE | key length u32 LE | key (hex)
 *   | payload length u64 LE | SHA-256 of payload (32) | payload
 * Written to a temp file in the same directory and renamed into place, so a
 * reader never sees half an entry and two writers never interleave. Any
 * mismatch (magic, version, key, length, checksum, short file) is a miss. */
#ifndef DSACL_DISKCACHE_H
#define DSACL_DISKCACHE_H

#include <stdbool.h>
#include <stddef.h>

#include "dsacl/dsacl.h"

#define DSA_DISKCACHE_FORMAT 1
#define DSA_CACHE_KEY_HEX 65 /* 64 hex digits + NUL */

typedef struct dsa_diskcache {
  bool enabled;
  char dir[4096];            /* "" when using callbacks or disabled */
  dsa_cache_load_fn load;    /* callbacks take precedence over dir */
  dsa_cache_store_fn store;
  void *user;
} dsa_diskcache;

/* Resolves the directory: opt_dir ("off" disables), else $DSACL_CACHE_DIR
 * ("off" disables), else $XDG_CACHE_HOME/dsacl, else $HOME/.cache/dsacl.
 * Creates it (and parents) with mode 0700. An unusable directory disables
 * the cache (logged, never an error). */
void dsa__diskcache_init(dsa_diskcache *dc, const char *opt_dir, bool disable,
                         dsa_cache_load_fn load, dsa_cache_store_fn store, void *user);

/* Key = hex SHA-256 over the parts, each length-prefixed so that
 * ("ab","c") and ("a","bc") differ. */
void dsa__cache_key(char out[DSA_CACHE_KEY_HEX], const char *const *parts, size_t nparts);

/* A validated payload (malloc'ed, caller frees) or NULL on any miss. */
void *dsa__diskcache_load(const dsa_diskcache *dc, const char *key, size_t *len);
/* 0 on success; failures are logged and otherwise ignored by callers. */
int dsa__diskcache_store(const dsa_diskcache *dc, const char *key, const void *data,
                         size_t len);
/* One builder at a time per key, across processes: an advisory POSIX record
 * lock on <dir>/.<key>.lock. A process that found no entry takes it before
 * compiling and drops it after storing, so the others (a serving fleet's
 * workers starting together, a test suite's parallel processes) wait and
 * then load its binary instead of compiling the same program beside it.
 * Waits at most wait_ms (then -1: build without it; a holder that died
 * released it with its process). Returns the lock's descriptor, or -1 (no
 * lock: callbacks, the cache off, any failure; never an error). */
int dsa__diskcache_lock(const dsa_diskcache *dc, const char *key, long wait_ms, bool *waited);
/* Releases a lock from dsa__diskcache_lock (fd -1: nothing). The lock file
 * stays: unlinking it could let a third process lock a new file while a
 * waiter holds the old one. */
void dsa__diskcache_unlock(int fd);
/* Path of the entry for key (for tools and tests). */
void dsa__diskcache_path(const dsa_diskcache *dc, const char *key, char *buf, size_t n);

#endif
