"""A stream cut by the server's shutdown: bitdecode serve --drain 200ms on
127.0.0.1:8309 (its pid in PIDFILE) gets SIGTERM after the stream's fifth
chunk; the official client must raise APIError with the error event's code."""
import os, signal, sys
import openai
from openai import OpenAI

pid = int(open(os.environ["PIDFILE"]).read())
c = OpenAI(base_url="http://127.0.0.1:8309/v1", api_key="x", max_retries=0)
s = c.chat.completions.create(model=os.environ.get("MODEL", "gocoder-23m"), messages=[{"role": "user", "content": "hi"}],
                              max_tokens=3000, stream=True, extra_body={"ignore_eos": True})
n = 0
try:
    for _ in s:
        n += 1
        if n == 5:
            os.kill(pid, signal.SIGTERM)
    print(f"FAIL: the stream ended without an error after {n} chunks")
    sys.exit(1)
except openai.APIError as e:
    ok = type(e) is openai.APIError and e.code == "shutting_down" and e.type == "server_error"
    print(f"{'ok  ' if ok else 'FAIL'} after {n} chunks: {type(e).__name__}: {e} (code {e.code}, type {e.type}, "
          f"request_id {getattr(e, 'request_id', None)})")
    sys.exit(0 if ok else 1)
