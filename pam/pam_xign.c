/* pam_xign: the PAM entry points. Everything else happens in XignPAM (Swift) behind xign_pam.h. */
#include <security/pam_modules.h>
#include <security/pam_ext.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "xign_pam.h"

static const char *item(pam_handle_t *pamh, int type) {
    const void *value = NULL;
    if (pam_get_item(pamh, type, &value) != PAM_SUCCESS) return NULL;
    return (const char *)value;
}

PAM_EXTERN int pam_sm_authenticate(pam_handle_t *pamh, int flags, int argc, const char **argv) {
    (void)flags;
    const char *user = NULL;
    int rc = pam_get_user(pamh, &user, NULL);
    if (rc != PAM_SUCCESS) return rc == PAM_CONV_AGAIN ? PAM_INCOMPLETE : rc;
    if (user == NULL || *user == '\0') return PAM_USER_UNKNOWN;
    xign_pam_context context = {
        .user = user,
        .service = item(pamh, PAM_SERVICE),
        .ruser = item(pamh, PAM_RUSER),
        .rhost = item(pamh, PAM_RHOST),
        .tty = item(pamh, PAM_TTY),
        .argc = argc,
        .argv = argv,
        .pamh = pamh,
    };
    return xign_pam_authenticate(&context);
}

/* Nothing to set: the login proves the user, it grants no credentials. */
PAM_EXTERN int pam_sm_setcred(pam_handle_t *pamh, int flags, int argc, const char **argv) {
    (void)pamh; (void)flags; (void)argc; (void)argv;
    return PAM_SUCCESS;
}

/* Accounts are managed elsewhere; this module has no say. */
PAM_EXTERN int pam_sm_acct_mgmt(pam_handle_t *pamh, int flags, int argc, const char **argv) {
    (void)pamh; (void)flags; (void)argc; (void)argv;
    return PAM_IGNORE;
}

int xign_pam_converse(void *pamh, int style, const char *text, char **answer) {
    char *response = NULL;
    int rc = pam_prompt((pam_handle_t *)pamh, style, &response, "%s", text);
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
