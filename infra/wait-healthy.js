// Waits until every component of a started stack answers its health check and supervisord calls each of its
// programs RUNNING; on failure names the component and prints the end of its log. Reads the resolved
// settings from the environment.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import { get } from 'node:http';
import net from 'node:net';
import path from 'node:path';

const env = process.env;
/** An address to reach a service bound to this one. @param {string | undefined} address */
const reach = (address) => (address === '0.0.0.0' ? '127.0.0.1' : String(address));
const host = reach(env.LISTEN_ADDRESS);
const auth = `Basic ${Buffer.from(`${env.HAPROXY_STATS_USER}:${env.HAPROXY_STATS_PASSWORD}`).toString('base64')}`;

/** @param {string} url @param {Record<string, string>} [headers] @param {number[]} [ok] */
const http =
  (url, headers = {}, ok = [200]) =>
  async () =>
    ok.includes((await fetch(url, { headers, signal: AbortSignal.timeout(1000), redirect: 'manual' })).status);
/** GET /healthz of a service on a Unix socket (INTERNAL_SOCKETS): 200. @param {string} socketPath */
export const httpOnSocket = (socketPath) => () =>
  new Promise((resolve) => {
    const request = get({ socketPath, path: '/healthz', timeout: 1000 }, (response) => {
      response.resume();
      resolve(response.statusCode === 200);
    });
    request.on('timeout', () => request.destroy());
    request.on('error', () => resolve(false));
  });
/** @param {string} address @param {number} port */
const tcp = (address, port) => () =>
  new Promise((resolve) => {
    const socket = net.connect(port, address, () => {
      socket.end();
      resolve(true);
    });
    socket.on('error', () => resolve(false));
  });

/**
 * haproxy answers, and has this stack's own origin and resolver UP and at least one server UP in each
 * backend: a service slow to start fails haproxy's first check and stays DOWN until it passes `rise` checks,
 * while requests meet a 503. Other machines' servers (a fleet's ORIGIN_SERVERS) may come up later.
 * @param {string} url
 */
const serversUp = (url) => async () => {
  const response = await fetch(url, { headers: { authorization: auth }, signal: AbortSignal.timeout(1000) });
  if (!response.ok) return false;
  const [header, ...rows] = (await response.text()).split('\n').map((line) => line.split(','));
  const column = (/** @type {string} */ name) => header.indexOf(name === 'pxname' ? '# pxname' : name);
  const [proxy, server, status, addr] = ['pxname', 'svname', 'status', 'addr'].map(column);
  const own = [`${reach(env.ORIGIN_HOST)}:${env.ORIGIN_PORT}`, `${host}:${env.AVATAR_RESOLVER_PORT}`];
  return ['be_images', 'be_avatars'].every((backend) => {
    const servers = rows.filter(
      (row) => row[proxy] === backend && row[server] !== 'BACKEND' && row[server] !== 'FRONTEND',
    );
    const up = servers.filter((row) => row[status] === 'UP');
    // a server on a Unix socket (INTERNAL_SOCKETS) is this machine's; haproxy shows it with no address
    const ours = (/** @type {string[]} */ row) =>
      !row[addr] || row[addr].startsWith('unix@') || own.includes(row[addr]);
    return up.length > 0 && servers.every((row) => row[status] === 'UP' || !ours(row));
  });
};

/**
 * Every backend of varnish healthy by its own probes (`varnishadm backend.list`). varnish's probes go through
 * haproxy to the same /healthz as haproxy's checks, each on its own clock: haproxy's servers UP, varnish may
 * still call a backend sick until its next probe passes (up to 2 s; with the earlier 3 of 5, up to 6 s, and
 * the compat tests, first thing after `up`, met varnish's 503 for avatars under a busy CI). True where
 * varnishadm cannot tell: not installed, or the varnish directory another user's.
 * @param {string} dir varnishd's -n directory
 */
export const varnishBackendsHealthy = (dir) => () =>
  new Promise((resolve) => {
    execFile('varnishadm', ['-n', dir, 'backend.list'], { timeout: 2000 }, (err, stdout, stderr) => {
      const code = err && /** @type {NodeJS.ErrnoException} */ (err).code;
      if (code === 'ENOENT' || (err && /denied/i.test(stderr))) return resolve(true);
      const backends = stdout.split('\n').filter((line) => /^\S+\.\S+\s/.test(line));
      resolve(!err && backends.length > 0 && backends.every((line) => /\shealthy\b/.test(line)));
    });
  });

/** Both checks pass, the second asked once the first does. @param {() => Promise<boolean>} first @param {() => Promise<boolean>} then */
const both = (first, then) => async () => (await first()) && then();

/** haproxy, varnish's next hop, runs on this machine (STACK_PROGRAMS: all of them when unset). */
const ownHaproxy = !env.STACK_PROGRAMS || env.STACK_PROGRAMS.split(',').includes('haproxy');

/** component (its supervisord program and log) → check @type {Record<string, () => Promise<boolean>>} */
const ALL_CHECKS = {
  redis: tcp(host, Number(env.REDIS_PORT)),
  'redis-sentinel': tcp(host, Number(env.REDIS_SENTINEL_PORT)),
  versitygw: tcp(host, Number(env.S3_PORT)),
  origin: env.ORIGIN_SOCKET
    ? httpOnSocket(env.ORIGIN_SOCKET)
    : http(`http://${reach(env.ORIGIN_HOST)}:${env.ORIGIN_PORT}/healthz`),
  'avatar-resolver': env.AVATAR_RESOLVER_SOCKET
    ? httpOnSocket(env.AVATAR_RESOLVER_SOCKET)
    : http(`http://${host}:${env.AVATAR_RESOLVER_PORT}/healthz`),
  'purge-service': http(`http://${host}:${env.PURGE_SERVICE_PORT}/healthz`),
  haproxy: serversUp(`http://${env.HAPROXY_STATS_BIND}:${env.HAPROXY_STATS_PORT}/stats;csv`),
  // and, where its backends are this machine's haproxy, varnish calls them healthy (another machine's may
  // come up later, as in serversUp)
  varnish: both(
    env.VARNISH_TCP === 'false'
      ? httpOnSocket(String(env.VARNISH_SOCKET))
      : http(`http://${host}:${env.VARNISH_PORT}/healthz`),
    ownHaproxy ? varnishBackendsHealthy(path.join(String(env.STACK_DIR), 'run', 'varnish')) : async () => true,
  ),
  nginx: http(`http://${env.NGINX_BIND === '0.0.0.0' ? '127.0.0.1' : env.NGINX_BIND}:${env.NGINX_PORT}/healthz`),
  // Prometheus asks everyone for the metrics password (its web.yml)
  prometheus: http(`http://${host}:${env.PROMETHEUS_PORT}/-/ready`, {
    authorization: `Basic ${Buffer.from(`metrics:${env.METRICS_PASSWORD}`).toString('base64')}`,
  }),
  'varnish-exporter': http(`http://${host}:${env.VARNISH_EXPORTER_PORT}/metrics`),
  'nginx-exporter': http(`http://${host}:${env.NGINX_EXPORTER_PORT}/metrics`),
  'redis-exporter': http(`http://${host}:${env.REDIS_EXPORTER_PORT}/metrics`),
  mtail: http(`http://${host}:${env.MTAIL_PORT}/metrics`),
};

/**
 * The programs supervisord has not called RUNNING yet, each with its state ("prometheus STARTING"): a program
 * is RUNNING once it has stayed up its `startsecs`, so one that answers its check and dies a moment later
 * (BACKOFF) is not up, and `up` returns only when `status` shows every program RUNNING. One line saying what
 * supervisorctl said when supervisord does not answer. @param {string} conf supervisord.conf
 * @returns {Promise<string[]>}
 */
export const notRunning = (conf) =>
  new Promise((resolve) => {
    // `status` exits 3 while a program is not running; its lines are there all the same
    execFile('supervisorctl', ['-c', conf, 'status'], { timeout: 5000 }, (err, stdout) => {
      const states = [...stdout.matchAll(PROGRAM_STATE)].map((match) => `${match[1]} ${match[2]}`);
      const said = stdout.trim().split('\n')[0] || (err ? err.message.split('\n')[0] : 'no program');
      resolve(states.length ? states.filter((state) => !state.endsWith(' RUNNING')) : [`supervisord: ${said}`]);
    });
  });
/** A line of `supervisorctl status`: a program and its state (supervisor's process states). */
const PROGRAM_STATE = /^(\S+)\s+(STOPPED|STARTING|RUNNING|BACKOFF|STOPPING|EXITED|FATAL|UNKNOWN)\b/gm;

/** The checks of the programs this machine runs (STACK_PROGRAMS, resolved by the renderer). */
export const CHECKS = Object.fromEntries(
  Object.entries(ALL_CHECKS).filter(([name]) => !env.STACK_PROGRAMS || env.STACK_PROGRAMS.split(',').includes(name)),
);

async function main() {
  const deadline = Date.now() + Number(env.STACK_START_TIMEOUT_MS || 60_000);
  const pending = new Set(Object.keys(CHECKS));
  while (pending.size && Date.now() < deadline) {
    await Promise.all(
      [...pending].map(async (name) => {
        if (await CHECKS[name]().catch(() => false)) pending.delete(name);
      }),
    );
    if (pending.size) await new Promise((resolve) => setTimeout(resolve, 200));
  }
  for (const name of pending) {
    const log = path.join(String(env.STACK_DIR), 'logs', `${name}.log`);
    process.stderr.write(`\n✗ ${name} did not become healthy. End of ${log}:\n${tailOf(log)}\n`);
  }
  if (pending.size) process.exit(1);
  // every check answered: each program past its startsecs too (the answer came before supervisord's verdict)
  const conf = path.join(String(env.STACK_DIR), 'conf', 'supervisord.conf');
  let waiting = await notRunning(conf);
  while (waiting.length && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 200));
    waiting = await notRunning(conf);
  }
  for (const state of waiting) {
    const log = path.join(String(env.STACK_DIR), 'logs', `${state.split(' ')[0]}.log`);
    process.stderr.write(`\n✗ ${state}: not running under supervisord. End of ${log}:\n${tailOf(log)}\n`);
  }
  process.exit(waiting.length ? 1 : 0);
}

/** The last 20 lines of a log, or why there are none. @param {string} log */
const tailOf = (log) =>
  fs.existsSync(log) ? fs.readFileSync(log, 'utf8').split('\n').slice(-20).join('\n') : '(no log)';

if (import.meta.main) main();
