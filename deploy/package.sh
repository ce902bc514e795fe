#!/usr/bin/env bash
# Builds fieldprof's Debian package for volunteers and developers from this
# tree into ./dist, with dpkg-deb, then runs lintian on it (issue #16):
#
#   fieldprof_<version>_amd64.deb
#     /usr/bin/fieldprof, /usr/bin/fieldprof-agent
#     /usr/lib/fieldprof/libfieldprof.so         the runtime
#     /etc/profile.d/fieldprof.sh                the login hook (puts the
#         runtime into a user's programs only when the machine and the
#         user both said yes, and the library is there)
#     /usr/lib/systemd/user/fieldprof-agent.service   the agent, per user
#     /etc/fieldprof/agent.conf                  the aggregator to upload to
#     the debconf question (default no), man pages made from --help
#
# Maintainer scripts and files: deploy/debian/fieldprof/. Version: the
# project's, plus the date and commit of the tree (0.1.0~git20261122.abc1234-1).
#
#   deploy/package.sh           # -> dist/*.deb, lintian's output on stdout
set -euo pipefail
cd "$(dirname "$0")/.."
./deploy/install-deps.sh >/dev/null
./deploy/build.sh fieldprof fieldprof-agent fieldprof_runtime >/dev/null

upstream="$(sed -n 's/^project(fieldprof VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)"
version="${upstream}~git$(git log -1 --format=%cd --date=format:%Y%m%d).$(git rev-parse --short=7 HEAD)-1"
arch="$(dpkg --print-architecture)"
src=deploy/debian/fieldprof
mkdir -p dist
stage="$(mktemp -d /tmp/fieldprof-pkg-XXXXXX)"
trap 'rm -rf "$stage"' EXIT
root="$stage/fieldprof"

# Files, with the modes and owners a package wants (dpkg-deb --root-owner-group).
install -D -m 0755 build/tools/fieldprof "$root/usr/bin/fieldprof"
install -D -m 0755 build/agent/fieldprof-agent "$root/usr/bin/fieldprof-agent"
install -D -m 0644 build/agent/runtime/libfieldprof.so "$root/usr/lib/fieldprof/libfieldprof.so"
strip --strip-unneeded --remove-section=.comment --remove-section=.note \
  "$root/usr/bin/fieldprof" "$root/usr/bin/fieldprof-agent"
# The runtime keeps its .note.gnu.build-id and its loaded layout (tests/runtime
# checks which page .data shares): only sections that are not loaded go.
strip --strip-unneeded --remove-section=.comment "$root/usr/lib/fieldprof/libfieldprof.so"
install -D -m 0644 "$src/fieldprof.sh" "$root/etc/profile.d/fieldprof.sh"
install -D -m 0644 "$src/agent.conf" "$root/etc/fieldprof/agent.conf"
install -D -m 0644 "$src/fieldprof-agent.service" \
  "$root/usr/lib/systemd/user/fieldprof-agent.service"

# Documentation: copyright, changelog, man pages from each command's --help.
doc="$root/usr/share/doc/fieldprof"
install -d "$doc" "$root/usr/share/man/man1"
cat > "$doc/copyright" <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: fieldprof
Source: the fieldprof repository

Files: *
Copyright: 2026 the fieldprof authors
License: Apache-2.0
 On Debian systems, the full text of the Apache License 2.0 is in
 /usr/share/common-licenses/Apache-2.0.
EOF
printf 'fieldprof (%s) unstable; urgency=medium\n\n  * Built from commit %s.\n\n -- fieldprof developers <devel@fieldprof.invalid>  %s\n' \
  "$version" "$(git rev-parse --short=12 HEAD)" "$(date -R -d "@$(git log -1 --format=%ct)")" |
  gzip -9n > "$doc/changelog.Debian.gz"
export FIELDPROF_LIB_DIR="$PWD/build/agent/runtime"
help2man --no-info --version-string="$version" -n "field profiling: measure library APIs, see their field cost" \
  build/tools/fieldprof | gzip -9n > "$root/usr/share/man/man1/fieldprof.1.gz"
help2man --no-info --version-string="$version" -n "uploads the runtime's records, exactly once" \
  build/agent/fieldprof-agent | gzip -9n > "$root/usr/share/man/man1/fieldprof-agent.1.gz"

# Control: dependencies from the libraries the binaries link (the packages
# that ship them, at the versions this tree was built against).
deps="$(for f in "$root/usr/bin/"* "$root/usr/lib/fieldprof/"*.so; do
          objdump -p "$f" | awk '/NEEDED/ {print $2}'
        done | sort -u | while read -r so; do
          path="$(ldconfig -p | awk -v so="$so" '$1 == so && /x86-64/ {print $NF; exit}')"
          [[ -n "$path" ]] || continue
          # dpkg knows a file by the path its package ships (/lib or /usr/lib).
          pkg="$( (dpkg -S "$path" || dpkg -S "$(readlink -f "$path")") 2>/dev/null | head -1 | cut -d: -f1)"
          [[ -n "$pkg" ]] || continue
          ver="$(dpkg-query -W -f='${Version}' "$pkg" | sed 's/-[^-]*$//')"
          echo "$pkg (>= $ver)"
        done | sort -u | paste -sd, | sed 's/,/, /g')"
install -d "$root/DEBIAN"
cat > "$root/DEBIAN/control" <<EOF
Package: fieldprof
Version: $version
Architecture: $arch
Maintainer: fieldprof developers <devel@fieldprof.invalid>
Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)
Depends: $deps, debconf (>= 0.5) | debconf-2.0
Section: devel
Priority: optional
Homepage: https://fieldprof.invalid/
Description: field profiling of shared-library APIs (volunteer side)
 fieldprof measures what library APIs such as sqlite3_prepare_v2, deflate or
 getaddrinfo cost on real machines. This package holds the runtime that
 times a few randomly chosen APIs in the programs of users who opt in, the
 agent that uploads the sums, and the fieldprof command (run, status,
 optin, optout, cost).
 .
 Installing asks whether users of this machine may take part (default no);
 each user then decides with fieldprof optin and fieldprof optout.
EOF
printf '/etc/fieldprof/agent.conf\n/etc/profile.d/fieldprof.sh\n' > "$root/DEBIAN/conffiles"
install -m 0755 "$src/config" "$src/postinst" "$src/postrm" "$root/DEBIAN/"
install -m 0644 "$src/templates" "$root/DEBIAN/templates"

deb="dist/fieldprof_${version}_${arch}.deb"
rm -f dist/fieldprof_*.deb
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "package.sh: $deb ($(du -h "$deb" | cut -f1))"
echo "== lintian (deploy/debian/lintian-exceptions.md says why what remains is left)"
lintian --tag-display-limit 0 "$deb" || true
