#include "data/prepare_inputs.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int is_stdin(const char *path) { return !strcmp(path, "-"); }

static const char *display(const char *path) { return is_stdin(path) ? "stdin" : path; }

static char *str_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *str_printf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = tg_malloc((size_t)n + 1, "document name");
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

/* Opens an input for reading ("-": standard input), refusing directories
 * (which fopen would open, and reading would then fail obscurely). */
static FILE *open_input(const char *path, const char *what, tg_err *e) {
    if (is_stdin(path)) return stdin;
    FILE *f = fopen(path, "rb");
    if (!f) {
        tg_fail(e, "cannot open %s %s: %s", what, path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        tg_fail(e, "%s %s is a directory, not a text file", what, path);
        return NULL;
    }
    return f;
}

static void close_input(FILE *f) {
    if (f && f != stdin) fclose(f);
}

static int read_stream(FILE *f, const char *path, char **buf, size_t *len, tg_err *e) {
    size_t n = 0, cap = 1 << 20;
    char *b = tg_malloc(cap, path);
    int bad = 0;
    for (;;) {
        if (n == cap) {
            char *nb = realloc(b, cap *= 2);
            if (!nb) {
                bad = 1;
                break;
            }
            b = nb;
        }
        size_t got = fread(b + n, 1, cap - n, f);
        if (got == 0) break;
        n += got;
    }
    bad |= ferror(f);
    if (bad) {
        free(b);
        return tg_fail(e, "cannot read input %s (read error or out of memory)", display(path));
    }
    *buf = b;
    *len = n;
    return 0;
}

int prep_read_whole(const char *path, char **buf, size_t *len, tg_err *e) {
    FILE *f = open_input(path, "input", e);
    if (!f) return -1;
    int rc = read_stream(f, path, buf, len, e);
    close_input(f);
    return rc;
}

int prep_doc_read(prep_doc *d, tg_err *e) {
    if (d->text || !d->path) return 0;
    if (prep_read_whole(d->path, &d->text, &d->len, e))
        return d->origin ? tg_wrap(e, "%s", d->origin) : -1;
    return 0;
}

void prep_doc_free(prep_doc *d) {
    free(d->path);
    free(d->text);
    free(d->label);
    free(d->origin);
    *d = (prep_doc){0};
}

void prep_source_init(prep_source *s, const prep_input *inputs, int n_inputs, const char *jsonl_field) {
    *s = (prep_source){.inputs = inputs, .n_inputs = n_inputs, .jsonl_field = jsonl_field};
}

void prep_source_close(prep_source *s) {
    close_input(s->list);
    close_input(s->jsonl);
    free(s->jsonl_path);
    free(s->line);
    free(s->field.data);
    s->list = s->jsonl = NULL;
    s->jsonl_path = s->line = s->field.data = NULL;
}

/* The next line of f into s->line without its newline: its length, or -1 at
 * the end (or on a read error, which e then names). */
static long next_line(prep_source *s, FILE *f, const char *path, tg_err *e) {
    errno = 0;
    ssize_t n = getline(&s->line, &s->line_cap, f);
    if (n < 0) {
        if (ferror(f)) tg_fail(e, "cannot read %s: %s", display(path), strerror(errno ? errno : EIO));
        return -1;
    }
    if (n > 0 && s->line[n - 1] == '\n') s->line[--n] = 0;
    return (long)n;
}

static int blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r') return 0;
    return 1;
}

/* A document from the open JSON Lines file: 1, 0 at its end, or -1. */
static int next_jsonl_doc(prep_source *s, prep_doc *d, tg_err *e) {
    for (;;) {
        long n = next_line(s, s->jsonl, s->jsonl_path, e);
        if (n < 0) return ferror(s->jsonl) ? -1 : 0;
        s->jsonl_line++;
        if (blank(s->line, (size_t)n)) continue; /* e.g. a last line with only "\r" */
        const char *name = display(s->jsonl_path);
        int found;
        if (jsonl_string_field(s->line, (size_t)n, s->jsonl_field, &s->field, &found, e))
            return tg_wrap(e, "%s line %ld", name, s->jsonl_line);
        if (!found)
            return tg_fail(e, "%s line %ld: the object has no field \"%s\" (--jsonl-field)", name,
                           s->jsonl_line, s->jsonl_field);
        /* the document takes the buffer over; the next line starts a new one */
        d->text = s->field.data ? s->field.data : tg_malloc(1, "document");
        d->len = s->field.len;
        s->field = (jsonl_buf){0};
        d->label = str_printf("%s line %ld", name, s->jsonl_line);
        return 1;
    }
}

/* The file at path (from the command line, or line N of a list: origin) as
 * one document, or opened as JSON Lines: 1 with a document, 0 when it was
 * opened as JSON Lines, -1 on error. */
static int open_path(prep_source *s, const char *path, const char *origin, prep_doc *d, tg_err *e) {
    if (s->jsonl_field) {
        s->jsonl = open_input(path, "input", e);
        if (!s->jsonl) return origin ? tg_wrap(e, "%s", origin) : -1;
        s->jsonl_path = str_printf("%s", path);
        s->jsonl_line = 0;
        return 0;
    }
    d->label = str_printf("%s", display(path));
    d->origin = origin ? str_printf("%s", origin) : NULL;
    d->on_command_line = !origin;
    if (is_stdin(path)) return read_stream(stdin, path, &d->text, &d->len, e) ? -1 : 1;
    d->path = str_printf("%s", path);
    struct stat st;
    if (stat(path, &st) == 0 && st.st_size > 0) d->size_hint = (size_t)st.st_size;
    return 1;
}

/* A path from the open list: 1 with a document, 0 when it opened a JSON
 * Lines file or the list ended (s->list then NULL), -1 on error. */
static int next_listed(prep_source *s, prep_doc *d, tg_err *e) {
    long n;
    do {
        n = next_line(s, s->list, s->list_path, e);
        if (n < 0) {
            if (ferror(s->list)) return -1;
            close_input(s->list);
            s->list = NULL;
            return 0;
        }
        s->list_line++;
    } while (n == 0); /* empty lines are skipped */
    const char *name = display(s->list_path);
    if (strlen(s->line) != (size_t)n)
        return tg_fail(e, "%s line %ld: a NUL byte in a file name", name, s->list_line);
    if (is_stdin(s->line))
        return tg_fail(e, "%s line %ld: '-' (stdin) cannot be listed; name a file", name, s->list_line);
    char origin[4200];
    snprintf(origin, sizeof origin, "%s line %ld", name, s->list_line);
    return open_path(s, s->line, origin, d, e);
}

int prep_source_next(prep_source *s, prep_doc *d, tg_err *e) {
    *d = (prep_doc){0};
    for (;;) {
        int rc = 0;
        if (s->jsonl) {
            rc = next_jsonl_doc(s, d, e);
            if (rc == 0) {
                close_input(s->jsonl);
                s->jsonl = NULL;
                continue;
            }
        } else if (s->list)
            rc = next_listed(s, d, e);
        else if (s->next_input == s->n_inputs)
            return 0;
        else {
            const prep_input *in = &s->inputs[s->next_input++];
            if (in->kind == PREP_INPUT_FILE)
                rc = open_path(s, in->path, NULL, d, e);
            else if ((s->list = open_input(in->path, "file list", e))) {
                s->list_path = in->path;
                s->list_line = 0;
            } else
                rc = -1;
        }
        if (rc != 0) {
            if (rc < 0) prep_doc_free(d);
            return rc;
        }
    }
}
