/* The record of cuBLASLt algorithm choices (lt_tune.h): reading a record
 * file, keeping this run's choices and writing them, and the backend's
 * entry point for kernels.lt_tune (ops_cuda_lt_tune, kernels/ops.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/cuda/lt_tune.h"

#define RECORD_MAGIC "train_gpt_lt_algos\t1"

namespace {

const char *type_word(int32_t t) { return t == CUDA_R_16BF ? "bf16" : t == CUDA_R_32F ? "fp32" : "?"; }

bool parse_type(const char *v, int32_t *out) {
    if (strcmp(v, "bf16") == 0) *out = CUDA_R_16BF;
    else if (strcmp(v, "fp32") == 0) *out = CUDA_R_32F;
    else return false;
    return true;
}

/* A whole decimal int32 within [lo, hi]. */
bool parse_int(const char *v, long lo, long hi, int32_t *out) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi) return false;
    *out = (int32_t)x;
    return true;
}

bool parse_float(const char *v, float *out) {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end) return false;
    *out = (float)x;
    return true;
}

/* 128 hex digits: the algorithm's 8 words, most significant digit first. */
bool parse_algo(const char *v, cublasLtMatmulAlgo_t *algo) {
    if (strlen(v) != 16 * 8) return false;
    for (int w = 0; w < 8; w++) {
        uint64_t x = 0;
        for (int i = 0; i < 16; i++) {
            const char c = v[16 * w + i];
            const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
            if (d < 0) return false;
            x = x << 4 | (uint64_t)d;
        }
        algo->data[w] = x;
    }
    return true;
}

bool parse_align(const char *v, lt_key *k) {
    unsigned a[5];
    int used = 0;
    if (sscanf(v, "%u/%u/%u/%u/%u%n", &a[0], &a[1], &a[2], &a[3], &a[4], &used) != 5 || v[used]) return false;
    for (unsigned x : a)
        if (x > 256 || (x & (x - 1))) return false; /* 0 or a power of two */
    k->align_a = a[0], k->align_b = a[1], k->align_d = a[2], k->align_bias = a[3], k->align_aux = a[4];
    return true;
}

/* The key fields in file order, and where each goes. */
struct int_field {
    const char *name;
    size_t offset;
    long lo, hi;
};
const int_field INT_FIELDS[] = {
    {"ta", offsetof(lt_key, trans_a), 0, 1},        {"tb", offsetof(lt_key, trans_b), 0, 1},
    {"m", offsetof(lt_key, m), 1, 2147483647L},     {"n", offsetof(lt_key, n), 1, 2147483647L},
    {"k", offsetof(lt_key, k), 0, 2147483647L},     {"lda", offsetof(lt_key, lda), 1, 2147483647L},
    {"ldb", offsetof(lt_key, ldb), 1, 2147483647L}, {"ldd", offsetof(lt_key, ldd), 1, 2147483647L},
    {"epilogue", offsetof(lt_key, epilogue), 0, 2147483647L},
};
const char *const REQUIRED[] = {"ta", "tb", "m", "n", "k", "lda", "ldb", "ldd", "ab", "d", "epilogue", "align", "algo"};
const int N_REQUIRED = (int)(sizeof REQUIRED / sizeof REQUIRED[0]);

/* One field of a record line into c; false with the reason in *why. */
bool parse_field(const char *name, const char *v, lt_choice *c, const char **why) {
    for (const int_field &f : INT_FIELDS)
        if (strcmp(name, f.name) == 0) {
            *why = "want a whole number in range";
            return parse_int(v, f.lo, f.hi, (int32_t *)((char *)&c->key + f.offset));
        }
    if (strcmp(name, "ab") == 0 || strcmp(name, "d") == 0) {
        *why = "want bf16 or fp32";
        return parse_type(v, strcmp(name, "ab") == 0 ? &c->key.ab : &c->key.d);
    }
    if (strcmp(name, "align") == 0) {
        *why = "want five alignments A/B/D/bias/aux in bytes, each 0 or a power of two up to 256";
        return parse_align(v, &c->key);
    }
    if (strcmp(name, "algo") == 0) {
        *why = "want 128 lowercase hex digits (cublasLtMatmulAlgo_t's 8 words)";
        return parse_algo(v, &c->algo);
    }
    if (strcmp(name, "chosen") == 0 || strcmp(name, "of") == 0) {
        *why = "want a whole number from 0 to 64";
        return parse_int(v, 0, 64, strcmp(name, "chosen") == 0 ? &c->chosen : &c->of);
    }
    if (strcmp(name, "ms") == 0 || strcmp(name, "first_ms") == 0) {
        *why = "want a number";
        return parse_float(v, strcmp(name, "ms") == 0 ? &c->ms : &c->first_ms);
    }
    if (strcmp(name, "what") == 0) {
        snprintf(c->what, sizeof c->what, "%s", v);
        return true;
    }
    *why = "unknown field (want ta tb m n k lda ldb ldd ab d epilogue align algo, and chosen of ms first_ms what)";
    return false;
}

/* One record line (its newline removed) into c. */
int parse_line(const char *path, int line, char *text, lt_choice *c, tg_err *e) {
    memset(c, 0, sizeof *c);
    c->line = line;
    c->ms = c->first_ms = -1.0f;
    bool seen[N_REQUIRED] = {};
    for (char *save = NULL, *tok = strtok_r(text, "\t", &save); tok; tok = strtok_r(NULL, "\t", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq) return tg_fail(e, "%s:%d: field '%s' is not name=value", path, line, tok);
        *eq = '\0';
        const char *why = "";
        if (!parse_field(tok, eq + 1, c, &why)) return tg_fail(e, "%s:%d: field %s: '%s': %s", path, line, tok, eq + 1, why);
        for (int i = 0; i < N_REQUIRED; i++)
            if (strcmp(tok, REQUIRED[i]) == 0) seen[i] = true;
    }
    for (int i = 0; i < N_REQUIRED; i++)
        if (!seen[i]) return tg_fail(e, "%s:%d: field %s is missing", path, line, REQUIRED[i]);
    return 0;
}

void append(lt_tuner *t, const lt_choice &c) {
    if (t->count == t->capacity) {
        t->capacity = t->capacity ? 2 * t->capacity : 32;
        t->choices = (lt_choice *)tg_realloc(t->choices, (size_t)t->capacity * sizeof *t->choices, "cuBLASLt algorithm record");
    }
    t->choices[t->count++] = c;
}

/* Reads every record line of path into t's choices. */
int load_record(lt_tuner *t, const char *path, tg_err *e) {
    FILE *f = fopen(path, "r");
    if (!f)
        return tg_fail(e, "%s: cannot open the cuBLASLt algorithm record: %s (kernels.lt_tune is off, time or such a file)",
                       path, strerror(errno));
    char text[2048];
    int line = 0, rc = 0;
    while (rc == 0 && fgets(text, sizeof text, f)) {
        line++;
        size_t len = strlen(text);
        if (len && text[len - 1] == '\n') text[--len] = '\0';
        else if (!feof(f)) rc = tg_fail(e, "%s:%d: line longer than %zu bytes", path, line, sizeof text - 2);
        if (rc) break;
        if (line == 1) {
            if (strcmp(text, RECORD_MAGIC) != 0)
                rc = tg_fail(e, "%s:1: not a cuBLASLt algorithm record (its first line must be 'train_gpt_lt_algos<TAB>1')",
                             path);
            continue;
        }
        if (len == 0 || text[0] == '#') continue;
        lt_choice c;
        if ((rc = parse_line(path, line, text, &c, e))) break;
        const lt_choice *twin = lt_tuner_find(t, c.key);
        if (twin) rc = tg_fail(e, "%s:%d: the product of line %d again (m=%d n=%d k=%d)", path, line, twin->line, c.key.m,
                               c.key.n, c.key.k);
        else append(t, c);
    }
    if (rc == 0 && ferror(f)) rc = tg_fail(e, "%s: cannot read the cuBLASLt algorithm record: %s", path, strerror(errno));
    if (rc == 0 && line == 0) rc = tg_fail(e, "%s: the cuBLASLt algorithm record is empty", path);
    fclose(f);
    return rc;
}

void write_choice(FILE *f, const lt_choice &c) {
    const lt_key &k = c.key;
    fprintf(f, "ta=%d\ttb=%d\tm=%d\tn=%d\tk=%d\tlda=%d\tldb=%d\tldd=%d\tab=%s\td=%s\tepilogue=%d\talign=%u/%u/%u/%u/%u\talgo=",
            k.trans_a, k.trans_b, k.m, k.n, k.k, k.lda, k.ldb, k.ldd, type_word(k.ab), type_word(k.d), k.epilogue, k.align_a,
            k.align_b, k.align_d, k.align_bias, k.align_aux);
    for (int w = 0; w < 8; w++) fprintf(f, "%016llx", (unsigned long long)c.algo.data[w]);
    fprintf(f, "\tchosen=%d\tof=%d\tms=%.6g\tfirst_ms=%.6g\twhat=%s\n", c.chosen, c.of, c.ms, c.first_ms, c.what);
}

/* Writes every choice to t->record through a temporary file renamed over
 * it, so that a record already there is whole until the new one is. */
int write_record(const lt_tuner *t, tg_err *e) {
    char tmp[sizeof t->record + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", t->record);
    FILE *f = fopen(tmp, "w");
    if (!f) return tg_fail(e, "%s: cannot write the cuBLASLt algorithm record: %s", tmp, strerror(errno));
    fprintf(f, "%s\n# one cuBLASLt product a line (kernels.lt_tune); give this file as kernels.lt_tune to pin them\n",
            RECORD_MAGIC);
    for (int i = 0; i < t->count; i++) write_choice(f, t->choices[i]);
    const bool bad = ferror(f) != 0;
    if (fclose(f) != 0 || bad) {
        const int err = errno;
        remove(tmp);
        return tg_fail(e, "%s: cannot write the cuBLASLt algorithm record: %s", tmp, strerror(err));
    }
    if (rename(tmp, t->record) != 0) {
        const int err = errno;
        remove(tmp);
        return tg_fail(e, "%s: cannot replace the cuBLASLt algorithm record: %s", t->record, strerror(err));
    }
    return 0;
}

} // namespace

const lt_choice *lt_tuner_find(const lt_tuner *t, const lt_key &key) {
    for (int i = 0; i < t->count; i++)
        if (memcmp(&t->choices[i].key, &key, sizeof key) == 0) return &t->choices[i];
    return NULL;
}

void lt_tuner_keep(lt_tuner *t, const lt_choice &c) {
    lt_choice *same = (lt_choice *)lt_tuner_find(t, c.key);
    if (same) *same = c;
    else append(t, c);
    if (!t->record[0]) return;
    ((lt_choice *)lt_tuner_find(t, c.key))->recorded = true;
    tg_err e;
    if (write_record(t, &e)) tg_die("train_gpt", &e);
}

void lt_tuner_events(lt_tuner *t, cudaEvent_t *start, cudaEvent_t *stop) {
    if (!t->start) {
        CUDA_CHECK(cudaEventCreate(&t->start));
        CUDA_CHECK(cudaEventCreate(&t->stop));
    }
    *start = t->start, *stop = t->stop;
}

void lt_tuner_release(lt_tuner *t) {
    if (t->start) CUDA_CHECK(cudaEventDestroy(t->start));
    if (t->stop) CUDA_CHECK(cudaEventDestroy(t->stop));
    free(t->choices);
    memset(t, 0, sizeof *t);
}

extern "C" int ops_cuda_lt_tune(const tg_ops *o, const char *tune, const char *record, int write, tg_err *e) {
    lt_tuner *t = lt_plans_tuner(cuda_ctx_of(o)->lt_plans);
    t->mode = strcmp(tune, "off") == 0 ? LT_TUNE_OFF : strcmp(tune, "time") == 0 ? LT_TUNE_TIME : LT_TUNE_FILE;
    if (t->mode == LT_TUNE_OFF) return 0;
    if (record && strlen(record) >= sizeof t->record) return tg_fail(e, "%s: path too long for the record", record);
    snprintf(t->record, sizeof t->record, "%s", record && write ? record : "");
    /* time: a record this run's folder already holds (a resumed run) pins
     * its choices, so that the resumed run is the uninterrupted one */
    const char *source = t->mode == LT_TUNE_FILE ? tune : record;
    if (t->mode == LT_TUNE_TIME && (!record || access(record, F_OK) != 0)) source = NULL;
    if (!source) return 0;
    if (strlen(source) >= sizeof t->source) return tg_fail(e, "%s: path too long", source);
    snprintf(t->source, sizeof t->source, "%s", source);
    return load_record(t, source, e);
}
