#ifndef CONVD_H
#define CONVD_H

// libconvd: the C client of the convd inference daemon.
//
// This is the one public header. It is self-contained: it needs no msgpack or
// project-internal header. Link with -lconvd (static: libconvd.a -lmsgpackc
// -pthread).
//
//     convd_conn *c;
//     if (convd_connect(NULL, NULL, &c) != 0) {
//         fprintf(stderr, "%s\n", convd_errmsg(NULL));
//         return 1;
//     }
//     convd_health_info h;
//     if (convd_health(c, &h) == 0) printf("%s\n", h.status);
//     convd_close(c);
//
// Statuses. Every function that can fail returns 0 on success or a negative
// CONVD_E* status. When the daemon answers a call with an error, the status is
// that error's code (E_SHAPE -> CONVD_ESHAPE) and convd_errmsg() gives the
// daemon's message. CONVD_ECONNECT: the socket could not be reached.
// CONVD_ECLOSED: the daemon closed the connection (or it was broken earlier);
// the connection stays unusable, close it and connect again. CONVD_ETIMEOUT:
// no answer within the timeout; the connection stays usable and a late answer
// is discarded. The numbers are the ones of the project's error table
// (core/errors.h) and never change.
//
// Error messages. convd_errmsg() returns the message of the last failed call
// made by the CALLING THREAD (thread-local storage), on any connection or
// from convd_connect(). It stays valid until that thread's next failing call.
//
// Thread-safety. One convd_conn may be used by many threads at once. Calls are
// pipelined: each call writes its request under a write lock, then waits for
// its own answer, which a per-connection reader thread dispatches by msgid; a
// slow call (a big inference) does not hold up a quick one (health) made by
// another thread on the same connection. convd_close() must not race with
// calls on the same connection. Results returned to the caller are owned by
// the caller and may be freed from any thread. A connection does not survive
// fork(). Asynchronous requests (convd_infer_async, convd_infer_submit, see
// "asynchronous inference" below) share the connection with synchronous
// calls; their completions run on the reader thread.
//
// Timeouts. Functions taking timeout_ms: CONVD_TIMEOUT_DEFAULT (0) uses the
// connection's default (convd_opts.timeout_ms); CONVD_TIMEOUT_NONE (-1) waits
// forever; a positive value bounds the whole call (sending and waiting), in
// milliseconds. Functions without timeout_ms use the connection's default.

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// The daemon's default socket, which convd_connect() uses when it gets path
// NULL and $CONVD_SOCKET is unset: CONVD_SYSTEM_SOCKET when the caller is root
// (a daemon run as root listens there), else $XDG_RUNTIME_DIR/convd.sock (a
// user's own daemon). See convd_default_socket().
#define CONVD_SYSTEM_SOCKET "/run/convd/convd.sock"
#define CONVD_SOCKET_NAME "convd.sock"

// Version of the msgpack-RPC method set this client speaks.
#define CONVD_PROTOCOL 1

// The version of this library ("0.1.0"): the project's version it was built
// from, which is also the version of the convd it came with (compare
// convd_hello_info.version for the daemon's).
const char *convd_version(void);

// One connection to the daemon (opaque).
typedef struct convd_conn convd_conn;

// ---- statuses ---------------------------------------------------------------

//   XX(NAME, number): the status is -number. Same table as core/errors.h
//   (a unit test asserts that every number and name agrees).
#define CONVD_ERROR_MAP(XX) \
    XX(PROTOCOL, 1)         \
    XX(METHOD, 2)           \
    XX(PARAMS, 3)           \
    XX(NOT_FOUND, 4)        \
    XX(SHAPE, 5)            \
    XX(DTYPE, 6)            \
    XX(OVERLOADED, 7)       \
    XX(TIMEOUT, 8)          \
    XX(INTERNAL, 9)         \
    XX(TOO_LARGE, 10)       \
    XX(MODEL, 11)           \
    XX(UNSUPPORTED, 12)     \
    XX(EXISTS, 13)          \
    XX(SHUTDOWN, 14)        \
    XX(NOMEM, 15)           \
    XX(IO, 16)              \
    XX(DEVICE, 17)          \
    XX(CANCELLED, 18)       \
    XX(CONNECT, 19)         \
    XX(CLOSED, 20)          \
    XX(BUSY, 21)            \
    XX(ACCESS, 22)          \
    XX(PERMISSION, 23)      \
    XX(REGION, 24)

enum {
    CONVD_OK = 0,
#define CONVD_XX_(name, num) CONVD_E##name = -(num),
    CONVD_ERROR_MAP(CONVD_XX_)
#undef CONVD_XX_
};

// Wire name of a status: "E_NOT_FOUND", "OK" for 0, "E_UNKNOWN" otherwise.
const char *convd_errname(int status);
// Default human-readable text of a status ("no such model").
const char *convd_strerror(int status);
// Message of the calling thread's last failed call (see above); "" when
// there was none. The argument is accepted for symmetry and may be NULL.
const char *convd_errmsg(const convd_conn *conn);

// ---- tensors ----------------------------------------------------------------

// Element types; the wire names are "f32", "f16", ... (convd_dtype_name).
typedef enum {
    CONVD_DTYPE_INVALID = 0,
    CONVD_DTYPE_F32,
    CONVD_DTYPE_F16,
    CONVD_DTYPE_BF16,
    CONVD_DTYPE_F64,
    CONVD_DTYPE_I8,
    CONVD_DTYPE_U8,
    CONVD_DTYPE_I16,
    CONVD_DTYPE_I32,
    CONVD_DTYPE_I64,
    CONVD_DTYPE_BOOL,
} convd_dtype;

#define CONVD_MAX_RANK 8

// A dense tensor in C order, little-endian. For inputs the data stays owned by
// the caller and is only read during the call.
typedef struct {
    convd_dtype dtype;             // element type
    int rank;                      // number of dims, 1..CONVD_MAX_RANK
    int64_t shape[CONVD_MAX_RANK]; // dims, each >= 1
    const void *data;              // nbytes of elements
    size_t nbytes;                 // product(shape) * convd_dtype_size(dtype)
} convd_tensor;

// Bytes of one element (0 for CONVD_DTYPE_INVALID or unknown values).
size_t convd_dtype_size(convd_dtype dt);
// Wire name ("f32"), or "invalid".
const char *convd_dtype_name(convd_dtype dt);
// Parses a wire name; CONVD_DTYPE_INVALID when unknown.
convd_dtype convd_dtype_from_name(const char *name);

// ---- connections ------------------------------------------------------------

#define CONVD_TIMEOUT_DEFAULT 0
#define CONVD_TIMEOUT_NONE (-1)

// Connection options. A field left 0 takes its default.
typedef struct {
    int timeout_ms;         // default call timeout; 30000 by default; -1 none
    int connect_timeout_ms; // bound on connect(); 5000 by default; -1 none
    size_t max_message;     // largest answer accepted; 1 GiB by default (an
                            // answer over it closes the connection)
} convd_opts;

// Fills opts with the defaults above.
void convd_opts_init(convd_opts *opts);

// Writes the default socket path of the calling user into buf (the rule
// above; $CONVD_SOCKET is not consulted). Returns 0, or CONVD_ECONNECT when
// there is none (not root and XDG_RUNTIME_DIR unset: the message says to set
// CONVD_SOCKET), CONVD_EPARAMS when it does not fit in len or a socket address.
int convd_default_socket(char *buf, size_t len);

// Connects to the daemon at path (NULL: $CONVD_SOCKET, else
// convd_default_socket()). opts NULL means defaults. Returns 0 and *out, or
// CONVD_ECONNECT (no daemon there; the message names the path and the
// reason; or no default socket), CONVD_EPARAMS (path too long), CONVD_ENOMEM.
int convd_connect(const char *path, const convd_opts *opts, convd_conn **out);

// Closes the connection: calls still waiting on it (which the caller must not
// have) would get CONVD_ECLOSED. NULL is ignored.
void convd_close(convd_conn *conn);

// Frees memory returned by this library as a plain buffer (convd_call's
// result, JSON text). NULL is ignored.
void convd_free(void *p);

// ---- the generic call -------------------------------------------------------

// Calls method with params: the msgpack encoding of ONE value (a map for all
// of convd's methods), which is sent as the only element of the msgpack-RPC
// params array; params NULL / params_len 0 sends an empty map, [{}].
// On success *result / *result_len get the msgpack encoding of the result
// (free with convd_free). On an error answer returns its code, and
// convd_errmsg() gives its message. Also CONVD_ETIMEOUT, CONVD_ECLOSED,
// CONVD_EPROTOCOL (the daemon's answer was malformed), CONVD_EPARAMS (bad
// arguments, e.g. a method name longer than 64 bytes), CONVD_ENOMEM.
int convd_call(convd_conn *conn, const char *method, const void *params, size_t params_len, void **result,
               size_t *result_len, int timeout_ms);

// Converts one msgpack value to JSON text (bin values become base64 strings,
// non-string map keys are converted to strings). *json is NUL-terminated;
// free with convd_free. Returns 0, CONVD_EPROTOCOL (not a complete msgpack
// value), CONVD_ENOMEM.
int convd_to_json(const void *msgpack, size_t len, char **json);

// ---- status methods ---------------------------------------------------------

// hello: who the daemon is.
typedef struct {
    char server[32];    // "convd"
    char version[32];   // "0.1.0"
    int protocol;       // method-set version (CONVD_PROTOCOL)
    char device[32];    // "cpu", "hip:0", ...
    char features[512]; // build/CPU features, space separated: "cpu dnnl avx512f"
} convd_hello_info;

int convd_hello(convd_conn *conn, convd_hello_info *out);
// True when the space-separated feature list of info holds feature.
int convd_has_feature(const convd_hello_info *info, const char *feature);

// health: liveness.
typedef struct {
    char status[16]; // "ok" or "draining"
    double uptime_s; // seconds since the daemon started
    int64_t models;  // models loaded
} convd_health_info;

int convd_health(convd_conn *conn, convd_health_info *out);

// stats: counters of the daemon, as JSON text (the field set grows with the
// daemon; see docs/PROTOCOL.md). Free *json with convd_free.
int convd_stats(convd_conn *conn, char **json);

// ---- models -----------------------------------------------------------------

// One input or output of a model. A dim the model leaves open (the batch) is
// -1.
typedef struct {
    char *name;
    convd_dtype dtype;
    int rank;
    int64_t shape[CONVD_MAX_RANK];
} convd_tensor_info;

// One loaded model, as the models method describes it. Numbers the daemon does
// not report are -1 (density: -1.0).
typedef struct {
    char *name;        // registry name
    char *path;        // file, relative to the models directory
    int64_t max_batch; // largest batch (shape[0]) accepted
    size_t n_inputs;
    convd_tensor_info *inputs;
    size_t n_outputs;
    convd_tensor_info *outputs;
    int64_t params;           // weight count
    int64_t flops;            // per sample
    int64_t weight_bytes;     // resident weight memory
    int64_t activation_bytes; // activation arena at max_batch
    double density;           // nonzero weights / weights
    int64_t layers;           // layer count
    int64_t int8_layers;      // of them, convs on the int8 kernels (-1: not reported)
    char *int8_pick;          // its int8 convs over sparse weights on the "dense" or the
                              // "sparse" int8 kernels, or "none" (NULL: not reported)
} convd_model_info;

typedef struct {
    size_t count;
    convd_model_info *models;
} convd_model_list;

// models: every loaded model. Free *out with convd_model_list_free.
int convd_models(convd_conn *conn, convd_model_list **out);
void convd_model_list_free(convd_model_list *list);

// Loads the ONNX file path (relative to the daemon's --models directory) as
// name; max_batch <= 0 uses the daemon's default. When info is not NULL it
// gets the new model's entry (a list of one; free with
// convd_model_list_free). Uses the connection's default timeout.
int convd_load(convd_conn *conn, const char *name, const char *path, int max_batch, convd_model_list **info);

// Unloads name (CONVD_ENOT_FOUND when no such model). Requests already running
// on it finish.
int convd_unload(convd_conn *conn, const char *name);

// plan: the plan the daemon runs for the loaded model, every layer with its
// kernel, layout, shapes, FLOPs, sparsity fields and the ms measured in the
// daemon over `runs` runs at `batch` (docs/PROTOCOL.md, "plan"), as JSON
// text. batch / runs <= 0 use the daemon's defaults (1, 10). Free *json with
// convd_free. The profile takes about runs x one inference: pass a
// timeout_ms that allows it (CONVD_TIMEOUT_DEFAULT: the connection's).
// Errors: CONVD_ENOT_FOUND (no such model), CONVD_EPARAMS (batch over the
// model's max_batch, runs over 1000), CONVD_ESHUTDOWN, CONVD_ETIMEOUT, ...
int convd_plan(convd_conn *conn, const char *model, int batch, int runs, char **json, int timeout_ms);

// ---- inference --------------------------------------------------------------

// The outputs of one inference. Every tensor's data is 64-byte aligned and
// owned by this structure (where the answer placed it aligned, in the
// answer's buffer; else a copy).
typedef struct {
    size_t count;          // number of outputs
    const char **names;    // count NUL-terminated names
    convd_tensor *tensors; // count tensors, same order as names
    void *priv_;           // private
} convd_outputs;

// Runs model on n_inputs named tensors. output_names (n_outputs names) asks
// for those outputs only; NULL / 0 returns every model output. When
// timeout_ms > 0 it is also sent to the daemon as the request's deadline.
// On success *out gets the outputs (free with convd_outputs_free). Errors
// from the daemon: CONVD_ENOT_FOUND (no such model), CONVD_EPARAMS
// (missing/extra input), CONVD_ESHAPE, CONVD_EDTYPE, CONVD_ETIMEOUT, ...
// Local: CONVD_EPARAMS (a tensor whose nbytes does not match its shape).
int convd_infer(convd_conn *conn, const char *model, size_t n_inputs, const char *const *names,
                const convd_tensor *inputs, size_t n_outputs, const char *const *output_names, convd_outputs **out,
                int timeout_ms);

// The output called name, or NULL.
const convd_tensor *convd_outputs_get(const convd_outputs *outs, const char *name);
void convd_outputs_free(convd_outputs *outs);

// ---- shared-memory regions --------------------------------------------------
//
// A region is a memfd sealed against shrinking and growing, mapped in this
// process. Registered on a connection (its descriptor goes over once), it
// can hold any input and output of an inference on that connection: they
// are then named by place, not sent, and the daemon computes outputs
// straight into it (docs/PROTOCOL.md, "Shared-memory regions"). A region is
// immutable after creation and may be used from any thread; registering it
// on several connections is allowed (each under its own name). Regions are
// per connection: they go when the connection closes. The caller must not
// touch an output's bytes until its inference has answered.
typedef struct convd_region convd_region;

// Creates a region of size bytes (> 0). Returns 0 with *out, or
// CONVD_EPARAMS / CONVD_ENOMEM / CONVD_EIO (memfd_create, seals or mmap
// failed; convd_errmsg says which).
int convd_region_create(size_t size, convd_region **out);
// Its mapping and size.
void *convd_region_data(const convd_region *r);
size_t convd_region_size(const convd_region *r);
// Its descriptor (the memfd), e.g. to share it with another process.
int convd_region_fd(const convd_region *r);
// Unmaps and closes it (NULL: no-op). Unregister it first where it is
// registered, or close those connections: the daemon keeps its own mapping
// until then.
void convd_region_free(convd_region *r);
// Registers r on conn under name (1..64 bytes of printable ASCII, no space).
// Errors: CONVD_EEXISTS (name taken on conn), CONVD_EREGION (refused),
// CONVD_ETOO_LARGE (a region limit of the daemon), ...
int convd_region_register(convd_conn *conn, const convd_region *r, const char *name, int timeout_ms);
// Unregisters name on conn (CONVD_ENOT_FOUND when there is none). Requests
// in flight that use it finish normally.
int convd_region_unregister(convd_conn *conn, const char *name, int timeout_ms);

// Where a tensor lies in a region registered on the connection.
typedef struct {
    const char *region; // its name; NULL: this tensor is not in a region
    uint64_t offset;    // first byte
    uint64_t size;      // bytes given (outputs: the room; inputs: ignored, nbytes is used)
} convd_region_ref;

// convd_infer where input i with input_refs[i].region set is read from that
// region (inputs[i] gives dtype and shape; its data may be NULL), and output
// output_names[j] with output_refs[j].region set is written into that region
// (its tensor in *out has data NULL: the bytes are at the ref's place).
// input_refs / output_refs may be NULL (none in a region). Errors as
// convd_infer, and CONVD_EREGION (a range past the region's end, too small,
// or overlapping another request's in flight), CONVD_ENOT_FOUND (no such
// region on conn).
int convd_infer_regions(convd_conn *conn, const char *model, size_t n_inputs, const char *const *names,
                        const convd_tensor *inputs, const convd_region_ref *input_refs, size_t n_outputs,
                        const char *const *output_names, const convd_region_ref *output_refs, convd_outputs **out,
                        int timeout_ms);

// ---- asynchronous inference -------------------------------------------------
//
// Two ways to have many requests in flight without a thread each, both
// pipelined on one connection and usable from any number of threads:
//
//   convd_infer_async(...)  a completion callback;
//   convd_infer_submit(...) a future to poll or wait for (convd_future_*).
//
// Both pack and send the request before they return (the input tensors are
// read during the call only and may be freed or reused once it returns), then
// return without waiting for the answer. Return value:
//   0      the request was sent; it gets EXACTLY ONE completion: its answer,
//          or CONVD_ETIMEOUT when timeout_ms passes first (a late answer is
//          dropped), or CONVD_ECLOSED / CONVD_EPROTOCOL / ... when the
//          connection breaks or is closed by convd_close() (which delivers
//          the completions of everything still in flight before returning).
//   < 0    nothing is in flight and there will be no completion:
//          CONVD_EPARAMS (bad arguments, as convd_infer), CONVD_ECLOSED (the
//          connection is broken), CONVD_EOVERLOADED (in-flight limit reached,
//          see convd_set_inflight_limit), CONVD_ETIMEOUT (no in-flight slot,
//          or no room in the socket, before timeout_ms), CONVD_ENOMEM.
// timeout_ms is as for convd_infer: it bounds the whole request (waiting for
// a slot, sending, the answer) and a positive value is sent to the daemon as
// the request's deadline. CONVD_TIMEOUT_NONE requests never time out locally.

// Completion callback of convd_infer_async. status 0: outputs holds the
// result and the callback owns it (free with convd_outputs_free, now or later
// from any thread). status < 0: outputs is NULL and errmsg says why (also
// convd_errmsg() inside the callback). errmsg is valid during the call only.
//
// The callback runs on the connection's reader thread. While it runs no other
// answer on that connection is read, so keep it short: record, copy, hand
// off to another thread. Allowed inside it: anything on the outputs, locks
// and condition variables of the application, convd_infer_async /
// convd_infer_submit on any connection (on its own connection it never waits
// for an in-flight slot: it fails with CONVD_EOVERLOADED instead; sending
// may still wait for room in the socket), and every
// convd_future_* call but waiting. Not allowed: convd_close() of the same
// connection (undefined: the reader cannot join itself); a synchronous call
// (convd_infer, convd_health, ...) or convd_future_wait() on a request of the
// same connection: those would wait for the thread that is running the
// callback, so they fail at once with CONVD_EBUSY.
typedef void (*convd_infer_cb)(void *user, int status, convd_outputs *outputs, const char *errmsg);

int convd_infer_async(convd_conn *conn, const char *model, size_t n_inputs, const char *const *names,
                      const convd_tensor *inputs, size_t n_outputs, const char *const *output_names, int timeout_ms,
                      convd_infer_cb cb, void *user);

// The pending result of convd_infer_submit. A future does not refer to its
// connection once completed: it may be waited for, read and freed after
// convd_close().
typedef struct convd_future convd_future;

// As convd_infer_async, but the completion is kept in *out (free it with
// convd_future_free, also when never waited for).
int convd_infer_submit(convd_conn *conn, const char *model, size_t n_inputs, const char *const *names,
                       const convd_tensor *inputs, size_t n_outputs, const char *const *output_names, int timeout_ms,
                       convd_future **out);

// 1 when the request has completed, else 0. Never blocks.
int convd_future_done(const convd_future *f);

// Waits until the request has completed. timeout_ms: CONVD_TIMEOUT_NONE (-1)
// waits as long as it takes (the request's own timeout still ends it), 0
// only checks, > 0 waits at most that long. Returns 0 when it has completed
// (whatever its status: see convd_future_result), CONVD_ETIMEOUT when not
// yet (the request goes on; wait again or free), CONVD_EBUSY when called from
// a completion callback of the future's own connection.
int convd_future_wait(convd_future *f, int timeout_ms);

// The request's status once completed: 0 and *out = the outputs (ownership
// moves to the caller; a second call gives *out = NULL), or the request's
// error (convd_errmsg() gives its message, on the calling thread). Before
// completion: CONVD_EBUSY. out may be NULL to read the status only.
int convd_future_result(convd_future *f, convd_outputs **out);

// Frees a future. If the request is still in flight it is not cancelled on
// the daemon, but its result is dropped when it arrives. NULL is ignored.
void convd_future_free(convd_future *f);

// In-flight limit of asynchronous requests (convd_infer_async/submit) on
// one connection; 1024 by default. At the limit a new request waits for a
// completion (bounded by its timeout_ms, then CONVD_ETIMEOUT), or with flags
// CONVD_INFLIGHT_FAIL fails at once with CONVD_EOVERLOADED. Synchronous calls
// are not counted (their number is bounded by the calling threads) and
// never refused. Returns 0 or CONVD_EPARAMS (max_inflight < 1, unknown
// flags). Takes effect for the next request.
#define CONVD_INFLIGHT_FAIL 1
int convd_set_inflight_limit(convd_conn *conn, int max_inflight, int flags);

// Asynchronous requests in flight on conn now (sent, not yet completed).
int convd_inflight(convd_conn *conn);

#ifdef __cplusplus
}
#endif

#endif // CONVD_H
