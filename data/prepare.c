/* prepare: UTF-8 text -> GPT-2 token shards in llm.c's format.
 *
 * Each document (an input file, standard input, or with --jsonl-field one
 * line of a JSON Lines file) is preceded by <|endoftext|>. The first
 * --val-tokens tokens of the whole stream go to PREFIX_val_000000.bin, the
 * rest to PREFIX_train_000000.bin, PREFIX_train_000001.bin, ... of at most
 * --shard-tokens tokens each. Documents are encoded a batch at a time by
 * OpenMP threads and written in input order, so the shards are the same
 * whatever the thread count. Shards are renamed into place only once every
 * document has been encoded, so a failed run leaves the outputs of an earlier
 * run as they were. `--decode SHARD` prints a shard back as text. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#endif

#include <errno.h>
#include <inttypes.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "data/prepare_inputs.h"
#include "data/shard_format.h"
#include "data/shard_writer.h"
#include "data/tokenizer.h"
#include "util/err.h"
#include "util/fs.h"

#define PROG "prepare"
#define DEFAULT_VAL_TOKENS 65536
#define DEFAULT_SHARD_TOKENS 100000000
#define DEFAULT_VOCAB_DIR "assets/vocab"
#define DEFAULT_BATCH_DOCS 1024
#define MAX_SHARD_TOKENS INT32_MAX /* the header's count is an int32 */
/* A batch also ends once its text reaches this many bytes per thread: the
 * batch's text and tokens are what prepare holds in memory. */
#define BATCH_BYTES_PER_THREAD (32u << 20)
#define PROGRESS_EVERY_S 10.0

typedef struct options {
    prep_input *inputs;
    int n_inputs;
    const char *out, *vocab_dir, *decode, *jsonl_field;
    int64_t val_tokens, shard_tokens, threads, batch_docs;
} options;

static void usage(FILE *f) {
    fprintf(f,
            "usage: %s (--input FILE | --inputs-from LIST)... --out PREFIX [options]\n"
            "       %s --decode SHARD [--vocab-dir DIR]\n"
            "\n"
            "Encodes each document (UTF-8 text) preceded by <|endoftext|> with GPT-2's\n"
            "tokenizer. The first N tokens of the stream go to PREFIX_val_000000.bin, the\n"
            "rest to PREFIX_train_000000.bin, PREFIX_train_000001.bin, ... Documents are\n"
            "encoded in parallel and written in input order: the shards do not depend on\n"
            "--threads.\n"
            "\n"
            "  --input FILE        a text file, one document; '-' reads standard input;\n"
            "                      repeat for more (in order)\n"
            "  --inputs-from LIST  a file naming one input file a line, in order ('-':\n"
            "                      standard input; empty lines skipped; relative paths from\n"
            "                      the current directory); mixes with --input in order\n"
            "  --jsonl-field NAME  read every input as JSON Lines: each line an object whose\n"
            "                      string field NAME is one document (blank lines skipped;\n"
            "                      any other line without it is an error naming the line)\n"
            "  --out PREFIX        path prefix of the shards, e.g. data/kjv; PREFIX.lock is\n"
            "                      locked while prepare runs (a second run into the same\n"
            "                      prefix is refused, naming the holder's pid and host)\n"
            "  --val-tokens N      tokens in the validation shard (default %d; 0: none)\n"
            "  --shard-tokens N    most tokens in one train shard (default %d)\n"
            "  --threads N         encoding threads (default: OMP_NUM_THREADS, else all cores)\n"
            "  --batch-docs N      documents read ahead and encoded together (default %d;\n"
            "                      a batch also ends at %u MiB of text per thread)\n"
            "  --vocab-dir DIR     holds encoder.json and vocab.bpe (default %s)\n"
            "  --decode SHARD      write the text of a shard's tokens to stdout, then exit\n"
            "  --help              print this text\n",
            PROG, PROG, DEFAULT_VAL_TOKENS, DEFAULT_SHARD_TOKENS, DEFAULT_BATCH_DOCS,
            BATCH_BYTES_PER_THREAD >> 20, DEFAULT_VOCAB_DIR);
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

static const char *const option_names[] = {"--input", "--inputs-from", "--jsonl-field", "--out",
                                           "--val-tokens", "--shard-tokens", "--threads", "--batch-docs",
                                           "--vocab-dir", "--decode"};

/* One option with its value into o; -1 with e filled. */
static int set_option(options *o, const char *name, const char *v, tg_err *e) {
    if (!strcmp(name, "--input"))
        o->inputs[o->n_inputs++] = (prep_input){PREP_INPUT_FILE, v};
    else if (!strcmp(name, "--inputs-from"))
        o->inputs[o->n_inputs++] = (prep_input){PREP_INPUT_LIST, v};
    else if (!strcmp(name, "--out"))
        o->out = v;
    else if (!strcmp(name, "--vocab-dir"))
        o->vocab_dir = v;
    else if (!strcmp(name, "--decode"))
        o->decode = v;
    else if (!strcmp(name, "--jsonl-field")) {
        if (!*v) return tg_fail(e, "--jsonl-field needs a field name");
        o->jsonl_field = v;
    } else if (!strcmp(name, "--val-tokens"))
        return parse_count(name, v, 0, INT64_MAX, &o->val_tokens, e);
    else if (!strcmp(name, "--shard-tokens"))
        return parse_count(name, v, 1, MAX_SHARD_TOKENS, &o->shard_tokens, e);
    else if (!strcmp(name, "--threads"))
        return parse_count(name, v, 1, 4096, &o->threads, e);
    else
        return parse_count(name, v, 1, 1 << 20, &o->batch_docs, e);
    return 0;
}

/* What the options say together; -1 with e filled. */
static int check_options(const options *o, tg_err *e) {
    if (o->decode) return 0;
    if (o->n_inputs == 0) return tg_fail(e, "no --input FILE or --inputs-from LIST given (see --help)");
    int from_stdin = 0;
    for (int i = 0; i < o->n_inputs; i++) from_stdin += !strcmp(o->inputs[i].path, "-");
    if (from_stdin > 1)
        return tg_fail(e, "standard input ('-') can be read only once, by one --input or --inputs-from");
    if (!o->out) return tg_fail(e, "no --out PREFIX given (see --help)");
    /* An empty name part would write "_val_000000.bin" into the directory. */
    size_t n = strlen(o->out);
    if (n == 0 || o->out[n - 1] == '/')
        return tg_fail(e, "--out '%s': the prefix needs a file name part (e.g. data/kjv)", o->out);
    return 0;
}

/* Returns 0, 1 when --help was asked, or -1 with e filled. */
static int parse_args(int argc, char **argv, options *o, tg_err *e) {
    *o = (options){.vocab_dir = DEFAULT_VOCAB_DIR,
                   .val_tokens = DEFAULT_VAL_TOKENS,
                   .shard_tokens = DEFAULT_SHARD_TOKENS,
                   .threads = omp_get_max_threads(),
                   .batch_docs = DEFAULT_BATCH_DOCS};
    o->inputs = tg_calloc((size_t)argc, sizeof *o->inputs, "input list");
    for (int i = 1; i < argc; i++) {
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)strcspn(argv[i], "="), argv[i]);
        if (!strcmp(name, "--help") || !strcmp(name, "-h")) return 1;
        int known = 0;
        for (size_t k = 0; k < sizeof option_names / sizeof *option_names; k++)
            known |= !strcmp(name, option_names[k]);
        if (!known) return tg_fail(e, "unknown option '%s' (see --help)", argv[i]);
        const char *v = option_value(argc, argv, &i, name, e);
        if (!v || set_option(o, name, v, e)) return -1;
    }
    return check_options(o, e);
}

/* ---- encoding ----------------------------------------------------------- */

/* One document of a batch and what encoding it gave. */
typedef struct batch_doc {
    prep_doc doc;
    int32_t *tok;
    size_t n_tok, cap;
    double seconds;
    int rc;
    tg_err err;
} batch_doc;

typedef struct run_totals {
    int64_t docs, tokens, bytes;
    double t0, last_report;
} run_totals;

static void encode_doc(const tokenizer *t, batch_doc *b) {
    double t0 = now_s();
    b->rc = prep_doc_read(&b->doc, &b->err);
    if (b->rc == 0 && tokenizer_encode(t, b->doc.text, b->doc.len, &b->tok, &b->n_tok, &b->cap, &b->err)) {
        b->rc = tg_wrap(&b->err, "%s", b->doc.label);
        if (b->doc.origin) tg_wrap(&b->err, "%s", b->doc.origin);
    }
    free(b->doc.text); /* the tokens are what is kept */
    b->doc.text = NULL;
    b->seconds = now_s() - t0;
}

/* Writes the batch's tokens in input order; the first failed document
 * (in input order) fails the run. */
static int write_batch(batch_doc *batch, int n, shard_writer *w, run_totals *tot, tg_err *e) {
    const int32_t eot = GPT2_EOT_TOKEN;
    for (int i = 0; i < n; i++) {
        batch_doc *b = &batch[i];
        if (b->rc) {
            *e = b->err;
            return -1;
        }
        if (shard_writer_push(w, &eot, 1, e) || shard_writer_push(w, b->tok, b->n_tok, e)) return -1;
        tot->docs++;
        tot->tokens += (int64_t)b->n_tok + 1;
        tot->bytes += (int64_t)b->doc.len;
        if (b->doc.on_command_line)
            printf("%s: %s: %zu bytes -> %zu tokens (+1 <|endoftext|>) in %.2f s\n", PROG, b->doc.label,
                   b->doc.len, b->n_tok, b->seconds);
    }
    return 0;
}

static void free_batch(batch_doc *batch, int n) {
    for (int i = 0; i < n; i++) {
        prep_doc_free(&batch[i].doc);
        free(batch[i].tok);
        batch[i] = (batch_doc){0};
    }
}

static void report_progress(run_totals *tot, int final, int threads) {
    double t = now_s(), dt = t - tot->t0;
    if (!final && t - tot->last_report < PROGRESS_EVERY_S) return;
    tot->last_report = t;
    printf("%s: %s%" PRId64 " document(s), %" PRId64 " bytes, %" PRId64
           " tokens in %.2f s (%.2f M tokens/s, %d thread(s))\n",
           PROG, final ? "" : "so far ", tot->docs, tot->bytes, tot->tokens, dt,
           dt > 0 ? (double)tot->tokens / dt / 1e6 : 0.0, threads);
    fflush(stdout);
}

/* Reads the next batch: its size, with *more cleared at the end of the
 * input. A read error ends the batch early and is kept in src_err (rc -1 in
 * *src_rc), so that the documents before it are still checked first. */
static int read_batch(prep_source *src, batch_doc *batch, const options *o, int *more, int *src_rc,
                      tg_err *src_err) {
    size_t bytes = 0, max_bytes = (size_t)o->threads * BATCH_BYTES_PER_THREAD;
    int n = 0;
    while (n < o->batch_docs && bytes < max_bytes) {
        int rc = prep_source_next(src, &batch[n].doc, src_err);
        if (rc <= 0) {
            *more = 0;
            *src_rc = rc;
            break;
        }
        bytes += batch[n].doc.text ? batch[n].doc.len : batch[n].doc.size_hint;
        n++;
    }
    return n;
}

static int encode_all(const tokenizer *t, const options *o, shard_writer *w, run_totals *tot, tg_err *e) {
    prep_source src;
    prep_source_init(&src, o->inputs, o->n_inputs, o->jsonl_field);
    batch_doc *batch = tg_calloc((size_t)o->batch_docs, sizeof *batch, "document batch");
    int more = 1, rc = 0, threads = (int)o->threads;
    while (more && rc == 0) {
        int src_rc = 1;
        int n = read_batch(&src, batch, o, &more, &src_rc, e);
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
        for (int i = 0; i < n; i++) encode_doc(t, &batch[i]);
        rc = write_batch(batch, n, w, tot, e);
        if (rc == 0 && src_rc < 0) rc = -1; /* e holds the read error */
        free_batch(batch, n);
        if (rc == 0) report_progress(tot, 0, threads);
    }
    free(batch);
    prep_source_close(&src);
    if (rc == 0 && tot->docs == 0)
        rc = tg_fail(e, "the inputs hold no document (an empty list or JSON Lines file)");
    return rc;
}

static void warn_stale(const shard_writer *w) {
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

/* PREFIX.lock, held to the end: two runs into one prefix would interleave
 * their shards' names and leave shards that mix both streams. */
static int lock_prefix(const char *prefix, fs_lock *lock, tg_err *e) {
    char path[4200];
    snprintf(path, sizeof path, "%s.lock", prefix);
    const int rc = fs_lock_take(path, lock, e);
    if (rc == 1) tg_wrap(e, "--out '%s' is in use by another prepare run (wait for it to end, or choose another prefix)", prefix);
    return rc ? -1 : 0;
}

static int write_shards(const tokenizer *t, const options *o, tg_err *e) {
    shard_writer w;
    shard_writer_init(&w, o->out, o->val_tokens, o->shard_tokens);
    run_totals tot = {.t0 = now_s()};
    tot.last_report = tot.t0;
    if (encode_all(t, o, &w, &tot, e) || shard_writer_finish(&w, e)) {
        shard_writer_abort(&w);
        shard_writer_free(&w);
        return -1;
    }
    for (size_t i = 0; i < w.n_outs; i++)
        printf("%s: wrote %s (%" PRId64 " tokens)\n", PROG, w.outs[i].final, w.outs[i].count);
    report_progress(&tot, 1, (int)o->threads);
    if (w.n_train == 0)
        fprintf(stderr,
                "%s: warning: all %" PRId64 " tokens went to the val shard (--val-tokens %" PRId64 "); no train shard "
                "written: give a smaller --val-tokens (0: none) so that some go to training\n",
                PROG, tot.tokens, o->val_tokens);
    warn_stale(&w);
    shard_writer_free(&w);
    return 0;
}

static int run_prepare(const tokenizer *t, const options *o, tg_err *e) {
    fs_lock lock;
    if (lock_prefix(o->out, &lock, e)) return -1;
    const int rc = write_shards(t, o, e);
    fs_unlock(&lock);
    return rc;
}

/* ---- --decode ----------------------------------------------------------- */

static uint32_t get_le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Checks a shard's header against its size and writes its tokens' bytes to stdout. */
static int decode_shard(const tokenizer *t, const char *path, tg_err *e) {
    char *buf;
    size_t len;
    if (prep_read_whole(path, &buf, &len, e)) return -1;
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
    /* Past the file-size limit (ulimit -f) a shard write fails with EFBIG,
     * naming the shard; the default SIGXFSZ would kill without a word. */
    if (signal(SIGXFSZ, SIG_IGN) == SIG_ERR) {
        tg_fail(&e, "cannot ignore SIGXFSZ: %s", strerror(errno));
        tg_die(PROG, &e);
    }
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
