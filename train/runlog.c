#include "train/runlog.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/fs.h"
#include "util/json.h"

/* Appends printf-formatted text to the line in memory. */
static void put(jsonl_line *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(jsonl_line *l, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(l->text + l->len, l->cap - l->len, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n >= l->cap - l->len) {
        while ((size_t)n >= l->cap - l->len) l->cap *= 2;
        l->text = tg_realloc(l->text, l->cap, "a log.jsonl line");
        va_start(ap, fmt);
        vsnprintf(l->text + l->len, l->cap - l->len, fmt, ap);
        va_end(ap);
    }
    l->len += (size_t)n;
}

static void key(jsonl_line *l, const char *k) { put(l, "%s\"%s\":", l->members++ ? "," : "", k); }

/* Every line starts with the wall-clock time it was written (Unix seconds,
 * milliseconds), so lines can be set beside other logs and throughput read
 * across restarts; "ms" stays the step's own measured time. */
jsonl_line jsonl_open(FILE *f) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    jsonl_line l = {f, tg_malloc(1024, "a log.jsonl line"), 0, 1024, 0};
    put(&l, "{");
    jsonl_num(&l, "time", "%.3f", (double)now.tv_sec + now.tv_nsec * 1e-9);
    return l;
}

void jsonl_num(jsonl_line *l, const char *k, const char *fmt, double v) {
    key(l, k);
    if (isfinite(v)) put(l, fmt, v);
    else put(l, "null");
}

void jsonl_int(jsonl_line *l, const char *k, long long v) {
    key(l, k);
    put(l, "%lld", v);
}

void jsonl_uint(jsonl_line *l, const char *k, unsigned long long v) {
    key(l, k);
    put(l, "%llu", v);
}

void jsonl_bool(jsonl_line *l, const char *k, bool v) {
    key(l, k);
    put(l, "%s", v ? "true" : "false");
}

void jsonl_str(jsonl_line *l, const char *k, const char *v) {
    key(l, k);
    char *text = json_quote(v);
    put(l, "%s", text ? text : "null");
    free(text);
}

void jsonl_raw(jsonl_line *l, const char *k, const char *json) {
    key(l, k);
    put(l, "%s", json);
}

/* Writes all of text to fd; -1 with errno set when the file takes no more. */
static int write_all(int fd, const char *text, size_t len) {
    while (len > 0) {
        const ssize_t n = write(fd, text, len);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -1;
        text += n;
        len -= (size_t)n;
    }
    return 0;
}

int jsonl_close(jsonl_line *l, tg_err *e) {
    put(l, "}\n");
    /* One writer (rank 0) appends: the end before the write is where the
     * line begins, and where a failed write is cut back to. */
    const int fd = fileno(l->f);
    const off_t start = lseek(fd, 0, SEEK_END);
    int rc = 0;
    if (start < 0) {
        rc = tg_fail(e, "cannot find the log's end: %s", strerror(errno));
    } else if (write_all(fd, l->text, l->len)) {
        const int err = errno;
        const bool cut = ftruncate(fd, start) == 0;
        rc = tg_fail(e, "cannot write a line: %s%s", strerror(err),
                     cut ? " (the partial line was removed)" : "; removing the partial line failed too");
    }
    free(l->text);
    l->text = NULL;
    return rc;
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
