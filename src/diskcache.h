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
/* Path of the entry for key (for tools and tests). */
void dsa__diskcache_path(const dsa_diskcache *dc, const char *key, char *buf, size_t n);

#endif
