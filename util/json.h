/* JSON read strictly: cJSON lets through text after the value, a NUL byte
 * inside the text and an object holding a key twice (whose lookups would
 * silently take one); every file train_gpt reads as JSON is refused for
 * those, naming the file. */
#ifndef UTIL_JSON_H
#define UTIL_JSON_H

#include <stddef.h>

#include "util/err.h"

/* Parses len bytes of text as exactly one JSON value (whitespace around
 * it), with no key twice in any object. Errors name path and the
 * line/column or the key. cJSON_Delete the result. */
struct cJSON;
struct cJSON *json_parse_exact(const char *text, size_t len, const char *path, tg_err *e);

/* s as a JSON string, quotes included and every byte escaped as JSON
 * requires (paths may hold any byte); NULL when out of memory. free() it. */
char *json_quote(const char *s);

#endif
