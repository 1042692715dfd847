/*
 * s3_xml.c: finding elements and decoding text in S3's XML answers (s3_xml.h).
 * Every search is bounded by the span it is given; the answers come from the
 * network and are fuzzed (fuzz/fuzz_bucket_list_xml.c).
 */
#include "bucket/s3_xml.h"

#include <string.h>

/* memmem bounded to the span; returns the offset or -1. */
static long find(s3_xml_span s, size_t from, const char *needle, size_t n)
{
    if (from > s.len || n > s.len - from) return -1;
    const char *hit = memmem(s.p + from, s.len - from, needle, n);
    return hit ? (long)(hit - s.p) : -1;
}

int s3_xml_element(s3_xml_span xml, const char *tag, size_t *from, s3_xml_span *out)
{
    char open[72], close[72];
    size_t tlen = strlen(tag);
    if (tlen == 0 || tlen + 4 > sizeof open) return -1;
    open[0] = '<';
    memcpy(open + 1, tag, tlen);
    open[tlen + 1] = '>';
    close[0] = '<';
    close[1] = '/';
    memcpy(close + 2, tag, tlen);
    close[tlen + 2] = '>';
    long start = find(xml, *from, open, tlen + 2);
    if (start < 0) return -1;
    size_t content = (size_t)start + tlen + 2;
    long end = find(xml, content, close, tlen + 3);
    if (end < 0) return -1;
    out->p = xml.p + content;
    out->len = (size_t)end - content;
    *from = (size_t)end + tlen + 3;
    return 0;
}

static int put_utf8(uint32_t c, char *out, size_t cap, size_t *n)
{
    char tmp[4];
    size_t k;
    if (c == 0 || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return -1;
    if (c < 0x80) tmp[0] = (char)c, k = 1;
    else if (c < 0x800) tmp[0] = (char)(0xC0 | (c >> 6)), tmp[1] = (char)(0x80 | (c & 0x3F)), k = 2;
    else if (c < 0x10000)
        tmp[0] = (char)(0xE0 | (c >> 12)), tmp[1] = (char)(0x80 | ((c >> 6) & 0x3F)), tmp[2] = (char)(0x80 | (c & 0x3F)),
        k = 3;
    else
        tmp[0] = (char)(0xF0 | (c >> 18)), tmp[1] = (char)(0x80 | ((c >> 12) & 0x3F)),
        tmp[2] = (char)(0x80 | ((c >> 6) & 0x3F)), tmp[3] = (char)(0x80 | (c & 0x3F)), k = 4;
    if (*n + k >= cap) return -1;
    memcpy(out + *n, tmp, k);
    *n += k;
    return 0;
}

/* A character reference's digits, "#123" or "#x7B", between '&' and ';'. */
static int char_ref(const char *p, size_t len, uint32_t *c)
{
    int hex = len > 1 && (p[1] == 'x' || p[1] == 'X');
    size_t i = hex ? 2 : 1;
    if (len <= i || len > i + 8) return -1;
    uint32_t v = 0;
    for (; i < len; i++) {
        char d = p[i];
        int digit = d >= '0' && d <= '9' ? d - '0'
                    : hex && d >= 'a' && d <= 'f' ? d - 'a' + 10
                    : hex && d >= 'A' && d <= 'F' ? d - 'A' + 10 : -1;
        if (digit < 0) return -1;
        v = v * (hex ? 16 : 10) + (uint32_t)digit;
        if (v > 0x10FFFF) return -1;
    }
    *c = v;
    return 0;
}

int s3_xml_text(s3_xml_span text, char *out, size_t cap)
{
    static const struct { const char *name; char c; } entities[] = {
        { "amp", '&' }, { "lt", '<' }, { "gt", '>' }, { "quot", '"' }, { "apos", '\'' },
    };
    if (cap == 0) return -1;
    size_t n = 0;
    for (size_t i = 0; i < text.len; i++) {
        char c = text.p[i];
        if (c == 0 || c == '<') return -1;
        if (c != '&') {
            if (n + 1 >= cap) return -1;
            out[n++] = c;
            continue;
        }
        const char *semi = memchr(text.p + i + 1, ';', text.len - i - 1);
        if (!semi) return -1;
        const char *name = text.p + i + 1;
        size_t nlen = (size_t)(semi - name);
        uint32_t code = 0;
        int known = 0;
        for (size_t e = 0; e < sizeof entities / sizeof entities[0]; e++)
            if (strlen(entities[e].name) == nlen && memcmp(entities[e].name, name, nlen) == 0)
                code = (uint8_t)entities[e].c, known = 1;
        if (!known && (nlen == 0 || name[0] != '#' || char_ref(name, nlen, &code) != 0)) return -1;
        if (put_utf8(code, out, cap, &n) != 0) return -1;
        i += nlen + 1;
    }
    out[n] = 0;
    return 0;
}

int s3_xml_first_text(s3_xml_span xml, const char *tag, char *out, size_t cap)
{
    size_t from = 0;
    s3_xml_span el;
    if (s3_xml_element(xml, tag, &from, &el) != 0) return -1;
    return s3_xml_text(el, out, cap);
}

static int parse_size(const char *s, uint64_t *out)
{
    uint64_t v = 0;
    if (!*s) return -1;
    for (; *s; s++) {
        uint64_t digit = (uint64_t)(*s - '0');
        if (*s < '0' || *s > '9' || v > (UINT64_MAX - digit) / 10) return -1;
        v = v * 10 + digit;
    }
    *out = v;
    return 0;
}

int s3_xml_parse_list(s3_xml_span xml, s3_list_entry_fn fn, void *ctx, int *truncated,
                      char next_token[S3_LIST_TOKEN_MAX])
{
    char text[S3_LIST_KEY_MAX + 1], flag[8];
    *truncated = 0;
    next_token[0] = 0;
    /* Keys are escaped text, so no element name can hide inside one. */
    if (find(xml, 0, "<ListBucketResult", 17) < 0) return -1;
    if (s3_xml_first_text(xml, "IsTruncated", flag, sizeof flag) != 0) return -1;
    *truncated = strcmp(flag, "true") == 0;
    if (*truncated && (s3_xml_first_text(xml, "NextContinuationToken", next_token, S3_LIST_TOKEN_MAX) != 0 ||
                       !next_token[0]))
        return -1;
    size_t from = 0;
    s3_xml_span el;
    while (s3_xml_element(xml, "Contents", &from, &el) == 0) {
        uint64_t size;
        if (s3_xml_first_text(el, "Size", text, sizeof text) != 0 || parse_size(text, &size) != 0) return -1;
        if (s3_xml_first_text(el, "Key", text, sizeof text) != 0) return -1;
        int rc = fn(ctx, text, size);
        if (rc) return rc;
    }
    return 0;
}
