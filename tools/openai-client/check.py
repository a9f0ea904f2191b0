"""Runs the official OpenAI Python client (PyPI "openai") against a bitdecode
server: the cases of check.mjs (the Node client) and server/compat_test.go,
and what Python users do beyond them: the async client, the parse() and
stream() helpers with pydantic models, pydantic_function_tool, raw and
streaming responses, the client's error classes, timeouts, retries and
cancellation.

    bitdecode serve --model DIR --kv int4 --addr 127.0.0.1:8080 &
    # optional, for the auth, retry and tool_choice "auto" cases: a second
    # server with a key, a queue of one and a template that shows tools
    bitdecode serve --kv int4 --addr 127.0.0.1:8081 --api-key sk-aux --max-seqs 1 --max-queue 1 \\
        --chat-template tokenizer/testdata/chat_tools.jinja &
    pip install openai
    BASE_URL=http://127.0.0.1:8080/v1 MODEL=NAME \\
        AUX_BASE_URL=http://127.0.0.1:8081/v1 AUX_API_KEY=sk-aux AUX_MODEL=gotiny python3 check.py

Every case asserts concrete results; one that needs the second server and
has none is reported as skipped. Prints one line per case and a summary
("N passed, N failed, N skipped"); exits 1 if a case failed, 2 if the
openai package is not installed.
"""

import asyncio
import collections
import enum
import json
import os
import socket
import sys
import time
from typing import List, Literal, Optional

try:
    import httpx
    import openai
    from openai import AsyncOpenAI, OpenAI
    from pydantic import BaseModel, Field
except ImportError as e:
    print(f"the openai package is not installed (pip install openai): {e}")
    sys.exit(2)

base_url = os.environ.get("BASE_URL", "http://127.0.0.1:8080/v1")
model = os.environ.get("MODEL", "gocoder-23m")
api_key = os.environ.get("API_KEY", "none")
aux_url = os.environ.get("AUX_BASE_URL", "")
aux_key = os.environ.get("AUX_API_KEY", "sk-aux")
aux_model = os.environ.get("AUX_MODEL", "gotiny")
root = base_url.rstrip("/").removesuffix("/v1")  # /health and /metrics
client = OpenAI(base_url=base_url, api_key=api_key, max_retries=0)

passed = failed = skipped = 0


class Skip(Exception):
    pass


def check(name):
    def run(fn):
        global passed, failed, skipped
        t0 = time.perf_counter()
        try:
            note = fn()
            passed += 1
            ms = (time.perf_counter() - t0) * 1e3
            print(f"ok   {name} ({ms:.0f} ms)" + (f": {note}" if note else ""), flush=True)
        except Skip as e:
            skipped += 1
            print(f"skip {name}: {e}", flush=True)
        except Exception as e:  # a failed case is reported, the others still run
            failed += 1
            print(f"FAIL {name}: {type(e).__name__}: {e}", flush=True)
        return fn

    return run


def require(cond, msg):
    """Raises AssertionError(msg) unless cond; msg may be a function, called
    only then."""
    if not cond:
        raise AssertionError(msg() if callable(msg) else msg)


def need_aux():
    if not aux_url:
        raise Skip("AUX_BASE_URL is not set (a server with --api-key, --max-seqs 1 --max-queue 1 and a tools template)")


def metrics(url_root=root, key=None):
    """The server's /metrics as {name{labels}: value}."""
    h = {"Authorization": f"Bearer {key}"} if key else {}
    out = {}
    for line in httpx.get(url_root + "/metrics", headers=h, timeout=10).text.splitlines():
        if line and not line.startswith("#"):
            k, _, v = line.rpartition(" ")
            out[k] = float(v)
    return out


def settled(url_root=root, key=None, timeout=15.0):
    """Waits until no sequence runs or waits and returns the metrics then."""
    deadline = time.monotonic() + timeout
    while True:
        m = metrics(url_root, key)
        if m["bitdecode_running_sequences"] == 0 and m["bitdecode_queue_length"] == 0:
            return m
        if time.monotonic() > deadline:
            raise AssertionError(f"the server still runs {m['bitdecode_running_sequences']:.0f} sequences "
                                 f"and queues {m['bitdecode_queue_length']:.0f} after {timeout} s")
        time.sleep(0.05)


CANCELLED = 'bitdecode_requests_finished_total{outcome="cancelled"}'


def healthy(url_root=root):
    r = httpx.get(url_root + "/health", timeout=10)
    require(r.status_code == 200 and r.json() == {"status": "ok"}, f"/health: {r.status_code} {r.text}")


def expect_error(call, cls, status, param, code, typ="invalid_request_error"):
    """Runs call and checks the exception the client raises: its class (exactly,
    for APIStatusError), status, and the error object's param, code and type."""
    try:
        call()
    except openai.APIStatusError as e:
        exact = cls is openai.APIStatusError
        require((type(e) is cls) if exact else isinstance(e, cls), f"{type(e).__name__} ({e}), want {cls.__name__}")
        require(e.status_code == status and e.param == param and e.code == code and e.type == typ,
                f"{e} (status {e.status_code}, param {e.param}, code {e.code}, type {e.type}), "
                f"want {status} {param} {code} {typ}")
        require(isinstance(e.body, dict) and e.body.get("message"), f"no message: {e.body}")
        return e
    raise AssertionError(f"accepted; want {cls.__name__} {status} {param} {code}")


prompt = "func main() {"
user = [{"role": "user", "content": "Write a Go function that reverses a slice."}]
# vLLM's sampling extensions travel as extra body fields in the Python client.
extensions = {"top_k": 20, "min_p": 0.05, "repetition_penalty": 1.1}
state = {}


def greedy_chat():
    """The greedy chat answer to user, 24 tokens (computed once)."""
    if "chat" not in state:
        r = client.chat.completions.create(model=model, messages=user, max_tokens=24, temperature=0)
        state["chat"], state["chat_usage"] = r.choices[0].message.content, r.usage
    return state["chat"]


def long_chat():
    """A chat request that runs to the end of the context (every token
    generated, the stop tokens ignored): longer than any case waits."""
    greedy_chat()
    ctx = client.models.retrieve(model).model_extra["max_model_len"]
    return dict(model=model, messages=user, max_tokens=ctx - state["chat_usage"].prompt_tokens, temperature=0,
                extra_body={"ignore_eos": True})


def first_unique(text, start, width):
    """The first k >= start where text[k:k+width] first occurs (a stop string
    that cuts text at k), or None."""
    for k in range(start, len(text) - width + 1):
        s = text[k:k + width]
        if s.strip() and text.find(s) == k:
            return k
    return None


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
    require(text == greedy_chat(), f"streamed {text!r} vs whole {greedy_chat()!r}")


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
    require("".join(t.token for t in c) == r.choices[0].message.content, "the tokens do not spell the content")


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
    return json.dumps(doc)


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
    solo = greedy_chat()

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
    settled()
    healthy()
    return "8 closed early, 24 equal to the solo text"


# What Python users do beyond check.mjs's cases.


@check("errors carry status, type, code and param")
def _():
    chat = client.chat.completions.create
    big = client.completions.create
    cases = [
        (lambda: chat(model=model, messages=user, max_completion_tokens=0), openai.BadRequestError, 400,
         "max_completion_tokens", "integer_below_min_value"),
        (lambda: chat(model=model, messages=user, stop=["x" * 300]), openai.BadRequestError, 400, "stop",
         "string_above_max_length"),
        (lambda: chat(model=model, messages=[*user, {"role": "user", "content": "x", "name": 5}]),
         openai.BadRequestError, 400, "messages.[1].name", "invalid_type"),
        (lambda: chat(model=model, messages=user, temperature=5), openai.BadRequestError, 400, "temperature",
         "decimal_out_of_range"),
        (lambda: chat(model=model, messages=user, n=100), openai.BadRequestError, 400, "n", "integer_above_max_value"),
        (lambda: chat(model=model, messages=user, top_logprobs=2), openai.BadRequestError, 400, "top_logprobs", None),
        (lambda: chat(model=model, messages=[]), openai.BadRequestError, 400, "messages", "empty_array"),
        (lambda: chat(model=model, messages=user, extra_body={"guided_json": {}}), openai.BadRequestError, 400,
         "guided_json", "unknown_parameter"),
        (lambda: chat(model=model, messages=user, max_tokens=4, stream_options={"include_usage": True}),
         openai.BadRequestError, 400, "stream_options", None),
        (lambda: chat(model=model, messages=tool_turns, tools=tools, tool_choice={"type": "function", "function": {"name": "nope"}}),
         openai.BadRequestError, 400, "tool_choice.function.name", "invalid_value"),
        (lambda: chat(model=model, messages=user, response_format={"type": "json_schema", "json_schema": {
            "name": "x", "schema": {"type": "string", "pattern": "a+"}}}), openai.BadRequestError, 400,
         "response_format.json_schema.schema", "unsupported_schema_keyword"),
        (lambda: big(model=model, prompt=prompt, max_tokens=10**9), openai.BadRequestError, 400, "prompt",
         "context_length_exceeded"),
        (lambda: big(model=model, prompt="x" * (5 << 20)), openai.APIStatusError, 413, None, "request_too_large"),
        (lambda: chat(model="no-such-model", messages=user), openai.NotFoundError, 404, "model", "model_not_found"),
        (lambda: client.embeddings.create(model=model, input="x"), openai.NotFoundError, 404, None, "unsupported_endpoint"),
    ]
    for call, cls, status, param, code in cases:
        expect_error(call, cls, status, param, code)
    return f"{len(cases)} errors"


@check("models.retrieve, and NotFoundError for an unknown model")
def _():
    m = client.models.retrieve(model)
    require(m.id == model and m.object == "model" and m.owned_by and m.created > 0, m.model_dump_json())
    ctx = (m.model_extra or {}).get("max_model_len")
    require(isinstance(ctx, int) and ctx > 0, f"max_model_len {ctx}")
    expect_error(lambda: client.models.retrieve("no-such-model"), openai.NotFoundError, 404, "model", "model_not_found")
    return f"max_model_len {ctx}"


@check("async client: completions and chat, whole and streamed, equal to the sync client")
def _():
    want_chat = greedy_chat()

    async def main():
        async with AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0) as ac:
            r = await ac.completions.create(model=model, prompt=prompt, max_tokens=32, temperature=0)
            s = await ac.completions.create(model=model, prompt=prompt, max_tokens=32, temperature=0, stream=True)
            streamed = "".join([c.choices[0].text async for c in s if c.choices])
            chat = await ac.chat.completions.create(model=model, messages=user, max_tokens=24, temperature=0)
            cs = await ac.chat.completions.create(model=model, messages=user, max_tokens=24, temperature=0, stream=True)
            chat_streamed = "".join([c.choices[0].delta.content or "" async for c in cs if c.choices])
            models = await ac.models.list()
            # The stream() helper, ended by a stop string (get_final_completion
            # raises on "length").
            k = first_unique(want_chat, 3, 2)
            async with ac.chat.completions.stream(model=model, messages=user, max_tokens=24, temperature=0,
                                                  stop=want_chat[k:k + 2]) as s:
                deltas = "".join([e.delta async for e in s if e.type == "content.delta"])
                final = await s.get_final_completion()
            helper = (deltas, final.choices[0].message.content, want_chat[:k], final.choices[0].finish_reason)
            return r.choices[0].text, streamed, chat.choices[0].message.content, chat_streamed, [m.id async for m in models], helper

    text, streamed, chat, chat_streamed, ids, helper = asyncio.run(main())
    require(text == streamed == state.get("greedy"), f"{text!r} / {streamed!r} vs {state.get('greedy')!r}")
    require(chat == chat_streamed == want_chat, f"{chat!r} / {chat_streamed!r} vs {want_chat!r}")
    require(ids == [model], ids)
    require(helper[0] == helper[1] == helper[2] and helper[3] == "stop", f"stream() helper: {helper}")


@check("chat stream with include_usage: the usage chunk comes last, with no choices")
def _():
    want = greedy_chat()
    chunks = list(client.chat.completions.create(model=model, messages=user, max_tokens=24, temperature=0, stream=True,
                                                 stream_options={"include_usage": True}))
    last, u = chunks[-1], state["chat_usage"]
    require(last.choices == [] and last.usage is not None, last.model_dump_json())
    require((last.usage.prompt_tokens, last.usage.completion_tokens, last.usage.total_tokens)
            == (u.prompt_tokens, u.completion_tokens, u.total_tokens), f"{last.usage} vs the whole answer's {u}")
    require(all(c.usage is None for c in chunks[:-1]), "usage before the last chunk")
    require(len({c.id for c in chunks}) == 1 and chunks[0].choices[0].delta.role == "assistant", "ids or role")
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    require(text == want, f"{text!r} vs {want!r}")
    # n = 2: one usage for both choices.
    chunks = list(client.chat.completions.create(model=model, messages=user, max_tokens=5, temperature=0, n=2,
                                                 stream=True, stream_options={"include_usage": True}))
    require(chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 10
            and chunks[-1].usage.prompt_tokens == u.prompt_tokens, chunks[-1].model_dump_json())
    return f"{len(chunks)} chunks for n = 2"


def by_index(chunks):
    """The streamed choices' texts and finish reasons, by index."""
    text, finish = collections.defaultdict(str), {}
    for c in chunks:
        for ch in c.choices:
            text[ch.index] += ch.delta.content or ""
            if ch.finish_reason:
                finish[ch.index] = ch.finish_reason
    return [text[i] for i in sorted(text)], [finish.get(i) for i in sorted(text)]


@check("chat n = 2 with a seed: streamed equals whole")
def _():
    kw = dict(model=model, messages=user, max_tokens=12, temperature=0.9, seed=11, n=2)
    whole = client.chat.completions.create(**kw)
    require([c.index for c in whole.choices] == [0, 1], whole.model_dump_json())
    texts, finish = by_index(client.chat.completions.create(**kw, stream=True))
    require(texts == [c.message.content for c in whole.choices], f"{texts} vs {[c.message.content for c in whole.choices]}")
    require(finish == [c.finish_reason for c in whole.choices], finish)
    return json.dumps(texts)


@check("seed: the same seed repeats, other seeds differ")
def _():
    def sample(seed, chat=False):
        if chat:
            return client.chat.completions.create(model=model, messages=user, max_tokens=12, temperature=1,
                                                  seed=seed).choices[0].message.content
        return client.completions.create(model=model, prompt=prompt, max_tokens=12, temperature=1, seed=seed).choices[0].text

    for chat in (False, True):
        a, b = sample(42, chat), sample(42, chat)
        require(a == b, f"seed 42 gave {a!r} then {b!r}")
        others = {sample(s, chat) for s in range(1, 5)}
        require(len(others | {a}) > 1, f"five seeds gave one text {a!r}")
    return "seed 42 twice equal; seeds 1-4 and 42 not all equal"


@check("stop: a string and a list, whole and streamed")
def _():
    g = greedy_chat()
    k = first_unique(g, 3, 2)
    if k is None:
        raise AssertionError(f"no stop string to cut {g!r} at")
    stop = g[k:k + 2]
    for st in (stop, ["<never>", stop]):
        r = client.chat.completions.create(model=model, messages=user, max_tokens=24, temperature=0, stop=st)
        require(r.choices[0].message.content == g[:k] and r.choices[0].finish_reason == "stop",
                f"stop {st!r}: {r.choices[0].message.content!r} {r.choices[0].finish_reason}")
        texts, finish = by_index(client.chat.completions.create(model=model, messages=user, max_tokens=24, temperature=0,
                                                                stop=st, stream=True))
        require(texts == [g[:k]] and finish == ["stop"], f"streamed {texts} {finish}")
    return f"stop {stop!r} at {k}"


@check("max_tokens and max_completion_tokens")
def _():
    g = greedy_chat()
    out = {}
    for kw in ({"max_tokens": 5}, {"max_completion_tokens": 5}, {"max_completion_tokens": 3, "max_tokens": 7}):
        r = client.chat.completions.create(model=model, messages=user, temperature=0, **kw)
        out[json.dumps(kw)] = (r.choices[0].message.content, r.usage.completion_tokens, r.choices[0].finish_reason)
    a, b, both = out.values()
    require(a == b and a[1] == 5 and a[2] == "length" and g.startswith(a[0]), out)
    require(both[1] == 3 and both[2] == "length" and a[0].startswith(both[0]), f"both given: {both} (vLLM's precedence: max_completion_tokens)")


class Param(BaseModel):
    name: str = Field(max_length=8)
    type: Literal["int", "string", "[]int"]


class Function(BaseModel):
    name: str = Field(max_length=12)
    kind: Literal["func", "method"]
    params: List[Param] = Field(max_length=2)
    doc: Optional[str] = Field(max_length=10)


@check("chat.completions.parse(response_format=PydanticModel)")
def _():
    r = client.chat.completions.parse(model=model, messages=user, response_format=Function, max_tokens=300, temperature=0)
    m = r.choices[0].message
    require(r.choices[0].finish_reason == "stop" and m.refusal is None, lambda: f"{r.choices[0].finish_reason} {m.content!r}")
    require(isinstance(m.parsed, Function) and Function.model_validate_json(m.content) == m.parsed, m.content)
    state["parsed"] = (m.content, m.parsed)

    async def run_async():
        async with AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0) as ac:
            return await ac.chat.completions.parse(model=model, messages=user, response_format=Function, max_tokens=300,
                                                   temperature=0)

    a = asyncio.run(run_async()).choices[0].message
    require(a.content == m.content and a.parsed == m.parsed, f"async: {a.content!r}")
    return m.parsed.model_dump_json()


@check("chat.completions.stream(): events and get_final_completion equal the whole answer")
def _():
    g = greedy_chat()
    k = first_unique(g, 3, 2)
    kw = dict(model=model, messages=user, max_tokens=24, temperature=0, stop=g[k:k + 2], logprobs=True, top_logprobs=2)
    whole = client.chat.completions.create(**kw)
    events, deltas, done = collections.Counter(), "", None
    lp_done = None
    with client.chat.completions.stream(**kw) as s:
        for e in s:
            events[e.type] += 1
            if e.type == "content.delta":
                deltas += e.delta
            elif e.type == "content.done":
                done = e.content
            elif e.type == "logprobs.content.done":
                lp_done = e.content
        final = s.get_final_completion()
    fc, wc = final.choices[0], whole.choices[0]
    require(deltas == done == fc.message.content == wc.message.content == g[:k],
            f"deltas {deltas!r}, done {done!r}, final {fc.message.content!r}, whole {wc.message.content!r}")
    require(fc.finish_reason == wc.finish_reason == "stop" and final.id and events["chunk"] >= 2, f"{fc.finish_reason} {events}")
    want = [(t.token, t.logprob, [a.token for a in t.top_logprobs]) for t in wc.logprobs.content]
    got = [(t.token, t.logprob, [a.token for a in t.top_logprobs]) for t in fc.logprobs.content]
    require(got == want and lp_done is not None and len(lp_done) == len(want), f"logprobs {got} vs {want}")
    return dict(events)


@check("chat.completions.stream(response_format=PydanticModel): parsed events")
def _():
    if "parsed" not in state:
        raise AssertionError("needs the parse case's answer")
    content, parsed = state["parsed"]
    partial, done = [], None
    with client.chat.completions.stream(model=model, messages=user, response_format=Function, max_tokens=300,
                                        temperature=0) as s:
        for e in s:
            if e.type == "content.delta" and e.parsed is not None:
                partial.append(e.parsed)
            elif e.type == "content.done":
                done = e.parsed
        final = s.get_final_completion()
    require(isinstance(done, Function) and done == parsed and final.choices[0].message.parsed == parsed,
            f"done {done!r}, final {final.choices[0].message.parsed!r}, whole {parsed!r}")
    require(final.choices[0].message.content == content, f"{final.choices[0].message.content!r} vs {content!r}")
    require(partial and all(isinstance(p, dict) for p in partial) and partial[-1] == parsed.model_dump(),
            f"partial documents: {partial[-3:]}")
    return f"{len(partial)} partial documents"


class Unit(str, enum.Enum):
    celsius = "celsius"
    fahrenheit = "fahrenheit"


class GetWeather(BaseModel):  # the Enum goes to $defs, referred to by $ref (check.mjs's $defs case)
    city: str = Field(max_length=10)
    unit: Unit


weather_tool = openai.pydantic_function_tool(GetWeather, name="get_weather", description="Weather of a city")
py_turns = [{"role": "user", "content": "What is the weather in Oslo?"}]


@check("tools: pydantic_function_tool, named and required, parsed_arguments (parse and stream)")
def _():
    params = weather_tool["function"]["parameters"]
    require(weather_tool["function"]["strict"] is True and "Unit" in params["$defs"]
            and params["properties"]["unit"] == {"$ref": "#/$defs/Unit"}, weather_tool)
    named = {"type": "function", "function": {"name": "get_weather"}}
    r = client.chat.completions.parse(model=model, messages=py_turns, tools=[weather_tool], tool_choice=named,
                                      max_tokens=100, temperature=0)
    m, fr = r.choices[0].message, r.choices[0].finish_reason
    require(fr == "stop" and m.content is None and len(m.tool_calls or []) == 1, lambda: f"{fr} {m}")
    a = m.tool_calls[0].function
    require(a.name == "get_weather" and isinstance(a.parsed_arguments, GetWeather)
            and GetWeather.model_validate_json(a.arguments) == a.parsed_arguments, a)
    kw = dict(model=model, messages=py_turns, tools=[weather_tool], tool_choice="required", parallel_tool_calls=False,
              max_tokens=200, temperature=0)
    r = client.chat.completions.parse(**kw)
    m = r.choices[0].message
    require(r.choices[0].finish_reason == "tool_calls" and m.content is None and len(m.tool_calls or []) == 1,
            lambda: f"{r.choices[0].finish_reason} {m}")
    call = m.tool_calls[0]
    require(call.id.startswith("call_") and isinstance(call.function.parsed_arguments, GetWeather), call)
    events, done = collections.Counter(), None
    with client.chat.completions.stream(**kw) as s:
        for e in s:
            events[e.type] += 1
            if e.type == "tool_calls.function.arguments.done":
                done = e
        final = s.get_final_completion()
    fm = final.choices[0].message
    require(done is not None and done.name == "get_weather" and done.parsed_arguments == call.function.parsed_arguments,
            f"{events} {done}")
    require(final.choices[0].finish_reason == "tool_calls" and len(fm.tool_calls) == 1
            and fm.tool_calls[0].function.arguments == call.function.arguments
            and fm.tool_calls[0].function.parsed_arguments == call.function.parsed_arguments, lambda: f"{final.choices[0]}")
    require(fm.content == m.content, f"streamed content {fm.content!r}, whole {m.content!r} (a call alone: null)")
    return f"get_weather({call.function.arguments})"


@check("tools: auto on a template that shows no tools is a 400 (param tools)")
def _():
    # A template that does not show the model its tools cannot serve "auto"
    # (nor the default with tools): a 400 that says so.
    for kw in ({"tool_choice": "auto"}, {}):
        expect_error(lambda: client.chat.completions.create(model=model, messages=py_turns, tools=[weather_tool],
                                                            max_tokens=4, **kw),
                     openai.BadRequestError, 400, "tools", "unsupported_value")


@check("tools: auto on a template that shows tools (aux): streamed equals whole")
def _():
    need_aux()
    ac = OpenAI(base_url=aux_url, api_key=aux_key, max_retries=0)
    # Non-strict tools: the helper parses (and raises on "length") only strict ones.
    kw = dict(model=aux_model, messages=py_turns, tools=tools, tool_choice="auto", max_tokens=40, temperature=0)
    whole = ac.chat.completions.create(**kw).choices[0]
    with ac.chat.completions.stream(**kw) as s:
        for _ in s:
            pass
        final = s.current_completion_snapshot.choices[0]
    calls = [(c.function.name, c.function.arguments) for c in whole.message.tool_calls or []]
    require(all(n in ("get_weather", "add") for n, _ in calls), calls)
    require(whole.finish_reason == ("tool_calls" if calls else whole.finish_reason), whole)
    require(final.message.content == whole.message.content and final.finish_reason == whole.finish_reason
            and [(c.function.name, c.function.arguments) for c in final.message.tool_calls or []] == calls,
            f"streamed {final.message.content!r} {final.finish_reason}, whole {whole.message.content!r} {whole.finish_reason}")
    return f"{len(calls)} calls, content {json.dumps((whole.message.content or '')[:30])}"


@check("tools: the answer's message object sent back (a tool-call round trip)")
def _():
    msgs = list(py_turns)
    r = client.chat.completions.parse(model=model, messages=msgs, tools=[weather_tool], tool_choice="required",
                                      parallel_tool_calls=False, max_tokens=200, temperature=0)
    m = r.choices[0].message  # a ParsedChatCompletionMessage, sent back as it is
    msgs += [m, {"role": "tool", "tool_call_id": m.tool_calls[0].id, "content": "sunny, 21 C"}]
    a = client.chat.completions.create(model=model, messages=msgs, tools=[weather_tool], tool_choice="none",
                                       max_tokens=8, temperature=0)
    # The same turn written out by hand renders the same prompt.
    by_hand = list(py_turns) + [
        {"role": "assistant", "content": None, "tool_calls": [{"id": m.tool_calls[0].id, "type": "function", "function": {
            "name": m.tool_calls[0].function.name, "arguments": m.tool_calls[0].function.arguments}}]},
        {"role": "tool", "tool_call_id": m.tool_calls[0].id, "content": "sunny, 21 C"}]
    b = client.chat.completions.create(model=model, messages=by_hand, tools=[weather_tool], tool_choice="none",
                                       max_tokens=8, temperature=0)
    require(a.choices[0].message.content == b.choices[0].message.content and a.usage.prompt_tokens == b.usage.prompt_tokens,
            f"{a.choices[0].message.content!r} ({a.usage.prompt_tokens}) vs {b.choices[0].message.content!r} ({b.usage.prompt_tokens})")
    return f"{a.usage.prompt_tokens} prompt tokens"


@check("chat logprobs streamed equal whole")
def _():
    kw = dict(model=model, messages=user, max_tokens=8, temperature=0, logprobs=True, top_logprobs=2)
    whole = client.chat.completions.create(**kw).choices[0].logprobs.content
    streamed = []
    for c in client.chat.completions.create(**kw, stream=True):
        if c.choices and c.choices[0].logprobs:
            streamed += c.choices[0].logprobs.content or []
    key = lambda ts: [(t.token, t.logprob, t.bytes, [(a.token, a.logprob) for a in t.top_logprobs]) for t in ts]
    require(key(streamed) == key(whole), f"{key(streamed)} vs {key(whole)}")


@check("with_raw_response: status, headers, x-request-id, parse")
def _():
    raw = client.chat.completions.with_raw_response.create(model=model, messages=user, max_tokens=4, temperature=0)
    r = raw.parse()
    require(raw.http_response.status_code == 200 and raw.headers["content-type"].startswith("application/json"),
            dict(raw.headers))
    require(raw.retries_taken == 0 and r.choices[0].message.content == greedy_chat()[:len(r.choices[0].message.content)], r)
    rid = raw.request_id
    require(rid and r._request_id == rid, f"x-request-id {rid!r}, _request_id {r._request_id!r}")
    require(rid == r.id, f"x-request-id {rid!r} is not the response's id {r.id!r}")
    raw = client.chat.completions.with_raw_response.create(model=model, messages=user, max_tokens=4, temperature=0, stream=True)
    chunks = list(raw.parse())
    require(raw.request_id == chunks[0].id, f"stream: x-request-id {raw.request_id!r}, id {chunks[0].id!r}")
    try:
        client.chat.completions.create(model=model, messages=user, temperature=5)
    except openai.BadRequestError as e:
        require(e.request_id and e.request_id.startswith("chatcmpl-"), f"error's request_id {e.request_id!r}")
    return rid


@check("with_streaming_response: SSE lines of a stream, JSON of a whole answer")
def _():
    want = client.chat.completions.create(model=model, messages=user, max_tokens=8, temperature=0).choices[0].message.content
    with client.chat.completions.with_streaming_response.create(model=model, messages=user, max_tokens=8, temperature=0,
                                                                stream=True) as r:
        require(r.headers["content-type"].startswith("text/event-stream"), dict(r.headers))
        lines = [line for line in r.iter_lines() if line]
    require(lines[-1] == "data: [DONE]" and all(line.startswith("data: ") for line in lines), lines[-3:])
    text = ""
    for line in lines[:-1]:
        for ch in json.loads(line[6:])["choices"]:
            text += ch["delta"].get("content") or ""
    require(text == want, f"{text!r} vs {want!r}")
    with client.completions.with_streaming_response.create(model=model, prompt=prompt, max_tokens=32, temperature=0) as r:
        body = json.loads(r.read())
        parsed = r.parse()
    require(body["choices"][0]["text"] == parsed.choices[0].text == state.get("greedy"), body)
    return f"{len(lines)} data lines"


@check("explicit None for optional parameters")
def _():
    g = greedy_chat()
    nulls = dict(top_p=None, n=None, stop=None, max_tokens=None, seed=None, tools=None, tool_choice=None,
                 response_format=None, logprobs=None, top_logprobs=None, presence_penalty=None, frequency_penalty=None,
                 logit_bias=None, user=None, parallel_tool_calls=None, functions=None, function_call=None, metadata=None,
                 store=None, service_tier=None, modalities=None, audio=None, stream_options=None, prediction=None,
                 reasoning_effort=None, web_search_options=None, verbosity=None, prompt_cache_key=None,
                 safety_identifier=None)
    r = client.chat.completions.create(model=model, messages=user, max_completion_tokens=8, temperature=0, **nulls)
    require(g.startswith(r.choices[0].message.content) and r.usage.completion_tokens == 8, r.model_dump_json())
    s = client.chat.completions.create(model=model, messages=user, max_completion_tokens=8, temperature=0, stream=True, **nulls)
    require(by_index(s)[0] == [r.choices[0].message.content], "streamed")
    cn = dict(top_p=None, n=None, stop=None, seed=None, logprobs=None, presence_penalty=None, frequency_penalty=None,
              logit_bias=None, user=None, echo=None, suffix=None, best_of=None, stream_options=None)
    c = client.completions.create(model=model, prompt=prompt, max_tokens=8, temperature=0, **cn)
    require(state.get("greedy", "").startswith(c.choices[0].text), c.model_dump_json())
    return f"{len(nulls)} chat, {len(cn)} completion parameters null"


@check("message forms: developer role, content parts, name; response_format text")
def _():
    sys_msg = "You write Go."

    def answer(msgs, **kw):
        return client.chat.completions.create(model=model, messages=msgs, max_tokens=12, temperature=0, **kw).choices[0].message.content

    a = answer([{"role": "system", "content": sys_msg}, *user])
    b = answer([{"role": "developer", "content": sys_msg}, *user])
    require(a == b, f"developer {b!r} vs system {a!r}")
    text = user[0]["content"]
    parts = [{"type": "text", "text": text[:10]}, {"type": "text", "text": text[10:]}]
    c = answer([{"role": "user", "content": parts}])
    d = answer(user, response_format={"type": "text"})
    require(c == d == greedy_chat()[:len(c)], f"parts {c!r}, text format {d!r}, plain {greedy_chat()!r}")
    answer([{"role": "user", "content": text, "name": "gopher"}])
    expect_error(lambda: answer([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:,"}}]}]),
                 openai.BadRequestError, 400, "messages.[0].content.[0].type", "unsupported_content")


@check("extra_body: top_k 1 and min_p 1 sample the greedy text; repetition_penalty repeats with a seed")
def _():
    g = greedy_chat()

    def chat(**kw):
        return client.chat.completions.create(model=model, messages=user, max_tokens=12, **kw).choices[0].message.content

    k1 = chat(temperature=1, seed=5, extra_body={"top_k": 1})
    p1 = chat(temperature=1, seed=6, extra_body={"min_p": 1.0})
    require(g.startswith(k1) and g.startswith(p1), f"top_k 1 {k1!r}, min_p 1 {p1!r}, greedy {g!r}")
    rp = [chat(temperature=0.7, seed=9, extra_body={"repetition_penalty": 1.3, "top_k": -1}) for _ in range(2)]
    require(rp[0] == rp[1], rp)
    expect_error(lambda: chat(extra_body={"top_k": -5}), openai.BadRequestError, 400, "top_k", "integer_below_min_value")
    ig = client.completions.create(model=model, prompt=prompt, max_tokens=40, temperature=0, extra_body={"ignore_eos": True})
    require(ig.usage.completion_tokens == 40, ig.usage)


@check("a stream closed early: the server cancels it and stays healthy")
def _():
    long = long_chat()
    before = settled()
    s = client.chat.completions.create(**long, stream=True)
    n = 0
    for _ in s:
        n += 1
        if n == 3:
            break
    s.close()
    after = settled()
    require(after[CANCELLED] == before[CANCELLED] + 1, f"cancelled {before[CANCELLED]:.0f} -> {after[CANCELLED]:.0f}")
    require(after["bitdecode_generation_tokens_total"] - before["bitdecode_generation_tokens_total"] < long["max_tokens"],
            "the stream ran to its end")
    healthy()
    require(client.completions.create(model=model, prompt=prompt, max_tokens=32, temperature=0).choices[0].text
            == state.get("greedy"), "the next answer differs")
    return f"{after['bitdecode_generation_tokens_total'] - before['bitdecode_generation_tokens_total']:.0f} tokens generated"


@check("APITimeoutError with a tiny timeout; the server cancels the request")
def _():
    long = long_chat()
    before = settled()
    t0 = time.perf_counter()
    try:
        client.with_options(timeout=0.05, max_retries=0).chat.completions.create(**long)
        raise AssertionError("no timeout")
    except openai.APITimeoutError:
        pass
    took = time.perf_counter() - t0
    after = settled()
    require(after[CANCELLED] == before[CANCELLED] + 1, f"cancelled {before[CANCELLED]:.0f} -> {after[CANCELLED]:.0f}")
    healthy()
    # Retried: each attempt times out the same way.
    before = after
    try:
        client.with_options(timeout=0.05, max_retries=1).chat.completions.create(**long)
        raise AssertionError("no timeout")
    except openai.APITimeoutError:
        pass
    after = settled()
    require(after[CANCELLED] == before[CANCELLED] + 2, f"cancelled {before[CANCELLED]:.0f} -> {after[CANCELLED]:.0f}")
    return f"raised after {took * 1e3:.0f} ms"


@check("APIConnectionError on a dead port")
def _():
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        port = sk.getsockname()[1]
    dead = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0)
    try:
        dead.models.list()
        raise AssertionError("a dead port answered")
    except openai.APIConnectionError as e:
        require(not isinstance(e, openai.APITimeoutError), f"{type(e).__name__}")

    async def run_async():
        async with AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=1) as ac:
            await ac.chat.completions.create(model=model, messages=user)

    try:
        asyncio.run(run_async())
        raise AssertionError("a dead port answered")
    except openai.APIConnectionError as e:
        require(not isinstance(e, openai.APITimeoutError), f"{type(e).__name__}")
    return f"port {port}"


@check("AuthenticationError for a wrong or missing key (aux, --api-key)")
def _():
    need_aux()
    for key in ("wrong", ""):
        bad = OpenAI(base_url=aux_url, api_key=key or "x", max_retries=0,
                     default_headers={"Authorization": ""} if not key else None)
        for call in (lambda: bad.models.list(),
                     lambda: bad.chat.completions.create(model=aux_model, messages=user, max_tokens=4)):
            e = expect_error(call, openai.AuthenticationError, 401, None, "invalid_api_key")
            require(e.response.headers.get("www-authenticate", "").startswith("Bearer"), dict(e.response.headers))
    good = OpenAI(base_url=aux_url, api_key=aux_key, max_retries=0)
    require([m.id for m in good.models.list().data] == [aux_model], "the right key")


@check("retries: 429 queue_full with Retry-After, then max_retries gets through (aux, --max-queue 1)")
def _():
    need_aux()

    # 300 tokens each (ignoring the stop tokens): the first still runs when
    # the others arrive.
    burst_kw = dict(model=aux_model, prompt=prompt, max_tokens=300, temperature=0, extra_body={"ignore_eos": True})

    async def burst(retries, n=6):
        async with AsyncOpenAI(base_url=aux_url, api_key=aux_key, max_retries=retries) as ac:
            async def one(i):  # odd ones streamed: refused before the stream starts, as a status
                try:
                    raw = await ac.completions.with_raw_response.create(**burst_kw, stream=i % 2 == 1)
                    if i % 2:
                        return raw.retries_taken, "".join([c.choices[0].text async for c in raw.parse() if c.choices])
                    return raw.retries_taken, raw.parse().choices[0].text
                except openai.APIStatusError as e:
                    return e, None

            return await asyncio.gather(*(one(i) for i in range(n)))

    ac = OpenAI(base_url=aux_url, api_key=aux_key, max_retries=0)
    want = ac.completions.create(**burst_kw).choices[0].text
    out = asyncio.run(burst(0))
    errs = [e for e, _ in out if isinstance(e, Exception)]
    require(errs, "six requests at once on a queue of one: none refused")
    for e in errs:
        require(isinstance(e, openai.RateLimitError) and e.status_code == 429 and e.code == "queue_full"
                and e.type == "rate_limit_error" and e.response.headers.get("retry-after") == "1",
                f"{type(e).__name__} {e} {dict(e.response.headers)}")
    require(all(t == want for e, t in out if not isinstance(e, Exception)), "an answer differs")
    out = asyncio.run(burst(5))
    require(all(not isinstance(r, Exception) for r, _ in out), [str(r) for r, _ in out if isinstance(r, Exception)])
    require(sum(r for r, _ in out) > 0 and all(t == want for _, t in out), [r for r, _ in out])
    settled(aux_url.rstrip("/").removesuffix("/v1"), aux_key)
    return f"{len(errs)} of 6 refused without retries; with 5 retries all answered ({sum(r for r, _ in out)} retries)"


@check("asyncio tasks cancelled mid-stream among 16 concurrent streams")
def _():
    solo, long = greedy_chat(), long_chat()
    before = settled()

    async def main():
        async with AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0) as ac:
            started = [asyncio.Event() for _ in range(16)]

            async def one(i):
                kw = dict(model=model, messages=user, max_tokens=24, temperature=0) if i % 2 == 0 else long
                s = await ac.chat.completions.create(**kw, stream=True)
                text = ""
                async for c in s:
                    started[i].set()
                    if c.choices:
                        text += c.choices[0].delta.content or ""
                return text

            tasks = [asyncio.create_task(one(i)) for i in range(16)]
            # Each odd stream is cancelled once it has begun (a task cancelled
            # before its request went out never reaches the server).
            await asyncio.gather(*(started[i].wait() for i in range(1, 16, 2)))
            for i in range(1, 16, 2):
                tasks[i].cancel()
            return await asyncio.gather(*tasks, return_exceptions=True)

    out = asyncio.run(main())
    require(all(out[i] == solo for i in range(0, 16, 2)), [out[i] for i in range(0, 16, 2) if out[i] != solo])
    require(all(isinstance(out[i], asyncio.CancelledError) for i in range(1, 16, 2)), [type(o).__name__ for o in out])
    after = settled()
    cancelled = after[CANCELLED] - before[CANCELLED]
    require(cancelled == 8, f"{cancelled:.0f} of 8 cancelled streams were cancelled on the server")
    healthy()
    return "8 cancelled, 8 equal to the solo text"


print(f"\n{passed} passed, {failed} failed, {skipped} skipped ({base_url}, model {model}, openai {openai.__version__}"
      f"{', aux ' + aux_url if aux_url else ''})")
sys.exit(1 if failed else 0)
