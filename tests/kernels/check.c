/* The CPU kernel checks' helpers (tests/kernels/check.h). */
#include "tests/kernels/check.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/rng.h"

void report(tally *t, int ok, const char *name, const char *fmt, ...) {
    if (ok) {
        printf("ok %s\n", name);
        t->passed++;
        return;
    }
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    printf("not ok %s - %s\n", name, why);
    t->failed++;
}

/* ---- helpers ---- */
float *randf(size_t n, uint64_t stream, float scale) {
    float *x = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = scale * (2.0f * rng_uniform(7, stream, i) - 1.0f);
    return x;
}
double *to_d(const float *x, size_t n) {
    double *d = malloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++) d[i] = x[i];
    return d;
}
float *poisoned(size_t n) {
    float *x = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = NAN;
    return x;
}
/* Largest |got - want| / (atol + rtol*|want|); <= 1 passes. NaN fails. */
double mismatch(const float *got, const double *want, size_t n, double rtol, double atol, size_t *where) {
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double r = fabs((double)got[i] - want[i]) / (atol + rtol * fabs(want[i]));
        if (!(r <= worst)) { worst = isnan(r) ? INFINITY : r; *where = i; }
    }
    return worst;
}
void expect_close(tally *t, const char *name, const float *got, const double *want, size_t n, double rtol, double atol) {
    size_t at = 0;
    double m = mismatch(got, want, n, rtol, atol, &at);
    report(t, m <= 1.0, name, "element %zu: got %.9g want %.9g (%.2fx tolerance)", at, got[at], want[at], m);
}

/* ---- finite differences: d/dx of sum(f(x) * R) in double ---- */
double *fd_grad(fwd_d f, void *ctx, const double *x0, size_t nx, const double *R, size_t ny, double h) {
    double *x = malloc(nx * sizeof(double)), *y = malloc(ny * sizeof(double)), *g = malloc(nx * sizeof(double));
    memcpy(x, x0, nx * sizeof(double));
    for (size_t i = 0; i < nx; i++) {
        double keep = x[i], lp = 0, lm = 0;
        x[i] = keep + h;
        f(x, y, ctx);
        for (size_t j = 0; j < ny; j++) lp += y[j] * R[j];
        x[i] = keep - h;
        f(x, y, ctx);
        for (size_t j = 0; j < ny; j++) lm += y[j] * R[j];
        x[i] = keep;
        g[i] = (lp - lm) / (2 * h);
    }
    free(x); free(y);
    return g;
}

