import { describe, expect, it } from 'vitest';
import { findNetworkOpener } from '../src/auth/auth.js';

/** The scan behind "only an admin may open private networks" (e2e: e2e/security.test.ts). */
describe('findNetworkOpener', () => {
  it('finds an opener at any depth, in objects and arrays, and ignores closed values', () => {
    const tool = (config: unknown) => ({ metadata: { nodes: [{ configuration: { tools: [{ name: 'x' }, { config }] } }] } });
    expect(findNetworkOpener(tool({ allowHosts: ['10.0.0.1'] }))).toBe('allowHosts');
    expect(findNetworkOpener(tool({ allowPrivateNetworks: true }))).toBe('allowPrivateNetworks');
    expect(findNetworkOpener(tool({ allowNetwork: true }))).toBe('allowNetwork');
    expect(findNetworkOpener(tool({ allowHosts: [], allowPrivateNetworks: false, allowNetwork: false }))).toBeUndefined();
    expect(findNetworkOpener('allowHosts')).toBeUndefined();
    expect(findNetworkOpener(undefined)).toBeUndefined();
  });

  it('walks 10,000-deep nesting without recursion, and refuses a body too large to check rather than pass it', () => {
    let deep: unknown = { allowPrivateNetworks: true };
    for (let i = 0; i < 10_000; i++) deep = [deep];
    expect(findNetworkOpener(deep)).toBe('allowPrivateNetworks');
    // Stack order: the first element is looked at last, behind the mass.
    const hidden = [{ allowHosts: ['169.254.169.254'] }, ...Array.from({ length: 250_000 }, () => [])];
    expect(findNetworkOpener(hidden)).toBe('too complex');
    expect(findNetworkOpener(Array.from({ length: 250_000 }, () => 1))).toBeUndefined();
  });
});
