#!/usr/bin/env bash
# The Debian package and the tarball of authflow, made from one release build (README.md,
# "Install"; Documentation/CLI.md, "What the package installs").
#
# usage: scripts/package.sh [--binary FILE] [--out DIR] [--no-lintian]
#
# Builds .build/release/authflow with scripts/release-build.sh (or takes FILE, an executable that
# script built, e.g. with --order), checks that it says the version in VERSION, strips it (its
# build-id kept; the symbols go to the -dbgsym package), and writes into DIR (default dist/):
#
#   authflow_VERSION_ARCH.deb              ARCH: dpkg's architecture (amd64, arm64)
#   authflow-dbgsym_VERSION_ARCH.deb       /usr/lib/debug/.build-id/NN/REST.debug
#   authflow-VERSION-linux-MACHINE.tar.gz  MACHINE: uname -m (x86_64, aarch64); bin/, share/, lib/
#
# The packaging files are in packaging/debian/ (control, copyright, libraries: what the executable
# opens with dlopen). Then, when lintian is installed, both packages must pass it: any error or
# warning fails the script. Needs dpkg-dev (dpkg-shlibdeps), binutils and gzip, as Debian 12 with
# the toolchain has; runs as any user (the files are owned by root in the archives).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$REPO/dist"
BINARY=""
LINTIAN=yes
while [[ $# -gt 0 ]]; do
  case "$1" in
    --binary) BINARY="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"; shift 2 ;;
    --out) mkdir -p "$2"; OUT="$(cd "$2" && pwd)"; shift 2 ;;
    --no-lintian) LINTIAN=no; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "package.sh: unknown argument $1" >&2; exit 64 ;;
  esac
done
say() { printf 'package.sh: %s\n' "$*" >&2; }
fail() { say "$*"; exit 1; }

VERSION="$(tr -d '[:space:]' < "$REPO/VERSION")"
[[ "$VERSION" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "VERSION holds '$VERSION', not MAJOR.MINOR.PATCH"
ARCH="$(dpkg --print-architecture)"
MACHINE="$(uname -m)"
DEBIAN="$REPO/packaging/debian"

if [[ -z "$BINARY" ]]; then
  BINARY="$("$REPO/scripts/release-build.sh" authflow)"
fi
[[ -x "$BINARY" ]] || fail "no executable at $BINARY"
said="$("$BINARY" --version)"
[[ "$said" == "authflow $VERSION" ]] ||
  fail "VERSION says $VERSION but $BINARY says '$said': make Authflow.version (Sources/AuthflowCLI/Help.swift) the same"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
umask 022
# dpkg-shlibdeps wants the layout debhelper makes: debian/control, and each package's tree in debian/NAME.
root="$work/debian/authflow"
dbg="$work/debian/authflow-dbgsym"
mkdir -p "$root/DEBIAN" "$dbg/DEBIAN"
printf 'Source: authflow\n\nPackage: authflow\nArchitecture: any\n' > "$work/debian/control"

# The executable, stripped as dh_strip does (.comment and .note go, .note.gnu.build-id stays), and
# its symbols under the build-id, where gdb and debuginfod look for them.
build_id="$(readelf -n "$BINARY" | awk '/Build ID:/ { print $3; exit }')"
[[ "$build_id" =~ ^[0-9a-f]{4,}$ ]] || fail "$BINARY has no build-id (readelf -n): the debug symbols could not be found by it"
debug_file="usr/lib/debug/.build-id/${build_id:0:2}/${build_id:2}.debug"
install -d "$root/usr/bin" "$(dirname "$dbg/$debug_file")"
objcopy --only-keep-debug --compress-debug-sections "$BINARY" "$dbg/$debug_file"
chmod 0644 "$dbg/$debug_file"
strip --remove-section=.comment --remove-section=.note -o "$root/usr/bin/authflow" "$BINARY"
objcopy --add-gnu-debuglink="$dbg/$debug_file" "$root/usr/bin/authflow"
chmod 0755 "$root/usr/bin/authflow"
# Docker runs its credential helpers by the name docker-credential-NAME; authflow answers as
# the helper when started under that name (Documentation/CLI.md, "docker-credential").
ln -s authflow "$root/usr/bin/docker-credential-authflow"
[[ "$(readelf -n "$root/usr/bin/authflow" | awk '/Build ID:/ { print $3; exit }')" == "$build_id" ]] ||
  fail "stripping lost the build-id"
authflow="$root/usr/bin/authflow"

# Made by the executable from its command table, as scripts/release-build.sh --install does.
install -d "$root/usr/share/man/man1" "$root/usr/share/bash-completion/completions" \
  "$root/usr/share/zsh/vendor-completions" "$root/usr/share/fish/vendor_completions.d"
"$authflow" man | gzip -9n > "$root/usr/share/man/man1/authflow.1.gz"
# The helper's name has the page that describes it (its command, docker-credential).
ln -s authflow.1.gz "$root/usr/share/man/man1/docker-credential-authflow.1.gz"
"$authflow" completion bash > "$root/usr/share/bash-completion/completions/authflow"
"$authflow" completion zsh > "$root/usr/share/zsh/vendor-completions/_authflow"
"$authflow" completion fish > "$root/usr/share/fish/vendor_completions.d/authflow.fish"

# The units of Resources/systemd/, which run /usr/local/bin/authflow (where scripts/release-build.sh
# --install puts it), made to run the package's /usr/bin/authflow. Debian 12 keeps system units in
# /lib (its packages do not move files between / and /usr), user units in /usr/lib.
units() {  # units SOURCE-DIR TARGET-DIR BINARY
  install -d "$2"
  for unit in "$1"/*; do
    if [[ "$unit" == *.service ]] && ! grep -q '^ExecStart=/usr/local/bin/authflow\b' "$unit"; then
      fail "$unit: ExecStart is not /usr/local/bin/authflow, which this script rewrites"
    fi
    sed "s#^ExecStart=/usr/local/bin/authflow\b#ExecStart=$3#" "$unit" > "$2/$(basename "$unit")"
    chmod 0644 "$2/$(basename "$unit")"
  done
}
units "$REPO/Resources/systemd/system" "$root/lib/systemd/system" /usr/bin/authflow
units "$REPO/Resources/systemd/user" "$root/usr/lib/systemd/user" /usr/bin/authflow

# /usr/share/doc/authflow: the README, the copyright, the changelog (Debian's format, made from
# CHANGELOG.md: one entry per released version, one item per bullet) and the example catalog.
doc="$root/usr/share/doc/authflow"
install -d "$doc/examples"
gzip -9nc "$REPO/README.md" > "$doc/README.md.gz"
install -m 0644 "$DEBIAN/copyright" "$doc/copyright"
install -m 0644 "$REPO/Resources/providers.json" "$doc/examples/providers.json"
maintainer="$(sed -n 's/^Maintainer: //p' "$DEBIAN/control")"
awk -v maintainer="$maintainer" '
  function flush() {
    if (item == "") return
    text = "[" part "] " item; line = "  *"
    n = split(text, words, " ")
    for (i = 1; i <= n; i++) {
      if (length(line) + 1 + length(words[i]) > 78) { print line; line = "   " }
      line = line " " words[i]
    }
    print line; item = ""
  }
  function finish() {
    flush()
    if (version != "") { cmd = "date -u -R -d " date; cmd | getline stamp; close(cmd); print ""; print " -- " maintainer "  " stamp; print "" }
    version = ""
  }
  /^## / {
    finish()
    if ($0 ~ /^## [0-9]+\.[0-9]+\.[0-9]+ — [0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]$/) {
      version = $2; date = $4; part = ""
      print "authflow (" version ") unstable; urgency=medium"; print ""
    }
    next
  }
  version == "" { next }
  /^### / { flush(); part = substr($0, 5); next }
  /^- / { flush(); item = substr($0, 3); next }
  /^  [^ ]/ && item != "" { sub(/^ +/, ""); item = item " " $0; next }
  { flush() }
  END { finish() }
' "$REPO/CHANGELOG.md" | gzip -9n > "$doc/changelog.gz"
zcat "$doc/changelog.gz" | grep -q "^authflow ($VERSION) " ||
  fail "CHANGELOG.md has no section '## $VERSION — YYYY-MM-DD' for the version in VERSION"
if [[ -f "$DEBIAN/lintian-overrides" ]]; then
  install -D -m 0644 "$DEBIAN/lintian-overrides" "$root/usr/share/lintian/overrides/authflow"
fi

# Depends: what the executable links (dpkg-shlibdeps) and what it opens (packaging/debian/libraries).
sonames="$(grep -rhoE '"lib[a-z0-9_+-]+\.so\.[0-9]+"' "$REPO/Sources" | tr -d '"' | sort -u)"
listed="$(awk '!/^#/ && NF { print $1 }' "$DEBIAN/libraries" | sort -u)"
[[ "$sonames" == "$listed" ]] || fail "packaging/debian/libraries lists $(echo $listed) but Sources/ opens $(echo $sonames): make them agree"
words="$work/words"
grep -rhoE '[A-Za-z_][A-Za-z0-9_]*' "$REPO/Sources" | sort -u > "$words"
declare -A fields=([Depends]="" [Recommends]="" [Suggests]="")
while read -r soname package field floor _; do
  [[ -z "$soname" || "$soname" == \#* ]] && continue
  symbols="$(ls /var/lib/dpkg/info/"$package":*.symbols /var/lib/dpkg/info/"$package".symbols 2>/dev/null | head -1 || true)"
  minimum=""
  if [[ -n "$symbols" ]]; then
    minimum="$(awk -v soname="$soname" 'NR == FNR { used[$1] = 1; next }
      /^[^ *#]/ { inside = ($1 == soname); next }
      inside && /^ / { split($1, name, "@"); if (name[1] in used) print $2 }' "$words" "$symbols" | sort -V | tail -1)"
  else
    say "$package is not installed here: its version comes from packaging/debian/libraries alone"
  fi
  if [[ "$floor" != "-" ]] && { [[ -z "$minimum" ]] || dpkg --compare-versions "$floor" gt "$minimum"; }; then minimum="$floor"; fi
  fields[$field]+="${fields[$field]:+, }$package${minimum:+ (>= $minimum)}"
done < "$DEBIAN/libraries"
linked="$(cd "$work" && dpkg-shlibdeps -O -e"debian/authflow/usr/bin/authflow" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')"
[[ -n "$linked" ]] || fail "dpkg-shlibdeps found no library the executable links"
# dpkg-shlibdeps reads the versions of the symbols the executable uses; a version it needs without
# a symbol (GLIBC_ABI_DT_RELR, for the packed relocations: glibc 2.36) escapes it, so libc6's
# minimum is raised to the newest glibc version the executable names.
libc_symbols="$(ls /var/lib/dpkg/info/libc6:*.symbols 2>/dev/null | head -1 || true)"
if [[ -n "$libc_symbols" && "$linked" =~ libc6\ \(\>=\ ([^\)]+)\) ]]; then
  glibc="$(readelf -V --wide "$authflow" | awk '/Name: GLIBC_/ { print $3 "@" $3 }' | sort -u |
    awk 'NR == FNR { needed[$1] = 1; next } /^ / && ($1 in needed) { print $2 }' - "$libc_symbols" | sort -V | tail -1)"
  if [[ -n "$glibc" ]] && dpkg --compare-versions "$glibc" gt "${BASH_REMATCH[1]}"; then
    linked="${linked/libc6 (>= ${BASH_REMATCH[1]})/libc6 (>= $glibc)}"
  fi
fi
depends="$linked, ${fields[Depends]}"

size="$(du -sk --exclude=DEBIAN "$root" | cut -f1)"
sed -e "s/@VERSION@/$VERSION/" -e "s/@ARCH@/$ARCH/" -e "s/@INSTALLED_SIZE@/$size/" \
    -e "s/@DEPENDS@/$depends/" -e "s/@RECOMMENDS@/${fields[Recommends]}/" -e "s/@SUGGESTS@/${fields[Suggests]}/" \
    "$DEBIAN/control" | grep -vE '^(Recommends|Suggests): $' > "$root/DEBIAN/control"
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) > "$root/DEBIAN/md5sums"

# The -dbgsym package, as debhelper makes one.
install -d "$dbg/usr/share/doc"
ln -s authflow "$dbg/usr/share/doc/authflow-dbgsym"
cat > "$dbg/DEBIAN/control" <<EOF
Package: authflow-dbgsym
Source: authflow
Version: $VERSION
Auto-Built-Package: debug-symbols
Architecture: $ARCH
Maintainer: $maintainer
Installed-Size: $(du -sk --exclude=DEBIAN "$dbg" | cut -f1)
Depends: authflow (= $VERSION)
Section: debug
Priority: optional
Description: debug symbols for authflow
Build-Ids: $build_id
EOF
(cd "$dbg" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) > "$dbg/DEBIAN/md5sums"

mkdir -p "$OUT"
deb="$OUT/authflow_${VERSION}_${ARCH}.deb"
dbgsym="$OUT/authflow-dbgsym_${VERSION}_${ARCH}.deb"
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
dpkg-deb --root-owner-group -Zxz --build "$dbg" "$dbgsym" >/dev/null

# The tarball: the package's files under a prefix (bin/, share/, lib/systemd/), for /usr/local or
# ~/.local. The units keep /usr/local/bin/authflow; zsh looks in share/zsh/site-functions there.
tree="$work/tarball"
mkdir -p "$tree"
cp -a "$root/usr/bin" "$root/usr/share" "$tree/"
rm -rf "$tree/share/lintian"
mv "$tree/share/zsh/vendor-completions" "$tree/share/zsh/site-functions"
units "$REPO/Resources/systemd/system" "$tree/lib/systemd/system" /usr/local/bin/authflow
units "$REPO/Resources/systemd/user" "$tree/lib/systemd/user" /usr/local/bin/authflow
tarball="$OUT/authflow-$VERSION-linux-$MACHINE.tar.gz"
tar -C "$tree" --sort=name --owner=0 --group=0 --numeric-owner -cf - bin share lib | gzip -9n > "$tarball"

if [[ "$LINTIAN" == yes ]]; then
  if command -v lintian >/dev/null 2>&1; then
    # --fail-on: an error or a warning fails; info tags are shown. Overrides: packaging/debian/lintian-overrides.
    lintian --fail-on error,warning --info --display-info "$deb" "$dbgsym" >&2 ||
      fail "lintian reports the tags above: fix them, or override one in packaging/debian/lintian-overrides with a one-line reason"
  else
    say "lintian is not installed (apt-get install lintian): the packages were not checked"
  fi
fi
printf '%s\n' "$deb" "$dbgsym" "$tarball"
