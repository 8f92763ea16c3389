// Shared helpers for the MCP tests: start `pysandbox mcp` under the official TypeScript SDK's
// Client + StdioClientTransport (or as a bare child process for raw JSON-RPC), and look at the
// server and its sandboxes from the host side, through /proc.
//
// Environment, as for tests/support/env.py:
//   PYSANDBOX      the binary (default: <repo>/build/bin/pysandbox)
//   PYSANDBOX_AS   root: run the server as the current user, which must be root;
//                  nobody: run it as uid/gid 65534 through setpriv (needs root);
//                  unset: as whoever runs the tests.
//   PYSANDBOX_SANITIZED   set by ctest in a sanitizer build: timing bounds scale by 4.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const REPO = path.resolve(HERE, '..', '..');
export const PYSANDBOX = process.env.PYSANDBOX ?? path.join(REPO, 'build', 'bin', 'pysandbox');
export const RUN_AS = process.env.PYSANDBOX_AS ?? '';
// A sanitizer build starts and exits several times slower: the instrumentation's cost, not the
// precision of what is measured (tests/support/env.py's TIME_SLACK_SCALE).
export const TIME_SLACK = process.env.PYSANDBOX_SANITIZED ? 4 : 1;

// The protocol versions the server speaks (issues 18 and 34), oldest first.
export const PROTOCOL_VERSIONS = ['2024-11-05', '2025-03-26', '2025-06-18', '2025-11-25'];
export const LATEST_PROTOCOL_VERSION = PROTOCOL_VERSIONS.at(-1);
// The command line the tests are written against: the first -p is the default profile.
export const SERVER_ARGS = ['-p', 'default', '-p', 'datascience', '--pool', '1'];
// Bigger files come back as resource_link blocks instead of embedded resources.
export const EMBED_CAP = 64 * 1024;

const NOBODY = ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups', '--'];

// The SDK, imported here so that a missing `npm ci` fails with the command that fixes it.
async function importSdk(name) {
  try {
    const [client, stdio, types] = await Promise.all([
      import(`${name}/client/index.js`),
      import(`${name}/client/stdio.js`),
      import(`${name}/types.js`),
    ]);
    return { ...client, ...stdio, ...types };
  } catch (error) {
    throw new Error(`the MCP TypeScript SDK ${name} is not installed ` +
                    `(run: npm ci --prefix tests/mcp): ${error.message}`);
  }
}
export const sdk = await importSdk('@modelcontextprotocol/sdk');
// Older releases of the same SDK, each the last whose newest protocol version is the key
// (package.json installs them under these aliases): the clients still deployed.
export const OLD_SDKS = {
  '2024-11-05': await importSdk('sdk-2024-11-05'),
  '2025-03-26': await importSdk('sdk-2025-03-26'),
};

export function checkEnvironment() {
  assert.ok(['', 'root', 'nobody'].includes(RUN_AS),
            `PYSANDBOX_AS must be 'root' or 'nobody', not ${JSON.stringify(RUN_AS)}`);
  if (RUN_AS) {
    assert.equal(process.geteuid(), 0, `PYSANDBOX_AS=${RUN_AS} needs the tests to run as root`);
  }
  let executable = false;
  try {
    fs.accessSync(PYSANDBOX, fs.constants.X_OK);
    executable = fs.statSync(PYSANDBOX).isFile();
  } catch {}
  assert.ok(executable, `pysandbox binary not found or not executable: ${PYSANDBOX}`);
}

// `pysandbox mcp ARGS` as the requested caller: the command and arguments to spawn.
export function serverCommand(args = SERVER_ARGS) {
  checkEnvironment();
  const argv = [...(RUN_AS === 'nobody' ? NOBODY : []), PYSANDBOX, 'mcp', ...args];
  return { command: argv[0], args: argv.slice(1) };
}

// Keeps the last `limit` bytes of a stream, so a chatty server cannot block on a full pipe.
class Tail {
  constructor(stream, limit = 64 * 1024) {
    this.text = '';
    stream?.setEncoding('utf8');
    stream?.on('data', chunk => { this.text = (this.text + chunk).slice(-limit); });
  }
}

// ------------------------------------------------------------------------- the SDK's client

// One `pysandbox mcp` process with the SDK's Client connected to it over stdio.
export class McpServer {
  // Starts the server, completes the initialize handshake and lists the tools (which makes the
  // SDK compile each tool's outputSchema: from then on callTool validates structuredContent).
  // `client`: the SDK whose Client connects (default: the current one; OLD_SDKS for others).
  static async start(args = SERVER_ARGS, { client = sdk } = {}) {
    const server = new McpServer(client);
    await server.#connect(args);
    return server;
  }

  constructor(clientSdk = sdk) {
    this.sdk = clientSdk;
    this.protocolVersion = null;  // as the SDK negotiated it
    this.errors = [];             // what the SDK reported through Client.onerror
    this.received = [];           // every message from the server, as it came, before the SDK
    this.closed = false;
  }

  async #connect(args) {
    const { command, args: argv } = serverCommand(args);
    // The whole environment, not the SDK's short default list: a sanitizer build's ASAN_OPTIONS
    // must reach the server.
    this.transport = new this.sdk.StdioClientTransport({ command, args: argv,
                                                         env: { ...process.env },
                                                         stderr: 'pipe' });
    this.stderr = new Tail(this.transport.stderr);
    // The SDK hands the negotiated version to the transport (a hook of the Transport interface,
    // since 1.13); older ones do not, and the initialize result says it.
    this.transport.setProtocolVersion = version => { this.protocolVersion = version; };
    this.#recordMessages();
    this.client = new this.sdk.Client({ name: 'pysandbox-tests', version: '1.0.0' });
    this.client.onerror = error => this.errors.push(error);
    try {
      await this.client.connect(this.transport, { timeout: 30_000 * TIME_SLACK });
      this.initializeResult = this.received.find(message => message.id !== undefined)?.result;
      this.protocolVersion ??= this.initializeResult?.protocolVersion;
      // The spawned process (StdioClientTransport.pid, or before 1.13 its _process); setpriv
      // execs the binary in place.
      this.pid = this.transport.pid ?? this.transport._process?.pid;
      // The SDK (pinned in package.json) keeps the spawned ChildProcess in _process: only its
      // exit status tells a clean shutdown from a crash or a leak report.
      this.exit = exitOf(this.transport._process);
      this.tools = (await this.client.listTools()).tools;
    } catch (error) {
      await this.client.close().catch(() => {});
      throw new Error(`${command} ${argv.join(' ')}: ${error.message}\n` +
                      `  server stderr: ${this.stderr.text || '(empty)'}`);
    }
  }

  // Every message the transport hands the SDK passes here first: what the server sent, not what
  // the SDK's parse kept of it.
  #recordMessages() {
    let handler;
    Object.defineProperty(this.transport, 'onmessage', {
      configurable: true,
      get: () => handler,
      set: fn => {
        handler = fn && (message => {
          this.received.push(structuredClone(message));
          fn(message);
        });
      },
    });
  }

  tool(name) {
    return this.tools.find(tool => tool.name === name);
  }

  // run_python(arguments) through the SDK: parsed with CallToolResultSchema, structuredContent
  // validated against the tool's outputSchema.
  runPython(args, options = {}) {
    return this.call('run_python', args, options);
  }

  call(name, args, options = {}) {
    return this.client.callTool({ name, arguments: args }, this.sdk.CallToolResultSchema,
                                { timeout: 120_000 * TIME_SLACK, ...options });
  }

  // One call, alone in flight: what the SDK made of it ({result} or {error}) and the response as
  // the server sent it (raw).
  async rawCall(name, args) {
    const before = this.received.length;
    const outcome = await this.call(name, args).then(result => ({ result }), error => ({ error }));
    const responses = this.received.slice(before)
      .filter(message => 'result' in message || 'error' in message);
    assert.equal(responses.length, 1, `one response to ${name}: ${JSON.stringify(responses)}`);
    return { ...outcome, raw: responses[0] };
  }

  // Closes the server's stdin, then the client, and checks that the server exited by itself,
  // with `code`, before the SDK's escalation to SIGTERM (2 s after closing stdin; before 1.13
  // the SDK sends SIGTERM at once, hence stdin is closed here first).
  async close({ code = 0 } = {}) {
    if (this.closed) return;
    this.closed = true;
    const start = performance.now();
    this.transport._process?.stdin?.end();
    await within(this.exit, 2000);
    await this.client.close();
    const exit = await within(this.exit, 10_000);
    const ms = performance.now() - start;
    assert.ok(exit, `pysandbox mcp (pid ${this.pid}) did not exit after its stdin closed`);
    assert.deepEqual(exit, { code, signal: null },
                     `pysandbox mcp did not exit cleanly when its stdin closed (after ${ms | 0} ms); ` +
                     `stderr: ${this.stderr.text}`);
    assert.ok(ms < 2000, `pysandbox mcp took ${ms | 0} ms to exit after its stdin closed: ` +
                         `the SDK sends SIGTERM at 2000 ms`);
  }

  describe() {
    return `server pid ${this.pid}, stderr: ${this.stderr.text.slice(-2000) || '(empty)'}`;
  }
}

function exitOf(child) {
  assert.ok(child && typeof child.once === 'function',
            'StdioClientTransport no longer keeps its ChildProcess in _process (SDK upgraded?)');
  return new Promise(resolve => {
    if (child.exitCode !== null || child.signalCode !== null) {
      resolve({ code: child.exitCode, signal: child.signalCode });
    } else {
      child.once('exit', (code, signal) => resolve({ code, signal }));
    }
  });
}

// ------------------------------------------------------------------------- raw JSON-RPC

// The server as a bare child process: one JSON-RPC message per line, written and read here.
export class RawServer {
  constructor(args = SERVER_ARGS) {
    const { command, args: argv } = serverCommand(args);
    this.command = `${command} ${argv.join(' ')}`;
    this.child = spawn(command, argv, { stdio: ['pipe', 'pipe', 'pipe'], env: process.env });
    this.stderr = new Tail(this.child.stderr);
    this.exited = null;
    this.exit = new Promise(resolve => this.child.once('exit', (code, signal) => {
      this.exited = { code, signal };
      resolve(this.exited);
      this.waiters.forEach(wake => wake());
    }));
    this.messages = [];  // parsed lines not yet taken by next()
    this.lines = [];     // every line, as read
    this.waiters = [];
    readline.createInterface({ input: this.child.stdout }).on('line', line => {
      this.lines.push(line);
      let message;
      try {
        message = JSON.parse(line);
      } catch {
        message = { unparsable: line };
      }
      this.messages.push(message);
      this.waiters.forEach(wake => wake());
    });
  }

  // One line: a string, or a Buffer for bytes that are not UTF-8.
  send(line) {
    this.child.stdin.write(Buffer.concat([Buffer.from(line), Buffer.from('\n')]));
  }

  // The first message (in arrival order) that satisfies `predicate`, removed from the queue.
  async next(predicate, timeoutMs = 30_000 * TIME_SLACK) {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      const index = this.messages.findIndex(predicate);
      if (index >= 0) return this.messages.splice(index, 1)[0];
      const remaining = deadline - performance.now();
      if (remaining <= 0 || this.exited) {
        const why = this.exited ? `it exited (${JSON.stringify(this.exited)})`
                                : `nothing came within ${timeoutMs} ms`;
        throw new Error(`no matching message from ${this.command}: ${why}; ` +
                        `lines so far: ${JSON.stringify(this.lines).slice(-2000)}; ` +
                        `stderr: ${this.stderr.text}`);
      }
      await new Promise(resolve => {
        const timer = setTimeout(resolve, remaining);
        this.waiters.push(() => { clearTimeout(timer); resolve(); });
      });
      this.waiters = [];
    }
  }

  async request(message) {
    this.send(JSON.stringify({ jsonrpc: '2.0', ...message }));
    return this.next(reply => reply.id === message.id);
  }

  async initialize(protocolVersion) {
    const reply = await this.request({
      id: 'init', method: 'initialize',
      params: { protocolVersion, capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
    });
    assert.ok(reply.result, `initialize failed: ${JSON.stringify(reply)}`);
    this.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
    return reply.result;
  }

  // Runs fn(server) on a new server, then closes its stdin: it must exit by itself, with 0.
  static async with(fn, args = SERVER_ARGS) {
    const raw = new RawServer(args);
    let exit;
    try {
      await fn(raw);
    } finally {
      exit = await raw.close();
    }
    assert.deepEqual(exit, { code: 0, signal: null },
                     `${raw.command} did not exit cleanly when its stdin closed; ` +
                     `stderr: ${raw.stderr.text}`);
  }

  // Closes stdin; returns how the server exited (or null if it was still running after
  // `timeoutMs`, in which case it is killed).
  async close(timeoutMs = 5000 * TIME_SLACK) {
    this.child.stdin.end();
    const exit = await within(this.exit, timeoutMs);
    if (!exit) this.child.kill('SIGKILL');
    return exit;
  }
}

// ------------------------------------------------------------------------- results

// The text block every run_python result starts with.
export function textOf(result) {
  const first = result.content[0];
  assert.equal(first?.type, 'text', `content[0] is not a text block: ${JSON.stringify(first)}`);
  return first.text;
}

export function blocksOf(result, type) {
  return result.content.filter(block => block.type === type);
}

export function isInvalidParams(error) {
  return error instanceof sdk.McpError && error.code === sdk.ErrorCode.InvalidParams;
}

export const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

// ------------------------------------------------------------------------- /proc

export function delay(ms) {
  return new Promise(resolve => setTimeout(resolve, ms));
}

// What `promise` resolves to, or null if that takes more than `ms`.
export async function within(promise, ms) {
  let timer;
  const late = new Promise(resolve => { timer = setTimeout(() => resolve(null), ms); });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

// Polls `probe` (which returns a value, or something falsy to go on) every `intervalMs` until
// it returns a truthy value or `timeoutMs` passes; returns the last value.
export async function poll(probe, { timeoutMs, intervalMs = 2 }) {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value || performance.now() >= deadline) return value;
    await delay(intervalMs);
  }
}

function pids() {
  return fs.readdirSync('/proc').filter(name => /^\d+$/.test(name)).map(Number);
}

// /proc/PID/stat's state, parent and start time (clock ticks since boot: with the pid, a
// process's identity), or null when there is no such process.
export function stat(pid) {
  let text;
  try {
    text = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return { pid, state: fields[0], ppid: Number(fields[1]), start: fields[19] };
}

// Every process below `pid` (not itself), as {pid, start}.
export function descendants(pid) {
  const children = new Map();
  for (const info of pids().map(stat)) {
    if (!info) continue;
    if (!children.has(info.ppid)) children.set(info.ppid, []);
    children.get(info.ppid).push(info);
  }
  const found = [];
  const queue = [...(children.get(pid) ?? [])];
  while (queue.length) {
    const info = queue.shift();
    found.push({ pid: info.pid, start: info.start });
    queue.push(...(children.get(info.pid) ?? []));
  }
  return found;
}

// Whether the process is still there and still the same one; `zombieCounts` says whether a
// dead process its parent has not reaped yet counts.
export function present({ pid, start }, zombieCounts = true) {
  const info = stat(pid);
  return info !== null && info.start === start && (zombieCounts || info.state !== 'Z');
}

// The processes that see `file` (an absolute path inside a sandbox) through their root: every
// process of the sandbox whose code created it, and nothing on the host.
export function processesSeeing(file) {
  const found = [];
  for (const pid of pids()) {
    if (fs.existsSync(`/proc/${pid}/root${file}`)) {
      const info = stat(pid);
      if (info) found.push({ pid, start: info.start, exe: exeOf(pid) });
    }
  }
  return found;
}

export function exeOf(pid) {
  try {
    return path.basename(fs.readlinkSync(`/proc/${pid}/exe`));
  } catch {
    return '';
  }
}

export function cmdlineOf(pid) {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
  } catch {
    return [];
  }
}

export function rssKiB(pid) {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/^VmRSS:\s+(\d+) kB$/m.exec(status)[1]);
}

// The server's open fds, each with what it points to.
export function openFds(pid) {
  return fs.readdirSync(`/proc/${pid}/fd`).map(fd => {
    try {
      return `${fd} -> ${fs.readlinkSync(`/proc/${pid}/fd/${fd}`)}`;
    } catch {
      return `${fd} -> ?`;
    }
  });
}
