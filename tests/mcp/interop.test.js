// `pysandbox mcp` driven by an agent framework's own MCP client rather than the SDK directly:
// LangChain's @langchain/mcp-adapters (MultiServerMCPClient turns the server's tools into
// LangChain tools) and LangGraph's ToolNode, which runs the tool calls a model's message asks
// for, as an agent graph does. What such an agent sees is judged: the tools and their argument
// schemas, a call's output and value, an error the model can read, and state kept in a session
// across two tool-calling turns.
//
//   PYSANDBOX=$PWD/build/bin/pysandbox PYSANDBOX_AS=root node --test tests/mcp/interop.test.js

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { serverCommand } from './support.js';

// Imported here so that a missing `npm ci` fails with the command that fixes it.
async function importFramework() {
  try {
    const [adapters, prebuilt, messages] = await Promise.all([
      import('@langchain/mcp-adapters'),
      import('@langchain/langgraph/prebuilt'),
      import('@langchain/core/messages'),
    ]);
    return { ...adapters, ...prebuilt, ...messages };
  } catch (error) {
    throw new Error('LangChain\'s MCP adapters are not installed ' +
                    `(run: npm ci --prefix tests/mcp): ${error.message}`);
  }
}
const { AIMessage, MultiServerMCPClient, ToolNode } = await importFramework();

// The text the model reads from a tool's answer (a ToolMessage's content, or what invoke returned),
// whatever shape the adapter gave it: a string, a content block serialised as JSON, or blocks.
function modelText(answer) {
  if (Array.isArray(answer)) return answer.map(modelText).join('');
  if (answer !== null && typeof answer === 'object') {
    if ('content' in answer) return modelText(answer.content);
    return typeof answer.text === 'string' ? answer.text : '';
  }
  try {
    const block = JSON.parse(answer);
    if (block !== null && typeof block === 'object') return modelText(block);
  } catch {}
  return String(answer);
}

describe('LangChain\'s MCP client and LangGraph\'s ToolNode', { timeout: 120_000 }, () => {
  let client;
  let tools;
  before(async () => {
    const { command, args } = serverCommand(['-p', 'default']);
    client = new MultiServerMCPClient({
      mcpServers: { pysandbox: { transport: 'stdio', command, args } },
    });
    tools = await client.getTools();
  });
  after(async () => { await client?.close(); });

  const tool = name => {
    const found = tools.find(t => t.name === name);
    assert.ok(found, `no LangChain tool named ${name} among ${tools.map(t => t.name)}`);
    return found;
  };

  test('the server\'s tools become LangChain tools with their argument schemas', () => {
    assert.deepEqual(tools.map(t => t.name).sort(), ['end_session', 'run_python', 'start_session']);
    const schema = tool('run_python').schema;
    assert.ok(schema?.properties?.code, `run_python's schema has no code: ${JSON.stringify(schema)}`);
    assert.deepEqual(schema.required, ['code']);
  });

  test('a call returns the output and the final expression\'s value', async () => {
    const out = await tool('run_python').invoke({ code: 'print("from the sandbox")\n6 * 7' });
    assert.equal(modelText(out), 'from the sandbox\n42\n');
  });

  test('an exception reaches the agent as the tool\'s error, with the traceback', async () => {
    await assert.rejects(tool('run_python').invoke({ code: 'x = 1\n1 / 0' }),
                         error => /ZeroDivisionError: division by zero/.test(error.message) &&
                                  /Traceback/.test(error.message));
  });

  test('ToolNode runs a model\'s tool calls, and a session keeps state across turns',
       async () => {
    const node = new ToolNode(tools, { handleToolErrors: true });
    const turn = async (id, name, args) => {
      const { messages } = await node.invoke({
        messages: [new AIMessage({ content: '', tool_calls: [{ id, name, args }] })],
      });
      assert.equal(messages.length, 1);
      assert.equal(messages[0].tool_call_id, id);
      return messages[0];
    };
    const started = await turn('call-1', 'start_session', {});
    const sessionId = /^session_id: ([0-9a-f]+)$/.exec(modelText(started))?.[1];
    assert.ok(sessionId, `no session_id in ${modelText(started)}`);
    await turn('call-2', 'run_python', { code: 'kept = 40 + 2', session_id: sessionId });
    const read = await turn('call-3', 'run_python', { code: 'print(kept)', session_id: sessionId });
    assert.equal(read.status, 'success', modelText(read));
    assert.equal(modelText(read), '42\n');
    const failed = await turn('call-4', 'run_python', { code: 'undefined_name',
                                                        session_id: sessionId });
    assert.equal(failed.status, 'error');
    assert.match(modelText(failed), /NameError/);
    const ended = await turn('call-5', 'end_session', { session_id: sessionId });
    assert.equal(ended.status, 'success', modelText(ended));
  });
});
