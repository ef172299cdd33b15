import { describe, expect, it } from 'vitest';
import { Value } from 'typebox/value';
import { AgentQueueJob, AgentRunJob, JobPayload, PubSubChannels, RunEvent, SessionCompactJob, type RunEventType } from '@agentry/contracts';

describe('job payloads', () => {
  it('accept ids only, with a version', () => {
    expect(Value.Check(AgentRunJob, { type: 'agent-run', v: 1, runId: 'r1' })).toBe(true);
    expect(Value.Check(AgentRunJob, { type: 'agent-run', v: 2, runId: 'r1' })).toBe(false);
    expect(Value.Check(AgentRunJob, { type: 'agent-run', v: 1, runId: 'r1', prompt: 'hi' })).toBe(false);
    expect(Value.Check(AgentRunJob, { type: 'agent-run', v: 1, runId: '' })).toBe(false);
  });
  it('v2 adds the W3C traceparent and nothing else', () => {
    const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    expect(Value.Check(AgentRunJob, { type: 'agent-run', v: 2, runId: 'r1', traceparent })).toBe(true);
    expect(Value.Check(AgentRunJob, { type: 'agent-run', v: 1, runId: 'r1', traceparent })).toBe(false);
    expect(Value.Check(AgentRunJob, { type: 'agent-run', v: 2, runId: 'r1', traceparent: 'x' })).toBe(false);
    expect(Value.Check(JobPayload, { type: 'channel-send', v: 2, messageId: 'm1', traceparent })).toBe(true);
    expect(Value.Check(JobPayload, { type: 'channel-send', v: 2, messageId: 'm1' })).toBe(false);
  });
  it('v3 adds the reply channel id, the traceparent optional, nothing else', () => {
    const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    expect(Value.Check(AgentRunJob, { type: 'agent-run', v: 3, runId: 'r1', replyTo: 'g1' })).toBe(true);
    expect(Value.Check(AgentRunJob, { type: 'agent-run', v: 3, runId: 'r1', replyTo: 'g1', traceparent })).toBe(true);
    expect(Value.Check(AgentRunJob, { type: 'agent-run', v: 3, runId: 'r1' })).toBe(false);
    expect(Value.Check(AgentRunJob, { type: 'agent-run', v: 3, runId: 'r1', replyTo: '' })).toBe(false);
    expect(Value.Check(AgentRunJob, { type: 'agent-run', v: 3, runId: 'r1', replyTo: 'g1', traceparent: 'x' })).toBe(false);
    expect(Value.Check(AgentRunJob, { type: 'agent-run', v: 3, runId: 'r1', replyTo: 'g1', request: {} })).toBe(false);
    expect(Value.Check(AgentRunJob, { type: 'agent-run', v: 1, runId: 'r1', replyTo: 'g1' })).toBe(false);
  });
  it('session-compact v1 carries the session, the principal and the request id, nothing else; the agent-run queue takes it beside runs', () => {
    const job = { type: 'session-compact', v: 1, sessionId: 's1', principal: 'user:carol', requestId: 'q1' };
    expect(Value.Check(SessionCompactJob, job)).toBe(true);
    expect(Value.Check(AgentQueueJob, job)).toBe(true);
    expect(Value.Check(JobPayload, job)).toBe(true);
    expect(Value.Check(SessionCompactJob, { ...job, v: 2 })).toBe(false);
    expect(Value.Check(SessionCompactJob, { ...job, apiKey: 'sk-secret' })).toBe(false);
    expect(Value.Check(SessionCompactJob, { ...job, requestId: '' })).toBe(false);
    expect(PubSubChannels.compaction('q1')).toBe('compaction:q1');
  });
  it('form a union tagged by type', () => {
    expect(Value.Check(JobPayload, { type: 'cron-fire', v: 1, cronJobId: 'c' })).toBe(true);
    expect(Value.Check(JobPayload, { type: 'nope', v: 1, runId: 'c' })).toBe(false);
  });
});

describe('run events', () => {
  it('validate each type', () => {
    const samples: Record<RunEventType, unknown> = {
      text: { runId: 'r', seq: 0, type: 'text', text: 'hi' },
      tool_start: { runId: 'r', seq: 1, type: 'tool_start', toolCallId: 'c', toolName: 'read', toolType: 'builtin', arguments: '{}' },
      tool_result: { runId: 'r', seq: 2, type: 'tool_result', toolCallId: 'c', toolName: 'read', toolType: 'builtin', content: 'x' },
      done: { runId: 'r', seq: 3, type: 'done', finishReason: 'stop' },
      error: { runId: 'r', seq: 4, type: 'error', message: 'boom' },
      retry: { runId: 'r', seq: 4, type: 'retry', attempt: 2, of: 3, reason: 'provider unreachable' },
    };
    for (const sample of Object.values(samples)) expect(Value.Check(RunEvent, sample)).toBe(true);
    expect(Value.Check(RunEvent, { runId: 'r', seq: -1, type: 'text', text: 'x' })).toBe(false);
    expect(Value.Check(RunEvent, { runId: 'r', seq: 0, type: 'tool_start', toolCallId: 'c', toolName: 'x', toolType: 'shell', arguments: '' })).toBe(false);
  });
  it('name run channels', () => {
    expect(PubSubChannels.run('abc')).toBe('run:abc');
  });
});
