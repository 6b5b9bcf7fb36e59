#ifndef CD_TESTS_CLIENT_FAKE_SERVER_H
#define CD_TESTS_CLIENT_FAKE_SERVER_H

// A scripted stand-in for the daemon, for the C client tests that need a
// server misbehaving in a precise way (slow, silent, closing, garbage,
// answering out of order, holding answers, cutting the connection). It
// listens on a fresh Unix socket in /tmp and serves one connection at a time
// on a thread, using only POSIX and proto's reader.

#include <stddef.h>

typedef enum {
    FAKE_ANSWER,        // answers each request: hello-like map, after delay_ms
    FAKE_NO_READ,       // accepts and never reads (the client's sends block)
    FAKE_CLOSE,         // reads one request, then closes the connection
    FAKE_GARBAGE,       // reads one request, answers with bytes that are not msgpack
    FAKE_ERROR,         // answers every request with {code: err_code, message: err_msg}
    FAKE_ECHO_INPUTS,   // infer: answers {outputs: <the request's inputs>}
    FAKE_ECHO_REVERSED, // as FAKE_ECHO_INPUTS, but answers every batch of requests
                        // it has read IN REVERSE ORDER (answers leave out of order)
    FAKE_ECHO_HELD,     // as FAKE_ECHO_REVERSED, but holds every answer until
                        // fake_release (or fake_answer_then_close)
} fake_mode;

typedef struct fake_server fake_server;

// Starts a server in mode; delay_ms applies to FAKE_ANSWER. Aborts the test on
// failure. fake_path() gives the socket path.
fake_server *fake_start(fake_mode mode, int delay_ms);
const char *fake_path(const fake_server *s);
// FAKE_ERROR: the code and message to answer with.
void fake_set_error(fake_server *s, const char *code, const char *message);
// Number of requests fully read so far / answers written so far.
int fake_requests(fake_server *s);
int fake_answers(fake_server *s);
// Waits (up to timeout_ms) until at least n requests have been read;
// returns the count reached.
int fake_wait_requests(fake_server *s, int n, int timeout_ms);
// FAKE_ECHO_HELD: answers every held request (in reverse order) and from now
// on echoes at once. Returns after the answers are written.
void fake_release(fake_server *s);
// FAKE_ECHO_HELD: answers the first n held requests (in arrival order), then
// closes the connection: the rest never get an answer.
void fake_answer_then_close(fake_server *s, int n);
void fake_stop(fake_server *s);

#endif // CD_TESTS_CLIENT_FAKE_SERVER_H
