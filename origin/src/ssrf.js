import dns from 'node:dns';
import ipaddr from 'ipaddr.js';

/**
 * Is this address one a proxy fetch must never reach? Only global unicast passes: loopback, private,
 * link-local (the cloud metadata address included), CGNAT, multicast, reserved, and IPv6 forms that embed
 * an IPv4 address (mapped, NAT64, 6to4, Teredo) are judged by the address they carry.
 * @param {string} address a textual IP address
 */
export function isForbiddenAddress(address) {
  if (!ipaddr.isValid(address)) return true;
  let parsed = ipaddr.parse(address);
  if (parsed.kind() === 'ipv6') {
    const v6 = /** @type {ipaddr.IPv6} */ (parsed);
    if (v6.isIPv4MappedAddress()) parsed = v6.toIPv4Address();
    else if (['rfc6052', '6to4', 'teredo', 'rfc6145'].includes(v6.range())) return true;
  }
  return parsed.range() !== 'unicast';
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
        const refusal = Object.assign(new Error(`forbidden address ${bad?.address} for ${hostname}`), { code: 'EFORBIDDEN' });
        return callback(refusal, '', 0);
      }
      if (/** @type {any} */ (options).all) return callback(null, /** @type {any} */ (list));
      return callback(null, list[0].address, list[0].family);
    });
  };
}
