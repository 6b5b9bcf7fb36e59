#ifndef CD_DAEMON_VERSION_H
#define CD_DAEMON_VERSION_H

// The server's version and the protocol version it speaks (`hello`).
#define CD_DAEMON_NAME     "convd"
#define CD_DAEMON_VERSION  "0.1.0"
#define CD_PROTOCOL_VERSION 1

#endif // CD_DAEMON_VERSION_H
