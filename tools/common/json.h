/* The one JSON string writer of the tests and tools (--json outputs). */
#ifndef DSACL_TOOLS_COMMON_JSON_H
#define DSACL_TOOLS_COMMON_JSON_H

#include <stdio.h>

/* Writes s to f as a JSON string: quoted, '"' and '\\' escaped, control
 * characters as \u00XX; other bytes as they are (UTF-8 passes through). */
void json_write_str(FILE *f, const char *s);

#endif
