import dns from 'node:dns';
import ipaddr from 'ipaddr.js';

/** Global unicast IPv6 (2000::/3): every other IPv6 address is refused outright. */
const GLOBAL_V6 = ipaddr.parseCIDR('2000::/3');

/**
 * Is this address one a proxy fetch must never reach? Only global unicast passes: loopback, private,
 * link-local (the cloud metadata address included), CGNAT, multicast, reserved. IPv6 passes only within
 * 2000::/3; an IPv4-mapped address is judged by the address it carries, and every other form that embeds
 * one (IPv4-compatible ::a.b.c.d, NAT64 64:ff9b::/96 and 64:ff9b:1::/48, 6to4, Teredo, SIIT) is refused.
 * @param {string} address a textual IP address
 */
export function isForbiddenAddress(address) {
  if (!ipaddr.isValid(address)) return true;
  const parsed = ipaddr.parse(address);
  if (parsed.kind() === 'ipv4') return parsed.range() !== 'unicast';
  // in hex first: ipaddr reads a dotted tail (::8.8.8.8, IPv4-compatible) as if it were IPv4-mapped
  const hex = new URL(`http://[${address}]/`).hostname.slice(1, -1);
  if (hex !== address) return isForbiddenAddress(hex);
  const v6 = /** @type {ipaddr.IPv6} */ (parsed);
  if (v6.isIPv4MappedAddress()) return isForbiddenAddress(v6.toIPv4Address().toString());
  if (!v6.match(GLOBAL_V6)) return true;
  return v6.range() !== 'unicast' || ['rfc6052', '6to4', 'teredo', 'rfc6145'].includes(v6.range());
}

/** @param {string} hostname URL hostname, maybe a bracketed IPv6 literal */
export function bareHost(hostname) {
  return hostname.replace(/^\[|\]$/g, '');
}

/**
 * A dns lookup for sockets that refuses forbidden addresses at connect time (so a DNS answer that changes
 * between check and connect cannot slip through), unless the host is explicitly allowed.
 * @param {Set<string>} allowedHosts
 * @returns {import('node:net').LookupFunction}
 */
export function safeLookup(allowedHosts) {
  return (hostname, options, callback) => {
    dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, '', 0);
      const list = /** @type {dns.LookupAddress[]} */ (addresses);
      const allowed = allowedHosts.has(hostname);
      const bad = list.find((entry) => !allowed && isForbiddenAddress(entry.address));
      if (bad || list.length === 0) {
        const refusal = Object.assign(new Error(`forbidden address ${bad?.address} for ${hostname}`), {
          code: 'EFORBIDDEN',
        });
        return callback(refusal, '', 0);
      }
      if (/** @type {any} */ (options).all) return callback(null, /** @type {any} */ (list));
      return callback(null, list[0].address, list[0].family);
    });
  };
}
