"""Runs the official OpenAI Python client (PyPI "openai") against a bitdecode
server: the cases of check.mjs (the Node client) and server/compat_test.go,
through the other client users run.

    bitdecode serve --model DIR --kv int4 --addr 127.0.0.1:8080 &
    pip install openai
    BASE_URL=http://127.0.0.1:8080/v1 MODEL=NAME python3 check.py

Prints one line per case and a summary ("N passed, N failed"); exits 1 if a
case failed, 2 if the openai package is not installed.
"""

import asyncio
import json
import os
import sys
import time

try:
    import openai
    from openai import AsyncOpenAI, OpenAI
except ImportError:
    print("the openai package is not installed (pip install openai)")
    sys.exit(2)

base_url = os.environ.get("BASE_URL", "http://127.0.0.1:8080/v1")
model = os.environ.get("MODEL", "gocoder-23m")
api_key = os.environ.get("API_KEY", "none")
client = OpenAI(base_url=base_url, api_key=api_key, max_retries=0)

passed = failed = 0


def check(name):
    def run(fn):
        global passed, failed
        t0 = time.perf_counter()
        try:
            note = fn()
            passed += 1
            ms = (time.perf_counter() - t0) * 1e3
            print(f"ok   {name} ({ms:.0f} ms)" + (f": {note}" if note else ""))
        except Exception as e:  # a failed case is reported, the others still run
            failed += 1
            print(f"FAIL {name}: {type(e).__name__}: {e}")
        return fn

    return run


def require(cond, msg):
    if not cond:
        raise AssertionError(msg)


prompt = "func main() {"
user = [{"role": "user", "content": "Write a Go function that reverses a slice."}]
# vLLM's sampling extensions travel as extra body fields in the Python client.
extensions = {"top_k": 20, "min_p": 0.05, "repetition_penalty": 1.1}
state = {}


@check("models.list")
def _():
    ids = [m.id for m in client.models.list().data]
    require(model in ids, f"model {model} not in {ids}")
    return f"version {openai.__version__}"


@check("completions.create")
def _():
    r = client.completions.create(model=model, prompt=prompt, max_tokens=32, temperature=0)
    state["greedy"] = r.choices[0].text
    require(r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 32, r.model_dump_json())
    return json.dumps(state["greedy"][:40])


@check("completions stream equals whole")
def _():
    s = client.completions.create(model=model, prompt=prompt, max_tokens=32, temperature=0, stream=True,
                                  stream_options={"include_usage": True})
    text, usage = "", None
    for c in s:
        text += "".join(ch.text for ch in c.choices)
        usage = c.usage or usage
    require(text == state.get("greedy"), f"streamed {text!r} vs {state.get('greedy')!r}")
    require(usage is not None and usage.completion_tokens == 32, f"usage {usage}")


@check("chat.completions.create")
def _():
    r = client.chat.completions.create(model=model, messages=[{"role": "system", "content": "You write Go."}, *user],
                                       max_tokens=24, temperature=0)
    m = r.choices[0].message
    require(m.role == "assistant" and m.content, r.model_dump_json())


@check("chat stream")
def _():
    s = client.chat.completions.create(model=model, messages=user, max_tokens=24, temperature=0, stream=True)
    text, finish = "", None
    for c in s:
        if c.choices:
            text += c.choices[0].delta.content or ""
            finish = c.choices[0].finish_reason or finish
    require(finish == "length" and text, f"finish {finish} text {text!r}")


@check("stop sequence inside a token")
def _():
    r = client.completions.create(model=model, prompt=prompt, max_tokens=32, temperature=0, logprobs=0)
    lp, text = r.choices[0].logprobs, r.choices[0].text
    stop, at = None, -1
    for i, tok in enumerate(lp.tokens):
        for k in range(1, len(tok)):
            if text.find(tok[k]) == lp.text_offset[i] + k:
                stop, at = tok[k], lp.text_offset[i] + k
                break
        if stop is not None:
            break
    if stop is None:
        return "no byte inside a token to stop at (skipped)"
    cut = client.completions.create(model=model, prompt=prompt, max_tokens=32, temperature=0, stop=[stop])
    require(cut.choices[0].text == text[:at] and cut.choices[0].finish_reason == "stop",
            f"stop {stop!r}: {cut.choices[0].text!r}")
    return f"stop {stop!r} at {at}"


@check("every sampling parameter")
def _():
    kw = dict(model=model, messages=user, max_tokens=16, temperature=0.8, top_p=0.9, seed=7, presence_penalty=0.5,
              frequency_penalty=0.5, logit_bias={"0": -100}, extra_body=extensions)
    a = client.chat.completions.create(**kw).choices[0].message.content
    b = client.chat.completions.create(**kw).choices[0].message.content
    require(a == b, "the same seed gave different samples")


@check("chat logprobs")
def _():
    r = client.chat.completions.create(model=model, messages=user, max_tokens=8, temperature=0, logprobs=True,
                                       top_logprobs=3)
    c = r.choices[0].logprobs.content
    require(len(c) == 8 and all(t.logprob <= 0 and len(t.top_logprobs) == 3 for t in c), c[0].model_dump_json())
    require(all(abs(t.logprob - t.top_logprobs[0].logprob) < 1e-9 for t in c), "greedy token is not the most likely")


@check("completion logprobs")
def _():
    r = client.completions.create(model=model, prompt=prompt, max_tokens=8, temperature=0, logprobs=2)
    lp = r.choices[0].logprobs
    require("".join(lp.tokens) and len(lp.token_logprobs) == 8 and len(lp.top_logprobs) == 8, lp.model_dump_json())


@check("prompt scoring (echo with logprobs, max_tokens 0 and 1)")
def _():
    scored = client.completions.create(model=model, prompt=prompt, max_tokens=0, echo=True, logprobs=1)
    lp, n = scored.choices[0].logprobs, scored.usage.prompt_tokens
    require(scored.choices[0].text == prompt and len(lp.tokens) == n and lp.token_logprobs[0] is None
            and lp.top_logprobs[0] is None, scored.choices[0].model_dump_json())
    require(all(v <= 0 and v <= max(lp.top_logprobs[i + 1].values()) + 1e-9 for i, v in enumerate(lp.token_logprobs[1:])),
            lp.model_dump_json())
    gen = client.completions.create(model=model, prompt=prompt, max_tokens=1, temperature=0, echo=True, logprobs=1)
    g = gen.choices[0].logprobs
    require(len(g.tokens) == n + 1 and g.token_logprobs[:n] == lp.token_logprobs, g.model_dump_json())
    return f"{n} prompt tokens, sum {sum(lp.token_logprobs[1:]):.3f}"


@check("a batch of prompts with n = 2")
def _():
    prompts = [prompt, "package main\n", "// Add returns"]
    alone = [client.completions.create(model=model, prompt=p, max_tokens=8, temperature=0).choices[0].text for p in prompts]
    r = client.completions.create(model=model, prompt=prompts, max_tokens=8, temperature=0, n=2)
    require(len(r.choices) == 6 and all(c.index == k and c.text == alone[k // 2] for k, c in enumerate(r.choices)),
            [c.model_dump() for c in r.choices])


@check("n = 3")
def _():
    r = client.completions.create(model=model, prompt=prompt, max_tokens=12, temperature=1, seed=3, n=3)
    require([c.index for c in r.choices] == [0, 1, 2], [c.index for c in r.choices])
    require(r.usage.completion_tokens == 36, r.usage)


@check("errors")
def _():
    cases = [
        (dict(model="no-such-model", prompt=prompt, max_tokens=4), openai.NotFoundError),
        (dict(model=model, prompt=prompt, max_tokens=4, temperature=5), openai.BadRequestError),
        (dict(model=model, prompt=prompt, max_tokens=4, extra_body={"guided_json": {}}), openai.BadRequestError),
        (dict(model=model, prompt=prompt, max_tokens=10**9), openai.BadRequestError),
    ]
    for body, want in cases:
        try:
            client.completions.create(**body)
        except want:
            continue
        except Exception as e:
            raise AssertionError(f"{body}: {type(e).__name__}: {e}")
        raise AssertionError(f"accepted {body}")


schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}, "lines": {"type": "integer"}},
          "required": ["name", "lines"], "additionalProperties": False}


@check("response_format json_schema (strict) parses")
def _():
    r = client.chat.completions.create(model=model, messages=user, max_tokens=80, temperature=0,
                                       response_format={"type": "json_schema",
                                                        "json_schema": {"name": "fn", "strict": True, "schema": schema}})
    doc = json.loads(r.choices[0].message.content)
    require(isinstance(doc.get("name"), str) and isinstance(doc.get("lines"), int) and len(doc) == 2, doc)
    return r.choices[0].message.content


tools = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city", "parameters": {
        "type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "add", "parameters": {
        "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}},
]
tool_turns = [
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris"})}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21 C"},
    {"role": "user", "content": "And in Oslo?"},
]


@check("tools: a named tool_choice returns its call")
def _():
    r = client.chat.completions.create(model=model, messages=tool_turns, tools=tools, max_tokens=60, temperature=0,
                                       tool_choice={"type": "function", "function": {"name": "get_weather"}})
    m = r.choices[0].message
    call = (m.tool_calls or [None])[0]
    require(m.content is None and call is not None and call.type == "function" and call.id.startswith("call_")
            and call.function.name == "get_weather", r.model_dump_json())
    args = json.loads(call.function.arguments)
    require(isinstance(args.get("city"), str), call.function.arguments)
    return f"{call.function.name}({call.function.arguments})"


@check("tools: required, one call, streamed")
def _():
    s = client.chat.completions.create(model=model, messages=tool_turns, tools=tools, max_tokens=80, temperature=0,
                                       tool_choice="required", parallel_tool_calls=False, stream=True)
    calls, finish = [], None
    for c in s:
        if c.choices:
            calls += c.choices[0].delta.tool_calls or []
            finish = c.choices[0].finish_reason or finish
    require(len(calls) == 1 and finish == "tool_calls", f"{calls} finish {finish}")
    json.loads(calls[0].function.arguments)
    return f"{calls[0].function.name}({calls[0].function.arguments})"


@check("32 concurrent streams (async client), every fourth closed early")
def _():
    solo = client.chat.completions.create(model=model, messages=user, max_tokens=24, temperature=0).choices[0].message.content

    async def main():
        aclient = AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0)

        async def one(i):
            s = await aclient.chat.completions.create(model=model, messages=user, max_tokens=24, temperature=0, stream=True)
            text = ""
            async for c in s:
                if i % 4 == 3:
                    await s.close()
                    return None
                if c.choices:
                    text += c.choices[0].delta.content or ""
            return text

        out = await asyncio.gather(*(one(i) for i in range(32)))
        await aclient.close()
        return out

    texts = asyncio.run(main())
    bad = [i for i, t in enumerate(texts) if i % 4 != 3 and t != solo]
    require(not bad, f"streams {bad} differ from the solo text {solo!r}")
    return "8 closed early, 24 equal to the solo text"


print(f"\n{passed} passed, {failed} failed ({base_url}, model {model}, openai {openai.__version__})")
sys.exit(1 if failed else 0)
