// Runs the official OpenAI Node client (npm "openai") against a bitdecode
// server: completions, chat, streams, stop sequences, every sampling
// parameter, logprobs, prompt scoring (echo with logprobs), a batch of
// prompts, n > 1, errors, structured output, tool calls, 32 concurrent
// streams and aborts.
// The same cases as server/compat_test.go, through the client a user runs.
//
//   bitdecode serve --model DIR --kv int4 --addr 127.0.0.1:8080 &
//   cd tools/openai-client && npm install && BASE_URL=http://127.0.0.1:8080/v1 MODEL=NAME node check.mjs
//
// Prints one line per case and a summary; exits 1 if a case failed.
import OpenAI from "openai";
import { assert, baseURL, check, client, finish, model } from "./harness.mjs";

const prompt = "func main() {";
const user = [{ role: "user", content: "Write a Go function that reverses a slice." }];

await check("models.list", async () => {
  const list = await client.models.list();
  assert(list.data.some((m) => m.id === model), `model ${model} not in ${JSON.stringify(list.data)}`);
});

let greedyText = "";
await check("completions.create", async () => {
  const r = await client.completions.create({ model, prompt, max_tokens: 32, temperature: 0 });
  greedyText = r.choices[0].text;
  assert(r.choices[0].finish_reason === "length" && r.usage.completion_tokens === 32, JSON.stringify(r));
  return JSON.stringify(greedyText.slice(0, 40));
});

await check("completions stream equals whole", async () => {
  const s = await client.completions.create({ model, prompt, max_tokens: 32, temperature: 0, stream: true, stream_options: { include_usage: true } });
  let text = "", usage = null;
  for await (const c of s) {
    for (const ch of c.choices) text += ch.text;
    if (c.usage) usage = c.usage;
  }
  assert(text === greedyText, `streamed ${JSON.stringify(text)} vs ${JSON.stringify(greedyText)}`);
  assert(usage && usage.completion_tokens === 32, `usage ${JSON.stringify(usage)}`);
});

await check("chat.completions.create", async () => {
  const r = await client.chat.completions.create({ model, messages: [{ role: "system", content: "You write Go." }, ...user], max_tokens: 24, temperature: 0 });
  assert(r.choices[0].message.role === "assistant" && r.choices[0].message.content.length > 0, JSON.stringify(r));
});

await check("chat stream", async () => {
  const s = await client.chat.completions.create({ model, messages: user, max_tokens: 24, temperature: 0, stream: true });
  let text = "", finish = null;
  for await (const c of s) {
    text += c.choices[0]?.delta?.content ?? "";
    finish = c.choices[0]?.finish_reason ?? finish;
  }
  assert(finish === "length" && text.length > 0, `finish ${finish} text ${JSON.stringify(text)}`);
});

await check("stop sequence inside a token", async () => {
  // Cut at the first occurrence of a byte that sits inside a token of the
  // greedy text, not at its start.
  const r = await client.completions.create({ model, prompt, max_tokens: 32, temperature: 0, logprobs: 0 });
  const lp = r.choices[0].logprobs;
  let stop = null, at = -1;
  for (let i = 0; i < lp.tokens.length && stop === null; i++) {
    const tok = lp.tokens[i];
    for (let k = 1; k < tok.length; k++) {
      const c = tok[k];
      if (r.choices[0].text.indexOf(c) === lp.text_offset[i] + k) { stop = c; at = lp.text_offset[i] + k; break; }
    }
  }
  if (stop === null) return "no byte inside a token to stop at (skipped)";
  const cut = await client.completions.create({ model, prompt, max_tokens: 32, temperature: 0, stop: [stop] });
  assert(cut.choices[0].text === r.choices[0].text.slice(0, at) && cut.choices[0].finish_reason === "stop",
    `stop ${JSON.stringify(stop)}: ${JSON.stringify(cut.choices[0].text)}`);
  return `stop ${JSON.stringify(stop)} at ${at}`;
});

await check("every sampling parameter", async () => {
  const r = await client.chat.completions.create({
    model, messages: user, max_tokens: 16, temperature: 0.8, top_p: 0.9, seed: 7,
    presence_penalty: 0.5, frequency_penalty: 0.5, logit_bias: { "0": -100 },
    // vLLM's extensions, sent as extra body fields
    top_k: 20, min_p: 0.05, repetition_penalty: 1.1,
  });
  const again = await client.chat.completions.create({
    model, messages: user, max_tokens: 16, temperature: 0.8, top_p: 0.9, seed: 7,
    presence_penalty: 0.5, frequency_penalty: 0.5, logit_bias: { "0": -100 }, top_k: 20, min_p: 0.05, repetition_penalty: 1.1,
  });
  assert(r.choices[0].message.content === again.choices[0].message.content, "the same seed gave different samples");
});

await check("chat logprobs", async () => {
  const r = await client.chat.completions.create({ model, messages: user, max_tokens: 8, temperature: 0, logprobs: true, top_logprobs: 3 });
  const c = r.choices[0].logprobs.content;
  assert(c.length === 8 && c.every((t) => t.logprob <= 0 && t.top_logprobs.length === 3), JSON.stringify(c[0]));
  assert(c.every((t) => Math.abs(t.logprob - t.top_logprobs[0].logprob) < 1e-9), "greedy token is not the most likely");
});

await check("completion logprobs", async () => {
  const r = await client.completions.create({ model, prompt, max_tokens: 8, temperature: 0, logprobs: 2 });
  const lp = r.choices[0].logprobs;
  assert(lp.tokens.join("").length >= 1 && lp.token_logprobs.length === 8 && lp.top_logprobs.length === 8, JSON.stringify(lp));
});

await check("prompt scoring (echo with logprobs, max_tokens 0 and 1)", async () => {
  const scored = await client.completions.create({ model, prompt, max_tokens: 0, echo: true, logprobs: 1 });
  const lp = scored.choices[0].logprobs;
  const n = scored.usage.prompt_tokens;
  assert(scored.choices[0].text === prompt && lp.tokens.length === n && lp.token_logprobs[0] === null && lp.top_logprobs[0] === null, JSON.stringify(scored.choices[0]));
  assert(lp.token_logprobs.slice(1).every((v, i) => v <= 0 && v <= Math.max(...Object.values(lp.top_logprobs[i + 1])) + 1e-9), JSON.stringify(lp));
  const gen = await client.completions.create({ model, prompt, max_tokens: 1, temperature: 0, echo: true, logprobs: 1 });
  const g = gen.choices[0].logprobs;
  assert(g.tokens.length === n + 1 && g.token_logprobs.slice(0, n).every((v, i) => v === lp.token_logprobs[i]), JSON.stringify(g));
  return `${n} prompt tokens, sum ${lp.token_logprobs.slice(1).reduce((a, b) => a + b, 0).toFixed(3)}`;
});

await check("a batch of prompts with n = 2", async () => {
  const prompts = [prompt, "package main\n", "// Add returns"];
  const alone = [];
  for (const p of prompts) alone.push((await client.completions.create({ model, prompt: p, max_tokens: 8, temperature: 0 })).choices[0].text);
  const r = await client.completions.create({ model, prompt: prompts, max_tokens: 8, temperature: 0, n: 2 });
  assert(r.choices.length === 6 && r.choices.every((c, k) => c.index === k && c.text === alone[Math.floor(k / 2)]), JSON.stringify(r.choices));
});

await check("n = 3", async () => {
  const r = await client.completions.create({ model, prompt, max_tokens: 12, temperature: 1, seed: 3, n: 3 });
  assert(r.choices.length === 3 && r.choices.map((c) => c.index).join() === "0,1,2", JSON.stringify(r.choices.map((c) => c.index)));
  assert(r.usage.completion_tokens === 36, JSON.stringify(r.usage));
});

await check("errors", async () => {
  const cases = [
    [{ model: "no-such-model", prompt, max_tokens: 4 }, OpenAI.NotFoundError],
    [{ model, prompt, max_tokens: 4, temperature: 5 }, OpenAI.BadRequestError],
    [{ model, prompt, max_tokens: 4, guided_json: {} }, OpenAI.BadRequestError],
    [{ model, prompt, max_tokens: 10 ** 9 }, OpenAI.BadRequestError],
  ];
  for (const [body, want] of cases) {
    try {
      await client.completions.create(body);
      throw new Error(`accepted ${JSON.stringify(body)}`);
    } catch (e) {
      assert(e instanceof want, `${JSON.stringify(body)}: ${e}`);
    }
  }
});

await check("errors name their parameter", async () => {
  const cases = [
    [() => client.chat.completions.create({ model, messages: user, max_completion_tokens: 0 }), OpenAI.BadRequestError, "max_completion_tokens", "integer_below_min_value"],
    [() => client.chat.completions.create({ model, messages: user, stop: ["x".repeat(300)] }), OpenAI.BadRequestError, "stop", "string_above_max_length"],
    [() => client.chat.completions.create({ model, messages: [...user, { role: "user", content: "x", name: 5 }] }), OpenAI.BadRequestError, "messages.[1].name", "invalid_type"],
    [() => client.completions.create({ model, prompt: "x".repeat(5 << 20) }), OpenAI.APIError, null, "request_too_large"],
  ];
  for (const [call, want, param, code] of cases) {
    try {
      await call();
      throw new Error("accepted");
    } catch (e) {
      assert(e instanceof want && e.param === param && e.code === code, `${e} (param ${e.param}, code ${e.code}), want ${want.name} ${param} ${code}`);
    }
  }
});

const schema = { type: "object", properties: { name: { type: "string", maxLength: 12 }, lines: { type: "integer" } }, required: ["name", "lines"], additionalProperties: false };
await check("response_format json_schema (strict) parses", async () => {
  const r = await client.chat.completions.create({ model, messages: user, max_tokens: 80, temperature: 0,
    response_format: { type: "json_schema", json_schema: { name: "fn", strict: true, schema } } });
  const doc = JSON.parse(r.choices[0].message.content);
  assert(typeof doc.name === "string" && Number.isInteger(doc.lines) && Object.keys(doc).length === 2, JSON.stringify(doc));
  return r.choices[0].message.content;
});

const tools = [
  { type: "function", function: { name: "get_weather", description: "Weather of a city", parameters: { type: "object", properties: { city: { type: "string", maxLength: 10 } }, required: ["city"] } } },
  { type: "function", function: { name: "add", parameters: { type: "object", properties: { a: { type: "integer" }, b: { type: "integer" } }, required: ["a", "b"] } } },
];
const toolTurns = [{ role: "user", content: "Weather in Paris?" },
  { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: JSON.stringify({ city: "Paris" }) } }] },
  { role: "tool", tool_call_id: "call_1", content: "sunny, 21 C" },
  { role: "user", content: "And in Oslo?" }];
await check("tools: a named tool_choice returns its call", async () => {
  const r = await client.chat.completions.create({ model, messages: toolTurns, tools, max_tokens: 60, temperature: 0,
    tool_choice: { type: "function", function: { name: "get_weather" } } });
  const m = r.choices[0].message, call = m.tool_calls?.[0];
  assert(m.content === null && call && call.type === "function" && call.id.startsWith("call_") && call.function.name === "get_weather", JSON.stringify(r));
  const args = JSON.parse(call.function.arguments);
  assert(typeof args.city === "string", call.function.arguments);
  return `${call.function.name}(${call.function.arguments})`;
});

await check("tools: required, one call, streamed", async () => {
  const s = await client.chat.completions.create({ model, messages: toolTurns, tools, max_tokens: 80, temperature: 0,
    tool_choice: "required", parallel_tool_calls: false, stream: true });
  const calls = [];
  let finish = null;
  for await (const c of s) {
    for (const tc of c.choices[0]?.delta?.tool_calls ?? []) calls.push(tc);
    finish = c.choices[0]?.finish_reason ?? finish;
  }
  assert(calls.length === 1 && finish === "tool_calls", `${JSON.stringify(calls)} finish ${finish}`);
  JSON.parse(calls[0].function.arguments);
  return `${calls[0].function.name}(${calls[0].function.arguments})`;
});

await check("tools: required, parameters with $defs and $ref (as zod and pydantic write them)", async () => {
  const weather = { type: "function", function: { name: "get_weather", parameters: { type: "object",
    $defs: { Unit: { type: "string", enum: ["celsius", "fahrenheit"] } },
    properties: { city: { type: "string", maxLength: 10 }, unit: { $ref: "#/$defs/Unit" } }, required: ["city", "unit"], additionalProperties: false } } };
  const r = await client.chat.completions.create({ model, messages: toolTurns, tools: [weather], max_tokens: 200, temperature: 0,
    tool_choice: "required", parallel_tool_calls: false });
  const call = r.choices[0].message.tool_calls?.[0];
  assert(call && r.choices[0].finish_reason === "tool_calls", JSON.stringify(r));
  const args = JSON.parse(call.function.arguments);
  assert(typeof args.city === "string" && ["celsius", "fahrenheit"].includes(args.unit), call.function.arguments);
  return `${call.function.name}(${call.function.arguments})`;
});

await check("32 concurrent streams, every fourth aborted", async () => {
  const solo = (await client.chat.completions.create({ model, messages: user, max_tokens: 24, temperature: 0 })).choices[0].message.content;
  let aborted = 0;
  const runs = Array.from({ length: 32 }, async (_, i) => {
    const ac = new AbortController();
    const s = await client.chat.completions.create({ model, messages: user, max_tokens: 24, temperature: 0, stream: true }, { signal: ac.signal });
    let text = "";
    try {
      for await (const c of s) {
        if (i % 4 === 3) { ac.abort(); aborted++; return; }
        text += c.choices[0]?.delta?.content ?? "";
      }
    } catch (e) {
      if (i % 4 === 3) return;
      throw e;
    }
    assert(text === solo, `stream ${i}: ${JSON.stringify(text)} vs ${JSON.stringify(solo)}`);
  });
  await Promise.all(runs);
  return `${aborted} aborted, 24 equal to the solo text`;
});

finish();
