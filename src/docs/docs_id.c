/*
 * docs_id.c: document ids and the "_id" rule (docs.h). Documents are stored as
 * the exact bytes the client sent; when a client gives no top-level "_id", it
 * is inserted as the first member, right after the opening '{', and every
 * other byte is kept. Both helpers validate the whole input (json_member_find)
 * so that an invalid document is never half accepted.
 */
#include "docs/docs.h"

#include "json/json.h"

int docs_id_valid(const char *id, size_t len)
{
    if (len == 0 || len > DOCS_ID_MAX) return 0;
    /* Clients collapse "." and ".." in URLs: ".../docs/.." would name the collection. */
    if (id[0] == '.' && (len == 1 || (len == 2 && id[1] == '.'))) return 0;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)id[i] < 0x20 || id[i] == '/') return 0;
    return 1;
}

void docs_id_new(uint64_t *last_ms, uint64_t *seq, uint64_t now_ms, char out[DOCS_NEW_ID_LEN + 1])
{
    static const char alphabet[] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
    /* The clock may step back: the sequence goes on under the last millisecond. */
    if (now_ms <= *last_ms) now_ms = *last_ms;
    else *seq = 0;
    *last_ms = now_ms;
    uint64_t hi = now_ms & ((1ull << 48) - 1), lo = (*seq)++ & ((1ull << 52) - 1);
    /* 100 bits: hi (48) then lo (52), five bits a character. */
    for (int i = DOCS_NEW_ID_LEN - 1; i >= 0; i--) {
        unsigned val = 0;
        for (int b = 0; b < 5; b++) {
            int pos = i * 5 + b;   /* 0 = most significant */
            unsigned one = pos < 48 ? (unsigned)((hi >> (47 - pos)) & 1) : (unsigned)((lo >> (99 - pos)) & 1);
            val = (val << 1) | one;
        }
        out[i] = alphabet[val];
    }
    out[DOCS_NEW_ID_LEN] = '\0';
}

int docs_id_find(const char *in, size_t len, char *out, size_t cap, size_t *out_len)
{
    json_member m;
    int rc = json_member_find(in, len, "_id", 3, &m, out, cap);
    if (rc) return rc;
    if (!m.found) return HANU_ERR_NOT_FOUND;
    if (m.type != JSON_STRING) return HANU_ERR_INVALID;
    *out_len = m.str_len;
    if (m.str_len > cap) return HANU_ERR_TOO_LARGE;
    if (m.str_len < cap) out[m.str_len] = 0;
    return HANU_OK;
}

int docs_id_insert(const char *in, size_t len, const char *id, size_t id_len, hanu_buf *out)
{
    json_member m;
    int rc = json_member_find(in, len, "_id", 3, &m, NULL, 0);
    if (rc) return rc;
    if (m.found) return HANU_ERR_EXISTS;
    size_t start = out->len;
    if ((rc = hanu_buf_append(out, in, m.brace + 1)) ||
        (rc = hanu_buf_append(out, "\"_id\":", 6)) ||
        (rc = json_escape_string(out, id, id_len)) ||
        (!m.empty && (rc = hanu_buf_append(out, ",", 1))) ||
        (rc = hanu_buf_append(out, in + m.brace + 1, len - m.brace - 1))) {
        out->len = start;
        return rc;
    }
    return HANU_OK;
}
