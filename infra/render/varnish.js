// varnish's part of the render: the values of default.vcl.template, sizes.vcl.template and
// limits.vcl.template, and how nginx reaches it.
import os from 'node:os';
import { allowedSizeList } from '../../lib/src/sizes.js';
import { socketPaths } from '../resolve.js';
import { stackUsers } from '../users.js';
import { nginxVarnishServers } from './nginx.js';

/**
 * The VCL's values. @param {Record<string, any>} config
 * @returns {Record<string, string>}
 */
export function varnishValues(config) {
  return {
    VARNISH_PURGERS_ACL: config.VARNISH_PURGERS.map((/** @type {string} */ address) => `  "${address}";`).join('\n'),
    // each layer waits a little longer than the one inside it, which so answers first, cleanly
    VARNISH_FIRST_BYTE_TIMEOUT_S: String(config.HAPROXY_SERVER_TIMEOUT_S + 2),
    ...varnishSocket(config),
    // the management port on loopback only; on the machine's own loopback address where it has one (the
    // fleet's machines on 127.0.x.y), so stacks on one host never compete for one port of 127.0.0.1
    VARNISH_ADMIN_LISTEN: `${config.LISTEN_ADDRESS.startsWith('127.') ? config.LISTEN_ADDRESS : '127.0.0.1'}:${config.VARNISH_ADMIN_PORT}`,
    VARNISH_SIZE_LINES: varnishSizes(config),
    ...haproxyAddresses(config),
  };
}

/**
 * How varnish reaches haproxy's two frontends: their Unix sockets on one machine (INTERNAL_SOCKETS), else
 * HAPROXY_HOST and their ports. @param {Record<string, any>} config
 */
function haproxyAddresses(config) {
  const address = (/** @type {'images' | 'avatars'} */ frontend, /** @type {number} */ port) =>
    config.HAPROXY_SOCKETS
      ? `  .path = "${socketPaths(config.STACK_DIR)[frontend]}";`
      : `  .host = "${config.HAPROXY_HOST}";\n  .port = "${port}";`;
  return {
    VARNISH_IMAGES_ADDRESS: address('images', config.HAPROXY_IMAGES_PORT),
    VARNISH_AVATARS_ADDRESS: address('avatars', config.HAPROXY_AVATARS_PORT),
  };
}

/**
 * VCL that rewrites `width` and `height` in a /p/ URL to the size the origin makes (canonicalSize in
 * origin/src/options.js): at most MAX_DIMENSION (a number too long for an integer is past it too), then
 * with ALLOWED_SIZES the next listed size up, the largest past them all.
 * @param {Record<string, any>} config
 */
export function varnishSizes(config) {
  const cap = config.MAX_DIMENSION;
  const allowed = allowedSizeList(config.ALLOWED_SIZES, cap);
  const snap = allowed
    .map(
      (/** @type {number} */ size, /** @type {number} */ i) =>
        `${i ? ' elsif' : '    if'} (std.integer(req.http.X-Size, 0) <= ${size}) {\n      set req.http.X-Size = "${size}";\n    }`,
    )
    .join('');
  return ['width', 'height']
    .map((name) =>
      [
        `  if (req.url ~ "[?&]${name}=[0-9]") {`,
        `    set req.http.X-Size = regsub(req.url, "^.*?[?&]${name}=([0-9]+).*$", "\\1");`,
        `    if (req.http.X-Size ~ "^[0-9]{10,}$" || std.integer(req.http.X-Size, 0) > ${cap}) {`,
        `      set req.http.X-Size = "${cap}";`,
        '    }',
        ...(allowed.length
          ? [`${snap} else {\n      set req.http.X-Size = "${allowed[allowed.length - 1]}";\n    }`]
          : []),
        `    set req.url = regsub(req.url, "([?&]${name}=)[0-9]+", "\\1" + req.http.X-Size);`,
        '    unset req.http.X-Size;',
        '  }',
      ].join('\n'),
    )
    .join('\n');
}

/**
 * nginx reaches a co-located varnish over a Unix socket (no TCP stack on either side of the hottest hop);
 * varnish keeps its TCP port only for a cluster's nodes and purges over TCP (VARNISH_TCP). Requests on the
 * socket have no client address (0.0.0.0), so they can never pass the purgers ACL.
 * @param {Record<string, any>} config
 */
function varnishSocket(config) {
  // VARNISH_SOCKET is resolved to its path (resolve.js) unless off
  const socket = config.VARNISH_SOCKET;
  if (config.VARNISH_SOCKET === 'off') {
    return {
      VARNISH_LISTEN: `-a ${config.LISTEN_ADDRESS}:${config.VARNISH_PORT}`,
      ...nginxVarnishServers(config, `${config.VARNISH_HOST}:${config.VARNISH_PORT}`),
      VARNISH_PURGE_USER: '',
    };
  }
  // nginx and varnish run as the same user (the edge's): nobody else reaches the socket. The purge socket
  // is open to all, and varnish refuses every purge on it whose peer is not the purge service's user
  // (vcl default.vcl.template): purging needs no address in VARNISH_PURGERS, which any local user could use
  const purge = socketPaths(config.STACK_DIR).purge;
  const users = stackUsers(config);
  return {
    // its port only where something needs it (VARNISH_TCP, resolve.js): the sockets come first, the edge's
    // socket is varnish's first listener
    VARNISH_LISTEN: [
      `-a ${socket},mode=0600 -a purge=${purge},mode=0666`,
      ...(config.VARNISH_TCP ? [`-a ${config.LISTEN_ADDRESS}:${config.VARNISH_PORT}`] : []),
    ].join(' '),
    ...nginxVarnishServers(config, `unix:${socket}`),
    VARNISH_PURGE_USER: users ? users.purge.name : os.userInfo().username,
  };
}
