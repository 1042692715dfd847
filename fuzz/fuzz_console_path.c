/*
 * fuzz_console_path.c: libFuzzer target for src/console/console.c's reading of
 * request input: the path lookup (console_owns, console_lookup) and the
 * If-None-Match list (console_etag_matches).
 *
 * The first byte splits the input: below 128 the rest is a path, else an
 * If-None-Match value. Checked: a path found names a file of the table and
 * is "/_console/" plus that file's name (or "/_console/" for index.html); a
 * path the console does not own finds nothing; "*" matches every ETag, and a
 * value without quotes matches an ETag appended to it as a list element.
 */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "console/console.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 4096) return 0;
    const char *s = (const char *)data + 1;
    size_t len = size - 1;
    if (data[0] < 128) {
        const console_file *f = console_lookup(s, len);
        if (!console_owns(s, len)) assert(!f);
        if (f) {
            assert(f >= console_files && f < console_files + console_file_count);
            size_t pl = sizeof CONSOLE_PREFIX;   /* with the slash */
            size_t nl = strlen(f->path);
            assert((len == pl + nl && !memcmp(s + pl, f->path, nl)) ||
                   (len == pl && !strcmp(f->path, "index.html")));
        }
        return 0;
    }
    for (size_t i = 0; i < console_file_count; i++) {
        const char *etag = console_files[i].etag;
        int m = console_etag_matches(s, len, etag);
        if (len == 1 && s[0] == '*') assert(m);
        /* the value with the tag appended as a list element always matches */
        size_t el = strlen(etag);
        char *with = malloc(len + el + 2);
        memcpy(with, s, len);
        with[len] = ',';
        memcpy(with + len + 1, etag, el);
        /* a quote in s may open a tag that swallows the appended one (an entity-tag may
           hold commas): without quotes, the appended element always stands alone */
        if (!memchr(s, '"', len)) assert(console_etag_matches(with, len + 1 + el, etag));
        free(with);
    }
    return 0;
}
