#!/usr/bin/env bash
# Builds core/build/lattigo, the Lattigo the core compiles against (go.mod's
# replace directive): v6.2.0 exactly as the Go module proxy serves it
# (checked against its pinned go.sum hash), plus lattigo-v6.2.0.patch, which
# routes the ring package's NTTs and Montgomery loops to package kernels.
#
# A tree built from the same patch is checked file by file against a fresh
# pristine-plus-patch copy, and one that differs is refused: the core never
# compiles against an edited Lattigo. A changed patch rebuilds the tree.
# Moving to a later Lattigo means re-applying the patch to it and updating
# version and sum below.
set -euo pipefail

module=github.com/tuneinsight/lattigo/v6
version=v6.2.0
sum='h1:HZrksD5u87bOr/4hWHI1Jhps14Tafdvb84Fxmi3dou0='
modsum='h1:GggYhNDBTIsKOB5AVOdt6qdmqhZqXu7uDyiXQYQANlY='

here=$(cd "$(dirname "$0")" && pwd)
core=$(dirname "$here")
patchfile=$here/lattigo-$version.patch
dest=$core/build/lattigo
stamp=$dest/.encmatch-patch-sha256

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# 1. The pristine module, verified against the pinned hash.
mkdir "$work/mod"
printf 'module download\n\ngo 1.26\n' > "$work/mod/go.mod"
printf '%s %s %s\n%s %s/go.mod %s\n' "$module" "$version" "$sum" "$module" "$version" "$modsum" > "$work/mod/go.sum"
json=$(cd "$work/mod" && GOSUMDB=off GOFLAGS= go mod download -json "$module@$version")
src=$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
got=$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Sum": "\(.*\)",$/\1/p')
if [ -z "$src" ] || [ "$got" != "$sum" ]; then
	echo "patch-lattigo: could not download $module@$version with hash $sum:" >&2
	printf '%s\n' "$json" >&2
	exit 1
fi

# 2. Pristine plus the patch, in a scratch copy.
cp -r "$src" "$work/lattigo"
chmod -R u+w "$work/lattigo"
# (git apply as a plain patch tool: no repository above the scratch copy)
(cd "$work/lattigo" && GIT_CEILING_DIRECTORIES="$work" git apply --whitespace=nowarn -p1 "$patchfile")
want=$(sha256sum "$patchfile" | cut -d' ' -f1)
echo "$want" > "$work/lattigo/.encmatch-patch-sha256"

# 3. Keep a tree built from this patch only if it is exactly that copy.
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
	if diff -r "$work/lattigo" "$dest" > "$work/diff"; then
		exit 0
	fi
	echo "patch-lattigo: $dest is not Lattigo $version plus $(basename "$patchfile"):" >&2
	head -40 "$work/diff" >&2
	echo "remove it (rm -rf $dest) to rebuild it" >&2
	exit 1
fi
mkdir -p "$(dirname "$dest")"
rm -rf "$dest.new"
mv "$work/lattigo" "$dest.new"
rm -rf "$dest"
mv "$dest.new" "$dest"
echo "patch-lattigo: built $dest (Lattigo $version + $(basename "$patchfile"))"
