// Renders every component's config from the one set of settings into $STACK_DIR/conf, and writes
// $STACK_DIR/env (every setting resolved, for the processes). Prints STACK_DIR.
//   node infra/render.js                 render, print STACK_DIR
//   node infra/render.js --dir-only      print STACK_DIR only
//   node infra/render.js --check-prometheus   render into a temp dir and run promtool on it
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { loadConfig, refuseUnknown } from '../lib/src/config.js';
import { allowedSizeList } from '../lib/src/sizes.js';
import { makeDir, repairSharedRoot } from './dirs.js';
import { embeddedS3Credentials, ownsRedis, redisAclLines, redisPassword, secretNames, sentinelAclLines, shellLines, statsPassword, writeSecrets } from './secrets.js';
import { allSettings } from './settings.js';

export const ROOT = path.resolve(import.meta.dirname, '..');

/** KEY=value lines of a .env file (no shell expansion). @param {string} file */
export function readEnvFile(file) {
  /** @type {Record<string, string>} */
  const values = {};
  if (!fs.existsSync(file)) return values;
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    const match = /^\s*([A-Z][A-Z0-9_]*)\s*=\s*(.*?)\s*$/.exec(line);
    if (match) values[match[1]] = match[2].replace(/^(['"])(.*)\1$/, '$2');
  }
  return values;
}

/** What else an .env may name: the compose file's own variables and the SDKs' (read outside the settings). */
const FILE_ONLY = ['NGINX_PUBLISH', 'GRAFANA_ADMIN_PASSWORD', 'S3_BUCKET', 'AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_SESSION_TOKEN', 'AWS_REGION', 'AWS_PROFILE']
  .map((name) => ({ name, type: /** @type {const} */ ('string'), default: '', doc: '' }));

/** How to reach a program bound to `address` from this machine: loopback when it listens on every address. @param {string} address */
const reachable = (address) => (address === '0.0.0.0' ? '127.0.0.1' : address);

/**
 * Every setting resolved: declared default < .env (ENV_FILE) < the environment; then the values derived
 * from others where they were not set explicitly.
 * @param {Record<string, string | undefined>} [env]
 */
export async function resolveSettings(env = process.env) {
  const envFile = env.ENV_FILE || path.join(ROOT, '.env');
  const fromFile = readEnvFile(envFile);
  const settings = await allSettings();
  // every name in .env is a setting (the environment holds much else: only ours are read from it)
  refuseUnknown(Object.keys(fromFile), [...settings, ...FILE_ONLY], envFile);
  const explicit = { ...fromFile, ...definedOnly(env) };
  const config = loadConfig(settings, explicit);
  const given = (/** @type {string} */ name) => explicit[name] !== undefined && explicit[name] !== '';
  const listen = config.LISTEN_ADDRESS;
  const reach = reachable(listen);
  config.STACK_DIR = runDirectory(path.resolve(ROOT, config.STACK_DIR), given('STACK_DIR'));
  for (const service of ['ORIGIN', 'AVATAR_RESOLVER', 'PURGE_SERVICE']) if (!given(`${service}_HOST`)) config[`${service}_HOST`] = listen;
  if (!given('VARNISH_HOST')) config.VARNISH_HOST = reach;
  if (!given('HAPROXY_HOST')) config.HAPROXY_HOST = reach;
  if (!given('PURGE_SERVICE_UPSTREAM')) config.PURGE_SERVICE_UPSTREAM = `${reach}:${config.PURGE_SERVICE_PORT}`;
  if (!given('REDIS_URL')) config.REDIS_URL = `redis://${reach}:${config.REDIS_PORT}/0`;
  if (!given('PUBLIC_URL')) config.PUBLIC_URL = `http://${reachable(config.NGINX_BIND)}:${config.NGINX_PORT}`;
  // the warmer asks this stack's own front, as a reader would (and through the same varnish node a reader's URL hashes to)
  if (!given('WARM_EDGE_URL')) config.WARM_EDGE_URL = `http://${reachable(config.NGINX_BIND)}:${config.NGINX_PORT}`;
  if (!given('DATA_DIR')) config.DATA_DIR = path.join(config.STACK_DIR, 'data', 'origin');
  embeddedS3(config, given('S3_ENDPOINT'), reach);
  config.STACK_PROGRAMS = stackPrograms(config);
  // this stack's varnish is purged on its purge socket (only the purge service's user may purge there); a
  // cluster's nodes over TCP, from the addresses in their VARNISH_PURGERS
  if (!given('PURGE_VARNISH_NODES')) config.PURGE_VARNISH_NODES = config.EDGE_VARNISH_NODES.length ? config.EDGE_VARNISH_NODES : [purgeSocketNode(config)];
  // stable per node, telling nodes apart in X-Served-By without naming the host
  if (!given('VARNISH_IDENTITY')) config.VARNISH_IDENTITY = `node-${createHash('sha256').update(`${os.hostname()}:${config.VARNISH_PORT}`).digest('hex').slice(0, 8)}`;
  if (!config.ORIGIN_SERVERS.length) config.ORIGIN_SERVERS = [`${reach}:${config.ORIGIN_PORT}`];
  if (!config.AVATAR_SERVERS.length) config.AVATAR_SERVERS = [`${reach}:${config.AVATAR_RESOLVER_PORT}`];
  // haproxy admits what the origin can hold (its slots and its own queue) plus room for cache hits, so the
  // origin's queue decides: small requests first, degraded encodings, and an immediate 503 past it
  const slots = config.TRANSFORM_CONCURRENCY || os.availableParallelism() * 2;
  if (!config.HAPROXY_ORIGIN_MAXCONN) config.HAPROXY_ORIGIN_MAXCONN = slots + config.TRANSFORM_QUEUE_MAX + 32;
  return config;
}

/**
 * This stack's varnish purge socket as a purge node (`unix:<path>`), or its TCP address where there is no
 * socket (VARNISH_SOCKET=off: compose, whose containers share no directory). @param {Record<string, any>} config
 */
function purgeSocketNode(config) {
  if (config.VARNISH_SOCKET === 'off') return `${config.VARNISH_HOST}:${config.VARNISH_PORT}`;
  return `unix:${path.join(config.STACK_DIR, 'run', 'purge', 'varnish.sock')}`;
}

/** Every program a machine of the stack can run (its supervisord program names). */
export const PROGRAMS = ['redis', 'redis-sentinel', 'versitygw', 'origin', 'avatar-resolver', 'purge-service', 'haproxy', 'varnish', 'nginx',
  'prometheus', 'varnish-exporter', 'nginx-exporter', 'redis-exporter', 'mtail', 'rotate-logs'];

/**
 * The programs this machine runs: STACK_PROGRAMS, or every one but the sentinel (one box); versitygw only
 * when it is this stack's S3 (STORE=s3 without S3_ENDPOINT).
 * @param {Record<string, any>} config @returns {string[]}
 */
function stackPrograms(config) {
  const unknown = config.STACK_PROGRAMS.filter((/** @type {string} */ name) => !PROGRAMS.includes(name));
  if (unknown.length) throw new Error(`STACK_PROGRAMS: ${unknown.join(', ')} is not one of ${PROGRAMS.join(', ')}`);
  const chosen = config.STACK_PROGRAMS.length ? config.STACK_PROGRAMS : PROGRAMS.filter((name) => name !== 'redis-sentinel');
  return chosen.filter((/** @type {string} */ name) => name !== 'versitygw' || config.S3_EMBEDDED);
}

/**
 * supervisord.conf with only the programs this machine runs (each `[program:…]` section ends at the next).
 * @param {string} text @param {string[]} programs
 */
export function keepPrograms(text, programs) {
  return text.split(/\n(?=\[program:)/).filter((section) => {
    const name = /^\[program:([^\]]+)\]/.exec(section)?.[1];
    return !name || programs.includes(name);
  }).join('\n');
}

/**
 * The sentinel's config, written once into its data directory (Sentinel rewrites it with what it learns:
 * the current master, the other sentinels, the replicas) and kept across starts. It announces this
 * machine's address, since several may share one host's loopback.
 * @param {Record<string, any>} config @param {string} dir
 */
function writeSentinelConfig(config, dir) {
  const file = path.join(dir, 'sentinel.conf');
  if (!config.STACK_PROGRAMS.includes('redis-sentinel') || fs.existsSync(file)) return;
  const [host, port] = (config.REDIS_SENTINEL_MONITOR || config.REDIS_REPLICA_OF || `${reachable(config.LISTEN_ADDRESS)}:${config.REDIS_PORT}`).split(':');
  const name = config.REDIS_MASTER_NAME;
  fs.writeFileSync(file, [
    '# Redis Sentinel, written once by infra/render.js; Sentinel keeps what it learns here (delete it to start over)',
    `bind ${config.LISTEN_ADDRESS}`, `port ${config.REDIS_SENTINEL_PORT}`, 'protected-mode no', `dir ${dir}`, 'daemonize no',
    ...(config.LISTEN_ADDRESS === '0.0.0.0' ? [] : [`sentinel announce-ip ${config.LISTEN_ADDRESS}`]),
    `sentinel monitor ${name} ${host} ${port} ${config.REDIS_SENTINEL_QUORUM}`,
    // the master's and replicas' password, and the sentinel's own (it can be told to fail over)
    ...(config.REDIS_PASSWORD ? [`sentinel auth-pass ${name} ${redisString(config.REDIS_PASSWORD)}`, `requirepass ${redisString(config.REDIS_PASSWORD)}`] : []),
    // the services' users: they ask where the master is (infra/secrets.js)
    ...sentinelAclLines(config),
    // a sentinel whose failover attempt failed (its election lost or split, no replica good enough yet) tries
    // again after twice the failover timeout: 20 s here, not the 60 s a 30 s timeout gave (a CI run waited 60 s
    // for a promotion that never came)
    `sentinel down-after-milliseconds ${name} 3000`, `sentinel failover-timeout ${name} 10000`, `sentinel parallel-syncs ${name} 1`, '',
  ].join('\n'), { mode: 0o600 });
}

/**
 * STORE=s3 without an endpoint: the stack's own versitygw (on S3_PORT, data in STACK_DIR/data/s3).
 * @param {Record<string, any>} config
 * @param {boolean} endpointGiven @param {string} reach
 */
function embeddedS3(config, endpointGiven, reach) {
  config.S3_EMBEDDED = config.STORE === 's3' && !endpointGiven;
  if (!config.S3_EMBEDDED) return;
  config.S3_ENDPOINT = `http://${reach}:${config.S3_PORT}`;
  config.S3_FORCE_PATH_STYLE = true;
}

/** Where a root-run stack keeps its files when the checkout is private. */
export const SHARED_RUN_ROOT = '/var/lib/image-cdn-stack';

/**
 * Whether users other than the owner can reach `dir`: every existing directory on the way must be
 * searchable by others (varnish compiles VCL as its own user, nginx's workers connect to the socket).
 * @param {string} dir
 */
export function reachableByOthers(dir) {
  for (let at = path.resolve(dir); ; at = path.dirname(at)) {
    if (fs.existsSync(at) && !(fs.statSync(at).mode & 0o001)) return false;
    if (at === path.dirname(at)) return true;
  }
}

/**
 * The run directory. Run as root from a private checkout (a clone in /root, a mktemp -d), the default
 * `.run` would be out of the daemons' reach: it moves to /var/lib/image-cdn-stack/<checkout>-<hash>, one
 * per checkout. A STACK_DIR given explicitly is never moved: out of reach, it is an error naming it.
 * @param {string} dir @param {boolean} explicit
 */
function runDirectory(dir, explicit) {
  // the run directory itself is made searchable when rendered: what matters is the way to it
  if (process.getuid?.() !== 0 || reachableByOthers(path.dirname(dir))) return dir;
  if (explicit) throw new Error(`STACK_DIR=${dir}: varnish and nginx's workers run as their own users and cannot reach it (a directory on its path is not searchable by others); choose another STACK_DIR`);
  const hash = createHash('sha256').update(ROOT).digest('hex').slice(0, 8);
  repairSharedRoot(SHARED_RUN_ROOT);
  return path.join(SHARED_RUN_ROOT, `${path.basename(ROOT)}-${hash}`);
}

/** @param {Record<string, string | undefined>} env */
function definedOnly(env) {
  return /** @type {Record<string, string>} */ (Object.fromEntries(Object.entries(env).filter(([, value]) => value !== undefined)));
}

/** A redis.conf string argument, quoted. @param {string} value */
const redisString = (value) => JSON.stringify(value);

/**
 * The supervisord program of the embedded versitygw (STORE=s3 without S3_ENDPOINT), or nothing. Its root
 * credentials come from its own secrets file (infra/with-secrets), never from the rendered file.
 * @param {Record<string, any>} config @param {{ DATA_ROOT: string, LOG_DIR: string, binary: string, withSecrets: string }} dirs @param {string} user its user= line
 */
function s3Program(config, { DATA_ROOT, LOG_DIR, binary, withSecrets }, user) {
  if (!config.S3_EMBEDDED) return '; no embedded S3 server (STORE=fs, or S3_ENDPOINT names one)';
  return `[program:versitygw]
; the uploads' bucket (STORE=s3): a directory per bucket under data/s3, objects are files
${user}
command=${withSecrets} "${config.STACK_DIR}/secrets/versitygw.env" ${binary} --port ${config.LISTEN_ADDRESS}:${config.S3_PORT} --iam-dir ${DATA_ROOT}/s3-iam posix ${DATA_ROOT}/s3
priority=15
autorestart=true
startsecs=1
stdout_logfile=${LOG_DIR}/versitygw.log
redirect_stderr=true`;
}

/** Every program's role: each runs as its own user, STACK_USER_PREFIX + role. */
export const ROLES = ['edge', 'haproxy', 'redis', 'origin', 'resolver', 'purge', 'metrics', 's3'];

/**
 * The users the stack's programs run as, by role: when rendering as root with a STACK_USER_PREFIX and the
 * users exist (up creates them), else null (every program runs as whoever starts the stack).
 * @param {Record<string, any>} config @returns {Record<string, { name: string, uid: number, gid: number }> | null}
 */
export function stackUsers(config) {
  if (process.getuid?.() !== 0 || !config.STACK_USER_PREFIX) return null;
  const passwd = fs.existsSync('/etc/passwd') ? fs.readFileSync('/etc/passwd', 'utf8').split('\n').map((line) => line.split(':')) : [];
  /** @type {Record<string, { name: string, uid: number, gid: number }>} */
  const users = {};
  for (const role of ROLES) {
    const entry = passwd.find((fields) => fields[0] === `${config.STACK_USER_PREFIX}${role}`);
    if (!entry) return null;
    users[role] = { name: entry[0], uid: Number(entry[2]), gid: Number(entry[3]) };
  }
  return users;
}

/**
 * Where the programs run from: this checkout, or when the stack user cannot read it (a root-run clone in
 * /root, a mktemp -d) a copy of it in /var/lib/image-cdn-stack, made again whenever a file of the checkout
 * is newer than the copy. @param {Record<string, unknown> | null} users
 */
export function appRoot(users) {
  if (!users || reachableByOthers(ROOT)) return ROOT;
  const hash = createHash('sha256').update(ROOT).digest('hex').slice(0, 8);
  const target = path.join(SHARED_RUN_ROOT, `${path.basename(ROOT)}-${hash}`, 'app');
  const stamp = path.join(target, '.copied');
  const skip = ['.git', '.run', 'bench/.peers', 'bench/reports'];
  const changed = !fs.existsSync(stamp) || execFileSync('find', [ROOT, ...skip.flatMap((dir) => ['-path', path.join(ROOT, dir), '-prune', '-o']), '-newer', stamp, '-print', '-quit'], { encoding: 'utf8' }).trim() !== '';
  if (!changed) return target;
  const fresh = `${target}.${process.pid}`;
  makeDir(fresh, 0o755);
  const excludes = skip.map((dir) => `--exclude=./${dir}`).join(' ');
  execFileSync('sh', ['-c', `tar -C "$1" ${excludes} -cf - . | tar -C "$2" -xf - && chmod -R a+rX "$2"`, 'copy', ROOT, fresh]);
  fs.writeFileSync(path.join(fresh, '.copied'), '');
  fs.rmSync(target, { recursive: true, force: true });
  fs.renameSync(fresh, target);
  return target;
}

/** A path of the checkout as the programs see it: in the app copy when there is one. @param {string} app @param {string} file */
function inApp(app, file) {
  return file.startsWith(`${ROOT}/`) ? path.join(app, path.relative(ROOT, file)) : file;
}

/** Values only templates need, derived from the settings. @param {Record<string, any>} config */
export function templateValues(config) {
  const users = stackUsers(config);
  const app = appRoot(users);
  const dirs = { ROOT, CONF_DIR: path.join(config.STACK_DIR, 'conf'), RUN_DIR: path.join(config.STACK_DIR, 'run'), LOG_DIR: path.join(config.STACK_DIR, 'logs'), DATA_ROOT: path.join(config.STACK_DIR, 'data') };
  const servers = (/** @type {string} */ name, /** @type {string[]} */ list, /** @type {string} */ extra) => list
    .map((address, i) => `  server ${name}${i + 1} ${address} check ${extra}`).join('\n');
  // nginx reads the certificate and key as the edge user: from copies in conf/tls (see renderAll)
  const tlsDir = path.join(dirs.CONF_DIR, 'tls');
  const tls = config.NGINX_TLS_CERT && config.NGINX_TLS_KEY
    ? `listen ${config.NGINX_BIND}:${config.NGINX_TLS_PORT} ssl http2;\n    ssl_certificate ${tlsDir}/cert.pem;\n    ssl_certificate_key ${tlsDir}/key.pem;\n    ssl_protocols TLSv1.2 TLSv1.3;\n    ssl_session_cache shared:tls:10m;`
    : '# no TLS certificate configured (NGINX_TLS_CERT, NGINX_TLS_KEY)';
  /** @type {Record<string, string>} */
  const values = {};
  for (const [name, value] of Object.entries(config)) values[name] = Array.isArray(value) ? value.join(',') : String(value);
  return {
    ...values,
    ...dirs,
    APP_ROOT: app,
    APP_NODE_BIN: inApp(app, path.dirname(process.execPath)),
    SUPERVISOR_USER_LINE: process.getuid?.() === 0 ? 'user=root' : '; started by a user: every program runs as it',
    ...Object.fromEntries(ROLES.map((role) => [`USER_${role.toUpperCase()}`, users ? `user=${users[role].name}` : '; the user that started the stack'])),
    HAPROXY_STATS_PASSWORD: statsPassword(config),
    S3_PROGRAM: s3Program(config, { ...dirs, binary: inApp(app, process.env.VERSITYGW || 'versitygw'), withSecrets: path.join(app, 'infra', 'with-secrets') }, users ? `user=${users.s3.name}` : '; the user that started the stack'),
    WITH_SECRETS: path.join(app, 'infra', 'with-secrets'),
    SECRETS_DIR: path.join(config.STACK_DIR, 'secrets'),
    HAPROXY_IMAGES_HOST: config.HAPROXY_HOST,
    HAPROXY_AVATARS_HOST: config.HAPROXY_HOST,
    VARNISH_PURGERS_ACL: config.VARNISH_PURGERS.map((/** @type {string} */ address) => `  "${address}";`).join('\n'),
    ...originServers(config, servers),
    AVATAR_SERVER_LINES: servers('resolver', config.AVATAR_SERVERS, 'maxconn 512'),
    NGINX_CLIENT_MAX_BODY: String(config.UPLOAD_MAX_BYTES + 64 * 1024),
    // each layer waits a little longer than the one inside it, which so answers first, cleanly
    VARNISH_FIRST_BYTE_TIMEOUT_S: String(config.HAPROXY_SERVER_TIMEOUT_S + 2),
    NGINX_PROXY_READ_TIMEOUT_S: String(config.HAPROXY_SERVER_TIMEOUT_S + 4),
    NGINX_RLIMIT_NOFILE: String(config.NGINX_WORKER_CONNECTIONS * 2),
    NGINX_REAL_IP_LINES: config.NGINX_TRUSTED_PROXIES.map((/** @type {string} */ range) => `  set_real_ip_from ${range};`).join('\n'),
    NGINX_TLS: tls,
    NGINX_SERVER_TIMING: config.NGINX_SERVER_TIMING ? '# Server-Timing passed to the public (NGINX_SERVER_TIMING)' : 'proxy_hide_header Server-Timing;',
    NGINX_ERROR_PAGES: nginxErrorPages(),
    NGINX_RESOLVER: nginxResolver(config.HAPROXY_HOST),
    ...varnishSocket(config, dirs.RUN_DIR),
    REDIS_BIND: config.LISTEN_ADDRESS,
    // loopback only: protected mode; on a network (compose's, a pod's, a fleet's private one) that network
    // and its firewall are the protection, and the replicas and sentinels of other machines must get in
    REDIS_PROTECTED_MODE: /^(127\.|::1$)/.test(config.LISTEN_ADDRESS) ? 'yes' : 'no',
    REDIS_REPLICATION: redisReplication(config),
    // requirepass for clients, masterauth for a replica (any node may become one after a failover)
    REDIS_AUTH: config.REDIS_PASSWORD ? `requirepass ${redisString(config.REDIS_PASSWORD)}\nmasterauth ${redisString(config.REDIS_PASSWORD)}\n${redisAclLines(config)}` : '# no password (REDIS_PASSWORD): not this stack\'s Redis',
    // the exporter's address without a password (supervisord.conf is readable by all); its user's password
    // comes from a map of address to password (infra/secrets.js)
    REDIS_EXPORTER_ADDR: redisAddress(config.REDIS_URL),
    REDIS_EXPORTER_USER: config.REDIS_PASSWORD && ownsRedis(config) ? 'exporter' : config.REDIS_USERNAME || 'default',
    REACH_ADDRESS: reachable(config.LISTEN_ADDRESS),
    ...scrapeTargets(config),
    VARNISH_SIZE_LINES: varnishSizes(config),
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
  const snap = allowed.map((/** @type {number} */ size, /** @type {number} */ i) => `${i ? ' elsif' : '    if'} (std.integer(req.http.X-Size, 0) <= ${size}) {\n      set req.http.X-Size = "${size}";\n    }`).join('');
  return ['width', 'height'].map((name) => [
    `  if (req.url ~ "[?&]${name}=[0-9]") {`,
    `    set req.http.X-Size = regsub(req.url, "^.*?[?&]${name}=([0-9]+).*$", "\\1");`,
    `    if (req.http.X-Size ~ "^[0-9]{10,}$" || std.integer(req.http.X-Size, 0) > ${cap}) {`,
    `      set req.http.X-Size = "${cap}";`,
    '    }',
    ...(allowed.length ? [`${snap} else {\n      set req.http.X-Size = "${allowed[allowed.length - 1]}";\n    }`] : []),
    `    set req.url = regsub(req.url, "([?&]${name}=)[0-9]+", "\\1" + req.http.X-Size);`,
    '    unset req.http.X-Size;',
    '  }',
  ].join('\n')).join('\n');
}

/** A Redis URL without its user and password. @param {string} url */
function redisAddress(url) {
  const parsed = new URL(url);
  parsed.username = '';
  parsed.password = '';
  return parsed.href;
}

/**
 * redis.conf's replication lines: a replica of REDIS_REPLICA_OF, and the address it is known by (several
 * machines may share one host's loopback, where the master would otherwise see 127.0.0.1).
 * @param {Record<string, any>} config
 */
function redisReplication(config) {
  const lines = [];
  if (config.LISTEN_ADDRESS !== '0.0.0.0') lines.push(`replica-announce-ip ${config.LISTEN_ADDRESS}`);
  lines.push(config.REDIS_REPLICA_OF ? `replicaof ${config.REDIS_REPLICA_OF.replace(':', ' ')}` : '# a master (REDIS_REPLICA_OF is empty); the sentinels may make it a replica after a failover');
  return lines.join('\n');
}

/**
 * Prometheus' targets per job: this stack's own addresses, unless PROMETHEUS_SCRAPE names the job
 * (`job=host:port`, one entry per target). A service bound to every address is scraped on loopback.
 * @param {Record<string, any>} config @returns {Record<string, string>} SCRAPE_<JOB> → the YAML list's items
 */
function scrapeTargets(config) {
  const own = reachable(config.LISTEN_ADDRESS);
  /** @type {Record<string, string>} */
  const defaults = {
    haproxy: `${config.HAPROXY_HOST}:${config.HAPROXY_STATS_PORT}`,
    varnish: `${config.VARNISH_HOST}:${config.VARNISH_EXPORTER_PORT}`,
    nginx: `${own}:${config.NGINX_EXPORTER_PORT}`,
    redis: `${own}:${config.REDIS_EXPORTER_PORT}`,
    mtail: `${own}:${config.MTAIL_PORT}`,
    origin: `${reachable(config.ORIGIN_HOST)}:${config.ORIGIN_METRICS_PORT}`,
    'avatar-resolver': `${reachable(config.AVATAR_RESOLVER_HOST)}:${config.AVATAR_RESOLVER_METRICS_PORT}`,
    'purge-service': `${reachable(config.PURGE_SERVICE_HOST)}:${config.PURGE_SERVICE_METRICS_PORT}`,
  };
  /** @type {Record<string, string[]>} */
  const given = {};
  for (const entry of config.PROMETHEUS_SCRAPE) {
    const [job, target] = entry.split('=');
    if (!(job in defaults) || !/^[^\s:]+:\d+$/.test(target || '')) throw new Error(`PROMETHEUS_SCRAPE: "${entry}" is not job=host:port with a job of ${Object.keys(defaults).join(', ')}`);
    (given[job] ||= []).push(target);
  }
  return Object.fromEntries(Object.entries(defaults).map(([job, target]) => [
    `SCRAPE_${job.toUpperCase().replace('-', '_')}`, (given[job] || [target]).map((address) => `'${address}'`).join(', '),
  ]));
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
      UPLOAD_SERVER_LINES: config.ORIGIN_SERVERS.map((/** @type {string} */ address, /** @type {number} */ i) => `  server origin${i + 1} ${address} track be_images/origin${i + 1} maxconn ${config.HAPROXY_UPLOAD_MAXCONN}`).join('\n'),
    };
  }
  const template = (/** @type {string} */ maxconn) => `1-${config.ORIGIN_DISCOVERY_SLOTS} ${config.ORIGIN_DISCOVERY} check resolvers system init-addr none maxconn ${maxconn}`;
  return {
    HAPROXY_RESOLVERS: 'resolvers system\n  parse-resolv-conf\n  hold valid 5s\n  hold obsolete 30s\n  accepted_payload_size 8192',
    ORIGIN_SERVER_LINES: `  server-template origin ${template(String(config.HAPROXY_ORIGIN_MAXCONN))}`,
    UPLOAD_SERVER_LINES: `  server-template origin ${template(String(config.HAPROXY_UPLOAD_MAXCONN))}`,
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
 * nginx's resolver, for the upload check's socket to haproxy (upload-body.lua) when haproxy is a name
 * (compose's service, the chart's Service): the nameservers of the resolv.conf the render step sees, which
 * is nginx's (same container network or pod). An address needs none.
 * @param {string} host
 */
function nginxResolver(host) {
  if (net.isIP(host)) return '# haproxy by address: no resolver needed';
  const servers = fs.existsSync('/etc/resolv.conf') ? [...fs.readFileSync('/etc/resolv.conf', 'utf8').matchAll(/^\s*nameserver\s+(\S+)/gm)].map((match) => (net.isIPv6(match[1]) ? `[${match[1]}]` : match[1])) : [];
  return servers.length ? `resolver ${servers.join(' ')} valid=30s;` : '# no nameserver in /etc/resolv.conf';
}

/** nginx's error_page lines and the internal locations that answer them. */
function nginxErrorPages() {
  return NGINX_ERRORS.map(([codes, status, name, headers]) => {
    const info = status === 503 ? '{"layer":"nginx"}' : '{}';
    const extra = Object.entries(headers || {}).map(([header, value]) => `\n      add_header ${header} ${value} always;`).join('')
      // a 408 (upload-body.lua: a body too slow) leaves the rest of the body unread: close, after a short
      // lingering close that drains what is in flight so the client reads the answer, not a reset
      + (status === 408 ? '\n      keepalive_timeout 0;\n      lingering_close always;\n      lingering_time 2s;' : '');
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
 * nginx reaches a co-located varnish over a Unix socket (no TCP stack on either side of the hottest hop);
 * varnish keeps its TCP port for the purge service, the exporter and health checks. Requests on the socket
 * have no client address (0.0.0.0), so they can never pass the purgers ACL.
 * @param {Record<string, any>} config @param {string} runDir
 */
function varnishSocket(config, runDir) {
  const socket = config.VARNISH_SOCKET || path.join(runDir, 'edge', 'varnish.sock');
  if (config.VARNISH_SOCKET === 'off') {
    return { VARNISH_SOCKET_LISTEN: '', NGINX_VARNISH_SERVERS: nginxVarnishServers(config, `${config.VARNISH_HOST}:${config.VARNISH_PORT}`), VARNISH_PURGE_USER: '' };
  }
  // nginx and varnish run as the same user (the edge's): nobody else reaches the socket. The purge socket
  // is open to all, and varnish refuses every purge on it whose peer is not the purge service's user
  // (vcl default.vcl.template): purging needs no address in VARNISH_PURGERS, which any local user could use
  const purge = path.join(runDir, 'purge', 'varnish.sock');
  const users = stackUsers(config);
  return {
    VARNISH_SOCKET_LISTEN: `-a ${socket},mode=0600 -a purge=${purge},mode=0666`,
    NGINX_VARNISH_SERVERS: nginxVarnishServers(config, `unix:${socket}`),
    VARNISH_PURGE_USER: users ? users.purge.name : os.userInfo().username,
  };
}

/**
 * nginx's varnish servers: this stack's own, or with EDGE_VARNISH_NODES a cluster, each URL on one node by
 * a consistent hash (each object cached once in the cluster). A node that refuses is skipped for
 * `fail_timeout`, its share going to the next node on the ring and nothing else moving; then it is tried again.
 * @param {Record<string, any>} config @param {string} local
 */
function nginxVarnishServers(config, local) {
  if (!config.EDGE_VARNISH_NODES.length) return `    server ${local};`;
  const servers = config.EDGE_VARNISH_NODES.map((/** @type {string} */ node) => `    server ${node} max_fails=1 fail_timeout=${config.EDGE_VARNISH_FAIL_TIMEOUT_S}s;`);
  return ['    hash $request_uri consistent;', ...servers].join('\n');
}

/**
 * ${NAME} → value, strictly: a name without a value is an error, so a typo cannot render silently.
 * @param {string} text @param {Record<string, string>} values @param {string} source
 */
export function substitute(text, values, source) {
  return text.replace(/\$\{([A-Z][A-Z0-9_]*)\}/g, (_match, name) => {
    if (!(name in values)) throw new Error(`${source}: no value for \${${name}}`);
    return values[name];
  });
}

/** Every template and where it goes under conf/. */
export const TEMPLATES = [
  ['nginx/nginx.conf.template', 'nginx.conf'],
  ['nginx/upload-body.lua.template', 'nginx/upload-body.lua'],
  ['vcl/default.vcl.template', 'varnish/default.vcl'],
  ['vcl/sizes.vcl.template', 'varnish/sizes.vcl'],
  ['vcl/limits.vcl.template', 'varnish/limits.vcl'],
  ['haproxy/haproxy.cfg.template', 'haproxy.cfg'],
  ['haproxy/errors/503.http', 'haproxy-errors/503.http'],
  ['haproxy/errors/504.http', 'haproxy-errors/504.http'],
  ['haproxy/errors/502.http', 'haproxy-errors/502.http'],
  ['infra/redis.conf.template', 'redis.conf'],
  ['infra/supervisord.conf.template', 'supervisord.conf'],
  ['infra/prometheus/prometheus.yml.template', 'prometheus/prometheus.yml'],
];

/** Rendered configs that hold a secret. */
const SECRET_CONFIGS = ['haproxy.cfg', 'redis.conf'];

/**
 * Renders everything into config.STACK_DIR. @param {Record<string, any>} config
 * @param {import('../lib/src/config.js').Setting[]} [settings] every declared setting (which are secrets)
 */
export function renderAll(config, settings = []) {
  embeddedS3Credentials(config);
  config.REDIS_PASSWORD = redisPassword(config);
  const values = templateValues(config);
  for (const dir of [values.CONF_DIR, values.RUN_DIR, values.LOG_DIR, values.DATA_ROOT, ...programDirs(config, values).map(([dir]) => dir)]) {
    makeDir(dir, 0o755);
  }
  // searchable by varnish's users (its workdir is in run/, its VCL in conf/varnish) whatever the umask
  for (const dir of [config.STACK_DIR, values.CONF_DIR, values.RUN_DIR]) fs.chmodSync(dir, 0o755);
  // the logs are the operator's (a stack of stack users gives them to the edge's group below)
  fs.chmodSync(values.LOG_DIR, 0o700);
  for (const [template, target] of TEMPLATES) {
    const source = path.join(ROOT, template);
    if (!fs.existsSync(source)) continue;
    const output = path.join(values.CONF_DIR, target);
    makeDir(path.dirname(output), 0o755);
    // a config that holds a secret (haproxy.cfg: the stats password) is the stack user's alone, from its creation
    const secret = SECRET_CONFIGS.includes(target);
    const text = substitute(fs.readFileSync(source, 'utf8'), values, template);
    fs.writeFileSync(output, target === 'supervisord.conf' ? keepPrograms(text, config.STACK_PROGRAMS) : text, { mode: secret ? 0o600 : 0o644 });
    if (secret) fs.chmodSync(output, 0o600);
  }
  // nginx's Lua beside nginx.conf, readable by nginx's user whatever the umask
  fs.chmodSync(path.join(values.CONF_DIR, 'nginx'), 0o755);
  copyTls(config, values.CONF_DIR);
  // Prometheus authenticates to haproxy's metrics with the stats password, from a file only its user reads
  const scrapePassword = path.join(values.CONF_DIR, 'prometheus', 'haproxy-password');
  fs.writeFileSync(scrapePassword, values.HAPROXY_STATS_PASSWORD, { mode: 0o600 });
  fs.chmodSync(scrapePassword, 0o600);
  writeSentinelConfig(config, path.join(values.DATA_ROOT, 'redis-sentinel'));
  giveToStackUsers(config, values);
  // the VCL logic is not templated: copied beside default.vcl, found through vcl_path
  for (const file of fs.readdirSync(path.join(ROOT, 'vcl')).filter((name) => name.endsWith('.vcl'))) {
    fs.copyFileSync(path.join(ROOT, 'vcl', file), path.join(values.CONF_DIR, 'varnish', file));
  }
  fs.chmodSync(path.join(values.CONF_DIR, 'varnish'), 0o755);
  for (const file of fs.readdirSync(path.join(values.CONF_DIR, 'varnish'))) fs.chmodSync(path.join(values.CONF_DIR, 'varnish', file), 0o644);
  // mtail's programs beside the configs (a container of the components image has no checkout)
  fs.cpSync(path.join(ROOT, 'infra', 'mtail'), path.join(values.CONF_DIR, 'mtail'), { recursive: true });
  const rules = path.join(ROOT, 'infra', 'prometheus', 'rules');
  if (fs.existsSync(rules)) fs.cpSync(rules, path.join(values.CONF_DIR, 'prometheus', 'rules'), { recursive: true });
  // every setting but the secrets, which each program gets apart (infra/secrets.js)
  const secrets = secretNames(settings);
  config.HAPROXY_STATS_PASSWORD = values.HAPROXY_STATS_PASSWORD;
  fs.writeFileSync(path.join(config.STACK_DIR, 'env'), shellLines(Object.entries(config).filter(([name]) => !secrets.includes(name))), { mode: 0o600 });
  writeSecrets(config, secrets, stackUsers(config), values.CONF_DIR, values.REDIS_EXPORTER_ADDR);
  return values;
}

/**
 * The TLS certificate and key, copied where nginx reads them as the edge user (the key 0600, the edge's:
 * the originals may stay root's, e.g. certbot's). `up` copies them again, so a renewed certificate takes
 * effect with the next start (or a render and nginx -s reload).
 * @param {Record<string, any>} config @param {string} confDir
 */
function copyTls(config, confDir) {
  if (!config.NGINX_TLS_CERT || !config.NGINX_TLS_KEY) return;
  const dir = path.join(confDir, 'tls');
  makeDir(dir, 0o755);
  fs.copyFileSync(config.NGINX_TLS_CERT, path.join(dir, 'cert.pem'));
  fs.chmodSync(path.join(dir, 'cert.pem'), 0o644);
  fs.writeFileSync(path.join(dir, 'key.pem'), fs.readFileSync(config.NGINX_TLS_KEY), { mode: 0o600 });
  fs.chmodSync(path.join(dir, 'key.pem'), 0o600);
}

/**
 * The directories the programs write, each with the role whose user owns it.
 * @param {Record<string, any>} config @param {Record<string, string>} values
 * @returns {Array<[string, typeof ROLES[number]]>}
 */
function programDirs(config, values) {
  /** @type {Array<[string, typeof ROLES[number]]>} */
  const dirs = [
    [path.join(values.RUN_DIR, 'varnish'), 'edge'], [path.join(values.RUN_DIR, 'nginx'), 'edge'], [path.join(values.RUN_DIR, 'edge'), 'edge'],
    [path.join(values.RUN_DIR, 'purge'), 'edge'],
    [path.join(values.RUN_DIR, 'haproxy'), 'haproxy'], [path.join(values.DATA_ROOT, 'redis'), 'redis'], [path.join(values.DATA_ROOT, 'redis-sentinel'), 'redis'], [path.join(values.DATA_ROOT, 'prometheus'), 'metrics'],
    [config.DATA_DIR, 'origin'],
  ];
  // the embedded versitygw's bucket is a directory
  if (config.S3_EMBEDDED) dirs.push([path.join(values.DATA_ROOT, 's3'), 's3'], [path.join(values.DATA_ROOT, 's3', config.S3_BUCKET), 's3'], [path.join(values.DATA_ROOT, 's3-iam'), 's3']);
  return dirs;
}

/**
 * Each program's directories are its own user's (recursively the first time, then only the top: a large
 * data directory is not walked at every start); the config holding a secret is its reader's alone. logs/
 * stays root's (supervisord writes every program's log) but the edge may add files and rename its own
 * there (group-writable, sticky): nginx writes its logs itself and rotate-logs renames them.
 * @param {Record<string, any>} config @param {Record<string, string>} values
 */
function giveToStackUsers(config, values) {
  const users = stackUsers(config);
  if (!users) return;
  for (const [dir, role] of programDirs(config, values)) {
    const { uid, gid } = users[role];
    if (fs.statSync(dir).uid !== uid) execFileSync('chown', ['-R', `${uid}:${gid}`, dir]);
    // the purge socket's directory: reachable by the purge service (varnish checks who connects)
    fs.chmodSync(dir, dir === path.join(values.RUN_DIR, 'purge') ? 0o755 : 0o750);
  }
  // readable by root and the edge (mtail reads nginx's access log) only: the logs hold client addresses
  fs.chownSync(values.LOG_DIR, 0, users.edge.gid);
  fs.chmodSync(values.LOG_DIR, 0o1770);
  for (const name of fs.readdirSync(values.LOG_DIR).filter((file) => /^nginx-(access|error)\.log/.test(file))) {
    fs.chownSync(path.join(values.LOG_DIR, name), users.edge.uid, users.edge.gid);
  }
  fs.chownSync(path.join(values.CONF_DIR, 'haproxy.cfg'), users.haproxy.uid, users.haproxy.gid);
  fs.chownSync(path.join(values.CONF_DIR, 'redis.conf'), users.redis.uid, users.redis.gid);
  fs.chownSync(path.join(values.CONF_DIR, 'prometheus', 'haproxy-password'), users.metrics.uid, users.metrics.gid);
  if (fs.existsSync(path.join(values.CONF_DIR, 'tls', 'key.pem'))) fs.chownSync(path.join(values.CONF_DIR, 'tls', 'key.pem'), users.edge.uid, users.edge.gid);
}

async function main() {
  const config = await resolveSettings();
  if (process.argv.includes('--stack-users')) {
    if (process.getuid?.() === 0 && config.STACK_USER_PREFIX) process.stdout.write(`${ROLES.map((role) => `${config.STACK_USER_PREFIX}${role}`).join('\n')}\n`);
    return;
  }
  if (process.argv.includes('--secret-names')) {
    process.stdout.write(`${secretNames(await allSettings()).join('\n')}\n`);
    return;
  }
  if (process.argv.includes('--dir-only')) {
    process.stdout.write(`${config.STACK_DIR}\n`);
    return;
  }
  const vclDir = process.argv[process.argv.indexOf('--vcl-parts') + 1];
  if (process.argv.includes('--vcl-parts')) {
    // varnishtest's copy of the VCL has no rendered files: these, from the settings
    const values = { VARNISH_SIZE_LINES: varnishSizes(config), VARNISH_MISS_LIMIT: String(config.VARNISH_MISS_LIMIT), VARNISH_MISS_PERIOD_S: String(config.VARNISH_MISS_PERIOD_S) };
    for (const part of ['sizes', 'limits']) fs.writeFileSync(path.join(vclDir, `${part}.vcl`), substitute(fs.readFileSync(path.join(ROOT, 'vcl', `${part}.vcl.template`), 'utf8'), values, `${part}.vcl`));
    return;
  }
  if (process.argv.includes('--check-prometheus')) {
    config.STACK_DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'render-check-'));
    const values = renderAll(config, await allSettings());
    const prometheus = path.join(values.CONF_DIR, 'prometheus');
    execFileSync('promtool', ['check', 'config', path.join(prometheus, 'prometheus.yml')], { stdio: 'inherit' });
    const ruleFiles = fs.readdirSync(path.join(prometheus, 'rules')).filter((name) => name.endsWith('.yml') && !name.endsWith('.test.yml'));
    execFileSync('promtool', ['check', 'rules', ...ruleFiles.map((name) => path.join(prometheus, 'rules', name))], { stdio: 'inherit' });
    const tests = fs.readdirSync(path.join(ROOT, 'infra', 'prometheus', 'tests')).filter((name) => name.endsWith('.yml'));
    execFileSync('promtool', ['test', 'rules', ...tests.map((name) => path.join(ROOT, 'infra', 'prometheus', 'tests', name))], { stdio: 'inherit', cwd: path.join(ROOT, 'infra', 'prometheus', 'tests') });
    fs.rmSync(config.STACK_DIR, { recursive: true, force: true });
    return;
  }
  renderAll(config, await allSettings());
  process.stdout.write(`${config.STACK_DIR}\n`);
}

if (import.meta.main) {
  main().catch((err) => {
    process.stderr.write(`render: ${err.message}\n`);
    process.exit(2);
  });
}
