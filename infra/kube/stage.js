// The cluster stage (#50, ./infra/stack kube test): the Helm chart installed on the one-node Kubernetes of
// infra/kube/cluster.sh, with the images built here, and the stack used through nginx's Service as a user would:
// every pod Ready, an upload and its resized variants, an avatar's 302, each container given only its own
// secrets. Run by node:test; it brings the cluster up if it is not, and leaves it up with the release removed.
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, afterEach, before, test } from 'node:test';
import sharp from 'sharp';
import { base58Url } from '@stack/lib';
import { sign } from '../../purge-service/src/signature.js';
import { freePort, waitFor } from '../../test/support/ports.js';
import { tokenUpload } from '../../test/support/upload.js';
import { photo } from '../../test/support/images.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const KUBE_DIR = process.env.KUBE_DIR || '/var/lib/image-cdn-stack/kube';
const TOOLS = process.env.BUILT_TOOLS_DIR || '/var/cache/image-cdn-stack/tools';
const HELM = process.env.HELM || `${TOOLS}/helm-v4.3.1/helm`;
const NAMESPACE = 'cdn-stage';
const RELEASE = 'cdn';
const TOKEN = 'stage-upload-token';
const HMAC = 'stage-hmac';
const S3_KEY = 'stage';
const S3_SECRET = 'stage-secret-key';
const env = { ...process.env, KUBECONFIG: `${KUBE_DIR}/admin.conf` };

/** A command's output; its failure names the command and ends with its output. @param {string} file @param {string[]} args */
function run(file, args, { timeout = 600_000, input = undefined } = {}) {
  try {
    return execFileSync(file, args, { env, encoding: 'utf8', timeout, input, stdio: ['pipe', 'pipe', 'pipe'] });
  } catch (err) {
    const failure = /** @type {any} */ (err);
    throw new Error(
      `${file} ${args.join(' ')}: ${String(failure.stdout ?? '').slice(-2000)}${String(failure.stderr ?? '').slice(-2000)}`,
    );
  }
}
const kubectl = (/** @type {string[]} */ ...args) => run(`${ROOT}/infra/kube/cluster.sh`, ['kubectl', ...args]);
const json = (/** @type {string[]} */ ...args) => JSON.parse(kubectl(...args, '-o', 'json'));

/** Whether a pod's Ready condition is True. @param {any} pod */
const isReady = (pod) => pod.status.conditions?.find((/** @type {any} */ c) => c.type === 'Ready')?.status === 'True';

/**
 * What a failure leaves to read: the namespace's pods (ready or not, terminating or not), its endpoint slices,
 * haproxy's last lines, the latest events, why each container that restarted ended, and the last lines of
 * each container of a pod not Ready or terminating (nginx's error log too). Never throws (it is read while
 * something failed).
 */
function namespaceReport() {
  const read = (/** @type {string[]} */ ...args) => {
    try {
      return kubectl(...args);
    } catch (err) {
      return `(${/** @type {Error} */ (err).message.slice(0, 300)})\n`;
    }
  };
  let report = `\n--- pods\n${read('-n', NAMESPACE, 'get', 'pods', '-o', 'wide')}`;
  report += `--- endpoint slices\n${read('-n', NAMESPACE, 'get', 'endpointslices')}`;
  // haproxy's log names each origin it took in or out (its discovery by DNS) and the 5xx it answered
  report += `--- haproxy\n${read('-n', NAMESPACE, 'logs', `deploy/${RELEASE}-image-cdn-stack-haproxy`, '--all-containers', '--tail=30')}`;
  report += `--- events\n${read('-n', NAMESPACE, 'get', 'events', '--sort-by=.lastTimestamp').split('\n').slice(-40).join('\n')}\n`;
  /** @type {any[]} */
  let pods = [];
  try {
    pods = json('-n', NAMESPACE, 'get', 'pods').items;
  } catch {}
  for (const pod of pods) {
    const name = pod.metadata.name;
    // a container that restarted: why it ended last time, and its last lines then
    for (const container of pod.status.containerStatuses || []) {
      if (!container.restartCount) continue;
      report += `--- ${name}/${container.name} restarted ${container.restartCount} times; last ${JSON.stringify(container.lastState)}\n`;
      report += read('-n', NAMESPACE, 'logs', name, '-c', container.name, '--previous', '--tail=10');
    }
    const ready = isReady(pod);
    if (ready && !pod.metadata.deletionTimestamp) continue;
    report += `--- ${name} (ready ${ready}, deleted at ${pod.metadata.deletionTimestamp ?? '-'})\n`;
    report += `${JSON.stringify(pod.status.containerStatuses?.map((/** @type {any} */ c) => ({ name: c.name, ready: c.ready, state: c.state })))}\n`;
    report += read('-n', NAMESPACE, 'logs', name, '--all-containers', '--tail=30', '--prefix');
    // nginx writes its errors to its file (the upstream it cannot reach), not to the container's output
    if (pod.metadata.labels?.['app.kubernetes.io/component'] === 'nginx')
      report += read(
        '-n',
        NAMESPACE,
        'exec',
        name,
        '-c',
        'nginx',
        '--',
        'tail',
        '-n',
        '20',
        '/stack/logs/nginx-error.log',
      );
  }
  return report;
}

/** helm with `args` (its --wait may take its --timeout of 8 minutes). @param {string[]} args */
const helm = (args) => run(HELM, args, { timeout: 900_000 });

/** A hostPath PersistentVolume of `size` for the stage's claims, its directory the pods' user's. @param {string} name @param {string} size */
function volume(name, size) {
  const dir = path.join(KUBE_DIR, 'volumes', name);
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  fs.chownSync(dir, 10001, 10001);
  kubectl('delete', 'pv', name, '--ignore-not-found', '--wait=true');
  const pv = {
    apiVersion: 'v1',
    kind: 'PersistentVolume',
    metadata: { name },
    spec: {
      capacity: { storage: size },
      accessModes: ['ReadWriteOnce'],
      persistentVolumeReclaimPolicy: 'Delete',
      storageClassName: '',
      hostPath: { path: dir, type: 'Directory' },
    },
  };
  run(`${ROOT}/infra/kube/cluster.sh`, ['kubectl', 'apply', '-f', '-'], { input: JSON.stringify(pv) });
}

/** @type {import('node:child_process').ChildProcess[]} */
const forwards = [];
let base = '';
let resolver = '';

/**
 * `kubectl port-forward` of `target`'s `port` to a free port of 127.0.0.1; its URL once `/healthz` (or `ready`)
 * answers. @param {string} target @param {number} port @param {string} [ready]
 */
async function publish(target, port, ready = '/healthz') {
  const local = await freePort();
  forwards.push(
    spawn(
      `${ROOT}/infra/kube/cluster.sh`,
      ['kubectl', '-n', NAMESPACE, 'port-forward', '--address', '127.0.0.1', target, `${local}:${port}`],
      { env, stdio: 'ignore' },
    ),
  );
  const url = `http://127.0.0.1:${local}`;
  await waitFor(async () => (await fetch(`${url}${ready}`)).status < 500, 60_000, `${target} on 127.0.0.1`);
  return url;
}
const started = Date.now();
/** @type {Record<string, number>} */
const times = {};
const mark = (/** @type {string} */ name) => (times[name] = Math.round((Date.now() - started) / 1000));

before(
  async () => {
    try {
      await setUp();
    } catch (err) {
      process.stdout.write(namespaceReport());
      throw err;
    }
  },
  { timeout: 1_500_000 },
);

// a test that failed leaves what the namespace looked like in the log
afterEach((t) => {
  if (!t.passed) process.stdout.write(namespaceReport());
});

/** The cluster, the images of this checkout, the release installed and published on 127.0.0.1. */
async function setUp() {
  run(`${ROOT}/infra/kube/cluster.sh`, ['up']);
  mark('cluster up');
  // the images of this checkout, built by Podman as compose builds them, then handed to containerd
  const dummy = {
    S3_ACCESS_KEY_ID: 'x',
    S3_SECRET_ACCESS_KEY: 'x',
    METRICS_PASSWORD: 'x',
    GRAFANA_ADMIN_PASSWORD: 'x',
  };
  execFileSync(`${ROOT}/infra/stack`, ['compose', 'build', 'render', 'components', 'versitygw'], {
    env: { ...env, ...dummy },
    stdio: 'ignore',
    timeout: 1_200_000,
  });
  run(`${ROOT}/infra/kube/cluster.sh`, ['images']);
  mark('images');
  kubectl('delete', 'namespace', NAMESPACE, '--ignore-not-found', '--wait=true');
  volume(`${NAMESPACE}-uploads`, '1Gi');
  volume(`${NAMESPACE}-redis`, '1Gi');
  helm([
    'install',
    RELEASE,
    `${ROOT}/infra/helm/image-cdn-stack`,
    '--namespace',
    NAMESPACE,
    '--create-namespace',
    '-f',
    `${ROOT}/infra/kube/values-one-node.yaml`,
    '--set',
    `secrets.values.UPLOAD_TOKENS=${TOKEN}`,
    '--set',
    'secrets.values.AVATAR_ADMIN_TOKEN=stage-admin',
    '--set',
    `secrets.values.PURGE_HMAC_KEYS=${HMAC}`,
    '--wait',
    '--timeout',
    '8m',
  ]);
  mark('installed, every pod Ready');
  base = await publish(`svc/${RELEASE}-image-cdn-stack-nginx`, 80);
  // the resolver's admin API is an operator's surface, off the public path: reached straight, as an operator would
  resolver = await publish(`deploy/${RELEASE}-image-cdn-stack-avatar-resolver`, 8801);
  // Ready pods are not yet a serving chain (nginx → varnish → haproxy → resolver → Redis): its first 302
  await waitFor(
    async () => (await fetch(`${base}/u/carol/avatar`, { redirect: 'manual' })).status === 302,
    120_000,
    'the first avatar through the Service',
  );
  mark('published');
}

after(() => {
  for (const forward of forwards) forward.kill();
  process.stdout.write(`kube stage times (s from the start): ${JSON.stringify(times)}\n`);
  if (!process.env.KUBE_STAGE_KEEP) {
    run(HELM, ['uninstall', RELEASE, '--namespace', NAMESPACE, '--wait']);
    kubectl('delete', 'namespace', NAMESPACE, '--wait=true');
  }
});

test('every pod of the release is Ready, each container running as a user other than root', () => {
  const pods = json('-n', NAMESPACE, 'get', 'pods').items;
  assert.ok(pods.length >= 7, `pods: ${pods.map((/** @type {any} */ p) => p.metadata.name)}`);
  for (const pod of pods) {
    const ready = pod.status.conditions.find((/** @type {any} */ c) => c.type === 'Ready');
    assert.equal(ready?.status, 'True', `${pod.metadata.name} Ready`);
    process.stdout.write(`  ${pod.metadata.name}: Ready\n`);
  }
});

test('through the Service: an upload, its resized variants decoded to their sizes, an avatar 302', async () => {
  const upload = await tokenUpload(base, fs.readFileSync(photo('Kite', '1920x1080')), 'kite.jpg', TOKEN);
  assert.equal(upload.status, 200, await upload.clone().text());
  const { url } = /** @type {{ url: string }} */ (await upload.json());
  const key = new URL(url).pathname;
  const original = await fetch(`${base}${key}`);
  assert.equal(original.status, 200);
  assert.equal((await sharp(Buffer.from(await original.arrayBuffer())).metadata()).width, 2560);
  for (const [width, format] of /** @type {const} */ ([
    [640, 'webp'],
    [256, 'jpeg'],
  ])) {
    const variant = await fetch(`${base}/p/${base58Url.encode(url)}?width=${width}&format=${format}`);
    assert.equal(variant.status, 200, `${width} ${format}`);
    const info = await sharp(Buffer.from(await variant.arrayBuffer())).metadata();
    assert.deepEqual([info.format, info.width], [format, width]);
  }
  const avatar = await fetch(`${base}/u/alice/avatar`, { redirect: 'manual' });
  assert.equal(avatar.status, 302);
  assert.ok(avatar.headers.get('location'), 'a Location');
});

test("each container is given only its own secrets (the Secret's keys by component)", () => {
  /** @type {Record<string, string[]>} the secret keys each component may read */
  const allowed = {
    origin: ['UPLOAD_TOKENS', 'S3_ACCESS_KEY_ID', 'S3_SECRET_ACCESS_KEY', 'METRICS_PASSWORD', 'origin'],
    'avatar-resolver': ['AVATAR_ADMIN_TOKEN', 'METRICS_PASSWORD', 'resolver'],
    'purge-service': ['PURGE_HMAC_KEYS', 'PURGE_ADMIN_TOKEN', 'CLOUDFLARE_API_TOKEN', 'METRICS_PASSWORD', 'purge'],
    haproxy: ['HAPROXY_STATS_USER', 'HAPROXY_STATS_PASSWORD'],
    redis: ['REDIS_PASSWORD', 'REDIS_ACL_PASSWORDS', 'exporter'],
    varnish: [],
    nginx: [],
  };
  for (const pod of json('-n', NAMESPACE, 'get', 'pods').items) {
    const component = pod.metadata.labels['app.kubernetes.io/component'];
    const may = allowed[component];
    assert.ok(may, `a component this test knows: ${component}`);
    for (const container of [...(pod.spec.initContainers || []), ...pod.spec.containers]) {
      for (const variable of container.env || []) {
        const ref = variable.valueFrom?.secretKeyRef;
        if (ref) assert.ok(may.includes(ref.key), `${pod.metadata.name}/${container.name} reads ${ref.key}`);
      }
      for (const from of container.envFrom || [])
        assert.equal(from.secretRef, undefined, `${pod.metadata.name}/${container.name}: a whole Secret as variables`);
    }
  }
});

/** Sets an account's avatar through the resolver's admin API. @param {string} account @param {string} image */
async function setAvatar(account, image) {
  const set = await fetch(`${resolver}/admin/accounts/${account}`, {
    method: 'PUT',
    headers: { authorization: 'Bearer stage-admin', 'content-type': 'application/json' },
    body: JSON.stringify({ avatar: image }),
  });
  assert.equal(set.status, 200, await set.text());
}

/** The namespace's pods of one component, those terminating among them. @param {string} component */
const podsOf = (component) =>
  /** @type {any[]} */ (json('-n', NAMESPACE, 'get', 'pods', '-l', `app.kubernetes.io/component=${component}`).items);

/** The image an avatar redirect names (its /p/ URL's base58 part). @param {string} location */
const avatarTarget = (location) => {
  const encoded = /^\/p\/([^/?]+)/.exec(location)?.[1];
  return encoded ? String(base58Url.decode(encoded)) : '';
};

/** Where /u/ACCOUNT/avatar redirects now, through nginx and varnish. @param {string} account */
async function avatarOf(account) {
  const response = await fetch(`${base}/u/${account}/avatar`, { redirect: 'manual' });
  await response.arrayBuffer();
  return { location: String(response.headers.get('location')), cache: response.headers.get('x-cache') };
}

test('the avatar changed by the admin API answers the new one at once; a signed webhook purges varnish', async () => {
  const before = await avatarOf('bob');
  assert.equal((await avatarOf('bob')).cache, 'HIT', 'the 302 is cached in varnish');
  const image = 'https://example.com/bob-new.png';
  await setAvatar('bob', image);
  // the admin API queues the purge itself: the cached 302 goes within seconds, not after its TTL
  await waitFor(async () => (await avatarOf('bob')).location !== before.location, 30_000, 'the purge reaching varnish');
  const after = await avatarOf('bob');
  assert.equal(avatarTarget(after.location), image);
  await waitFor(async () => (await avatarOf('bob')).cache === 'HIT', 30_000, 'the new 302 cached');
  const body = JSON.stringify({ account: 'bob', kind: 'avatar' });
  const timestamp = String(Math.floor(Date.now() / 1000));
  const hook = await fetch(`${base}/hooks/avatar`, {
    method: 'POST',
    body,
    headers: {
      'content-type': 'application/json',
      'x-timestamp': timestamp,
      'x-signature': `sha256=${sign(HMAC, timestamp, Buffer.from(body))}`,
    },
  });
  assert.ok(hook.status < 300, `the webhook: ${hook.status} ${await hook.text()}`);
  await waitFor(async () => (await avatarOf('bob')).cache !== 'HIT', 30_000, 'the webhook purging varnish');
  assert.equal((await avatarOf('bob')).location, after.location, 'the same avatar after the purge');
});

test('the Redis pod restarted: an upload and a purge acknowledged before are served after; new work is taken', async () => {
  const upload = await tokenUpload(base, fs.readFileSync(photo('Autumn', '1920x1080')), 'autumn.jpg', TOKEN);
  assert.equal(upload.status, 200);
  const { url } = /** @type {{ url: string }} */ (await upload.json());
  // a purge acknowledged while no purge service runs is only in Redis' stream: it must outlive the restart
  const purger = `deploy/${RELEASE}-image-cdn-stack-purge-service`;
  kubectl('-n', NAMESPACE, 'scale', purger, '--replicas=0');
  await waitFor(async () => podsOf('purge-service').length === 0, 120_000, 'the purge service stopped');
  await waitFor(async () => (await avatarOf('bob')).cache === 'HIT', 30_000, "bob's 302 cached");
  const cached = (await avatarOf('bob')).location;
  const newer = 'https://example.com/bob-newer.png';
  await setAvatar('bob', newer);
  assert.equal((await avatarOf('bob')).location, cached, 'no purge service: varnish still answers the old one');
  kubectl('-n', NAMESPACE, 'delete', 'pod', `${RELEASE}-image-cdn-stack-redis-0`, '--wait=true');
  kubectl('-n', NAMESPACE, 'wait', '--for=condition=Ready', `pod/${RELEASE}-image-cdn-stack-redis-0`, '--timeout=180s');
  // the services reconnect within seconds (a request meanwhile may get a 503 with Retry-After)
  /** @type {Response | undefined} */
  let variant;
  await waitFor(
    async () => (variant = await fetch(`${base}/p/${base58Url.encode(url)}?width=300&format=jpeg`)).status === 200,
    60_000,
    'the upload from before the restart',
  );
  const made = /** @type {Response} */ (variant);
  assert.equal((await sharp(Buffer.from(await made.arrayBuffer())).metadata()).width, 300);
  await waitFor(
    async () =>
      (await tokenUpload(base, fs.readFileSync(photo('Path', '1920x1080')), 'path.jpg', TOKEN)).status === 200,
    60_000,
    'an upload after the restart',
  );
  // the avatar set before the restart is still the account's (kept in Redis, on its volume)
  let mapping = '';
  await waitFor(
    async () => {
      const set = await fetch(`${resolver}/admin/accounts/bob`, { headers: { authorization: 'Bearer stage-admin' } });
      mapping = await set.text();
      return set.status === 200;
    },
    60_000,
    "the resolver's mapping after the restart",
  );
  assert.match(mapping, /bob-newer\.png/);
  kubectl('-n', NAMESPACE, 'scale', purger, '--replicas=1');
  await waitFor(
    async () => avatarTarget((await avatarOf('bob')).location) === newer,
    120_000,
    'the purge acknowledged before the restart reaching varnish',
  );
});

test('the varnish pod replaced (a new address): nginx follows it within seconds, reloaded, not restarted', async () => {
  // found by CI on 2026-11-28: nginx resolves the varnish pods' names only when it loads its config; an
  // upgrade replaced varnish-0 as a new nginx pod started, and nginx sent everything to the old address
  // ("No route to host") for 8 minutes
  const nginxRestarts = () =>
    podsOf('nginx')
      .flatMap((pod) => pod.status.containerStatuses || [])
      .filter((/** @type {any} */ container) => container.name === 'nginx')
      .reduce((/** @type {number} */ sum, /** @type {any} */ container) => sum + container.restartCount, 0);
  const restartsBefore = nginxRestarts();
  const varnish = `${RELEASE}-image-cdn-stack-varnish-0`;
  const addressBefore = json('-n', NAMESPACE, 'get', 'pod', varnish).status.podIP;
  kubectl('-n', NAMESPACE, 'delete', 'pod', varnish, '--wait=true');
  kubectl('-n', NAMESPACE, 'wait', '--for=condition=Ready', `pod/${varnish}`, '--timeout=180s');
  const addressAfter = json('-n', NAMESPACE, 'get', 'pod', varnish).status.podIP;
  assert.notEqual(addressAfter, addressBefore, 'the new varnish pod has a new address');
  const replaced = Date.now();
  await waitFor(
    async () => (await fetch(`${base}/u/carol/avatar`, { redirect: 'manual' })).status === 302,
    60_000,
    `nginx reaching varnish at its new address ${addressAfter}`,
  );
  process.stdout.write(`  nginx served through the new varnish pod ${Date.now() - replaced} ms after it was Ready\n`);
  assert.equal(nginxRestarts(), restartsBefore, 'nginx was not restarted');
  // infra/docker/follow-address.sh's line, in the nginx container's log: the new address, and nginx reloaded
  const said = kubectl('-n', NAMESPACE, 'logs', `deploy/${RELEASE}-image-cdn-stack-nginx`, '-c', 'nginx');
  assert.match(
    said,
    new RegExp(`follow-address: [^\\n]*=${addressAfter.replace(/\./g, '\\.')} [^\\n]*\\(was [^\\n]*-s reload`),
  );
});

/** The S3 server of the compose stack (versitygw) as a Deployment and Service of the namespace, for uploads every origin reads. */
function s3Server() {
  const labels = { app: 's3' };
  const objects = [
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 's3', namespace: NAMESPACE },
      spec: {
        selector: { matchLabels: labels },
        template: {
          metadata: { labels },
          spec: {
            containers: [
              {
                name: 'versitygw',
                image: 'image-cdn-stack-versitygw:0.2.0',
                imagePullPolicy: 'Never',
                command: [
                  'sh',
                  '-c',
                  'mkdir -p /data/uploads && exec versitygw --port 0.0.0.0:7070 --iam-dir /iam posix /data',
                ],
                env: [
                  { name: 'ROOT_ACCESS_KEY_ID', value: S3_KEY },
                  { name: 'ROOT_SECRET_ACCESS_KEY', value: S3_SECRET },
                ],
                ports: [{ containerPort: 7070 }],
                readinessProbe: { tcpSocket: { port: 7070 }, periodSeconds: 2 },
                volumeMounts: [
                  { name: 'data', mountPath: '/data' },
                  { name: 'iam', mountPath: '/iam' },
                ],
              },
            ],
            volumes: [
              { name: 'data', emptyDir: {} },
              { name: 'iam', emptyDir: {} },
            ],
          },
        },
      },
    },
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 's3', namespace: NAMESPACE },
      spec: { selector: labels, ports: [{ port: 7070, targetPort: 7070 }] },
    },
  ];
  run(`${ROOT}/infra/kube/cluster.sh`, ['kubectl', 'apply', '-f', '-'], {
    input: JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects }),
  });
  kubectl('-n', NAMESPACE, 'rollout', 'status', 'deploy/s3', '--timeout=120s');
}

/** Each origin pod's transforms so far, by pod name (its metrics port, straight). @param {string[]} pods */
async function transformsByPod(pods) {
  /** @type {Record<string, number>} */
  const counts = {};
  for (const pod of pods) {
    const url = await publish(`pod/${pod}`, 9800, '/metrics');
    const text = await (await fetch(`${url}/metrics`)).text();
    counts[pod] = text
      .split('\n')
      .filter((line) => line.startsWith('origin_transforms_total{'))
      .reduce((sum, line) => sum + Number(line.split(' ').pop()), 0);
    forwards.pop()?.kill();
  }
  return counts;
}

const originPods = () =>
  podsOf('origin')
    .filter((pod) => !pod.metadata.deletionTimestamp)
    .map((pod) => /** @type {string} */ (pod.metadata.name));

test(
  "uploads on S3, two origins: one picture's variants all made by one origin; an origin deleted under steady traffic costs no error",
  {
    timeout: 900_000,
    // found by this stage on 2026-11-26: a scrubbed upload read back from S3 by another origin was a 502
    // store_corrupt (fixed, test/s3.test.js); a deleted origin pod cost 503s: it stopped listening at once and
    // haproxy sent it requests until its checks failed (fixed: SHUTDOWN_DRAIN_S, haproxy's redispatch)
  },
  async () => {
    s3Server();
    helm([
      'upgrade',
      RELEASE,
      `${ROOT}/infra/helm/image-cdn-stack`,
      '--namespace',
      NAMESPACE,
      '--reuse-values',
      '--set',
      'store.type=s3',
      '--set',
      'store.s3.endpoint=http://s3:7070',
      '--set',
      `secrets.values.S3_ACCESS_KEY_ID=${S3_KEY}`,
      '--set',
      `secrets.values.S3_SECRET_ACCESS_KEY=${S3_SECRET}`,
      '--set',
      'origin.replicas=2',
      '--wait',
      '--timeout',
      '8m',
    ]);
    mark('two origins on S3');
    // pods that changed were replaced: publish nginx's Service again
    for (const forward of forwards.splice(0)) forward.kill();
    base = await publish(`svc/${RELEASE}-image-cdn-stack-nginx`, 80);
    // the replaced pods drain (SHUTDOWN_DRAIN_S, still serving) after the rollout is done: wait them out, so
    // that every variant below is made by one of the two origins counted
    await waitFor(async () => podsOf('origin').length === 2, 120_000, 'the replaced origin pods gone');
    const pods = originPods();
    assert.equal(pods.length, 2, `origin pods: ${pods}`);

    let url = '';
    await waitFor(
      async () => {
        const upload = await tokenUpload(base, fs.readFileSync(photo('Kite', '1920x1080')), 'kite.jpg', TOKEN);
        if (upload.status === 200) url = /** @type {{ url: string }} */ (await upload.json()).url;
        return upload.status === 200;
      },
      120_000,
      'an upload to S3',
    );
    const source = base58Url.encode(url);
    // haproxy learns the new origins' addresses by DNS and health checks (a few seconds after the rollout)
    let last = '';
    await waitFor(
      async () => {
        const variant = await fetch(`${base}/p/${source}?width=50&format=jpeg`);
        last = `${variant.status} ${variant.status === 200 ? '' : (await variant.text()).slice(0, 300)}`;
        return variant.status === 200;
      },
      60_000,
      'the first variant from S3',
    ).catch((err) => {
      throw new Error(`${err.message}: the last answer ${last}`);
    });
    const before = await transformsByPod(pods);
    for (const width of [100, 200, 300, 400, 500, 600]) {
      const variant = await fetch(`${base}/p/${source}?width=${width}&format=jpeg`);
      assert.equal(variant.status, 200);
      assert.equal((await sharp(Buffer.from(await variant.arrayBuffer())).metadata()).width, width);
    }
    const after = await transformsByPod(pods);
    const made = pods.map((pod) => after[pod] - before[pod]).sort();
    assert.deepEqual(made, [0, 6], `transforms by origin: ${JSON.stringify({ before, after })}`);

    // steady traffic: every request a new variant (through varnish to an origin), two at a time, while the
    // origin that made the picture's variants is deleted; its replacement joins through haproxy's discovery
    const busy = pods.find((pod) => after[pod] - before[pod] === 6);
    /** @type {Record<string, number>} */
    const statuses = {};
    let next = 700;
    const start = Date.now();
    const end = start + 30_000;
    /** @type {string[]} what the first answers other than 200 were, for the log */
    const samples = [];
    // a steady rate (each of two clients a request every 250 ms: one client to nginx and varnish, under
    // varnish's VARNISH_MISS_LIMIT of 120 new variants in 10 s, past which it answers 429), a 503 with
    // Retry-After asked once more after a second (the bounded retry a browser's or a CDN's makes)
    const ask = (/** @type {number} */ width) =>
      fetch(`${base}/p/${source}?width=${width}&format=jpeg`).then(
        async (response) => ({ status: response.status, headers: response.headers, body: await response.text() }),
        (/** @type {Error & { cause?: Error }} */ err) => {
          if (samples.length < 6)
            samples.push(
              `no answer at ${Math.round((Date.now() - start) / 100) / 10} s: ${err.message} (${err.cause?.message})`,
            );
          return null;
        },
      );
    const client = async () => {
      while (Date.now() < end) {
        const width = next++;
        let response = await ask(width);
        if (response?.status === 503 && response.headers.get('retry-after')) {
          await new Promise((resolve) => setTimeout(resolve, 1000));
          response = await ask(width);
        }
        const status = response ? response.status : 0;
        statuses[status] = (statuses[status] || 0) + 1;
        if (response && status !== 200 && samples.length < 6)
          samples.push(
            `${status} at ${Math.round((Date.now() - start) / 100) / 10} s: ${JSON.stringify(Object.fromEntries(response.headers))} ${response.body.slice(0, 200)}`,
          );
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    };
    const clients = [client(), client()];
    await new Promise((resolve) => setTimeout(resolve, 5000));
    kubectl('-n', NAMESPACE, 'delete', 'pod', String(busy), '--wait=false');
    await Promise.all(clients);
    process.stdout.write(`  statuses while an origin was deleted: ${JSON.stringify(statuses)}\n`);
    for (const sample of samples) process.stdout.write(`    ${sample}\n`);
    assert.deepEqual(Object.keys(statuses), ['200'], JSON.stringify(statuses));
    assert.ok(statuses[200] >= 20, `steady traffic: ${statuses[200]} answers`);
  },
);

/** Whether every nginx pod is Ready and counted ready among its Service's endpoints. */
function nginxServing() {
  const pods = podsOf('nginx').filter((pod) => !pod.metadata.deletionTimestamp);
  const ready = pods.filter(isReady);
  const slices = json(
    '-n',
    NAMESPACE,
    'get',
    'endpointslices',
    '-l',
    `kubernetes.io/service-name=${RELEASE}-image-cdn-stack-nginx`,
  ).items;
  const endpoints = slices.flatMap((/** @type {any} */ slice) => slice.endpoints || []);
  return {
    pods: pods.length,
    ready: ready.length,
    endpoints: endpoints.filter((/** @type {any} */ e) => e.conditions?.ready).length,
  };
}

test('every origin gone: nginx stays Ready in its Service and serves what varnish holds; a new variant is a 503', async () => {
  // found by CI on 2026-11-28: nginx's readiness was the origin's /healthz through the chain, so origins not
  // answering took every nginx pod out of the Service (cached images too), and held nginx's rollout (8 min)
  const upload = await tokenUpload(base, fs.readFileSync(photo('Kite', '1920x1080')), 'kite.jpg', TOKEN);
  assert.equal(upload.status, 200, await upload.clone().text());
  const source = base58Url.encode(/** @type {{ url: string }} */ (await upload.json()).url);
  const cached = `${base}/p/${source}?width=320&format=jpeg`;
  assert.equal((await fetch(cached)).status, 200);
  await waitFor(async () => (await fetch(cached)).headers.get('x-cache') === 'HIT', 30_000, 'the variant cached');
  const origin = `deploy/${RELEASE}-image-cdn-stack-origin`;
  const replicas = json('-n', NAMESPACE, 'get', origin).spec.replicas;
  kubectl('-n', NAMESPACE, 'scale', origin, '--replicas=0');
  try {
    await waitFor(async () => podsOf('origin').length === 0, 180_000, 'every origin pod gone');
    // varnish's probe calls the backend sick within about 6 s; nginx's readiness would fail after 3 × 5 s
    const sick = Date.now();
    await waitFor(
      async () => {
        const fresh = await fetch(`${base}/p/${source}?width=321&format=jpeg`);
        await fresh.arrayBuffer();
        return fresh.status === 503;
      },
      60_000,
      'a new variant refused',
    );
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, 25_000 - (Date.now() - sick))));
    const serving = nginxServing();
    assert.ok(serving.pods >= 1, 'an nginx pod');
    assert.deepEqual(
      serving,
      { pods: serving.pods, ready: serving.pods, endpoints: serving.pods },
      'nginx in its Service',
    );
    const stale = await fetch(cached);
    assert.equal(stale.status, 200);
    assert.equal((await sharp(Buffer.from(await stale.arrayBuffer())).metadata()).width, 320);
    const fresh = await fetch(`${base}/p/${source}?width=322&format=jpeg`);
    assert.equal(fresh.status, 503);
    assert.match(String(fresh.headers.get('content-type')), /json/);
  } finally {
    kubectl('-n', NAMESPACE, 'scale', origin, `--replicas=${replicas}`);
  }
  await waitFor(
    async () => (await fetch(`${base}/p/${source}?width=323&format=jpeg`)).status === 200,
    180_000,
    'new variants again once the origins are back',
  );
});
