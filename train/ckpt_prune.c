/* out.keep_last: after a save, the older checkpoints beyond the newest
 * keep_last are removed, except those at multiples of out.keep_every (as
 * llm.c's -nk and -nm). Only what train_gpt itself wrote is removed: a
 * checkpoint directory holding anything else (a file of the user's, a
 * link, a subdirectory) is kept with a warning, and a step_XXXXXXXX that is
 * a link is never followed. A checkpoint is renamed before its files go, so
 * a crash midway leaves no partial checkpoint under a checkpoint's name.
 * Failures warn: a save that worked stays a success. Also the leftovers of
 * interrupted saves (ckpt_clear_leftovers), by the same rule. */
#include "train/ckpt_prune.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train/run.h"
#include "util/fs.h"

#define REMOVING ".removing" /* the suffix of a checkpoint being removed */

static bool ckpt_file(const char *name) {
    for (size_t i = 0; i < ckpt_n_files; i++)
        if (strcmp(name, ckpt_file_names[i]) == 0) return true;
    return false;
}

/* The first entry of the open checkpoint dir d that train_gpt did not write
 * (not one of ckpt_file_names, or not a regular file) into `odd`; false if none. */
static bool holds_other(DIR *d, char *odd, size_t n) {
    struct dirent *ent;
    struct stat sb;
    while ((ent = readdir(d)) != NULL) {
        if (strcmp(ent->d_name, ".") == 0 || strcmp(ent->d_name, "..") == 0) continue;
        if (!ckpt_file(ent->d_name) || fstatat(dirfd(d), ent->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 ||
            !S_ISREG(sb.st_mode)) {
            snprintf(odd, n, "%s", ent->d_name);
            return true;
        }
    }
    return false;
}

/* Directory `name` of parent opened for reading, never through a link;
 * NULL with errno set when it cannot be. */
static DIR *open_subdir(int parent, const char *name) {
    const int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
    if (fd < 0) return NULL;
    DIR *d = fdopendir(fd);
    if (!d) {
        const int err = errno;
        close(fd);
        errno = err;
    }
    return d;
}

/* Removes the files of dir `name` of parent (the open out.dir), then the
 * dir; 0, or -1 after a warning saying why it stays (in part). */
static int remove_files_and_dir(int parent, const char *out_dir, const char *name) {
    DIR *d = open_subdir(parent, name);
    if (!d) {
        tg_warn(PROG, "%s/%s: cannot open it to remove it (out.keep_last): %s", out_dir, name, strerror(errno));
        return -1;
    }
    int rc = 0;
    for (size_t i = 0; i < ckpt_n_files; i++)
        if (unlinkat(dirfd(d), ckpt_file_names[i], 0) != 0 && errno != ENOENT) rc = -1;
    closedir(d);
    if (rc == 0 && unlinkat(parent, name, AT_REMOVEDIR) == 0) return 0;
    tg_warn(PROG, "%s/%s: could not be removed whole (out.keep_last): %s", out_dir, name, strerror(errno));
    return -1;
}

/* Records name in kept; false when it was there already. */
static bool first_time_kept(ckpt_kept *kept, const char *name) {
    for (int i = 0; i < kept->n; i++)
        if (strcmp(kept->names[i], name) == 0) return false;
    if (kept->n == kept->cap) {
        kept->cap = kept->cap ? 2 * kept->cap : 8;
        kept->names = tg_realloc(kept->names, (size_t)kept->cap * sizeof *kept->names, "kept checkpoints");
    }
    const size_t len = strlen(name) + 1;
    kept->names[kept->n] = memcpy(tg_malloc(len, "kept checkpoint"), name, len);
    kept->n++;
    return true;
}

void ckpt_kept_free(ckpt_kept *kept) {
    for (int i = 0; i < kept->n; i++) free(kept->names[i]);
    free(kept->names);
    *kept = (ckpt_kept){0};
}

/* Whether checkpoint `name` of parent holds only what train_gpt writes;
 * warns naming the first thing that is not, the first time this run keeps
 * it for that (kept). */
static bool only_ours(int parent, const char *out_dir, const char *name, ckpt_kept *kept) {
    DIR *d = open_subdir(parent, name);
    char odd[256];
    if (!d) {
        tg_warn(PROG, "%s/%s: kept (out.keep_last): cannot open it: %s", out_dir, name, strerror(errno));
        return false;
    }
    const bool other = holds_other(d, odd, sizeof odd);
    closedir(d);
    if (other && first_time_kept(kept, name))
        tg_warn(PROG, "%s/%s: kept (out.keep_last): it holds '%s', which train_gpt did not write", out_dir, name, odd);
    return !other;
}

/* Removes checkpoint `name`: first renamed to NAME.removing (no longer a
 * checkpoint's name, so a crash midway never leaves a partial checkpoint
 * that a resume could pick), then its files and itself. */
static int remove_checkpoint(int parent, const char *out_dir, const char *name, ckpt_kept *kept) {
    char doomed[64];
    snprintf(doomed, sizeof doomed, "%s" REMOVING, name);
    if (!only_ours(parent, out_dir, name, kept)) return -1;
    if (renameat(parent, name, parent, doomed) != 0) {
        tg_warn(PROG, "%s/%s: kept (out.keep_last): cannot rename it: %s", out_dir, name, strerror(errno));
        return -1;
    }
    return remove_files_and_dir(parent, out_dir, doomed);
}

/* What an earlier prune left when it stopped midway: STEP.removing dirs
 * holding only our files. */
static void finish_earlier_removals(DIR *d, const char *out_dir, ckpt_kept *kept) {
    struct dirent *ent;
    struct stat sb;
    char name[300];
    while ((ent = readdir(d)) != NULL) {
        const size_t len = strlen(ent->d_name), suffix = strlen(REMOVING);
        if (len <= suffix || len - suffix >= sizeof name || strcmp(ent->d_name + len - suffix, REMOVING) != 0) continue;
        snprintf(name, sizeof name, "%.*s", (int)(len - suffix), ent->d_name);
        if (ckpt_step_of_name(name) < 0 || fstatat(dirfd(d), ent->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 ||
            !S_ISDIR(sb.st_mode) || !only_ours(dirfd(d), out_dir, ent->d_name, kept))
            continue;
        remove_files_and_dir(dirfd(d), out_dir, ent->d_name);
    }
    rewinddir(d);
}

static int by_step_descending(const void *a, const void *b) {
    const int x = *(const int *)a, y = *(const int *)b;
    return (x < y) - (x > y);
}

/* The steps of out_dir's checkpoint directories (links left out), newest
 * first; *n of them, NULL when there are none or the folder cannot be read. */
static int *checkpoint_steps(DIR *d, int *n) {
    int *steps = NULL, cap = 0;
    struct dirent *ent;
    struct stat sb;
    *n = 0;
    while ((ent = readdir(d)) != NULL) {
        const int step = ckpt_step_of_name(ent->d_name);
        if (step < 0 || fstatat(dirfd(d), ent->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(sb.st_mode)) continue;
        if (*n == cap) steps = tg_realloc(steps, (size_t)(cap = cap ? 2 * cap : 16) * sizeof *steps, "checkpoint steps");
        steps[(*n)++] = step;
    }
    if (*n) qsort(steps, (size_t)*n, sizeof *steps, by_step_descending);
    return steps;
}

int ckpt_prune(const char *out_dir, int keep_last, int keep_every, ckpt_kept *kept) {
    if (keep_last <= 0) return 0;
    DIR *d = opendir(out_dir);
    if (!d) {
        tg_warn(PROG, "%s: cannot list the checkpoints to apply out.keep_last: %s", out_dir, strerror(errno));
        return 0;
    }
    finish_earlier_removals(d, out_dir, kept);
    int n, removed = 0;
    int *steps = checkpoint_steps(d, &n);
    for (int i = keep_last; i < n; i++) {
        char name[32];
        if (keep_every > 0 && steps[i] % keep_every == 0) continue;
        snprintf(name, sizeof name, "step_%08d", steps[i]);
        if (remove_checkpoint(dirfd(d), out_dir, name, kept) == 0) {
            printf("removed %s/%s (out.keep_last = %d)\n", out_dir, name, keep_last);
            removed++;
        }
    }
    free(steps);
    closedir(d);
    return removed;
}

/* Whether name is what an interrupted save leaves: STEP.tmp.XXXXXX (or
 * STEP.tmp, the fixed name of earlier versions). */
static bool leftover_name(const char *name) {
    const char *dot = strchr(name, '.');
    char step[32];
    if (!dot || dot - name >= (long)sizeof step || strncmp(dot, ".tmp", 4) != 0 || (dot[4] && dot[4] != '.')) return false;
    snprintf(step, sizeof step, "%.*s", (int)(dot - name), name);
    return ckpt_step_of_name(step) >= 0;
}

void ckpt_clear_leftovers(const char *out_dir) {
    DIR *d = opendir(out_dir);
    if (!d) return; /* a new out.dir: nothing left over */
    struct dirent *ent;
    char path[4400];
    tg_err e;
    while ((ent = readdir(d)) != NULL) {
        if (!leftover_name(ent->d_name)) continue;
        snprintf(path, sizeof path, "%s/%s", out_dir, ent->d_name);
        if (fs_remove_owned_dir(path, ckpt_file_names, ckpt_n_files, &e))
            tg_warn(PROG, "%s (the leftover of an interrupted save is left as it is)", e.msg);
    }
    closedir(d);
}
