/* The NSS module's wire to xignd and its reading of /etc's files: the parts that take bytes from elsewhere, kept
 * apart so the fuzz target (fuzz_wire.c) runs them alone. Sources/XignProtocol/DirectoryQuery.swift is the other
 * end of the wire and describes its layout. */
#ifndef XIGN_NSS_WIRE_H
#define XIGN_NSS_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define XIGN_NSS_VERSION 1
#define XIGN_NSS_HEADER 6
#define XIGN_NSS_MAX_NAME 32
#define XIGN_NSS_QUERY_MAX (XIGN_NSS_HEADER + XIGN_NSS_MAX_NAME)

enum xign_nss_kind { XIGN_NSS_NAME = 1, XIGN_NSS_ID = 2 };
enum xign_nss_answer { XIGN_NSS_FOUND = 0, XIGN_NSS_NOT_FOUND = 1, XIGN_NSS_UNAVAILABLE = 2, XIGN_NSS_MALFORMED = -1 };

/* The manager's numbers: never below 65536 or above 2^31 - 2 (UnixIdRange.allowed). */
#define XIGN_NSS_MIN_ID 65536u
#define XIGN_NSS_MAX_ID 2147483646u

/* Whether `name` is a login name the manager can give (LoginNameValidator): [a-z_][a-z0-9_.-]*, at most 32 bytes. */
int xign_nss_valid_name(const char *name);

/* Writes the query for a name (valid, see above) into `out` (XIGN_NSS_QUERY_MAX bytes); returns its length. */
size_t xign_nss_name_query(const char *name, uint8_t *out);
/* Writes the query for an id into `out`; returns its length (10). */
size_t xign_nss_id_query(uint32_t id, uint8_t *out);

/* The answer's status, or XIGN_NSS_MALFORMED for anything that is not exactly one answer of this version. */
int xign_nss_parse_answer(const uint8_t *bytes, size_t length);

/* Whether one line of /etc/passwd or /etc/group names `name` (when not NULL) or has the number `id` in its third
 * field (when `match_id`). NIS's + and - lines and broken lines match nothing. */
int xign_nss_line_matches(const char *line, size_t length, const char *name, uint32_t id, int match_id);

#endif
