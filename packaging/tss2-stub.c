/* Not shipped: the packages' build links this against the libtss2 libraries CXignTPM opens with dlopen, naming each
 * function it resolves, so that dpkg-shlibdeps computes their dependencies as it does for linked ones (debian/rules). */
#include "xign_tpm_private.h"

#define XIGN_REFERENCE(library, name) (void *)&name,
void *const xign_tss2_functions[] = {TSS2_FUNCTIONS(XIGN_REFERENCE)};

int main(void) { return xign_tss2_functions[0] == NULL; }
