// Two varnish nodes behind nginx (EDGE_VARNISH_NODES): the stack's own and a second varnishd started here
// from the same rendered VCL. Each URL is cached on one node (consistent hash); a node killed under steady
// traffic costs no error, its objects are fetched again once each and the other node's stay cached; a node
// that hangs is taken out by nginx's own checks in seconds and gets its URLs back when it answers; purges
// reach every node, and one that was away gets what it missed from its own queue when it is back.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { promisify } from 'node:util';
import { base58Url } from '@stack/lib';
import { solid } from './support/images.js';
import { fetchAsBrowser } from './support/kept-alive.js';
import { metricValue } from './support/metrics.js';
import { freePort, waitFor } from './support/ports.js';
import { privateHosts, startStack } from './support/stack.js';

const run = promisify(execFile);
/** @type {Awaited<ReturnType<typeof startStack>>} */
let stack;
/** @type {ReturnType<typeof import('./support/processes.js').startProcess> | null} */
let nodeB = null;
let portA = 0;
let portB = 0;
// the nodes by name, in a hosts file of the stack's own where this process may make one (root): nginx
// follows their addresses (infra/docker/follow-address.sh under supervisord) and its checks resolve them;
// the avatar resolver, which haproxy's resolvers (DNS only) cannot find: it keeps its address from start;
// haproxy (varnish's backend, nginx's upload check) and the purge service (nginx's webhooks route), which
// nginx's resolver (DNS only) cannot find either. Elsewhere by address.
const names = {
  'varnish-a.cluster.test': '127.0.0.1',
  'varnish-b.cluster.test': '127.0.0.1',
  'avatar-resolver.cluster.test': '127.0.0.1',
  'haproxy.cluster.test': '127.0.0.1',
  'purge.cluster.test': '127.0.0.1',
};
const hosts = privateHosts(names);
/** each node as EDGE_VARNISH_NODES names it (in nginx's log and its metrics; the purge service labels the address) */
let edgeNodeA = '';
let edgeNodeB = '';

/**
 * What answered 48 URLs of the edge (`/healthz?<tag>=0…47`, spread over the nodes by the hash): each a status and
 * the node that served it ("200 node-b"). Asked as a browser asks (test/support/kept-alive.js), as are the other
 * requests of these tests: the followers of addresses reload nginx and haproxy under them. @param {string} tag
 */
function whoServes(tag) {
  return Promise.all(
    Array.from({ length: 48 }, async (_, i) => {
      const response = await fetchAsBrowser(`${stack.base}/healthz?${tag}=${i}`);
      await response.arrayBuffer();
      return `${response.status} ${response.headers.get('x-served-by')}`;
    }),
  );
}

/** The second varnish node, named node-b; then the edge sends it its share. */
async function startNodeB() {
  nodeB = await stack.startVarnish('node-b', portB);
  // nginx tries a node it found refusing again after EDGE_VARNISH_FAIL_TIMEOUT_S (3 s), each worker on its own
  await new Promise((resolve) => setTimeout(resolve, 3500));
  /** @type {string[]} what answered the last 48 requests: the wait's message names them */
  let seen = [];
  await waitFor(
    async () => {
      seen = await whoServes('n');
      // its share of 48 URLs (about half: a few would be unlucky one time in a hundred, as ports vary)
      return seen.filter((answer) => answer === '200 node-b').length >= 8;
    },
    15_000,
    'the edge sending node-b its share',
  ).catch(async (err) => {
    const direct = await fetch(`http://127.0.0.1:${portB}/healthz`).then(
      (r) => `${r.status} ${r.headers.get('x-served-by')}`,
      (e) => String(e),
    );
    throw new Error(
      `${err.message}; last answers: ${seen.join(', ')}; node-b directly: ${direct}; its output: ${nodeB?.output().slice(-2000)}`,
    );
  });
}

/**
 * node-b's processes (its manager and its worker child) for pkill and pgrep: by this stack's own work
 * directory, so that another run of this file on the machine (another checkout's tiers) is never signalled.
 */
function nodeBProcesses() {
  const work = path.join(stack.dir, 'run', 'varnish-node-b');
  return `${work.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} -i node-b`;
}

/** SIGKILL node-b, its manager and its worker child alike. */
async function killNodeB() {
  await run('pkill', ['-KILL', '-f', nodeBProcesses()]).catch(() => {});
  await nodeB?.exited;
  await waitFor(
    async () => !(await fetch(`http://127.0.0.1:${portB}/healthz`).catch(() => null)),
    10_000,
    'node-b gone',
  );
  nodeB = null;
}

/** Each node's state as nginx's status port reports it (edge_varnish_node_up): node → '1' or '0'. */
async function nodeStates() {
  const text = await (await fetchAsBrowser(`http://127.0.0.1:${stack.env.NGINX_STATUS_PORT}/edge-nodes`)).text();
  return Object.fromEntries(
    [...text.matchAll(/^edge_varnish_node_up\{node="([^"]+)"\} (\d)$/gm)].map((m) => [m[1], m[2]]),
  );
}

before(async () => {
  portA = await freePort();
  portB = await freePort();
  edgeNodeA = `${hosts ? 'varnish-a.cluster.test' : '127.0.0.1'}:${portA}`;
  edgeNodeB = `${hosts ? 'varnish-b.cluster.test' : '127.0.0.1'}:${portB}`;
  const resolverPort = await freePort();
  const purgePort = await freePort();
  /** @type {Record<string, string>} */
  const byName = hosts
    ? {
        AVATAR_RESOLVER_PORT: String(resolverPort),
        AVATAR_SERVERS: `avatar-resolver.cluster.test:${resolverPort}`,
        HAPROXY_HOST: 'haproxy.cluster.test',
        PURGE_SERVICE_PORT: String(purgePort),
        PURGE_SERVICE_UPSTREAM: `purge.cluster.test:${purgePort}`,
      }
    : {};
  stack = await startStack(
    {
      VARNISH_PORT: String(portA),
      EDGE_VARNISH_NODES: `${edgeNodeA},${edgeNodeB}`,
      UPLOAD_TOKENS: 'cluster',
      AVATAR_ADMIN_TOKEN: 'cluster-admin',
      NGINX_RATE_LIMIT: '100000',
      NGINX_RATE_BURST: '100000',
      VARNISH_MISS_LIMIT: '0',
      PURGE_NODE_RETRY_MS: '200',
      // the two nodes are purged over TCP, from this machine
      VARNISH_PURGERS: '127.0.0.1',
      ...byName,
    },
    { hostsFile: hosts?.file },
  );
  await startNodeB();
});
after(async () => {
  await killNodeB();
  await stack?.stop();
  hosts?.remove();
});

/** The edge's answer to an upload of `body`. @param {Buffer} body */
function sendUpload(body) {
  const form = new FormData();
  form.append('image_file', new Blob([new Uint8Array(body)]), 'a.png');
  return fetch(`${stack.base}/upload`, { method: 'POST', headers: { authorization: 'Bearer cluster' }, body: form });
}

/** @param {Buffer} body */
async function upload(body) {
  const response = await sendUpload(body);
  assert.equal(response.status, 200);
  return /** @type {{ url: string }} */ (await response.json()).url;
}

/** @param {string} url @param {AbortSignal} [signal] */
async function get(url, signal) {
  const response = await fetchAsBrowser(url, { redirect: 'manual', signal });
  await response.arrayBuffer();
  return {
    status: response.status,
    node: response.headers.get('x-served-by'),
    cache: response.headers.get('x-cache'),
    location: response.headers.get('location'),
  };
}

const originRequests = () =>
  metricValue(`http://127.0.0.1:${stack.env.ORIGIN_METRICS_PORT}/metrics`, 'http_request_duration_seconds_count', {
    route: 'proxy',
  });

test("a varnish node killed under steady traffic: no error, its objects fetched again once each, the other node's stay cached", async () => {
  const source = await upload(await solid(400, 300, 'png'));
  const urls = Array.from({ length: 40 }, (_, i) => `${stack.base}/p/${base58Url.encode(source)}?width=${60 + i}`);
  for (const url of urls) assert.equal((await get(url)).status, 200);
  /** @type {Map<string, string>} url → node holding it */
  const holder = new Map();
  for (const url of urls) {
    const answer = await get(url);
    assert.equal(answer.cache, 'HIT', 'the second pass is served from cache');
    holder.set(url, String(answer.node));
  }
  const onB = urls.filter((url) => holder.get(url) === 'node-b');
  const onA = urls.filter((url) => holder.get(url) !== 'node-b');
  assert.ok(onA.length >= 5 && onB.length >= 5, `the URLs spread over both nodes (${onA.length} / ${onB.length})`);

  const before = await originRequests();
  /** @type {Array<{ url: string, status: number, node: string | null, cache: string | null }>} */
  const after = [];
  let stop = false;
  let killed = false;
  const traffic = (async () => {
    while (!stop) {
      for (const url of urls) {
        const answer = await get(url);
        if (killed) after.push({ url, ...answer });
      }
    }
  })();
  await new Promise((resolve) => setTimeout(resolve, 300));
  await killNodeB();
  killed = true;
  await new Promise((resolve) => setTimeout(resolve, 3000));
  stop = true;
  await traffic;
  assert.ok(after.length >= urls.length * 2, `${after.length} requests after the kill`);
  assert.deepEqual(
    after.filter((answer) => answer.status !== 200),
    [],
    'not one error',
  );
  assert.ok(after.every((answer) => answer.node !== 'node-b'));
  for (const answer of after.filter((entry) => onA.includes(entry.url)))
    assert.equal(answer.cache, 'HIT', `node A kept ${answer.url}`);
  assert.equal((await originRequests()) - before, onB.length, "each of node-b's objects fetched again once");
  await startNodeB();
});

test("a varnish node hung (SIGSTOP: its connections open, nothing answered): in seconds nginx's checks send its URLs to the other node, none waits the read timeout; it gets them back once it answers", async () => {
  const source = await upload(await solid(420, 300, 'png'));
  const urls = Array.from({ length: 30 }, (_, i) => `${stack.base}/p/${base58Url.encode(source)}?width=${100 + i}`);
  for (const url of urls) assert.equal((await get(url)).status, 200);
  const onB = [];
  for (const url of urls) if ((await get(url)).node === 'node-b') onB.push(url);
  assert.ok(onB.length >= 3, `node-b holds some of the URLs (${onB.length})`);
  const log = path.join(stack.dir, 'logs', 'nginx-error.log');
  const logged = fs.statSync(log).size;
  await run('pkill', ['-STOP', '-f', nodeBProcesses()]);
  /** @type {Array<{ status: number, node: string | null } | string>} */
  let answers;
  try {
    // two missed checks a second apart, each waiting at most a second: nginx says so in its error log
    const said = `varnish node ${edgeNodeB} does not answer`;
    const since = () => fs.readFileSync(log).subarray(logged).toString();
    await waitFor(async () => since().includes(said), 10_000, `nginx's log: ${said}`);
    // and on its status port, for Prometheus (whose alert EdgeVarnishNodeOut reads it)
    assert.deepEqual(await nodeStates(), { [edgeNodeA]: '1', [edgeNodeB]: '0' });
    await waitFor(
      async () => (await stack.prometheus(`edge_varnish_node_up{node="${edgeNodeB}"} == 0`)).length === 1,
      20_000,
      'Prometheus scraping node-b out',
    );
    // each far below nginx's read timeout (haproxy's server timeout + 4 s), which the old passive checks waited
    answers = await Promise.all(onB.map((url) => get(url, AbortSignal.timeout(15_000)).catch((err) => String(err))));
  } finally {
    await run('pkill', ['-CONT', '-f', nodeBProcesses()]);
  }
  for (const answer of answers) {
    assert.equal(typeof answer, 'object', String(answer));
    assert.equal(/** @type {any} */ (answer).status, 200);
    assert.notEqual(/** @type {any} */ (answer).node, 'node-b');
  }
  await waitFor(async () => (await get(onB[0])).node === 'node-b', 15_000, 'node-b serving its URLs again');
  assert.equal((await get(onB[0])).cache, 'HIT', 'what node-b held, it still holds');
  assert.deepEqual(await nodeStates(), { [edgeNodeA]: '1', [edgeNodeB]: '1' });
});

test('an avatar changed while a varnish node is down: once it is back, no request gets the old avatar', async () => {
  const accounts = Array.from({ length: 12 }, (_, i) => `cluster${i}`);
  const set = async (/** @type {string} */ account, /** @type {string} */ avatar) => {
    const response = await stack.direct('resolver', `/admin/accounts/${account}`, {
      method: 'PUT',
      headers: { authorization: 'Bearer cluster-admin', 'content-type': 'application/json' },
      body: JSON.stringify({ avatar }),
    });
    assert.equal(response.status, 200);
  };
  const purgeMetrics = `http://127.0.0.1:${stack.env.PURGE_SERVICE_METRICS_PORT}/metrics`;
  for (const account of accounts) await set(account, `https://img.example/${account}-old.png`);
  await waitFor(
    async () => (await metricValue(purgeMetrics, 'purge_queue_length')) === 0,
    10_000,
    'the first purges done',
  );
  // cached on both nodes: straight to each (the edge would put each URL on one)
  /** @type {Map<string, string>} account → where its avatar pointed before the change */
  const old = new Map();
  for (const port of [portA, portB])
    for (const account of accounts)
      old.set(account, String((await get(`http://127.0.0.1:${port}/u/${account}/avatar`)).location));
  for (const port of [portA, portB])
    for (const account of accounts)
      assert.equal((await get(`http://127.0.0.1:${port}/u/${account}/avatar`)).cache, 'HIT');
  const fresh = (/** @type {string} */ account, /** @type {string | null} */ location) =>
    Boolean(location) && location !== old.get(account);

  // node-b away but alive: stopped (SIGSTOP), so it keeps its objects and misses the purges
  const pids = (await run('pgrep', ['-f', nodeBProcesses()])).stdout.trim().split('\n').map(Number);
  for (const pid of pids) process.kill(pid, 'SIGSTOP');
  try {
    for (const account of accounts) await set(account, `https://img.example/${account}-new.png`);
    await waitFor(
      async () => (await metricValue(purgeMetrics, 'purge_queue_length')) === 0,
      20_000,
      'the purges acknowledged while node-b is away',
    );
    await waitFor(
      async () =>
        (await metricValue(purgeMetrics, 'purge_node_deferred_total', { node: `http://127.0.0.1:${portB}` })) >= 1,
      10_000,
      "node-b's purges kept for later",
    );
    for (const account of accounts)
      assert.ok(
        fresh(account, (await get(`http://127.0.0.1:${portA}/u/${account}/avatar`)).location),
        'node A purged at once',
      );
    await waitFor(
      async () => (await metricValue(purgeMetrics, 'purge_node_backlog', { node: `http://127.0.0.1:${portB}` })) > 0,
      15_000,
      "node-b's backlog counted",
    );
  } finally {
    for (const pid of pids) process.kill(pid, 'SIGCONT');
  }
  await waitFor(
    async () => (await metricValue(purgeMetrics, 'purge_node_backlog', { node: `http://127.0.0.1:${portB}` })) === 0,
    15_000,
    'node-b caught up',
  );
  for (let round = 0; round < 3; round += 1) {
    for (const account of accounts) {
      for (const url of [`${stack.base}/u/${account}/avatar`, `http://127.0.0.1:${portB}/u/${account}/avatar`]) {
        assert.ok(fresh(account, (await get(url)).location), `${url} after node-b is back`);
      }
    }
  }
});

/**
 * Whether the follower of addresses (infra/docker/follow-address.sh) has written in the stack's `log`, from
 * now on, that `name` is at `address` (then reloading its program). It says so before the reload, but
 * supervisord copies its output into the log in its own time, on a busy machine after the reloaded program
 * already answers: ask with waitFor. @param {string} log @param {string} name
 */
function followerSaid(log, name) {
  const file = path.join(stack.dir, 'logs', log);
  const from = fs.statSync(file).size;
  const literal = (/** @type {string} */ text) => text.replaceAll('.', '\\.');
  return (/** @type {string} */ address) =>
    new RegExp(`follow-address: [^(]*${literal(name)}=${literal(address)}[ ;]`).test(
      fs.readFileSync(file).subarray(from).toString(),
    );
}

test('a varnish node given by name, moved to another address: nginx follows it (its URLs to the other node, no error), and back', async (t) => {
  if (!hosts) return t.skip("names need a hosts file of the stack's own: a private mount namespace (root)");
  if (!nodeB) await startNodeB();
  // nginx's checks resolve the names as the system does (/etc/hosts first): both in (node-b maybe just back)
  const bothIn = JSON.stringify({ [edgeNodeA]: '1', [edgeNodeB]: '1' });
  await waitFor(async () => JSON.stringify(await nodeStates()) === bothIn, 15_000, `node states ${bothIn}`);
  const served = () => whoServes('moved');
  assert.ok((await served()).includes('200 node-b'), 'node-b holds some of the URLs');
  const nginx = await stack.pid('nginx');
  const followed = followerSaid('nginx.log', 'varnish-b.cluster.test');
  // an address where nothing listens (a node replaced, its new address not serving yet)
  hosts.set({ ...names, 'varnish-b.cluster.test': '127.0.0.3' });
  try {
    await waitFor(async () => followed('127.0.0.3'), 15_000, 'nginx reloaded by its follower for the new address');
    await waitFor(
      async () => (await nodeStates())[edgeNodeB] === '0',
      15_000,
      'nginx checking node-b at its new address',
    );
    const answers = await served();
    assert.ok(
      answers.every((answer) => answer.startsWith('200 ') && answer !== '200 node-b'),
      answers.join(', '),
    );
  } finally {
    hosts.set(names);
  }
  // back: node-b's URLs reach it only through an upstream nginx resolved again
  await waitFor(async () => (await served()).includes('200 node-b'), 15_000, 'node-b serving its URLs again');
  await waitFor(async () => followed('127.0.0.1'), 10_000, 'its follower said it moved back');
  assert.deepEqual(await nodeStates(), { [edgeNodeA]: '1', [edgeNodeB]: '1' });
  assert.equal(await stack.pid('nginx'), nginx, 'nginx reloaded, not restarted');
  // haproxy still reaches the resolver by the name only /etc/hosts knows, a minute and more after its start
  const avatar = await get(`${stack.base}/u/cluster-named/avatar`);
  assert.equal(avatar.status, 302);
});

test('an avatar resolver given by a name only /etc/hosts knows, moved: haproxy follows it (reloaded, not restarted), and back', async (t) => {
  if (!hosts) return t.skip("names need a hosts file of the stack's own: a private mount namespace (root)");
  const haproxy = await stack.pid('haproxy');
  const followed = followerSaid('haproxy.log', 'avatar-resolver.cluster.test');
  let account = 0;
  // an account no cache holds: haproxy asks the resolver
  const avatar = async () => (await get(`${stack.base}/u/moved${account++}/avatar`)).status;
  assert.equal(await avatar(), 302);
  hosts.set({ ...names, 'avatar-resolver.cluster.test': '127.0.0.3' });
  try {
    await waitFor(async () => followed('127.0.0.3'), 15_000, 'haproxy reloaded by its follower for the new address');
    await waitFor(async () => (await avatar()) !== 302, 15_000, 'haproxy asking the resolver at its new address');
  } finally {
    hosts.set(names);
  }
  await waitFor(async () => (await avatar()) === 302, 15_000, 'haproxy asking the resolver where it is again');
  await waitFor(async () => followed('127.0.0.1'), 10_000, 'its follower said it moved back');
  assert.equal(await stack.pid('haproxy'), haproxy, 'haproxy reloaded, not restarted');
});

test('haproxy and the purge service given by names only /etc/hosts knows, moved: uploads checked, images and webhooks reach them, and again once back', async (t) => {
  if (!hosts) return t.skip("names need a hosts file of the stack's own: a private mount namespace (root)");
  const varnish = await stack.pid('varnish');
  const followed = followerSaid('varnish.log', 'haproxy.cluster.test');
  const source = base58Url.encode(await upload(await solid(300, 200, 'png')));
  const body = await solid(64, 48, 'png');
  let width = 20;
  // an upload (nginx's Lua checks it with the origin through haproxy), then a variant no cache holds yet
  // straight from the stack's own varnish node (it asks haproxy; node-b, started by this test, resolved the
  // name once), then a webhook (nginx's route to the purge service: unsigned, the service's 401)
  const answers = async () => {
    const uploaded = await sendUpload(body);
    /** @type {any} */
    const json = await uploaded.json().catch(() => null);
    const variant = await fetch(`http://127.0.0.1:${portA}/p/${source}?width=${(width += 1)}`);
    await variant.arrayBuffer();
    const hook = await fetch(`${stack.base}/hooks/avatar`, { method: 'POST', body: '{"account":"a"}' });
    const hookJson = /** @type {any} */ (await hook.json().catch(() => null));
    return [
      `upload ${uploaded.status}${uploaded.status === 200 && json?.url ? '' : ' ' + JSON.stringify(json)}`,
      `variant ${variant.status}`,
      `hook ${hook.status} ${hookJson?.error?.name}`,
    ].join(', ');
  };
  const working = /^upload 200, variant 200, hook 401 [a-z_]+$/;
  assert.match(await answers(), working);
  hosts.set({ ...names, 'haproxy.cluster.test': '127.0.0.3', 'purge.cluster.test': '127.0.0.3' });
  try {
    await waitFor(async () => followed('127.0.0.3'), 15_000, 'varnish reloaded by its follower for the new address');
    // nothing listens there: each answered by the layer in front, as the JSON error of a service away (varnish
    // once its new VCL is in use)
    const away = /^upload 503 .*"service_unavailable".*, variant 503, hook 503 service_unavailable$/;
    /** @type {string} */
    let seen = '';
    await waitFor(async () => away.test((seen = await answers())), 15_000, 'each answered as away').catch((err) => {
      throw new Error(`${err.message}: ${seen}`);
    });
  } finally {
    hosts.set(names);
  }
  await waitFor(async () => working.test(await answers()), 15_000, 'each reached where it is again');
  await waitFor(async () => followed('127.0.0.1'), 10_000, 'its follower said it moved back');
  assert.equal(await stack.pid('varnish'), varnish, 'varnish reloaded, not restarted');
});
