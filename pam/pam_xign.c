/* pam_xign: the PAM entry points. Everything else happens in XignPAM (Swift) behind xign_pam.h. */
#define _GNU_SOURCE /* strndup, explicit_bzero */
#include <endian.h>
#include <limits.h>
#include <security/pam_modules.h>
#include <security/pam_ext.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <syslog.h>
#include <unistd.h>

#include "xign_pam.h"

extern char **environ;

/*
 * In a setuid host (su, sudo) the caller chose the environment, and libraries on the login's path read it
 * with plain getenv: libtss2 opens TSS2_LOGFILE for its trace, libcurl SSLKEYLOGFILE for TLS secrets, as
 * root. So there the login runs in an environment of our own, and the host's comes back, unchanged, before
 * we return and while the host's conversation function runs. Hosts that are not setuid (sshd, login, gdm)
 * keep theirs. docs/security.md lists what reads which variable, and why the rest is safe.
 */
static char *isolated_environment[] = { "TSS2_LOG=all+none", NULL }; /* TPMLog.setting */
static __thread char **host_environment;

static int caller_controls_environment(void) {
    return getauxval(AT_SECURE) != 0 || getuid() != geteuid() || getgid() != getegid();
}

static void leave_host_environment(void) {
    host_environment = environ;
    environ = isolated_environment;
}

static void return_host_environment(void) {
    environ = host_environment;
    host_environment = NULL;
}

static const char *item(pam_handle_t *pamh, int type) {
    const void *value = NULL;
    if (pam_get_item(pamh, type, &value) != PAM_SUCCESS) return NULL;
    return (const char *)value;
}

/*
 * GNOME's own greeter and lock screen (gnome-shell 51, GDM 50 or later) run the PAM service gdm-switchable-auth and
 * draw a PIN entry or a web login from JSON, GDM's CustomJSON extension. Its message type is its index in the list GDM
 * puts only in the process environment (GDM_SUPPORTED_PAM_EXTENSIONS); nothing reachable from pam_sm_* reads the
 * process environment (docs/design.md), so the number comes from the module argument gdm_json=.
 */
#define CUSTOM_JSON_PROTOCOL "auth-mechanisms"
#define CUSTOM_JSON_REPLY_LIMIT 65536

/* GDM's CustomJSON message (gdm-custom-json-pam-extension.h): a header of a big-endian length and the type, then the
   protocol's name and version and a pointer to the JSON, in the worker's own memory. */
struct custom_json_message {
    uint32_t length;
    unsigned char type;
    unsigned char padding[3];
    char protocol_name[64];
    unsigned int version;
    char *json;
};
_Static_assert(offsetof(struct custom_json_message, protocol_name) == 8, "GDM's header is 8 bytes");
_Static_assert(offsetof(struct custom_json_message, version) == 72, "GDM's version follows the name");
_Static_assert(offsetof(struct custom_json_message, json) == 80, "GDM's JSON pointer is aligned");

int xign_pam_converse_json(void *pamh, int type, const char *json, char **reply) {
    *reply = NULL;
    if (type < 0 || type > UCHAR_MAX) return PAM_CONV_ERR;
    const struct pam_conv *conversation = NULL;
    if (pam_get_item((pam_handle_t *)pamh, PAM_CONV, (const void **)&conversation) != PAM_SUCCESS
        || conversation == NULL || conversation->conv == NULL)
        return PAM_CONV_ERR;
    struct custom_json_message request = {
        .length = htobe32(sizeof request), .type = (unsigned char)type, .version = 1, .json = (char *)json,
    };
    memcpy(request.protocol_name, CUSTOM_JSON_PROTOCOL, sizeof CUSTOM_JSON_PROTOCOL);
    struct pam_message message = { .msg_style = PAM_BINARY_PROMPT, .msg = (const char *)(const void *)&request };
    const struct pam_message *messages[] = { &message };
    struct pam_response *responses = NULL;
    int isolated = host_environment != NULL;
    if (isolated) return_host_environment();
    int rc = conversation->conv(1, messages, &responses, conversation->appdata_ptr);
    if (isolated) leave_host_environment();
    struct custom_json_message *answer = responses == NULL ? NULL : (struct custom_json_message *)(void *)responses->resp;
    free(responses);
    if (answer == NULL) return rc == PAM_SUCCESS ? PAM_CONV_ERR : rc;
    size_t length = answer->json == NULL ? 0 : strnlen(answer->json, CUSTOM_JSON_REPLY_LIMIT);
    if (rc == PAM_SUCCESS && be32toh(answer->length) == sizeof *answer
        && memchr(answer->protocol_name, '\0', sizeof answer->protocol_name) != NULL
        && strcmp(answer->protocol_name, CUSTOM_JSON_PROTOCOL) == 0 && length > 0
        && length < CUSTOM_JSON_REPLY_LIMIT)
        *reply = strndup(answer->json, length);
    if (answer->json != NULL) xign_pam_free_answer(answer->json);
    free(answer);
    return *reply != NULL ? PAM_SUCCESS : PAM_CONV_ERR;
}

/* Calls `run` for user with the caller's items, in an environment of our own inside a setuid host. */
static int run_isolated(pam_handle_t *pamh, int flags, int argc, const char **argv, const char *user,
                        const char *approval, int (*run)(const xign_pam_context *)) {
    int isolate = caller_controls_environment();
    xign_pam_context context = {
        .user = user,
        .service = item(pamh, PAM_SERVICE),
        .ruser = item(pamh, PAM_RUSER),
        .rhost = item(pamh, PAM_RHOST),
        .tty = item(pamh, PAM_TTY),
        .caller_controls_environment = isolate,
        .silent = (flags & PAM_SILENT) != 0,
        .argc = argc,
        .argv = argv,
        .pamh = pamh,
        .approval = approval,
    };
    if (isolate) leave_host_environment();
    int rc = run(&context);
    if (isolate) return_host_environment();
    return rc;
}

PAM_EXTERN int pam_sm_authenticate(pam_handle_t *pamh, int flags, int argc, const char **argv) {
    const char *user = NULL;
    int rc = pam_get_user(pamh, &user, NULL);
    if (rc != PAM_SUCCESS) return rc == PAM_CONV_AGAIN ? PAM_INCOMPLETE : rc;
    if (user == NULL || *user == '\0') return PAM_USER_UNKNOWN;
    return run_isolated(pamh, flags, argc, argv, user, NULL, xign_pam_authenticate);
}

/* Nothing to set: the login proves the user, it grants no credentials. */
PAM_EXTERN int pam_sm_setcred(pam_handle_t *pamh, int flags, int argc, const char **argv) {
    (void)pamh; (void)flags; (void)argc; (void)argv;
    return PAM_SUCCESS;
}

/* A user the manager serves here comes in only while it says so, however the user was proved (an SSH key too);
   others are not ours to judge. The user is the one authenticated: no prompt here. */
PAM_EXTERN int pam_sm_acct_mgmt(pam_handle_t *pamh, int flags, int argc, const char **argv) {
    const char *user = item(pamh, PAM_USER);
    if (user == NULL || *user == '\0') return PAM_USER_UNKNOWN;
    return run_isolated(pamh, flags, argc, argv, user, NULL, xign_pam_account);
}

#define APPROVAL_VARIABLE "XIGN_APPROVAL"

void xign_pam_pass_approval(void *pamh, const char *confirmation_id) {
    char entry[128];
    if (snprintf(entry, sizeof entry, "%s=%s", APPROVAL_VARIABLE, confirmation_id) < (int)sizeof entry)
        pam_putenv((pam_handle_t *)pamh, entry);
}

/* An approved SSH login covers its session where the host's policy says so (SessionCoverPhase): only sshd's, the
   service whose auth phase passes the approval on. The approval is taken out of the PAM environment here, so it never
   reaches the user's. */
PAM_EXTERN int pam_sm_open_session(pam_handle_t *pamh, int flags, int argc, const char **argv) {
    const char *user = item(pamh, PAM_USER), *service = item(pamh, PAM_SERVICE);
    const char *passed = pam_getenv(pamh, APPROVAL_VARIABLE);
    char approval[128] = "";
    if (passed != NULL && strlen(passed) < sizeof approval) strcpy(approval, passed);
    if (passed != NULL) pam_putenv(pamh, APPROVAL_VARIABLE);
    if (user == NULL || *user == '\0' || approval[0] == '\0' || service == NULL || strcmp(service, "sshd") != 0)
        return PAM_IGNORE;
    return run_isolated(pamh, flags, argc, argv, user, approval, xign_pam_open_session);
}

PAM_EXTERN int pam_sm_close_session(pam_handle_t *pamh, int flags, int argc, const char **argv) {
    const char *user = item(pamh, PAM_USER), *service = item(pamh, PAM_SERVICE);
    if (user == NULL || *user == '\0' || service == NULL || strcmp(service, "sshd") != 0) return PAM_IGNORE;
    return run_isolated(pamh, flags, argc, argv, user, NULL, xign_pam_close_session);
}

int xign_pam_converse(void *pamh, int style, const char *text, char **answer) {
    char *response = NULL;
    /* The conversation is the host's own code: it runs in the host's environment. */
    int isolated = host_environment != NULL;
    if (isolated) return_host_environment();
    int rc = pam_prompt((pam_handle_t *)pamh, style, &response, "%s", text);
    if (isolated) leave_host_environment();
    if (rc != PAM_SUCCESS) {
        xign_pam_free_answer(response);
        return PAM_CONV_ERR;
    }
    if (answer != NULL) {
        *answer = response;
    } else {
        xign_pam_free_answer(response);
    }
    return PAM_SUCCESS;
}

void xign_pam_free_answer(char *answer) {
    if (answer == NULL) return;
    explicit_bzero(answer, strlen(answer));
    free(answer);
}

void xign_pam_log(void *pamh, int priority, const char *message) {
    pam_syslog((pam_handle_t *)pamh, priority, "%s", message);
}
