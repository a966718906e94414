// The multi-node layout from the stack's own settings: three machines, each one native stack (the same
// templates, infra/render.js) running the programs its role needs.
//
//   a: edge (nginx, varnish node a, haproxy), origin, avatar resolver, purge service, Redis master,
//      sentinel, the embedded S3 server (versitygw), Prometheus scraping every machine
//   b: edge (nginx, varnish node b, haproxy), origin, avatar resolver, purge service, Redis replica, sentinel
//   c: the third sentinel
//
// Every nginx hashes URLs over both varnish nodes, every haproxy balances both origins and both resolvers,
// both purge services consume the one purge stream (a consumer each) and purge both varnish nodes, every
// service finds the Redis master through the three sentinels and acknowledges an event once the replica
// holds it.
//
//   node infra/fleet.js [--hosts A,B,C] [--dir DIR]   writes DIR/<machine>.env (0600) and prints DIR
//   node infra/fleet.js [--hosts A,B,C] --ready        waits until the three sentinels know each other and the replica
//
// On one machine (the default) the three are loopback addresses (127.0.1.1-3: the whole 127.0.0.0/8 is
// loopback on Linux) and `./infra/stack fleet up` starts them. On three machines, pass their addresses:
// each machine's file is its .env (ENV_FILE), with the same checkout and `./infra/stack up`.
import '../lib/src/node-version.js';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { makeDir } from './dirs.js';
import { PROGRAMS, resolveSettings } from './resolve.js';

export const MACHINES = ['a', 'b', 'c'];
const run = promisify(execFile);

/**
 * Each machine's settings. `secrets` are shared by the machines (the S3 keys of the one bucket, the stats
 * password). On one host each machine's run directory is `dir`/<machine>; separate machines keep their default.
 * @param {string[]} hosts a, b and c's addresses @param {Record<string, string>} secrets @param {string} dir
 * @returns {Record<string, Record<string, string>>}
 */
export function fleetSettings(hosts, secrets, dir) {
  const [a, b, c] = hosts;
  const both = (/** @type {number} */ port) => `${a}:${port},${b}:${port}`;
  const loopback = hosts.every((host) => host.startsWith('127.'));
  const scrape = [
    ['origin', 9800],
    ['avatar-resolver', 9801],
    ['purge-service', 9802],
    ['varnish', 9131],
    ['nginx', 9113],
    // nginx's checks of the varnish nodes, on its status port
    ['edge-nodes', 8089],
    ['redis', 9121],
    ['mtail', 3903],
    ['haproxy', 8404],
  ]
    .flatMap(([job, port]) => [a, b].map((host) => `${job}=${host}:${port}`))
    .join(',');
  const shared = {
    STORE: 's3',
    ...secrets,
    EDGE_VARNISH_NODES: both(6081),
    ORIGIN_SERVERS: both(8800),
    AVATAR_SERVERS: both(8801),
    REDIS_SENTINELS: `${a}:26379,${b}:26379,${c}:26379`,
    REDIS_MASTER_NAME: 'images',
    REDIS_ACK_REPLICAS: '1',
    // a load balancer (or the CDN) in front of both nginx in a real fleet
    PUBLIC_URL: `http://${a}:8080`,
    // every purge service may purge every node (on one host they connect from 127.0.0.1)
    VARNISH_PURGERS: [a, b, ...(loopback ? ['127.0.0.1'] : [])].join(','),
  };
  /** @param {string} host @param {string} name */
  const machine = (host, name) => ({
    ...(loopback ? { STACK_DIR: path.join(dir, name) } : {}),
    LISTEN_ADDRESS: host,
    NGINX_BIND: host,
    HAPROXY_STATS_BIND: host,
    VARNISH_IDENTITY: name,
    PURGE_CONSUMER: name,
    REDIS_URL: `redis://${host}:6379/0`,
  });
  const edge = PROGRAMS.filter((program) => !['versitygw', 'prometheus'].includes(program));
  return {
    a: {
      ...shared,
      ...machine(a, 'a'),
      STACK_PROGRAMS: [...edge, 'versitygw', 'prometheus'].join(','),
      PROMETHEUS_SCRAPE: scrape,
    },
    b: {
      ...shared,
      ...machine(b, 'b'),
      STACK_PROGRAMS: edge.join(','),
      REDIS_REPLICA_OF: `${a}:6379`,
      S3_ENDPOINT: `http://${a}:7070`,
    },
    c: { ...shared, ...machine(c, 'c'), STACK_PROGRAMS: 'redis-sentinel', REDIS_SENTINEL_MONITOR: `${a}:6379` },
  };
}

/** The secrets every machine of a fleet shares, and how each is made. */
const SHARED_SECRETS = /** @type {Array<[string, () => string]>} */ ([
  ['S3_ACCESS_KEY_ID', () => `fleet${randomBytes(8).toString('hex')}`],
  ['S3_SECRET_ACCESS_KEY', () => randomBytes(24).toString('base64url')],
  // one stats password: a's Prometheus scrapes every haproxy with it
  ['HAPROXY_STATS_PASSWORD', () => randomBytes(18).toString('base64url')],
  // one metrics password: a's Prometheus scrapes every machine's services with it
  ['METRICS_PASSWORD', () => randomBytes(18).toString('base64url')],
  // Redis, its replica and the sentinels: one password
  ['REDIS_PASSWORD', () => randomBytes(18).toString('base64url')],
]);

/** The fleet's shared secrets, made once and kept in DIR/secrets.env (0600); one added later is made then. @param {string} dir */
function sharedSecrets(dir) {
  const file = path.join(dir, 'secrets.env');
  const kept = fs.existsSync(file) ? fs.readFileSync(file, 'utf8').trim().split('\n').filter(Boolean) : [];
  /** @type {Record<string, string>} */
  const secrets = Object.fromEntries(
    kept.map((line) => /** @type {[string, string]} */ (line.split(/=(.*)/s).slice(0, 2))),
  );
  const missing = SHARED_SECRETS.filter(([name]) => !(name in secrets));
  for (const [name, make] of missing) secrets[name] = make();
  if (missing.length)
    fs.writeFileSync(
      file,
      `${Object.entries(secrets)
        .map(([name, value]) => `${name}=${value}`)
        .join('\n')}\n`,
      { mode: 0o600 },
    );
  return secrets;
}

/**
 * Waits until every sentinel knows the master, the two other sentinels and the replica. A sentinel learns of a
 * replica from the master's INFO, asked every 10 s: one started moments before the replica was, if elected
 * to fail over before its next ask, finds no replica to promote and gives up until its next attempt
 * (twice the failover timeout later; seen in the fleet test).
 * @param {string[]} hosts @param {string} password the fleet's REDIS_PASSWORD
 */
async function sentinelsReady(hosts, password) {
  const deadline = Date.now() + 60_000;
  const env = { ...process.env, REDISCLI_AUTH: password };
  /** @type {string[]} */
  let waiting = hosts;
  while (Date.now() < deadline) {
    const views = await Promise.all(
      hosts.map((host) =>
        run('redis-cli', ['-h', host, '-p', '26379', '--raw', 'sentinel', 'master', 'images'], { env }).then(
          ({ stdout }) => stdout,
          () => '',
        ),
      ),
    );
    waiting = hosts.filter(
      (_, i) => !/\bnum-slaves\n[1-9]/.test(views[i]) || !/\bnum-other-sentinels\n2\b/.test(views[i]),
    );
    if (!waiting.length) return;
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  throw new Error(
    `the sentinels of ${waiting.join(', ')} do not know the replica and the two other sentinels after 60 s`,
  );
}

async function main() {
  const { values } = parseArgs({
    options: {
      hosts: { type: 'string', default: '127.0.1.1,127.0.1.2,127.0.1.3' },
      dir: { type: 'string' },
      ready: { type: 'boolean' },
    },
  });
  const hosts = String(values.hosts).split(',');
  if (hosts.length !== 3) throw new Error('--hosts: three addresses, for a, b and c');
  // beside the default run directory (which moves out of a private checkout for root)
  const dir = path.resolve(
    values.dir || `${(await resolveSettings({ ...process.env, STACK_DIR: '' })).STACK_DIR}-fleet`,
  );
  makeDir(dir, 0o755);
  if (values.ready) return sentinelsReady(hosts, sharedSecrets(dir).REDIS_PASSWORD);
  for (const [name, settings] of Object.entries(fleetSettings(hosts, sharedSecrets(dir), dir))) {
    const lines = Object.entries(settings).map(([key, value]) => `${key}=${value}`);
    fs.writeFileSync(
      path.join(dir, `${name}.env`),
      `# machine ${name} of the fleet (infra/fleet.js)\n${lines.join('\n')}\n`,
      { mode: 0o600 },
    );
  }
  process.stdout.write(`${dir}\n`);
}

if (import.meta.main) {
  main().catch((err) => {
    process.stderr.write(`fleet: ${err.message}\n`);
    process.exit(2);
  });
}
