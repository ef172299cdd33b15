import { describe, expect, it } from 'vitest';
import { aguiToolResult, aguiToolStart, chunk, completion, contentChunkJson, streamError, usageChunk } from '../src/chat/openai-chunks.js';

const meta = { id: 'chatcmpl-1', created: 1700000000, model: 'agent' };

/** The encoders are pure; the conformance suites (e2e/chat-*.test.ts) check them through the real openai SDK. */
describe('OpenAI chunk encoders', () => {
  it('shape a completion and its usage as OpenAI does, zeros for a run that reported none', () => {
    expect(completion(meta, 'hi', 'stop', { promptTokens: 3, completionTokens: 1, totalTokens: 4 })).toEqual({
      ...meta,
      object: 'chat.completion',
      choices: [{ index: 0, message: { role: 'assistant', content: 'hi', refusal: null }, logprobs: null, finish_reason: 'stop' }],
      usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 },
    });
    expect(usageChunk(meta, null)).toEqual({ ...meta, object: 'chat.completion.chunk', choices: [], usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 } });
    expect(chunk(meta, { content: 'x' })).toEqual({ ...meta, object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content: 'x' }, finish_reason: null }] });
  });

  it('type a stream error by whose fault it is, 502 when the run said nothing', () => {
    expect(streamError('bad', 400).error).toEqual({ message: 'bad', type: 'invalid_request_error', code: 400 });
    expect(streamError('down', 503).error.type).toBe('server_error');
    expect(streamError('?', undefined).error).toEqual({ message: '?', type: 'server_error', code: 502 });
  });

  it('carry the AG-UI tool events, isError only when set', () => {
    const start = aguiToolStart({ type: 'tool_start', toolCallId: 'c1', toolName: 'read', arguments: '{}', toolType: 'builtin' } as never);
    expect(start).toEqual({ tool_calls: [{ type: 'TOOL_CALL_START', toolCallId: 'c1', toolCallName: 'read', arguments: '{}', toolType: 'builtin' }] });
    const ok = aguiToolResult({ type: 'tool_result', toolCallId: 'c1', toolName: 'read', content: 'x', toolType: 'builtin' } as never);
    expect((ok.tool_calls as Array<Record<string, unknown>>)[0]).not.toHaveProperty('isError');
    const failed = aguiToolResult({ type: 'tool_result', toolCallId: 'c1', toolName: 'read', content: 'no', toolType: 'builtin', isError: true } as never);
    expect((failed.tool_calls as Array<Record<string, unknown>>)[0]).toMatchObject({ type: 'TOOL_CALL_RESULT', isError: true });
  });

  it('write a text chunk from its template exactly as JSON.stringify writes the chunk', () => {
    // A model name that looks like the template's split point, and contents JSON must escape.
    const tricky = { id: 'chatcmpl-2', created: 1, model: 'a "content":"" b\u2028' };
    for (const m of [meta, tricky]) {
      const json = contentChunkJson(m);
      for (const content of ['', 'tok1 ', 'say "hi"\n', '\\ \u0000 \u2028 é 😀', '"content":""']) {
        expect(json(content)).toBe(JSON.stringify(chunk(m, { content })));
      }
    }
  });
});
