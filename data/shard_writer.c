#include "data/shard_writer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "data/shard_format.h"
#include "util/fs.h"

void shard_writer_init(shard_writer *w, const char *prefix, int64_t val_tokens, int64_t shard_tokens) {
    *w = (shard_writer){.prefix = prefix, .val_left = val_tokens, .shard_tokens = shard_tokens};
}

void shard_writer_free(shard_writer *w) {
    free(w->outs);
    w->outs = NULL;
}

static void put_le32(unsigned char *p, uint32_t v) {
    for (int k = 0; k < 4; k++) p[k] = (unsigned char)(v >> (8 * k));
}

static int write_header(FILE *f, int64_t count) {
    unsigned char h[SHARD_HEADER_BYTES] = {0};
    put_le32(h, SHARD_MAGIC);
    put_le32(h + 4, SHARD_VERSION);
    put_le32(h + 8, (uint32_t)count);
    return fwrite(h, 1, sizeof h, f) == sizeof h ? 0 : -1;
}

static int writer_open(shard_writer *w, tg_err *e) {
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
    s->count = 0;
    /* FINAL.tmp.XXXXXX, new: never a file of the user's, a link's target or another run's temporary */
    w->f = fs_create_temp(s->final, s->tmp, sizeof s->tmp, e);
    if (!w->f) return -1;
    w->n_outs++;
    if (write_header(w->f, 0)) return tg_fail(e, "cannot write %s: %s", s->tmp, strerror(errno));
    return 0;
}

/* Writes the final header and closes the open shard. */
static int writer_close(shard_writer *w, tg_err *e) {
    shard_out *s = &w->outs[w->n_outs - 1];
    FILE *f = w->f;
    w->f = NULL;
    int bad = fflush(f) || fseek(f, 0, SEEK_SET) || write_header(f, s->count);
    bad |= fclose(f) != 0;
    if (bad) return tg_fail(e, "cannot write %s: %s", s->tmp, strerror(errno));
    if (w->val_left > 0) w->val_left = 0;
    return 0;
}

int shard_writer_push(shard_writer *w, const int32_t *tok, size_t n, tg_err *e) {
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
int shard_writer_finish(shard_writer *w, tg_err *e) {
    if (w->f && writer_close(w, e)) return -1;
    for (size_t i = 0; i < w->n_outs; i++)
        if (rename(w->outs[i].tmp, w->outs[i].final))
            return tg_fail(e, "cannot rename %s to %s: %s", w->outs[i].tmp, w->outs[i].final,
                           strerror(errno));
    return 0;
}

void shard_writer_abort(shard_writer *w) {
    if (w->f) fclose(w->f);
    w->f = NULL;
    for (size_t i = 0; i < w->n_outs; i++) remove(w->outs[i].tmp);
}
