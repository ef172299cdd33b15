import { describe, expect, it } from 'vitest';
import JSZip from 'jszip';
import { builtinTools, nodeTypes } from '../src/index.js';
import { builtinToolSpecs, ChainCache, agentTemplate, ancestorPaths, defaultWorkspaceFiles, normaliseWorkspacePath, parseSkillMarkdown, readSkillArchive, nodeSpecs, readZipDirectory, validateRuleChain, type StoredChain } from '@agentry/definitions';

const chain = (id: string, nodes: Array<{ id: string; type: string; configuration?: Record<string, unknown> }>, connections: Array<{ fromId: string; toId: string; type: string }> = []) => ({
  ruleChain: { id, name: `Chain ${id}` },
  metadata: { nodes, connections },
});

describe('validateRuleChain', () => {
  it('accepts a valid chain and the agent template', () => {
    expect(validateRuleChain(chain('c', [{ id: 'a', type: 'log' }, { id: 'b', type: 'end' }], [{ fromId: 'a', toId: 'b', type: 'Success' }]))).toEqual({ ok: true, errors: [], warnings: [] });
    expect(validateRuleChain(agentTemplate({ defaultProvider: '' }), { requireAgent: true }).ok).toBe(true);
  });

  it('names every problem at once', () => {
    const result = validateRuleChain({
      ruleChain: { id: 'c', name: 'n' },
      metadata: {
        firstNodeIndex: 9,
        nodes: [
          { id: 'a', type: 'log', configuration: { jsScript: 5 } },
          { id: 'a', type: 'end' },
          { id: 'z', type: 'nope' },
        ],
        connections: [{ fromId: 'a', toId: 'q', type: 'Success' }],
      },
    }, { requireAgent: true });
    expect(result.ok).toBe(false);
    expect(result.errors).toEqual([
      'metadata.nodes[0] ("a"), log: configuration.jsScript: must be string',
      'metadata.nodes[1] ("a"): duplicate node id "a"',
      expect.stringMatching(/^metadata\.nodes\[2\] \("z"\): unknown node type "nope" \(known: ai\/agent, /),
      'metadata.connections[0]: toId "q" is not a node of this chain',
      'metadata.firstNodeIndex: 9 is out of range (the chain has 3 nodes)',
      'metadata.nodes: an agent needs a node of type "ai/agent"',
    ]);
  });

  it('reports shape errors with dotted paths, and unknown top-level fields', () => {
    expect(validateRuleChain({ ruleChain: { id: 'bad id', name: 'n' }, metadata: { nodes: [], connections: [] }, extra: 1 }).errors).toEqual([
      'unknown field "extra"',
      'ruleChain.id: must match pattern "^[A-Za-z0-9_-]{1,64}$"',
    ]);
    expect(validateRuleChain(null).ok).toBe(false);
  });

  it('refuses a tools[].timeout under 1000: it is milliseconds, and a small number is seconds by mistake', () => {
    const agent = (tools: unknown[]) => chain('a', [{ id: 'agent', type: 'ai/agent', configuration: { tools } }]);
    expect(validateRuleChain(agent([{ name: 'read', timeout: 1000 }, { name: 'bash', timeout: 120000 }, { name: 'grep' }]))).toEqual({ ok: true, errors: [], warnings: [] });
    expect(validateRuleChain(agent([{ name: 'read', timeout: 5000 }, { name: 'bash', timeout: 30 }])).errors).toEqual([
      'metadata.nodes[0] ("agent"), ai/agent: configuration.tools[1].timeout is in milliseconds; 30 ms is too short — did you mean 30000?',
    ]);
    // Zero, negative or fractional values are the schema's to refuse.
    expect(validateRuleChain(agent([{ name: 'read', timeout: 0 }])).errors).toEqual([
      'metadata.nodes[0] ("agent"), ai/agent: configuration.tools[0].timeout: must be >= 1',
    ]);
  });

  it('refuses an unknown configuration field in every node type, naming it, with a hint for the usual mistakes', () => {
    const agent = (configuration: Record<string, unknown>) => chain('a', [{ id: 'n1', type: 'ai/agent', configuration }]);
    expect(validateRuleChain(agent({ tools: [{ type: 'builtin', name: 'read', parameters: {} }] })).errors).toEqual([
      expect.stringMatching(/^metadata\.nodes\[0\] \("n1"\), ai\/agent: configuration\.tools\[0\]: unknown field "parameters" \(did you mean config\.parameters\?/),
    ]);
    expect(validateRuleChain(agent({ prompt: 'hi' })).errors).toEqual([expect.stringMatching(/configuration: unknown field "prompt" \(.*systemPrompt/)]);
    expect(validateRuleChain(agent({ maxSteps: 3 })).errors).toEqual([expect.stringMatching(/configuration: unknown field "maxSteps" \(.*maxStep/)]);
    // Every other node type is closed too: a field none of them has is named.
    for (const type of Object.keys(nodeTypes).filter((t) => t !== 'ai/agent')) {
      const errors = validateRuleChain(chain('c', [{ id: 'x', type, configuration: { surelyNotAField: 1 } }])).errors;
      expect(errors, type).toContainEqual(expect.stringContaining(`${type}: configuration: unknown field "surelyNotAField"`));
    }
  });

  it('fieldValidation: unknown configuration fields are errors (Strict, the default), warnings (Warn) or nothing (Ignore); other problems stay errors', () => {
    const dsl = chain('c', [{ id: 'd', type: 'delay', configuration: { delayMs: 0, period: 500, tools: 1 } }]);
    const period = 'metadata.nodes[0] ("d"), delay: configuration: unknown field "period" (did you mean delayMs? RuleGo has no "period" and would not delay at all)';
    const tools = 'metadata.nodes[0] ("d"), delay: configuration: unknown field "tools"';
    expect(validateRuleChain(dsl)).toEqual({ ok: false, errors: [period, tools], warnings: [] });
    expect(validateRuleChain(dsl, { fieldValidation: 'Strict' })).toEqual({ ok: false, errors: [period, tools], warnings: [] });
    expect(validateRuleChain(dsl, { fieldValidation: 'Warn' })).toEqual({ ok: true, errors: [], warnings: [period, tools] });
    expect(validateRuleChain(dsl, { fieldValidation: 'Ignore' })).toEqual({ ok: true, errors: [], warnings: [] });
    // The type's own checks still run beside an unknown field, and a wrong type is an error in every mode.
    const wrong = chain('c', [{ id: 'd', type: 'delay', configuration: { overwrite: true, period: 500 } }, { id: 'e', type: 'log', configuration: { jsScript: 1, x: 1 } }]);
    expect(validateRuleChain(wrong, { fieldValidation: 'Ignore' }).errors).toEqual([
      'metadata.nodes[0] ("d"), delay: configuration.overwrite: true is not supported: each run delays its own message, none is shared to overwrite',
      'metadata.nodes[1] ("e"), log: configuration.jsScript: must be string',
    ]);
    // Nested objects too: a tool entry's unknown field warns, with its hint.
    const agentChain = chain('a', [{ id: 'n1', type: 'ai/agent', configuration: { tools: [{ type: 'builtin', name: 'read', parameters: {} }] } }]);
    expect(validateRuleChain(agentChain, { fieldValidation: 'Warn' }).warnings).toEqual([expect.stringMatching(/configuration\.tools\[0\]: unknown field "parameters" \(did you mean config\.parameters\?/)]);
    // The top level of the DSL is not a node configuration: an unknown field there is an error whatever the mode.
    expect(validateRuleChain({ ruleChain: { id: 'c', name: 'n' }, metadata: { nodes: [], connections: [] }, extra: 1 }, { fieldValidation: 'Ignore' }).errors).toEqual(['unknown field "extra"']);
  });

  it("a node type named like an Object property (toString, constructor, __proto__) is unknown, not Object's own", () => {
    for (const type of ['toString', 'constructor', '__proto__', 'hasOwnProperty']) {
      const result = validateRuleChain(chain('c', [{ id: 'n', type }]));
      expect(result.ok, type).toBe(false);
      expect(result.ok ? [] : result.errors, type).toEqual([expect.stringContaining(`unknown node type "${type}"`)]);
    }
  });

  it('registers the node types of the first engine issue and the RuleGo ones chains commonly use', () => {
    expect(Object.keys(nodeTypes).sort()).toEqual(
      [
        ...['ai/agent', 'ai/llm', 'end', 'flow', 'jsFilter', 'jsSwitch', 'jsTransform', 'log', 'restApiCall'],
        ...['delay', 'exprFilter', 'exprTransform', 'fork', 'groupFilter', 'join', 'msgTypeSwitch', 'switch'],
        ...['comment', 'fieldFilter', 'metadataTransform'],
      ].sort(),
    );
  });
});

describe('ChainCache', () => {
  const stored = (id: string, version: number, ok = true): StoredChain => ({
    id,
    version,
    dsl: chain(id, [{ id: 'n', type: ok ? 'end' : 'missing' }]),
  });

  it('parses once per version, keeps failures with their message, and forgets on invalidate', () => {
    const cache = new ChainCache();
    expect(cache.status('a')).toEqual({ state: 'unloaded' });
    const first = cache.admit(stored('a', 1));
    expect(first.ok).toBe(true);
    expect(cache.admit(stored('a', 1))).toBe(first);
    expect(cache.status('a')).toEqual({ state: 'loaded' });
    expect(cache.admit(stored('a', 2, false))).toEqual({ ok: false, error: expect.stringMatching(/unknown node type "missing"/) });
    expect(cache.status('a')).toEqual({ state: 'error', error: expect.stringMatching(/missing/) });
    expect(cache.invalidate('a')).toBe(true);
    expect(cache.status('a')).toEqual({ state: 'unloaded' });
  });

  it('loads through its source once, and drops a load that an invalidation overtook', async () => {
    let calls = 0;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const cache = new ChainCache(async (id) => {
      calls += 1;
      await gate;
      return id === 'missing' ? undefined : stored(id, 1);
    });
    const a = cache.get('a');
    const b = cache.get('a');
    cache.invalidate('a');
    release();
    expect((await a)?.ok).toBe(true);
    expect((await b)?.ok).toBe(true);
    expect(calls).toBe(1);
    expect(cache.status('a')).toEqual({ state: 'unloaded' });
    expect((await cache.get('a'))?.ok).toBe(true);
    expect(cache.status('a')).toEqual({ state: 'loaded' });
    expect(await cache.get('missing')).toBeUndefined();
  });

  it('gives a parsed chain its nodes, start and outgoing connections', () => {
    const result = new ChainCache().admit({ id: 'p', dsl: chain('p', [{ id: 'x', type: 'log' }, { id: 'y', type: 'end' }], [{ fromId: 'x', toId: 'y', type: 'Success' }]) });
    if (!result.ok) throw new Error(result.error);
    expect(result.chain.firstNodeId).toBe('x');
    expect(result.chain.outgoing.get('x')?.map((c) => c.toId)).toEqual(['y']);
    expect(result.chain.nodes.size).toBe(2);
  });
});

describe('template', () => {
  it('uses the default provider when there is one and seeds AGENTS.md', () => {
    const dsl = agentTemplate({ defaultProvider: 'p1', id: 'helper', name: 'Helper' });
    expect(dsl.metadata.nodes[0]?.configuration?.provider).toBe('p1');
    expect(agentTemplate({ defaultProvider: '' }).metadata.nodes[0]?.configuration).not.toHaveProperty('provider');
    const [file] = defaultWorkspaceFiles(dsl);
    expect(file?.path).toBe('AGENTS.md');
    expect(file?.content).toMatch(/^# Helper\n/);
  });
});

describe('workspace paths', () => {
  it.each([
    ['', ''],
    ['/', ''],
    ['a/./b', 'a/b'],
    ['/a//b/', 'a/b'],
    ['a/x/../b', 'a/b'],
    ['./a', 'a'],
    ['A\u030A/\u212B', '\u00C5/\u00C5'],
  ])('%j -> %j', (input, output) => {
    expect(normaliseWorkspacePath(input)).toBe(output);
  });

  it.each(['..', 'a/../..', '/../x', 'a\\b', 'a\u0000b', `${'x'.repeat(256)}`, 'a\u202Eb', 'a\u2069b', 'a\u200Eb', 'a\u061Cb', 'a\tb', 'a\u007Fb', 'a\u009Bb', 'a\u2028b'])('refuses %j', (input) => {
    expect(() => normaliseWorkspacePath(input)).toThrow(/^(path|Invalid input)/);
  });

  it('lists ancestors outermost first', () => {
    expect(ancestorPaths('a/b/c')).toEqual(['a', 'a/b']);
    expect(ancestorPaths('a')).toEqual([]);
  });
});

describe('skills', () => {
  it('parses front matter (name, description) and keeps the body', () => {
    expect(parseSkillMarkdown('---\nname: x\ndescription: Does x\nother: 1\n---\n\n# X\nbody')).toEqual({ name: 'x', description: 'Does x', body: '# X\nbody' });
    expect(parseSkillMarkdown('\uFEFF---\r\nname: y\r\n---\r\nbody')).toEqual({ name: 'y', body: 'body' });
    expect(parseSkillMarkdown('# No front matter')).toEqual({ body: '# No front matter' });
    expect(parseSkillMarkdown('---\n---\nempty')).toEqual({ body: 'empty' });
    expect(() => parseSkillMarkdown('---\n- a list\n---\nx')).toThrow(/not a YAML mapping/);
    expect(() => parseSkillMarkdown('---\nname: [1, 2]\n---\nx')).toThrow(/"name" is not a string/);
  });

  it('reads the central directory of a jszip archive', async () => {
    const zip = new JSZip();
    zip.file('a/SKILL.md', 'x'.repeat(100));
    zip.folder('empty');
    const data = await zip.generateAsync({ type: 'uint8array', compression: 'DEFLATE' });
    const entries = readZipDirectory(data, 10);
    expect(entries.map((e) => [e.name, e.isDir, e.uncompressedSize])).toEqual([
      ['a/', true, 0],
      ['a/SKILL.md', false, 100],
      ['empty/', true, 0],
    ]);
    expect(() => readZipDirectory(data, 2)).toThrow(/more than 2 entries|3 entries/);
  });

  it('reads skills from an archive', async () => {
    const zip = new JSZip();
    zip.file('one/SKILL.md', '---\ndescription: First\n---\nbody one');
    zip.file('two.md', 'body two');
    zip.file('two/SKILL.md', 'dup');
    const result = await readSkillArchive(await zip.generateAsync({ type: 'uint8array' }));
    expect(result.skills.map((s) => [s.name, s.description, s.content])).toEqual([
      ['one', 'First', 'body one'],
      ['two', '', 'body two'],
    ]);
    expect(result.skipped).toEqual([{ entry: 'two/SKILL.md', reason: 'duplicate skill name "two"' }]);
  });
});

describe('the engine implements what definitions specify', () => {
  it('a node type for every node spec, and no other', () => {
    expect(Object.keys(nodeTypes).sort()).toEqual(Object.keys(nodeSpecs).sort());
    for (const [type, spec] of Object.entries(nodeSpecs)) expect(nodeTypes[type]?.configuration).toBe(spec.configuration);
  });

  it('a built-in tool for every tool spec, and no other', () => {
    expect(Object.keys(builtinTools).sort()).toEqual(Object.keys(builtinToolSpecs).sort());
    for (const [name, spec] of Object.entries(builtinToolSpecs)) expect(builtinTools[name]?.parameters).toBe(spec.parameters);
  });
});
