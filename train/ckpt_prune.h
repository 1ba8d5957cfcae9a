/* Removing old checkpoints (out.keep_last, out.keep_every). */
#ifndef TRAIN_CKPT_PRUNE_H
#define TRAIN_CKPT_PRUNE_H

/* The checkpoints a run's prunes kept for holding files train_gpt did not
 * write, so that each is named once a run, not again at every save
 * (zero-initialised; ckpt_kept_free releases it). */
typedef struct ckpt_kept {
    char **names;
    int n, cap;
} ckpt_kept;

/* Keeps out_dir's newest keep_last checkpoints and those whose step is a
 * multiple of keep_every (0: none), and removes the others that hold only
 * what train_gpt writes; says so on stdout, warns (stderr) about any it
 * keeps or cannot remove (one kept for a file of its own: only the first
 * time, as recorded in kept). keep_last 0 keeps all. Returns how many it
 * removed. Call it on the writer (global rank 0) after a save. */
int ckpt_prune(const char *out_dir, int keep_last, int keep_every, ckpt_kept *kept);
void ckpt_kept_free(ckpt_kept *kept);

/* Removes what interrupted saves left in out_dir (STEP.tmp.XXXXXX
 * directories holding only checkpoint files); warns naming any it leaves:
 * a link (never followed), or one holding anything else. Call it on the
 * writer while holding out.dir's lock, before the first save. */
void ckpt_clear_leftovers(const char *out_dir);

#endif
