# fieldprof login hook (/etc/profile.d): puts the runtime into this user's
# programs only when the machine's answer (/etc/fieldprof/volunteer.conf)
# and the user's own (consent in their runtime settings, fieldprof optin)
# both say yes, and the library is there. Anything else does nothing: a
# removed package, a missing or unreadable file, an unset HOME.
_fp_lib=/usr/lib/fieldprof/libfieldprof.so
_fp_conf="${XDG_CONFIG_HOME:-${HOME:-/nonexistent}/.config}/fieldprof/runtime.conf"
if [ -r "$_fp_lib" ] && [ -r "$_fp_conf" ] &&
    grep -Eqs '^[[:space:]]*participate[[:space:]]*=[[:space:]]*yes[[:space:]]*$' /etc/fieldprof/volunteer.conf &&
    grep -Eqs '^[[:space:]]*consent[[:space:]]*=[[:space:]]*yes[[:space:]]*$' "$_fp_conf"; then
    case " ${LD_PRELOAD:-} " in
        *" $_fp_lib "*) ;;
        *) LD_PRELOAD="$_fp_lib${LD_PRELOAD:+ $LD_PRELOAD}"; export LD_PRELOAD ;;
    esac
fi
unset _fp_lib _fp_conf
