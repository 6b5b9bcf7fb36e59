#ifndef CD_DAEMON_FEATURES_H
#define CD_DAEMON_FEATURES_H

// What this build and this CPU offer, for `hello` ("cpu", "dnnl", "avx2",
// "avx512f", ...), and the CPU facts of `--version`, `health`, `stats` and
// `metrics` (model name, the ISAs of our kernels and of oneDNN, the blocked
// layout). Detected once.

#include <msgpack.h>
#include <stddef.h>
#include <stdio.h>

// Fills names with up to max static strings; returns how many.
size_t cd_features_list(const char **names, size_t max);

// The CPU's model name from /proc/cpuinfo ("unknown" when it has none).
// Thread-safe; read once.
const char *cd_cpu_model(void);

// Packs the `cpu` map {model, kernels_isa, kernels_capped, dnnl_isa, layout,
// block} (docs/PROTOCOL.md). Returns 0 or non-zero when packing failed.
int cd_cpu_pack(msgpack_packer *pk);

// Writes the one-line summary `convd --version` prints after the version:
// "cpu: MODEL; kernels ISA[ (capped by --max-isa)]; dnnl ISA; layout L".
void cd_cpu_print(FILE *f);

#endif // CD_DAEMON_FEATURES_H
