/*
 * docs_ndjson.c: NDJSON import bodies (docs.h, docs/API.md "Import"): the line
 * splitter and the preparation of one line as a document, apart from HTTP and
 * the store so that they are unit-tested and fuzzed alone.
 *
 * A line is the bytes up to LF (a CR before the LF is dropped, so CRLF files
 * load); the last line needs no LF. A line of spaces, tabs and CRs only is
 * blank: counted, skipped. Each other line is a document under docs_prepare's
 * rules, except that an "_id" written by another database is taken as its
 * string: an integer (mongoexport's numeric ids, Elasticsearch's numeric ids)
 * or MongoDB extended JSON {"$oid":"<24 hex digits>"}. The value is then
 * replaced, in place, by the string ("_id":42 is stored as "_id":"42").
 */
#include "docs/docs.h"

#include <stdarg.h>
#include <stdio.h>
#include "json/json.h"

void docs_ndjson_init(docs_ndjson_reader *r, const char *in, size_t len, uint64_t first_line)
{
    *r = (docs_ndjson_reader){ .in = in, .len = len, .line = first_line ? first_line - 1 : 0 };
}

static int blank(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r') return 0;
    return 1;
}

int docs_ndjson_next(docs_ndjson_reader *r, const char **line, size_t *len)
{
    while (r->pos < r->len) {
        const char *p = r->in + r->pos;
        size_t left = r->len - r->pos;
        const char *lf = memchr(p, '\n', left);
        size_t n = lf ? (size_t)(lf - p) : left;
        r->pos += lf ? n + 1 : n;
        r->line++;
        if (blank(p, n)) {
            r->blank++;
            continue;
        }
        if (n && p[n - 1] == '\r') n--;
        *line = p;
        *len = n;
        return 1;
    }
    return 0;
}

static size_t skip_ws(const char *s, size_t i, size_t end)
{
    while (i < end && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
    return i;
}

static int is_hex(char ch)
{
    return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F');
}

/* {"$oid":"<24 hex>"} starting at s[i] (its '{'): the end of the object (past '}')
   and the digits' offset, or 0 when the object is anything else. */
static size_t match_oid(const char *s, size_t i, size_t end, size_t *hex)
{
    static const char key[] = "\"$oid\"";
    i = skip_ws(s, i + 1, end);
    if (end - i < sizeof key - 1 || memcmp(s + i, key, sizeof key - 1)) return 0;
    i = skip_ws(s, i + sizeof key - 1, end);
    if (i == end || s[i] != ':') return 0;
    i = skip_ws(s, i + 1, end);
    if (end - i < 26 || s[i] != '"' || s[i + 25] != '"') return 0;
    for (size_t k = 1; k <= 24; k++)
        if (!is_hex(s[i + k])) return 0;
    *hex = i + 1;
    i = skip_ws(s, i + 26, end);
    return i < end && s[i] == '}' ? i + 1 : 0;
}

/* An integer token: -?[0-9]+ (no fraction, no exponent). */
static int is_integer(const char *s, size_t n)
{
    size_t i = n && s[0] == '-' ? 1 : 0;
    if (i == n) return 0;
    for (; i < n; i++)
        if (s[i] < '0' || s[i] > '9') return 0;
    return 1;
}

/* The line with a foreign "_id" value replaced by its string into out; 0, or
   HANU_ERR_INVALID when "_id" is none of the forms taken. */
static int convert_id(const char *in, size_t len, hanu_buf *out)
{
    json_member m;
    if (json_member_find(in, len, "_id", 3, &m, NULL, 0) != HANU_OK || !m.found) return HANU_ERR_INVALID;
    size_t from = m.start, to, val, vlen;
    if (m.type == JSON_NUMBER && is_integer(in + m.start, m.end - m.start)) {
        to = m.end;
        val = m.start;
        vlen = m.end - m.start;
    } else if (m.type == JSON_OBJECT && (to = match_oid(in, m.start, len, &val)) != 0) {
        vlen = 24;
    } else {
        return HANU_ERR_INVALID;
    }
    hanu_buf_reset(out);
    if (hanu_buf_append(out, in, from) || hanu_buf_append(out, "\"", 1) || hanu_buf_append(out, in + val, vlen) ||
        hanu_buf_append(out, "\"", 1) || hanu_buf_append(out, in + to, len - to))
        return HANU_ERR_NOMEM;
    return HANU_OK;
}

int docs_ndjson_prepare(const char *line, size_t len, uint32_t max_doc, char id[DOCS_ID_MAX + 1], size_t *id_len,
                        docs_id_fn new_id, void *ctx, hanu_buf *out, hanu_buf *scratch, docs_error *e)
{
    *id_len = 0;
    if (len > (size_t)max_doc + 300)   /* before any parse: the line is not read */
        return docs_fail(e, 413, "too_large", "line of %zu bytes; a document may have %u", len, max_doc);
    int rc = docs_prepare(line, len, max_doc, id, id_len, new_id, ctx, out, e);
    if (rc != HANU_ERR_INVALID || strcmp(e->code, "invalid_id") != 0) return rc;
    /* "_id" is not a string (or not a valid id): an integer or an ObjectId is taken. */
    int crc = convert_id(line, len, scratch);
    if (crc == HANU_ERR_NOMEM) return docs_fail(e, 413, "too_large", "out of memory");
    if (crc != HANU_OK) {
        if (strstr(e->message, "must be a string"))
            return docs_fail(e, 400, "invalid_id", "\"_id\" must be a string, an integer or {\"$oid\":\"<24 hex digits>\"}");
        return rc;
    }
    *id_len = 0;
    return docs_prepare((const char *)scratch->data, scratch->len, max_doc, id, id_len, new_id, ctx, out, e);
}
