import { describe, expect, it } from 'vitest';
import { findAdminOnlySetting } from '../src/auth/auth.js';

/** The scan behind "only an admin may open private networks or give bash" (e2e: e2e/security.test.ts). */
describe('findAdminOnlySetting', () => {
  it('finds an opener at any depth, in objects and arrays, and ignores closed values', () => {
    const tool = (config: unknown) => ({ metadata: { nodes: [{ configuration: { tools: [{ name: 'x' }, { config }] } }] } });
    expect(findAdminOnlySetting(tool({ allowHosts: ['10.0.0.1'] }))).toBe('allowHosts');
    expect(findAdminOnlySetting(tool({ allowPrivateNetworks: true }))).toBe('allowPrivateNetworks');
    expect(findAdminOnlySetting(tool({ allowNetwork: true }))).toBe('allowNetwork');
    expect(findAdminOnlySetting(tool({ allowHosts: [], allowPrivateNetworks: false, allowNetwork: false }))).toBeUndefined();
    expect(findAdminOnlySetting('allowHosts')).toBeUndefined();
    expect(findAdminOnlySetting(undefined)).toBeUndefined();
  });

  it('finds a builtin bash tool entry in any spelling, and leaves other tools and mere mentions alone', () => {
    const tools = (...entries: unknown[]) => ({ metadata: { nodes: [{ configuration: { tools: entries } }] } });
    expect(findAdminOnlySetting(tools({ type: 'builtin', name: 'bash' }))).toBe('bash');
    expect(findAdminOnlySetting(tools({ name: 'bash', config: { sandbox: 'bwrap' } }))).toBe('bash');
    expect(findAdminOnlySetting(tools({ type: 'builtin', name: ' BASH ' }))).toBe('bash');
    expect(findAdminOnlySetting(tools({ type: 'builtin', name: 'read' }, { type: 'mcp', name: 'bash' }))).toBeUndefined();
    expect(findAdminOnlySetting(tools({ name: 'read', description: 'bash' }))).toBeUndefined();
  });

  it('walks 10,000-deep nesting without recursion, and refuses a body too large to check rather than pass it', () => {
    let deep: unknown = { allowPrivateNetworks: true };
    for (let i = 0; i < 10_000; i++) deep = [deep];
    expect(findAdminOnlySetting(deep)).toBe('allowPrivateNetworks');
    // Stack order: the first element is looked at last, behind the mass.
    const hidden = [{ allowHosts: ['169.254.169.254'] }, ...Array.from({ length: 250_000 }, () => [])];
    expect(findAdminOnlySetting(hidden)).toBe('too complex');
    expect(findAdminOnlySetting(Array.from({ length: 250_000 }, () => 1))).toBeUndefined();
  });
});
