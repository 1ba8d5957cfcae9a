#include "util/spell.h"

#include <ctype.h>
#include <string.h>

#define SPELL_MAX_LEN 128 /* longer words are never slips of a key name */

int spell_distance(const char *a, const char *b, int cap) {
    const size_t n = strlen(a), m = strlen(b);
    if (n >= SPELL_MAX_LEN || m >= SPELL_MAX_LEN) return cap;
    /* Three rows of the optimal-string-alignment table: two back for swaps. */
    int rows[3][SPELL_MAX_LEN + 1];
    for (size_t j = 0; j <= m; j++) rows[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++) {
        int *cur = rows[i % 3], *prev = rows[(i - 1) % 3], *prev2 = rows[(i + 1) % 3];
        cur[0] = (int)i;
        for (size_t j = 1; j <= m; j++) {
            const int ca = tolower((unsigned char)a[i - 1]), cb = tolower((unsigned char)b[j - 1]);
            int d = prev[j - 1] + (ca != cb);
            if (prev[j] + 1 < d) d = prev[j] + 1;
            if (cur[j - 1] + 1 < d) d = cur[j - 1] + 1;
            if (i > 1 && j > 1 && ca == tolower((unsigned char)b[j - 2]) && tolower((unsigned char)a[i - 2]) == cb &&
                prev2[j - 2] + 1 < d)
                d = prev2[j - 2] + 1;
            cur[j] = d;
        }
    }
    const int d = rows[n % 3][m];
    return d < cap ? d : cap;
}

const char *spell_nearest(const char *word, const char *const *candidates, size_t n) {
    const size_t len = strlen(word);
    const int allowed = len <= 4 ? 1 : len <= 8 ? 2 : 3;
    const char *best = NULL;
    int best_d = allowed + 1;
    for (size_t i = 0; i < n; i++) {
        const int d = spell_distance(word, candidates[i], best_d);
        if (d < best_d) {
            best_d = d;
            best = candidates[i];
        }
    }
    return best;
}
