// Runs the official OpenAI Node client (npm "openai") against a bitdecode
// server's Responses API (POST /v1/responses): responses.create with a
// string, a message list and instructions, each equal to the chat
// completion of the same conversation (text and usage); responses.stream
// and finalResponse(); for await over a stream: true create; the SDK's
// output_text; text.format json_schema (and responses.parse); a function
// call round trip; max_output_tokens (status incomplete); logprobs; errors
// that name their parameter; aborted streams.
//
//   bitdecode serve --model DIR --addr 127.0.0.1:8080 &
//   cd tools/openai-client && npm install && BASE_URL=http://127.0.0.1:8080/v1 MODEL=NAME node check-responses.mjs
//
// Prints one line per case and a summary; exits 1 if a case failed.
import OpenAI from "openai";
import { assert, baseURL, check, client, finish, model } from "./harness.mjs";
import { readFileSync } from "node:fs";

const clientVersion = JSON.parse(readFileSync(new URL("./node_modules/openai/package.json", import.meta.url))).version;
const show = (s) => JSON.stringify(s.length > 40 ? s.slice(0, 40) + "…" : s);

// messageText is the text of a response's message items (what output_text
// should be).
function messageText(r) {
  return r.output.filter((o) => o.type === "message").flatMap((o) => o.content).filter((c) => c.type === "output_text").map((c) => c.text).join("");
}

// checkResponse checks the fields the SDK types as required and output_text.
function checkResponse(r, status = "completed") {
  assert(r.object === "response" && r.id.startsWith("resp_") && Number.isInteger(r.created_at) && r.model === model, `envelope ${JSON.stringify(r)}`);
  assert(r.status === status, `status ${r.status}, want ${status}: ${JSON.stringify(r)}`);
  for (const k of ["error", "incomplete_details", "instructions", "metadata", "parallel_tool_calls", "temperature", "tool_choice", "tools", "top_p"]) {
    assert(k in r, `missing ${k}`);
  }
  const u = r.usage;
  assert(u && u.input_tokens > 0 && u.total_tokens === u.input_tokens + u.output_tokens &&
    u.input_tokens_details.cached_tokens >= 0 && u.output_tokens_details.reasoning_tokens === 0, `usage ${JSON.stringify(u)}`);
  assert(r.output_text === messageText(r), `output_text ${JSON.stringify(r.output_text)} vs the message items' ${JSON.stringify(messageText(r))}`);
  for (const o of r.output) {
    if (o.type === "message") {
      assert(o.id.startsWith("msg_") && o.role === "assistant" && o.content.every((c) => c.type === "output_text" && Array.isArray(c.annotations)), `message ${JSON.stringify(o)}`);
    } else {
      assert(o.type === "function_call" && o.id.startsWith("fc_") && o.call_id.startsWith("call_") && o.status === "completed", `item ${JSON.stringify(o)}`);
    }
  }
}

const instructions = "You write Go.";
const ask = "Write a Go function that reverses a slice.";

await check("responses.create, string input, equals the chat completion", async () => {
  const r = await client.responses.create({ model, input: ask, max_output_tokens: 24, temperature: 0 });
  checkResponse(r, r.status);
  const c = await client.chat.completions.create({ model, messages: [{ role: "user", content: ask }], max_completion_tokens: 24, temperature: 0 });
  assert(r.output_text === c.choices[0].message.content, `responses ${JSON.stringify(r.output_text)} vs chat ${JSON.stringify(c.choices[0].message.content)}`);
  assert(r.usage.input_tokens === c.usage.prompt_tokens && r.usage.output_tokens === c.usage.completion_tokens, `usage ${JSON.stringify(r.usage)} vs ${JSON.stringify(c.usage)}`);
  assert((r.status === "incomplete") === (c.choices[0].finish_reason === "length"), `status ${r.status}, chat finish ${c.choices[0].finish_reason}`);
  return show(r.output_text);
});

const turns = [
  { role: "user", content: "Write a loop." },
  { role: "assistant", content: [{ type: "output_text", text: "for i := 0; i < 3; i++ {}" }] },
  { role: "user", content: [{ type: "input_text", text: "Now " }, { type: "input_text", text: "a map." }] },
];
let listText = "";
await check("responses.create, instructions and a message list, equals the chat completion", async () => {
  const r = await client.responses.create({ model, instructions, input: turns, max_output_tokens: 20, temperature: 0, metadata: { run: "check" } });
  checkResponse(r, r.status);
  assert(r.instructions === instructions && r.metadata.run === "check" && r.max_output_tokens === 20 && r.temperature === 0, JSON.stringify(r));
  const c = await client.chat.completions.create({ model, max_completion_tokens: 20, temperature: 0, messages: [
    { role: "system", content: instructions }, { role: "user", content: "Write a loop." },
    { role: "assistant", content: "for i := 0; i < 3; i++ {}" }, { role: "user", content: "Now a map." }] });
  assert(r.output_text === c.choices[0].message.content, `responses ${JSON.stringify(r.output_text)} vs chat ${JSON.stringify(c.choices[0].message.content)}`);
  assert(r.usage.input_tokens === c.usage.prompt_tokens, `input tokens ${r.usage.input_tokens} vs chat ${c.usage.prompt_tokens}`);
  listText = r.output_text;
  return show(r.output_text);
});

// wantOrder checks a stream's event types: created, in_progress, the
// message's added events, deltas, its done events, then the end.
function checkEvents(events, end = "response.completed") {
  const types = events.map((e) => e.type);
  events.forEach((e, i) => assert(e.sequence_number === i, `event ${i} (${e.type}) has sequence_number ${e.sequence_number}`));
  const head = ["response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"];
  const tail = ["response.output_text.done", "response.content_part.done", "response.output_item.done", end];
  assert(head.every((t, i) => types[i] === t), `starts ${types.slice(0, 4)}`);
  assert(tail.every((t, i) => types[types.length - tail.length + i] === t), `ends ${types.slice(-4)}`);
  const middle = types.slice(head.length, types.length - tail.length);
  assert(middle.length > 0 && middle.every((t) => t === "response.output_text.delta"), `middle ${middle}`);
  for (const e of events.filter((e) => e.type.startsWith("response.output_text") || e.type.startsWith("response.content_part"))) {
    assert(e.output_index === 0 && e.content_index === 0 && e.item_id === events[2].item.id, `routing ${JSON.stringify(e)}`);
  }
  return middle.length;
}

await check("responses.stream and finalResponse() equal the whole response", async () => {
  const stream = client.responses.stream({ model, instructions, input: turns, max_output_tokens: 20, temperature: 0 });
  const events = [];
  let deltas = "";
  stream.on("event", (e) => events.push(e));
  stream.on("response.output_text.delta", (e) => { deltas += e.delta; });
  const final = await stream.finalResponse();
  const end = final.status === "incomplete" ? "response.incomplete" : "response.completed";
  const n = checkEvents(events, end);
  checkResponse(final, final.status);
  assert(final.output_text === listText && deltas === listText, `streamed ${JSON.stringify(final.output_text)} (deltas ${JSON.stringify(deltas)}) vs whole ${JSON.stringify(listText)}`);
  return `${events.length} events, ${n} deltas`;
});

await check("for await over responses.create({stream: true})", async () => {
  const s = await client.responses.create({ model, instructions, input: turns, max_output_tokens: 20, temperature: 0, stream: true });
  const events = [];
  for await (const e of s) events.push(e);
  const last = events[events.length - 1];
  checkEvents(events, last.type);
  const text = events.filter((e) => e.type === "response.output_text.delta").map((e) => e.delta).join("");
  assert(text === listText && last.response.output[0].content[0].text === listText, `streamed ${JSON.stringify(text)} vs ${JSON.stringify(listText)}`);
  assert(last.response.usage.output_tokens > 0, JSON.stringify(last.response.usage));
});

await check("max_output_tokens: status incomplete", async () => {
  const r = await client.responses.create({ model, input: ask, max_output_tokens: 3, temperature: 0 });
  checkResponse(r, "incomplete");
  assert(r.incomplete_details?.reason === "max_output_tokens" && r.usage.output_tokens === 3 && r.output[0].status === "incomplete", JSON.stringify(r));
});

const schema = { type: "object", properties: { name: { type: "string", maxLength: 12 }, lines: { type: "integer" } }, required: ["name", "lines"], additionalProperties: false };
await check("text.format json_schema parses (create and responses.parse)", async () => {
  const text = { format: { type: "json_schema", name: "fn", strict: true, schema } };
  const r = await client.responses.create({ model, input: ask, max_output_tokens: 80, temperature: 0, text });
  checkResponse(r);
  const doc = JSON.parse(r.output_text);
  assert(typeof doc.name === "string" && Number.isInteger(doc.lines) && Object.keys(doc).length === 2, JSON.stringify(doc));
  assert(r.text.format.type === "json_schema" && r.text.format.name === "fn", JSON.stringify(r.text));
  const p = await client.responses.parse({ model, input: ask, max_output_tokens: 80, temperature: 0, text });
  assert(JSON.stringify(p.output_parsed) === JSON.stringify(doc), `parsed ${JSON.stringify(p.output_parsed)}`);
  return r.output_text;
});

const tools = [
  { type: "function", name: "get_weather", description: "Weather of a city", parameters: { type: "object", properties: { city: { type: "string", maxLength: 10 } }, required: ["city"] } },
  { type: "function", name: "add", parameters: { type: "object", properties: { a: { type: "integer" }, b: { type: "integer" } }, required: ["a", "b"] } },
];
await check("function call round trip: function_call, function_call_output, final answer", async () => {
  const input = [{ role: "user", content: "Weather in Paris?" }];
  const r = await client.responses.create({ model, input, tools, max_output_tokens: 60, temperature: 0,
    tool_choice: { type: "function", name: "get_weather" } });
  checkResponse(r);
  const call = r.output.find((o) => o.type === "function_call");
  assert(call && call.name === "get_weather" && r.output_text === "", JSON.stringify(r.output));
  const args = JSON.parse(call.arguments);
  assert(typeof args.city === "string", call.arguments);
  assert(r.tools.length === 2 && r.tools[0].name === "get_weather" && r.tool_choice.name === "get_weather", `echo ${JSON.stringify([r.tools, r.tool_choice])}`);
  // The SDK's documented loop: the response's output items go back as input.
  const next = [...input, ...r.output, { type: "function_call_output", call_id: call.call_id, output: "sunny, 21 C" }];
  const f = await client.responses.create({ model, input: next, tools, tool_choice: "none", max_output_tokens: 16, temperature: 0 });
  checkResponse(f, f.status);
  assert(f.output.length === 1 && f.output[0].type === "message", JSON.stringify(f.output));
  // The same conversation as chat messages gives the same answer.
  const c = await client.chat.completions.create({ model, max_completion_tokens: 16, temperature: 0, messages: [
    { role: "user", content: "Weather in Paris?" },
    { role: "assistant", content: null, tool_calls: [{ id: call.call_id, type: "function", function: { name: call.name, arguments: call.arguments } }] },
    { role: "tool", tool_call_id: call.call_id, content: "sunny, 21 C" }] });
  assert(f.output_text === c.choices[0].message.content && f.usage.input_tokens === c.usage.prompt_tokens,
    `responses ${JSON.stringify(f.output_text)} (${f.usage.input_tokens}) vs chat ${JSON.stringify(c.choices[0].message.content)} (${c.usage.prompt_tokens})`);
  return `${call.name}(${call.arguments}) -> ${show(f.output_text)}`;
});

await check("tool_choice required, streamed: function_call events", async () => {
  // The conversation of check.mjs's "tools: required, one call, streamed", as input items.
  const input = [{ role: "user", content: "Weather in Paris?" },
    { type: "function_call", call_id: "call_1", name: "get_weather", arguments: JSON.stringify({ city: "Paris" }) },
    { type: "function_call_output", call_id: "call_1", output: "sunny, 21 C" },
    { role: "user", content: "And in Oslo?" }];
  const stream = client.responses.stream({ model, input, tools, tool_choice: "required", parallel_tool_calls: false,
    max_output_tokens: 200, temperature: 0 });
  const types = [];
  let argDeltas = "";
  stream.on("event", (e) => types.push(e.type));
  stream.on("response.function_call_arguments.delta", (e) => { argDeltas += e.delta; });
  const r = await stream.finalResponse();
  checkResponse(r);
  const calls = r.output.filter((o) => o.type === "function_call");
  assert(calls.length === 1 && r.output.length === 1 && argDeltas === calls[0].arguments, JSON.stringify(r.output));
  JSON.parse(calls[0].arguments);
  const want = ["response.created", "response.in_progress", "response.output_item.added", "response.function_call_arguments.delta",
    "response.function_call_arguments.done", "response.output_item.done", "response.completed"];
  assert(JSON.stringify(types) === JSON.stringify(want), types.join(" "));
  return `${calls[0].name}(${calls[0].arguments})`;
});

await check("logprobs (include message.output_text.logprobs, top_logprobs)", async () => {
  const r = await client.responses.create({ model, input: ask, max_output_tokens: 8, temperature: 0,
    include: ["message.output_text.logprobs"], top_logprobs: 2 });
  const part = r.output[0].content[0];
  assert(part.logprobs.length === 8 && part.logprobs.every((l) => l.logprob <= 0 && l.top_logprobs.length === 2 && l.token === l.top_logprobs[0].token), JSON.stringify(part.logprobs));
  const spelled = Buffer.from(part.logprobs.flatMap((l) => l.bytes)).toString("utf8");
  assert(spelled === part.text, `logprobs spell ${JSON.stringify(spelled)}, text ${JSON.stringify(part.text)}`);
});

await check("errors name their parameter", async () => {
  const cases = [
    [() => client.responses.create({ model, input: ask, previous_response_id: "resp_1" }), OpenAI.BadRequestError, "previous_response_id", "unsupported_parameter"],
    [() => client.responses.create({ model, input: ask, background: true }), OpenAI.BadRequestError, "background", "unsupported_parameter"],
    [() => client.responses.create({ model, input: ask, tools: [{ type: "web_search" }] }), OpenAI.BadRequestError, "tools[0].type", "unsupported_value"],
    [() => client.responses.create({ model, input: [{ role: "user", content: [{ type: "input_image", image_url: "https://x/y.png" }] }] }), OpenAI.BadRequestError, "input[0].content[0].type", "unsupported_content"],
    [() => client.responses.create({ model, input: ask, reasoning: { effort: "high" } }), OpenAI.BadRequestError, "reasoning", "unsupported_parameter"],
    [() => client.responses.create({ model, input: ask, max_output_tokens: 0 }), OpenAI.BadRequestError, "max_output_tokens", "integer_below_min_value"],
    [() => client.responses.create({ model, input: ask, max_output_tokens: 10 ** 9 }), OpenAI.BadRequestError, "input", "context_length_exceeded"],
    [() => client.responses.create({ model, input: ask, text: { format: { type: "json_schema", name: "x", schema: { type: "string", format: "email" } } } }), OpenAI.BadRequestError, "text.format.schema", "unsupported_schema_keyword"],
    [() => client.responses.create({ model, input: [{ type: "function_call_output", call_id: "call_x", output: "1" }] }), OpenAI.BadRequestError, "input[0].call_id", "invalid_value"],
    [() => client.responses.create({ model: "no-such-model", input: ask }), OpenAI.NotFoundError, "model", "model_not_found"],
    [() => client.responses.retrieve("resp_123"), OpenAI.NotFoundError, null, "response_not_found"],
    [() => client.responses.delete("resp_123"), OpenAI.NotFoundError, null, "response_not_found"],
  ];
  for (const [call, want, param, code] of cases) {
    try {
      await call();
      throw new Error("accepted");
    } catch (e) {
      assert(e instanceof want && e.param === param && e.code === code, `${e} (param ${e.param}, code ${e.code}), want ${want.name} ${param} ${code}`);
    }
  }
  return `${cases.length} refusals`;
});

await check("16 concurrent streams, every fourth aborted", async () => {
  const solo = (await client.responses.create({ model, input: ask, max_output_tokens: 24, temperature: 0 })).output_text;
  let aborted = 0;
  await Promise.all(Array.from({ length: 16 }, async (_, i) => {
    const ac = new AbortController();
    const s = await client.responses.create({ model, input: ask, max_output_tokens: 24, temperature: 0, stream: true }, { signal: ac.signal });
    let text = "";
    try {
      for await (const e of s) {
        if (i % 4 === 3 && e.type === "response.output_text.delta") { ac.abort(); aborted++; return; }
        if (e.type === "response.output_text.delta") text += e.delta;
      }
    } catch (e) {
      if (i % 4 === 3) return;
      throw e;
    }
    assert(text === solo, `stream ${i}: ${JSON.stringify(text)} vs ${JSON.stringify(solo)}`);
  }));
  const after = await client.responses.create({ model, input: ask, max_output_tokens: 24, temperature: 0 });
  assert(after.output_text === solo, "the server answers differently after the aborts");
  return `${aborted} aborted, 12 equal to the solo text`;
});

finish(`, openai ${clientVersion}`);
