#!/bin/sh
# What the package does to sessions of users who opted in, for its
# maintainer scripts:
#   user-sessions.sh stop      removal: the agent stops in every running
#                              user systemd instance, and each session's
#                              preload link (the login hook's) becomes an
#                              object that does nothing, so no program is
#                              left preloading a missing library
#   user-sessions.sh restart   upgrade: running agents restart on the new
#                              binary and unit (stopped ones stay stopped)
# Work inside a user's runtime directory is done as that user.
inert=/usr/lib/fieldprof/libfieldprof-inert.so
for dir in /run/user/*; do
    [ -d "$dir" ] || continue
    user=$(getent passwd "${dir##*/}" | cut -d: -f1) || continue
    [ -n "$user" ] || continue
    case "$1" in
    stop)
        if [ -S "$dir/systemd/private" ]; then
            systemctl --user --machine="$user@" stop fieldprof-agent.service > /dev/null 2>&1 || true
        fi
        if [ -L "$dir/fieldprof/libfieldprof.so" ] && [ -r "$inert" ]; then
            runuser -u "$user" -- sh -c \
                't=$(mktemp "$1/fieldprof/.inert.XXXXXX") && cat "$2" > "$t" && mv -f "$t" "$1/fieldprof/libfieldprof.so"' \
                sh "$dir" "$inert" > /dev/null 2>&1 || true
        fi
        ;;
    restart)
        [ -S "$dir/systemd/private" ] || continue
        systemctl --user --machine="$user@" daemon-reload > /dev/null 2>&1 || true
        systemctl --user --machine="$user@" try-restart fieldprof-agent.service > /dev/null 2>&1 || true
        ;;
    esac
done
exit 0
