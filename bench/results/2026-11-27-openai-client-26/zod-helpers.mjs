// The official Node client's zod helpers (zodResponseFormat, zodFunction) against a server:
// they write nested and repeated objects as $ref to #/definitions/...
//   npm install openai zod@3 && BASE_URL=http://127.0.0.1:8080/v1 MODEL=NAME node zod-helpers.mjs
import OpenAI from 'openai';
import { zodResponseFormat, zodFunction } from 'openai/helpers/zod';
import { z } from 'zod';
const c = new OpenAI({ baseURL: process.env.BASE_URL ?? 'http://127.0.0.1:8182/v1', apiKey: 'x', maxRetries: 0 });
const model = process.env.MODEL ?? 'gocoder-23m';
const Unit = z.enum(['celsius', 'fahrenheit']);
const Place = z.object({ city: z.string().max(10), country: z.string().max(10).nullable() });
const Weather = z.object({ from: Place, to: Place, unit: Unit, kind: z.literal('forecast'), days: z.array(z.number().int()).max(3) });
const rf = zodResponseFormat(Weather, 'weather');
console.log(JSON.stringify(rf.json_schema.schema).slice(0, 800));
try {
  const r = await c.chat.completions.parse({ model, messages: [{ role: 'user', content: 'weather' }], response_format: rf, max_tokens: 300, temperature: 0 });
  console.log('parse', r.choices[0].finish_reason, JSON.stringify(r.choices[0].message.parsed));
} catch (e) { console.log('parse err', String(e).slice(0, 300)); }
const tool = zodFunction({ name: 'get_weather', parameters: Weather });
console.log(JSON.stringify(tool.function.parameters).slice(0, 300));
for (const tc of ['required', { type: 'function', function: { name: 'get_weather' } }]) {
  try {
    const r = await c.chat.completions.parse({ model, messages: [{ role: 'user', content: 'weather' }], tools: [tool], tool_choice: tc, parallel_tool_calls: false, max_tokens: 300, temperature: 0 });
    const call = r.choices[0].message.tool_calls?.[0];
    console.log('tool', JSON.stringify(tc), r.choices[0].finish_reason, JSON.stringify(call?.function.parsed_arguments));
  } catch (e) { console.log('tool err', JSON.stringify(tc), String(e).slice(0, 300)); }
}
