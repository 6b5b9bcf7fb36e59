#ifndef CD_PROTO_LIMITS_H
#define CD_PROTO_LIMITS_H

// Hard limits on what arrives from the wire. Every declared length is checked
// against these before anything is allocated for it.

#define CD_MAX_MESSAGE_DEFAULT  (64u << 20)  // one message, bytes (--max-message)
#define CD_MAX_MESSAGE_MIN      (4u << 10)   // smallest allowed --max-message
#define CD_MAX_DEPTH            16           // nesting of arrays/maps
#define CD_MAX_CONTAINER        65536        // elements of one array or map
#define CD_MAX_STR              4096         // bytes of one str (names, paths)
#define CD_MAX_RANK             8            // tensor rank
#define CD_MAX_TENSORS          64           // tensors in one inputs/outputs map
#define CD_MAX_NAME             255          // model and tensor names
#define CD_MAX_METHOD           64           // method name

#endif // CD_PROTO_LIMITS_H
