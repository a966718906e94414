// haproxy's part of the render: the values of haproxy.cfg.template (its origins and resolvers, the
// avatar resolvers, the stats password).
import { socketPaths } from '../resolve.js';
import { statsPassword } from '../secrets.js';
import { hostName } from './nginx.js';

/**
 * haproxy.cfg's values. @param {Record<string, any>} config @returns {Record<string, string>}
 */
export function haproxyValues(config) {
  const named = [...config.ORIGIN_SERVERS, ...config.AVATAR_SERVERS].some(hostName);
  return {
    HAPROXY_STATS_PASSWORD: statsPassword(config),
    HAPROXY_KEEPALIVE_S: String(config.VARNISH_BACKEND_IDLE_S + 10),
    ...haproxyBinds(config),
    HAPROXY_RESOLVERS:
      config.ORIGIN_DISCOVERY || named ? RESOLVERS : '# every server by address: no DNS resolution at run time',
    ...originServers(config),
    AVATAR_SERVER_LINES: servers('resolver', config.AVATAR_SERVERS, 'maxconn 512'),
  };
}

/**
 * haproxy's resolvers: /etc/resolv.conf's nameservers (an answer from any of them counts; haproxy waits for
 * all before it takes a "no such name"), asked again every second. An address gone from the answers is
 * dropped after 5 s: a server by name then moves to its successor's address within seconds (with 30 s, the
 * default, an avatar resolver recreated by compose was asked at its old address for half a minute). A name
 * DNS has no answer for (a name kept in /etc/hosts, which haproxy's resolvers never read; a container
 * between its removal and its successor) or a DNS server that fails keeps the address it had (from libc at
 * start, or DNS since) for an hour, its health checks deciding, instead of being put in maintenance within
 * seconds (with `hold nx 2s`, every origin and resolver of a fleet named in /etc/hosts was, 2 s after start).
 */
const RESOLVERS = [
  'resolvers system',
  '  parse-resolv-conf',
  '  hold valid 5s',
  ...['nx', 'other', 'refused', 'timeout'].map((status) => `  hold ${status} 1h`),
  '  hold obsolete 5s',
  '  accepted_payload_size 8192',
].join('\n');

/**
 * haproxy's server lines of a list. A server given by name follows its address at run time (haproxy's
 * resolvers, /etc/resolv.conf's nameservers; a name that does not resolve at start leaves it down until it
 * does): a container or a Service recreated with a new address is reached at it within seconds, not once
 * haproxy restarts. @param {string} name @param {string[]} list @param {string} extra
 */
function servers(name, list, extra) {
  return list.map((address, i) => `  server ${name}${i + 1} ${address} check ${extra}${followed(address)}`).join('\n');
}

/** @param {string} address */
const followed = (address) => (hostName(address) ? ' resolvers system init-addr libc,none' : '');

/**
 * haproxy's origins: the ORIGIN_SERVERS list (uploads tracking the images backend's health checks), or with
 * ORIGIN_DISCOVERY every address a DNS name resolves to, followed as it changes (a Kubernetes headless
 * Service, compose's origin service: origins scaled up or down join and leave without a reload).
 * @param {Record<string, any>} config
 */
function originServers(config) {
  if (!config.ORIGIN_DISCOVERY) {
    return {
      ORIGIN_SERVER_LINES: servers('origin', config.ORIGIN_SERVERS, `maxconn ${config.HAPROXY_ORIGIN_MAXCONN}`),
      UPLOAD_SERVER_LINES: config.ORIGIN_SERVERS.map(
        (/** @type {string} */ address, /** @type {number} */ i) =>
          `  server origin${i + 1} ${address} track be_images/origin${i + 1} maxconn ${config.HAPROXY_UPLOAD_MAXCONN}${followed(address)}`,
      ).join('\n'),
    };
  }
  const template = (/** @type {string} */ maxconn) =>
    `1-${config.ORIGIN_DISCOVERY_SLOTS} ${config.ORIGIN_DISCOVERY} check resolvers system init-addr none maxconn ${maxconn}`;
  return {
    ORIGIN_SERVER_LINES: `  server-template origin ${template(String(config.HAPROXY_ORIGIN_MAXCONN))}`,
    // uploads' servers check for themselves here (a template cannot track be_images' by slot), as be_images'
    // do: one passed check lets a new origin in, and one that is down is checked every 250 ms, so uploads are
    // taken about as soon as /p/ and /healthz are answered. (A compose stack's first upload after /healthz
    // answered was a 503, twice: a server starts up, and the first check that found the origin not yet
    // listening took uploads' down while be_images' first check came after it listened; uploads then waited
    // for their next check, up to 2 s.)
    UPLOAD_SERVER_LINES: `  server-template origin ${template(String(config.HAPROXY_UPLOAD_MAXCONN))} inter 2s downinter 250ms fall 2 rise 1`,
  };
}

/**
 * Where haproxy's two frontends listen: with INTERNAL_SOCKETS on one machine, Unix sockets in a directory
 * only the edge's group may enter (users.js), so no other local user reaches haproxy past nginx's limits or
 * forges X-Forwarded-For; else TCP on LISTEN_ADDRESS. @param {Record<string, any>} config
 */
export function haproxyBinds(config) {
  if (!config.HAPROXY_SOCKETS) {
    return {
      HAPROXY_IMAGES_BIND: `${config.LISTEN_ADDRESS}:${config.HAPROXY_IMAGES_PORT}`,
      HAPROXY_AVATARS_BIND: `${config.LISTEN_ADDRESS}:${config.HAPROXY_AVATARS_PORT}`,
    };
  }
  const sockets = socketPaths(config.STACK_DIR);
  return {
    HAPROXY_IMAGES_BIND: `unix@${sockets.images} mode 666`,
    HAPROXY_AVATARS_BIND: `unix@${sockets.avatars} mode 666`,
  };
}
