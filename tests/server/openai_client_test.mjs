// The official openai npm client against a running dserve server (started by openai_client_test.py).
// Env: OPENAI_BASE_URL (http://host:port/v1), OPENAI_API_KEY, DSERVE_MODEL; DSERVE_EXPECT_TEXT=1 when the
// server runs the fake engine with the tiny byte tokenizer, so outputs can be predicted exactly.
import assert from "node:assert/strict";
import OpenAI from "openai";

const client = new OpenAI({ baseURL: process.env.OPENAI_BASE_URL, apiKey: process.env.OPENAI_API_KEY, maxRetries: 0 });
const model = process.env.DSERVE_MODEL;
const exact = process.env.DSERVE_EXPECT_TEXT === "1";

// The fake engine's continuation of token `last` (one ASCII byte per token, modulus 128).
function continuation(last, n) {
  let s = "";
  for (let i = 0; i < n; i++) {
    last = (last * 31 + 7) % 128;
    s += String.fromCharCode(last);
  }
  return s;
}

const tests = [];
const test = (name, fn) => tests.push([name, fn]);

test("models.list", async () => {
  const models = await client.models.list();
  const ids = [];
  for await (const m of models) ids.push(m.id);
  assert.deepEqual(ids, [model]);
  const one = await client.models.retrieve(model);
  assert.equal(one.id, model);
  assert.ok(one.max_model_len > 0);
});

test("completions.create", async () => {
  const r = await client.completions.create({ model, prompt: "Hi", max_tokens: 8, n: 2, logprobs: 1 });
  assert.equal(r.object, "text_completion");
  assert.equal(r.choices.length, 2);
  assert.equal(r.usage.completion_tokens, 16);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + 16);
  for (const c of r.choices) {
    assert.equal(c.finish_reason, "length");
    assert.equal(c.logprobs.tokens.length, 8);
    if (exact) assert.equal(c.text, continuation("i".charCodeAt(0), 8));
  }
});

test("completions.create stream", async () => {
  const s = await client.completions.create({ model, prompt: "Hi", max_tokens: 8, stream: true,
                                              stream_options: { include_usage: true } });
  let text = "";
  let finish = null;
  let usage = null;
  for await (const chunk of s) {
    for (const c of chunk.choices) {
      text += c.text;
      if (c.finish_reason) finish = c.finish_reason;
    }
    if (chunk.usage) usage = chunk.usage;
  }
  assert.equal(finish, "length");
  assert.equal(usage.completion_tokens, 8);
  if (exact) assert.equal(text, continuation("i".charCodeAt(0), 8));
});

test("chat.completions.create", async () => {
  const r = await client.chat.completions.create({
    model, messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Hello" }],
    max_completion_tokens: 10, temperature: 0, seed: 3, logprobs: true, top_logprobs: 2 });
  assert.equal(r.object, "chat.completion");
  const c = r.choices[0];
  assert.equal(c.message.role, "assistant");
  assert.equal(c.finish_reason, "length");
  assert.equal(r.usage.completion_tokens, 10);
  assert.equal(c.logprobs.content.length, 10);
  assert.equal(c.logprobs.content[0].top_logprobs.length, 2);
  if (exact) assert.equal(c.message.content, continuation(">".charCodeAt(0), 10));
});

test("chat.completions.create stream", async () => {
  const s = await client.chat.completions.create({
    model, messages: [{ role: "user", content: "Hello" }], max_tokens: 10, stream: true,
    stream_options: { include_usage: true } });
  let content = "";
  let role = null;
  let finish = null;
  let usage = null;
  for await (const chunk of s) {
    for (const c of chunk.choices) {
      if (c.delta.role) role = c.delta.role;
      if (c.delta.content) content += c.delta.content;
      if (c.finish_reason) finish = c.finish_reason;
    }
    if (chunk.usage) usage = chunk.usage;
  }
  assert.equal(role, "assistant");
  assert.equal(finish, "length");
  assert.equal(usage.completion_tokens, 10);
  if (exact) assert.equal(content, continuation(">".charCodeAt(0), 10));
});

test("responses.create, retrieve, continue, delete", async () => {
  const r = await client.responses.create({ model, input: "Hello", instructions: "Be brief.", max_output_tokens: 7 });
  assert.equal(r.object, "response");
  assert.equal(r.status, "incomplete");
  assert.equal(r.usage.output_tokens, 7);
  if (exact) assert.equal(r.output_text, continuation(">".charCodeAt(0), 7));
  const again = await client.responses.retrieve(r.id);
  assert.equal(again.id, r.id);
  assert.equal(again.output_text, r.output_text);
  const next = await client.responses.create({ model, input: "More", previous_response_id: r.id, max_output_tokens: 3 });
  assert.equal(next.previous_response_id, r.id);
  assert.ok(next.usage.input_tokens > r.usage.input_tokens);
  await client.responses.delete(r.id);
  await assert.rejects(client.responses.retrieve(r.id), (e) => e instanceof OpenAI.NotFoundError && e.status === 404);
});

test("responses.create stream and the stream helper", async () => {
  const s = await client.responses.create({ model, input: "Hello", max_output_tokens: 6, stream: true });
  let text = "";
  let completed = null;
  for await (const ev of s) {
    if (ev.type === "response.output_text.delta") text += ev.delta;
    if (ev.type === "response.completed") completed = ev.response;
  }
  assert.equal(completed.output[0].content[0].text, text);
  if (exact) assert.equal(text, continuation(">".charCodeAt(0), 6));
  const final = await client.responses.stream({ model, input: "Hello", max_output_tokens: 6 }).finalResponse();
  assert.equal(final.output_text, text);
});

test("chat stream helper (runner API)", async () => {
  const runner = client.chat.completions.stream({ model, messages: [{ role: "user", content: "Hi" }], max_tokens: 6 });
  const final = await runner.finalChatCompletion();
  assert.equal(final.choices[0].message.role, "assistant");
  assert.equal(final.choices[0].finish_reason, "length");
});

test("stop sequences", async () => {
  if (!exact) return;
  const full = continuation("i".charCodeAt(0), 40);
  const stop = full.slice(12, 15);
  const r = await client.completions.create({ model, prompt: "Hi", max_tokens: 40, stop: [stop] });
  assert.equal(r.choices[0].text, full.slice(0, full.indexOf(stop)));
  assert.equal(r.choices[0].finish_reason, "stop");
});

test("errors map to the client's error classes", async () => {
  await assert.rejects(client.chat.completions.create({ model, messages: [], max_tokens: 5 }),
                       (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && typeof e.message === "string");
  await assert.rejects(client.completions.create({ model, prompt: "x", max_tokens: 0 }),
                       (e) => e instanceof OpenAI.BadRequestError && e.status === 400);
  await assert.rejects(client.completions.create({ model, prompt: "x", temperature: -1 }),
                       (e) => e instanceof OpenAI.BadRequestError);
  await assert.rejects(client.chat.completions.create({ model: "no-such-model", messages: [{ role: "user", content: "x" }] }),
                       (e) => e instanceof OpenAI.NotFoundError && e.status === 404);
  const bad = new OpenAI({ baseURL: process.env.OPENAI_BASE_URL, apiKey: "wrong-key", maxRetries: 0 });
  await assert.rejects(bad.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
  // Still serving after the errors.
  const r = await client.completions.create({ model, prompt: "ok", max_tokens: 2 });
  assert.equal(r.choices.length, 1);
});

test("aborting a stream mid-way", async () => {
  const controller = new AbortController();
  const s = await client.chat.completions.create(
    { model, messages: [{ role: "user", content: "long" }], max_tokens: 100000, stream: true },
    { signal: controller.signal });
  let n = 0;
  try {
    for await (const chunk of s) {
      if (++n === 5) controller.abort();
    }
  } catch (e) {
    assert.ok(e instanceof OpenAI.APIUserAbortError || e.name === "AbortError", String(e));
  }
  // The stream stopped right after the abort (the driver then checks the engine released the request).
  assert.ok(n >= 5 && n < 1000, `chunks read: ${n}`);
});

test("concurrent streams", async () => {
  const jobs = [];
  for (let i = 0; i < 50; i++) {
    jobs.push((async () => {
      const s = await client.completions.create({ model, prompt: `p${i}`, max_tokens: 12, stream: true });
      let text = "";
      for await (const chunk of s) for (const c of chunk.choices) text += c.text;
      return [String(i % 10).charCodeAt(0), text];
    })());
  }
  for (const [last, text] of await Promise.all(jobs)) {
    assert.equal(text.length, 12);
    if (exact) assert.equal(text, continuation(last, 12));
  }
});

let failed = 0;
for (const [name, fn] of tests) {
  try {
    await fn();
    console.log(`ok   ${name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${e && e.stack ? e.stack : e}`);
  }
}
console.log(`${tests.length - failed}/${tests.length} passed`);
process.exit(failed ? 1 : 0);
