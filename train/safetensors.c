#include "train/safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train/config.h"
#include "util/digest.h"
#include "util/fs.h"
#include "util/json.h"

/* Doubles hold whole numbers exactly up to 2^53: the largest dimension read. */
#define ST_DIM_MAX 9007199254740992LL

struct st_writer {
    char path[1024];
    FILE *f;
    int n, next;
    long long *numel;
    bool failed;
    digest_stream *digest; /* of every byte written, for the checkpoint's state.json */
};

static long long entry_numel(const st_entry *t) {
    long long numel = 1;
    for (int d = 0; d < t->ndim; d++) numel *= t->shape[d];
    return numel;
}

static char *header_json(const st_entry *entries, int n) {
    cJSON *h = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(h, "__metadata__");
    cJSON_AddStringToObject(meta, "format", "pt");
    long long off = 0;
    for (int i = 0; i < n; i++) {
        const st_entry *t = &entries[i];
        cJSON *o = cJSON_AddObjectToObject(h, t->name);
        cJSON_AddStringToObject(o, "dtype", "F32");
        cJSON *shape = cJSON_AddArrayToObject(o, "shape");
        for (int d = 0; d < t->ndim; d++) cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->shape[d]));
        cJSON *offs = cJSON_AddArrayToObject(o, "data_offsets");
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off));
        off += entry_numel(t) * 4;
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off));
    }
    char *json = cJSON_PrintUnformatted(h);
    cJSON_Delete(h);
    return json;
}

st_writer *st_writer_open(const char *path, const st_entry *entries, int n, tg_err *e) {
    char *json = header_json(entries, n);
    size_t len = strlen(json), padded = (len + 7) / 8 * 8; /* data starts 8-byte aligned */
    st_writer *w = tg_calloc(1, sizeof *w, "safetensors writer");
    snprintf(w->path, sizeof w->path, "%s", path);
    w->n = n;
    w->numel = tg_malloc(sizeof(long long) * (size_t)(n ? n : 1), "safetensors sizes");
    for (int i = 0; i < n; i++) w->numel[i] = entry_numel(&entries[i]);
    w->f = fs_create_excl(path); /* new: never through a link, never over a file */
    uint64_t hlen = padded;
    int ok = w->f && fwrite(&hlen, 8, 1, w->f) == 1 && fwrite(json, 1, len, w->f) == len;
    for (size_t i = len; ok && i < padded; i++) ok = fputc(' ', w->f) != EOF;
    if (ok) {
        w->digest = digest_begin();
        digest_update(w->digest, &hlen, 8);
        digest_update(w->digest, json, len);
        for (size_t i = len; i < padded; i++) digest_update(w->digest, " ", 1);
    }
    free(json);
    if (!ok) {
        tg_fail(e, "%s: cannot write: %s", path, strerror(errno));
        if (w->f) fclose(w->f);
        free(w->numel);
        free(w);
        return NULL;
    }
    return w;
}

int st_writer_put(st_writer *w, const float *data, tg_err *e) {
    if (w->next >= w->n) return tg_fail(e, "%s: more tensors than the header lists", w->path);
    size_t numel = (size_t)w->numel[w->next++];
    if (fwrite(data, 4, numel, w->f) != numel) return tg_fail(e, "%s: write failed: %s", w->path, strerror(errno));
    digest_update(w->digest, data, numel * 4);
    return 0;
}

void st_writer_digest(const st_writer *w, char hex[DIGEST_HEX_LEN], long long *bytes) { digest_hex(w->digest, hex, bytes); }

int st_writer_close(st_writer *w, tg_err *e) {
    int ok = w->next == w->n && fflush(w->f) == 0 && fsync(fileno(w->f)) == 0;
    if (fclose(w->f) != 0) ok = 0;
    int rc = ok ? 0 : tg_fail(e, "%s: write failed (%d of %d tensors): %s", w->path, w->next, w->n, strerror(errno));
    digest_end(w->digest);
    free(w->numel);
    free(w);
    return rc;
}

static size_t dtype_size(const char *dt) {
    if (strcmp(dt, "F32") == 0) return 4;
    if (strcmp(dt, "F16") == 0 || strcmp(dt, "BF16") == 0) return 2;
    return 0;
}

long long st_numel(const st_tensor *t) {
    long long n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
    return n;
}

/* A header number that must be a whole number in [0, max], checked before
 * the conversion so that 1e20 or 2.5 cannot wrap or truncate. */
static int header_count(const st_file *s, const char *tensor, const char *field, const cJSON *x, long long max,
                        long long *out, tg_err *e) {
    if (!cJSON_IsNumber(x)) return tg_fail(e, "%s: tensor '%s': %s holds a non-number", s->path, tensor, field);
    const double v = x->valuedouble;
    char text[64];
    if (v != floor(v) || v < 0 || v > (double)max)
        return tg_fail(e, "%s: tensor '%s': %s holds %s, not a whole number from 0 to %lld", s->path, tensor, field,
                       config_number_text(v, text, sizeof text), max);
    *out = (long long)v;
    return 0;
}

/* The shape and its element count, computed without overflow: -1 when the
 * count exceeds limit (the data section's bytes, which no tensor can). */
static int parse_shape(const st_file *s, const cJSON *shape, long long limit, st_tensor *t, long long *numel, tg_err *e) {
    t->ndim = cJSON_GetArraySize(shape);
    if (t->ndim > ST_MAX_DIMS) return tg_fail(e, "%s: tensor '%s' has %d dimensions", s->path, t->name, t->ndim);
    bool empty = false;
    for (int d = 0; d < t->ndim; d++) {
        if (header_count(s, t->name, "shape", cJSON_GetArrayItem(shape, d), ST_DIM_MAX, &t->shape[d], e)) return -1;
        empty |= t->shape[d] == 0;
    }
    long long n = empty ? 0 : 1;
    for (int d = 0; !empty && n >= 0 && d < t->ndim; d++) n = n > limit / t->shape[d] ? -1 : n * t->shape[d];
    *numel = n;
    return 0;
}

/* Checks one header entry and copies it into t. */
static int parse_entry(const st_file *s, const cJSON *item, long long data_bytes, st_tensor *t, tg_err *e) {
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(item, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(item, "shape");
    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
    if (strlen(item->string) >= sizeof t->name)
        return tg_fail(e, "%s: tensor name '%.40s...' is longer than %zu characters", s->path, item->string, sizeof t->name - 1);
    snprintf(t->name, sizeof t->name, "%s", item->string);
    if (!cJSON_IsString(dt) || !cJSON_IsArray(shape) || !cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2)
        return tg_fail(e, "%s: tensor '%s' has a malformed header entry", s->path, t->name);
    snprintf(t->dtype, sizeof t->dtype, "%s", dt->valuestring);
    long long numel = 0;
    if (parse_shape(s, shape, data_bytes, t, &numel, e) ||
        header_count(s, t->name, "data_offsets", cJSON_GetArrayItem(offs, 0), data_bytes, &t->begin, e) ||
        header_count(s, t->name, "data_offsets", cJSON_GetArrayItem(offs, 1), data_bytes, &t->end, e))
        return -1;
    if (t->end < t->begin)
        return tg_fail(e, "%s: tensor '%s' data offsets [%lld, %lld) are reversed", s->path, t->name, t->begin, t->end);
    /* An unknown dtype (refused if read) still has at least a byte per element. */
    const long long es = (long long)dtype_size(t->dtype), bytes = t->end - t->begin;
    const bool fits = numel >= 0 && (es ? numel <= bytes / es && numel * es == bytes : numel <= bytes);
    if (!fits && numel < 0)
        return tg_fail(e, "%s: tensor '%s' has more elements than the file's %lld data bytes", s->path, t->name, data_bytes);
    if (!fits)
        return tg_fail(e, "%s: tensor '%s' holds %lld bytes, its shape and dtype (%s) need %lld", s->path, t->name, bytes,
                       t->dtype, numel * (es ? es : 1));
    return 0;
}

static int by_begin(const void *a, const void *b) {
    const st_tensor *x = *(const st_tensor *const *)a, *y = *(const st_tensor *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* The format's rule: the tensors tile the data section, so no byte is read
 * twice (overlap) and none lies unused (a gap, or bytes after the last). */
static int check_tiling(const st_file *s, long long data_bytes, tg_err *e) {
    const st_tensor **order = tg_malloc(sizeof *order * (size_t)(s->n ? s->n : 1), "safetensors order");
    for (int i = 0; i < s->n; i++) order[i] = &s->tensors[i];
    qsort(order, (size_t)s->n, sizeof *order, by_begin);
    long long at = 0;
    const char *prev = NULL;
    int rc = 0;
    for (int i = 0; rc == 0 && i < s->n; i++) {
        const st_tensor *t = order[i];
        if (t->begin < at)
            rc = tg_fail(e, "%s: tensor '%s' data offsets [%lld, %lld) overlap tensor '%s' (ending at %lld)", s->path,
                         t->name, t->begin, t->end, prev, at);
        else if (t->begin > at)
            rc = tg_fail(e, "%s: tensor '%s' data offsets [%lld, %lld) leave bytes [%lld, %lld) unused%s%s%s", s->path,
                         t->name, t->begin, t->end, at, t->begin, prev ? " (after tensor '" : "", prev ? prev : "",
                         prev ? "')" : "");
        at = t->end;
        prev = t->name;
    }
    if (rc == 0 && at != data_bytes)
        rc = tg_fail(e, "%s: the data section holds %lld bytes but its tensors cover %lld%s%s%s: the rest is unused", s->path,
                     data_bytes, at, prev ? " (the last, '" : "", prev ? prev : "", prev ? "', ends there)" : "");
    free(order);
    return rc;
}

static int parse_header(st_file *s, const char *json, long long data_bytes, tg_err *e) {
    cJSON *h = json_parse_exact(json, strlen(json), s->path, e);
    if (!h) return -1;
    if (!cJSON_IsObject(h)) {
        cJSON_Delete(h);
        return tg_fail(e, "%s: the safetensors header is not a JSON object", s->path);
    }
    s->tensors = tg_calloc((size_t)cJSON_GetArraySize(h), sizeof(st_tensor), "safetensors index");
    int rc = 0;
    for (const cJSON *it = h->child; rc == 0 && it; it = it->next) {
        if (strcmp(it->string, "__metadata__") == 0) continue;
        rc = parse_entry(s, it, data_bytes, &s->tensors[s->n], e);
        if (rc == 0) s->n++;
    }
    cJSON_Delete(h);
    return rc ? rc : check_tiling(s, data_bytes, e);
}

FILE *open_regular(const char *path, tg_err *e) {
    /* Without blocking, so that a FIFO in the file's place cannot hang the load. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0) tg_fail(e, "%s: cannot open: %s", path, strerror(errno));
    else if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) tg_fail(e, "%s: is not a regular file", path);
    else {
        FILE *f = fdopen(fd, "rb");
        if (f) return f;
        tg_fail(e, "%s: cannot open: %s", path, strerror(errno));
    }
    if (fd >= 0) close(fd);
    return NULL;
}

st_file *safetensors_open(const char *path, tg_err *e) {
    st_file *s = tg_calloc(1, sizeof *s, "safetensors file");
    snprintf(s->path, sizeof s->path, "%s", path);
    s->f = open_regular(path, e);
    struct stat st;
    uint64_t hlen = 0;
    char *json = NULL;
    int rc = 0;
    if (!s->f) rc = -1;
    else if (fstat(fileno(s->f), &st) != 0 || fread(&hlen, 8, 1, s->f) != 1)
        rc = tg_fail(e, "%s: too short for a safetensors file", path);
    else if (hlen == 0 || (long long)hlen > (long long)st.st_size - 8 || hlen > (1u << 30))
        rc = tg_fail(e, "%s: header length %llu does not fit the file (%lld bytes): not a safetensors file, or truncated",
                     path, (unsigned long long)hlen, (long long)st.st_size);
    else {
        json = tg_malloc(hlen + 1, "safetensors header");
        if (fread(json, 1, hlen, s->f) != hlen) rc = tg_fail(e, "%s: cannot read the header", path);
        json[hlen] = '\0';
        s->data_start = 8 + (long long)hlen;
        if (rc == 0) rc = parse_header(s, json, (long long)st.st_size - s->data_start, e);
    }
    free(json);
    if (rc != 0) {
        safetensors_close(s);
        return NULL;
    }
    return s;
}

void safetensors_close(st_file *s) {
    if (!s) return;
    if (s->f) fclose(s->f);
    free(s->tensors);
    free(s);
}

const st_tensor *safetensors_find(const st_file *s, const char *name) {
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->tensors[i].name, name) == 0) return &s->tensors[i];
    return NULL;
}

static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) bits = sign;
        else { /* subnormal: renormalise */
            exp = 127 - 15 + 1;
            while (!(man & 0x400)) { man <<= 1; exp--; }
            bits = sign | (exp << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) bits = sign | 0x7f800000 | (man << 13);
    else bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

int safetensors_read_f32(st_file *s, const st_tensor *t, float *out, tg_err *e) {
    size_t es = dtype_size(t->dtype);
    if (!es) return tg_fail(e, "%s: tensor '%s' has dtype %s (supported: F32, F16, BF16)", s->path, t->name, t->dtype);
    long long n = st_numel(t);
    if (fseeko(s->f, s->data_start + t->begin, SEEK_SET) != 0)
        return tg_fail(e, "%s: cannot seek to tensor '%s'", s->path, t->name);
    if (es == 4) {
        if (fread(out, 4, (size_t)n, s->f) != (size_t)n) return tg_fail(e, "%s: tensor '%s' is truncated", s->path, t->name);
        return 0;
    }
    uint16_t *tmp = tg_malloc((size_t)n * 2, "half-precision tensor");
    int rc = 0;
    if (fread(tmp, 2, (size_t)n, s->f) != (size_t)n) rc = tg_fail(e, "%s: tensor '%s' is truncated", s->path, t->name);
    bool bf16 = strcmp(t->dtype, "BF16") == 0;
    for (long long i = 0; rc == 0 && i < n; i++) {
        if (bf16) {
            uint32_t bits = (uint32_t)tmp[i] << 16;
            memcpy(&out[i], &bits, 4);
        } else out[i] = half_to_float(tmp[i]);
    }
    free(tmp);
    return rc;
}
