// nginx's part of the render: the values of nginx.conf.template and upload-body.lua.template, and the TLS
// files it reads.
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { makeDir } from '../dirs.js';
import { socketPaths } from '../resolve.js';
import { usableCores } from '../../lib/src/cores.js';

/**
 * nginx.conf's values. @param {Record<string, any>} config @param {{ CONF_DIR: string }} dirs
 * @returns {Record<string, string>}
 */
export function nginxValues(config, { CONF_DIR }) {
  // nginx reads the certificate and key as the edge user: from copies in conf/tls (copyTls)
  const tlsDir = path.join(CONF_DIR, 'tls');
  const tls =
    config.NGINX_TLS_CERT && config.NGINX_TLS_KEY
      ? `listen ${config.NGINX_BIND}:${config.NGINX_TLS_PORT} ssl http2;\n    ssl_certificate ${tlsDir}/cert.pem;\n    ssl_certificate_key ${tlsDir}/key.pem;\n    ssl_protocols TLSv1.2 TLSv1.3;\n    ssl_session_cache shared:tls:10m;`
      : '# no TLS certificate configured (NGINX_TLS_CERT, NGINX_TLS_KEY)';
  return {
    NGINX_CLIENT_MAX_BODY: String(config.UPLOAD_MAX_BYTES + 64 * 1024),
    // each layer waits a little longer than the one inside it, which so answers first, cleanly
    NGINX_PROXY_READ_TIMEOUT_S: String(config.HAPROXY_SERVER_TIMEOUT_S + 4),
    NGINX_RLIMIT_NOFILE: String(config.NGINX_WORKER_CONNECTIONS * 2),
    // one worker per core this machine's programs may use: nginx's `auto` counts the CPUs online, not the
    // affinity nor a container's quota (a pod limited to 2 of 64 cores ran 64 workers)
    NGINX_WORKER_PROCESSES: String(usableCores()),
    NGINX_REAL_IP_LINES: config.NGINX_TRUSTED_PROXIES.map(
      (/** @type {string} */ range) => `  set_real_ip_from ${range};`,
    ).join('\n'),
    NGINX_TLS: tls,
    NGINX_SERVER_TIMING: config.NGINX_SERVER_TIMING
      ? '# Server-Timing passed to the public (NGINX_SERVER_TIMING)'
      : 'proxy_hide_header Server-Timing;',
    NGINX_ERROR_PAGES: nginxErrorPages(),
    // names to resolve at run time: haproxy's (the upload check), a cluster's varnish nodes (their checks), the
    // purge service's (its route)
    NGINX_RESOLVER: nginxResolver([
      config.HAPROXY_HOST,
      ...config.EDGE_VARNISH_NODES.map((/** @type {string} */ node) => nodeHost(node)),
      ...[hostName(config.PURGE_SERVICE_UPSTREAM)].filter(Boolean),
    ]),
    ...purgeServiceRoute(config.PURGE_SERVICE_UPSTREAM),
    // the Lua upload check asks the origin through haproxy's images frontend: its socket on one machine
    NGINX_UPLOAD_CHECK_ADDRESS: config.HAPROXY_SOCKETS
      ? `"unix:${socketPaths(config.STACK_DIR).images}"`
      : `${luaHost(config.HAPROXY_HOST)}, ${config.HAPROXY_IMAGES_PORT}`,
  };
}

/**
 * Every status nginx answers on its own (not an upstream's answer, which passes as it is), each in the JSON
 * error shape of every other layer, with the request id and `no-store` (they are about a request or a
 * connection, not a resource). [statuses nginx makes, status sent, name, extra headers]
 * @type {Array<[number[], number, string, Record<string, string>?]>}
 */
export const NGINX_ERRORS = [
  [[400], 400, 'bad_request'],
  [[401], 401, 'unauthorized'],
  [[403], 403, 'forbidden'],
  [[404], 404, 'not_found'],
  [[405], 405, 'method_not_allowed', { Allow: '"GET, HEAD, POST"' }],
  [[408], 408, 'request_timeout'],
  [[411], 411, 'length_required'],
  [[413], 413, 'payload_too_large'],
  [[414], 414, 'uri_too_long'],
  [[416], 416, 'range_not_satisfiable'],
  [[429], 429, 'too_many_requests', { 'Retry-After': '1' }],
  // nginx's "Request Header Or Cookie Too Large"
  [[494], 431, 'request_header_too_large'],
  // TLS: a bad or missing client certificate, plain HTTP sent to the TLS port
  [[495, 496], 400, 'bad_client_certificate'],
  [[497], 400, 'http_request_to_https_port'],
  [[500], 500, 'internal_error'],
  [[501], 501, 'not_implemented'],
  // varnish or the purge service unreachable, or too slow
  [[502, 503, 504], 503, 'service_unavailable', { 'Retry-After': '5' }],
  [[505], 505, 'http_version_not_supported'],
  [[507], 507, 'insufficient_storage'],
];

/**
 * nginx's resolver, for the names it asks at run time (the upload check's haproxy, the purge service, a
 * cluster's varnish nodes: compose's services, the chart's Services): the first nameserver of the resolv.conf
 * the render step sees, which is nginx's (same container network or pod), the one libc asks first. Only the
 * first: nginx asks its nameservers in turn and takes a "no such name" as the answer, and Podman lists the
 * host's nameservers after its network's own, which know none of its containers' names (an upload check or a
 * webhook would fail whenever nginx asked the host's). Answers kept 5 s: a container recreated with a new
 * address is reached at it within seconds. Addresses need none. @param {string[]} hosts
 */
function nginxResolver(hosts) {
  if (hosts.every((host) => net.isIP(host))) return '# every host by address: no resolver needed';
  const server = fs.existsSync('/etc/resolv.conf')
    ? /^\s*nameserver\s+(\S+)/m.exec(fs.readFileSync('/etc/resolv.conf', 'utf8'))?.[1]
    : undefined;
  if (!server) return '# no nameserver in /etc/resolv.conf';
  return `resolver ${net.isIPv6(server) ? `[${server}]` : server} valid=5s;`;
}

/**
 * How nginx reaches the purge service (its webhooks' route): an upstream with kept-alive connections when it
 * is an address or a socket; by name, the name resolved at run time (a proxy_pass to a variable): by
 * /etc/hosts (nginx/hosts.lua), else through nginx's resolver, so a purge service recreated with a new
 * address (compose's container after an upgrade, a machine's name moved in /etc/hosts) is reached at it, not
 * at the address nginx saw when it loaded its config. @param {string} upstream
 */
function purgeServiceRoute(upstream) {
  const host = hostName(upstream);
  if (!host)
    return {
      NGINX_PURGE_UPSTREAM: `upstream purge_service {\n    server ${upstream};\n    keepalive 8;\n  }`,
      NGINX_PURGE_PASS: 'proxy_pass http://purge_service;',
    };
  return {
    NGINX_PURGE_UPSTREAM: `# the purge service by name (${host}): resolved at run time, in its route`,
    NGINX_PURGE_PASS: [
      `set_by_lua_block $purge_service { return require("hosts").upstream("${host}", "${hostAndPort(upstream).port}") }`,
      'proxy_pass http://$purge_service;',
      `proxy_set_header Host "${upstream}";`,
    ].join('\n      '),
  };
}

/** nginx's error_page lines and the internal locations that answer them. */
function nginxErrorPages() {
  return NGINX_ERRORS.map(([codes, status, name, headers]) => {
    const info = status === 503 ? '{"layer":"nginx"}' : '{}';
    const extra =
      Object.entries(headers || {})
        .map(([header, value]) => `\n      add_header ${header} ${value} always;`)
        .join('') +
      // a 408 (upload-body.lua: a body too slow) leaves the rest of the body unread: close, after a short
      // lingering close that drains what is in flight so the client reads the answer, not a reset
      (status === 408 ? '\n      keepalive_timeout 0;\n      lingering_close always;\n      lingering_time 2s;' : '');
    return `    error_page ${codes.join(' ')} =${status} /.errors/${name};
    location = /.errors/${name} {
      internal;
      default_type application/json;
      add_header X-Request-Id $request_id always;
      add_header Cache-Control no-store always;${extra}
      return ${status} '{"error":{"name":"${name}","info":${info}}}';
    }`;
  }).join('\n');
}

/**
 * A node's host and port as nginx's consistent hash splits them: the port after the last colon (an IPv6
 * host keeps its brackets). @param {string} node
 */
function hostAndPort(node) {
  const colon = node.lastIndexOf(':');
  return colon === -1 ? { host: node, port: '' } : { host: node.slice(0, colon), port: node.slice(colon + 1) };
}

/** A node's host name or address as a resolver takes it (an IPv6 address without its brackets). @param {string} node */
export const nodeHost = (node) => hostAndPort(node).host.replace(/^\[|\]$/g, '');

/**
 * A host as a Lua cosocket's connect takes it: an address as it is; a name looked up per call, /etc/hosts
 * first (nginx/hosts.lua), then nginx's resolver. @param {string} host
 */
const luaHost = (host) => (hostName(host) ? `require("hosts").address("${host}")` : `"${host}"`);

/**
 * The host name a host:port (or a host alone) names, to be resolved at run time; '' for an address (an IPv6
 * one with or without brackets) or a Unix socket (nginx's `unix:…`, haproxy's `unix@…`). @param {string} address
 */
export function hostName(address) {
  if (/^unix[:@]/.test(address) || net.isIP(address)) return '';
  const host = nodeHost(address);
  return net.isIP(host) ? '' : host;
}

/**
 * nginx's way to varnish: this stack's own node, or with EDGE_VARNISH_NODES a cluster, each URL on one node by
 * a consistent hash (nginx's `hash … consistent`, each object cached once in the cluster). A node that refuses
 * is skipped for `fail_timeout`, its share going to the next node on the ring and nothing else moving; one
 * that stops answering is taken out by nginx's own checks of the nodes (nginx/edge-nodes.lua.template), which
 * hash a key that moves its URLs. Returns the templates' values: the upstream block, the line that sets the
 * key, the http block's Lua lines, the status port's report of the nodes, and the node list in Lua.
 * @param {Record<string, any>} config @param {string} local
 * @returns {Record<string, string>}
 */
export function nginxVarnishServers(config, local) {
  /** @param {string[]} lines */
  const upstream = (lines) =>
    [
      '  upstream varnish {',
      ...lines.map((line) => `    ${line};`),
      '    keepalive 128;',
      '    keepalive_requests 100000;',
      // dropped before varnish's timeout_idle ends it: never a request sent on one varnish is closing
      `    keepalive_timeout ${config.VARNISH_IDLE_S - 2}s;`,
      '  }',
    ].join('\n');
  const nodes = /** @type {string[]} */ (config.EDGE_VARNISH_NODES);
  if (!nodes.length)
    return {
      NGINX_VARNISH_UPSTREAMS: upstream([`server ${local}`]),
      NGINX_EDGE_NODES_HTTP: "# one varnish node, this stack's own",
      NGINX_VARNISH_KEY: '# one varnish node: no choice to make',
      NGINX_EDGE_NODES_STATUS: '# one varnish node: no node checks to report',
      EDGE_NODES_LUA: '',
    };
  const lua = nodes.map((node) => {
    const { host, port } = hostAndPort(node);
    return `  { address = "${node}", host = "${host}", port = "${port}" },`;
  });
  return {
    NGINX_VARNISH_UPSTREAMS: upstream([
      'hash $edge_key consistent',
      ...nodes.map((node) => `server ${node} max_fails=1 fail_timeout=${config.EDGE_VARNISH_FAIL_TIMEOUT_S}s`),
    ]),
    NGINX_EDGE_NODES_HTTP: [
      '# the varnish nodes: which are in (nginx/edge_nodes.lua checks them), read by every worker',
      '  lua_shared_dict edge_nodes 64k;',
      '  init_worker_by_lua_block { require("edge_nodes").start() }',
    ].join('\n'),
    NGINX_VARNISH_KEY: 'set_by_lua_block $edge_key { return require("edge_nodes").key(ngx.var.request_uri) }',
    // for Prometheus (its edge-nodes job): which nodes nginx's checks have in and out
    NGINX_EDGE_NODES_STATUS: 'location = /edge-nodes { content_by_lua_block { require("edge_nodes").metrics() } }',
    EDGE_NODES_LUA: lua.join('\n'),
  };
}

/**
 * The TLS certificate and key, copied where nginx reads them as the edge user (the key 0600, the edge's:
 * the originals may stay root's, e.g. certbot's). `up` copies them again, so a renewed certificate takes
 * effect with the next start (or a render and nginx -s reload).
 * @param {Record<string, any>} config @param {string} confDir
 */
export function copyTls(config, confDir) {
  if (!config.NGINX_TLS_CERT || !config.NGINX_TLS_KEY) return;
  const dir = path.join(confDir, 'tls');
  makeDir(dir, 0o755);
  fs.copyFileSync(config.NGINX_TLS_CERT, path.join(dir, 'cert.pem'));
  fs.chmodSync(path.join(dir, 'cert.pem'), 0o644);
  fs.writeFileSync(path.join(dir, 'key.pem'), fs.readFileSync(config.NGINX_TLS_KEY), { mode: 0o600 });
  fs.chmodSync(path.join(dir, 'key.pem'), 0o600);
}
