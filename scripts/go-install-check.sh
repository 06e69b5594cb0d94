#!/usr/bin/env bash
# go-install-check.sh: checks that
#
#   go install github.com/kafka2pg/kafka2pg/cmd/kafka2pg@VERSION
#
# works for a user, as far as it can be checked without GitHub: the
# committed tree (HEAD) is served as a module version by a file-based
# GOPROXY, exactly as the Go proxy would serve a tag (the module zip leaves
# out nested modules such as deploy/kubernetes), and every dependency comes
# from the public proxy into an empty module cache. It also checks that
# go.mod has no replace or exclude directive (go install pkg@version refuses
# them) and that `go build ./cmd/kafka2pg` works from an empty module cache
# with GOFLAGS=-mod=mod. The installed binary must report the version.
# Needs the Go module proxy; uncommitted changes are not part of the check.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

say() { printf '==> %s\n' "$*"; }
fail() { printf 'go-install-check: %s\n' "$*" >&2; exit 1; }

module=$(go list -m)
[ "$module" = github.com/kafka2pg/kafka2pg ] || fail "the module path is $module, want github.com/kafka2pg/kafka2pg"
if grep -Eq '^[[:space:]]*(replace|exclude)([[:space:]]|\()' go.mod; then
	fail "go.mod has a replace or exclude directive: go install $module/cmd/kafka2pg@version refuses such a module"
fi

tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
commit=$(git rev-parse HEAD)
stamp=$(TZ=UTC git show -s --format=%cd --date=format-local:%Y%m%d%H%M%S "$commit")
version="v0.0.0-$stamp-${commit:0:12}"

say "module zip of HEAD as $module@$version"
proxy="$tmp/proxy/$module/@v"
mkdir -p "$proxy"
git archive --format=tar "$commit" | python3 -c '
import io, sys, tarfile, zipfile
prefix, out = sys.argv[1], sys.argv[2]
tar = tarfile.open(fileobj=io.BytesIO(sys.stdin.buffer.read()))
files = [m for m in tar.getmembers() if m.isfile()]
# A directory with its own go.mod is another module: the Go command leaves
# it (and all below it) out of this module zip.
nested = {m.name.rsplit("/", 1)[0] + "/" for m in files if m.name.endswith("/go.mod")}
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
    for m in files:
        if any(m.name.startswith(n) for n in nested):
            continue
        z.writestr(prefix + m.name, tar.extractfile(m).read())
' "$module@$version/" "$proxy/$version.zip"
git show "$commit:go.mod" >"$proxy/$version.mod"
printf '{"Version":"%s","Time":"%s"}\n' "$version" "$(TZ=UTC git show -s --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ "$commit")" >"$proxy/$version.info"
echo "$version" >"$proxy/list"

say "go install $module/cmd/kafka2pg@$version (empty module cache, dependencies from the Go proxy)"
(
	cd "$tmp"
	env GOPROXY="file://$tmp/proxy,https://proxy.golang.org" GONOSUMDB="$module" GOFLAGS=-mod=mod \
		GOMODCACHE="$tmp/modcache" GOPATH="$tmp/gopath" GOBIN="$tmp/bin" \
		go install "$module/cmd/kafka2pg@$version"
)
printed=$("$tmp/bin/kafka2pg" version)
[ "$printed" = "kafka2pg $version" ] || fail "the installed binary printed '$printed', want 'kafka2pg $version'"
echo "$printed"

say "go build ./cmd/kafka2pg with GOFLAGS=-mod=mod and an empty module cache"
env GOFLAGS=-mod=mod GOMODCACHE="$tmp/modcache-build" go build -o "$tmp/kafka2pg-build" ./cmd/kafka2pg
"$tmp/kafka2pg-build" version

say "ok: go install $module/cmd/kafka2pg@<tag> works once HEAD is tagged and pushed"
