"""Hostile and malformed requests against a running bitdecode serve (or any
OpenAI-compatible server). Flags ("!!") any answer that is not a 2xx or a 4xx
in OpenAI's error shape ({"error": {"message", "type", "param", "code"}}), or
that takes over 5 s; then drops 64 streams mid-way and checks that the
server's KV blocks are all free again and that it still answers.

    python3 probe.py PORT MODEL      # e.g. 8080 gotiny

The batch of 256 echoed 1,000-token prompts is real work (256K prompt
tokens scored): it is flagged for its time, not for its answer."""
import json, http.client, sys, time, socket, threading, random
H="127.0.0.1"; P=int(sys.argv[1]) if len(sys.argv)>1 else 8080
MODEL=sys.argv[2] if len(sys.argv)>2 else "gotiny"
def req(method, path, body=None, ctype="application/json", raw=False, timeout=30, headers=None):
    c=http.client.HTTPConnection(H,P,timeout=timeout)
    h={"Content-Type":ctype} if ctype else {}
    if headers: h.update(headers)
    if body is not None and not raw and not isinstance(body,(bytes,str)): body=json.dumps(body)
    if isinstance(body,str): body=body.encode('utf-8','surrogatepass')
    t=time.time()
    try:
        c.request(method,path,body=body,headers=h)
        r=c.getresponse(); b=r.read()
        return r.status, b, time.time()-t
    except Exception as e:
        return -1, repr(e).encode(), time.time()-t
M='"model":"'+MODEL+'"'
U='"messages":[{"role":"user","content":"hi"}]'
cases=[]
def add(name, path, body, **kw): cases.append((name,path,body,kw))
chat="/v1/chat/completions"; comp="/v1/completions"
add("deep nest", chat, '{'+M+','+U+',"metadata":'+'['*100000+']'*100000+'}')
add("deep nest obj", chat, '{'+M+','+U+',"user":'+'{"a":'*50000+'1'+'}'*50000+'}')
add("deep nest tools", chat, '{'+M+','+U+',"tools":[{"type":"function","function":{"name":"f","parameters":'+'{"type":"object","properties":{"a":'*3000+'{"type":"string"}'+'}}'*3000+'}}]}')
add("invalid utf8 content", chat, b'{"model":MODEL,"messages":[{"role":"user","content":"\xff\xfe hi"}],"max_tokens":3}')
add("NUL in content", chat, '{'+M+',"messages":[{"role":"user","content":"a\\u0000b"}],"max_tokens":3}')
add("lone surrogate", chat, '{'+M+',"messages":[{"role":"user","content":"a\\ud800b"}],"max_tokens":3}')
add("NUL in model", chat, '{"model":"'+MODEL+'\\u0000",'+U+'}')
add("NUL in stop", chat, '{'+M+','+U+',"stop":["\\u0000"],"max_tokens":3}')
add("invalid utf8 prompt", comp, b'{"model":MODEL,"prompt":"\xc3\x28","max_tokens":3}')
for f,v in [("model",1),("messages","x"),("messages",[1]),("messages",[{"role":1,"content":"x"}]),("max_tokens","5"),("max_tokens",1.5),("max_tokens",True),
            ("temperature","x"),("top_p",[]),("n","2"),("stream","yes"),("stream_options",1),("stream_options",{"include_usage":"yes"}),("stop",1),("stop",[1]),("stop",{}),
            ("seed","1"),("seed",1.5),("seed",2**63),("seed",-2**63-1),("seed",1e30),("logit_bias",[]),("logit_bias",{"1":"x"}),("logit_bias",{"1":None}),("logprobs","true"),("logprobs",1),
            ("top_logprobs","1"),("tools",{}),("tools","x"),("tools",[1]),("tool_choice",1),("tool_choice","bogus"),("response_format","json"),("response_format",{"type":1}),
            ("max_completion_tokens","x"),("presence_penalty","x"),("user",1),("metadata",1),("parallel_tool_calls","x"),("kv_tiers",1),("ignore_eos","x"),("json_schema",1),
            ("modalities","text"),("audio",1),("functions",1),("store","x"),("top_k","x"),("min_p","x")]:
    body={"model":MODEL,"messages":[{"role":"user","content":"hi"}],"max_tokens":2}
    body[f]=v
    add("chat type %s=%r"%(f,v), chat, body)
for f,v in [("prompt",1),("prompt",[1.5]),("prompt",[[1],"a"]),("prompt",[None]),("echo","x"),("suffix",1),("logprobs",True),("logprobs","1"),("best_of","1"),("prompt",[-1]),("prompt",[2**40]),("prompt",[[2**63]]),("prompt",[1e3])]:
    body={"model":MODEL,"prompt":"hi","max_tokens":2}
    body[f]=v
    add("comp type %s=%r"%(f,v), comp, body)
for mt in [-1,0,1,2**31,2**63-1,-2**63]:
    add("chat max_tokens %d"%mt, chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"max_tokens":mt})
    add("chat mct %d"%mt, chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"max_completion_tokens":mt})
    add("comp max_tokens %d"%mt, comp, {"model":MODEL,"prompt":"hi","max_tokens":mt})
add("max_tokens 2^64", chat, '{'+M+','+U+',"max_tokens":18446744073709551616}')
add("max_tokens 1e400", chat, '{'+M+','+U+',"max_tokens":1e400}')
add("temperature 1e400", chat, '{'+M+','+U+',"temperature":1e400,"max_tokens":2}')
add("n 1e9", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"n":10**9})
add("n -1", comp, {"model":MODEL,"prompt":"x","n":-1})
add("n 16 max", comp, {"model":MODEL,"prompt":"x","n":16,"max_tokens":2})
add("top_logprobs -1", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"logprobs":True,"top_logprobs":-1})
add("top_logprobs 20", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"logprobs":True,"top_logprobs":20,"max_tokens":2})
add("logprobs false top 2", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"logprobs":False,"top_logprobs":2,"max_tokens":2})
add("comp logprobs -1", comp, {"model":MODEL,"prompt":"x","logprobs":-1})
add("stop 4 empty", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"stop":["","","",""],"max_tokens":3})
add("stop huge string", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"stop":"x"*100000,"max_tokens":3})
add("stop 1000", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"stop":["a"]*1000})
for k,v in [("-1",1),("1.5",1),(" 1",1),("+1",1),("0x1",1),("99999999999999999999",1),("1",1e300),("1","-inf"),("",1),("01",5)]:
    add("logit_bias %r:%r"%(k,v), chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"logit_bias":{k:v},"max_tokens":2})
add("logit_bias 301", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"logit_bias":{str(i):1 for i in range(301)},"max_tokens":2})
add("logit_bias dup keys", chat, '{'+M+','+U+',"logit_bias":{"1":1,"1":500},"max_tokens":2}')
add("temp -0.0", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"temperature":-0.0,"max_tokens":2})
add("temp 1e-300", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"temperature":1e-300,"max_tokens":2})
add("temp 2", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"temperature":2,"max_tokens":2})
add("top_p 0", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"top_p":0,"max_tokens":2})
add("top_p 1e-300", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"top_p":1e-300,"max_tokens":2})
add("top_k 1e9", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"top_k":10**9,"max_tokens":2})
add("min_p 1", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"min_p":1,"max_tokens":2})
add("rep 10", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"repetition_penalty":10,"max_tokens":2})
add("rep 1e-300", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"repetition_penalty":1e-300,"max_tokens":2})
for sd in [2**63-1,-2**63,0,-1]:
    add("seed %d"%sd, chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"seed":sd,"max_tokens":2,"n":3})
add("empty content", chat, {"model":MODEL,"messages":[{"role":"user","content":""}],"max_tokens":2})
add("empty parts", chat, {"model":MODEL,"messages":[{"role":"user","content":[]}],"max_tokens":2})
add("no role", chat, {"model":MODEL,"messages":[{"content":"x"}],"max_tokens":2})
add("null message", chat, {"model":MODEL,"messages":[None],"max_tokens":2})
add("role only assistant", chat, {"model":MODEL,"messages":[{"role":"assistant","content":"x"}],"max_tokens":2})
add("role only system", chat, {"model":MODEL,"messages":[{"role":"system","content":"x"}],"max_tokens":2})
add("role tool first", chat, {"model":MODEL,"messages":[{"role":"tool","content":"x","tool_call_id":"a"}],"max_tokens":2})
add("part no type", chat, {"model":MODEL,"messages":[{"role":"user","content":[{"text":"x"}]}],"max_tokens":2})
add("part text null", chat, {"model":MODEL,"messages":[{"role":"user","content":[{"type":"text","text":None}]}],"max_tokens":2})
add("part text num", chat, {"model":MODEL,"messages":[{"role":"user","content":[{"type":"text","text":1}]}],"max_tokens":2})
add("content obj", chat, {"model":MODEL,"messages":[{"role":"user","content":{"a":1}}],"max_tokens":2})
add("content num", chat, {"model":MODEL,"messages":[{"role":"user","content":5}],"max_tokens":2})
add("name num", chat, {"model":MODEL,"messages":[{"role":"user","content":"x","name":5}],"max_tokens":2})
add("tool_calls garbage", chat, {"model":MODEL,"messages":[{"role":"assistant","content":"x","tool_calls":"x"}],"max_tokens":2})
add("tool_calls bad args", chat, {"model":MODEL,"messages":[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":"{not json"}}]},{"role":"tool","tool_call_id":"1","content":"r"}],"max_tokens":2})
add("tool_calls args obj", chat, {"model":MODEL,"messages":[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":{"a":1}}}]},{"role":"tool","tool_call_id":"1","content":"r"}],"max_tokens":2})
add("tool_call_id num", chat, {"model":MODEL,"messages":[{"role":"tool","content":"x","tool_call_id":5}],"max_tokens":2})
add("prompt too many ids", comp, {"model":MODEL,"prompt":[1]*5000,"max_tokens":1})
add("prompt vocab edge", comp, {"model":MODEL,"prompt":[257],"max_tokens":1})
add("prompt 258", comp, {"model":MODEL,"prompt":[258],"max_tokens":1})
add("prompt empty string", comp, {"model":MODEL,"prompt":"","max_tokens":1})
add("prompt [\"\"]", comp, {"model":MODEL,"prompt":[""],"max_tokens":1})
add("prompt 256 strings", comp, {"model":MODEL,"prompt":["a"]*256,"max_tokens":1})
add("prompt 257 strings", comp, {"model":MODEL,"prompt":["a"]*257,"max_tokens":1})
add("prompt 256 x long", comp, {"model":MODEL,"prompt":["a"*1000]*256,"max_tokens":1})
add("ctx exceed chat", chat, {"model":MODEL,"messages":[{"role":"user","content":" x"*20000}]})
add("messages 10000", chat, {"model":MODEL,"messages":[{"role":"user","content":"x"}]*10000,"max_tokens":1})
add("array body", chat, '[1,2]')
add("null body", chat, 'null')
add("string body", chat, '"x"')
add("trailing garbage", chat, '{'+M+','+U+',"max_tokens":1} xyz')
add("two objects", chat, '{'+M+','+U+',"max_tokens":1}{}')
add("BOM", chat, '\ufeff{'+M+','+U+',"max_tokens":1}')
add("case field", chat, '{"Model":"'+MODEL+'",'+U+',"max_tokens":1}')
add("dup model", chat, '{"model":"x","model":MODEL,'+U+',"max_tokens":1}')
add("text/plain", chat, '{'+M+','+U+'}', ctype="text/plain")
add("no ctype", chat, '{'+M+','+U+'}', ctype=None)
add("json charset", chat, '{'+M+','+U+',"max_tokens":1}', ctype="application/json; charset=utf-8")
add("json charset latin1", chat, '{'+M+','+U+',"max_tokens":1}', ctype="application/json; charset=latin1")
add("multipart", chat, 'x', ctype="multipart/form-data; boundary=x")
add("vendor json", chat, '{'+M+','+U+',"max_tokens":1}', ctype="application/vnd.api+json")
for m in ["GET","PUT","DELETE","PATCH","OPTIONS","HEAD"]:
    add("method %s chat"%m, chat, None, method=m)
for m in ["POST","PUT","DELETE"]:
    add("method %s models"%m, "/v1/models", '{}', method=m)
add("models id slash", "/v1/models/a/b", None, method="GET")
add("models id encoded", "/v1/models/%00", None, method="GET")
add("health post", "/health", '{}', method="POST")
add("metrics post", "/metrics", '{}', method="POST")
add("root", "/", None, method="GET")
add("double slash", "//v1/chat/completions", '{'+M+','+U+',"max_tokens":1}')
add("trailing slash", "/v1/chat/completions/", '{'+M+','+U+',"max_tokens":1}')
add("query", "/v1/chat/completions?x=1", '{'+M+','+U+',"max_tokens":1}')
add("path traversal", "/v1/../v1/models", None, method="GET")
add("rf json_schema ref cycle", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"$ref":"#"}}}})
add("rf json_schema ref cycle2", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}}}})
add("rf json_schema recursive ok", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"max_tokens":20,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"$defs":{"n":{"type":"object","properties":{"c":{"type":"array","items":{"$ref":"#/$defs/n"}}}}},"$ref":"#/$defs/n"}}}})
add("rf pattern catastrophic", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"string","pattern":"^(a+)+$"}}}})
add("rf pattern huge rep", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"string","pattern":"^(a{1,1000}){1,1000}$"}}}})
add("rf enum huge", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"enum":["v%d"%i for i in range(100000)]}}}})
add("rf props huge", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"response_format":{"type":"json_schema","json_schema":{"name":"x","strict":True,"schema":{"type":"object","properties":{"p%d"%i:{"type":"string"} for i in range(20000)}}}}})
add("rf anyOf nest", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":json.loads('{"anyOf":['*200+'{"type":"string"}'+']}'*200)}}})
add("rf ref external", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"$ref":"http://example.com/x.json"}}}})
add("rf schema true", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":True}}})
add("rf schema false", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":False}}})
add("rf schema string", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":"x"}}})
add("rf minLength huge", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"string","minLength":10**12}}}})
add("rf maxLength huge", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"string","maxLength":10**12}}}})
add("rf minItems huge", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"array","minItems":10**9}}}})
add("rf maxItems huge", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"array","items":{"type":"string","maxLength":100000},"maxItems":100000}}}})
add("rf minmax neg", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"string","minLength":-5}}}})
add("rf minLength float", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"string","minLength":1.5}}}})
add("rf min>max", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"string","minLength":5,"maxLength":2}}}})
add("rf json_schema null", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"response_format":{"type":"json_schema","json_schema":None}})
add("tools huge", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"tools":[{"type":"function","function":{"name":"f%d"%i,"parameters":{"type":"object","properties":{"a":{"type":"string"}}}}} for i in range(5000)]})
add("tools huge required", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"tool_choice":"required","tools":[{"type":"function","function":{"name":"f%d"%i,"parameters":{"type":"object","properties":{"a":{"type":"string"}}}}} for i in range(2000)]})
add("tools ref cycle", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"tool_choice":"required","tools":[{"type":"function","function":{"name":"f","parameters":{"$ref":"#"}}}]})
add("tools no function", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"tools":[{"type":"function"}]})
add("tools name empty", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"tools":[{"type":"function","function":{"name":""}}]})
add("tools name long", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"tools":[{"type":"function","function":{"name":"a"*100000}}]})
add("tools params array", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"tool_choice":"required","tools":[{"type":"function","function":{"name":"f","parameters":[1]}}]})
add("tools params string type", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"tool_choice":"required","tools":[{"type":"function","function":{"name":"f","parameters":{"type":"string"}}}]})
add("tool_choice obj bad", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function"}})
add("tool_choice obj none", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{}})
add("ptc false required", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"max_tokens":30,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required","parallel_tool_calls":False})
add("kv_tiers on int4", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"kv_tiers":"h20:m80"})
add("kv_tiers huge", chat, {"model":MODEL,"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"kv_tiers":"h"*100000})
add("llama json_schema array", comp, {"model":MODEL,"prompt":"x","max_tokens":2,"json_schema":[1]})
add("echo max 0 no logprobs", comp, {"model":MODEL,"prompt":"x","max_tokens":0,"echo":True})
add("echo logprobs 5 stream", comp, {"model":MODEL,"prompt":"x","max_tokens":0,"echo":True,"logprobs":5})
add("huge prompt batch echo", comp, {"model":MODEL,"prompt":[[1]*1000]*256,"max_tokens":1,"echo":True,"logprobs":5})
import collections
bad=0
for name,path,body,kw in cases:
    method=kw.pop("method","POST")
    st,b,dt=req(method,path,body,**kw)
    ok=True
    s=b[:300].decode('utf-8','replace')
    if st>=500 or st<0 or dt>5: ok=False
    if st>=400 and method!="HEAD":
        try:
            e=json.loads(b)["error"]
            assert all(k in e for k in ("message","type","param","code"))
        except Exception: ok=False
    flag="!!" if not ok else "  "
    print("%s %-40s %4d %5.2fs %s"%(flag,name[:40],st,dt,s.replace("\n"," ")[:230]))
st,b,dt=req("GET","/health",None)
print("health",st,b)

# 64 streams dropped mid-way (some by a TCP reset), then the KV blocks.
def stream_abandon(i, after):
    s=socket.create_connection(("127.0.0.1",P))
    path = "/v1/chat/completions" if i%2 else "/v1/completions"
    body = {"model":MODEL,"max_tokens":600,"stream":True,"n":1+(i%3),"ignore_eos":True}
    if i%2: body["messages"]=[{"role":"user","content":"hello %d"%i}]
    else: body["prompt"]="func f%d() {"%i
    if i%4==0: body["logprobs"]= True if i%2 else 3
    if i%4==0 and i%2: body["top_logprobs"]=5
    b=json.dumps(body).encode()
    s.sendall(b"POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"%(path.encode(),len(b))+b)
    got=0
    while got<after:
        d=s.recv(4096)
        if not d: break
        got+=len(d)
    if i%3==0:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b'\x01\x00\x00\x00\x00\x00\x00\x00')  # RST
    s.close()
ths=[threading.Thread(target=stream_abandon,args=(i,random.choice([0,1,500,3000]))) for i in range(64)]
t=time.time()
[x.start() for x in ths]; [x.join() for x in ths]
print("sent+abandoned in %.1fs"%(time.time()-t))
for k in range(20):
    c=http.client.HTTPConnection("127.0.0.1",P); c.request("GET","/metrics"); m=c.getresponse().read().decode()
    lines=[l for l in m.splitlines() if l.startswith(("bitdecode_kv_blocks","bitdecode_requests_running","bitdecode_requests_queued","bitdecode_kv_seq","bitdecode_running","bitdecode_queue"))]
    if k%5==0 or k==19: print(k, lines)
    time.sleep(0.5)
c=http.client.HTTPConnection("127.0.0.1",P); c.request("POST","/v1/completions",body=json.dumps({"model":MODEL,"prompt":"x","max_tokens":3}),headers={"Content-Type":"application/json"}); r=c.getresponse(); print(r.status, r.read()[:200])
