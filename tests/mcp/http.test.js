// `pysandbox mcp --http`: the Streamable HTTP transport, through the official TypeScript SDK's
// StreamableHTTPClientTransport, and plain fetch() for what a client must not get through: a bad
// or missing token (401), a bad Origin (403), an oversized body (413), malformed JSON (400), an
// unknown Mcp-Session-Id (404), a bad MCP-Protocol-Version (400), a malformed, oversized or
// misplaced batch (400); each leaves the good client's session as it was. A 2025-03-26
// client's batches; a client that drops its connection mid-call (its sandbox dies at once); the MCP
// Inspector's CLI.
// DELETE ends a client session and kills its sandboxes; 4 clients x 100 calls
// leave the server's descriptors and memory flat. As root and as nobody. Every server listens on
// loopback at a port the kernel picks, and dies with this process (setpriv --pdeathsig).
//
//   PYSANDBOX=$PWD/build/bin/pysandbox PYSANDBOX_AS=root node --test tests/mcp/http.test.js

import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';

import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

import { SERVER_ARGS, TIME_SLACK, openFds, poll, present, processesSeeing, rssKiB, sdk,
         serverCommand, textOf } from './support.js';

const TOKEN = 'test-token-0123456789abcdef';
// The MCP Inspector's command line (`npx @modelcontextprotocol/inspector --cli`), pinned in
// package.json: its launcher, which runs the CLI as `node`.
const INSPECTOR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'node_modules',
                            '@modelcontextprotocol', 'inspector-cli', 'build', 'cli.js');

// `pysandbox mcp ARGS --http ADDRESS`: `url` resolves once it says where it listens.
function startServer(address, { args = [], env = { PYSANDBOX_MCP_TOKEN: TOKEN } } = {}) {
  const { command, args: argv } = serverCommand([...SERVER_ARGS, ...args, '--http', address]);
  // The server ends with this process whatever happens to it: SIGTERM when its parent dies.
  const spawned = command === 'setpriv' ? ['setpriv', '--pdeathsig', 'TERM', ...argv]
                                        : ['setpriv', '--pdeathsig', 'TERM', '--', command, ...argv];
  const merged = { ...process.env, ...env };
  for (const key of Object.keys(merged)) if (merged[key] === undefined) delete merged[key];
  const child = spawn(spawned[0], spawned.slice(1), { stdio: ['ignore', 'ignore', 'pipe'],
                                                      env: merged });
  const server = {
    child,
    stderr: '',
    exit: new Promise(resolve => child.on('exit', (code, signal) => resolve({ code, signal }))),
  };
  child.stderr.setEncoding('utf8');
  server.url = new Promise((resolve, reject) => {
    child.stderr.on('data', chunk => {
      server.stderr = (server.stderr + chunk).slice(-64 * 1024);
      const found = /mcp listening on (http:\S+)/.exec(server.stderr);
      if (found) resolve(found[1]);
    });
    server.exit.then(exit => reject(new Error(`the server exited (${JSON.stringify(exit)}) ` +
                                              `before listening: ${server.stderr}`)));
  });
  server.url.catch(() => {});
  return server;
}

async function connect(url, headers = { Authorization: `Bearer ${TOKEN}` }) {
  const client = new sdk.Client({ name: 'http-test', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  await client.connect(transport, { timeout: 30_000 * TIME_SLACK });
  return { client, transport };
}

function call(client, name, args, options = {}) {
  return client.callTool({ name, arguments: args }, sdk.CallToolResultSchema,
                         { timeout: 120_000 * TIME_SLACK, ...options });
}

function rawPost(url, body, headers = {}, init = {}) {
  return fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream',
               Authorization: `Bearer ${TOKEN}`, ...headers },
    body,
    ...init,
  });
}

const rpc = (id, method, params = {}) => ({ jsonrpc: '2.0', id, method, params });
const runPython = (id, code, meta) => rpc(id, 'tools/call', {
  name: 'run_python', arguments: { code }, ...(meta ? { _meta: meta } : {}) });

// A client session of plain fetch() at `version`: its headers.
async function rawSession(url, version) {
  const init = await rawPost(url, JSON.stringify(rpc(0, 'initialize', {
    protocolVersion: version, capabilities: {}, clientInfo: { name: 'raw', version: '1' } })));
  const text = await init.text();
  assert.equal(init.status, 200, text);
  assert.equal(JSON.parse(text).result.protocolVersion, version);
  const session = { 'Mcp-Session-Id': init.headers.get('mcp-session-id') };
  const initialized = await rawPost(url, JSON.stringify({
    jsonrpc: '2.0', method: 'notifications/initialized' }), session);
  assert.equal(initialized.status, 202);
  return session;
}

async function endSession(url, session) {
  const ended = await fetch(url, { method: 'DELETE',
                                   headers: { Authorization: `Bearer ${TOKEN}`, ...session } });
  assert.equal(ended.status, 200);
}

// The messages of an SSE body, in order.
function sseMessages(text) {
  return text.split('\n').filter(line => line.startsWith('data: '))
    .map(line => JSON.parse(line.slice('data: '.length)));
}

describe('pysandbox mcp --http', { timeout: 600_000 }, () => {
  let server;
  let url;
  let good;       // the client every refused request must leave as it was
  let sessionId;  // good's MCP session; x counts the calls made in it
  let x = 0;
  before(async () => {
    server = startServer('127.0.0.1:0');
    url = await server.url;
    assert.match(url, /^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
    good = await connect(url);
    sessionId = (await call(good.client, 'start_session', {})).structuredContent.session_id;
    await call(good.client, 'run_python', { session_id: sessionId, code: 'x = 0' });
  });
  after(async () => {
    await good?.client.close();
    server?.child.kill('SIGTERM');
    const exit = await server?.exit;
    assert.deepEqual(exit, { code: 128 + 15, signal: null }, server?.stderr);
  });

  // The good client's session still has its state, and gets one call further.
  async function goodStillServed() {
    const result = await call(good.client, 'run_python', { session_id: sessionId,
                                                           code: 'x += 1\nx' });
    x += 1;
    assert.equal(result.structuredContent.value, String(x), textOf(result));
  }

  test('initialize, tools/list, run_python, and a session across calls', async () => {
    assert.match(good.transport.sessionId ?? '', /^[0-9a-f]{32}$/, 'no Mcp-Session-Id');
    const tools = await good.client.listTools();
    assert.deepEqual(tools.tools.map(t => t.name).sort(),
                     ['end_session', 'run_python', 'start_session']);
    const once = await call(good.client, 'run_python', { code: 'print(1)' });
    assert.equal(once.structuredContent.stdout, '1\n');
    await goodStillServed();
  });

  test('a body of several MiB within the 16 MiB limit is served', async () => {
    const text = 'y'.repeat(3 << 20);
    const result = await call(good.client, 'run_python', {
      files: [{ name: 'big.txt', text }], code: 'print(len(open("big.txt").read()))' });
    assert.equal(result.structuredContent.stdout, `${3 << 20}\n`, textOf(result));
  });

  test('progress comes over SSE while the code runs, then the result', async () => {
    const notes = [];
    let settled = false;
    const result = await call(good.client, 'run_python', {
      code: "import time\nprint('first', flush=True)\ntime.sleep(1)\nprint('second')",
    }, { onprogress: progress => notes.push({ settled, ...progress }) })
      .finally(() => { settled = true; });
    assert.equal(result.structuredContent.stdout, 'first\nsecond\n');
    assert.ok(notes.length >= 1, 'no progress notification came');
    assert.equal(notes[0].message, 'first\n');
    assert.equal(notes[0].settled, false, 'the first notification came after the result');
  });

  test("a client cannot see or end another client's session", async () => {
    const other = await connect(url);
    try {
      const result = await call(other.client, 'run_python', { session_id: sessionId, code: 'x' });
      assert.equal(result.isError, true, JSON.stringify(result));
      assert.match(textOf(result), /no session/);
      const ended = await call(other.client, 'end_session', { session_id: sessionId });
      assert.equal(ended.isError, true, JSON.stringify(ended));
    } finally {
      await other.transport.terminateSession();
      await other.client.close();
    }
    await goodStillServed();
  });

  test('DELETE ends the client session and kills its sandboxes', async () => {
    const other = await connect(url);
    const id = (await call(other.client, 'start_session', {})).structuredContent.session_id;
    const marker = `/tmp/work/delete-${process.pid}-${Date.now()}`;
    await call(other.client, 'run_python', { session_id: id,
                                             code: `open(${JSON.stringify(marker)}, 'w')` });
    assert.ok(processesSeeing(marker).length > 0, 'the session has no process');
    const otherSession = other.transport.sessionId;
    await other.transport.terminateSession();
    await other.client.close();
    const gone = await poll(() => processesSeeing(marker).length === 0,
                            { timeoutMs: 10_000 * TIME_SLACK });
    assert.ok(gone, "the session's sandbox outlived DELETE");
    const ping = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' });
    const reply = await rawPost(url, ping, { 'Mcp-Session-Id': otherSession });
    assert.equal(reply.status, 404, await reply.text());
    const again = await fetch(url, { method: 'DELETE', headers: {
      Authorization: `Bearer ${TOKEN}`, 'Mcp-Session-Id': otherSession } });
    assert.equal(again.status, 404);
    await goodStillServed();
  });

  test("a file too big to embed is the client's own resource, with no file:// link",
       async () => {
    const big = 64 * 1024 + 1;
    const result = await call(good.client, 'run_python', {
      code: `open("big.txt", "w").write("c" * ${big})` });
    const links = result.content.filter(block => block.type === 'resource_link');
    assert.equal(links.length, 1, JSON.stringify(result.content));
    assert.match(links[0].uri, /^pysandbox:\/\/files\/[0-9a-f]+\/big\.txt$/);
    const read = await good.client.readResource({ uri: links[0].uri });
    assert.equal(read.contents[0].text, 'c'.repeat(big));
    assert.ok((await good.client.listResources()).resources.some(r => r.uri === links[0].uri));
    const other = await connect(url);
    try {
      assert.deepEqual((await other.client.listResources()).resources, []);
      await assert.rejects(other.client.readResource({ uri: links[0].uri }),
                           error => error.code === -32002);
    } finally {
      await other.transport.terminateSession();
      await other.client.close();
    }
    await goodStillServed();
  });

  test('refused requests get their status and change nothing', async () => {
    const session = { 'Mcp-Session-Id': good.transport.sessionId };
    const ping = JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'ping' });
    const start = JSON.stringify({ jsonrpc: '2.0', id: 8, method: 'tools/call',
                                   params: { name: 'start_session', arguments: {} } });
    const initialize = JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'initialize', params: {
      protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } } });
    const cases = [
      ['a bad token', () => rawPost(url, start, { ...session, Authorization: `Bearer ${TOKEN}x` }),
       401],
      ['no token', () => rawPost(url, initialize, { Authorization: '' }), 401],
      ['a bad Origin', () => rawPost(url, start, { ...session, Origin: 'http://evil.example' }),
       403],
      ['a rebinding Origin', () => rawPost(url, initialize, {
        Origin: `http://attacker.example:${new URL(url).port}` }), 403],
      ['an oversized body', () => rawPost(url, JSON.stringify({ jsonrpc: '2.0', id: 10,
        method: 'tools/call', params: { name: 'run_python',
                                        arguments: { code: `x = 0  # ${'a'.repeat(17 << 20)}` } } }),
      session), 413],
      ['malformed JSON', () => rawPost(url, '{"jsonrpc": "2.0", "id": 11, "method"', session), 400],
      ['a batch', () => rawPost(url, `[${ping}]`, session), 400],
      ['an unknown Mcp-Session-Id', () => rawPost(url, start, { 'Mcp-Session-Id': 'f'.repeat(32) }),
       404],
      ['no Mcp-Session-Id', () => rawPost(url, start), 400],
      ['a bad MCP-Protocol-Version', () => rawPost(url, start, {
        ...session, 'MCP-Protocol-Version': '1999-01-01' }), 400],
      ['initialize with a session id', () => rawPost(url, initialize, session), 400],
      ['no text/event-stream in Accept', () => rawPost(url, ping, {
        ...session, Accept: 'application/json' }), 406],
      ['another Content-Type', () => rawPost(url, ping, { ...session,
                                                          'Content-Type': 'text/plain' }), 415],
      ['GET', () => fetch(url, { headers: { Authorization: `Bearer ${TOKEN}`, ...session,
                                            Accept: 'text/event-stream' } }), 405],
      ['another path', () => rawPost(url.replace(/\/mcp$/, '/other'), ping, session), 404],
    ];
    for (const [what, send, status] of cases) {
      const answer = await send();
      const text = await answer.text();
      assert.equal(answer.status, status, `${what}: ${text}`);
      if (what === 'malformed JSON') assert.equal(JSON.parse(text).error.code, -32700);
      if (status === 401) assert.equal(answer.headers.get('www-authenticate'), 'Bearer');
      assert.equal(answer.headers.get('mcp-session-id'), null, `${what} made a session`);
      await goodStillServed();
    }
    // None of the refused start_session calls made a session, nor a refused initialize a client.
    const listed = await call(good.client, 'start_session', {});
    await call(good.client, 'end_session', { session_id: listed.structuredContent.session_id });
    // Its own Origin is welcome.
    const own = await rawPost(url, ping, { ...session, Origin: new URL(url).origin });
    const ownText = await own.text();
    assert.equal(own.status, 200, ownText);
    assert.deepEqual(JSON.parse(ownText), { jsonrpc: '2.0', id: 7, result: {} });
  });

  test('a 2025-03-26 client POSTs a batch: one array back, 202 for notifications only',
       async () => {
    const session = await rawSession(url, '2025-03-26');
    try {
      const reply = await rawPost(url, JSON.stringify([
        rpc('p', 'ping'), runPython(1, 'print(2)'),
        { jsonrpc: '2.0', method: 'notifications/no_such_thing' }, rpc(2, 'tools/list')]), session);
      const text = await reply.text();
      assert.equal(reply.status, 200, text);
      assert.match(reply.headers.get('content-type'), /^application\/json/);
      const answers = JSON.parse(text);
      assert.ok(Array.isArray(answers), text);
      const byId = new Map(answers.map(answer => [answer.id, answer]));
      assert.deepEqual([...byId.keys()].sort(), [1, 2, 'p'].sort(), text);
      assert.deepEqual(byId.get('p').result, {});
      assert.match(byId.get(1).result.content[0].text, /^2\n/);
      assert.equal(byId.get(2).result.tools.length, 3);

      const notes = await rawPost(url, JSON.stringify([
        { jsonrpc: '2.0', method: 'notifications/no_such_thing' }]), session);
      assert.equal(notes.status, 202);
      assert.equal(await notes.text(), '');

      // A request of it asked for progress: an SSE stream, its notifications, then the array.
      const streamed = await rawPost(url, JSON.stringify([
        runPython('s', "import time\nprint('first', flush=True)\ntime.sleep(0.5)\nprint('second')",
                  { progressToken: 'tok' }),
        rpc('q', 'ping')]), session);
      assert.match(streamed.headers.get('content-type'), /^text\/event-stream/);
      const events = sseMessages(await streamed.text());
      const last = events.pop();
      assert.ok(Array.isArray(last), JSON.stringify(events));
      assert.deepEqual(last.map(answer => answer.id).sort(), ['q', 's']);
      assert.ok(events.length >= 1 && events.every(event =>
        event.method === 'notifications/progress' && event.params.progressToken === 'tok'),
                JSON.stringify(events));
      assert.equal(events[0].params.message, 'first\n');
    } finally {
      await endSession(url, session);
    }
    await goodStillServed();
  });

  test('a malformed, oversized or misplaced batch gets 400 and changes nothing', async () => {
    const session = await rawSession(url, '2025-03-26');
    try {
      const start = (id) => rpc(id, 'tools/call', { name: 'start_session', arguments: {} });
      const cases = [
        ['an empty batch', '[]', /empty batch/],
        ['a number in it', JSON.stringify([start('a'), 1]), /JSON object/],
        ['neither request, notification nor response', JSON.stringify([start('b'), { id: 3 }]),
         /no request/],
        ['a bad id', JSON.stringify([start('c'), rpc(1.5, 'ping')]), /string or an integer/],
        ['initialize in it', JSON.stringify([start('d'), rpc('i', 'initialize', {
          protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'x', version: '1' } })]),
         /initialize comes alone/],
        ['9 messages, over --http-max-client-requests',
         JSON.stringify(Array.from({ length: 9 }, (_, i) => start(`big-${i}`))), /at most 8/],
      ];
      for (const [what, body, why] of cases) {
        const reply = await rawPost(url, body, session);
        const text = await reply.text();
        assert.equal(reply.status, 400, `${what}: ${text}`);
        const error = JSON.parse(text).error;
        assert.equal(error.code, -32600, `${what}: ${text}`);
        assert.match(error.message, why, what);
      }
      // A batch's requests count against the client's requests in flight: with one call
      // running, 8 more do not fit (429); once it is gone, they do.
      const marker = `/tmp/work/in-flight-${process.pid}-${Date.now()}`;
      const controller = new AbortController();
      rawPost(url, JSON.stringify(runPython('long', `open(${JSON.stringify(marker)}, "w")\n` +
                                                    'import time\ntime.sleep(60)')),
              session, { signal: controller.signal }).catch(() => {});
      let sandbox = [];
      assert.ok(await poll(() => (sandbox = processesSeeing(marker)).length > 0,
                           { timeoutMs: 30_000 * TIME_SLACK, intervalMs: 5 }), 'the call never ran');
      const pings = JSON.stringify(Array.from({ length: 8 }, (_, i) => rpc(`ping-${i}`, 'ping')));
      const busy = await rawPost(url, pings, session);
      assert.equal(busy.status, 429, await busy.text());
      controller.abort();
      assert.ok(await poll(() => sandbox.every(p => !present(p)), { timeoutMs: 5000 * TIME_SLACK }),
                'the abandoned call still runs');
      const fits = await rawPost(url, pings, session);
      const fitsText = await fits.text();
      assert.equal(fits.status, 200, fitsText);
      assert.equal(JSON.parse(fitsText).length, 8, fitsText);
      // None of the refused start_session calls made a session: this client's 4 still fit.
      const made = [];
      for (let i = 0; i < 4; ++i) {
        const reply = await rawPost(url, JSON.stringify(start(`s${i}`)), session);
        const answer = JSON.parse(await reply.text());
        assert.equal(answer.result?.isError, undefined, JSON.stringify(answer));
        // No structuredContent before 2025-06-18: the text names it.
        const found = /^session_id: ([0-9a-f]+)$/.exec(answer.result?.content?.[0]?.text ?? '');
        assert.ok(found, JSON.stringify(answer));
        made.push(found[1]);
      }
      assert.equal(made.length, 4);
    } finally {
      await endSession(url, session);
    }
    // A client of 2025-06-18 (as the SDK's, of 2025-11-25): no batches at all.
    const later = await rawSession(url, '2025-06-18');
    try {
      const reply = await rawPost(url, JSON.stringify([rpc('p', 'ping')]), later);
      const text = await reply.text();
      assert.equal(reply.status, 400, text);
      assert.match(JSON.parse(text).error.message, /not part of MCP 2025-06-18/);
    } finally {
      await endSession(url, later);
    }
    await goodStillServed();
  });

  test('a client that drops its connection mid-call: the sandbox dies at once, nothing leaks',
       async t => {
    const pid = server.child.pid;
    const session = await rawSession(url, '2025-06-18');
    try {
      // A pending JSON answer, then an SSE stream that has begun.
      for (const streaming of [false, true]) {
        const fds = openFds(pid).length;
        const marker = `/tmp/work/dropped-${process.pid}-${Date.now()}-${streaming}`;
        const controller = new AbortController();
        const code = `import time\nopen(${JSON.stringify(marker)}, "w").close()\n` +
                     "print('running', flush=True)\ntime.sleep(60)";
        const posted = rawPost(url, JSON.stringify(runPython(1, code,
                                                             streaming && { progressToken: 1 })),
                               session, { signal: controller.signal });
        posted.catch(() => {});
        let sandbox = [];
        await poll(() => (sandbox = processesSeeing(marker)).some(p => p.exe.startsWith('python')),
                   { timeoutMs: 30_000 * TIME_SLACK, intervalMs: 5 });
        assert.ok(sandbox.length > 0, `no sandbox made ${marker}`);
        if (streaming) {
          const response = await posted;
          assert.match(response.headers.get('content-type'), /^text\/event-stream/);
          const reader = response.body.getReader();
          const { value } = await reader.read();
          assert.match(Buffer.from(value).toString(), /running/);
        }
        const start = performance.now();
        controller.abort();  // fetch closes the connection
        const dead = await poll(() => sandbox.every(p => !present(p)),
                                { timeoutMs: 2000 * TIME_SLACK, intervalMs: 5 });
        const elapsed = performance.now() - start;
        t.diagnostic(`${streaming ? 'SSE' : 'JSON'}: the sandbox was gone ${elapsed | 0} ms ` +
                     'after the client left');
        assert.ok(dead, `the abandoned call's processes survive: ${JSON.stringify(sandbox)}`);
        // Its connection, pipes and pidfds closed (the pool's warm sandbox made anew).
        const closed = await poll(() => openFds(pid).length <= fds + 4,
                                  { timeoutMs: 10_000 * TIME_SLACK, intervalMs: 20 });
        assert.ok(closed, `descriptors grew from ${fds}: ${openFds(pid).join(', ')}`);
      }
      // The client's session goes on.
      const after = await rawPost(url, JSON.stringify(runPython(2, 'print(3)')), session);
      assert.match(JSON.parse(await after.text()).result.content[0].text, /^3\n/);
    } finally {
      await endSession(url, session);
    }
    const other = await connect(url);
    try {
      assert.equal((await call(other.client, 'run_python', { code: 'print(4)' }))
                     .structuredContent.stdout, '4\n');
    } finally {
      await other.transport.terminateSession();
      await other.client.close();
    }
    await goodStillServed();
  });

  test('the MCP Inspector CLI over HTTP: a run_python call, and a bad token refused',
       async () => {
    const inspector = (args, token = TOKEN) => promisify(execFile)(process.execPath, [
      INSPECTOR, '--cli', url, '--transport', 'http', '--header', `Authorization: Bearer ${token}`,
      ...args], {
      timeout: 60_000 * TIME_SLACK,
      // It finds its own package.json by a path it checks from the working directory but
      // imports from its module's: they agree from build/, next to its package.json.
      cwd: path.dirname(INSPECTOR),
    });
    const called = JSON.parse((await inspector([
      '--method', 'tools/call', '--tool-name', 'run_python', '--tool-arg', 'code=print(6 * 7)',
    ])).stdout);
    assert.equal(called.structuredContent?.stdout, '42\n', JSON.stringify(called));
    await assert.rejects(inspector(['--method', 'tools/list'], `${TOKEN}x`),
                         error => error.code !== 0 &&
                                  /bearer token is required/.test(error.stderr + error.stdout));
    await goodStillServed();
  });

  test('4 clients x 100 calls leave descriptors and memory flat', async () => {
    const pid = server.child.pid;
    const clients = await Promise.all([0, 1, 2, 3].map(() => connect(url)));
    const sessions = await Promise.all(clients.map(async ({ client }) =>
      (await call(client, 'start_session', {})).structuredContent.session_id));
    const round = calls => Promise.all(clients.map(async ({ client }, n) => {
      for (let i = 0; i < calls; ++i) {
        const result = await call(client, 'run_python', { session_id: sessions[n],
                                                          code: `print(${i})` });
        assert.equal(result.structuredContent.stdout, `${i}\n`);
      }
    }));
    await round(10);  // warm: buffers and maps at their working size
    const fds = openFds(pid).length;
    const rss = rssKiB(pid);
    await round(100);
    const fdsAfter = openFds(pid).length;
    const rssAfter = rssKiB(pid);
    for (const { client, transport } of clients) {
      await transport.terminateSession();
      await client.close();
    }
    assert.ok(fdsAfter <= fds + 4, `descriptors grew from ${fds} to ${fdsAfter}`);
    assert.ok(rssAfter <= rss + 8 * 1024, `RSS grew from ${rss} KiB to ${rssAfter} KiB`);
    await goodStillServed();
  });
});

describe('pysandbox mcp --http refuses to serve insecurely', { timeout: 120_000 }, () => {
  test('beyond loopback without a token: exit 125 with the fix', async () => {
    const server = startServer('0.0.0.0:0', { env: { PYSANDBOX_MCP_TOKEN: undefined } });
    assert.deepEqual(await server.exit, { code: 125, signal: null }, server.stderr);
    assert.match(server.stderr, /--http-token-file/);
  });

  test('a token too short to be one: exit 125', async () => {
    const server = startServer('127.0.0.1:0', { env: { PYSANDBOX_MCP_TOKEN: 'short' } });
    assert.deepEqual(await server.exit, { code: 125, signal: null }, server.stderr);
    assert.match(server.stderr, /shorter than 16/);
  });

  test('a bad address: exit 125', async () => {
    const server = startServer('example.com:80');
    assert.deepEqual(await server.exit, { code: 125, signal: null }, server.stderr);
    assert.match(server.stderr, /--http example\.com:80/);
  });
});
