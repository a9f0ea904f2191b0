#!/bin/bash
# Session 18, lead call C: `bitdecode serve --device cuda` (embedded model, int4 KV) through the official
# OpenAI Python client (tools/openai-client/check.py; the device lacks sniffio and pydantic: oai2.tar).
set -o pipefail
cd .gpu; G=$PWD; R=$OUT/r; mkdir -p $R
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('a.tar.xz')).extractall('.')
"
chmod +x bitdecode
mkdir -p /tmp/oai && tar xf oai.tar -C /tmp/oai && tar xf oai2.tar -C /tmp/oai
export BITDECODE_CACHE_DIR=$G/cache
./bitdecode serve --device cuda --kv int4 --addr 127.0.0.1:8095 > $R/serve.log 2>&1 &
SP=$!
for i in $(seq 90); do curl -s localhost:8095/health >/dev/null && break; sleep 1; done
PP=/tmp/oai/src:/tmp/oai/stub:/tmp/oai/deps2
python3 -c "import pydantic" 2>/dev/null || PP=$PP:/tmp/oai/deps3   # Debian 12's pydantic 1.10 (pure Python), typing_extensions
python3 -c "import httpx, pydantic, anyio, distro" 2>/dev/null || PP=$PP:/tmp/oai/deps
PYTHONPATH=$PP python3 -c "import sys, httpx, pydantic, anyio; print(sys.version.split()[0], 'PYTHONPATH', '$PP', 'httpx', httpx.__version__, 'pydantic', pydantic.VERSION, 'anyio', anyio.__file__)" > $R/pyclient.log 2>&1
PYTHONPATH=$PP BASE_URL=http://127.0.0.1:8095/v1 MODEL=gotiny timeout 120 python3 check.py >> $R/pyclient.log 2>&1; echo "rc=$?" >> $R/pyclient.log
kill $SP
cat $R/pyclient.log
