// glesllm serve against OpenAI's official Node.js client, as a user's program
// would talk to it: chat and completions, streamed and not, 8 clients at once,
// a stream given up midway, and the errors the client raises for bad requests.
//   node tests/server/openai_client.mjs BUILD/glesllm [load SECONDS]
// It starts the server (the built-in demo model, 127.0.0.1, a free port) and
// stops it with SIGTERM at the end. "load N": besides the checks, N seconds
// of 8 streams at a time, with tokens/s and time to first token on stdout.
import { spawn } from 'node:child_process';
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const cli = process.argv[2];
const loadSeconds = process.argv[3] === 'load' ? Number(process.argv[4] || 10) : 0;
if (!cli) {
  console.error('usage: node openai_client.mjs PATH/TO/glesllm [load SECONDS]');
  process.exit(2);
}
const key = 'check-key';
const server = spawn(cli, ['serve', '--port', '0', '-np', '4', '-c', '4096', '--api-key', key],
  { stdio: ['ignore', 'ignore', 'pipe'] });
let stderr = '';
const port = await new Promise((resolve, reject) => {
  server.stderr.on('data', (d) => {
    stderr += d;
    const m = stderr.match(/http:\/\/127\.0\.0\.1:(\d+)/);
    if (m) resolve(Number(m[1]));
  });
  server.on('exit', (code) => reject(new Error(`the server exited (${code}): ${stderr}`)));
  setTimeout(() => reject(new Error('the server did not start in 120 s')), 120000);
});
const baseURL = `http://127.0.0.1:${port}/v1`;
const client = new OpenAI({ baseURL, apiKey: key, maxRetries: 0 });
const greedy = { temperature: 0, max_tokens: 24 };
let failed = 0;
async function check(name, fn) {
  try {
    await fn();
    console.error(`ok   ${name}`);
  } catch (e) {
    failed++;
    console.error(`FAIL ${name}: ${e.stack || e}`);
  }
}
async function metric(name) {
  const r = await fetch(`${baseURL.replace('/v1', '')}/metrics`,
    { headers: { Authorization: `Bearer ${key}` } });
  const m = (await r.text()).match(new RegExp(`^${name} (\\S+)$`, 'm'));
  return Number(m[1]);
}
const messages = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hello!' }];

await check('models', async () => {
  const list = await client.models.list();
  assert.equal(list.data[0].id, 'demo');
});
await check('chat, and the same streamed', async () => {
  const r = await client.chat.completions.create({ model: 'demo', messages, ...greedy });
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 24);
  const stream = await client.chat.completions.create({ model: 'demo', messages, ...greedy, stream: true });
  let text = '', first = null, last = null;
  for await (const chunk of stream) {
    first ??= chunk;
    last = chunk;
    text += chunk.choices[0]?.delta?.content ?? '';
  }
  assert.equal(first.choices[0].delta.role, 'assistant');
  assert.equal(last.choices[0].finish_reason, 'length');
  assert.equal(last.usage.completion_tokens, 24);
  assert.equal(text, r.choices[0].message.content);
});
await check('completion, and the same streamed', async () => {
  const r = await client.completions.create({ model: 'demo', prompt: 'Once upon a time', ...greedy });
  const stream = await client.completions.create({ model: 'demo', prompt: 'Once upon a time', ...greedy, stream: true });
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.text ?? '';
  assert.equal(text, r.choices[0].text);
  assert.ok(text.length > 24);
});
await check('8 clients at once', async () => {
  const rs = await Promise.all([...Array(8)].map(() =>
    client.completions.create({ prompt: 'Tell me a story', temperature: 0, max_tokens: 48 })));
  for (const r of rs) {
    assert.equal(r.choices[0].text, rs[0].choices[0].text);
    assert.equal(r.usage.completion_tokens, 48);
  }
});
await check('a stream given up midway frees its slot', async () => {
  const before = await metric('glesllm:tokens_predicted_total');
  const stream = await client.completions.create({ prompt: 'Hello', max_tokens: -1, stream: true });
  let n = 0;
  for await (const chunk of stream) if (++n === 5) break; // aborts the request
  let busy = 1;
  for (let i = 0; i < 100 && busy; i++) {
    await new Promise((r) => setTimeout(r, 50));
    busy = await metric('glesllm:requests_processing');
  }
  assert.equal(busy, 0);
  assert.equal(await metric('glesllm:kv_cache_tokens'), 0);
  assert.equal(await metric('glesllm:kv_pages_used'), 0); // its pages back in the pool
  assert.ok(await metric('glesllm:tokens_predicted_total') - before < 500);
});
await check('bad requests raise the client\'s errors', async () => {
  const expectStatus = async (status, fn) => {
    await assert.rejects(fn, (e) => { assert.equal(e.status, status, String(e)); return true; });
  };
  await expectStatus(401, () => new OpenAI({ baseURL, apiKey: 'wrong', maxRetries: 0 }).models.list());
  await expectStatus(404, () => client.completions.create({ model: 'gpt-4', prompt: 'x' }));
  await expectStatus(400, () => client.completions.create({ prompt: 'x', temperature: 'hot' }));
  await expectStatus(400, () => client.completions.create({ prompt: 'a b '.repeat(4000) }));
  await expectStatus(400, () => client.chat.completions.create({ messages: [] }));
});

if (loadSeconds > 0) {
  // a bounded load on the loopback: 8 streams at a time for loadSeconds
  const end = Date.now() + loadSeconds * 1000;
  let tokens = 0, requests = 0;
  const ttft = [];
  const t0 = Date.now();
  await Promise.all([...Array(8)].map(async () => {
    while (Date.now() < end) {
      const start = Date.now();
      let firstAt = 0;
      const stream = await client.completions.create({ prompt: 'Tell me a story', max_tokens: 128, stream: true, seed: requests });
      for await (const chunk of stream) {
        if (!firstAt && chunk.choices[0]?.text) firstAt = Date.now();
        if (chunk.usage) tokens += chunk.usage.completion_tokens;
      }
      ttft.push(firstAt - start);
      requests++;
    }
  }));
  const s = (Date.now() - t0) / 1000;
  ttft.sort((a, b) => a - b);
  console.log(`load: ${requests} requests, ${tokens} tokens in ${s.toFixed(1)} s: ` +
    `${(tokens / s).toFixed(1)} tokens/s, time to first token median ${ttft[ttft.length >> 1]} ms`);
}

server.kill('SIGTERM');
const code = await new Promise((resolve) => server.on('exit', resolve));
await check('SIGTERM: exit 0', async () => assert.equal(code, 0));
process.exit(failed ? 1 : 0);
