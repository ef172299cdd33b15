import ipaddr from 'ipaddr.js';

/**
 * CIDR lists for `security.allowFrom` (ipaddr.js: the parser fastify's proxy-addr already uses
 * for `trust_proxy`, so both read addresses the same way). An entry is a CIDR (`10.0.0.0/8`,
 * `fd00::/8`) or a single address (`203.0.113.7`, `::1`). IPv4 is written in four-part
 * decimal only: ipaddr.js also takes `10.1` or `0x0a.0.0.1`, spellings that hide what they allow.
 */

type Range = [ipaddr.IPv4 | ipaddr.IPv6, number];

/** An IPv4-mapped IPv6 address (`::ffff:1.2.3.4`) becomes the IPv4 address it carries. */
function unmap(range: Range): Range {
  const [addr, bits] = range;
  if (addr.kind() === 'ipv6' && (addr as ipaddr.IPv6).isIPv4MappedAddress() && bits >= 96) return [(addr as ipaddr.IPv6).toIPv4Address(), bits - 96];
  return range;
}

/** The entry as a range, or undefined when it is neither a CIDR nor an address. */
function parseEntry(entry: string): Range | undefined {
  const text = entry.trim();
  if (text.includes('/')) {
    if (ipaddr.IPv4.isValidCIDRFourPartDecimal(text)) return ipaddr.IPv4.parseCIDR(text);
    return text.includes(':') && ipaddr.IPv6.isValidCIDR(text) ? unmap(ipaddr.IPv6.parseCIDR(text)) : undefined;
  }
  if (ipaddr.IPv4.isValidFourPartDecimal(text)) return [ipaddr.IPv4.parse(text), 32];
  if (text.includes(':') && ipaddr.IPv6.isValid(text)) return unmap([ipaddr.IPv6.parse(text), 128]);
  return undefined;
}

/** The entries of `list` that are not CIDRs or addresses, as written. */
export function invalidCidrs(list: readonly string[]): string[] {
  return list.filter((entry) => parseEntry(entry) === undefined);
}

/** A parsed allow-list; an empty one allows every address. */
export class AddressList {
  readonly #ranges: Range[];

  constructor(readonly entries: readonly string[]) {
    const bad = invalidCidrs(entries);
    if (bad.length > 0) throw new Error(`not CIDRs or addresses: ${bad.join(', ')}`);
    this.#ranges = entries.map((e) => parseEntry(e)!);
  }

  get empty(): boolean {
    return this.#ranges.length === 0;
  }

  /** Whether `address` (as Node or fastify gives it: IPv4, IPv6, or IPv4-mapped IPv6) is allowed. */
  allows(address: string): boolean {
    if (this.empty) return true;
    // Node reports an IPv6 link-local peer with its zone (`fe80::1%eth0`); the zone is not part of a range.
    const bare = address.replace(/%.*$/, '');
    if (!ipaddr.isValid(bare)) return false;
    const addr = ipaddr.process(bare);
    return this.#ranges.some(([net, bits]) => net.kind() === addr.kind() && addr.match(net, bits));
  }
}
