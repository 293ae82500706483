#include "xign_dbus.h"

#include <dlfcn.h>
#include <pthread.h>

static xign_dbus_functions functions;
static const xign_dbus_functions *opened;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void) {
    void *library = dlopen("libdbus-1.so.3", RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) return;
#define XIGN_DBUS_RESOLVE(name) \
    if ((functions.name = (__typeof__(name) *)dlsym(library, #name)) == NULL) return;
    XIGN_DBUS_FUNCTIONS(XIGN_DBUS_RESOLVE)
#undef XIGN_DBUS_RESOLVE
    opened = &functions;
}

const xign_dbus_functions *xign_dbus_open(void) {
    pthread_once(&once, load);
    return opened;
}
