/* Drives real libpam for tests and benchmarks: pam_start_confdir, a scripted conversation, and facts
 * about the host process. Usage: pam_harness CONFDIR SERVICE USER [RUNS [rhost=HOST] [tty=TTY]]
 * A USER of the form hex:6162 is given to libpam as those bytes, for names that are not valid UTF-8.
 * Answers for prompts are read from stdin, one line each; when they run out the conversation fails.
 * Prints every message the module sends as "[STYLE] text", then "result=N (text)", the number of answers no
 * prompt took ("unused_answers=N": a test that scripted a prompt that never came), and with RUNS > 1
 * the time of each pam_authenticate in microseconds, and whether the host's environment was the same after
 * pam_authenticate and inside every conversation call as before.
 * gdm=EXTENSIONS plays GDM's session worker for GNOME's greeter: GDM_SUPPORTED_PAM_EXTENSIONS=EXTENSIONS in the
 * process environment (GDM puts it only there), and a PAM_BINARY_PROMPT read as GDM reads one: its type byte names
 * CustomJSON among those extensions, its length is the JSON message's. It prints "[JSON protocol version] json"; the
 * next line of stdin is the greeter's reply JSON, or "CANCEL" for a greeter that resets (the conversation fails);
 * "after=SECONDS " before either is a person who answers that much later. */
#define _GNU_SOURCE
#include <endian.h>
#include <security/pam_appl.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

extern char **environ;

/* GDM's messages, declared as gdm's pam-extensions headers declare them (a big-endian length, the extension's index
 * among GDM_SUPPORTED_PAM_EXTENSIONS), kept apart from the module's own declaration so that each checks the other. */
typedef struct {
    uint32_t length;
    unsigned char type;
    unsigned char data[];
} gdm_extension_message;

typedef struct {
    gdm_extension_message header;
    const char protocol_name[64];
    unsigned int version;
    char *json;
} gdm_json_message;

static const char custom_json[] = "org.gnome.DisplayManager.UserVerifier.CustomJSON";
static const char *gdm_extensions;

/* The index of CustomJSON among the advertised extensions, or -1. */
static int custom_json_type(void) {
    if (gdm_extensions == NULL) return -1;
    int index = 0;
    for (const char *p = gdm_extensions; *p != '\0'; index++) {
        size_t length = strcspn(p, " ");
        if (length == strlen(custom_json) && strncmp(p, custom_json, length) == 0) return index;
        p += length;
        p += strspn(p, " ");
    }
    return -1;
}

/* A binary prompt, as GDM's worker takes it: printed, then answered from stdin. Returns a PAM_* code. */
static int answer_json(const struct pam_message *message, struct pam_response *response) {
    const gdm_json_message *request = (const gdm_json_message *)(const void *)message->msg;
    if (request == NULL || be32toh(request->header.length) != sizeof(gdm_json_message)
        || request->header.type != custom_json_type()) {
        printf("[BINARY_PROMPT] not GDM's CustomJSON\n");
        return PAM_CONV_ERR;
    }
    if (memchr(request->protocol_name, '\0', sizeof request->protocol_name) == NULL || request->json == NULL) {
        printf("[BINARY_PROMPT] a CustomJSON message without its protocol or JSON\n");
        return PAM_CONV_ERR;
    }
    printf("[JSON %s %u] %s\n", request->protocol_name, request->version, request->json);
    char *line = NULL;
    size_t size = 0;
    ssize_t n = getline(&line, &size, stdin);
    if (n > 0 && line[n - 1] == '\n') line[--n] = '\0';
    /* "after=SECONDS JSON": a person who answers after that long. */
    char *json = line;
    if (n > 0 && strncmp(line, "after=", 6) == 0) {
        sleep((unsigned)atoi(line + 6));
        json = strchr(line, ' ') != NULL ? strchr(line, ' ') + 1 : line + n;
    }
    if (n < 0 || strcmp(json, "CANCEL") == 0) {
        free(line);
        return PAM_CONV_ERR;
    }
    gdm_json_message *reply = calloc(1, sizeof *reply);
    if (reply == NULL) {
        free(line);
        return PAM_BUF_ERR;
    }
    reply->header.length = htobe32(sizeof *reply);
    reply->header.type = (unsigned char)custom_json_type();
    memcpy((char *)reply->protocol_name, request->protocol_name, strlen(request->protocol_name) + 1);
    reply->version = request->version;
    reply->json = strdup(json);
    free(line);
    response->resp = (char *)(void *)reply;
    return PAM_SUCCESS;
}

static int quiet;
static char **host_environ;
static int conversation_environment_unchanged = 1;

/* The environment as one string, to compare before and after. */
static char *environment_text(void) {
    size_t size = 1;
    for (char **e = environ; *e != NULL; e++) size += strlen(*e) + 1;
    char *text = malloc(size), *end = text;
    if (text == NULL) return NULL;
    for (char **e = environ; *e != NULL; e++) end = stpcpy(stpcpy(end, *e), "\n");
    *end = '\0';
    return text;
}

static int converse(int count, const struct pam_message **messages, struct pam_response **responses, void *data) {
    (void)data;
    if (environ != host_environ) conversation_environment_unchanged = 0;
    struct pam_response *out = calloc((size_t)count, sizeof *out);
    if (out == NULL) return PAM_BUF_ERR;
    for (int i = 0; i < count; i++) {
        const struct pam_message *m = messages[i];
        if (m->msg_style == PAM_BINARY_PROMPT) {
            int rc = answer_json(m, &out[i]);
            if (rc != PAM_SUCCESS) {
                for (int j = 0; j < i; j++) free(out[j].resp);
                free(out);
                return rc;
            }
            continue;
        }
        const char *style = m->msg_style == PAM_PROMPT_ECHO_OFF ? "PROMPT_ECHO_OFF"
                          : m->msg_style == PAM_PROMPT_ECHO_ON ? "PROMPT_ECHO_ON"
                          : m->msg_style == PAM_ERROR_MSG ? "ERROR_MSG" : "TEXT_INFO";
        if (!quiet) printf("[%s] %s\n", style, m->msg);
        if (m->msg_style == PAM_PROMPT_ECHO_OFF || m->msg_style == PAM_PROMPT_ECHO_ON) {
            char *line = NULL;
            size_t size = 0;
            ssize_t n = getline(&line, &size, stdin);
            if (n < 0) {
                free(line);
                for (int j = 0; j < i; j++) free(out[j].resp);
                free(out);
                return PAM_CONV_ERR;
            }
            if (n > 0 && line[n - 1] == '\n') line[n - 1] = '\0';
            out[i].resp = line;
        }
    }
    *responses = out;
    return PAM_SUCCESS;
}

/* "hex:..." as bytes (in place, shorter than the text); anything else as it is. */
static const char *user_bytes(char *text) {
    if (strncmp(text, "hex:", 4) != 0) return text;
    char *in = text + 4, *out = text;
    while (in[0] != '\0' && in[1] != '\0') {
        unsigned value;
        if (sscanf(in, "%2x", &value) != 1) break;
        *out++ = (char)value;
        in += 2;
    }
    *out = '\0';
    return text;
}

static long status_field(const char *name) {
    FILE *f = fopen("/proc/self/status", "r");
    if (f == NULL) return -1;
    char line[256];
    long value = -1;
    size_t length = strlen(name);
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, name, length) == 0) value = strtol(line + length, NULL, 10);
    }
    fclose(f);
    return value;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s CONFDIR SERVICE USER [RUNS]\n", argv[0]);
        return 2;
    }
    /* Line by line, so a test can read the conversation while the module still waits. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    int runs = argc > 4 ? atoi(argv[4]) : 1;
    for (int i = 5; i < argc; i++) {
        if (strncmp(argv[i], "gdm=", 4) == 0) {
            gdm_extensions = argv[i] + 4;
            setenv("GDM_SUPPORTED_PAM_EXTENSIONS", gdm_extensions, 1);
        }
    }
    const char *user = user_bytes(argv[3]);
    quiet = runs > 1;
    struct pam_conv conversation = { converse, NULL };
    long threads_before = status_field("Threads:");
    long rss_before = status_field("VmRSS:");
    int rc = PAM_SUCCESS;
    host_environ = environ;
    char *environment_before = environment_text();
    for (int run = 0; run < runs; run++) {
        pam_handle_t *pamh = NULL;
        struct timespec start, end;
        clock_gettime(CLOCK_MONOTONIC, &start);
        rc = pam_start_confdir(argv[2], user, &conversation, argv[1], &pamh);
        int flags = 0;
        for (int i = 5; i < argc && rc == PAM_SUCCESS; i++) {
            if (strncmp(argv[i], "rhost=", 6) == 0) rc = pam_set_item(pamh, PAM_RHOST, argv[i] + 6);
            else if (strncmp(argv[i], "tty=", 4) == 0) rc = pam_set_item(pamh, PAM_TTY, argv[i] + 4);
            else if (strcmp(argv[i], "silent") == 0) flags |= PAM_SILENT;
        }
        if (rc == PAM_SUCCESS) rc = pam_authenticate(pamh, flags);
        int end_rc = pam_end(pamh, rc);
        clock_gettime(CLOCK_MONOTONIC, &end);
        if (runs > 1) printf("time_us=%ld\n", (end.tv_sec - start.tv_sec) * 1000000L + (end.tv_nsec - start.tv_nsec) / 1000);
        if (end_rc != PAM_SUCCESS) fprintf(stderr, "pam_end: %d\n", end_rc);
    }
    char *environment_after = environment_text();
    int environment_unchanged = environ == host_environ && environment_before != NULL && environment_after != NULL
        && strcmp(environment_before, environment_after) == 0;
    free(environment_before);
    free(environment_after);
    printf("result=%d (%s)\n", rc, pam_strerror(NULL, rc));
    int unused = 0;
    char *line = NULL;
    size_t size = 0;
    while (getline(&line, &size, stdin) >= 0) unused++;
    free(line);
    printf("unused_answers=%d\n", unused);
    printf("environment_unchanged=%d conversation_environment_unchanged=%d\n", environment_unchanged, conversation_environment_unchanged);
    printf("threads_before=%ld threads_after=%ld\n", threads_before, status_field("Threads:"));
    printf("rss_before_kb=%ld rss_after_kb=%ld\n", rss_before, status_field("VmRSS:"));
    return 0;
}
