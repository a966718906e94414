import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { Agent, fetch as undiciFetch } from 'undici';
import { socketPaths } from '../infra/resolve.js';
import { processTree } from '../lib/src/process-tree.js';
import { launchChromium } from './support/browser.js';
import { decode, solid } from './support/images.js';
import { metricValue, metricsAuth } from './support/metrics.js';
import { waitFor } from './support/ports.js';
import { startStack } from './support/stack.js';

/** @type {Awaited<ReturnType<typeof startStack>>} */
let stack;

before(async () => {
  // first answers of format=auto live 1 s here (30 s by default), so the AVIF that follows shows within the test
  stack = await startStack({
    UPLOAD_TOKENS: 'stack-token',
    AVATAR_ADMIN_TOKEN: 'admin-token',
    CACHE_CONTROL_FIRST_ANSWER: 'public, max-age=1, s-maxage=1',
  });
});
after(() => stack?.stop());

/** @param {Buffer} body @param {string} name */
async function upload(body, name) {
  const form = new FormData();
  form.append('image_file', new Blob([new Uint8Array(body)]), name);
  const response = await fetch(`${stack.base}/upload`, {
    method: 'POST',
    headers: { authorization: 'Bearer stack-token' },
    body: form,
  });
  assert.equal(response.status, 200);
  assert.equal(response.headers.get('x-cache'), 'PASS');
  return /** @type {{ url: string }} */ (await response.json()).url;
}

/** haproxy's own Prometheus exporter: requests per frontend. */
async function frontendRequests() {
  const text = await (
    await fetch(`http://127.0.0.1:${stack.env.HAPROXY_STATS_PORT}/metrics`, {
      headers: { authorization: stack.statsAuth },
    })
  ).text();
  /** @type {Record<string, number>} */
  const counts = {};
  for (const match of text.matchAll(/^haproxy_frontend_http_requests_total\{proxy="(\w+)"\} (\d+)/gm))
    counts[match[1]] = Number(match[2]);
  return counts;
}

test('the stack came up through the launcher, every component under supervision', async () => {
  const stdout = await stack.statusText();
  for (const name of [
    'nginx',
    'varnish',
    'haproxy',
    'origin',
    'avatar-resolver',
    'purge-service',
    'redis',
    'prometheus',
    'mtail',
    'rotate-logs',
  ]) {
    assert.match(stdout, new RegExp(`^${name}\\s+RUNNING`, 'm'), name);
  }
  const again = await stack.stack(['up']);
  assert.match(again.stdout, /already running/, 'a second up says so and does nothing');
});

test('an upload is served through nginx; the first GET is a MISS, the second a HIT, and varnish agrees', async () => {
  const png = await solid(300, 200, 'png');
  const url = await upload(png, 'edge.png');
  assert.ok(url.startsWith(stack.base));
  const before = await stack.varnishStats();
  const first = await fetch(url);
  assert.equal(first.status, 200);
  assert.equal(first.headers.get('x-cache'), 'MISS');
  assert.equal(first.headers.get('content-type'), 'image/png');
  assert.equal(first.headers.get('xkey'), null, 'varnish strips xkey');
  assert.deepEqual(Buffer.from(await first.arrayBuffer()), png);
  const second = await fetch(url);
  assert.equal(second.headers.get('x-cache'), 'HIT');
  assert.notEqual(second.headers.get('age'), null);
  // worker threads flush their counters to varnishstat a moment later
  await waitFor(
    async () => (await stack.varnishStats())('MAIN.cache_hit') - before('MAIN.cache_hit') >= 1,
    5000,
    'varnish hit counter',
  );
  const afterStats = await stack.varnishStats();
  assert.equal(afterStats('MAIN.cache_hit') - before('MAIN.cache_hit'), 1);
  assert.ok(afterStats('MAIN.cache_miss') - before('MAIN.cache_miss') >= 1);
});

test('a resized variant through the stack decodes to the asked size and format', async () => {
  const url = await upload(await solid(800, 600, 'jpeg'), 'big.jpg');
  const { base58Url } = await import('@stack/lib');
  const response = await fetch(`${stack.base}/p/${base58Url.encode(url)}?width=200&height=100&format=webp`);
  assert.equal(response.status, 200);
  const info = await decode(Buffer.from(await response.arrayBuffer()));
  assert.deepEqual([info.format, info.width, info.height], ['webp', 200, 100]);
  // the origin's timings (fetch, transform, cache state) stay inside: not shown to the public by default
  assert.equal(response.headers.get('server-timing'), null);
});

test('format=auto through the stack: a cold AVIF request is answered in WebP at once, a later one in AVIF with the long lifetime', async () => {
  const url = await upload(await solid(900, 600, 'jpeg'), 'negotiated.jpg');
  const { base58Url } = await import('@stack/lib');
  const target = `${stack.base}/p/${base58Url.encode(url)}?width=300&format=auto`;
  const get = async (/** @type {string} */ accept) => {
    const response = await fetch(target, { headers: { accept } });
    return { response, info: await decode(Buffer.from(await response.arrayBuffer())) };
  };
  const chrome = 'image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8';
  const first = await get(chrome);
  assert.equal(first.response.status, 200);
  assert.equal(first.info.format, 'webp');
  assert.equal(first.response.headers.get('cache-control'), 'public, max-age=1, s-maxage=1');
  assert.equal(first.response.headers.get('cdn-cache-control'), 'no-store');
  assert.equal(first.info.width, 300);
  // the AVIF is made in the background; once the short-lived answer expires varnish asks again and gets it
  /** @type {Awaited<ReturnType<typeof get>> | undefined} */
  let later;
  await waitFor(
    async () => {
      later = await get(chrome);
      return later.info.format === 'heif';
    },
    20_000,
    'the AVIF through varnish',
  );
  assert.equal(later?.response.headers.get('cache-control'), 'public, max-age=31536000, immutable');
  assert.equal(later?.info.width, 300);
  const safari = await get('image/webp,image/png,image/*;q=0.8');
  assert.equal(safari.info.format, 'webp', 'a browser without AVIF never gets it');
  const old = await get('image/png,image/*;q=0.8');
  assert.equal(old.info.format, 'jpeg');
});

test('image and avatar requests are counted on their own haproxy frontends', async () => {
  const before = await frontendRequests();
  const url = await upload(await solid(50, 50, 'png'), 'count.png');
  await fetch(url);
  await fetch(`${stack.base}/u/counted/avatar`, { redirect: 'manual' });
  await fetch(`${stack.base}/u/counted/cover`, { redirect: 'manual' });
  const afterCounts = await frontendRequests();
  assert.ok(afterCounts.fe_images - before.fe_images >= 2, 'upload + GET on fe_images');
  assert.ok(afterCounts.fe_avatars - before.fe_avatars >= 2, 'two avatar routes on fe_avatars');
});

test('PURGE and BAN are refused from the public side, at nginx and at varnish', async () => {
  for (const method of ['PURGE', 'BAN']) {
    const response = await fetch(`${stack.base}/anything`, { method });
    assert.equal(response.status, 405);
    assert.equal(/** @type {any} */ (await response.json()).error.name, 'method_not_allowed');
  }
  // a request nginx passes on (marked X-From-Edge), on the edge's socket: refused
  const direct = await stack.direct('varnish', '/anything', { method: 'PURGE', headers: { 'x-from-edge': '1' } });
  assert.equal(direct.status, 403);
  assert.equal(/** @type {any} */ (await direct.json()).error.name, 'purge_forbidden');
  // any local user on varnish's purge socket: refused (only the purge service's user purges there); varnish
  // has no port on a lone machine (the next test)
  const socket = socketPaths(stack.dir).purge;
  for (const method of ['PURGE', 'BAN']) {
    for (const target of [['--unix-socket', socket, '-H', 'xkey: avatar:alice', 'http://varnish/']]) {
      for (const user of ['nobody', 'image-cdn-origin']) {
        const { stdout } = spawnSync(
          'runuser',
          ['-u', user, '--', 'curl', '-s', '-o', '/dev/null', '-w', '%{http_code}', '-X', method, ...target],
          { encoding: 'utf8' },
        );
        assert.equal(stdout, '403', `${method} by ${user} via ${target.join(' ')}`);
      }
    }
  }
  const { stdout } = spawnSync(
    'runuser',
    [
      '-u',
      'image-cdn-purge',
      '--',
      'curl',
      '-s',
      '-X',
      'PURGE',
      '--unix-socket',
      socket,
      '-H',
      'xkey: nothing-tagged',
      'http://varnish/',
    ],
    { encoding: 'utf8' },
  );
  assert.match(stdout, /"ok":true/, "the purge service's user purges on the socket");
});

test('an avatar 302 carries its cache headers, is cached by varnish, and leads to an image of the right size', async () => {
  const avatar = await upload(await solid(600, 400, 'png'), 'face.png');
  const put = await stack.direct('resolver', `/admin/accounts/alice`, {
    method: 'PUT',
    headers: { authorization: 'Bearer admin-token', 'content-type': 'application/json' },
    body: JSON.stringify({ avatar }),
  });
  assert.equal(put.status, 200);
  // the PUT queues a purge of alice's avatars: let it land first, or it could evict the object between the two GETs
  const purgeMetrics = `http://127.0.0.1:${stack.env.PURGE_SERVICE_METRICS_PORT}/metrics`;
  await waitFor(
    async () => (await metricValue(purgeMetrics, 'purge_queue_length')) === 0,
    5000,
    'the purge of the admin change',
  );
  const first = await fetch(`${stack.base}/u/alice/avatar/small`, { redirect: 'manual' });
  assert.equal(first.status, 302);
  assert.equal(first.headers.get('cache-control'), 'public, max-age=600, s-maxage=86400, stale-while-revalidate=60');
  assert.equal(first.headers.get('x-cache'), 'MISS');
  assert.equal(first.headers.get('xkey'), null);
  const second = await fetch(`${stack.base}/u/alice/avatar/small`, { redirect: 'manual' });
  assert.equal(second.headers.get('x-cache'), 'HIT');
  const image = await fetch(new URL(second.headers.get('location') || '', stack.base));
  assert.equal(image.status, 200);
  const info = await decode(Buffer.from(await image.arrayBuffer()));
  assert.deepEqual([info.format, info.width, info.height], ['png', 64, 64]);
});

test('one X-Request-Id per answer, and it is the one in the access log', async () => {
  const response = await fetch(`${stack.base}/healthz`);
  const id = response.headers.get('x-request-id') || '';
  assert.match(id, /^[0-9a-f]{32}$/);
  await waitFor(async () => stack.log('nginx-access.log').includes(id), 5000, 'access log flush');
  const line =
    stack
      .log('nginx-access.log')
      .split('\n')
      .find((entry) => entry.includes(id)) || '';
  assert.match(line, /"GET \/healthz" 200 \d+ [\d.]+ [\d.]+ other (PASS|MISS|HIT)$/);
});

test("varnish, haproxy, the origin and the avatar resolver take connections from the next hop's user only: sockets, no port", async () => {
  // a local user on their ports would pass nginx's per-client limits and could forge X-Forwarded-For
  for (const name of [
    'VARNISH_PORT',
    'HAPROXY_IMAGES_PORT',
    'HAPROXY_AVATARS_PORT',
    'ORIGIN_PORT',
    'AVATAR_RESOLVER_PORT',
  ]) {
    await assert.rejects(fetch(`http://127.0.0.1:${stack.env[name]}/healthz`), TypeError, `nothing on ${name}`);
  }
  const sockets = socketPaths(stack.dir);
  /** the status a user gets for /healthz on a socket; 000: could not connect @param {string} user @param {string} socket */
  const healthz = (user, socket) =>
    spawnSync(
      'runuser',
      [
        '-u',
        user,
        '--',
        'curl',
        '-s',
        '-o',
        '/dev/null',
        '-w',
        '%{http_code}',
        '--unix-socket',
        socket,
        'http://x/healthz',
      ],
      { encoding: 'utf8' },
    ).stdout;
  /** @type {Array<[string, string[], string]>} [socket, users refused, the one user it is for] */
  const cases = [
    [sockets.varnish, ['nobody', 'image-cdn-haproxy', 'image-cdn-origin'], 'image-cdn-edge'],
    [sockets.images, ['nobody', 'image-cdn-origin', 'image-cdn-purge'], 'image-cdn-edge'],
    [sockets.avatars, ['nobody', 'image-cdn-resolver'], 'image-cdn-edge'],
    [sockets.origin, ['nobody', 'image-cdn-edge', 'image-cdn-resolver'], 'image-cdn-haproxy'],
    [sockets.resolver, ['nobody', 'image-cdn-edge', 'image-cdn-origin'], 'image-cdn-haproxy'],
  ];
  for (const [socket, refused, allowed] of cases) {
    for (const user of refused) assert.equal(healthz(user, socket), '000', `${user} on ${socket}`);
    assert.equal(healthz(allowed, socket), '200', `${allowed} on ${socket}`);
  }
});

test('operator surfaces stay off the public path', async () => {
  for (const route of ['/stats', '/metrics', '/admin/accounts/alice', '/stub_status']) {
    const response = await fetch(stack.base + route);
    assert.equal(response.status, 404, route);
  }
  for (const route of ['/stats', '/metrics']) {
    const answer = await fetch(`http://127.0.0.1:${stack.env.HAPROXY_STATS_PORT}${route}`);
    assert.equal(answer.status, 401, `haproxy's ${route} needs the password`);
  }
  // the services' metrics ports and Prometheus ask for the metrics password (#51: any local user read them)
  for (const port of [
    stack.env.ORIGIN_METRICS_PORT,
    stack.env.AVATAR_RESOLVER_METRICS_PORT,
    stack.env.PURGE_SERVICE_METRICS_PORT,
  ]) {
    assert.equal(
      (await fetch(`http://127.0.0.1:${port}/metrics`)).status,
      401,
      `metrics port ${port} needs the password`,
    );
    assert.equal((await fetch(`http://127.0.0.1:${port}/metrics`, { headers: metricsAuth('wrong') })).status, 401);
    assert.equal((await fetch(`http://127.0.0.1:${port}/metrics`, { headers: metricsAuth() })).status, 200);
  }
  const prometheus = `http://127.0.0.1:${stack.env.PROMETHEUS_PORT}`;
  assert.equal((await fetch(`${prometheus}/api/v1/query?query=up`)).status, 401, "Prometheus' API needs the password");
  // and with it, every service is scraped (Prometheus has the password too)
  await waitFor(
    async () => {
      const answer = await (
        await fetch(
          `${prometheus}/api/v1/query?query=${encodeURIComponent('min(up{job=~"origin|avatar-resolver|purge-service"})')}`,
          {
            headers: metricsAuth(),
          },
        )
      ).json();
      return answer.data.result[0]?.value[1] === '1';
    },
    30_000,
    'every service scraped with the metrics password',
  );
  // Prometheus' lifecycle API (reload, quit) is off: anyone on the box could otherwise stop the monitoring
  const quit = await fetch(`${prometheus}/-/quit`, { method: 'POST', headers: metricsAuth() });
  assert.equal(quit.status, 403);
  assert.equal((await fetch(`${prometheus}/-/ready`, { headers: metricsAuth() })).status, 200, 'still running');
});

test("the logs hold no bearer tokens and are readable by the stack's users only", async () => {
  const secret = 'eyJzZWNyZXQtYWNjZXNzLXRva2VuIjoxfQ';
  for (const [method, path] of [
    ['GET', `/hs/${secret}`],
    ['POST', `/hs/${secret}`],
    ['GET', `/p/3q5?token=${secret}&width=9`],
  ]) {
    const response = await fetch(`${stack.base}${path}`, { method, ...(method === 'POST' ? { body: 'x' } : {}) });
    await response.arrayBuffer();
  }
  // every request's line written (nginx writes it after the answer is sent: the last can come a moment later)
  await waitFor(
    async () =>
      stack.log('nginx-access.log').includes('/hs/[redacted]') &&
      stack.log('nginx-access.log').includes('token=[redacted]') &&
      stack.log('haproxy.log').includes('/hs/[redacted]'),
    10_000,
    'the requests logged',
  );
  for (const file of ['nginx-access.log', 'haproxy.log', 'origin.log'])
    assert.ok(!stack.log(file).includes(secret), `${file} holds the token`);
  assert.match(stack.log('nginx-access.log'), /token=\[redacted\]/);
  for (const file of ['nginx-access.log', 'haproxy.log', 'origin.log', 'supervisord.log']) {
    const { status } = spawnSync('runuser', ['-u', 'nobody', '--', 'cat', path.join(stack.dir, 'logs', file)], {
      stdio: 'ignore',
    });
    assert.notEqual(status, 0, `another local user read ${file}`);
  }
});

test("the rendered config holding the stats password is readable by haproxy's user alone", async () => {
  const file = path.join(stack.dir, 'conf', 'haproxy.cfg');
  assert.ok(fs.readFileSync(file, 'utf8').includes(stack.env.HAPROXY_STATS_PASSWORD));
  assert.equal(fs.statSync(file).mode & 0o777, 0o600);
  assert.equal(userOf(fs.statSync(file).uid), 'image-cdn-haproxy');
  // another local user cannot read it (nor the resolved settings, which hold every secret), not even the
  // stack's other services
  for (const secret of [file, path.join(stack.dir, 'env'), path.join(stack.dir, 'secrets', 'haproxy-stats-password')]) {
    for (const user of ['nobody', 'image-cdn-origin']) {
      const { status } = spawnSync('runuser', ['-u', user, '--', 'cat', secret], { stdio: 'ignore' });
      assert.notEqual(status, 0, `${user} read ${secret}`);
    }
  }
  assert.equal(
    spawnSync('runuser', ['-u', 'nobody', '--', 'cat', path.join(stack.dir, 'conf', 'nginx.conf')], { stdio: 'ignore' })
      .status,
    0,
    'configs without secrets stay readable',
  );
});

test('Redis answers only with its password, which sits in no file another user can read nor on a command line', async () => {
  const ping = (/** @type {string | undefined} */ password) => {
    const { stdout, stderr } = spawnSync('redis-cli', ['-p', stack.env.REDIS_PORT, 'ping'], {
      encoding: 'utf8',
      env: { ...process.env, ...(password ? { REDISCLI_AUTH: password } : {}) },
    });
    return `${stderr}${stdout}`.trim();
  };
  assert.match(ping(undefined), /NOAUTH/, 'no password: refused');
  assert.match(ping('wrong'), /WRONGPASS|invalid password/, 'a wrong one: refused');
  assert.equal(ping(stack.env.REDIS_PASSWORD), 'PONG');
  const conf = path.join(stack.dir, 'conf', 'redis.conf');
  assert.match(fs.readFileSync(conf, 'utf8'), new RegExp(`^requirepass "${stack.env.REDIS_PASSWORD}"$`, 'm'));
  assert.equal(fs.statSync(conf).mode & 0o777, 0o600);
  assert.equal(userOf(fs.statSync(conf).uid), 'image-cdn-redis');
  assert.notEqual(
    spawnSync('runuser', ['-u', 'nobody', '--', 'cat', conf], { stdio: 'ignore' }).status,
    0,
    'nobody read redis.conf',
  );
  assert.ok(
    !fs.readFileSync(path.join(stack.dir, 'conf', 'supervisord.conf'), 'utf8').includes(stack.env.REDIS_PASSWORD),
    'not in supervisord.conf',
  );
  for (const program of ['redis-exporter', 'origin', 'purge-service']) {
    const commandLine = fs.readFileSync(`/proc/${await stack.pid(program)}/cmdline`, 'utf8');
    assert.ok(!commandLine.includes(stack.env.REDIS_PASSWORD), `not on ${program}'s command line`);
  }
  // the exporter logs in as its own user (its password from a file only its user reads)
  const metrics = await (await fetch(`http://127.0.0.1:${stack.env.REDIS_EXPORTER_PORT}/metrics`)).text();
  assert.match(metrics, /^redis_up 1$/m);
});

test('the Redis exporter sends no password to a target a local user names, and every program holds its own secrets only', async () => {
  // the attack: a listener of any local user, handed to the exporter's multi-target endpoint
  /** @type {Buffer[]} */
  const received = [];
  const listener = net.createServer((socket) =>
    socket.on('data', (chunk) => {
      received.push(chunk);
      socket.write('+OK\r\n');
    }),
  );
  await new Promise((resolve) => listener.listen(0, '127.0.0.1', () => resolve(null)));
  const port = /** @type {import('node:net').AddressInfo} */ (listener.address()).port;
  await (
    await fetch(`http://127.0.0.1:${stack.env.REDIS_EXPORTER_PORT}/scrape?target=redis://127.0.0.1:${port}`)
  ).text();
  await new Promise((resolve) => setTimeout(resolve, 500));
  listener.close();
  const wire = Buffer.concat(received).toString();
  assert.ok(received.length > 0, 'the exporter did connect');
  assert.ok(!/AUTH/i.test(wire), `the exporter sent: ${JSON.stringify(wire.slice(0, 200))}`);
  // what each program's environment holds: its own secrets, and a Redis user of its own that cannot
  // reconfigure Redis
  const environment = async (/** @type {number} */ pid) =>
    Object.fromEntries(
      fs
        .readFileSync(`/proc/${pid}/environ`, 'utf8')
        .split('\0')
        .filter(Boolean)
        .map((entry) => [entry.slice(0, entry.indexOf('=')), entry.slice(entry.indexOf('=') + 1)]),
    );
  const origin = await environment(await stack.servicePid('origin'));
  assert.equal(origin.UPLOAD_TOKENS, 'stack-token');
  assert.equal(origin.AVATAR_ADMIN_TOKEN, undefined, "the origin does not hold the resolver's admin token");
  assert.equal(origin.REDIS_USERNAME, 'origin');
  assert.notEqual(origin.REDIS_PASSWORD, stack.env.REDIS_PASSWORD, "nor Redis' own password");
  const resolver = await environment(await stack.servicePid('avatar-resolver'));
  assert.equal(resolver.AVATAR_ADMIN_TOKEN, 'admin-token');
  assert.equal(resolver.UPLOAD_TOKENS, undefined);
  // supervisord's processes of the others, and those holding the origin's and the resolver's sockets: none
  const programs = [
    'varnish',
    'nginx',
    'haproxy',
    'prometheus',
    'redis-exporter',
    'mtail',
    'origin',
    'avatar-resolver',
  ];
  for (const program of programs) {
    const held = await environment(await stack.pid(program));
    for (const name of ['UPLOAD_TOKENS', 'AVATAR_ADMIN_TOKEN', 'REDIS_PASSWORD', 'HAPROXY_STATS_PASSWORD'])
      assert.equal(held[name], undefined, `${program} (pid ${await stack.pid(program)}) holds ${name}`);
  }
  const asOrigin = (/** @type {string[]} */ ...command) =>
    spawnSync(
      'redis-cli',
      [
        '-p',
        stack.env.REDIS_PORT,
        '--user',
        'origin',
        '--pass',
        origin.REDIS_PASSWORD,
        '--no-auth-warning',
        ...command,
      ],
      { encoding: 'utf8' },
    ).stdout.trim();
  assert.equal(asOrigin('ping'), 'PONG');
  for (const command of [
    ['config', 'set', 'dir', '/tmp'],
    ['config', 'get', 'requirepass'],
    ['acl', 'list'],
    ['flushall'],
    ['keys', '*'],
    ['module', 'list'],
  ]) {
    assert.match(asOrigin(...command), /NOPERM/, `the origin's Redis user may not ${command.join(' ')}`);
  }
});

/** A user's name from /etc/passwd. @param {number} uid */
function userOf(uid) {
  return fs
    .readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .map((line) => line.split(':'))
    .find((fields) => Number(fields[2]) === uid)?.[0];
}

/** Real, effective, saved and filesystem uids of a process (/proc/<pid>/status). @param {number} pid */
function uidsOf(pid) {
  const line =
    fs
      .readFileSync(`/proc/${pid}/status`, 'utf8')
      .split('\n')
      .find((entry) => entry.startsWith('Uid:')) || '';
  return line.split(/\s+/).slice(1, 5).map(Number);
}

test('every program of the stack runs as its own unprivileged user, read from /proc', async () => {
  const expected = {
    redis: 'redis',
    origin: 'origin',
    'avatar-resolver': 'resolver',
    'purge-service': 'purge',
    haproxy: 'haproxy',
    varnish: 'edge',
    nginx: 'edge',
    prometheus: 'metrics',
    'varnish-exporter': 'edge',
    'nginx-exporter': 'metrics',
    'redis-exporter': 'metrics',
    mtail: 'edge',
    'rotate-logs': 'edge',
  };
  for (const [program, role] of Object.entries(expected)) {
    const pid = await stack.pid(program);
    assert.ok(pid, `${program} running`);
    for (const uid of uidsOf(pid)) assert.equal(userOf(uid), `image-cdn-${role}`, program);
  }
  // and everything they started (varnish's worker, nginx's workers, sh wrappers): nothing below supervisord is root
  const all = processTree(Number(fs.readFileSync(path.join(stack.dir, 'run', 'supervisord.pid'), 'utf8'))).slice(1);
  assert.ok(all.length >= Object.keys(expected).length);
  for (const pid of all) {
    try {
      assert.ok(
        uidsOf(pid).every((uid) => uid !== 0),
        `pid ${pid} (${fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim()}) runs as root`,
      );
    } catch (err) {
      if (/** @type {any} */ (err).code !== 'ENOENT') throw err;
    }
  }
});

test("the origin's user can write its data directory and nothing of the stack outside it", async () => {
  const origin = userOf(uidsOf(await stack.pid('origin'))[0]);
  /** @param {string} file */
  const writes = (file) =>
    spawnSync('runuser', ['-u', String(origin), '--', 'sh', '-c', 'echo x > "$1"', 'write', file], { stdio: 'ignore' })
      .status === 0;
  const own = path.join(stack.dir, 'data', 'origin', `probe-${process.pid}`);
  assert.ok(writes(own), 'its data directory');
  fs.rmSync(own);
  const elsewhere = [
    path.join(import.meta.dirname, `..`, `probe-${process.pid}`), // the checkout (its code)
    path.join(stack.dir, 'conf', 'probe'),
    path.join(stack.dir, 'run', 'probe'),
    path.join(stack.dir, 'logs', 'probe'),
    path.join(stack.dir, 'logs', 'origin.log'),
    path.join(stack.dir, 'secrets', 'probe'),
    path.join(stack.dir, 'env'),
    path.join(stack.dir, 'data', 'redis', 'probe'),
    path.join(stack.dir, 'data', 'prometheus', 'probe'),
    path.join(stack.dir, 'run', 'varnish', 'probe'),
    '/etc/probe',
    '/root/probe',
    '/usr/local/bin/probe',
  ];
  for (const file of elsewhere) {
    assert.ok(!writes(file), `the origin's user wrote ${file}`);
    if (fs.existsSync(file) && file.endsWith('probe')) fs.rmSync(file);
  }
});

test('1,000 non-canonical spellings of one variant through the edge: one transform, a bounded number of varnish objects', async () => {
  const url = await upload(await solid(700, 500, 'jpeg'), 'spellings.jpg');
  const { base58Url } = await import('@stack/lib');
  const base = `${stack.base}/p/${base58Url.encode(url)}`;
  const transforms = () =>
    metricValue(`http://127.0.0.1:${stack.env.ORIGIN_METRICS_PORT}/metrics`, 'origin_transforms_total');
  const beforeTransforms = await transforms();
  const beforeObjects = (await stack.varnishStats())('MAIN.n_object');
  const spellings = Array.from({ length: 1000 }, (_, i) => {
    const params = [`width=${'0'.repeat(i % 4)}512${['', 'px', '.5', '.0'][i % 3]}`, `cb${i}=${i}`];
    if (i % 2) params.push('format=match');
    if (i % 3) params.push('mode=cover');
    if (i % 5 === 0) params.push('height=0', `token=${i}`);
    if (i % 7 === 0) params.push('', 'utm_source=feed');
    return `${base}?${(i % 2 ? params.reverse() : params).join('&')}`;
  });
  const statuses = new Set();
  // from ten loopback addresses in turn, each within its rate limit's burst
  const clients = Array.from({ length: 10 }, (_, i) => new Agent({ localAddress: `127.0.0.${i + 10}` }));
  for (const [i, spelling] of spellings.entries()) {
    const response = await undiciFetch(spelling, { dispatcher: clients[i % 10] });
    await response.arrayBuffer();
    statuses.add(response.status);
  }
  await Promise.all(clients.map((client) => client.close()));
  assert.deepEqual([...statuses], [200]);
  assert.ok((await transforms()) - beforeTransforms <= 1, 'at most one transform');
  const objects = (await stack.varnishStats())('MAIN.n_object') - beforeObjects;
  assert.ok(objects <= 2, `${objects} new varnish objects for 1,000 spellings`);
});

test('a burst past the per-client rate limit gets JSON 429s, and the rest are served', async () => {
  const url = await upload(await solid(20, 20, 'png'), 'burst.png');
  await fetch(url);
  const statuses = await Promise.all(
    Array.from({ length: 500 }, () =>
      fetch(url).then(async (response) => {
        await response.arrayBuffer();
        return response.status;
      }),
    ),
  );
  assert.ok(statuses.filter((status) => status === 429).length > 0, 'some limited');
  assert.ok(statuses.filter((status) => status === 200).length >= 200, 'the burst allowance served');
  await new Promise((resolve) => setTimeout(resolve, 3000));
});

test('a forged X-Forwarded-For on each request does not escape the per-client rate limit (no proxy is trusted by default)', async () => {
  const url = await upload(await solid(20, 20, 'png'), 'forged.png');
  await fetch(url);
  const statuses = await Promise.all(
    Array.from({ length: 600 }, (_, i) =>
      fetch(url, { headers: { 'x-forwarded-for': `198.51.${i >> 8}.${i & 255}` } }).then(async (response) => {
        await response.arrayBuffer();
        return response.status;
      }),
    ),
  );
  const served = statuses.filter((status) => status === 200).length;
  // the burst (200) and what the rate (100/s) adds while 600 requests are sent
  assert.ok(served < 400, `${served} of 600 served: the forged addresses were believed`);
  assert.ok(statuses.filter((status) => status === 429).length > 0);
  const lines = stack
    .log('nginx-access.log')
    .split('\n')
    .filter((line) => line.includes('/forged.png'));
  assert.ok(
    lines.length > 0 && lines.every((line) => !/ 198\.51\./.test(line)),
    'the access log carries the real address, not the forged one',
  );
  await new Promise((resolve) => setTimeout(resolve, 3000));
});

test('with the origin stopped: cached images still served, uncached ones a clean 503; back when it returns', async () => {
  const url = await upload(await solid(90, 90, 'jpeg'), 'grace.jpg');
  assert.equal((await fetch(url)).status, 200);
  await stack.ctl('stop', 'origin');
  try {
    const cached = await fetch(url);
    assert.equal(cached.status, 200);
    assert.equal(cached.headers.get('x-cache'), 'HIT');
    const uncached = await fetch(`${stack.base}/DQmWQzjgaD82ozKv3hX3HmRmobw8RY3eMtvsG16GVkasFo3/none.png`);
    assert.equal(uncached.status, 503);
    assert.equal(uncached.headers.get('cache-control'), 'no-store');
    assert.match(/** @type {any} */ (await uncached.json()).error.name, /^service_unavailable$/);
  } finally {
    await stack.start('origin');
  }
  await waitFor(async () => (await fetch(`${stack.base}/healthz`)).status === 200, 15_000, 'origin back');
});

test('the haproxy stats page loads in headless Chromium and shows both frontends and their backends', async () => {
  const browser = await launchChromium();
  try {
    const context = await browser.newContext({
      httpCredentials: { username: 'admin', password: stack.env.HAPROXY_STATS_PASSWORD },
    });
    const page = await context.newPage();
    const response = await page.goto(`http://127.0.0.1:${stack.env.HAPROXY_STATS_PORT}/stats`);
    assert.equal(response?.status(), 200);
    const text = await page.textContent('body');
    for (const name of ['fe_images', 'fe_avatars', 'be_images', 'be_avatars']) assert.ok(text?.includes(name), name);
    const screenshot = path.join(stack.dir, 'stats.png');
    await page.screenshot({ path: screenshot, fullPage: true });
    assert.ok(fs.statSync(screenshot).size > 10_000);
  } finally {
    await browser.close();
  }
});
