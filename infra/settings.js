// The stack's own settings (ports, sizes, listen addresses of the Debian components), declared once.
// Together with each service's declarations they make `.env.example` and the rendered configs.
import fs from 'node:fs';

/** @type {import('../lib/src/config.js').Setting[]} */
export const stackSettings = [
  {
    name: 'STACK_DIR',
    type: 'string',
    default: '.run',
    doc: 'run directory: rendered configs, logs, pids, data of a native stack (tests use their own)',
  },
  {
    name: 'STACK_USER_PREFIX',
    type: 'string',
    default: 'image-cdn-',
    doc: 'started as root, every program of the native stack runs as its own unprivileged user, this prefix + its role (edge: nginx, varnish, mtail; haproxy; redis; origin; resolver; purge; metrics: prometheus and exporters; s3: versitygw), created by up; empty: as the user that starts the stack',
  },
  {
    name: 'STACK_PROGRAMS',
    type: 'list',
    default: '',
    doc: 'the programs this machine runs, of redis, redis-sentinel, versitygw, origin, avatar-resolver, purge-service, haproxy, varnish, nginx, prometheus, varnish-exporter, nginx-exporter, redis-exporter, mtail, rotate-logs (a fleet: infra/fleet.js); empty: every one but redis-sentinel (versitygw with STORE=s3 and no S3_ENDPOINT)',
  },
  { name: 'LISTEN_ADDRESS', type: 'string', default: '127.0.0.1', doc: 'address every internal component binds to' },
  {
    name: 'VARNISH_HOST',
    type: 'string',
    default: '',
    doc: 'how nginx and the purge service reach varnish; empty: LISTEN_ADDRESS (compose: varnish)',
  },
  {
    name: 'VARNISH_SOCKET',
    type: 'string',
    default: '',
    doc: 'Unix socket varnish listens on for nginx on the same host (about 10% more cache hits/s than loopback TCP); empty: STACK_DIR/run/edge/varnish.sock; off: nginx uses VARNISH_HOST:VARNISH_PORT (compose)',
  },
  {
    name: 'INTERNAL_SOCKETS',
    type: 'bool',
    default: 'true',
    doc: "varnish and nginx reach this machine's haproxy, and haproxy this machine's origin and avatar resolver, over Unix sockets in STACK_DIR/run that only the next hop's user can open, and varnish opens no port where nothing needs one (no EDGE_VARNISH_NODES, VARNISH_PURGERS or PURGE_VARNISH_NODES): a local user cannot reach them past nginx's limits (nor forge X-Forwarded-For to them); it applies where HAPROXY_HOST, ORIGIN_SERVERS and AVATAR_SERVERS are left empty; false: TCP on LISTEN_ADDRESS (compose and the chart, whose containers share no directory)",
  },
  {
    name: 'HAPROXY_HOST',
    type: 'string',
    default: '',
    doc: "how varnish and nginx's upload check reach haproxy; empty: LISTEN_ADDRESS (compose: haproxy). A name is followed: varnish loads its VCL again when its address changes, the upload check resolves it per upload (/etc/hosts first, then DNS)",
  },
  {
    name: 'PURGE_SERVICE_UPSTREAM',
    type: 'string',
    default: '',
    doc: "how nginx reaches the purge service (host:port; a host by name is resolved at run time: /etc/hosts first, then the first nameserver of /etc/resolv.conf, fully qualified); empty: this stack's",
  },
  {
    name: 'NGINX_BIND',
    type: 'string',
    default: '127.0.0.1',
    doc: 'address of the public front (0.0.0.0 to serve the world)',
  },
  { name: 'NGINX_PORT', type: 'int', default: '8080', doc: 'public HTTP port' },
  {
    name: 'NGINX_TLS_PORT',
    type: 'int',
    default: '8443',
    doc: 'public HTTPS (HTTP/2) port, used when a certificate is set',
  },
  { name: 'NGINX_TLS_CERT', type: 'string', default: '', doc: 'PEM certificate chain file; empty: no TLS listener' },
  { name: 'NGINX_TLS_KEY', type: 'string', default: '', doc: 'PEM private key file', secret: true },
  {
    name: 'NGINX_STATUS_PORT',
    type: 'int',
    default: '8089',
    doc: "loopback-only port of nginx's stub_status for the nginx exporter and, with EDGE_VARNISH_NODES, of its checks of the varnish nodes for Prometheus (/edge-nodes: edge_varnish_node_up)",
  },
  {
    name: 'NGINX_WORKER_CONNECTIONS',
    type: 'int',
    default: '8192',
    doc: 'per worker; worker_rlimit_nofile is twice this (client + upstream socket each), so keep 2× under the hard open-files limit',
  },
  {
    name: 'NGINX_TRUSTED_PROXIES',
    type: 'list',
    default: '',
    doc: "ranges whose X-Forwarded-For / CF-Connecting-IP is believed: your CDN's or load balancer's, e.g. Cloudflare's published ranges; empty: none (the public listener is on loopback, where every local user is, so a forged header would pass every per-client limit)",
  },
  {
    name: 'NGINX_SERVER_TIMING',
    type: 'bool',
    default: 'false',
    doc: "pass the services' Server-Timing headers (fetch, transform, lookup times and cache state) to the public; off: kept inside (they tell anyone what is cached)",
  },
  {
    name: 'NGINX_REAL_IP_HEADER',
    type: 'string',
    default: 'X-Forwarded-For',
    doc: 'header carrying the client address from trusted proxies',
    choices: ['X-Forwarded-For', 'CF-Connecting-IP', 'X-Real-IP'],
  },
  {
    name: 'NGINX_CLIENT_HEADER_TIMEOUT_S',
    type: 'int',
    default: '10',
    doc: 'longest a client may take to send its request headers (then the connection is closed)',
    min: 1,
  },
  {
    name: 'NGINX_CLIENT_BODY_TIMEOUT_S',
    type: 'int',
    default: '10',
    doc: 'longest pause between two reads of a request body, and the time an upload body has before NGINX_UPLOAD_MIN_RATE applies (then a JSON 408)',
    min: 1,
  },
  {
    name: 'NGINX_UPLOAD_MIN_RATE',
    type: 'int',
    default: '4096',
    doc: 'bytes a second an upload body must average after its first NGINX_CLIENT_BODY_TIMEOUT_S (slower: a JSON 408 and the connection closed); HTTP/1.x only, nginx reads HTTP/2 bodies itself',
    min: 1,
  },
  {
    name: 'NGINX_UPLOAD_DEADLINE_S',
    type: 'int',
    default: '300',
    doc: 'longest an upload body may take in all (then a JSON 408): 30 MB at 100 KB/s, a slow mobile link',
    min: 1,
  },
  {
    name: 'NGINX_SEND_TIMEOUT_S',
    type: 'int',
    default: '30',
    doc: 'longest pause between two writes to a client that reads slowly (then the connection is closed)',
    min: 1,
  },
  {
    name: 'NGINX_UPLOADS_PER_CLIENT',
    type: 'int',
    default: '4',
    doc: 'uploads one client address may have in progress at once (more: a JSON 429)',
    min: 1,
  },
  {
    name: 'NGINX_UPLOADS_TOTAL',
    type: 'int',
    default: '256',
    doc: 'uploads in progress at once in all (more: a JSON 429); bodies are received whole by nginx before the origin sees them',
    min: 1,
  },
  {
    name: 'NGINX_RATE_LIMIT',
    type: 'int',
    default: '100',
    doc: 'requests per second per client address (429 past the burst)',
    min: 1,
  },
  { name: 'NGINX_RATE_BURST', type: 'int', default: '200', doc: 'burst allowed above the rate', min: 0 },
  {
    name: 'EDGE_VARNISH_NODES',
    type: 'list',
    default: '',
    doc: "a varnish cluster (host:port list) nginx spreads requests over by a consistent hash of the URL, each object cached once; the purge service purges each node (PURGE_VARNISH_NODES follows it); names are resolved when nginx loads its config, and nginx reloads when one's address changes (infra/docker/follow-address.sh starts it: one box, compose, the chart); empty: this stack's varnish over its socket",
  },
  {
    name: 'EDGE_VARNISH_FAIL_TIMEOUT_S',
    type: 'int',
    default: '3',
    doc: 'a varnish node that refused a connection is skipped this long (its share moves to the next node), then tried again',
    min: 1,
  },
  {
    name: 'VARNISH_IDENTITY',
    type: 'string',
    default: '',
    doc: "this varnish node's name, sent as X-Served-By; empty: an opaque name made from hostname:VARNISH_PORT (the host name is not shown)",
  },
  { name: 'VARNISH_PORT', type: 'int', default: '6081', doc: 'varnish HTTP port' },
  { name: 'VARNISH_ADMIN_PORT', type: 'int', default: '6082', doc: 'varnish management port (loopback)' },
  {
    name: 'VARNISH_STORAGE',
    type: 'string',
    default: 'malloc,1G',
    doc: 'varnish storage (-s), e.g. malloc,4G or file,/var/cache/varnish.bin,50G',
  },
  {
    name: 'VARNISH_TRANSIENT',
    type: 'string',
    default: '128M',
    doc: 'bound of the Transient storage (passes, short-lived objects)',
  },
  {
    name: 'VARNISH_IDLE_S',
    type: 'int',
    default: '10',
    doc: "how long varnish keeps a kept-alive connection from nginx open with no request (varnishd timeout_idle); nginx drops its own idle ones to varnish 2 s sooner, so it never sends a request on one varnish is closing (an upload sent there would be nginx's 502: it does not resend a POST); the purge service drops its own after 4 s",
    min: 6,
  },
  {
    name: 'VARNISH_BACKEND_IDLE_S',
    type: 'int',
    default: '50',
    doc: 'how long varnish keeps an idle kept-alive connection to haproxy (varnishd backend_idle_timeout); haproxy keeps its end 10 s longer (timeout http-keep-alive), so varnish closes first and never sends on one haproxy is closing',
    min: 1,
  },
  {
    name: 'VARNISH_UPLOAD_RETRY_BYTES',
    type: 'bytes',
    default: '10mb',
    doc: "uploads up to this size are kept whole in varnish's Transient storage while in flight, so that one whose connection to haproxy ends before any answer (a kept-alive connection haproxy closed as varnish sent on it: its idle timeout, a reload, a restart) is sent once more instead of answered 503; never past half of Transient; larger ones stream through and are not resent; 0: none kept",
    min: 0,
  },
  {
    name: 'VARNISH_MISS_LIMIT',
    type: 'int',
    default: '120',
    doc: '/p/ cache misses one client may cause in VARNISH_MISS_PERIOD_S (then a JSON 429): each costs the origin a fetch and a transform; behind a CDN, list its ranges in NGINX_TRUSTED_PROXIES or every visitor is one client; 0: no limit',
    min: 0,
  },
  { name: 'VARNISH_MISS_PERIOD_S', type: 'int', default: '10', doc: 'the window of VARNISH_MISS_LIMIT', min: 1 },
  {
    name: 'VARNISH_GRACE_HEALTHY_S',
    type: 'int',
    default: '10',
    doc: 'how long past its TTL varnish still answers with an object while its service is healthy, fetching a fresh one in the background (a purge ends it at once)',
    min: 0,
  },
  {
    name: 'VARNISH_GRACE_SICK_S',
    type: 'int',
    default: '86400',
    doc: 'how long past its TTL an object is kept, and answered while its service is down (varnish probes it through haproxy) instead of a 503: the stack stays up when the origin is not',
    min: 0,
  },
  {
    name: 'VARNISH_PURGERS',
    type: 'list',
    default: '',
    doc: "addresses allowed to PURGE, xkey-purge and BAN over TCP: a cluster's purge services (EDGE_VARNISH_NODES), compose's or a pod network; empty: none (this stack's purge service purges on varnish's purge socket, which checks that its peer runs as the purge service's user, so no local user can purge)",
  },
  { name: 'HAPROXY_IMAGES_PORT', type: 'int', default: '8081', doc: 'haproxy frontend for images (fe_images)' },
  { name: 'HAPROXY_AVATARS_PORT', type: 'int', default: '8082', doc: 'haproxy frontend for avatars (fe_avatars)' },
  {
    name: 'HAPROXY_STATS_BIND',
    type: 'string',
    default: '127.0.0.1',
    doc: 'address of the stats page and haproxy metrics',
  },
  {
    name: 'HAPROXY_STATS_PORT',
    type: 'int',
    default: '8404',
    doc: 'stats page (/stats) and Prometheus exporter (/metrics)',
  },
  { name: 'HAPROXY_STATS_USER', type: 'string', default: 'admin', doc: 'stats page user' },
  {
    name: 'HAPROXY_STATS_PASSWORD',
    type: 'string',
    default: '',
    doc: 'stats page password; empty: one is generated into STACK_DIR/secrets',
    secret: true,
  },
  {
    name: 'ORIGIN_SERVERS',
    type: 'list',
    default: '',
    doc: "origin servers haproxy balances (host:port list; a host by name is resolved again at run time, fully qualified: haproxy's resolvers know no search domains); empty: this stack's origin",
  },
  {
    name: 'AVATAR_SERVERS',
    type: 'list',
    default: '',
    doc: "avatar resolvers haproxy balances (host:port list; a host by name is resolved again at run time, fully qualified); empty: this stack's resolver",
  },
  {
    name: 'ORIGIN_DISCOVERY',
    type: 'string',
    default: '',
    doc: 'host:port of a DNS name resolving to every origin (a Kubernetes headless Service): haproxy follows its addresses as they change, up to ORIGIN_DISCOVERY_SLOTS origins, instead of ORIGIN_SERVERS; empty: ORIGIN_SERVERS',
  },
  {
    name: 'ORIGIN_DISCOVERY_SLOTS',
    type: 'int',
    default: '32',
    doc: 'most origins haproxy takes from ORIGIN_DISCOVERY',
    min: 1,
  },
  {
    name: 'HAPROXY_ORIGIN_MAXCONN',
    type: 'int',
    default: '0',
    doc: "connections per origin server; 0: transform slots + the transforms that may wait (TRANSFORM_QUEUE_MAX) + 32 (the origin's own queue decides: small first, degrade, fast 503)",
    min: 0,
  },
  {
    name: 'HAPROXY_UPLOAD_MAXCONN',
    type: 'int',
    default: '32',
    doc: "uploads in progress per origin server (past it they wait in haproxy's queue, then a 503): uploads never hold the connections images need",
    min: 1,
  },
  {
    name: 'HAPROXY_SERVER_TIMEOUT_S',
    type: 'int',
    default: '60',
    doc: "longest haproxy waits for a service's answer (then a JSON 504)",
    min: 1,
  },
  {
    name: 'HAPROXY_QUEUE_TIMEOUT_MS',
    type: 'int',
    default: '5000',
    doc: "longest wait in haproxy's queue before a 503",
    min: 1,
  },
  { name: 'REDIS_PORT', type: 'int', default: '6379', doc: 'redis port of the native stack' },
  {
    name: 'REDIS_REPLICA_OF',
    type: 'string',
    default: '',
    doc: "host:port of the Redis master this machine's Redis starts as a replica of (the sentinels then manage who is master); empty: a master",
  },
  {
    name: 'REDIS_SENTINEL_PORT',
    type: 'int',
    default: '26379',
    doc: "port of this machine's Redis Sentinel (when STACK_PROGRAMS has redis-sentinel)",
  },
  {
    name: 'REDIS_SENTINEL_MONITOR',
    type: 'string',
    default: '',
    doc: "host:port of the master the sentinel watches first (it follows failovers from there); empty: REDIS_REPLICA_OF, else this machine's Redis",
  },
  {
    name: 'REDIS_SENTINEL_QUORUM',
    type: 'int',
    default: '2',
    doc: 'sentinels that must agree the master is down before a failover (a majority of them)',
    min: 1,
  },
  {
    name: 'REDIS_ACL_PASSWORDS',
    type: 'list',
    default: '',
    doc: "passwords of this Redis' ACL users, user=password (origin, resolver, purge, exporter), for a layout that hands them out itself (the chart: a Secret of its own); empty: each derived from REDIS_PASSWORD",
    secret: true,
  },
  {
    name: 'REDIS_MAXMEMORY',
    type: 'string',
    default: '512mb',
    doc: 'redis memory bound (only keys with a TTL, the caches, are evicted)',
  },
  {
    name: 'S3_PORT',
    type: 'int',
    default: '7070',
    doc: 'port of the embedded S3 server (versitygw), started when STORE=s3 and S3_ENDPOINT is empty',
  },
  { name: 'PROMETHEUS_PORT', type: 'int', default: '9090', doc: 'Prometheus UI and API' },
  {
    name: 'PROMETHEUS_SCRAPE',
    type: 'list',
    default: '',
    doc: "scrape targets as job=host:port (jobs: haproxy, varnish, nginx, edge-nodes, redis, mtail, origin, avatar-resolver, purge-service); a job named here is scraped at these targets only (several origins, compose's exporter containers; edge-nodes: nginx's status port, where nginx reports its checks of a varnish cluster, a job only with EDGE_VARNISH_NODES or named here); empty: every job on this stack's addresses",
  },
  { name: 'PROMETHEUS_RETENTION', type: 'string', default: '15d', doc: 'Prometheus retention' },
  { name: 'VARNISH_EXPORTER_PORT', type: 'int', default: '9131', doc: 'prometheus-varnish-exporter port' },
  { name: 'NGINX_EXPORTER_PORT', type: 'int', default: '9113', doc: 'prometheus-nginx-exporter port' },
  { name: 'REDIS_EXPORTER_PORT', type: 'int', default: '9121', doc: 'prometheus-redis-exporter port' },
  {
    name: 'MTAIL_PORT',
    type: 'int',
    default: '3903',
    doc: 'mtail (edge latency histograms from the nginx access log)',
  },
  {
    name: 'NGINX_LOG_MAX_BYTES',
    type: 'bytes',
    default: '256mb',
    doc: "nginx's access and error logs are rotated past this size (supervisord rotates every other log)",
  },
  { name: 'NGINX_LOG_KEEP', type: 'int', default: '4', doc: 'rotated nginx logs kept (.1 … .N)', min: 1 },
  { name: 'NGINX_LOG_CHECK_S', type: 'int', default: '30', doc: 'how often the nginx log sizes are checked', min: 1 },
  { name: 'GRAFANA_PORT', type: 'int', default: '3000', doc: 'Grafana (compose only)' },
];

/** Every declared setting of the stack, section by section. */
export async function allSections() {
  const sections = [['stack', stackSettings]];
  for (const service of ['origin', 'avatar-resolver', 'purge-service']) {
    // an image that leaves a service out has no settings of it; a service whose declarations are here is
    // always read (a missing npm module is an error, never a shorter list: a misspelt setting would then be
    // matched against the stack's settings alone, ORIGN_PORT taken for NGINX_PORT)
    const file = new URL(`../${service}/src/config.js`, import.meta.url);
    if (!fs.existsSync(file)) continue;
    const module = await import(file.href);
    sections.push([service, module.settings]);
  }
  return /** @type {Array<[string, import('../lib/src/config.js').Setting[]]>} */ (sections);
}

/** Every setting once (shared ones appear in several services' lists). */
export async function allSettings() {
  /** @type {Map<string, import('../lib/src/config.js').Setting>} */
  const byName = new Map();
  for (const [, settings] of await allSections())
    for (const setting of settings) if (!byName.has(setting.name)) byName.set(setting.name, setting);
  return [...byName.values()];
}
