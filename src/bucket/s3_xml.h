/*
 * s3_xml.h: the little XML the S3 backend reads: the elements of ListObjectsV2,
 * InitiateMultipartUpload, CompleteMultipartUpload and Error answers. Not a general
 * XML parser: it finds <Name>text</Name> elements (no attributes, no nesting of the
 * same name) inside a bounded buffer and decodes the five entities and character
 * references; anything else is refused, never read past the buffer.
 */
#ifndef HANU_S3_XML_H
#define HANU_S3_XML_H

#include <stddef.h>
#include <stdint.h>

typedef struct s3_xml_span {
    const char *p;
    size_t len;
} s3_xml_span;

/* The first <tag>...</tag> in xml at or after *from: its content in *out and *from
   moved past it. 0 when found, -1 when not. */
int s3_xml_element(s3_xml_span xml, const char *tag, size_t *from, s3_xml_span *out);
/* The text of an element, entities decoded, NUL-terminated in out (cap bytes). 0, or
   -1 on a malformed entity, a NUL or a text longer than cap - 1. */
int s3_xml_text(s3_xml_span text, char *out, size_t cap);
/* The text of the first <tag> in xml into out; -1 when absent or malformed. */
int s3_xml_first_text(s3_xml_span xml, const char *tag, char *out, size_t cap);

#define S3_LIST_TOKEN_MAX 1024
#define S3_LIST_KEY_MAX 1024

/* One ListObjectsV2 page: fn is called for each <Contents> (key, size), in document
   order; non-zero from fn stops with that value. *truncated and next_token (empty when
   none) say whether another page follows. 0, fn's non-zero value, or -1 when the page
   is malformed (a Contents without Key or Size, a size that is not a number, a key or
   token too long). */
typedef int (*s3_list_entry_fn)(void *ctx, const char *key, uint64_t size);
int s3_xml_parse_list(s3_xml_span xml, s3_list_entry_fn fn, void *ctx, int *truncated,
                      char next_token[S3_LIST_TOKEN_MAX]);

#endif
