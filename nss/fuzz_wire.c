/* libFuzzer target for what libnss_xign reads from elsewhere: xignd's answer, a line of /etc/passwd or /etc/group,
 * a name from the caller, and the queries it makes of them (make fuzz builds it as the target nss-wire). */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "xign_nss_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int status = xign_nss_parse_answer(data, size);
    assert(status == XIGN_NSS_MALFORMED || (status >= XIGN_NSS_FOUND && status <= XIGN_NSS_UNAVAILABLE));
    assert(status == XIGN_NSS_MALFORMED || size == XIGN_NSS_HEADER);

    (void)xign_nss_line_matches((const char *)data, size, "alice", 1879048192u, 1);
    (void)xign_nss_line_matches((const char *)data, size, NULL, 0, 1);

    char *name = malloc(size + 1);
    if (name == NULL) return 0;
    memcpy(name, data, size);
    name[size] = '\0';
    if (xign_nss_valid_name(name)) {
        uint8_t query[XIGN_NSS_QUERY_MAX];
        size_t length = xign_nss_name_query(name, query);
        assert(length == XIGN_NSS_HEADER + strlen(name) && length <= sizeof(query));
        assert(memcmp(query + XIGN_NSS_HEADER, name, strlen(name)) == 0);
    }
    free(name);
    if (size >= 4) {
        uint32_t id = (uint32_t)data[0] << 24 | (uint32_t)data[1] << 16 | (uint32_t)data[2] << 8 | data[3];
        uint8_t query[XIGN_NSS_QUERY_MAX];
        assert(xign_nss_id_query(id, query) == XIGN_NSS_HEADER + 4 && memcmp(query + XIGN_NSS_HEADER, data, 4) == 0);
    }
    return 0;
}
