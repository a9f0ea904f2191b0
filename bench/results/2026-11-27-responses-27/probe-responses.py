#!/usr/bin/env python3
"""Sends malformed and extreme requests to a running bitdecode server's
/v1/responses and flags any answer that is not a 2xx, or a 4xx in OpenAI's
error shape, or that takes over 5 s; then checks the server still answers.

    python3 probe-responses.py http://127.0.0.1:8080 MODEL
"""
import http.client, json, sys, time, urllib.parse

base, model = sys.argv[1], sys.argv[2]
u = urllib.parse.urlparse(base)
M = json.dumps(model)


def send(body, method="POST", path="/v1/responses", ctype="application/json", announce=None):
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    if announce is not None:
        # Announce a body of that many bytes and send none: the server
        # refuses it from the Content-Length, before reading it.
        t0 = time.time()
        c.putrequest(method, path)
        c.putheader("Content-Type", ctype)
        c.putheader("Content-Length", str(announce))
        c.endheaders()
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, data, time.time() - t0
    if isinstance(body, str):
        body = body.encode("utf-8", "surrogatepass")
    t0 = time.time()
    c.request(method, path, body=body, headers={"Content-Type": ctype})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data, time.time() - t0


cases = []
def add(name, body, **kw):
    cases.append((name, body, kw))

base_ok = '{"model":%s,"input":"hi","max_output_tokens":2' % M
for field, vals in {
    "input": ['null', '5', 'true', '{}', '[]', '[null]', '[5]', '["x"]', '[[]]', '[{}]', '[{"role":null,"content":"x"}]',
              '[{"role":"user","content":{}}]', '[{"role":"user","content":[{}]}]', '[{"role":"user","content":[{"type":null}]}]',
              '[{"type":"function_call","call_id":"","name":"f","arguments":"{}"}]', '[{"type":"function_call_output","call_id":null,"output":"x"}]',
              '[{"type":"function_call","call_id":"c","name":"f","arguments":"not json"},{"type":"function_call_output","call_id":"c","output":"x"}]',
              '"\\u0000\\ud800\\udfff\\ud83d\\ude00"', '"\\ud800"'],
    "instructions": ['5', '[]', '{}', 'true', '"\\ud800"'],
    "max_output_tokens": ['-1', '0', '1.5', '"1"', '1e400', '9223372036854775807', '-9223372036854775808', '9223372036854775808'],
    "temperature": ['-1', '2.5', '"x"', '1e400', 'null'],
    "top_p": ['-0.1', '1.1', '[]'],
    "tools": ['5', '{}', '[5]', '[{}]', '[{"type":"function"}]', '[{"type":"function","name":"f","parameters":[]}]',
              '[{"type":"function","name":"f","parameters":{"$ref":"#/$defs/a","$defs":{"a":{"$ref":"#/$defs/a"}}}}]'],
    "tool_choice": ['5', '[]', '{}', '{"type":"function","name":5}', '"any"'],
    "text": ['5', '{"format":5}', '{"format":{"type":"json_schema","schema":5}}', '{"format":{"type":"json_schema","schema":{"type":"string","pattern":"a"}}}'],
    "include": ['5', '[5]', '["x"]'],
    "metadata": ['5', '[]', '{"k":{}}', '{"%s":"v"}' % ("k" * 65)],
    "seed": ['-9223372036854775809', '1.5', '"1"'],
    "top_k": ['-5', '1e12'],
    "parallel_tool_calls": ['5', '"x"'],
    "stream": ['5', '"true"'],
    "truncation": ['5', '"auto"', '"x"'],
    "reasoning": ['5', '{"effort":"low"}', '[]'],
    "previous_response_id": ['5', '"resp_x"'],
    "background": ['"x"', 'true'],
}.items():
    for v in vals:
        add(f"{field}={v[:40]}", base_ok + ',"%s":%s}' % (field, v))

add("invalid UTF-8 in input", b'{"model":' + M.encode() + b',"input":"\xff\xfe\x80","max_output_tokens":2}')
add("NUL in a key", base_ok + ',"\\u0000":1}')
add("JSON nested 100,000 deep in input", '{"model":%s,"input":%s%s}' % (M, "[" * 100000, "]" * 100000))
add("tools parameters nested 20,000 deep", base_ok + ',"tools":[{"type":"function","name":"f","parameters":%s{}%s}],"tool_choice":"required"}' % ('{"type":"array","items":' * 20000, "}" * 20000))
add("200,000 empty items", '{"model":%s,"input":[%s]}' % (M, ",".join(["{}"] * 200000)))
add("100,000 messages", '{"model":%s,"input":[%s],"max_output_tokens":2}' % (M, ",".join(['{"role":"user","content":"x"}'] * 100000)))
add("20,000 function calls", '{"model":%s,"input":[%s],"max_output_tokens":2}' % (M, ",".join(['{"type":"function_call","call_id":"c%d","name":"f","arguments":"{}"}' % i for i in range(20000)])))
add("3 MiB of one message", '{"model":%s,"input":"%s","max_output_tokens":2}' % (M, "x " * (3 << 19)))
add("a body over 4 MiB (its Content-Length)", "", announce=5 << 20)
add("text/plain", base_ok + "}", ctype="text/plain")
add("GET /v1/responses", "", method="GET")
add("PUT /v1/responses", base_ok + "}", method="PUT")
add("GET /v1/responses/x", "", method="GET", path="/v1/responses/x")
add("DELETE /v1/responses/x/input_items", "", method="DELETE", path="/v1/responses/x/input_items")
add("GET /v1/responses/%2e%2e/models", "", method="GET", path="/v1/responses/%2e%2e/models")

bad = 0
for name, body, kw in cases:
    try:
        status, data, dt = send(body, **kw)
    except Exception as e:  # a dropped connection is a failure
        print(f"FAIL {name}: {e}")
        bad += 1
        continue
    ok = 200 <= status < 300
    if 400 <= status < 500:
        try:
            e = json.loads(data)["error"]
            ok = isinstance(e["message"], str) and e["message"] and "type" in e and "param" in e and "code" in e
        except Exception:
            ok = False
    if not ok or dt > 5:
        bad += 1
        print(f"FAIL {name}: {status} in {dt:.2f} s: {data[:300]!r}")
    else:
        try:
            p = json.loads(data).get("error", {}).get("param")
        except Exception:
            p = None
        print(f"ok   {name}: {status} ({dt:.2f} s){' param ' + str(p) if p else ''}")
status, data, _ = send('{"model":%s,"input":"func main() {","max_output_tokens":8,"temperature":0}' % M)
healthy = status == 200 and json.loads(data)["usage"]["output_tokens"] == 8
print(f"\n{len(cases) - bad} of {len(cases)} answered as they should; server {'healthy' if healthy else 'NOT healthy'} after")
sys.exit(1 if bad or not healthy else 0)
