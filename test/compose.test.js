// needs the whole-stack tier's built tools (versitygw, helm, kube-score, Podman): run once they are built
// docker-compose.yml run for real (under Podman here: ./infra/stack compose), talked to only through nginx's
// published 127.0.0.1 port: an upload, a resize, an avatar redirect and a signed purge, then down with its
// volumes. The images are built by docker-compose from the repository's Dockerfiles.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { base58Url } from '@stack/lib';
import { ROOT } from '../infra/resolve.js';
import { heifEnc } from './support/heif.js';
import { decode, solid } from './support/images.js';
import { smoke } from './support/smoke.js';
import { tokenUpload } from './support/upload.js';
import { freePort, waitFor } from './support/ports.js';

const port = await freePort();
const base = `http://127.0.0.1:${port}`;
const env = {
  ...process.env,
  NGINX_PORT: String(port),
  S3_ACCESS_KEY_ID: 'composetest',
  S3_SECRET_ACCESS_KEY: 'compose-test-secret-key',
  GRAFANA_ADMIN_PASSWORD: 'unused',
  METRICS_PASSWORD: 'compose-metrics',
  UPLOAD_TOKENS: 'compose-token',
  AVATAR_ADMIN_TOKEN: 'compose-admin',
  PURGE_HMAC_KEYS: 'compose-hmac',
  // as on a fresh Debian machine, which has no `docker` program (docker-compose runs it when it finds one)
  PATH: (process.env.PATH ?? '')
    .split(':')
    .filter((dir) => dir && !existsSync(`${dir}/docker`))
    .join(':'),
};

/** ./infra/stack compose … @param {string[]} args */
function compose(...args) {
  const result = spawnSync(`${ROOT}/infra/stack`, ['compose', ...args], {
    env,
    encoding: 'utf8',
    timeout: 900_000,
    cwd: ROOT,
  });
  assert.equal(result.status, 0, `compose ${args.join(' ')}:\n${(result.stdout + result.stderr).slice(-4000)}`);
  return result.stdout;
}

before(
  async () => {
    compose('down', '-v', '--remove-orphans');
    compose('up');
    await waitFor(
      async () => (await fetch(`${base}/healthz`).catch(() => null))?.status === 200,
      180_000,
      'nginx answering through the whole compose stack',
    );
    // and uploads (not an image: the origin's 4xx): haproxy's upload servers check for themselves, and come
    // in up to 250 ms after /healthz's
    await waitFor(
      async () => {
        const response = await tokenUpload(base, Buffer.from('not an image'), 'probe.jpg', 'compose-token');
        await response.arrayBuffer();
        return response.status !== 503;
      },
      30_000,
      'uploads reaching an origin',
    );
  },
  { timeout: 1_200_000 },
);

after(() => {
  compose('down', '-v', '--remove-orphans');
  const left = podman(
    'ps',
    '-a',
    '--filter',
    'label=com.docker.compose.project=image-cdn-stack',
    '--format',
    '{{.Names}}',
  );
  assert.equal(left.trim(), '', 'every container removed');
});

/**
 * Points an account's avatar at a URL, from inside the compose network (the resolver's admin API is not
 * published). @param {string} account @param {string} url
 */
function setAvatar(account, url) {
  compose(
    'exec',
    '-T',
    'avatar-resolver',
    'node',
    '-e',
    `fetch('http://127.0.0.1:8801/admin/accounts/${account}', { method: 'PUT', headers: { authorization: 'Bearer compose-admin', 'content-type': 'application/json' }, body: JSON.stringify({ avatar: ${JSON.stringify(url)} }) }).then(async (r) => { if (r.status !== 200) { console.error(r.status, await r.text()); process.exit(1); } }, (e) => { console.error(e); process.exit(1); })`,
  );
}

/** podman …, on the compose stack's engine @param {string[]} args */
function podman(...args) {
  return execFileSync('podman', args, {
    env: { ...env, CONTAINERS_CONF: `${ROOT}/infra/podman/containers.conf` },
    encoding: 'utf8',
  });
}

/** The first origin's result cache segments, oldest first. */
const segments = () =>
  compose('exec', '-T', 'origin', 'ls', '/data/variants')
    .split('\n')
    .filter((name) => name.endsWith('.pack'));

/** Each service's container address on the compose network. @param {string[]} services */
function addresses(services) {
  return Object.fromEntries(
    services.map((service) => [
      service,
      podman(
        'inspect',
        '-f',
        '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}',
        `image-cdn-stack_${service}_1`,
      ).trim(),
    ]),
  );
}

test(
  'compose: an upload, a resize, an avatar redirect and a signed purge through the published port',
  { timeout: 300_000 },
  async () => {
    await smoke(base, {
      uploadToken: 'compose-token',
      hmacKey: 'compose-hmac',
      setAvatar,
    });
  },
);

test("compose: a container's limits of processes and open files are the host's own", { timeout: 120_000 }, () => {
  // rootful containers keep their UIDs: a stack user's threads inside one count with the same UID's outside,
  // so a process limit below the host's starved a varnish child of threads once the host ran stacks of its own
  const host = limits(readFileSync('/proc/self/limits', 'utf8'), 'hard');
  const pidMax = Number(readFileSync('/proc/sys/kernel/pid_max', 'utf8'));
  const inside = limits(compose('exec', '-T', 'varnish', 'cat', '/proc/self/limits'), 'soft');
  assert.deepEqual(
    inside,
    { processes: Math.min(host.processes, pidMax), files: host.files },
    'the soft limits inside a container: the host hard limits (processes at most kernel.pid_max)',
  );
});

/**
 * Max processes and Max open files of a /proc/PID/limits text ("unlimited" as Infinity).
 * @param {string} text @param {'soft' | 'hard'} which
 */
function limits(text, which) {
  /** @param {string} name */
  const value = (name) => {
    const [soft, hard] = (text.match(new RegExp(`^${name}\\s+(\\S+)\\s+(\\S+)`, 'm')) ?? []).slice(1);
    const chosen = which === 'soft' ? soft : hard;
    return chosen === 'unlimited' ? Infinity : Number(chosen);
  };
  return { processes: value('Max processes'), files: value('Max open files') };
}

test(
  'compose: Prometheus scrapes every component in its own container (every target up)',
  { timeout: 120_000 },
  async () => {
    const jobs = ['haproxy', 'varnish', 'nginx', 'redis', 'mtail', 'origin', 'avatar-resolver', 'purge-service'];
    /** @type {Array<{ job: string, health: string, url: string, error: string }>} */
    let targets = [];
    await waitFor(
      async () => {
        const answer = compose(
          'exec',
          '-T',
          'prometheus',
          'curl',
          '-fsS',
          '-u',
          'metrics:compose-metrics',
          'http://127.0.0.1:9090/api/v1/targets?state=active',
        );
        targets = JSON.parse(answer).data.activeTargets.map((/** @type {any} */ target) => ({
          job: target.labels.job,
          health: target.health,
          url: target.scrapeUrl,
          error: target.lastError,
        }));
        return jobs.every((job) => targets.some((target) => target.job === job && target.health === 'up'));
      },
      60_000,
      'every scrape target up',
    ).catch((err) => {
      throw new Error(`${err.message}: ${JSON.stringify(targets)}`);
    });
    assert.deepEqual(
      targets.filter((target) => target.health !== 'up'),
      [],
      'no target down',
    );
  },
);

test(
  "compose: the origin's image decodes JPEG with the system's libjpeg-turbo, HEIC with its libavcodec, and encodes WebP with its libwebp, JPEG with its libjpeg-turbo",
  { timeout: 120_000 },
  async () => {
    const uploaded = await tokenUpload(base, await solid(640, 480, 'jpeg'), 'photo.jpg', 'compose-token');
    assert.equal(uploaded.status, 200, await uploaded.clone().text());
    const { url } = /** @type {{ url: string }} */ (await uploaded.json());
    const resized = await fetch(`${base}/p/${base58Url.encode(url)}?width=120&format=webp`);
    assert.equal(resized.status, 200);
    const pixels = await decode(Buffer.from(await resized.arrayBuffer()));
    assert.deepEqual([pixels.format, pixels.width, pixels.height], ['webp', 120, 90]);
    const asJpeg = await fetch(`${base}/p/${base58Url.encode(url)}?width=100&format=jpeg`);
    assert.equal(asJpeg.status, 200);
    const jpeg = await decode(Buffer.from(await asJpeg.arrayBuffer()));
    assert.deepEqual([jpeg.format, jpeg.width, jpeg.height], ['jpeg', 100, 75]);
    // a phone's HEIC: its variant decoded by FFmpeg's HEVC decoder, installed in the image
    const heic = heifEnc(await solid(320, 240, 'jpeg'));
    const heicUpload = await tokenUpload(base, heic, 'IMG_0002.HEIC', 'compose-token');
    assert.equal(heicUpload.status, 200, await heicUpload.clone().text());
    const heicUrl = /** @type {{ url: string }} */ (await heicUpload.json()).url;
    assert.equal((await fetch(`${base}/p/${base58Url.encode(heicUrl)}?width=100&format=jpeg`)).status, 200);
    // counted by the origin, read through Prometheus (it scrapes every 5 s)
    for (const query of [
      'sum(origin_transform_codecs_total{decode="libjpeg-turbo",encode="libwebp"})',
      'sum(origin_transform_codecs_total{decode="libjpeg-turbo",encode="libjpeg-turbo"})',
      'sum(origin_transform_codecs_total{decode="libavcodec"})',
    ])
      await waitFor(
        async () => {
          const answer = JSON.parse(
            compose(
              'exec',
              '-T',
              'prometheus',
              'curl',
              '-fsS',
              '-u',
              'metrics:compose-metrics',
              '--data-urlencode',
              `query=${query}`,
              'http://127.0.0.1:9090/api/v1/query',
            ),
          );
          return Number(answer.data.result[0]?.value[1] || 0) >= 1;
        },
        60_000,
        `the variants made by the system codecs: ${query}`,
      );
  },
);

test(
  "compose: each container runs as its role, and one broken into reads its own secrets but no other service's",
  { timeout: 120_000 },
  async () => {
    // what a shell in the container can read, as the user the container runs as
    const probe = (/** @type {string} */ service, /** @type {string[]} */ files) =>
      compose(
        'exec',
        '-T',
        service,
        'sh',
        '-c',
        `id -u; for f in ${files.join(' ')}; do if cat "$f" >/dev/null 2>&1; then echo "read $f"; else echo "refused $f"; fi; done`,
      )
        .trim()
        .split('\n');
    const secrets = ['origin', 'avatar-resolver', 'purge-service'].map((name) => `/stack/secrets/${name}.env`);
    // every secret, the configs holding passwords (haproxy's stats, Redis' users, the exporters')
    const others = [
      '/stack/secrets/all.env',
      '/stack/conf/haproxy.cfg',
      '/stack/conf/redis.conf',
      '/stack/conf/prometheus/haproxy-password',
      '/stack/conf/redis-exporter-passwords.json',
    ];
    const [uid, ...seen] = probe('origin', [...secrets, ...others]);
    assert.equal(uid, '10001');
    assert.deepEqual(seen, [
      'read /stack/secrets/origin.env',
      ...[...secrets.slice(1), ...others].map((file) => `refused ${file}`),
    ]);
    const [purgeUid, ...purgeSeen] = probe('purge-service', secrets);
    assert.equal(purgeUid, '10003');
    assert.deepEqual(purgeSeen, [`refused ${secrets[0]}`, `refused ${secrets[1]}`, `read ${secrets[2]}`]);
    const [haproxyUid, ...haproxySeen] = probe('haproxy', ['/stack/conf/haproxy.cfg', ...secrets]);
    assert.equal(haproxyUid, '10004');
    assert.deepEqual(haproxySeen, ['read /stack/conf/haproxy.cfg', ...secrets.map((file) => `refused ${file}`)]);
    assert.deepEqual(probe('nginx', []), ['10005']);
    // the shared volume's top and what every service reads are root's: no service can rewrite them
    const stat = compose('exec', '-T', 'nginx', 'stat', '-c', '%u %a', '/stack', '/stack/env', '/stack/conf').trim();
    assert.deepEqual(stat.split('\n'), ['0 755', '0 640', '0 755']);
  },
);

test(
  'compose: containers restarted or recreated alone come back at new addresses, and the stack follows them; `up` again on the running stack',
  { timeout: 600_000 },
  async () => {
    // `up` on a running stack (a changed setting): it once refused, the network's IPAM taken for a change
    compose('up');
    const hops = ['varnish', 'haproxy', 'origin', 'avatar-resolver', 'purge-service'];
    const before = addresses(hops);
    const cached = segments();
    // a restart of the components in the middle, and what an upgrade of the app image recreates
    compose('restart', 'varnish', 'haproxy');
    compose('up', '-d', '--no-deps', '--force-recreate', 'origin', 'avatar-resolver', 'purge-service');
    const now = addresses(hops);
    // the recreated origin has the old one's result cache (its volume kept), and a segment of its own
    assert.ok(cached.length > 0);
    assert.deepEqual(segments().slice(0, cached.length), cached);
    for (const hop of hops)
      assert.notEqual(now[hop], before[hop], `${hop} at a new address (else this proves nothing)`);
    // nginx follows varnish, varnish haproxy, haproxy the origin and the resolver, nginx the purge service:
    // within seconds, nothing restarted but what was
    const started = Date.now();
    await waitFor(
      async () => (await fetch(`${base}/healthz`).catch(() => null))?.status === 200,
      60_000,
      'the origin through nginx, varnish and haproxy at their new addresses',
    );
    await waitFor(
      async () => (await fetch(`${base}/u/newcomer/avatar`, { redirect: 'manual' }).catch(() => null))?.status === 302,
      60_000,
      'an avatar redirect from the recreated resolver',
    );
    const hook = await fetch(`${base}/hooks/avatar`, {
      method: 'POST',
      body: '{}',
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(hook.status, 401, 'the recreated purge service answers its route (an unsigned hook refused)');
    assert.ok(Date.now() - started < 60_000);
    await smoke(base, {
      uploadToken: 'compose-token',
      hmacKey: 'compose-hmac',
      setAvatar,
      // another picture than the first run's (uploads are named by their content)
      color: '#2060a0',
    });
  },
);

test(
  'compose: an origin killed (as by the OOM killer) and started again takes its result cache back at once',
  { timeout: 300_000 },
  async () => {
    const cached = segments();
    podman('kill', '-s', 'KILL', 'image-cdn-stack_origin_1');
    compose('start', 'origin');
    await waitFor(
      async () => (await fetch(`${base}/healthz`).catch(() => null))?.status === 200,
      60_000,
      'the origin started again, through the edge',
    );
    // its lock names its container's earlier run (another pid namespace, the same host): not waited for
    const logs = podman('logs', '--since', '5m', 'image-cdn-stack_origin_1');
    assert.doesNotMatch(logs, /waiting for its lock to go stale/);
    assert.deepEqual(segments().slice(0, cached.length), cached);
  },
);

test(
  'compose: `--scale origin=2`: haproxy finds the second origin by name and gives it its share',
  { timeout: 300_000 },
  async () => {
    compose('up', '-d', '--no-recreate', '--scale', 'origin=2', 'origin');
    /** What a script printed in origin container `index`. @param {number} index @param {string} script */
    const inOrigin = (index, script) =>
      compose('exec', '-T', '--index', String(index), 'origin', 'node', '-e', script).trim();
    /** Uploads an origin counted, read from its own metrics port. @param {number} index */
    const uploads = (index) =>
      Number(
        inOrigin(
          index,
          `fetch('http://127.0.0.1:9800/metrics', { headers: { authorization: 'Basic ' + btoa('metrics:compose-metrics') } }).then((r) => r.text()).then((t) => console.log(t.split('\\n').filter((line) => line.startsWith('origin_uploads_total{')).reduce((sum, line) => sum + Number(line.split(' ').pop()), 0)))`,
        ),
      );
    const before = [await uploads(1), await uploads(2)];
    let sent = 0;
    await waitFor(
      async () => {
        const response = await tokenUpload(base, await solid(90 + sent, 60, 'jpeg'), 'scaled.jpg', 'compose-token');
        assert.equal(response.status, 200, await response.clone().text());
        sent += 1;
        return (await uploads(2)) > before[1] && (await uploads(1)) > before[0];
      },
      90_000,
      'uploads stored by both origins',
    );
    assert.ok(sent <= 40, `both origins took uploads within ${sent}`);
    // each origin's result cache is its own (a volume each): its lock names its own container
    /** @param {number} index */
    const cacheOf = (index) =>
      JSON.parse(
        inOrigin(
          index,
          `const fs = require('fs'); console.log(JSON.stringify({ host: require('os').hostname(), lock: JSON.parse(fs.readFileSync('/data/variants/lock', 'utf8')) }))`,
        ),
      );
    const [first, second] = [cacheOf(1), cacheOf(2)];
    assert.equal(first.lock.host, first.host);
    assert.equal(second.lock.host, second.host);
    assert.notEqual(first.host, second.host);
  },
);
