/* Minimal readers for the golden vectors: NumPy .npy format 1.0 (C order,
 * little-endian |u1 <u2 <i4 <i8 <f4, up to 4 dims) and meta.txt key=value
 * files. Errors are reported as text in err; nothing aborts. */
#ifndef DSACL_TOOLS_NPY_H
#define DSACL_TOOLS_NPY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum npy_dtype { NPY_U1, NPY_U2, NPY_I4, NPY_I8, NPY_F4 } npy_dtype;

#define NPY_MAX_DIMS 4
typedef struct npy_array {
  npy_dtype dtype;
  size_t elem_size;
  int ndim; /* 0 for a scalar */
  int64_t shape[NPY_MAX_DIMS];
  size_t count;  /* elements */
  size_t nbytes; /* count * elem_size */
  void *data;    /* malloc'ed, at least 1 byte */
} npy_array;

/* 0 on success; -1 with a message in err (which may be NULL). */
int npy_load(const char *path, npy_array *a, char *err, size_t errlen);
/* The same from an open stream (seekable: its size is checked against the
 * header before the data is allocated); path only names it in messages. */
int npy_read(FILE *f, const char *path, npy_array *a, char *err, size_t errlen);
void npy_free(npy_array *a);
const char *npy_dtype_name(npy_dtype t); /* "uint8", "uint16", ... as in meta.txt */

typedef struct npy_meta {
  int n;
  char **key, **val;
} npy_meta;

int npy_meta_load(const char *path, npy_meta *m, char *err, size_t errlen);
void npy_meta_free(npy_meta *m);
const char *npy_meta_get(const npy_meta *m, const char *key); /* NULL if absent */
/* 0 and *v when the key exists and holds a whole decimal integer. */
int npy_meta_i64(const npy_meta *m, const char *key, int64_t *v);
int npy_meta_f64(const npy_meta *m, const char *key, double *v);

#endif
