/* The C ABI between the PAM shim (pam_xign.c) and XignPAM (Swift). */
#ifndef XIGN_PAM_H
#define XIGN_PAM_H

/* Message styles, as PAM's, so the shim passes them through. */
#define XIGN_PAM_PROMPT_ECHO_OFF 1
#define XIGN_PAM_PROMPT_ECHO_ON 2
#define XIGN_PAM_ERROR_MSG 3
#define XIGN_PAM_TEXT_INFO 4

typedef struct xign_pam_context {
    const char *user;    /* never NULL */
    const char *service; /* may be NULL, like the items below */
    const char *ruser;
    const char *rhost;
    const char *tty;
    int caller_controls_environment; /* a setuid host (su, sudo) run by a user: see pam_xign.c */
    int silent;                      /* PAM_SILENT: no word on why a login ended, errors included; prompts and
                                        what the user needs to go on (a QR code, the finger cue) still show */
    int argc;
    const char *const *argv;
    void *pamh;
    const char *approval; /* pam_sm_open_session: the confirmation the auth phase passed on, or NULL */
} xign_pam_context;

/* Runs the login; returns a PAM_* code. */
int xign_pam_authenticate(const xign_pam_context *context);

/* The account phase for context->user: PAM_IGNORE for users the manager does not serve here. */
int xign_pam_account(const xign_pam_context *context);

/* The session phase: opens the cover of context->approval, or ends this session's cover. Return PAM_SUCCESS or
   PAM_IGNORE, never a failure. */
int xign_pam_open_session(const xign_pam_context *context);
int xign_pam_close_session(const xign_pam_context *context);

/* Passes an approved login's confirmation on to the session phase (the PAM environment: sshd runs keyboard-interactive
   authentication in a child and carries only that back). */
void xign_pam_pass_approval(void *pamh, const char *confirmation_id);

/* Shows text, or asks and stores a malloc'd answer in *answer (for prompts). Returns a PAM_* code. */
int xign_pam_converse(void *pamh, int style, const char *text, char **answer);

/* Sends `json` (GDM's CustomJSON message of type `type`, protocol auth-mechanisms, version 1) and stores the greeter's
   reply JSON, malloc'd, in *reply. Returns a PAM_* code: PAM_CONV_ERR when the greeter reset or replied with
   something else. */
int xign_pam_converse_json(void *pamh, int type, const char *json, char **reply);

/* Zeroes and frees an answer from xign_pam_converse. */
void xign_pam_free_answer(char *answer);

/* One line to syslog (AUTHPRIV), prefixed with the PAM service by libpam. */
void xign_pam_log(void *pamh, int priority, const char *message);

#endif
