import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';

/**
 * The outbound-address policy of tools (`http_fetch`): only public addresses, unless the tool's
 * configuration allows private networks or names the host. Private means loopback, RFC 1918,
 * carrier-grade NAT, link-local, unique-local, multicast, reserved and unspecified addresses,
 * including those written as IPv4-mapped, IPv4-compatible, NAT64 or 6to4 IPv6 addresses.
 *
 * The check runs twice: before the request (`assertPublicAddress`: scheme, literal addresses, a
 * DNS lookup for a clear early error) and at connect time (`policyLookup`, the `lookup` of the
 * socket), so a name that resolves differently the second time (DNS rebinding) is refused too.
 */

export interface AddressPolicy {
  /** Allows every address (a trusted deployment reaching its own network). */
  allowPrivateNetworks?: boolean;
  /** Host names or literal addresses allowed whatever they resolve to; `*.example.com` matches subdomains. */
  allowHosts?: readonly string[];
}

export class AddressNotAllowedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'AddressNotAllowedError';
  }
}

const IPV4_BLOCKED: ReadonlyArray<readonly [number, number, string]> = [
  [0x00000000, 8, 'unspecified ("this network")'],
  [0x0a000000, 8, 'private (10/8)'],
  [0x64400000, 10, 'carrier-grade NAT (100.64/10)'],
  [0x7f000000, 8, 'loopback'],
  [0xa9fe0000, 16, 'link-local'],
  [0xac100000, 12, 'private (172.16/12)'],
  [0xc0000000, 24, 'IETF protocol assignments (192.0.0/24)'],
  [0xc0000200, 24, 'documentation (192.0.2/24)'],
  [0xc0a80000, 16, 'private (192.168/16)'],
  [0xc6120000, 15, 'benchmarking (198.18/15)'],
  [0xc6336400, 24, 'documentation (198.51.100/24)'],
  [0xcb007100, 24, 'documentation (203.0.113/24)'],
  [0xe0000000, 4, 'multicast'],
  [0xf0000000, 4, 'reserved (240/4, broadcast)'],
];

function parseIpv4(text: string): number | undefined {
  const parts = text.split('.');
  if (parts.length !== 4) return undefined;
  let value = 0;
  for (const p of parts) {
    if (!/^\d{1,3}$/.test(p) || Number(p) > 255) return undefined;
    value = value * 256 + Number(p);
  }
  return value >>> 0;
}

function ipv4Reason(value: number): string | undefined {
  for (const [base, bits, reason] of IPV4_BLOCKED) {
    const mask = bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0;
    if (((value & mask) >>> 0) === base) return reason;
  }
  return undefined;
}

/** The 8 groups of an IPv6 address (a trailing dotted quad allowed), or undefined. */
function parseIpv6(text: string): number[] | undefined {
  let s = text.toLowerCase();
  const zone = s.indexOf('%');
  if (zone >= 0) s = s.slice(0, zone);
  const lastColon = s.lastIndexOf(':');
  if (s.slice(lastColon + 1).includes('.')) {
    const v4 = parseIpv4(s.slice(lastColon + 1));
    if (v4 === undefined) return undefined;
    s = `${s.slice(0, lastColon + 1)}${(v4 >>> 16).toString(16)}:${(v4 & 0xffff).toString(16)}`;
  }
  const halves = s.split('::');
  if (halves.length > 2) return undefined;
  const group = (h: string) => (h === '' ? [] : h.split(':'));
  const head = group(halves[0] ?? '');
  const rest = halves.length === 2 ? group(halves[1] ?? '') : [];
  const parse = (g: string) => (/^[0-9a-f]{1,4}$/.test(g) ? parseInt(g, 16) : NaN);
  const groups = head.map(parse);
  const after = rest.map(parse);
  if (groups.some(Number.isNaN) || after.some(Number.isNaN)) return undefined;
  const missing = 8 - groups.length - after.length;
  if (halves.length === 2 ? missing < 1 : missing !== 0) return undefined;
  return [...groups, ...new Array<number>(missing).fill(0), ...after];
}

function ipv6Reason(g: number[]): string | undefined {
  const [g0 = 0, g1 = 0, g2 = 0, g3 = 0, g4 = 0, g5 = 0, g6 = 0, g7 = 0] = g;
  const embedded = ((g6 << 16) | g7) >>> 0;
  const zeroTo = (n: number) => g.slice(0, n).every((x) => x === 0);
  if (zeroTo(8)) return 'unspecified';
  if (zeroTo(7) && g7 === 1) return 'loopback';
  // The IPv6 spellings of an IPv4 address (mapped ::ffff:0:0/96, translated ::ffff:0:0:0/96, NAT64
  // 64:ff9b::/96 and its local-use 64:ff9b:1::/48) and Teredo (2001::/32) reach addresses the
  // policy cannot see through them (issue 35): none is public, whatever it embeds.
  if (zeroTo(5) && g5 === 0xffff) return `IPv4-mapped ${ipv4Reason(embedded) ?? 'address'}`;
  if (zeroTo(4) && g4 === 0xffff && g5 === 0) return 'IPv4-translated';
  if (g0 === 0x64 && g1 === 0xff9b && g2 === 1) return 'local-use NAT64';
  if (g0 === 0x2001 && g1 === 0) return 'Teredo';
  if (zeroTo(6)) {
    const r = ipv4Reason(embedded);
    return r && `IPv4-compatible ${r}`;
  }
  if (g0 === 0x64 && g1 === 0xff9b && g2 === 0 && g3 === 0 && g4 === 0 && g5 === 0) return `NAT64 ${ipv4Reason(embedded) ?? 'address'}`;
  if (g0 === 0x2002) {
    const r = ipv4Reason(((g1 << 16) | g2) >>> 0);
    return r && `6to4 ${r}`;
  }
  if ((g0 & 0xffc0) === 0xfe80) return 'link-local';
  if ((g0 & 0xffc0) === 0xfec0) return 'site-local';
  if ((g0 & 0xfe00) === 0xfc00) return 'unique-local';
  if ((g0 & 0xff00) === 0xff00) return 'multicast';
  if (g0 === 0x2001 && g1 === 0x0db8) return 'documentation';
  if (g0 === 0x0100 && g1 === 0 && g2 === 0 && g3 === 0) return 'discard-only';
  return undefined;
}

/**
 * Why an address is not public (`'loopback'`, `'IPv4-mapped private (10/8)'`, ...), or undefined
 * for a public one. Anything that is not an IP address is treated as not public.
 */
export function nonPublicReason(address: string): string | undefined {
  const bare = address.startsWith('[') && address.endsWith(']') ? address.slice(1, -1) : address;
  const kind = isIP(bare.split('%')[0] ?? '');
  if (kind === 4) {
    const v4 = parseIpv4(bare);
    return v4 === undefined ? 'not an address' : ipv4Reason(v4);
  }
  if (kind === 6) {
    const v6 = parseIpv6(bare);
    return v6 === undefined ? 'not an address' : ipv6Reason(v6);
  }
  return 'not an address';
}

export function isPublicAddress(address: string): boolean {
  return nonPublicReason(address) === undefined;
}

function hostAllowed(host: string, policy: AddressPolicy): boolean {
  const h = host.toLowerCase().replace(/^\[|\]$/g, '').replace(/\.$/, '');
  return (policy.allowHosts ?? []).some((raw) => {
    const allowed = raw.toLowerCase().replace(/^\[|\]$/g, '').replace(/\.$/, '');
    if (allowed.startsWith('*.')) return h.endsWith(allowed.slice(1)) && h.length > allowed.length - 1;
    return h === allowed;
  });
}

/** The URL parsed, or an error naming what is wrong: only http and https, no credentials in the URL. */
function parseOutboundUrl(input: string | URL): URL {
  let url: URL;
  try {
    url = new URL(input);
  } catch {
    throw new AddressNotAllowedError(`"${String(input)}" is not a valid URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new AddressNotAllowedError(`only http and https URLs are allowed, not ${url.protocol.replace(/:$/, '')}`);
  }
  return url;
}

function lookupAll(host: string): Promise<LookupAddress[]> {
  return new Promise((resolve, reject) => {
    dnsLookup(host, { all: true, verbatim: true }, (err, addresses) => (err ? reject(err) : resolve(addresses)));
  });
}

/**
 * Throws AddressNotAllowedError unless `url` is http(s) and its host is public (every address
 * it resolves to), allowed by `allowHosts`, or `allowPrivateNetworks` is set. A name that does
 * not resolve is refused too (the message says so).
 */
export async function assertPublicAddress(input: string | URL, policy: AddressPolicy = {}): Promise<URL> {
  const url = parseOutboundUrl(input);
  if (policy.allowPrivateNetworks || hostAllowed(url.hostname, policy)) return url;
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (isIP(host)) {
    const reason = nonPublicReason(host);
    if (reason) throw new AddressNotAllowedError(`${host} is a ${reason} address; outbound requests go to public addresses only`);
    return url;
  }
  let addresses: LookupAddress[];
  try {
    addresses = await lookupAll(host);
  } catch (err) {
    throw new AddressNotAllowedError(`cannot resolve "${host}": ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  for (const a of addresses) {
    const reason = nonPublicReason(a.address);
    if (reason) throw new AddressNotAllowedError(`"${host}" resolves to ${a.address}, a ${reason} address; outbound requests go to public addresses only`);
  }
  return url;
}

/**
 * A socket `lookup` that resolves like the default one and then refuses non-public addresses
 * (hosts in `allowHosts` and `allowPrivateNetworks` excepted): the connect-time half of the policy.
 */
export function policyLookup(policy: AddressPolicy = {}): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true, verbatim: true }, (err, addresses) => {
      if (err) return callback(err, '', 0);
      const list = addresses as LookupAddress[];
      if (!policy.allowPrivateNetworks && !hostAllowed(hostname, policy)) {
        for (const a of list) {
          const reason = nonPublicReason(a.address);
          if (reason) {
            return callback(
              new AddressNotAllowedError(`"${hostname}" resolves to ${a.address}, a ${reason} address; outbound requests go to public addresses only`),
              '',
              0,
            );
          }
        }
      }
      if (options.all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, list);
      const first = list[0];
      if (!first) return callback(Object.assign(new Error(`no address for "${hostname}"`), { code: 'ENOTFOUND' }), '', 0);
      return callback(null, first.address, first.family);
    });
  };
}
