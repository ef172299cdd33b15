import { describe, expect, it } from 'vitest';
import { AGENT_FIELD_HINTS, agentConfigSchema, fieldErrorsOf, isCheckboxTool, splitProblems, toggleBuiltin, withOtherTools } from '../app/lib/agent-form.js';
import {
  clearProblemsAt,
  clientProblems,
  extraEntries,
  fieldForPath,
  fieldIds,
  fieldOf,
  fieldsOf,
  humanize,
  isMultiline,
  parseJsonField,
  parseLines,
  parseNumber,
  selectOptions,
  selectValue,
  setAt,
  shapeOf,
  withExtraEntries,
  type Field,
  type JsonSchema,
} from '../app/lib/schema-form.js';

/**
 * The schema-to-form mapping of the generated agent settings (components/SchemaForm.tsx renders
 * what these functions decide). The browser suite (web-ui.test.ts) runs it against the server's
 * own schema; here it gets a copy of the `ai/agent` entry of `GET /tools/forms` as TypeBox emits it.
 */

const param = { type: 'object', patternProperties: { '^.*$': {} }, description: 'temperature, topP, maxTokens, stop, responseFormat, ... passed to the provider' };
const AI_AGENT: JsonSchema = {
  type: 'object',
  properties: {
    provider: { type: 'string', description: 'provider id; models.default_provider when absent' },
    model: { type: 'string' },
    systemPrompt: { type: 'string' },
    params: param,
    maxStep: { type: 'integer', minimum: 1 },
    maxToolOutputLength: { type: 'integer', minimum: 1 },
    tools: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          type: { type: 'string' },
          name: { type: 'string' },
          description: { type: 'string' },
          targetId: { type: 'string' },
          timeout: { type: 'integer', minimum: 1, description: 'milliseconds one call may take (default 120000, at least 1000)' },
        },
      },
    },
    failover: { type: 'array', items: { type: 'object', properties: { provider: { type: 'string' }, model: { type: 'string' }, params: param } } },
    disabledSkills: { type: 'array', items: { type: 'string' } },
  },
};

const byId = (fields: Field[], id: string): Field => {
  const f = fields.find((x) => x.id === id) ?? fields.flatMap((x) => (x.kind === 'object' ? x.fields : [])).find((x) => x.id === id);
  if (!f) throw new Error(`no field ${id}`);
  return f;
};
const pick = <F extends Field>(f: F) => ({ id: f.id, kind: f.kind, label: f.label, help: f.help, wide: f.wide });

describe('the ai/agent configuration as a form', () => {
  const fields = fieldsOf(agentConfigSchema(AI_AGENT), AGENT_FIELD_HINTS);

  it('gives every property a control in the schema order, labelled from title, hint or name', () => {
    expect(fields.map(pick)).toEqual([
      { id: 'provider', kind: 'text', label: 'Provider', help: 'provider id; models.default_provider when absent', wide: false },
      { id: 'model', kind: 'text', label: 'Model', help: undefined, wide: false },
      { id: 'systemPrompt', kind: 'text', label: 'System prompt', help: '`${include(path)}` inserts a workspace file, `${now()}` the time.', wide: true },
      { id: 'params', kind: 'object', label: 'Model parameters', help: param.description, wide: true },
      { id: 'maxStep', kind: 'number', label: 'Max steps (model calls per answer)', help: undefined, wide: false },
      { id: 'maxToolOutputLength', kind: 'number', label: 'Max tool output (characters)', help: undefined, wide: false },
      { id: 'tools', kind: 'json', label: 'Tools', help: undefined, wide: true },
      { id: 'failover', kind: 'json', label: 'Failover', help: 'Tried in order when the provider fails.', wide: true },
      { id: 'disabledSkills', kind: 'string-list', label: 'Disabled skills', help: 'Skills this agent does not see.', wide: true },
    ]);
    expect(byId(fields, 'systemPrompt')).toMatchObject({ multiline: true, rows: 8 });
    expect(byId(fields, 'maxStep')).toMatchObject({ integer: true, schema: { minimum: 1 } });
  });

  it('the heartbeat is a group of fields with its labels and hints (from the engine\'s schema)', () => {
    // As GET /tools/forms serves it (the contracts' HeartbeatSettings, descriptions left out).
    const heartbeat: JsonSchema = {
      type: 'object',
      required: ['interval'],
      properties: {
        interval: { type: 'string' },
        prompt: { type: 'string' },
        activeHours: { type: 'object', required: ['start', 'end'], properties: { start: { type: 'string' }, end: { type: 'string' } } },
        timezone: { type: 'string' },
        target: { type: 'string' },
        disabled: { type: 'boolean' },
      },
    };
    const schema = agentConfigSchema({ ...AI_AGENT, properties: { ...AI_AGENT.properties, heartbeat } });
    const hb = byId(fieldsOf(schema, AGENT_FIELD_HINTS), 'heartbeat');
    expect(hb.kind).toBe('object');
    if (hb.kind !== 'object') return;
    expect(hb.help).toContain('HEARTBEAT_OK');
    expect(hb.fields.map((f) => [f.id, f.kind, f.label])).toEqual([
      ['heartbeat.interval', 'text', 'Interval'],
      ['heartbeat.prompt', 'text', 'Prompt'],
      ['heartbeat.activeHours', 'object', 'Active hours'],
      ['heartbeat.timezone', 'text', 'Time zone'],
      ['heartbeat.target', 'text', 'Target'],
      ['heartbeat.disabled', 'boolean', 'Disabled'],
    ]);
    expect(hb.required).toBe(false);
    expect(byId(hb.fields, 'heartbeat.interval')).toMatchObject({ required: true, placeholder: '30m' });
    const hours = byId(hb.fields, 'heartbeat.activeHours');
    expect(hours.kind === 'object' && hours.fields.map((f) => f.id)).toEqual(['heartbeat.activeHours.start', 'heartbeat.activeHours.end']);
  });

  it('spells out the params the worker reads, and keeps params open for the rest', () => {
    const params = byId(fields, 'params');
    expect(params.kind === 'object' && params.open).toBe(true);
    expect(params.kind === 'object' && params.fields.map((f) => [f.id, f.kind, f.label])).toEqual([
      ['params.temperature', 'number', 'Temperature'],
      ['params.topP', 'number', 'Top p'],
      ['params.maxTokens', 'number', 'Max tokens per model call'],
      ['params.stop', 'string-list', 'Stop sequences'],
    ]);
    expect(fieldIds(fields)).toContain('params.maxTokens');
    // A property the server declares itself wins over the page's.
    const own = agentConfigSchema({ properties: { params: { ...param, properties: { temperature: { type: 'number', maximum: 1, title: 'Heat' } } } } });
    expect(own.properties?.params?.properties?.temperature).toEqual({ type: 'number', maximum: 1, title: 'Heat' });
    expect(Object.keys(own.properties?.params?.properties ?? {})).toEqual(['temperature', 'topP', 'maxTokens', 'stop']);
  });

  it('turns the providers into a select with the default first and an unknown current value kept', () => {
    const f = fieldOf('provider', { type: 'string' }, false, { provider: { options: [{ value: 'fake', label: 'fake' }], emptyLabel: 'Default (fake)' } });
    expect(f.kind).toBe('select');
    if (f.kind !== 'select') return;
    expect(selectOptions(f, 'gone')).toEqual([
      { value: '', label: 'Default (fake)' },
      { value: 'fake', label: 'fake' },
      { value: 'gone', label: 'gone (unknown)' },
    ]);
    expect(selectValue(f, '')).toBeUndefined();
    expect(selectValue(f, 'fake')).toBe('fake');
  });

  it('checks numbers against the schema in words, and text against its length', () => {
    const config = { maxStep: 0, maxToolOutputLength: 2.5, params: { temperature: 3, topP: 0.5, maxTokens: 'lots' }, model: 'm' };
    expect(clientProblems(fields, config)).toEqual({
      maxStep: 'a whole number, at least 1',
      maxToolOutputLength: 'a whole number, at least 1',
      'params.temperature': 'a number, from 0 to 2',
      'params.maxTokens': 'a whole number, at least 1',
    });
    expect(clientProblems(fields, { maxStep: 20 })).toEqual({});
    const name = fieldOf('name', { type: 'string', minLength: 1, maxLength: 3 }, true);
    expect(clientProblems([name], {})).toEqual({ name: 'required' });
    expect(clientProblems([name], { name: 'abcd' })).toEqual({ name: 'at most 3 characters' });
    const ratio = fieldOf('ratio', { type: 'number', exclusiveMinimum: 0 }, false);
    expect(clientProblems([ratio], { ratio: 0 })).toEqual({ ratio: 'a number, more than 0' });
  });
});

describe('schema to control', () => {
  it.each<[string, JsonSchema, Field['kind']]>([
    ['a string', { type: 'string' }, 'text'],
    ['a number', { type: 'number' }, 'number'],
    ['a nullable integer', { anyOf: [{ type: 'integer' }, { type: 'null' }] }, 'number'],
    ['a boolean', { type: 'boolean' }, 'boolean'],
    ['an enum', { type: 'string', enum: ['a', 'b'] }, 'select'],
    ['a union of literals (TypeBox)', { anyOf: [{ const: 'builtin', type: 'string' }, { const: 'mcp', type: 'string' }] }, 'select'],
    ['a list of strings', { type: 'array', items: { type: 'string' } }, 'string-list'],
    ['a list of enums', { type: 'array', items: { enum: ['a'] } }, 'json'],
    ['a list of objects', { type: 'array', items: { type: 'object', properties: { a: { type: 'string' } } } }, 'json'],
    ['an object with properties', { type: 'object', properties: { a: { type: 'string' } } }, 'object'],
    ['a record', { type: 'object', patternProperties: { '^.*$': {} } }, 'json'],
    ['no type at all', {}, 'json'],
  ])('%s', (_what, schema, kind) => {
    expect(fieldOf('x', schema, false).kind).toBe(kind);
  });

  it('chooses a multi-line box by format, length or a prompt-like name', () => {
    expect(isMultiline('systemPrompt', {})).toBe(true);
    expect(isMultiline('prompt', {})).toBe(true);
    expect(isMultiline('userInstructions', {})).toBe(true);
    expect(isMultiline('notes', { format: 'markdown' })).toBe(true);
    expect(isMultiline('notes', { maxLength: 4000 })).toBe(true);
    expect(isMultiline('model', {})).toBe(false);
    expect(isMultiline('promptId', {})).toBe(false);
    expect(fieldOf('systemPrompt', { type: 'string' }, false, { systemPrompt: { multiline: false } })).toMatchObject({ kind: 'text', multiline: false });
  });

  it('makes a script a wide multi-line JavaScript code field, by name or by what the schema says', () => {
    expect(fieldOf('jsScript', { type: 'string' }, false)).toMatchObject({ kind: 'text', code: 'javascript', multiline: true, wide: true });
    expect(fieldOf('filter', { type: 'string', contentMediaType: 'application/javascript' }, false)).toMatchObject({ code: 'javascript' });
    expect(fieldOf('expr', { type: 'string', format: 'javascript' }, false)).toMatchObject({ code: 'javascript' });
    expect(fieldOf('script', { type: 'string' }, false)).not.toHaveProperty('code');
  });

  it('labels from the title first, then the hint, then the name', () => {
    expect(fieldOf('maxStep', { type: 'integer', title: 'Steps' }, false, { maxStep: { label: 'Max steps' } }).label).toBe('Steps');
    expect(fieldOf('maxStep', { type: 'integer' }, false, { maxStep: { label: 'Max steps' } }).label).toBe('Max steps');
    expect(['maxToolOutputLength', 'max_tokens', 'topP', 'URL', 'baseURL'].map(humanize)).toEqual(['Max tool output length', 'Max tokens', 'Top p', 'URL', 'Base URL']);
    // Abbreviations spelt as words in camelCase are written as people write them.
    expect(['restEndpointUrlPattern', 'jsScript', 'targetId', 'idle', 'jsonPath'].map(humanize)).toEqual(['Rest endpoint URL pattern', 'JS script', 'Target ID', 'Idle', 'JSON path']);
  });

  it('nests objects with their ids and required keys', () => {
    const f = fieldOf('outer', { type: 'object', required: ['a'], properties: { a: { type: 'string' }, b: { type: 'object', properties: { c: { type: 'boolean' } } } } }, false);
    expect(f.kind === 'object' && f.open).toBe(false);
    expect(fieldIds([f])).toEqual(['outer', 'outer.a', 'outer.b', 'outer.b.c']);
    expect(f.kind === 'object' && f.fields.map((x) => [x.id, x.required])).toEqual([
      ['outer.a', true],
      ['outer.b', false],
    ]);
  });

  it('pictures what a JSON box expects', () => {
    expect(shapeOf(AI_AGENT.properties!.tools!)).toBe('[{type?, name?, description?, targetId?, timeout?}]');
    expect(shapeOf(AI_AGENT.properties!.failover!)).toBe('[{provider?, model?, params?}]');
    expect(shapeOf({ type: 'object', required: ['url'], properties: { url: { type: 'string' } }, additionalProperties: true })).toBe('{url, …}');
    expect(shapeOf(param)).toBe('{"key": value, …}');
    expect(shapeOf({})).toBeUndefined();
  });
});

describe('values', () => {
  it('sets a nested value without touching the original, and drops an optional object left empty', () => {
    const config = { maxStep: 5, params: { temperature: 1 } };
    expect(setAt(config, ['params', 'maxTokens'], 100)).toEqual({ maxStep: 5, params: { temperature: 1, maxTokens: 100 } });
    expect(setAt(config, ['params', 'temperature'], undefined)).toEqual({ maxStep: 5 });
    expect(setAt(config, ['maxStep'], undefined)).toEqual({ params: { temperature: 1 } });
    expect(config).toEqual({ maxStep: 5, params: { temperature: 1 } });
  });

  it('splits an object into what its fields edit and the rest', () => {
    const params = byId(fieldsOf(agentConfigSchema(AI_AGENT)), 'params');
    if (params.kind !== 'object') throw new Error('params is an object');
    const value = { temperature: 1, responseFormat: { type: 'json' } };
    expect(extraEntries(params, value)).toEqual({ responseFormat: { type: 'json' } });
    expect(withExtraEntries(params, value, { seed: 7 })).toEqual({ temperature: 1, seed: 7 });
    expect(withExtraEntries(params, { seed: 7 }, {})).toBeUndefined();
  });

  it('reads control text', () => {
    expect([parseNumber(''), parseNumber(' 20 '), parseNumber('0.5'), parseNumber('-1'), parseNumber('many')]).toEqual([undefined, 20, 0.5, -1, 'many']);
    expect(parseLines('a\n\n b \r\nc\n')).toEqual(['a', ' b ', 'c']);
    expect(parseLines('\n')).toBeUndefined();
    expect(parseJsonField('', { type: 'array' })).toEqual({ ok: true, value: undefined });
    expect(parseJsonField('[{"provider":"b"}]', { type: 'array' })).toEqual({ ok: true, value: [{ provider: 'b' }] });
    expect(parseJsonField('{"provider":"b"}', { type: 'array' })).toEqual({ ok: false, problem: 'must be a JSON list: [ ... ]' });
    expect(parseJsonField('[{', { type: 'array' })).toMatchObject({ ok: false, problem: expect.stringMatching(/^not valid JSON: /) });
  });
});

describe("the gateway's 400 at the fields", () => {
  const ids = fieldIds(fieldsOf(agentConfigSchema(AI_AGENT), AGENT_FIELD_HINTS));
  const node = 'metadata.nodes[0] ("node_agent"), ai/agent';

  it('splits only where a problem starts, not at a "; " inside one', () => {
    const message = `${node}: configuration.tools[0].timeout is in milliseconds; 5 ms is too short — did you mean 5000?; ruleChain.name: must be string; (root): must have property metadata`;
    expect(splitProblems(message)).toEqual([`${node}: configuration.tools[0].timeout is in milliseconds; 5 ms is too short — did you mean 5000?`, 'ruleChain.name: must be string', '(root): must have property metadata']);
  });

  it('puts each problem of the agent node at the deepest field its path leads to', () => {
    const message = [
      `${node}: configuration.maxStep: must be >= 1`,
      `${node}: configuration.failover[0].model: must be string`,
      `${node}: configuration.disabledSkills[0]: must be string`,
      `${node}: configuration.params.temperature: must be number`,
      `${node}: configuration.tools[1].timeout is in milliseconds; 5 ms is too short — did you mean 5000?`,
      `${node}: configuration.nope: unknown field`,
      'metadata.nodes[1] ("other"), ai/agent: configuration.maxStep: must be >= 1',
      'metadata.connections[0]: toId "x" is not a node of this chain',
      'ruleChain.name: must not be empty',
    ].join('; ');
    expect(fieldErrorsOf(message, 'node_agent', ids)).toEqual({
      fields: {
        maxStep: 'must be >= 1',
        failover: 'failover[0].model: must be string',
        disabledSkills: 'disabledSkills[0]: must be string',
        'params.temperature': 'must be number',
        tools: 'tools[1].timeout is in milliseconds; 5 ms is too short — did you mean 5000?',
      },
      name: 'must not be empty',
      other: [`${node}: configuration.nope: unknown field`, 'metadata.nodes[1] ("other"), ai/agent: configuration.maxStep: must be >= 1', 'metadata.connections[0]: toId "x" is not a node of this chain'],
    });
  });

  it('finds the field of a path and clears what an edit answers', () => {
    expect(fieldForPath('params.stop[0]', ids)).toBe('params.stop');
    expect(fieldForPath('params.seed', ids)).toBe('params');
    expect(fieldForPath('maxSteps', ids)).toBeUndefined();
    const problems = { maxStep: 'x', params: 'y', 'params.temperature': 'z', tools: 'w' };
    expect(clearProblemsAt(problems, 'params.temperature')).toEqual({ maxStep: 'x', tools: 'w' });
    expect(clearProblemsAt(problems, 'maxStep')).toEqual({ params: 'y', 'params.temperature': 'z', tools: 'w' });
  });
});

describe('tools: built-in checkboxes and the rest', () => {
  const names = ['read', 'bash'];
  const tools = [{ type: 'builtin', name: 'read', timeout: 5000 }, { name: 'bash' }, { type: 'mcp', name: 'gh', config: { url: 'http://x' } }, { type: 'builtin', name: 'retired' }];

  it('keeps the settings of a checked tool and the place of the rest', () => {
    expect(tools.filter((t) => isCheckboxTool(t, names)).map((t) => t.name)).toEqual(['read', 'bash']);
    expect(toggleBuiltin(tools, 'read', true)).toBe(tools);
    expect(toggleBuiltin(tools, 'bash', false).map((t) => t.name)).toEqual(['read', 'gh', 'retired']);
    expect(toggleBuiltin([], 'read', true)).toEqual([{ type: 'builtin', name: 'read' }]);
    expect(withOtherTools(tools, names, [{ type: 'agent', targetId: 'b' }])).toEqual([tools[0], tools[1], { type: 'agent', targetId: 'b' }]);
  });
});
