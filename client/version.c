// convd_version(): the project's version (VERSION, via the generated header).
#include "client/convd.h"

#include "convd-version.h"

const char *convd_version(void) { return CD_VERSION; }
