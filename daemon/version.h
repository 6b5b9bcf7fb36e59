#ifndef CD_DAEMON_VERSION_H
#define CD_DAEMON_VERSION_H

// The server's version and the protocol version it speaks (`hello`). The
// version is the project's one version, the VERSION file at the top of the
// tree: the Makefile turns it into CD_VERSION (convd-version.h, generated).
#include "convd-version.h"

#define CD_DAEMON_NAME "convd"
#define CD_DAEMON_VERSION CD_VERSION
#define CD_PROTOCOL_VERSION 1

#endif // CD_DAEMON_VERSION_H
