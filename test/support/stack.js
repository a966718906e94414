import { execFile, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Agent, fetch as undiciFetch } from 'undici';
import { socketPaths } from '../../infra/resolve.js';
import { servicePid } from '../../lib/src/hold-socket.js';
import { stackUsers } from '../../infra/users.js';
import { TEST_METRICS_PASSWORD, metricsAuth } from './metrics.js';
import { freePort, waitFor } from './ports.js';
import { alive, root, startProcess } from './processes.js';

const run = promisify(execFile);

/** @type {Map<string, Agent>} */
const agents = new Map();
/** One agent per socket, kept for the run. @param {string} socketPath */
function socketAgent(socketPath) {
  let agent = agents.get(socketPath);
  if (!agent) agents.set(socketPath, (agent = new Agent({ connect: { socketPath } })));
  return agent;
}

/** Whether a Redis server answers PING on this port, given its password. @param {number} port @param {string} password @returns {Promise<boolean>} */
function redisPong(port, password) {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.write(`AUTH ${password}\r\nPING\r\n`));
    socket.setTimeout(1000, () => socket.destroy());
    let answer = '';
    socket.on('data', (data) => {
      answer += data.toString();
      if (!answer.includes('\r\n', answer.indexOf('\r\n') + 2)) return;
      resolve(answer === '+OK\r\n+PONG\r\n');
      socket.destroy();
    });
    socket.on('error', () => resolve(false));
    socket.on('close', () => resolve(false));
  });
}

/**
 * Kills `target` (a program's pid, 0 when it is not running) by `kill`, and waits until it is gone; its pid.
 * @param {string} name @param {number} target @param {() => Promise<unknown>} kill
 */
async function killed(name, target, kill) {
  if (!target) throw new Error(`${name} is not running: nothing to kill`);
  await kill();
  await waitFor(async () => !alive(target), 5000, `${name} (pid ${target}) gone after SIGKILL`);
  return target;
}

const PORTS = [
  'NGINX_PORT',
  'NGINX_TLS_PORT',
  'NGINX_STATUS_PORT',
  'VARNISH_PORT',
  'VARNISH_ADMIN_PORT',
  'HAPROXY_IMAGES_PORT',
  'HAPROXY_AVATARS_PORT',
  'HAPROXY_STATS_PORT',
  'ORIGIN_PORT',
  'ORIGIN_METRICS_PORT',
  'AVATAR_RESOLVER_PORT',
  'AVATAR_RESOLVER_METRICS_PORT',
  'PURGE_SERVICE_PORT',
  'PURGE_SERVICE_METRICS_PORT',
  'REDIS_PORT',
  'PROMETHEUS_PORT',
  'VARNISH_EXPORTER_PORT',
  'NGINX_EXPORTER_PORT',
  'REDIS_EXPORTER_PORT',
  'MTAIL_PORT',
];

// in a private mount namespace ($0: the file; then the command)
const BIND_HOSTS = 'mount --bind "$0" /etc/hosts && exec "$@"';

/**
 * A file to be a stack's /etc/hosts (startStack's `hostsFile`): this machine's own lines and `names` (name →
 * address), rewritten in place by `set` (the programs see the same file), or null where this process cannot
 * make a private mount namespace (not root). @param {Record<string, string>} names
 */
export function privateHosts(names) {
  if (spawnSync('unshare', ['--mount', 'true']).status !== 0) return null;
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'hosts-')), 'hosts');
  const own = fs.readFileSync('/etc/hosts', 'utf8');
  /** @param {Record<string, string>} now */
  const set = (now) => {
    const lines = Object.entries(now).map(([name, address]) => `${address} ${name}`);
    fs.writeFileSync(file, `${own}\n${lines.join('\n')}\n`, { mode: 0o644 });
  };
  set(names);
  return { file, set, remove: () => fs.rmSync(path.dirname(file), { recursive: true, force: true }) };
}

/**
 * An isolated stack started through the launcher (./infra/stack up) on free ports in its own STACK_DIR,
 * so it never collides with a stack a person is running. `hostsFile`: the stack's programs see that file as
 * their /etc/hosts (every launcher command runs in a private mount namespace where it is bound there; root
 * only, see `privateHosts`), so a test can give names addresses and move them.
 * @param {Record<string, string>} [settings] @param {{ hostsFile?: string }} [options]
 */
export async function startStack(settings = {}, { hostsFile } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stack-'));
  fs.chmodSync(dir, 0o755);
  /** @type {Record<string, string>} */
  const env = {
    STACK_DIR: dir,
    ENV_FILE: path.join(dir, 'none.env'),
    LOG_LEVEL: 'warn',
    HAPROXY_STATS_PASSWORD: 'stats-test-password',
    METRICS_PASSWORD: TEST_METRICS_PASSWORD,
    REDIS_PASSWORD: 'redis-test-password',
  };
  for (const name of PORTS) env[name] = String(await freePort());
  Object.assign(env, settings);
  const childEnv = { ...process.env, ...env };
  const launcher = path.join(root, 'infra/stack');
  const options = { env: childEnv, cwd: root, maxBuffer: 10 * 1024 * 1024 };
  const stack = /** @type {(args: string[]) => Promise<{ stdout: string, stderr: string }>} */ (
    (args) =>
      hostsFile
        ? run('unshare', ['--mount', '--', 'sh', '-c', BIND_HOSTS, hostsFile, launcher, ...args], options)
        : run(launcher, args, options)
  );
  const started = Date.now();
  try {
    await stack(['up']);
  } catch (err) {
    const failure = /** @type {any} */ (err);
    await stack(['down']).catch(() => {});
    fs.rmSync(dir, { recursive: true, force: true });
    throw new Error(`stack up failed:\n${failure.stdout}\n${failure.stderr}`);
  }
  const upMs = Date.now() - started;
  const base = `http://127.0.0.1:${env.NGINX_PORT}`;
  /**
   * supervisorctl in this stack; throws when it fails (exit status not 0), so a test never goes on as if a
   * stop, start or signal had happened. `status` exits 3 while a program is down: use `statusText`.
   * @param {...string} args
   */
  const ctl = (...args) => run('supervisorctl', ['-c', path.join(dir, 'conf/supervisord.conf'), ...args]);
  /** varnishadm backend.list's line for a backend (images, avatars). @param {string} backend */
  const backendLine = async (backend) => {
    const { stdout } = await run('varnishadm', ['-n', path.join(dir, 'run/varnish'), 'backend.list']);
    return stdout.split('\n').find((entry) => entry.includes(`.${backend} `)) || '';
  };
  /** The pid of a program, 0 when it is not running (supervisorctl then exits 7). @param {string} name */
  const pid = async (name) => {
    const { stdout } = await ctl('pid', name).catch((/** @type {any} */ err) => {
      if (err.code === 7) return err;
      throw err;
    });
    return Number(String(stdout).trim()) || 0;
  };
  const statsAuth = `Basic ${Buffer.from(`admin:${env.HAPROXY_STATS_PASSWORD}`).toString('base64')}`;
  const sockets = socketPaths(dir);
  const ports = {
    varnish: env.VARNISH_PORT,
    origin: env.ORIGIN_PORT,
    resolver: env.AVATAR_RESOLVER_PORT,
    'purge-service': env.PURGE_SERVICE_PORT,
    images: env.HAPROXY_IMAGES_PORT,
    avatars: env.HAPROXY_AVATARS_PORT,
  };
  /**
   * A request straight to a program past nginx and varnish, as an operator on this machine makes it: on its
   * Unix socket where it has one (INTERNAL_SOCKETS), else on its port. Throws when it cannot connect.
   * @param {keyof typeof ports} program @param {string} pathname @param {import('undici').RequestInit} [init]
   */
  const direct = async (program, pathname, init = {}) => {
    const socketPath = program === 'purge-service' ? '' : sockets[program];
    if (socketPath && fs.existsSync(socketPath))
      return undiciFetch(`http://${program}${pathname}`, { ...init, dispatcher: socketAgent(socketPath) });
    return undiciFetch(`http://127.0.0.1:${ports[program]}${pathname}`, init);
  };
  return {
    /**
     * A request straight to varnish, the origin, the resolver, the purge service or one of haproxy's
     * frontends (images, avatars): on its Unix socket where it has one, else on its port.
     */
    direct,
    dir,
    env,
    upMs,
    base,
    /** The stack's Redis, with its password. */
    redisUrl: `redis://:${env.REDIS_PASSWORD}@127.0.0.1:${env.REDIS_PORT}/0`,
    stack,
    ctl,
    pid,
    /**
     * The pid of the process that does a service's work: the one hold-socket runs where it holds the
     * service's socket (lib/src/hold-socket.js), else the program's own; 0 when none runs.
     * @param {string} name
     */
    servicePid: async (name) => servicePid(await pid(name)),
    /** SIGKILL the process doing a service's work (a crash, the kernel's OOM killer) and prove it happened. @param {string} name */
    async killService(name) {
      const target = servicePid(await pid(name));
      return killed(name, target, async () => process.kill(target, 'SIGKILL'));
    },
    /** SIGKILL a program and prove it happened: its pid is gone from the system. @param {string} name */
    async kill(name) {
      return killed(name, await pid(name), () => ctl('signal', 'KILL', name));
    },
    /**
     * ./infra/stack reload with these settings over the stack's own (as an operator edits .env and reloads);
     * rejects with the launcher's exit code, stdout and stderr when it fails. @param {Record<string, string>} changes
     */
    reload(changes) {
      return run(path.join(root, 'infra/stack'), ['reload'], {
        env: { ...childEnv, ...changes },
        cwd: root,
        maxBuffer: 10 * 1024 * 1024,
      });
    },
    /** The series a PromQL query finds on this stack's Prometheus now. @param {string} expr */
    async prometheus(expr) {
      const response = await fetch(
        `http://127.0.0.1:${env.PROMETHEUS_PORT}/api/v1/query?query=${encodeURIComponent(expr)}`,
        { headers: metricsAuth() },
      );
      return /** @type {Array<{ metric: Record<string, string>, value: [number, string] }>} */ (
        /** @type {any} */ (await response.json()).data.result
      );
    },
    /** ./infra/stack status: supervisord's lines, and the held services' own. */
    status() {
      return stack(['status']);
    },
    /** ./infra/stack restart PROGRAM … (after an update of the code). @param {...string} programs */
    restart(...programs) {
      return stack(['restart', ...programs]);
    },
    /** varnishstat counters of this stack's varnish. */
    async varnishStats() {
      const { stdout } = await run('varnishstat', ['-n', path.join(dir, 'run/varnish'), '-1', '-j']);
      const data = JSON.parse(stdout);
      const counters = data.counters || data;
      return (/** @type {string} */ name) => Number(counters[name]?.value ?? 0);
    },
    /**
     * Starts a program and waits until it serves: supervisord calls a program started after `startsecs`,
     * which on a busy machine can be before it listens. @param {string} name
     */
    async start(name) {
      await ctl('start', name);
      const service = /** @type {Record<string, 'origin' | 'resolver' | 'purge-service'>} */ ({
        origin: 'origin',
        'avatar-resolver': 'resolver',
        'purge-service': 'purge-service',
      })[name];
      if (service) await waitFor(async () => (await direct(service, '/healthz')).ok, 30_000, `${name} serving`);
      if (name === 'redis')
        await waitFor(() => redisPong(Number(env.REDIS_PORT), env.REDIS_PASSWORD), 30_000, 'redis serving');
    },
    /** What varnish's probe says of a backend (images, avatars): healthy, sick or unknown. @param {string} backend */
    async backendHealth(backend) {
      const line = await backendLine(backend);
      return /\bsick\b/.test(line) ? 'sick' : /\bhealthy\b/.test(line) ? 'healthy' : `unknown: ${line}`;
    },
    /**
     * Waits until varnish's probes (through haproxy's own health checks) call both backends healthy again:
     * after a crash the two checks in a row take seconds to agree, and a test starting in between meets
     * a varnish that still refuses what it cannot serve from its cache.
     */
    async settled() {
      // every probe of the window good ("5/5"): "healthy" alone lags a crash by the probes still to fail
      const full = async (/** @type {string} */ backend) => /\s(\d+)\/\1\s+healthy\b/.test(await backendLine(backend));
      for (const backend of ['images', 'avatars'])
        await waitFor(
          () => full(backend),
          60_000,
          `varnish's ${backend} backend healthy, every probe of its window good`,
        );
    },
    /** haproxy's stats as records keyed by the CSV's column names (pxname, svname, status, scur, …). */
    async haproxyStats() {
      const response = await fetch(`http://127.0.0.1:${env.HAPROXY_STATS_PORT}/stats;csv`, {
        headers: { authorization: statsAuth },
      });
      const [header, ...rows] = (await response.text())
        .trim()
        .split('\n')
        .map((line) => line.split(','));
      const names = header.map((name) => name.replace(/^# /, ''));
      return rows.map((row) => Object.fromEntries(names.map((name, i) => [name, row[i]])));
    },
    /**
     * Another varnish node on `port`, from this stack's rendered VCL, named `name` (X-Served-By; work
     * directory run/varnish-<name>); resolves once it serves. It resolves names once, at start (no follower
     * of addresses). @param {string} name @param {number} port
     */
    async startVarnish(name, port, storage = 'malloc,64M') {
      const conf = path.join(dir, 'conf', 'varnish');
      // as the edge's user, as the stack's own varnish runs (only that user reaches haproxy's sockets)
      const work = path.join(dir, 'run', `varnish-${name}`);
      // the stack's users exist when it runs as root (infra/users.js); the prefix is the settings' default
      const edge = stackUsers({ STACK_USER_PREFIX: env.STACK_USER_PREFIX ?? 'image-cdn-' })?.edge;
      fs.mkdirSync(work, { recursive: true });
      if (edge) fs.chownSync(work, edge.uid, edge.gid);
      const asEdge = edge ? ['setpriv', `--reuid=${edge.uid}`, `--regid=${edge.gid}`, '--init-groups'] : [];
      // in the stack's own /etc/hosts (hostsFile): it resolves haproxy's name as the stack's varnish does
      const inHosts = hostsFile ? ['unshare', '--mount', '--', 'sh', '-c', BIND_HOSTS, hostsFile] : [];
      const [command, ...prefix] = [...inHosts, ...asEdge, 'varnishd'];
      const node = startProcess(command, [
        ...prefix,
        '-F',
        '-n',
        work,
        '-i',
        name,
        '-a',
        `127.0.0.1:${port}`,
        '-T',
        `127.0.0.1:${await freePort()}`,
        '-f',
        path.join(conf, 'default.vcl'),
        '-p',
        `vcl_path=${conf}`,
        '-s',
        storage,
      ]);
      await waitFor(
        async () => (await fetch(`http://127.0.0.1:${port}/healthz`).catch(() => null))?.status === 200,
        30_000,
        `varnish ${name} serving`,
      );
      return node;
    },
    /** `supervisorctl status` whatever the programs' states. */
    statusText: async () => (await ctl('status').catch((/** @type {any} */ err) => err)).stdout,
    statsAuth,
    /** @param {string} file */
    log: (file) => fs.readFileSync(path.join(dir, 'logs', file), 'utf8'),
    /**
     * What each layer says now, for a failure's message: the programs' states, varnish's probes, haproxy's
     * servers and their last checks, and the end of the named logs (the resolver's and the origin's by default).
     */
    async diagnosis(logs = ['avatar-resolver.log', 'origin.log', 'haproxy.log', 'supervisord.log']) {
      const says = async (/** @type {() => Promise<string> | string} */ read) => {
        try {
          return await read();
        } catch (err) {
          return String(err);
        }
      };
      const servers = async () =>
        (await this.haproxyStats())
          .filter((row) => row.svname !== 'FRONTEND' && row.svname !== 'BACKEND')
          .map((row) => `${row.pxname}/${row.svname} ${row.status} ${row.check_status} ${row.last_chk}`)
          .join('\n');
      const tail = (/** @type {string} */ file) => this.log(file).trimEnd().split('\n').slice(-15).join('\n');
      const parts = [
        `supervisorctl status:\n${await says(this.statusText)}`,
        `varnish probes:\n${await says(() => backendLine('images'))}\n${await says(() => backendLine('avatars'))}`,
        `haproxy servers:\n${await says(servers)}`,
        ...(await Promise.all(logs.map(async (file) => `${file}:\n${await says(() => tail(file))}`))),
      ];
      return parts.join('\n\n');
    },
    async stop() {
      await stack(['down']).catch(() => {});
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
