#ifndef XIGN_CCURL_SHIM_H
#define XIGN_CCURL_SHIM_H
#include <curl/curl.h>

/* curl_easy_setopt and curl_easy_getinfo are variadic and do not import into Swift. */
static inline CURLcode xign_curl_setopt_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode xign_curl_setopt_string(CURL *h, CURLoption o, const char *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode xign_curl_setopt_pointer(CURL *h, CURLoption o, void *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode xign_curl_setopt_write(CURL *h, size_t (*f)(char *, size_t, size_t, void *)) {
    return curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, f);
}
static inline CURLcode xign_curl_response_code(CURL *h, long *code) { return curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, code); }
static inline CURLcode xign_curl_content_type(CURL *h, char **type) { return curl_easy_getinfo(h, CURLINFO_CONTENT_TYPE, type); }
#endif
