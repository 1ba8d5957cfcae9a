#include "train/runlog.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/fs.h"

static void key(jsonl_line *l, const char *k) { fprintf(l->f, "%s\"%s\":", l->members++ ? "," : "", k); }

/* Every line starts with the wall-clock time it was written (Unix seconds,
 * milliseconds), so lines can be set beside other logs and throughput read
 * across restarts; "ms" stays the step's own measured time. */
jsonl_line jsonl_open(FILE *f) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    fputc('{', f);
    jsonl_line l = {f, 0};
    jsonl_num(&l, "time", "%.3f", (double)now.tv_sec + now.tv_nsec * 1e-9);
    return l;
}

void jsonl_num(jsonl_line *l, const char *k, const char *fmt, double v) {
    key(l, k);
    if (isfinite(v)) fprintf(l->f, fmt, v);
    else fputs("null", l->f);
}

void jsonl_int(jsonl_line *l, const char *k, long long v) {
    key(l, k);
    fprintf(l->f, "%lld", v);
}

void jsonl_uint(jsonl_line *l, const char *k, unsigned long long v) {
    key(l, k);
    fprintf(l->f, "%llu", v);
}

void jsonl_bool(jsonl_line *l, const char *k, bool v) {
    key(l, k);
    fputs(v ? "true" : "false", l->f);
}

void jsonl_str(jsonl_line *l, const char *k, const char *v) {
    key(l, k);
    cJSON *s = cJSON_CreateString(v);
    char *text = s ? cJSON_PrintUnformatted(s) : NULL;
    fputs(text ? text : "null", l->f);
    free(text);
    cJSON_Delete(s);
}

void jsonl_raw(jsonl_line *l, const char *k, const char *json) {
    key(l, k);
    fputs(json, l->f);
}

void jsonl_close(jsonl_line *l) {
    fputs("}\n", l->f);
    fflush(l->f);
}

/* Whether a log line belongs to the run up to `step`: a complete JSON
 * object whose "step" (if any) is not beyond it. */
static bool keep_line(const char *line, int step) {
    cJSON *j = cJSON_Parse(line);
    if (!j) return false; /* the torn last line of a killed run */
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "step");
    const bool keep = cJSON_IsObject(j) && (!cJSON_IsNumber(s) || s->valuedouble <= step);
    cJSON_Delete(j);
    return keep;
}

static char *read_all(FILE *f, size_t *len) {
    size_t cap = 1 << 16, n = 0, got;
    char *buf = tg_malloc(cap, "log.jsonl");
    while ((got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (cap - n - 1 == 0) {
            char *grown = realloc(buf, cap *= 2);
            if (!grown) { free(buf); return NULL; }
            buf = grown;
        }
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

int runlog_truncate_after(const char *path, int step, tg_err *e) {
    FILE *f = fopen(path, "rb");
    if (!f) return errno == ENOENT ? 0 : tg_fail(e, "%s: cannot read the log: %s", path, strerror(errno));
    size_t len = 0;
    char *text = read_all(f, &len);
    fclose(f);
    if (!text) return tg_fail(e, "%s: out of memory reading the log", path);
    char *kept = tg_malloc(len + 2, "log.jsonl");
    size_t n = 0;
    for (char *line = text, *next; line < text + len; line = next) {
        char *nl = strchr(line, '\n');
        next = nl ? nl + 1 : text + len;
        if (!nl) break; /* no newline: the line was cut off mid-write */
        *nl = '\0';
        if (!keep_line(line, step)) continue;
        memcpy(kept + n, line, (size_t)(nl - line));
        n += (size_t)(nl - line);
        kept[n++] = '\n';
    }
    int rc = n == len ? 0 : fs_write_atomic(path, kept, n, e);
    free(kept);
    free(text);
    return rc;
}
