#!/usr/bin/env bash
# Builds a Python environment for check.py without PyPI: the official
# OpenAI Python client and its pure-Python dependencies from their source
# repositories, put on a PYTHONPATH under OUT (default /tmp/pyclient),
# outside this repository. Nothing is compiled or installed system-wide.
#
#   tools/openai-client/pyenv.sh SRC...
#
# Each SRC is a package's source: a bare git directory (…/owner+name/repo,
# as the fetch tool leaves them, or any clone's .git) or an unpacked source
# tree, named by its repository (openai-python, httpx, httpcore, h11,
# anyio, distro, tqdm; matched on the path). A git directory is exported at
# a release tag: openai v2.54.0 (the client's last release on httpx; 3.x
# moved to httpx2), httpx 0.28.1, httpcore 1.0.9, h11 v0.16.0, anyio
# 4.14.2, distro v1.9.0, tqdm v4.69.1; REF_openai=... (and so on) picks
# another. A source not given is looked up in MIRROR (default
# /work/.mirror) as owner+name/repo.
#
# Needs python3 (3.10+) with pydantic 2, typing_extensions, sniffio, idna
# and certifi importable. jiter (a Rust extension that openai's .stream()
# and .parse() helpers import) is replaced by jiter_shim.py, a pure-Python
# from_json with partial_mode (docs/serving.md, "Client compatibility").
# openai 3.x (REF_openai=v3.3.1) imports httpx2, pydantic's fork of httpx,
# which this script does not have: it then writes an httpx2 package that
# re-exports httpx, a stand-in that runs the client's own code (requests,
# SSE parsing, retries) over httpx's transport, not httpx2's. Prints the
# versions and commits it used, and the PYTHONPATH to run check.py with:
#
#   PYTHONPATH=$(cat /tmp/pyclient/pythonpath) BASE_URL=... MODEL=... python3 check.py
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/pyclient}
MIRROR=${MIRROR:-/work/.mirror}

declare -A mirror=([openai]=openai+openai-python [httpx]=encode+httpx [httpcore]=encode+httpcore [h11]=python-hyper+h11
	[anyio]=agronholm+anyio [distro]=python-distro+distro [tqdm]=tqdm+tqdm)
# The package directory inside each source tree.
declare -A pkgdir=([openai]=src/openai [httpx]=httpx [httpcore]=httpcore [h11]=h11 [anyio]=src/anyio [distro]=src/distro [tqdm]=tqdm)
declare -A ref=([openai]=${REF_openai:-v2.54.0} [httpx]=${REF_httpx:-0.28.1} [httpcore]=${REF_httpcore:-1.0.9}
	[h11]=${REF_h11:-v0.16.0} [anyio]=${REF_anyio:-4.14.2} [distro]=${REF_distro:-v1.9.0} [tqdm]=${REF_tqdm:-v4.69.1})
declare -A src
for s in "$@"; do
	case "$s" in
	*openai-python*) src[openai]=$s ;;
	*httpcore*) src[httpcore]=$s ;;
	*httpx*) src[httpx]=$s ;;
	*h11*) src[h11]=$s ;;
	*anyio*) src[anyio]=$s ;;
	*distro*) src[distro]=$s ;;
	*tqdm*) src[tqdm]=$s ;;
	*) echo "pyenv.sh: which package is $s?" >&2; exit 2 ;;
	esac
done
for p in "${!mirror[@]}"; do
	[[ -n "${src[$p]:-}" ]] || src[$p]=$MIRROR/${mirror[$p]}/repo
	[[ -d "${src[$p]}" ]] || { echo "pyenv.sh: no source for $p (${src[$p]})" >&2; exit 2; }
done

rm -rf "$OUT/src" "$OUT/site"
mkdir -p "$OUT/src" "$OUT/site"
: >"$OUT/versions.txt"
for p in openai httpx httpcore h11 anyio distro tqdm; do
	s=${src[$p]}
	mkdir -p "$OUT/src/$p"
	if git --git-dir="$s" rev-parse --git-dir >/dev/null 2>&1 && [[ ! -d "$s/${pkgdir[$p]}" ]]; then
		git --git-dir="$s" archive "${ref[$p]}" | tar -x -C "$OUT/src/$p"
		commit=$(git --git-dir="$s" rev-parse "${ref[$p]}^{commit}")
		desc=$(git --git-dir="$s" describe --tags "${ref[$p]}" 2>/dev/null || echo "${ref[$p]}")
	else
		cp -r "$s/." "$OUT/src/$p/"
		commit=unknown desc="tree $s"
	fi
	ln -sfn "$OUT/src/$p/${pkgdir[$p]}" "$OUT/site/$p"
	echo "$p $desc $commit" >>"$OUT/versions.txt"
done
# tqdm and anyio take their versions from installed metadata (setuptools_scm);
# from a source tree they read "UNKNOWN" or fail: neither matters to the
# client, which imports them but never checks their versions.
cp "$here/jiter_shim.py" "$OUT/site/jiter.py"
echo "jiter tools/openai-client/jiter_shim.py (pure-Python stand-in)" >>"$OUT/versions.txt"
if grep -q '^import httpx2' "$OUT/site/openai/_base_client.py"; then
	mkdir -p "$OUT/site/httpx2"
	cat >"$OUT/site/httpx2/__init__.py" <<'PY'
# NOT pydantic's httpx2: httpx re-exported under that name (pyenv.sh).
import sys as _sys
from httpx import *  # noqa: F401,F403
from httpx import __version__, _config  # noqa: F401
_sys.modules[__name__ + "._config"] = _config
PY
	echo "httpx2 ALIAS of httpx (a stand-in, not pydantic's httpx2)" >>"$OUT/versions.txt"
fi
echo "$OUT/site" >"$OUT/pythonpath"

cd "$OUT"
PYTHONPATH=$OUT/site python3 - <<'PY' | tee -a versions.txt
import sys, openai, httpx, httpcore, h11, anyio, distro, pydantic, sniffio, typing_extensions, jiter
print("python", sys.version.split()[0])
print("imported: openai", openai.__version__, "| httpx", httpx.__version__, "| httpcore", httpcore.__version__,
      "| h11", h11.__version__, "| distro", distro.__version__, "| pydantic", pydantic.VERSION, "| jiter", jiter.__version__)
PY
echo "PYTHONPATH=$OUT/site"
