#include "train/stop.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct stop_watch {
    sigset_t set;
    pthread_t thread;
    const char *prog;
    atomic_int first; /* written by the watcher, read by the training loop */
};

/* stderr directly: the main thread may hold stdio's locks when the second
 * signal asks for an immediate exit. */
static void say(const char *text) {
    size_t n = strlen(text);
    while (n > 0) {
        ssize_t w = write(STDERR_FILENO, text, n);
        if (w <= 0 && errno != EINTR) return;
        if (w > 0) { text += w; n -= (size_t)w; }
    }
}

static void *watch(void *arg) {
    stop_watch *w = arg;
    for (;;) {
        int sig = 0;
        if (sigwait(&w->set, &sig) != 0) continue;
        char msg[256];
        int expected = 0;
        if (atomic_compare_exchange_strong(&w->first, &expected, sig)) {
            snprintf(msg, sizeof msg, "%s: got SIG%s: finishing this step, then saving a checkpoint and exiting "
                     "(signal again to stop at once, without saving)\n", w->prog, sigabbrev_np(sig));
            say(msg);
            continue;
        }
        snprintf(msg, sizeof msg, "%s: got SIG%s again: stopping now, without saving\n", w->prog, sigabbrev_np(sig));
        say(msg);
        _exit(128 + sig);
    }
    return NULL;
}

stop_watch *stop_watch_start(const char *prog, tg_err *e) {
    stop_watch *w = tg_calloc(1, sizeof *w, "signal watcher");
    w->prog = prog;
    atomic_init(&w->first, 0);
    sigemptyset(&w->set);
    sigaddset(&w->set, SIGTERM);
    sigaddset(&w->set, SIGINT);
    sigaddset(&w->set, SIGUSR1);
    int rc = pthread_sigmask(SIG_BLOCK, &w->set, NULL);
    if (rc == 0) rc = pthread_create(&w->thread, NULL, watch, w);
    if (rc != 0) {
        free(w);
        tg_fail(e, "cannot start the signal watcher: %s", strerror(rc));
        return NULL;
    }
    return w;
}

int stop_watch_signal(const stop_watch *w) { return atomic_load(&((stop_watch *)w)->first); }

void stop_watch_end(stop_watch *w) {
    if (!w) return;
    pthread_cancel(w->thread); /* sigwait is a cancellation point */
    pthread_join(w->thread, NULL);
    free(w);
}
