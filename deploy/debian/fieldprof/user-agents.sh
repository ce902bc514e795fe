#!/bin/sh
# The agent in every running user systemd instance (users who opted in run
# it as their own service): user-agents.sh stop | restart. Used by the
# package's maintainer scripts: nothing keeps running a removed binary, and
# an upgrade restarts running agents on the new one (stopped ones stay so).
for dir in /run/user/*; do
    [ -S "$dir/systemd/private" ] || continue
    user=$(getent passwd "${dir##*/}" | cut -d: -f1) || continue
    [ -n "$user" ] || continue
    case "$1" in
    stop)
        systemctl --user --machine="$user@" stop fieldprof-agent.service > /dev/null 2>&1 || true ;;
    restart)
        systemctl --user --machine="$user@" daemon-reload > /dev/null 2>&1 || true
        systemctl --user --machine="$user@" try-restart fieldprof-agent.service > /dev/null 2>&1 || true ;;
    esac
done
exit 0
