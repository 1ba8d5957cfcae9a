/* "Did you mean ...?": the candidate nearest to a mistyped word, for
 * messages about unknown names (config keys). */
#ifndef UTIL_SPELL_H
#define UTIL_SPELL_H

#include <stddef.h>

/* Edits (insertions, deletions, substitutions, swaps of two neighbouring
 * characters) between a and b, counting at most up to `cap` (returns cap
 * when there are at least that many). Case-insensitive. */
int spell_distance(const char *a, const char *b, int cap);

/* The candidate closest to word, or NULL when none is close enough to be a
 * slip: at most 1 edit for words up to 4 characters, 2 up to 8, else 3.
 * Ties go to the earlier candidate. */
const char *spell_nearest(const char *word, const char *const *candidates, size_t n);

#endif
