/*
 * docs_expire.c: expiring documents (docs.h, docs/API.md "Expiring documents"):
 * a collection's option naming the field that holds each document's expiry, kept
 * as a record of this layer in the store's system database (so it is in the log,
 * replicated and in the bucket like any write), and the test of one document
 * against it.
 *
 * The option record: key "copt\0<collection>", value {"expire_after_field":"f"}.
 * A document expires when its top-level member f is a number of seconds since
 * 1970 (fractions allowed) or an RFC 3339 date-time string, at or before now. A
 * document whose f is missing, null, or of another type never expires (MongoDB's
 * TTL indexes skip such documents too).
 */
#include "docs/docs.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "json/json.h"

#define OPTIONS_PREFIX "copt"   /* with its NUL: 5 bytes */

size_t docs_options_key(const char *collection, char out[DOCS_OPTIONS_KEY_MAX])
{
    size_t cl = strlen(collection);
    memcpy(out, OPTIONS_PREFIX, sizeof OPTIONS_PREFIX);
    memcpy(out + sizeof OPTIONS_PREFIX, collection, cl);
    return sizeof OPTIONS_PREFIX + cl;
}

int docs_expire_field_valid(const char *f, size_t len)
{
    if (len == 0 || len > DOCS_EXPIRE_FIELD_MAX) return 0;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)f[i] < 0x20) return 0;
    return 1;
}

int docs_options_record(const char *field, size_t len, hanu_buf *out)
{
    hanu_buf_reset(out);
    json_writer w;
    json_writer_init(&w, out);
    json_write_object_begin(&w);
    json_write_key(&w, "expire_after_field", 18);
    json_write_string(&w, field, len);
    json_write_object_end(&w);
    return json_writer_status(&w);
}

int docs_expire_field(store *st, const char *collection, char field[DOCS_EXPIRE_FIELD_MAX + 1])
{
    char key[DOCS_OPTIONS_KEY_MAX];
    size_t kl = docs_options_key(collection, key);
    uint64_t token;
    field[0] = '\0';
    if (store_lookup(st, STORE_SYSTEM_DB_ID, key, kl, &token) != HANU_OK) return 0;   /* the usual case */
    hanu_buf rec = {0};
    int found = 0;
    if (store_get(st, STORE_SYSTEM_DB_ID, key, kl, &rec, &token) == HANU_OK) {
        json_member m;
        if (json_member_find((const char *)rec.data, rec.len, "expire_after_field", 18, &m, field,
                             DOCS_EXPIRE_FIELD_MAX) == HANU_OK &&
            m.found && m.type == JSON_STRING && m.str_len >= 1 && m.str_len <= DOCS_EXPIRE_FIELD_MAX) {
            field[m.str_len] = '\0';
            found = 1;
        }
    }
    hanu_buf_free(&rec);
    return found;
}

static int digits(const char *s, size_t n, int *out)
{
    int v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return 1;
}

/* Days from 1970-01-01 to y-m-d (proleptic Gregorian; Howard Hinnant's algorithm). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

int docs_time_parse(const char *s, size_t n, int64_t *ms)
{
    int y, mo, d, h, mi, sec;
    /* YYYY-MM-DDTHH:MM:SS */
    if (n < 20 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') || s[13] != ':' ||
        s[16] != ':')
        return HANU_ERR_INVALID;
    if (!digits(s, 4, &y) || !digits(s + 5, 2, &mo) || !digits(s + 8, 2, &d) || !digits(s + 11, 2, &h) ||
        !digits(s + 14, 2, &mi) || !digits(s + 17, 2, &sec))
        return HANU_ERR_INVALID;
    static const int mdays[] = { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
    if (mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] || h > 23 || mi > 59 || sec > 60) return HANU_ERR_INVALID;
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    if (mo == 2 && d == 29 && !leap) return HANU_ERR_INVALID;
    size_t i = 19;
    int frac_ms = 0;
    if (i < n && s[i] == '.') {
        size_t k = ++i;
        int scale = 100;
        while (i < n && s[i] >= '0' && s[i] <= '9') {
            frac_ms += (s[i] - '0') * scale;
            scale /= 10;
            i++;
        }
        if (i == k) return HANU_ERR_INVALID;
    }
    int64_t offset_min = 0;
    if (i < n && (s[i] == 'Z' || s[i] == 'z')) {
        i++;
    } else if (i + 6 == n && (s[i] == '+' || s[i] == '-') && s[i + 3] == ':') {
        int oh, om;
        if (!digits(s + i + 1, 2, &oh) || !digits(s + i + 4, 2, &om) || oh > 23 || om > 59) return HANU_ERR_INVALID;
        offset_min = (s[i] == '-' ? -1 : 1) * (oh * 60 + om);
        i += 6;
    } else {
        return HANU_ERR_INVALID;
    }
    if (i != n) return HANU_ERR_INVALID;
    int64_t secs = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + (sec == 60 ? 59 : sec) - offset_min * 60;
    *ms = secs * 1000 + frac_ms;
    return HANU_OK;
}

int docs_expiry_ms(const char *doc, size_t len, const char *field, int64_t *ms)
{
    json_member m;
    char str[48];
    if (json_member_find(doc, len, field, strlen(field), &m, str, sizeof str) != HANU_OK || !m.found) return 0;
    if (m.type == JSON_NUMBER) {
        char num[64];
        size_t nl = m.end - m.start;
        if (nl >= sizeof num) return 0;
        memcpy(num, doc + m.start, nl);
        num[nl] = '\0';
        double secs = strtod(num, NULL);
        if (!isfinite(secs) || secs > 9.2e15 || secs < -9.2e15) return 0;
        *ms = (int64_t)floor(secs * 1000.0);
        return 1;
    }
    if (m.type == JSON_STRING && m.str_len < sizeof str) return docs_time_parse(str, m.str_len, ms) == HANU_OK;
    return 0;
}

int docs_expired(const char *doc, size_t len, const char *field, uint64_t now_ms)
{
    int64_t at;
    return field && field[0] && docs_expiry_ms(doc, len, field, &at) && at <= (int64_t)now_ms;
}
