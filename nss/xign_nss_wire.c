#include "xign_nss_wire.h"

#include <string.h>

int xign_nss_valid_name(const char *name) {
    size_t length = strnlen(name, XIGN_NSS_MAX_NAME + 1);
    if (length == 0 || length > XIGN_NSS_MAX_NAME) return 0;
    if (!(name[0] == '_' || (name[0] >= 'a' && name[0] <= 'z'))) return 0;
    for (size_t i = 1; i < length; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.')) return 0;
    }
    return 1;
}

static void header(uint8_t *out, uint8_t kind, size_t length) {
    out[0] = 'x';
    out[1] = 'n';
    out[2] = XIGN_NSS_VERSION;
    out[3] = kind;
    out[4] = (uint8_t)(length >> 8);
    out[5] = (uint8_t)(length & 0xff);
}

size_t xign_nss_name_query(const char *name, uint8_t *out) {
    size_t length = strnlen(name, XIGN_NSS_MAX_NAME);
    header(out, XIGN_NSS_NAME, length);
    memcpy(out + XIGN_NSS_HEADER, name, length);
    return XIGN_NSS_HEADER + length;
}

size_t xign_nss_id_query(uint32_t id, uint8_t *out) {
    header(out, XIGN_NSS_ID, 4);
    for (int i = 0; i < 4; i++) out[XIGN_NSS_HEADER + i] = (uint8_t)(id >> (24 - 8 * i));
    return XIGN_NSS_HEADER + 4;
}

int xign_nss_parse_answer(const uint8_t *bytes, size_t length) {
    if (length != XIGN_NSS_HEADER || bytes[0] != 'x' || bytes[1] != 'n' || bytes[2] != XIGN_NSS_VERSION) {
        return XIGN_NSS_MALFORMED;
    }
    if (bytes[4] != 0 || bytes[5] != 0 || bytes[3] > XIGN_NSS_UNAVAILABLE) return XIGN_NSS_MALFORMED;
    return bytes[3];
}

int xign_nss_line_matches(const char *line, size_t length, const char *name, uint32_t id, int match_id) {
    if (length == 0 || line[0] == '+' || line[0] == '-') return 0;
    const char *end = line + length;
    const char *colon = memchr(line, ':', length);
    if (colon == NULL) return 0;
    if (name != NULL && (size_t)(colon - line) == strlen(name) && memcmp(line, name, (size_t)(colon - line)) == 0) {
        return 1;
    }
    if (!match_id) return 0;
    const char *second = memchr(colon + 1, ':', (size_t)(end - colon - 1));
    if (second == NULL) return 0;
    const char *digit = second + 1;
    uint64_t value = 0;
    size_t digits = 0;
    while (digit < end && *digit >= '0' && *digit <= '9' && digits < 11) {
        value = value * 10 + (uint64_t)(*digit - '0');
        digit++;
        digits++;
    }
    if (digits == 0 || digits == 11 || (digit < end && *digit != ':' && *digit != '\n')) return 0;
    return value == id;
}
