// The one place settings are resolved: declared defaults < .env (ENV_FILE) < the environment, then what
// derives from other settings (addresses, the run directory, the programs this machine runs). Every
// renderer (infra/render/*.js), the fleet and the tests start from resolveSettings.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig, refuseUnknown } from '../lib/src/config.js';
import { checkRules, transformQueueMax, transformSlots, warmConcurrency } from '../lib/src/rules.js';
import { repairSharedRoot } from './dirs.js';
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
const FILE_ONLY = [
  'NGINX_PUBLISH',
  'GRAFANA_ADMIN_PASSWORD',
  'S3_BUCKET',
  'AWS_ACCESS_KEY_ID',
  'AWS_SECRET_ACCESS_KEY',
  'AWS_SESSION_TOKEN',
  'AWS_REGION',
  'AWS_PROFILE',
].map((name) => ({ name, type: /** @type {const} */ ('string'), default: '', doc: '' }));

/** How to reach a program bound to `address` from this machine: loopback when it listens on every address. @param {string} address */
export const reachable = (address) => (address === '0.0.0.0' ? '127.0.0.1' : address);

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
  for (const service of ['ORIGIN', 'AVATAR_RESOLVER', 'PURGE_SERVICE'])
    if (!given(`${service}_HOST`)) config[`${service}_HOST`] = listen;
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
  if (!given('PURGE_VARNISH_NODES'))
    config.PURGE_VARNISH_NODES = config.EDGE_VARNISH_NODES.length
      ? config.EDGE_VARNISH_NODES
      : [purgeSocketNode(config)];
  // stable per node, telling nodes apart in X-Served-By without naming the host
  if (!given('VARNISH_IDENTITY'))
    config.VARNISH_IDENTITY = `node-${createHash('sha256').update(`${os.hostname()}:${config.VARNISH_PORT}`).digest('hex').slice(0, 8)}`;
  internalSockets(config, given);
  if (!config.ORIGIN_SERVERS.length) config.ORIGIN_SERVERS = [`${reach}:${config.ORIGIN_PORT}`];
  if (!config.AVATAR_SERVERS.length) config.AVATAR_SERVERS = [`${reach}:${config.AVATAR_RESOLVER_PORT}`];
  // haproxy admits what the origin can hold (its slots and its own queue) plus room for cache hits, so the
  // origin's queue decides: small requests first, degraded encodings, and an immediate 503 past it
  checkRules(config);
  if (!config.HAPROXY_ORIGIN_MAXCONN)
    config.HAPROXY_ORIGIN_MAXCONN = transformSlots(config) + transformQueueMax(config) + 32;
  // the warmer keeps every origin's warm lane busy: two images for each of their warm transforms
  if (!config.WARM_CONCURRENCY)
    config.WARM_CONCURRENCY = warmConcurrency(config, undefined, config.ORIGIN_SERVERS.length);
  return config;
}

/** Where a machine's internal sockets are (INTERNAL_SOCKETS). @param {string} stackDir */
export function socketPaths(stackDir) {
  const run = path.join(stackDir, 'run');
  return {
    // haproxy's, reached by the edge's user (nginx and varnish)
    images: path.join(run, 'haproxy-in', 'images.sock'),
    avatars: path.join(run, 'haproxy-in', 'avatars.sock'),
    // varnish's, for nginx (the edge's own), and for purges (open to all, varnish checks the peer's user)
    varnish: path.join(run, 'edge', 'varnish.sock'),
    purge: path.join(run, 'purge', 'varnish.sock'),
    // the services', reached by haproxy's user
    origin: path.join(run, 'origin', 'origin.sock'),
    resolver: path.join(run, 'resolver', 'resolver.sock'),
  };
}

/**
 * INTERNAL_SOCKETS: the hops inside this machine over Unix sockets, where this machine runs both ends and
 * no address was given: varnish and nginx → haproxy (HAPROXY_SOCKETS), haproxy → the origin and the avatar
 * resolver (ORIGIN_SERVERS, AVATAR_SERVERS as unix@<path>; each service told its socket); varnish without
 * its port (VARNISH_TCP false) where nothing needs it.
 * @param {Record<string, any>} config @param {(name: string) => boolean} given
 */
function internalSockets(config, given) {
  const here = (/** @type {string} */ program) => config.STACK_PROGRAMS.includes(program);
  const sockets = socketPaths(config.STACK_DIR);
  if (config.VARNISH_SOCKET !== 'off' && !config.VARNISH_SOCKET) config.VARNISH_SOCKET = sockets.varnish;
  config.HAPROXY_SOCKETS = false;
  config.VARNISH_TCP = true;
  if (!config.INTERNAL_SOCKETS) return;
  // varnish: nginx on its edge socket, the purge service on its purge socket are all a lone machine needs;
  // its port stays for a cluster's nginx and purges over TCP, or an nginx elsewhere
  config.VARNISH_TCP =
    config.VARNISH_SOCKET === 'off' ||
    config.EDGE_VARNISH_NODES.length > 0 ||
    config.VARNISH_PURGERS.length > 0 ||
    given('PURGE_VARNISH_NODES') ||
    !here('nginx');
  config.HAPROXY_SOCKETS = here('haproxy') && !given('HAPROXY_HOST');
  if (here('haproxy') && here('origin') && !config.ORIGIN_SERVERS.length && !config.ORIGIN_DISCOVERY) {
    if (!given('ORIGIN_SOCKET')) config.ORIGIN_SOCKET = sockets.origin;
    config.ORIGIN_SERVERS = [`unix@${config.ORIGIN_SOCKET}`];
  }
  if (here('haproxy') && here('avatar-resolver') && !config.AVATAR_SERVERS.length) {
    if (!given('AVATAR_RESOLVER_SOCKET')) config.AVATAR_RESOLVER_SOCKET = sockets.resolver;
    config.AVATAR_SERVERS = [`unix@${config.AVATAR_RESOLVER_SOCKET}`];
  }
}

/**
 * This stack's varnish purge socket as a purge node (`unix:<path>`), or its TCP address where there is no
 * socket (VARNISH_SOCKET=off: compose, whose containers share no directory). @param {Record<string, any>} config
 */
function purgeSocketNode(config) {
  if (config.VARNISH_SOCKET === 'off') return `${config.VARNISH_HOST}:${config.VARNISH_PORT}`;
  return `unix:${socketPaths(config.STACK_DIR).purge}`;
}

/** Every program a machine of the stack can run (its supervisord program names). */
export const PROGRAMS = [
  'redis',
  'redis-sentinel',
  'versitygw',
  'origin',
  'avatar-resolver',
  'purge-service',
  'haproxy',
  'varnish',
  'nginx',
  'prometheus',
  'varnish-exporter',
  'nginx-exporter',
  'redis-exporter',
  'mtail',
  'rotate-logs',
];

/**
 * The programs this machine runs: STACK_PROGRAMS, or every one but the sentinel (one box); versitygw only
 * when it is this stack's S3 (STORE=s3 without S3_ENDPOINT).
 * @param {Record<string, any>} config @returns {string[]}
 */
function stackPrograms(config) {
  const unknown = config.STACK_PROGRAMS.filter((/** @type {string} */ name) => !PROGRAMS.includes(name));
  if (unknown.length) throw new Error(`STACK_PROGRAMS: ${unknown.join(', ')} is not one of ${PROGRAMS.join(', ')}`);
  const chosen = config.STACK_PROGRAMS.length
    ? config.STACK_PROGRAMS
    : PROGRAMS.filter((name) => name !== 'redis-sentinel');
  return chosen.filter((/** @type {string} */ name) => name !== 'versitygw' || config.S3_EMBEDDED);
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
  if (explicit)
    throw new Error(
      `STACK_DIR=${dir}: varnish and nginx's workers run as their own users and cannot reach it (a directory on its path is not searchable by others); choose another STACK_DIR`,
    );
  repairSharedRoot(SHARED_RUN_ROOT);
  return sharedDirOf(ROOT);
}

/**
 * A checkout's own directory under the shared run root, /var/lib/image-cdn-stack/<checkout>-<hash of its
 * path>: its run directory when private to root, and its app copy's parent. @param {string} root
 */
export function sharedDirOf(root) {
  const hash = createHash('sha256').update(root).digest('hex').slice(0, 8);
  return path.join(SHARED_RUN_ROOT, `${path.basename(root)}-${hash}`);
}

/** @param {Record<string, string | undefined>} env */
function definedOnly(env) {
  return /** @type {Record<string, string>} */ (
    Object.fromEntries(Object.entries(env).filter(([, value]) => value !== undefined))
  );
}
