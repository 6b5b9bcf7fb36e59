#include "runtime/onnx-file.h"

#include "core/errors.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int cd_onnx_read_file(const char *path, size_t max_bytes, uint8_t **out, size_t *len, char *err, size_t errlen) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return cd_errf(CD_EIO, err, errlen, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return cd_errf(CD_EIO, err, errlen, "%s is not a regular file", path);
    }
    if (max_bytes && (uint64_t)st.st_size > max_bytes) {
        close(fd);
        return cd_errf(CD_ETOO_LARGE, err, errlen, "%s: %lld bytes, over the limit of %zu bytes", path,
                       (long long)st.st_size, max_bytes);
    }
    if ((uint64_t)st.st_size > CD_ONNX_MAX_BYTES) {
        close(fd);
        return cd_errf(CD_EMODEL, err, errlen, "%s: %lld bytes, above the 2 GiB protobuf limit (use external data)",
                       path, (long long)st.st_size);
    }
    size_t n = (size_t)st.st_size, got = 0;
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf) {
        close(fd);
        return cd_errf(CD_ENOMEM, err, errlen, "out of memory for %zu bytes", n);
    }
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            free(buf);
            close(fd);
            return cd_errf(CD_EIO, err, errlen, "cannot read %s: %s", path, r ? strerror(errno) : "short read");
        }
        got += (size_t)r;
    }
    close(fd);
    *out = buf;
    *len = n;
    return 0;
}
