#!/usr/bin/env bash
# What .ci/run checks of the package scripts/package.sh made, once it has installed it with
# `apt-get install ./dist/authflow_*.deb`, as a person would: it runs what the package installed
# and purges it again; then unpacks the tarball into a person's ~/.local and runs that.
# Documentation/CLI.md ("What the package installs") lists the files.
#
# usage: packaging/check-installed.sh [DIST]     (as root, the package installed; DIST: where
#                                                package.sh wrote, dist/)
#
# From the installed files: authflow --version (the version in VERSION) and demo; man -w; a
# provider id completed by bash at Tab (bash-completion's loader, on a pseudo-terminal) and by
# fish; systemd-analyze verify on the system and the user units, none of them enabled, no user
# made, no maintainer script; login --qr drawing its QR code, then, with libqrencode4 removed,
# saying why it cannot (and exiting as a denied login does, 77), then libqrencode4 put back;
# apt-get purge, after which no file of the package is left and bash no longer completes the id.
# From the tarball: the same files, and --version, demo, man -w and bash's Tab through PATH.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIST="$(cd "${1:-$REPO/dist}" && pwd)"
VERSION="$(tr -d '[:space:]' < "$REPO/VERSION")"
ARCH="$(dpkg --print-architecture)"
DEB="$DIST/authflow_${VERSION}_${ARCH}.deb"
TARBALL="$DIST/authflow-$VERSION-linux-$(uname -m).tar.gz"
say() { printf 'check-installed.sh: %s\n' "$*" >&2; }
fail() { say "FAILED: $*"; exit 1; }
ok() { say "ok: $*"; }

[[ $EUID -eq 0 ]] || fail "run as root: it purges the package"
[[ -f "$DEB" && -f "$TARBALL" ]] || fail "no $DEB or $TARBALL: run scripts/package.sh first"
[[ "$(dpkg-query -W -f='${Status} ${Version}' authflow 2>/dev/null)" == "install ok installed $VERSION" ]] ||
  fail "authflow $VERSION is not installed: apt-get install $DEB first (this check purges it at the end)"
command -v systemd-analyze >/dev/null || fail "systemd-analyze is missing (apt-get install systemd)"
[[ -f /usr/share/bash-completion/bash_completion ]] || fail "bash-completion is not installed (apt-get install bash-completion)"

export DEBIAN_FRONTEND=noninteractive
work="$(mktemp -d)"
server=""
qrencode_removed=""
cleanup() {
  [[ -n "$server" ]] && kill "$server" 2>/dev/null || true
  if [[ -n "$qrencode_removed" ]]; then apt-get install -y -qq --no-install-recommends libqrencode4 >/dev/null || true; fi
  if dpkg-query -W -f='${Status}' authflow 2>/dev/null | grep -q 'installed'; then apt-get purge -y -qq authflow >/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# A person's account: a home with a catalog, nothing of root's.
export HOME="$work/home"
unset XDG_CONFIG_HOME XDG_STATE_HOME AUTHFLOW_CONFIG AUTHFLOW_STORE
mkdir -p "$HOME/.config/authflow"
python3 "$REPO/packaging/device-server.py" "$work/port" &
server=$!
for _ in $(seq 100); do [[ -s "$work/port" ]] && break; sleep 0.1; done
[[ -s "$work/port" ]] || fail "the loopback device server did not start"
port="$(cat "$work/port")"
cat > "$HOME/.config/authflow/providers.json" <<EOF
[
  { "id": "ci-provider", "clientID": "ci", "tokenURL": "http://127.0.0.1:$port/token",
    "deviceAuthorizationURL": "http://127.0.0.1:$port/device" },
  { "id": "other", "clientID": "ci", "tokenURL": "http://127.0.0.1:$port/token" }
]
EOF

# The package's files and its own directories (not /usr, /lib, /usr/share/man/man1, … it shares).
mapfile -t files < <(dpkg-deb -c "$DEB" | awk '$1 !~ /^d/ { print substr($6, 2) }')
mapfile -t own_dirs < <(dpkg-deb -c "$DEB" | awk '$1 ~ /^d/ && $6 ~ /\/authflow\/$|\/authflow\// { print substr($6, 2) }')
for path in "${files[@]}"; do [[ -f "$path" ]] || fail "dpkg installed no $path"; done
cmp -s /usr/bin/authflow <(dpkg-deb --fsys-tarfile "$DEB" | tar -xO ./usr/bin/authflow) || fail "/usr/bin/authflow is not the one in $DEB"
ok "authflow $VERSION installed from $DEB (${#files[@]} files)"

[[ "$(command -v authflow)" == /usr/bin/authflow ]] || fail "authflow on PATH is $(command -v authflow), not /usr/bin/authflow"
[[ "$(authflow --version)" == "authflow $VERSION" ]] || fail "authflow --version says '$(authflow --version)', VERSION $VERSION"
ok "authflow --version: authflow $VERSION"
[[ "$(readlink /usr/bin/docker-credential-authflow)" == authflow ]] || fail "/usr/bin/docker-credential-authflow is not a link to authflow"
[[ "$(docker-credential-authflow version)" == "docker-credential-authflow (authflow) $VERSION" ]] ||
  fail "docker-credential-authflow version says '$(docker-credential-authflow version 2>&1)'"
ok "docker-credential-authflow: the link Docker runs answers as the helper"
authflow demo > "$work/demo" 2>&1 || { cat "$work/demo" >&2; fail "authflow demo exited $?"; }
grep -q '^Done: the temporary store is removed' "$work/demo" || { cat "$work/demo" >&2; fail "authflow demo did not finish"; }
ok "authflow demo"
[[ "$(man -w authflow)" == /usr/share/man/man1/authflow.1.gz ]] || fail "man -w authflow: '$(man -w authflow 2>&1)'"
ok "man -w authflow: /usr/share/man/man1/authflow.1.gz"
[[ "$(readlink /usr/share/man/man1/docker-credential-authflow.1.gz)" == authflow.1.gz ]] ||
  fail "/usr/share/man/man1/docker-credential-authflow.1.gz is not a link to authflow.1.gz"
# man -w names the page the link leads to.
[[ "$(man -w docker-credential-authflow)" == /usr/share/man/man1/authflow.1.gz ]] ||
  fail "man -w docker-credential-authflow: '$(man -w docker-credential-authflow 2>&1)'"
helper_page="$(MANWIDTH=100 man docker-credential-authflow 2>/dev/null)"
[[ "$helper_page" == *docker-credential-authflow* ]] || fail "man docker-credential-authflow shows a page that does not name the helper"
ok "man docker-credential-authflow: authflow(1), which describes the helper"

completed="$(python3 "$REPO/packaging/tab-complete.py" 'authflow token ci-')"
[[ "$completed" == "authflow token ci-provider" ]] || fail "bash completed 'authflow token ci-' to '$completed', not 'authflow token ci-provider'"
ok "bash, Tab after 'authflow token ci-': $completed"
fish_words="$(fish -c 'complete --do-complete "authflow token ci-"' | cut -f1)"
[[ "$fish_words" == ci-provider ]] || fail "fish completes 'authflow token ci-' with '$fish_words'"
ok "fish completes 'authflow token ci-' with ci-provider"

units=(/lib/systemd/system/authflow-agent.service /lib/systemd/system/authflow-agent.socket)
user_units=(/usr/lib/systemd/user/authflow-agent.service /usr/lib/systemd/user/authflow-agent.socket)
systemd-analyze verify "${units[@]}" || fail "systemd-analyze verify ${units[*]}"
XDG_RUNTIME_DIR="$work" systemd-analyze --user verify "${user_units[@]}" || fail "systemd-analyze --user verify ${user_units[*]}"
ok "systemd-analyze verify: ${units[*]} ${user_units[*]}"
for unit in "${units[0]}" "${user_units[0]}"; do
  grep -q '^ExecStart=/usr/bin/authflow\b' "$unit" || fail "$unit does not run /usr/bin/authflow"
done
enabled="$(find /etc/systemd -name 'authflow*' 2>/dev/null)"
[[ -z "$enabled" ]] || fail "installing enabled units: $enabled"
! getent passwd authflow >/dev/null || fail "installing created a user authflow"
scripts="$(ls /var/lib/dpkg/info/authflow.{preinst,postinst,prerm,postrm,config} 2>/dev/null || true)"
[[ -z "$scripts" ]] || fail "the package has maintainer scripts: $scripts"
ok "no unit enabled, no user, no maintainer script"

# The QR code: drawn with libqrencode4, explained without it; the login itself runs to the end.
login() { authflow login ci-provider --device --qr > "$work/login.out" 2> "$work/login.err"; }
if login; then status=0; else status=$?; fi
[[ $status -eq 77 ]] || { cat "$work/login.err" >&2; fail "login --qr exited $status, not 77 (denied)"; }
grep -q '▀\|▄' "$work/login.err" || { cat "$work/login.err" >&2; fail "login --qr drew no QR code with libqrencode4 installed"; }
ok "login --qr with libqrencode4: the QR code drawn, exit 77 (the server denies)"
if dpkg-query -W -f='${Status}' libqrencode4 2>/dev/null | grep -q 'install ok installed'; then
  apt-get remove -y -qq libqrencode4 >/dev/null
  qrencode_removed=yes
fi
if login; then status=0; else status=$?; fi
[[ $status -eq 77 ]] || { cat "$work/login.err" >&2; fail "without libqrencode4, login --qr exited $status, not 77 (denied)"; }
grep -qx 'note: no QR code: libqrencode.so.4 could not be loaded (Debian: apt-get install libqrencode4; --no-qr hides this note)' "$work/login.err" ||
  { cat "$work/login.err" >&2; fail "without libqrencode4, login --qr did not say why there is no QR code"; }
! grep -q '▀\|▄' "$work/login.err" || fail "a QR code was drawn without libqrencode4"
grep -q "CIQR-CODE" "$work/login.out" || fail "without libqrencode4, login did not show the code as text"
ok "login --qr without libqrencode4: $(grep '^note: no QR code' "$work/login.err"), exit 77"
if [[ -n "$qrencode_removed" ]]; then
  apt-get install -y -qq --no-install-recommends libqrencode4 >/dev/null
  qrencode_removed=""
fi

apt-get purge -y -qq authflow >/dev/null
if dpkg-query -W -f='${Status}' authflow 2>/dev/null | grep -q 'installed'; then fail "apt-get purge left authflow installed"; fi
left=()
for path in "${files[@]}" "${own_dirs[@]}"; do
  if [[ -e "$path" || -L "$path" ]]; then left+=("$path"); fi
done
left+=($(ls -d /var/lib/dpkg/info/authflow.* /etc/authflow /var/lib/authflow /etc/systemd/system/*authflow* 2>/dev/null || true))
[[ ${#left[@]} -eq 0 ]] || fail "apt-get purge left: ${left[*]}"
ok "apt-get purge: none of its ${#files[@]} files and ${#own_dirs[@]} directories is left"
completed="$(python3 "$REPO/packaging/tab-complete.py" 'authflow token ci-')"
[[ "$completed" == "authflow token ci-" ]] || fail "after the purge, bash still completed 'authflow token ci-' to '$completed'"
ok "after the purge, bash completes nothing there (so the check above could fail)"

# The tarball, unpacked into a person's ~/.local as README.md says: the package's files (zsh's
# directory and the units' place aside), and an authflow that runs, completes and has its page there.
prefix="$HOME/.local"
mkdir -p "$prefix"
tar -xzf "$TARBALL" -C "$prefix"
expected="$(printf '%s\n' "${files[@]}" | sed -e 's#^/usr/##' -e 's#^/lib/#lib/#' \
  -e 's#^share/zsh/vendor-completions/#share/zsh/site-functions/#' | grep -v '^share/lintian/' | sort)"
got="$(cd "$prefix" && find . -type f -o -type l | sed 's#^\./##' | sort)"
missing="$(comm -23 <(echo "$expected") <(echo "$got"))"
[[ -z "$missing" ]] || fail "the tarball lacks what the package has: $missing"
extra="$(comm -13 <(echo "$expected") <(echo "$got"))"
[[ -z "$extra" ]] || fail "the tarball has what the package lacks: $extra"
grep -q '^ExecStart=/usr/local/bin/authflow\b' "$prefix/lib/systemd/system/authflow-agent.service" || fail "the tarball's system unit"
export PATH="$prefix/bin:$PATH"
[[ "$(command -v authflow)" == "$prefix/bin/authflow" ]] || fail "authflow is not $prefix/bin/authflow on PATH"
[[ "$(authflow --version)" == "authflow $VERSION" ]] || fail "the tarball's authflow --version"
authflow demo > "$work/demo" 2>&1 || fail "the tarball's authflow demo"
[[ "$(MANPATH= man -w authflow)" == "$prefix/share/man/man1/authflow.1.gz" ]] || fail "man does not find the tarball's page through PATH: '$(man -w authflow 2>&1)'"
completed="$(python3 "$REPO/packaging/tab-complete.py" 'authflow token ci-')"
[[ "$completed" == "authflow token ci-provider" ]] || fail "with the tarball in ~/.local, bash completed 'authflow token ci-' to '$completed'"
ok "the tarball in ~/.local: the package's files; authflow --version, demo, man -w and bash's Tab from there"
say "all checks passed"
