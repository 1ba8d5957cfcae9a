/* prepare: UTF-8 text files -> GPT-2 token shards in llm.c's format.
 *
 * Each input file is one document, preceded by <|endoftext|>. The first
 * --val-tokens tokens of the whole stream go to PREFIX_val_000000.bin, the
 * rest to PREFIX_train_000000.bin, PREFIX_train_000001.bin, ... of at most
 * --shard-tokens tokens each. Shards are written under a temporary name and
 * renamed only once every input has been encoded, so a failed run leaves the
 * outputs of an earlier run as they were. `--decode SHARD` prints a shard
 * back as text, for inspection. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#endif

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "data/shard_format.h"
#include "data/tokenizer.h"
#include "util/err.h"

#define PROG "prepare"
#define DEFAULT_VAL_TOKENS 65536
#define DEFAULT_SHARD_TOKENS 100000000
#define DEFAULT_VOCAB_DIR "assets/vocab"
#define MAX_SHARD_TOKENS INT32_MAX /* the header's count is an int32 */

typedef struct options {
    const char **inputs;
    int n_inputs;
    const char *out, *vocab_dir, *decode;
    int64_t val_tokens, shard_tokens;
} options;

static void usage(FILE *f) {
    fprintf(f,
            "usage: %s --input FILE [--input FILE ...] --out PREFIX [options]\n"
            "       %s --decode SHARD [--vocab-dir DIR]\n"
            "\n"
            "Encodes each input (UTF-8 text) as one document preceded by <|endoftext|> with\n"
            "GPT-2's tokenizer. The first N tokens of the stream go to PREFIX_val_000000.bin,\n"
            "the rest to PREFIX_train_000000.bin, PREFIX_train_000001.bin, ...\n"
            "\n"
            "  --input FILE        a text file to encode; repeat for more (in order)\n"
            "  --out PREFIX        path prefix of the shards, e.g. data/kjv\n"
            "  --val-tokens N      tokens in the validation shard (default %d; 0: none)\n"
            "  --shard-tokens N    most tokens in one train shard (default %d)\n"
            "  --vocab-dir DIR     holds encoder.json and vocab.bpe (default %s)\n"
            "  --decode SHARD      write the text of a shard's tokens to stdout, then exit\n"
            "  --help              print this text\n",
            PROG, PROG, DEFAULT_VAL_TOKENS, DEFAULT_SHARD_TOKENS, DEFAULT_VOCAB_DIR);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- command line ------------------------------------------------------- */

static int parse_count(const char *opt, const char *s, int64_t min, int64_t max, int64_t *out,
                       tg_err *e) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    /* strtoll also takes leading spaces and a sign: digits only. */
    if (end == s || *end || errno || v < min || v > max || s[0] < '0' || s[0] > '9')
        return tg_fail(e, "%s: '%s' is not a whole number from %" PRId64 " to %" PRId64, opt, s, min,
                       max);
    *out = v;
    return 0;
}

/* Returns the value of option argv[*i] ("--opt VALUE" or "--opt=VALUE"). */
static const char *option_value(int argc, char **argv, int *i, const char *name, tg_err *e) {
    const char *eq = strchr(argv[*i], '=');
    if (eq) return eq + 1;
    if (*i + 1 >= argc) {
        tg_fail(e, "%s needs a value (see --help)", name);
        return NULL;
    }
    return argv[++*i];
}

/* Returns 0, 1 when --help was asked, or -1 with e filled. */
static int parse_args(int argc, char **argv, options *o, tg_err *e) {
    *o = (options){.vocab_dir = DEFAULT_VOCAB_DIR,
                   .val_tokens = DEFAULT_VAL_TOKENS,
                   .shard_tokens = DEFAULT_SHARD_TOKENS};
    o->inputs = tg_calloc((size_t)argc, sizeof *o->inputs, "input list");
    for (int i = 1; i < argc; i++) {
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)strcspn(argv[i], "="), argv[i]);
        if (!strcmp(name, "--help") || !strcmp(name, "-h")) return 1;
        int known = !strcmp(name, "--input") || !strcmp(name, "--out") ||
                    !strcmp(name, "--val-tokens") || !strcmp(name, "--shard-tokens") ||
                    !strcmp(name, "--vocab-dir") || !strcmp(name, "--decode");
        if (!known) return tg_fail(e, "unknown option '%s' (see --help)", argv[i]);
        const char *v = option_value(argc, argv, &i, name, e);
        if (!v) return -1;
        if (!strcmp(name, "--input"))
            o->inputs[o->n_inputs++] = v;
        else if (!strcmp(name, "--out"))
            o->out = v;
        else if (!strcmp(name, "--vocab-dir"))
            o->vocab_dir = v;
        else if (!strcmp(name, "--decode"))
            o->decode = v;
        else if (!strcmp(name, "--val-tokens")) {
            if (parse_count(name, v, 0, INT64_MAX, &o->val_tokens, e)) return -1;
        } else if (parse_count(name, v, 1, MAX_SHARD_TOKENS, &o->shard_tokens, e))
            return -1;
    }
    if (o->decode) return 0;
    if (o->n_inputs == 0) return tg_fail(e, "no --input FILE given (see --help)");
    if (!o->out) return tg_fail(e, "no --out PREFIX given (see --help)");
    /* An empty name part would write "_val_000000.bin" into the directory. */
    size_t n = strlen(o->out);
    if (n == 0 || o->out[n - 1] == '/')
        return tg_fail(e, "--out '%s': the prefix needs a file name part (e.g. data/kjv)", o->out);
    return 0;
}

/* ---- files -------------------------------------------------------------- */

static int read_whole(const char *path, char **buf, size_t *len, tg_err *e) {
    FILE *f = fopen(path, "rb");
    if (!f) return tg_fail(e, "cannot open input %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        return tg_fail(e, "input %s is a directory, not a text file", path);
    }
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
    fclose(f);
    if (bad) {
        free(b);
        return tg_fail(e, "cannot read input %s (read error or out of memory)", path);
    }
    *buf = b;
    *len = n;
    return 0;
}

static void put_le32(unsigned char *p, uint32_t v) {
    for (int k = 0; k < 4; k++) p[k] = (unsigned char)(v >> (8 * k));
}

static uint32_t get_le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int write_header(FILE *f, int64_t count) {
    unsigned char h[SHARD_HEADER_BYTES] = {0};
    put_le32(h, SHARD_MAGIC);
    put_le32(h + 4, SHARD_VERSION);
    put_le32(h + 8, (uint32_t)count);
    return fwrite(h, 1, sizeof h, f) == sizeof h ? 0 : -1;
}

/* ---- shard writer ------------------------------------------------------- */

typedef struct shard_out {
    char final[4096], tmp[4200];
    int64_t count;
} shard_out;

typedef struct writer {
    const char *prefix;
    int64_t val_left, shard_tokens;
    int n_train;
    FILE *f;         /* the last of outs while it is being filled, else NULL */
    int64_t limit;   /* capacity of the open shard */
    shard_out *outs; /* every shard of this run, in order */
    size_t n_outs, cap_outs;
} writer;

static int writer_open(writer *w, tg_err *e) {
    if (w->n_outs == w->cap_outs) {
        w->cap_outs = w->cap_outs ? 2 * w->cap_outs : 16;
        shard_out *p = realloc(w->outs, w->cap_outs * sizeof *p);
        if (!p) return tg_fail(e, "out of memory for the shard list");
        w->outs = p;
    }
    shard_out *s = &w->outs[w->n_outs];
    if (w->val_left > 0) {
        snprintf(s->final, sizeof s->final, "%s_val_000000.bin", w->prefix);
        w->limit = w->val_left;
    } else {
        snprintf(s->final, sizeof s->final, "%s_train_%06d.bin", w->prefix, w->n_train++);
        w->limit = w->shard_tokens;
    }
    snprintf(s->tmp, sizeof s->tmp, "%s.tmp", s->final);
    s->count = 0;
    w->f = fopen(s->tmp, "wb");
    if (!w->f) return tg_fail(e, "cannot create %s: %s", s->tmp, strerror(errno));
    w->n_outs++;
    if (write_header(w->f, 0)) return tg_fail(e, "cannot write %s: %s", s->tmp, strerror(errno));
    return 0;
}

/* Writes the final header and closes the open shard. */
static int writer_close(writer *w, tg_err *e) {
    shard_out *s = &w->outs[w->n_outs - 1];
    FILE *f = w->f;
    w->f = NULL;
    int bad = fflush(f) || fseek(f, 0, SEEK_SET) || write_header(f, s->count);
    bad |= fclose(f) != 0;
    if (bad) return tg_fail(e, "cannot write %s: %s", s->tmp, strerror(errno));
    if (w->val_left > 0) w->val_left = 0;
    return 0;
}

static int writer_push(writer *w, const int32_t *tok, size_t n, tg_err *e) {
    unsigned char buf[8192];
    while (n > 0) {
        if (!w->f && writer_open(w, e)) return -1;
        shard_out *s = &w->outs[w->n_outs - 1];
        size_t k = n, room = (size_t)(w->limit - s->count);
        if (k > room) k = room;
        if (k > sizeof buf / 2) k = sizeof buf / 2;
        for (size_t i = 0; i < k; i++) {
            buf[2 * i] = (unsigned char)(tok[i] & 0xff);
            buf[2 * i + 1] = (unsigned char)(tok[i] >> 8);
        }
        if (fwrite(buf, 2, k, w->f) != k)
            return tg_fail(e, "cannot write %s: %s", s->tmp, strerror(errno));
        s->count += (int64_t)k;
        tok += k;
        n -= k;
        if (s->count == w->limit && writer_close(w, e)) return -1;
    }
    return 0;
}

/* Closes the open shard and gives every shard its final name. */
static int writer_finish(writer *w, tg_err *e) {
    if (w->f && writer_close(w, e)) return -1;
    for (size_t i = 0; i < w->n_outs; i++)
        if (rename(w->outs[i].tmp, w->outs[i].final))
            return tg_fail(e, "cannot rename %s to %s: %s", w->outs[i].tmp, w->outs[i].final,
                           strerror(errno));
    return 0;
}

static void writer_abort(writer *w) {
    if (w->f) fclose(w->f);
    w->f = NULL;
    for (size_t i = 0; i < w->n_outs; i++) remove(w->outs[i].tmp);
}

/* ---- commands ----------------------------------------------------------- */

/* Encodes one input file, with its leading <|endoftext|>, into the writer. */
static int encode_file(const tokenizer *t, const char *path, writer *w, int32_t **tok, size_t *cap,
                       int64_t *n_total, tg_err *e) {
    double t0 = now_s();
    char *text;
    size_t len, n = 0;
    if (read_whole(path, &text, &len, e)) return -1;
    int rc = tokenizer_encode(t, text, len, tok, &n, cap, e);
    free(text);
    if (rc) return tg_wrap(e, "%s", path);
    const int32_t eot = GPT2_EOT_TOKEN;
    if (writer_push(w, &eot, 1, e) || writer_push(w, *tok, n, e)) return -1;
    *n_total += (int64_t)n + 1;
    printf("%s: %s: %zu bytes -> %zu tokens (+1 <|endoftext|>) in %.2f s\n", PROG, path, len, n,
           now_s() - t0);
    return 0;
}

static void warn_stale(const writer *w) {
    char path[4200];
    snprintf(path, sizeof path, "%s_train_%06d.bin", w->prefix, w->n_train);
    FILE *f = fopen(path, "rb");
    if (!f) return;
    fclose(f);
    fprintf(stderr,
            "%s: warning: %s is left from an earlier run; delete it (and any later shard) "
            "or a reader will take it as part of this data set\n",
            PROG, path);
}

static int run_prepare(const tokenizer *t, const options *o, tg_err *e) {
    double t0 = now_s();
    writer w = {.prefix = o->out, .val_left = o->val_tokens, .shard_tokens = o->shard_tokens};
    int32_t *tok = NULL;
    size_t cap = 0;
    int64_t total = 0;
    int rc = 0;
    for (int i = 0; i < o->n_inputs && rc == 0; i++)
        rc = encode_file(t, o->inputs[i], &w, &tok, &cap, &total, e);
    if (rc == 0) rc = writer_finish(&w, e);
    free(tok);
    if (rc) {
        writer_abort(&w);
        free(w.outs);
        return -1;
    }
    for (size_t i = 0; i < w.n_outs; i++)
        printf("%s: wrote %s (%" PRId64 " tokens)\n", PROG, w.outs[i].final, w.outs[i].count);
    double dt = now_s() - t0;
    printf("%s: %d file(s), %" PRId64 " tokens in %.2f s (%.2f M tokens/s)\n", PROG, o->n_inputs, total,
           dt, dt > 0 ? (double)total / dt / 1e6 : 0.0);
    if (w.n_train == 0)
        fprintf(stderr,
                "%s: warning: all %" PRId64 " tokens went to the val shard; no train shard written\n",
                PROG, total);
    warn_stale(&w);
    free(w.outs);
    return 0;
}

/* Checks a shard's header against its size and writes its tokens' bytes to stdout. */
static int decode_shard(const tokenizer *t, const char *path, tg_err *e) {
    char *buf;
    size_t len;
    if (read_whole(path, &buf, &len, e)) return -1;
    const unsigned char *h = (const unsigned char *)buf;
    int rc = 0;
    if (len < SHARD_HEADER_BYTES || get_le32(h) != SHARD_MAGIC || get_le32(h + 4) != SHARD_VERSION)
        rc = tg_fail(e, "%s: not a token shard (bad magic or version in the header)", path);
    else if ((len - SHARD_HEADER_BYTES) != 2 * (size_t)get_le32(h + 8))
        rc = tg_fail(e, "%s: header says %" PRIu32 " tokens but the file holds %zu bytes of tokens",
                     path, get_le32(h + 8), len - SHARD_HEADER_BYTES);
    for (size_t i = 0; rc == 0 && i < (len - SHARD_HEADER_BYTES) / 2; i++) {
        const unsigned char *p = h + SHARD_HEADER_BYTES + 2 * i;
        size_t n;
        const char *bytes = tokenizer_decode(t, p[0] | p[1] << 8, &n);
        if (!bytes)
            rc = tg_fail(e, "%s: token %d at index %zu is outside the vocabulary", path,
                         p[0] | p[1] << 8, i);
        else
            fwrite(bytes, 1, n, stdout);
    }
    free(buf);
    if (rc == 0 && fflush(stdout)) rc = tg_fail(e, "cannot write to stdout: %s", strerror(errno));
    return rc;
}

int main(int argc, char **argv) {
    options o;
    tg_err e;
    int rc = parse_args(argc, argv, &o, &e);
    if (rc < 0) tg_die(PROG, &e);
    if (rc > 0) {
        usage(stdout);
        free(o.inputs);
        return 0;
    }
    tokenizer *t = tokenizer_load(o.vocab_dir, &e);
    if (!t) tg_die(PROG, &e);
    if (tokenizer_vocab_size(t) > 65536) {
        tg_fail(&e, "%s holds %d tokens, more than the 65536 a uint16 shard can store", o.vocab_dir,
                tokenizer_vocab_size(t));
        tg_die(PROG, &e);
    }
    rc = o.decode ? decode_shard(t, o.decode, &e) : run_prepare(t, &o, &e);
    tokenizer_free(t);
    free(o.inputs);
    if (rc) tg_die(PROG, &e);
    return 0;
}
