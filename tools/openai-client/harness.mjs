// harness.mjs: what check.mjs and check-responses.mjs share: the client
// for BASE_URL / MODEL / API_KEY, the case runner (one line per case) and
// the summary that sets the exit status.
import OpenAI from "openai";

export const baseURL = process.env.BASE_URL ?? "http://127.0.0.1:8080/v1";
export const model = process.env.MODEL ?? "gocoder-23m";
export const client = new OpenAI({ baseURL, apiKey: process.env.API_KEY ?? "none", maxRetries: 0 });

let failed = 0, passed = 0;

// check runs one case: fn's resolved value, if any, is printed as its note;
// a throw fails the case and the others still run.
export async function check(name, fn) {
  const t0 = performance.now();
  try {
    const note = await fn();
    passed++;
    console.log(`ok   ${name} (${(performance.now() - t0).toFixed(0)} ms)${note ? ": " + note : ""}`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${e?.stack ?? e}`);
  }
}

export function assert(cond, msg) { if (!cond) throw new Error(msg); }

// finish prints the summary (with extra, e.g. the client's version) and
// exits 1 if a case failed.
export function finish(extra = "") {
  console.log(`\n${passed} passed, ${failed} failed (${baseURL}, model ${model}${extra})`);
  process.exit(failed ? 1 : 0);
}
