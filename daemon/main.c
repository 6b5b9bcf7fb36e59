// convd: the sparse-CNN inference daemon. Parses the settings (flags, config
// file), then runs the server until SIGINT/SIGTERM.
//   exit 0: clean shutdown (or --help/--version)
//   exit 1: cannot start (socket used by a live daemon, device unavailable)
//   exit 2: bad flag, value or config file
#include "daemon/log.h"
#include "daemon/server.h"
#include "daemon/settings.h"

#include <stdio.h>
#include <string.h>

// Checks --device. Returns 0 (usable), 1 (valid but not available in this
// build) or 2 (not a device name); prints the reason.
static int check_device(const char *dev) {
    if (strcmp(dev, "cpu") == 0)
        return 0;
    if (strncmp(dev, "hip", 3) == 0 &&
        (dev[3] == '\0' || (dev[3] == ':' && dev[4] >= '0' && dev[4] <= '9'))) {
        fprintf(stderr, "convd: --device %s: this build has no HIP backend "
                        "(build with make GPU=hip); use --device cpu\n", dev);
        return 1;
    }
    fprintf(stderr, "convd: --device: '%s' is not a device (cpu, hip, hip:N)\n", dev);
    return 2;
}

int main(int argc, char **argv) {
    static cd_settings set;
    switch (cd_settings_parse(&set, argc, argv)) {
    case CD_SETTINGS_RUN:
        break;
    case CD_SETTINGS_HELP:
    case CD_SETTINGS_VERSION:
        return 0;
    case CD_SETTINGS_BAD:
        return 2;
    }
    int rc = check_device(set.device);
    if (rc != 0)
        return rc;
    cd_log_set_level((cd_log_level)set.log_level);
    return cd_server_run(&set);
}
