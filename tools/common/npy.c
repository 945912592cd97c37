/* .npy and meta.txt readers (formats in ../shared/golden/README.md). */
#include "npy.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(char *err, size_t n, const char *fmt, ...) {
  if (err && n) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
  }
  return -1;
}

static const struct {
  const char *descr, *name;
  npy_dtype t;
  size_t size;
} dtypes[] = {{"|u1", "uint8", NPY_U1, 1},  {"<u2", "uint16", NPY_U2, 2},
              {"<i4", "int32", NPY_I4, 4},  {"<i8", "int64", NPY_I8, 8},
              {"<f4", "float32", NPY_F4, 4}};
#define NDTYPES (sizeof dtypes / sizeof dtypes[0])

const char *npy_dtype_name(npy_dtype t) {
  for (size_t i = 0; i < NDTYPES; i++)
    if (dtypes[i].t == t) return dtypes[i].name;
  return "?";
}

/* The quoted value of 'key' in the header dict, or NULL. */
static const char *dict_value(const char *hdr, const char *key) {
  char pat[32];
  snprintf(pat, sizeof pat, "'%s'", key);
  const char *p = strstr(hdr, pat);
  if (!p) return NULL;
  p += strlen(pat);
  while (*p == ' ') p++;
  if (*p++ != ':') return NULL;
  while (*p == ' ') p++;
  return p;
}

static int parse_header(const char *hdr, npy_array *a, char *err, size_t n) {
  const char *p = dict_value(hdr, "descr");
  if (!p || *p != '\'') return fail(err, n, "header has no 'descr'");
  size_t i;
  for (i = 0; i < NDTYPES; i++)
    if (!strncmp(p + 1, dtypes[i].descr, 3) && p[4] == '\'') break;
  if (i == NDTYPES) return fail(err, n, "unsupported descr %.8s", p);
  a->dtype = dtypes[i].t;
  a->elem_size = dtypes[i].size;

  p = dict_value(hdr, "fortran_order");
  if (!p || strncmp(p, "False", 5)) return fail(err, n, "fortran_order is not False");

  p = dict_value(hdr, "shape");
  if (!p || *p != '(') return fail(err, n, "header has no 'shape' tuple");
  p++;
  a->ndim = 0;
  a->count = 1;
  for (;;) {
    while (*p == ' ' || *p == ',') p++;
    if (*p == ')') break;
    if (*p < '0' || *p > '9') return fail(err, n, "bad shape near '%.10s'", p);
    if (a->ndim == NPY_MAX_DIMS) return fail(err, n, "more than %d dims", NPY_MAX_DIMS);
    char *end;
    errno = 0;
    long long d = strtoll(p, &end, 10);
    if (errno || d < 0) return fail(err, n, "bad dimension");
    if (d && a->count > SIZE_MAX / a->elem_size / (size_t)d)
      return fail(err, n, "shape too large");
    a->shape[a->ndim++] = d;
    a->count *= (size_t)d;
    p = end;
  }
  a->nbytes = a->count * a->elem_size;
  return 0;
}

int npy_load(const char *path, npy_array *a, char *err, size_t errlen) {
  memset(a, 0, sizeof *a);
  FILE *f = fopen(path, "rb");
  if (!f) return fail(err, errlen, "%s: %s", path, strerror(errno));
  int rc = npy_read(f, path, a, err, errlen);
  fclose(f);
  return rc;
}

int npy_read(FILE *f, const char *path, npy_array *a, char *err, size_t errlen) {
  memset(a, 0, sizeof *a);
  unsigned char pre[12];
  char *hdr = NULL;
  int rc = -1;
  if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6)) {
    fail(err, errlen, "%s: not a .npy file", path);
    goto out;
  }
  size_t hlen;
  if (pre[6] == 1) {
    hlen = pre[8] | (size_t)pre[9] << 8;
  } else if (pre[6] == 2 || pre[6] == 3) { /* same, with a 4-byte length */
    if (fread(pre + 10, 1, 2, f) != 2) {
      fail(err, errlen, "%s: truncated preamble", path);
      goto out;
    }
    hlen = pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
  } else {
    fail(err, errlen, "%s: unsupported .npy version %d.%d", path, pre[6], pre[7]);
    goto out;
  }
  if (hlen > (1u << 20) || !(hdr = malloc(hlen + 1))) {
    fail(err, errlen, "%s: bad header length %zu", path, hlen);
    goto out;
  }
  if (fread(hdr, 1, hlen, f) != hlen) {
    fail(err, errlen, "%s: truncated header", path);
    goto out;
  }
  hdr[hlen] = 0;
  char msg[128];
  if (parse_header(hdr, a, msg, sizeof msg)) {
    fail(err, errlen, "%s: %s", path, msg);
    goto out;
  }
  /* The declared size must be what the file holds before anything that
   * size is allocated. */
  long pos = ftell(f), end = -1;
  if (pos >= 0 && fseek(f, 0, SEEK_END) == 0) end = ftell(f);
  if (end < 0 || fseek(f, pos, SEEK_SET) != 0) {
    fail(err, errlen, "%s: cannot determine the file size", path);
    goto out;
  }
  if ((uint64_t)(end - pos) != (uint64_t)a->nbytes) {
    fail(err, errlen, "%s: truncated or oversized data: the header declares %zu bytes, "
         "the file holds %ld", path, a->nbytes, end - pos);
    goto out;
  }
  if (!(a->data = malloc(a->nbytes ? a->nbytes : 1))) {
    fail(err, errlen, "%s: out of memory (%zu bytes)", path, a->nbytes);
    goto out;
  }
  if (fread(a->data, 1, a->nbytes, f) != a->nbytes) {
    fail(err, errlen, "%s: truncated data (want %zu bytes)", path, a->nbytes);
    goto out;
  }
  if (fgetc(f) != EOF) {
    fail(err, errlen, "%s: trailing bytes after the data", path);
    goto out;
  }
  rc = 0;
out:
  free(hdr);
  if (rc) npy_free(a);
  return rc;
}

void npy_free(npy_array *a) {
  free(a->data);
  memset(a, 0, sizeof *a);
}

static char *trim(char *s) {
  while (*s == ' ' || *s == '\t') s++;
  char *e = s + strlen(s);
  while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r' || e[-1] == '\n')) *--e = 0;
  return s;
}

int npy_meta_load(const char *path, npy_meta *m, char *err, size_t errlen) {
  memset(m, 0, sizeof *m);
  FILE *f = fopen(path, "r");
  if (!f) return fail(err, errlen, "%s: %s", path, strerror(errno));
  char line[4096];
  int lineno = 0, rc = 0;
  while (fgets(line, sizeof line, f)) {
    lineno++;
    char *s = trim(line);
    if (!*s || *s == '#') continue;
    char *eq = strchr(s, '=');
    if (!eq) {
      rc = fail(err, errlen, "%s:%d: not a key=value line", path, lineno);
      break;
    }
    *eq = 0;
    char **k = realloc(m->key, (size_t)(m->n + 1) * sizeof *k);
    if (k) m->key = k;
    char **v = realloc(m->val, (size_t)(m->n + 1) * sizeof *v);
    if (v) m->val = v;
    if (!k || !v || !(m->key[m->n] = strdup(trim(s)))) {
      rc = fail(err, errlen, "%s: out of memory", path);
      break;
    }
    if (!(m->val[m->n] = strdup(trim(eq + 1)))) {
      free(m->key[m->n]);
      rc = fail(err, errlen, "%s: out of memory", path);
      break;
    }
    m->n++;
  }
  fclose(f);
  if (rc) npy_meta_free(m);
  return rc;
}

void npy_meta_free(npy_meta *m) {
  for (int i = 0; i < m->n; i++) {
    free(m->key[i]);
    free(m->val[i]);
  }
  free(m->key);
  free(m->val);
  memset(m, 0, sizeof *m);
}

const char *npy_meta_get(const npy_meta *m, const char *key) {
  for (int i = 0; i < m->n; i++)
    if (!strcmp(m->key[i], key)) return m->val[i];
  return NULL;
}

int npy_meta_i64(const npy_meta *m, const char *key, int64_t *v) {
  const char *s = npy_meta_get(m, key);
  if (!s || !*s) return -1;
  char *end;
  errno = 0;
  long long x = strtoll(s, &end, 10);
  if (errno || *end) return -1;
  *v = x;
  return 0;
}

int npy_meta_f64(const npy_meta *m, const char *key, double *v) {
  const char *s = npy_meta_get(m, key);
  if (!s || !*s) return -1;
  char *end;
  errno = 0;
  double x = strtod(s, &end);
  if (errno == ERANGE || *end) return -1;
  *v = x;
  return 0;
}
