#include <security/pam_appl.h>
#include <security/pam_modules.h>
