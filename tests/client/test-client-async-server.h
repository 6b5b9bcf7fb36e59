#ifndef CD_TESTS_CLIENT_ASYNC_SERVER_H
#define CD_TESTS_CLIENT_ASYNC_SERVER_H

// A scripted server for the asynchronous client tests: it echoes each infer
// request's inputs as its outputs, answering every batch of requests it has
// read IN REVERSE ORDER (so answers leave out of order), or holds every
// answer until released, or cuts the connection. One connection at a time,
// served on a thread; POSIX and proto's reader only.

typedef struct async_server async_server;

// Starts a server that echoes at once (holding = 0) or holds every answer
// until async_server_release (holding = 1). Aborts the test on failure.
async_server *async_server_start(int holding);
const char *async_server_path(const async_server *s);
// Answers every held request (in reverse order) and from now on echoes at
// once. Returns after the answers are written.
void async_server_release(async_server *s);
// Answers the first n held requests (in arrival order), then closes the
// connection: the rest never get an answer.
void async_server_answer_then_close(async_server *s, int n);
// Requests fully read so far / answers written so far.
int async_server_requests(async_server *s);
int async_server_answers(async_server *s);
// Waits (up to timeout_ms) until at least n requests have been read;
// returns the count reached.
int async_server_wait_requests(async_server *s, int n, int timeout_ms);
void async_server_stop(async_server *s);

#endif // CD_TESTS_CLIENT_ASYNC_SERVER_H
