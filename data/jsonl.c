#include "data/jsonl.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Nesting deeper than this is refused rather than risking the stack. */
#define JSONL_MAX_DEPTH 512

typedef struct jparser {
    const unsigned char *s;
    size_t len, pos;
} jparser;

static int fail_at(const jparser *p, tg_err *e, const char *what) {
    if (p->pos >= p->len) return tg_fail(e, "column %zu: %s (the line ends first)", p->pos + 1, what);
    unsigned char c = p->s[p->pos];
    if (c >= 0x20 && c < 0x7f) return tg_fail(e, "column %zu: %s, found '%c'", p->pos + 1, what, c);
    return tg_fail(e, "column %zu: %s, found byte 0x%02x", p->pos + 1, what, c);
}

static void skip_space(jparser *p) {
    while (p->pos < p->len && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' || p->s[p->pos] == '\r' ||
                               p->s[p->pos] == '\n'))
        p->pos++;
}

static void buf_put(jsonl_buf *b, const void *src, size_t n) {
    if (!b) return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n) cap *= 2;
        char *d = tg_malloc(cap, "JSON string"); /* exits with a message when out of memory */
        if (b->len) memcpy(d, b->data, b->len);
        free(b->data);
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, src, n);
    b->len += n;
}

static int hex4(jparser *p, uint32_t *v, tg_err *e) {
    *v = 0;
    for (int k = 0; k < 4; k++, p->pos++) {
        int c = p->pos < p->len ? p->s[p->pos] : -1, d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else return fail_at(p, e, "expected 4 hex digits after \\u");
        *v = *v << 4 | (uint32_t)d;
    }
    return 0;
}

static void put_utf8(jsonl_buf *b, uint32_t cp) {
    unsigned char u[4];
    size_t n;
    if (cp < 0x80) u[0] = (unsigned char)cp, n = 1;
    else if (cp < 0x800) u[0] = (unsigned char)(0xc0 | cp >> 6), n = 2;
    else if (cp < 0x10000) u[0] = (unsigned char)(0xe0 | cp >> 12), n = 3;
    else u[0] = (unsigned char)(0xf0 | cp >> 18), n = 4;
    for (size_t k = 1; k < n; k++) u[k] = (unsigned char)(0x80 | ((cp >> (6 * (n - 1 - k))) & 0x3f));
    buf_put(b, u, n);
}

/* \uXXXX at p->pos (after the backslash and 'u'), with a surrogate pair
 * taken together; a lone surrogate is not text and is refused. */
static int unicode_escape(jparser *p, jsonl_buf *b, tg_err *e) {
    size_t start = p->pos - 2;
    uint32_t cp, lo;
    if (hex4(p, &cp, e)) return -1;
    if (cp >= 0xdc00 && cp <= 0xdfff) goto lone;
    if (cp >= 0xd800 && cp <= 0xdbff) {
        if (p->pos + 2 > p->len || p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u') goto lone;
        p->pos += 2;
        if (hex4(p, &lo, e)) return -1;
        if (lo < 0xdc00 || lo > 0xdfff) goto lone;
        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
    }
    put_utf8(b, cp);
    return 0;
lone:
    return tg_fail(e, "column %zu: \\u%.4s is a lone UTF-16 surrogate, not a character", start + 1,
                   (const char *)p->s + start + 2);
}

/* A string at p->pos (its opening quote), decoded into b (NULL: checked only). */
static int parse_string(jparser *p, jsonl_buf *b, tg_err *e) {
    if (b) b->len = 0;
    p->pos++;
    for (;;) {
        size_t run = p->pos;
        while (p->pos < p->len && p->s[p->pos] != '"' && p->s[p->pos] != '\\' && p->s[p->pos] >= 0x20)
            p->pos++;
        buf_put(b, p->s + run, p->pos - run);
        if (p->pos >= p->len) return fail_at(p, e, "unterminated string");
        unsigned char c = p->s[p->pos++];
        if (c == '"') return 0;
        if (c < 0x20) {
            p->pos--;
            return fail_at(p, e, "control character inside a string (write it as a \\u escape)");
        }
        if (p->pos >= p->len) return fail_at(p, e, "unterminated escape");
        static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
        const char *k = memchr(from, p->s[p->pos], sizeof from - 1);
        p->pos++;
        if (k) buf_put(b, &to[k - from], 1);
        else if (p->s[p->pos - 1] == 'u') {
            if (unicode_escape(p, b, e)) return -1;
        } else {
            p->pos--;
            return fail_at(p, e, "invalid escape in a string");
        }
    }
}

/* One or more digits, else the error `what`. */
static int digits(jparser *p, const char *what, tg_err *e) {
    if (p->pos >= p->len || p->s[p->pos] < '0' || p->s[p->pos] > '9') return fail_at(p, e, what);
    while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') p->pos++;
    return 0;
}

static int parse_number(jparser *p, tg_err *e) {
    if (p->s[p->pos] == '-') p->pos++;
    if (p->pos < p->len && p->s[p->pos] == '0')
        p->pos++;
    else if (digits(p, "expected a digit", e))
        return -1;
    if (p->pos < p->len && p->s[p->pos] == '.') {
        p->pos++;
        if (digits(p, "expected a digit after '.'", e)) return -1;
    }
    if (p->pos < p->len && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
        p->pos++;
        if (p->pos < p->len && (p->s[p->pos] == '+' || p->s[p->pos] == '-')) p->pos++;
        if (digits(p, "expected a digit in the exponent", e)) return -1;
    }
    return 0;
}

static int parse_value(jparser *p, int depth, tg_err *e);

/* An object or array at p->pos; its values are checked and dropped. */
static int parse_container(jparser *p, int depth, tg_err *e) {
    if (depth >= JSONL_MAX_DEPTH) return fail_at(p, e, "nesting deeper than 512 levels");
    int object = p->s[p->pos] == '{';
    char close = object ? '}' : ']';
    p->pos++;
    skip_space(p);
    if (p->pos < p->len && p->s[p->pos] == close) return p->pos++, 0;
    for (;;) {
        if (object) {
            if (p->pos >= p->len || p->s[p->pos] != '"') return fail_at(p, e, "expected a key string");
            if (parse_string(p, NULL, e)) return -1;
            skip_space(p);
            if (p->pos >= p->len || p->s[p->pos] != ':') return fail_at(p, e, "expected ':'");
            p->pos++;
        }
        if (parse_value(p, depth + 1, e)) return -1;
        skip_space(p);
        if (p->pos < p->len && p->s[p->pos] == ',') {
            p->pos++;
            skip_space(p);
        } else if (p->pos < p->len && p->s[p->pos] == close)
            return p->pos++, 0;
        else
            return fail_at(p, e, object ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

/* Any value (leading space skipped), checked and dropped. */
static int parse_value(jparser *p, int depth, tg_err *e) {
    skip_space(p);
    if (p->pos >= p->len) return fail_at(p, e, "expected a value");
    unsigned char c = p->s[p->pos];
    if (c == '{' || c == '[') return parse_container(p, depth, e);
    if (c == '"') return parse_string(p, NULL, e);
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number(p, e);
    static const char *const words[] = {"true", "false", "null"};
    for (int k = 0; k < 3; k++) {
        size_t n = strlen(words[k]);
        if (p->len - p->pos >= n && !memcmp(p->s + p->pos, words[k], n)) return p->pos += n, 0;
    }
    return fail_at(p, e, "expected a value");
}

static const char *kind_of(unsigned char c) {
    if (c == '{') return "an object";
    if (c == '[') return "an array";
    if (c == '"') return "a string";
    if (c == 't' || c == 'f') return "a boolean";
    return c == 'n' ? "null" : "a number";
}

/* One member of the top-level object at p->pos (its key's quote). */
static int top_member(jparser *p, const char *field, jsonl_buf *key, jsonl_buf *out, int *found,
                      tg_err *e) {
    if (parse_string(p, key, e)) return -1;
    skip_space(p);
    if (p->pos >= p->len || p->s[p->pos] != ':') return fail_at(p, e, "expected ':'");
    p->pos++;
    skip_space(p);
    size_t n = strlen(field);
    if (key->len != n || memcmp(key->data, field, n)) return parse_value(p, 1, e);
    size_t at = p->pos;
    if (p->pos < p->len && p->s[p->pos] == '"') {
        *found = 1;
        return parse_string(p, out, e);
    }
    if (parse_value(p, 1, e)) return -1;
    return tg_fail(e, "column %zu: field \"%s\" is %s, not a string", at + 1, field, kind_of(p->s[at]));
}

int jsonl_string_field(const char *line, size_t len, const char *field, jsonl_buf *out, int *found,
                       tg_err *e) {
    jparser p = {(const unsigned char *)line, len, 0};
    jsonl_buf key = {0};
    int rc = -1;
    *found = 0;
    skip_space(&p);
    if (p.pos >= len || line[p.pos] != '{') {
        size_t at = p.pos;
        if (parse_value(&p, 0, e)) return -1; /* not JSON at all: say where */
        return tg_fail(e, "column %zu: the line is %s, not a JSON object", at + 1, kind_of(p.s[at]));
    }
    p.pos++;
    skip_space(&p);
    int more = !(p.pos < len && line[p.pos] == '}');
    if (!more) p.pos++;
    while (more) {
        if (p.pos >= len || line[p.pos] != '"') {
            fail_at(&p, e, "expected a key string");
            goto done;
        }
        if (top_member(&p, field, &key, out, found, e)) goto done;
        skip_space(&p);
        if (p.pos < len && (line[p.pos] == ',' || line[p.pos] == '}')) {
            more = line[p.pos++] == ',';
            skip_space(&p);
        } else {
            fail_at(&p, e, "expected ',' or '}'");
            goto done;
        }
    }
    skip_space(&p);
    rc = p.pos < len ? fail_at(&p, e, "text after the object") : 0;
done:
    free(key.data);
    return rc;
}
