#include "util/json.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Line and column of a byte offset, for JSON syntax errors. */
static void locate(const char *text, size_t off, int *line, int *col) {
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < off && text[i]; i++) {
        if (text[i] == '\n') { (*line)++; *col = 1; }
        else (*col)++;
    }
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Refuses an object holding a key twice (cJSON keeps both and lookups would
 * silently take one), at any depth; where names the enclosing key. */
static int check_unique_keys(const cJSON *node, const char *where, const char *path, tg_err *e) {
    int n = 0;
    for (const cJSON *m = node->child; m; m = m->next) n++;
    if (cJSON_IsObject(node) && n > 1) {
        const char **names = tg_malloc((size_t)n * sizeof *names, "JSON key check");
        int i = 0;
        for (const cJSON *m = node->child; m; m = m->next) names[i++] = m->string;
        qsort(names, (size_t)n, sizeof *names, by_name);
        int rc = 0;
        for (i = 1; rc == 0 && i < n; i++)
            if (strcmp(names[i - 1], names[i]) == 0)
                rc = tg_fail(e, "%s: key '%s%s%s' appears more than once", path, where, where[0] ? "." : "", names[i]);
        free(names);
        if (rc) return rc;
    }
    for (const cJSON *m = node->child; m; m = m->next) {
        char inner[256];
        if (cJSON_IsObject(node)) snprintf(inner, sizeof inner, "%s%s%s", where, where[0] ? "." : "", m->string);
        else snprintf(inner, sizeof inner, "%s", where);
        if ((m->child) && check_unique_keys(m, inner, path, e)) return -1;
    }
    return 0;
}

/* Whether text[0..off] opens more arrays and objects than cJSON's limit
 * before closing them (brackets inside strings do not count): cJSON
 * then fails at off, and "malformed" would mislead. */
static bool too_deep(const char *text, size_t off) {
    int depth = 0;
    bool in_string = false;
    for (size_t i = 0; i <= off && text[i]; i++) {
        const char c = text[i];
        if (in_string) {
            if (c == '\\' && text[i + 1]) i++;
            else if (c == '"') in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > CJSON_NESTING_LIMIT) return true;
        } else if (c == ']' || c == '}') {
            depth--;
        }
    }
    return false;
}

cJSON *json_parse_exact(const char *text, size_t len, const char *path, tg_err *e) {
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &end, 0);
    int line, col;
    if (!root) {
        const size_t off = end ? (size_t)(end - text) : 0;
        locate(text, off, &line, &col);
        if (too_deep(text, off))
            tg_fail(e, "%s: JSON nested deeper than %d levels (line %d, column %d)", path, CJSON_NESTING_LIMIT, line, col);
        else
            tg_fail(e, "%s: malformed JSON near line %d, column %d", path, line, col);
        return NULL;
    }
    /* cJSON stops at the value's end (or at a NUL byte): anything but
     * whitespace after it means the file is not the one value it claims. */
    while (end < text + len && (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r')) end++;
    if (end != text + len) {
        locate(text, (size_t)(end - text), &line, &col);
        tg_fail(e, "%s: unexpected %s after the JSON value at line %d, column %d", path,
                *end ? "text" : "NUL byte", line, col);
    } else if (check_unique_keys(root, "", path, e) == 0) {
        return root;
    }
    cJSON_Delete(root);
    return NULL;
}

char *json_quote(const char *s) {
    cJSON *str = cJSON_CreateString(s);
    char *text = str ? cJSON_PrintUnformatted(str) : NULL;
    cJSON_Delete(str);
    return text;
}
