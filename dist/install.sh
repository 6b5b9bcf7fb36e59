#!/usr/bin/env bash
# `make install` and `make uninstall` (the Makefile passes every directory in
# the environment; see its "install" section).
#
#   dist/install.sh install     copies the build and dist/ into $DESTDIR$PREFIX...,
#                               filling @VERSION@, @BINDIR@, ... in the units,
#                               man pages, pkg-config file and example config,
#                               and records every file it wrote in
#                               $DATADIR/convd/install-manifest
#   dist/install.sh uninstall   removes what that manifest lists, then the
#                               manifest; convd's own directories go when empty
#
# The config file ($SYSCONFDIR/convd/convd.conf) is written only when there
# is none (an operator's file is never overwritten) and removed only when it
# is still the installed example.
set -euo pipefail
cd "$(dirname "$0")/.."

: "${BUILD:?} ${PREFIX:?} ${BINDIR:?} ${LIBDIR:?} ${INCLUDEDIR:?} ${DATADIR:?} ${MANDIR:?}"
: "${SYSCONFDIR:?} ${UNITDIR:?} ${SYSUSERSDIR:?} ${TMPFILESDIR:?} ${BASHCOMPDIR:?} ${DOCDIR:?}"
: "${PKGCONFIGDIR:?} ${PLUGINDIR:?} ${VERSION:?} ${SO_MAJOR:?}"
DESTDIR=${DESTDIR:-}
MANIFEST=$DATADIR/convd/install-manifest

files=() # installed paths, without DESTDIR
dirs=()  # directories that are convd's own (removed at uninstall when empty)

put() { # MODE SRC DEST
    install -D -m "$1" "$2" "$DESTDIR$3"
    files+=("$3")
}

link() { # TARGET DEST
    mkdir -p "$(dirname "$DESTDIR$2")"
    ln -sfn "$1" "$DESTDIR$2"
    files+=("$2")
}

subst() {
    sed -e "s|@VERSION@|$VERSION|g" -e "s|@PREFIX@|$PREFIX|g" -e "s|@BINDIR@|$BINDIR|g" \
        -e "s|@LIBDIR@|$LIBDIR|g" -e "s|@INCLUDEDIR@|$INCLUDEDIR|g" \
        -e "s|@SYSCONFDIR@|$SYSCONFDIR|g" -e "s|@UNITDIR@|$UNITDIR|g" \
        -e "s|@DOCDIR@|$DOCDIR|g" "$@"
}

gen() { # MODE SRC DEST: SRC with the @...@ filled in
    mkdir -p "$(dirname "$DESTDIR$3")"
    subst "$2" >"$DESTDIR$3.tmp"
    chmod "$1" "$DESTDIR$3.tmp"
    mv -f "$DESTDIR$3.tmp" "$DESTDIR$3"
    files+=("$3")
}

# The SETTINGS section of convd.conf(5), from `convd --help` (the settings
# table): one .TP entry per setting, its help text and default.
settings_roff() {
    OMP_WAIT_POLICY=passive "$BUILD/bin/convd" --help | awk '
        /^  --/ {
            name = substr($1, 3)
            if (name == "help" || name == "version") next
            line = $0
            sub(/^  --[^ ]+ */, "", line)
            arg = ""
            if (line ~ /^[A-Za-z|]+  / || line ~ /^[A-Z]+ /) {
                arg = line; sub(/ .*/, "", arg)
                sub(/^[^ ]+ +/, "", line)
            }
            gsub(/\\/, "\\e", line)
            gsub(/-/, "\\-", name)
            if (arg != "") printf ".TP\n\\fB%s\\fP = \\fI%s\\fP\n%s\n", name, arg, line
            else printf ".TP\n\\fB%s\\fP\n%s\n", name, line
        }'
}

install_all() {
    put 0755 "$BUILD/bin/convd" "$BINDIR/convd"
    put 0755 "$BUILD/bin/convctl" "$BINDIR/convctl"
    put 0755 "$BUILD/bin/convbench" "$BINDIR/convbench"

    put 0755 "$BUILD/lib/libconvd.so.$VERSION" "$LIBDIR/libconvd.so.$VERSION"
    link "libconvd.so.$VERSION" "$LIBDIR/libconvd.so.$SO_MAJOR"
    link "libconvd.so.$SO_MAJOR" "$LIBDIR/libconvd.so"
    put 0644 "$BUILD/lib/libconvd.a" "$LIBDIR/libconvd.a"
    put 0644 client/convd.h "$INCLUDEDIR/convd.h"
    gen 0644 dist/convd.pc.in "$PKGCONFIGDIR/convd.pc"
    if [ -f "$BUILD/lib/libconvd-hip.so" ]; then # built with GPU=hip
        put 0755 "$BUILD/lib/libconvd-hip.so" "$PLUGINDIR/libconvd-hip.so"
        dirs+=("$PLUGINDIR")
    fi

    for page in convd.8 convctl.1 convbench.1; do
        gen 0644 "dist/man/$page" "$MANDIR/man${page##*.}/$page"
    done
    local conf5
    conf5=$(mktemp)
    subst dist/man/convd.conf.5.in | awk -v f=<(settings_roff) '
        $0 == "@SETTINGS@" { while ((getline l < f) > 0) print l; next } { print }' >"$conf5"
    put 0644 "$conf5" "$MANDIR/man5/convd.conf.5"
    rm -f "$conf5"

    gen 0644 dist/systemd/convd.service.in "$UNITDIR/convd.service"
    gen 0644 dist/systemd/convd.socket.in "$UNITDIR/convd.socket"
    put 0644 dist/systemd/convd.sysusers "$SYSUSERSDIR/convd.conf"
    put 0644 dist/systemd/convd.tmpfiles "$TMPFILESDIR/convd.conf"
    put 0644 dist/bash-completion/convctl "$BASHCOMPDIR/convctl"

    gen 0644 dist/convd.conf.example "$DOCDIR/convd.conf.example"
    dirs+=("$DOCDIR")
    if [ ! -e "$DESTDIR$SYSCONFDIR/convd/convd.conf" ]; then
        gen 0644 dist/convd.conf.example "$SYSCONFDIR/convd/convd.conf"
    else
        echo "install: keeping the existing $DESTDIR$SYSCONFDIR/convd/convd.conf"
    fi
    dirs+=("$SYSCONFDIR/convd")

    # The manifest: what uninstall removes.
    dirs+=("$DATADIR/convd")
    mkdir -p "$DESTDIR$DATADIR/convd"
    {
        printf '%s\n' "${files[@]}" "$MANIFEST"
        printf '%s/\n' "${dirs[@]}"
    } >"$DESTDIR$MANIFEST"
    echo "install: $((${#files[@]} + 1)) files under ${DESTDIR:-/} (list: $DESTDIR$MANIFEST)"
}

uninstall_all() {
    if [ ! -f "$DESTDIR$MANIFEST" ]; then
        echo "uninstall: no $DESTDIR$MANIFEST: nothing installed with this PREFIX/DESTDIR" >&2
        exit 1
    fi
    local example="$DESTDIR$DOCDIR/convd.conf.example" conf="$SYSCONFDIR/convd/convd.conf"
    local keep_conf=0 n=0 path
    if [ -f "$DESTDIR$conf" ] && ! cmp -s "$DESTDIR$conf" "$example"; then
        keep_conf=1
    fi
    mapfile -t lines <"$DESTDIR$MANIFEST"
    for path in "${lines[@]}"; do
        case $path in
        */) continue ;;
        "$conf") if [ $keep_conf = 1 ]; then
                echo "uninstall: keeping $DESTDIR$conf (changed since it was installed)"
                continue
            fi ;;
        esac
        if [ -e "$DESTDIR$path" ] || [ -L "$DESTDIR$path" ]; then
            rm -f "$DESTDIR$path"
            n=$((n + 1))
        fi
    done
    for path in "${lines[@]}"; do
        case $path in
        */) rmdir "$DESTDIR$path" 2>/dev/null || true ;;
        esac
    done
    echo "uninstall: removed $n files"
}

case ${1:-} in
install) install_all ;;
uninstall) uninstall_all ;;
*) echo "usage: dist/install.sh install|uninstall (run by make install / make uninstall)" >&2; exit 2 ;;
esac
