#ifndef CD_CORE_WORDS_H
#define CD_CORE_WORDS_H

// A word in a comma-separated list ("relu,gelu"): the attribute lists of the
// lowering table, the GPU architectures a plugin was built for.

#include <stdbool.h>
#include <string.h>

// True when word is one entry of list, exactly (no spaces are trimmed).
static inline bool cd_word_in_list(const char *word, const char *list) {
    size_t n = strlen(word);
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && strncmp(p, word, n) == 0) return true;
        if (!end) break;
        p = end + 1;
    }
    return false;
}

#endif // CD_CORE_WORDS_H
