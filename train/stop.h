/* Stopping on request. SIGTERM, SIGINT (Ctrl-C) and SIGUSR1 (Slurm's
 * --signal=USR1@N warning) ask the run to finish its current step, save a
 * checkpoint and exit non-zero; a second one of them exits at once.
 * The signals are blocked in every thread and taken by one watcher thread
 * with sigwait, so there is no handler and no global flag: the request lives
 * in the stop_watch the caller owns. */
#ifndef TRAIN_STOP_H
#define TRAIN_STOP_H

#include "util/err.h"

typedef struct stop_watch stop_watch;

/* Blocks the signals and starts the watcher. Call it before any other
 * thread exists (OpenMP's included), so that they all inherit the mask. */
stop_watch *stop_watch_start(const char *prog, tg_err *e);

/* The first signal received (SIGTERM, ...), or 0 while none has come. */
int stop_watch_signal(const stop_watch *w);

/* Stops the watcher (the signals stay blocked until exit). */
void stop_watch_end(stop_watch *w);

#endif
