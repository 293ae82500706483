#ifndef XIGN_DBUS_H
#define XIGN_DBUS_H

#include <dbus/dbus.h>

/* The libdbus functions the fingerprint factor calls. libdbus is opened at the first fingerprint check, not when
 * pam_xign.so is loaded: a login without a finger never pays for it (docs/design.md, "The PAM host"). */
#define XIGN_DBUS_FUNCTIONS(X) \
    X(dbus_bus_add_match) \
    X(dbus_bus_register) \
    X(dbus_connection_close) \
    X(dbus_connection_open_private) \
    X(dbus_connection_pop_message) \
    X(dbus_connection_read_write) \
    X(dbus_connection_send_with_reply_and_block) \
    X(dbus_connection_set_exit_on_disconnect) \
    X(dbus_connection_unref) \
    X(dbus_error_free) \
    X(dbus_error_init) \
    X(dbus_error_is_set) \
    X(dbus_message_get_path) \
    X(dbus_message_get_sender) \
    X(dbus_message_is_signal) \
    X(dbus_message_iter_append_basic) \
    X(dbus_message_iter_get_arg_type) \
    X(dbus_message_iter_get_basic) \
    X(dbus_message_iter_init) \
    X(dbus_message_iter_init_append) \
    X(dbus_message_iter_next) \
    X(dbus_message_iter_recurse) \
    X(dbus_message_new_method_call) \
    X(dbus_message_unref)

typedef struct xign_dbus_functions {
#define XIGN_DBUS_POINTER(name) __typeof__(name) *_Nonnull name;
    XIGN_DBUS_FUNCTIONS(XIGN_DBUS_POINTER)
#undef XIGN_DBUS_POINTER
} xign_dbus_functions;

/* The functions, opened the first time; NULL when libdbus-1.so.3 is missing or lacks one of them. */
const xign_dbus_functions *_Nullable xign_dbus_open(void);

#endif
