# fieldprof login hook (/etc/profile.d): puts the runtime's front into this
# user's programs (a page that looks at each run and loads the runtime
# beside it only in a run it may measure) only when the machine's answer (/etc/fieldprof/volunteer.conf)
# and the user's own (consent in their runtime settings, fieldprof optin)
# both say yes, and the library is there. Anything else does nothing: a
# removed package, a missing or unreadable file, an unset HOME.
#
# The preload names a link in the session's runtime directory
# ($XDG_RUNTIME_DIR/fieldprof/libfieldprof.so -> the front, gone at
# logout), not the library: removing the package turns each link into an object that does
# nothing, so programs of shells started before the removal never preload
# a missing file. Without a runtime directory (no systemd-logind) the
# preload names the library itself.
_fp_lib=/usr/lib/fieldprof/libfieldprof-front.so
_fp_conf="${XDG_CONFIG_HOME:-${HOME:-/nonexistent}/.config}/fieldprof/runtime.conf"
if [ -r "$_fp_lib" ] && [ -r "$_fp_conf" ] &&
    grep -Eqs '^[[:space:]]*participate[[:space:]]*=[[:space:]]*yes[[:space:]]*$' /etc/fieldprof/volunteer.conf &&
    grep -Eqs '^[[:space:]]*consent[[:space:]]*=[[:space:]]*yes[[:space:]]*$' "$_fp_conf"; then
    _fp_use="$_fp_lib"
    if [ -n "${XDG_RUNTIME_DIR:-}" ] && [ -d "$XDG_RUNTIME_DIR" ] && [ -O "$XDG_RUNTIME_DIR" ] &&
        mkdir -p "$XDG_RUNTIME_DIR/fieldprof" 2> /dev/null &&
        ln -sfn "$_fp_lib" "$XDG_RUNTIME_DIR/fieldprof/libfieldprof.so" 2> /dev/null; then
        _fp_use="$XDG_RUNTIME_DIR/fieldprof/libfieldprof.so"
    fi
    case " ${LD_PRELOAD:-} " in
        *" $_fp_use "*) ;;
        *) LD_PRELOAD="$_fp_use${LD_PRELOAD:+ $LD_PRELOAD}"; export LD_PRELOAD ;;
    esac
fi
unset _fp_lib _fp_conf _fp_use
