// haproxy's part of the render: the values of haproxy.cfg.template (its origins and resolvers, the
// avatar resolvers, the stats password).
import { socketPaths } from '../resolve.js';
import { statsPassword } from '../secrets.js';

/**
 * haproxy.cfg's values. @param {Record<string, any>} config @returns {Record<string, string>}
 */
export function haproxyValues(config) {
  const servers = (/** @type {string} */ name, /** @type {string[]} */ list, /** @type {string} */ extra) =>
    list.map((address, i) => `  server ${name}${i + 1} ${address} check ${extra}`).join('\n');
  return {
    HAPROXY_STATS_PASSWORD: statsPassword(config),
    ...haproxyBinds(config),
    ...originServers(config, servers),
    AVATAR_SERVER_LINES: servers('resolver', config.AVATAR_SERVERS, 'maxconn 512'),
  };
}

/**
 * haproxy's origins: the ORIGIN_SERVERS list (uploads tracking the images backend's health checks), or with
 * ORIGIN_DISCOVERY every address a DNS name resolves to, followed as it changes (a Kubernetes headless
 * Service: origins scaled up or down join and leave without a reload), through the resolvers of
 * /etc/resolv.conf.
 * @param {Record<string, any>} config @param {(name: string, list: string[], extra: string) => string} servers
 */
function originServers(config, servers) {
  if (!config.ORIGIN_DISCOVERY) {
    return {
      HAPROXY_RESOLVERS: '# origins by address (ORIGIN_SERVERS): no DNS resolution at run time',
      ORIGIN_SERVER_LINES: servers('origin', config.ORIGIN_SERVERS, `maxconn ${config.HAPROXY_ORIGIN_MAXCONN}`),
      UPLOAD_SERVER_LINES: config.ORIGIN_SERVERS.map(
        (/** @type {string} */ address, /** @type {number} */ i) =>
          `  server origin${i + 1} ${address} track be_images/origin${i + 1} maxconn ${config.HAPROXY_UPLOAD_MAXCONN}`,
      ).join('\n'),
    };
  }
  const template = (/** @type {string} */ maxconn) =>
    `1-${config.ORIGIN_DISCOVERY_SLOTS} ${config.ORIGIN_DISCOVERY} check resolvers system init-addr none maxconn ${maxconn}`;
  return {
    HAPROXY_RESOLVERS:
      'resolvers system\n  parse-resolv-conf\n  hold valid 5s\n  hold obsolete 30s\n  accepted_payload_size 8192',
    ORIGIN_SERVER_LINES: `  server-template origin ${template(String(config.HAPROXY_ORIGIN_MAXCONN))}`,
    UPLOAD_SERVER_LINES: `  server-template origin ${template(String(config.HAPROXY_UPLOAD_MAXCONN))}`,
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
