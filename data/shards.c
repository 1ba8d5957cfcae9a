#include "data/shards.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/shard_format.h"
#include "util/rng.h"

typedef struct shard {
    char *path;
    long long tokens;
    long long windows;  /* whole windows this shard holds */
    long long first;    /* index of its first window in sequential order */
} shard;

struct shard_set {
    shard *files;
    int n_files;
    long long window, advance, total_windows, total_tokens;
    bool shuffle;
    uint64_t seed;
    long long perm_epoch;   /* epoch the permutation below belongs to */
    long long *perm;        /* shuffled visiting order (shuffle only) */
};

/* Validates one shard's header against its size and returns its token count. */
static int read_header(const char *path, long long *tokens, tg_err *e) {
    /* Without blocking: opening a FIFO the glob matched would wait forever. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return tg_fail(e, "%s: cannot open shard: %s", path, strerror(errno));
    struct stat st;
    int32_t h[SHARD_HEADER_INTS];
    int rc = 0;
    if (fstat(fd, &st) != 0) rc = tg_fail(e, "%s: cannot stat shard: %s", path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        rc = tg_fail(e, "%s: is %s, not a regular shard file (check data.train / data.val)", path,
                     S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO" : "a device or socket");
    else if (st.st_size < SHARD_HEADER_BYTES)
        rc = tg_fail(e, "%s: too short for a shard header (%lld bytes, need %d)", path, (long long)st.st_size,
                     SHARD_HEADER_BYTES);
    else if (pread(fd, h, sizeof h, 0) != (ssize_t)sizeof h) rc = tg_fail(e, "%s: cannot read the shard header", path);
    else if (h[0] != SHARD_MAGIC)
        rc = tg_fail(e, "%s: bad magic %d in shard header (expected %d): not an llm.c token shard; re-run ./prepare", path,
                     h[0], SHARD_MAGIC);
    else if (h[1] != SHARD_VERSION)
        rc = tg_fail(e, "%s: unsupported shard version %d (expected %d)", path, h[1], SHARD_VERSION);
    else {
        long long body = (long long)st.st_size - SHARD_HEADER_BYTES;
        if (h[2] < 0 || body != 2LL * h[2])
            rc = tg_fail(e, "%s: header token count %d disagrees with the file size (%lld bytes of tokens = %lld tokens%s)",
                         path, h[2], body, body / 2, body % 2 ? " and a half" : "");
        *tokens = h[2];
    }
    close(fd);
    return rc;
}

shard_set *shards_open(const char *pattern, long long window, long long advance, bool shuffle, uint64_t seed, tg_err *e) {
    glob_t g;
    int grc = glob(pattern, 0, NULL, &g);
    if (grc == GLOB_NOMATCH || (grc == 0 && g.gl_pathc == 0)) {
        tg_fail(e, "%s: no shard files match (run ./prepare, or `make data` for the KJV shards)", pattern);
        return NULL;
    }
    if (grc != 0) {
        tg_fail(e, "%s: cannot list shard files", pattern);
        return NULL;
    }
    shard_set *s = tg_calloc(1, sizeof *s, "shard set");
    s->files = tg_calloc(g.gl_pathc, sizeof(shard), "shard list");
    s->window = window;
    s->advance = advance;
    s->shuffle = shuffle;
    s->seed = seed;
    s->perm_epoch = -1;
    for (size_t i = 0; i < g.gl_pathc; i++) { /* glob sorts the names */
        shard *f = &s->files[s->n_files++];
        f->path = strdup(g.gl_pathv[i]);
        if (read_header(f->path, &f->tokens, e) != 0) {
            globfree(&g);
            shards_close(s);
            return NULL;
        }
        f->windows = f->tokens >= window ? (f->tokens - window) / advance + 1 : 0;
        f->first = s->total_windows;
        s->total_windows += f->windows;
        s->total_tokens += f->tokens;
    }
    globfree(&g);
    if (s->total_windows == 0) {
        tg_fail(e, "%s: no shard holds one window of %lld tokens (the largest has %lld); lower train.global_batch or "
                   "model.seq_len, or prepare more text", pattern, window, s->files[0].tokens);
        shards_close(s);
        return NULL;
    }
    return s;
}

void shards_close(shard_set *s) {
    if (!s) return;
    for (int i = 0; i < s->n_files; i++) free(s->files[i].path);
    free(s->files);
    free(s->perm);
    free(s);
}

long long shards_windows_per_epoch(const shard_set *s) { return s->total_windows; }
int shards_count(const shard_set *s) { return s->n_files; }
long long shards_total_tokens(const shard_set *s) { return s->total_tokens; }

void shards_file(const shard_set *s, int i, const char **path, long long *tokens, long long *bytes) {
    *path = s->files[i].path;
    *tokens = s->files[i].tokens;
    *bytes = SHARD_HEADER_BYTES + 2 * s->files[i].tokens; /* read_header checked the file's size against it */
}

/* Fisher-Yates driven by the counter-based generator: the order of an epoch
 * is a pure function of (seed, epoch). */
static void build_permutation(shard_set *s, long long epoch) {
    if (!s->perm) s->perm = tg_malloc((size_t)s->total_windows * sizeof(long long), "shuffle order");
    for (long long i = 0; i < s->total_windows; i++) s->perm[i] = i;
    const uint64_t stream = rng_stream_of("data.shuffle") + (uint64_t)epoch;
    for (long long i = s->total_windows - 1; i > 0; i--) {
        long long j = (long long)(rng_bits(s->seed, stream, (uint64_t)i) % (uint64_t)(i + 1));
        long long t = s->perm[i];
        s->perm[i] = s->perm[j];
        s->perm[j] = t;
    }
    s->perm_epoch = epoch;
}

static const shard *locate_window(const shard_set *s, long long w, long long *start) {
    int lo = 0, hi = s->n_files - 1;
    while (lo < hi) { /* last shard whose first window <= w */
        int mid = (lo + hi + 1) / 2;
        if (s->files[mid].first <= w) lo = mid;
        else hi = mid - 1;
    }
    while (s->files[lo].windows == 0 || w >= s->files[lo].first + s->files[lo].windows) lo++;
    *start = (w - s->files[lo].first) * s->advance;
    return &s->files[lo];
}

int shards_next(shard_set *s, data_pos *pos, int vocab_size, int32_t *out, tg_err *e) {
    if (pos->index >= s->total_windows) {
        pos->epoch++;
        pos->index = 0;
    }
    long long w = pos->index;
    if (s->shuffle) {
        if (s->perm_epoch != pos->epoch) build_permutation(s, pos->epoch);
        w = s->perm[w];
    }
    long long start;
    const shard *f = locate_window(s, w, &start);
    uint16_t *buf = tg_malloc((size_t)s->window * sizeof(uint16_t), "token window");
    int fd = open(f->path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    int rc = 0;
    size_t want = (size_t)s->window * sizeof(uint16_t);
    if (fd < 0) rc = tg_fail(e, "%s: cannot open shard: %s", f->path, strerror(errno));
    else if (pread(fd, buf, want, SHARD_HEADER_BYTES + start * 2) != (ssize_t)want)
        rc = tg_fail(e, "%s: short read at token %lld (was the file truncated while training?)", f->path, start);
    if (fd >= 0) close(fd);
    for (long long i = 0; rc == 0 && i < s->window; i++) {
        if (buf[i] >= vocab_size)
            rc = tg_fail(e, "%s: token %u at position %lld is not below model.vocab_size (%d)", f->path, buf[i], start + i,
                         vocab_size);
        out[i] = buf[i];
    }
    free(buf);
    if (rc == 0) pos->index++;
    return rc;
}
