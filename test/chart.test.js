// needs the whole-stack tier's built tools (versitygw, helm, kube-score, Podman): run once they are built
// The Helm chart, checked offline: helm lint --strict, helm template, the rendered objects against
// Kubernetes' own schemas (kubernetes-validate --strict, three minor versions) and a linter (kube-score);
// then what the multi-node values make. The tools are built by ./infra/stack test (BUILT_TOOLS_DIR).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { createHash } from 'node:crypto';
import { renderAll } from '../infra/render.js';
import { ROOT, resolveSettings } from '../infra/resolve.js';

const CHART = path.join(ROOT, 'infra', 'helm', 'image-cdn-stack');
const MULTI = path.join(CHART, 'ci', 'multi-node-values.yaml');
const HELM = process.env.HELM || 'helm';
const KUBE_SCORE = process.env.KUBE_SCORE || 'kube-score';
const KUBERNETES_VALIDATE = process.env.KUBERNETES_VALIDATE || 'kubernetes-validate';
const KUBERNETES_VERSIONS = ['1.35.0', '1.36.0', '1.37.0'];

/** @param {string} command @param {string[]} args */
function run(command, args) {
  const result = spawnSync(command, args, { encoding: 'utf8', maxBuffer: 64 << 20 });
  return { status: result.status, out: `${result.stdout}${result.stderr}`, stdout: result.stdout };
}

/** The objects `helm template` renders. @param {string[]} args */
function template(...args) {
  const rendered = run(HELM, ['template', 'cdn', CHART, '--namespace', 'images', ...args]);
  assert.equal(rendered.status, 0, rendered.out);
  return {
    text: rendered.stdout,
    objects: parseAllDocuments(rendered.stdout)
      .map((doc) => doc.toJS())
      .filter(Boolean),
  };
}

/** @param {any[]} objects @param {string} kind @param {string} name */
function find(objects, kind, name) {
  const found = objects.find((object) => object.kind === kind && object.metadata.name === name);
  assert.ok(found, `${kind} ${name}`);
  return found;
}

for (const [label, values] of [
  ['default values', []],
  ['multi-node values', ['-f', MULTI]],
]) {
  test(`chart (${label}): helm lint --strict, Kubernetes' schemas (${KUBERNETES_VERSIONS.join(', ')}) and kube-score pass`, () => {
    const lint = run(HELM, ['lint', '--strict', CHART, ...values]);
    assert.equal(lint.status, 0, lint.out);
    const { text } = template(...values);
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'chart-')), 'rendered.yaml');
    fs.writeFileSync(file, text);
    for (const version of KUBERNETES_VERSIONS) {
      const checked = run(KUBERNETES_VALIDATE, ['--strict', '--quiet', '--no-warn', '-k', version, file]);
      assert.equal(checked.status, 0, `Kubernetes ${version}:\n${checked.out.slice(0, 4000)}`);
    }
    const score = run(KUBE_SCORE, ['score', '--output-format', 'ci', file]);
    assert.equal(
      score.status,
      0,
      score.out
        .split('\n')
        .filter((line) => /\[(CRITICAL|WARNING)\]/.test(line))
        .join('\n'),
    );
    fs.rmSync(path.dirname(file), { recursive: true, force: true });
  });
}

test('the schema check fails on what Kubernetes would refuse (a field of no schema)', () => {
  const { text } = template();
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'chart-')), 'broken.yaml');
  fs.writeFileSync(file, text.replace('revisionHistoryLimit: 3', 'revisionHistoryLimit: 3\n  replica: 2'));
  const checked = run(KUBERNETES_VALIDATE, ['--strict', '--quiet', '--no-warn', '-k', KUBERNETES_VERSIONS[0], file]);
  assert.notEqual(checked.status, 0);
  assert.match(checked.out, /'replica' was unexpected/);
  fs.rmSync(path.dirname(file), { recursive: true, force: true });
});

test('multi-node values: two or more origins (HPA on CPU), resolvers and varnish nodes; purges find every node through the headless Service', () => {
  const { objects } = template('-f', MULTI);
  const name = 'cdn-image-cdn-stack';
  const hpa = find(objects, 'HorizontalPodAutoscaler', `${name}-origin`);
  assert.ok(hpa.spec.minReplicas >= 2);
  assert.equal(hpa.spec.metrics[0].resource.name, 'cpu');
  assert.equal(find(objects, 'Deployment', `${name}-origin`).spec.replicas, undefined, 'the autoscaler owns the count');
  assert.ok(find(objects, 'Deployment', `${name}-avatar-resolver`).spec.replicas >= 2);
  const varnish = find(objects, 'StatefulSet', `${name}-varnish`);
  assert.ok(varnish.spec.replicas >= 2);
  const headless = find(objects, 'Service', `${name}-varnish-headless`);
  assert.equal(headless.spec.clusterIP, 'None');
  assert.equal(headless.spec.publishNotReadyAddresses, true);
  assert.equal(varnish.spec.serviceName, headless.metadata.name);
  const settings = find(objects, 'ConfigMap', `${name}-settings`).data;
  assert.equal(settings.PURGE_VARNISH_NODES, `${name}-varnish-headless.images.svc.cluster.local:6081`);
  assert.deepEqual(
    settings.EDGE_VARNISH_NODES.split(','),
    [...Array(varnish.spec.replicas).keys()].map(
      (i) => `${name}-varnish-${i}.${name}-varnish-headless.images.svc.cluster.local:6081`,
    ),
  );
  assert.equal(settings.ORIGIN_DISCOVERY, `${name}-origin-headless.images.svc.cluster.local:8800`);
  // nginx's own resolver knows no search domains: a short name failed every upload on a real cluster (#50)
  assert.equal(settings.HAPROXY_HOST, `${name}-haproxy.images.svc.cluster.local`);
  assert.equal(find(objects, 'Service', `${name}-origin-headless`).spec.clusterIP, 'None');
  assert.equal(settings.STORE, 's3');
  assert.ok(settings.REDIS_SENTINELS.split(',').length >= 2);
  assert.ok(objects.some((object) => object.kind === 'ServiceMonitor'));
});

test('every workload: non-root, read-only root filesystem, no privilege escalation, resources, probes; configs from infra/render.js', () => {
  const { objects } = template('-f', MULTI);
  const workloads = objects.filter((object) => ['Deployment', 'StatefulSet'].includes(object.kind));
  assert.equal(workloads.length, 6);
  for (const workload of workloads) {
    const pod = workload.spec.template.spec;
    assert.equal(pod.securityContext.runAsNonRoot, true, workload.metadata.name);
    assert.equal(pod.automountServiceAccountToken, false);
    // no Service addresses as variables: a Service named `s3` set S3_PORT=tcp://… and the render refused it (#50)
    assert.equal(pod.enableServiceLinks, false, `${workload.metadata.name}: enableServiceLinks`);
    for (const container of [...(pod.initContainers || []), ...pod.containers]) {
      const where = `${workload.metadata.name}/${container.name}`;
      assert.equal(container.securityContext.readOnlyRootFilesystem, true, where);
      assert.equal(container.securityContext.allowPrivilegeEscalation, false, where);
      assert.deepEqual(container.securityContext.capabilities.drop, ['ALL'], where);
      assert.ok(container.resources.limits.memory && container.resources.requests.cpu, where);
    }
    assert.ok(pod.containers[0].readinessProbe && pod.containers[0].livenessProbe, workload.metadata.name);
    // nginx, varnish and haproxy take their configs from the render step, never from a copy in the chart
    if (pod.initContainers) assert.deepEqual(pod.initContainers[0].command, ['node', 'infra/render.js']);
  }
  // a deleted Node service drains (health at 503) long enough for haproxy to mark it down, and the pod's grace
  // leaves its requests in flight time to finish after that
  const drainS = Number(find(objects, 'ConfigMap', 'cdn-image-cdn-stack-settings').data.SHUTDOWN_DRAIN_S);
  assert.ok(drainS >= 6, `SHUTDOWN_DRAIN_S ${drainS}: haproxy needs 2 failed checks 2 s apart, each up to 2 s`);
  const nodeServices = workloads.filter((workload) =>
    /\/bin\//.test(workload.spec.template.spec.containers[0].command?.[0]),
  );
  assert.equal(nodeServices.length, 3);
  for (const workload of nodeServices)
    assert.ok(workload.spec.template.spec.terminationGracePeriodSeconds >= drainS + 15, workload.metadata.name);
  const pdbs = objects.filter((object) => object.kind === 'PodDisruptionBudget').map((object) => object.metadata.name);
  assert.equal(pdbs.length, 6);
  const configs = fs.readdirSync(path.join(CHART, 'templates')).filter((file) => /\.(conf|cfg|vcl)$/.test(file));
  assert.deepEqual(configs, [], 'no second copy of a config in the chart');
});

test("NetworkPolicy: only nginx's port is open to all; admin, metrics and purge ports only from their callers", () => {
  const { objects } = template();
  const name = 'cdn-image-cdn-stack';
  const policies = objects.filter((object) => object.kind === 'NetworkPolicy');
  const open = policies.flatMap((policy) =>
    policy.spec.ingress
      .filter((/** @type {any} */ rule) => !rule.from)
      .map(
        (/** @type {any} */ rule) =>
          `${policy.metadata.name}:${rule.ports.map((/** @type {any} */ port) => port.port)}`,
      ),
  );
  assert.deepEqual(open, [`${name}-nginx:http`]);
  const purge = find(objects, 'NetworkPolicy', `${name}-purge-service`);
  const callers = purge.spec.ingress
    .find((/** @type {any} */ rule) => rule.ports[0].port === 'http')
    .from.map((/** @type {any} */ from) => from.podSelector.matchLabels['app.kubernetes.io/component']);
  assert.deepEqual(callers, ['nginx']);
  const stats = find(objects, 'NetworkPolicy', `${name}-haproxy`).spec.ingress.find((/** @type {any} */ rule) =>
    rule.ports.some((/** @type {any} */ port) => port.port === 'stats'),
  );
  assert.ok(
    stats.from.every((/** @type {any} */ from) => from.namespaceSelector),
    'stats from the monitoring namespace only',
  );
  const workloads = objects
    .filter((object) => ['Deployment', 'StatefulSet'].includes(object.kind))
    .map((object) => object.spec.template.metadata.labels['app.kubernetes.io/component']);
  const covered = policies.map((policy) => policy.spec.podSelector.matchLabels['app.kubernetes.io/component']);
  assert.deepEqual([...covered].sort(), [...workloads].sort());
});

test("the chart and its images follow the project's version; the dashboards ConfigMap holds every dashboard", () => {
  const version = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')).version;
  const chart = fs.readFileSync(path.join(CHART, 'Chart.yaml'), 'utf8');
  assert.match(chart, new RegExp(`^version: ${version}$`, 'm'));
  assert.match(chart, new RegExp(`^appVersion: "${version}"$`, 'm'));
  assert.match(chart, /artifacthub\.io\/license: Apache-2\.0/);
  const compose = fs.readFileSync(path.join(ROOT, 'docker-compose.yml'), 'utf8');
  const tags = [...compose.matchAll(/image: (image-cdn-stack-[a-z]+):(\S+)/g)];
  assert.ok(tags.length >= 3);
  for (const [, image, tag] of tags) assert.equal(tag, version, image);
  assert.match(
    fs.readFileSync(path.join(ROOT, 'CHANGELOG.md'), 'utf8'),
    new RegExp(`^## \\[${version.replace(/\./g, '\\.')}\\]`, 'm'),
  );
  const { objects } = template();
  const dashboards = find(objects, 'ConfigMap', 'cdn-image-cdn-stack-dashboards');
  const files = fs
    .readdirSync(path.join(ROOT, 'dashboards'))
    .filter((file) => file.endsWith('.json'))
    .sort();
  assert.deepEqual(Object.keys(dashboards.data).sort(), files);
  for (const file of files)
    assert.equal(
      JSON.parse(dashboards.data[file]).uid,
      JSON.parse(fs.readFileSync(path.join(ROOT, 'dashboards', file), 'utf8')).uid,
    );
  assert.equal(dashboards.metadata.labels.grafana_dashboard, '1');
});

/** Every container's secrets: `secret/key` of each secretKeyRef, and whether it takes a whole Secret. @param {any} container */
function secretsOf(container) {
  const refs = (container.env || []).flatMap((entry) =>
    entry.valueFrom?.secretKeyRef ? [`${entry.valueFrom.secretKeyRef.name}/${entry.valueFrom.secretKeyRef.key}`] : [],
  );
  return {
    refs: refs.sort(),
    wholeSecret: (container.envFrom || []).some((/** @type {any} */ from) => from.secretRef),
  };
}

test("each program gets its own secrets only, and its own Redis user: a libvips exploit in the origin yields the origin's", async () => {
  const { objects } = template();
  const users = find(objects, 'Secret', 'cdn-image-cdn-stack-redis-users');
  const main = 'cdn-image-cdn-stack-secrets/';
  const own = 'cdn-image-cdn-stack-redis-users/';
  /** @type {Record<string, string[]>} */
  const expected = {
    // each service's metrics password too (optional in the chart's Secret: the NetworkPolicy guards the port)
    'origin/origin': [
      `${main}METRICS_PASSWORD`,
      `${main}S3_ACCESS_KEY_ID`,
      `${main}S3_SECRET_ACCESS_KEY`,
      `${main}UPLOAD_TOKENS`,
      `${own}origin`,
    ],
    'avatar-resolver/avatar-resolver': [`${main}AVATAR_ADMIN_TOKEN`, `${main}METRICS_PASSWORD`, `${own}resolver`],
    'purge-service/purge-service': [
      `${main}CLOUDFLARE_API_TOKEN`,
      `${main}METRICS_PASSWORD`,
      `${main}PURGE_ADMIN_TOKEN`,
      `${main}PURGE_HMAC_KEYS`,
      `${own}purge`,
    ],
    'haproxy/render': [`${main}HAPROXY_STATS_PASSWORD`, `${main}HAPROXY_STATS_USER`],
    'redis/render': [`${main}REDIS_PASSWORD`, `${own}REDIS_ACL_PASSWORDS`],
    'redis/redis-exporter': [`${own}exporter`],
  };
  /** @type {Record<string, string[]>} */
  const seen = {};
  for (const workload of objects.filter((object) => ['Deployment', 'StatefulSet'].includes(object.kind))) {
    const component = workload.metadata.labels['app.kubernetes.io/component'];
    const pod = workload.spec.template.spec;
    for (const container of [...(pod.initContainers || []), ...pod.containers]) {
      const { refs, wholeSecret } = secretsOf(container);
      assert.equal(wholeSecret, false, `${component}/${container.name} takes no whole Secret`);
      if (refs.length) seen[`${component}/${container.name}`] = refs;
    }
  }
  assert.deepEqual(seen, Object.fromEntries(Object.entries(expected).map(([name, refs]) => [name, refs.sort()])));
  const origin = find(objects, 'Deployment', 'cdn-image-cdn-stack-origin').spec.template.spec.containers[0];
  assert.deepEqual(
    origin.env.find((/** @type {any} */ entry) => entry.name === 'REDIS_USERNAME'),
    { name: 'REDIS_USERNAME', value: 'origin' },
  );

  // the Redis pod's render step, given what the chart gives it, makes exactly these users: each password the
  // one its program receives, the admin password no service's
  const plain = (/** @type {string} */ key) => Buffer.from(users.data[key], 'base64').toString();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'chart-redis-'));
  try {
    const config = await resolveSettings({
      ENV_FILE: '/nonexistent',
      STACK_DIR: dir,
      STACK_USER_PREFIX: '',
      REDIS_PASSWORD: 'admin-password',
      REDIS_ACL_PASSWORDS: plain('REDIS_ACL_PASSWORDS'),
    });
    renderAll(config);
    const conf = fs.readFileSync(path.join(dir, 'conf', 'redis.conf'), 'utf8');
    for (const user of ['origin', 'resolver', 'purge', 'exporter']) {
      assert.ok(plain(user).length >= 32, `${user}: a generated password`);
      assert.match(
        conf,
        new RegExp(`^user ${user} on #${createHash('sha256').update(plain(user)).digest('hex')} `, 'm'),
        `${user}'s password is the one it receives`,
      );
    }
    assert.match(conf, /^requirepass "admin-password"$/m);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('values that cannot work are refused with a clear message', () => {
  const fsFleet = run(HELM, ['template', 'cdn', CHART, '--set', 'origin.autoscaling.enabled=true']);
  assert.notEqual(fsFleet.status, 0);
  assert.match(fsFleet.out, /more than one origin needs store\.type=s3/);
  const noEndpoint = run(HELM, ['template', 'cdn', CHART, '--set', 'store.type=s3']);
  assert.match(noEndpoint.out, /store\.type=s3 needs store\.s3\.endpoint/);
  // a misspelt setting would do nothing, quietly: refused, the nearest setting named
  for (const [given, meant] of [
    ['UPLOAD_TOKEN', 'UPLOAD_TOKENS'],
    ['NEGOTIATE_MATHC', 'NEGOTIATE_MATCH'],
    ['PUBLIC_URL_', 'PUBLIC_URL'],
  ]) {
    const misspelt = run(HELM, ['template', 'cdn', CHART, '--set', `settings.${given}=x`]);
    assert.notEqual(misspelt.status, 0, given);
    assert.match(misspelt.out, new RegExp(`settings\\.${given} is not a setting \\(did you mean ${meant}\\?\\)`));
  }
  assert.equal(
    run(HELM, ['template', 'cdn', CHART, '--set', 'settings.UPLOAD_MAX_BYTES=10mb']).status,
    0,
    'a real setting passes',
  );
  // values.schema.json (generated from values.yaml and the declarations): a misspelt or mistyped value
  const misspeltValue = run(HELM, ['template', 'cdn', CHART, '--set', 'orign.replicas=2']);
  assert.notEqual(misspeltValue.status, 0);
  assert.match(misspeltValue.out, /orign/);
  const mistyped = run(HELM, ['template', 'cdn', CHART, '--set', 'origin.replicas=two']);
  assert.notEqual(mistyped.status, 0);
  assert.match(mistyped.out, /replicas/);
  for (const bad of [
    'settings.UPLOAD_MAX_BYTES=lots',
    'settings.NEGOTIATE_MATCH=maybe',
    'settings.AVATAR_SOURCE=ldap',
    'settings.TRANSFORM_QUEUE_MAX=-1',
  ]) {
    const refused = run(HELM, ['template', 'cdn', CHART, '--set', bad]);
    assert.notEqual(refused.status, 0, bad);
    assert.match(refused.out, new RegExp(bad.split('=')[0].split('.')[1]), bad);
  }
  assert.equal(
    run(HELM, [
      'template',
      'cdn',
      CHART,
      '--set',
      'settings.NEGOTIATE_MATCH=false',
      '--set',
      'settings.TRANSFORM_QUEUE_MAX=8',
    ]).status,
    0,
    'well typed values pass',
  );
});

test("the recording rules and alerts ship as a PrometheusRule, the native stack's own files, every alert with its runbook", () => {
  assert.ok(!template().objects.some((object) => object.kind === 'PrometheusRule'), 'off by default');
  const { objects } = template(
    '--set',
    'monitoring.prometheusRule.enabled=true',
    '--set',
    'monitoring.prometheusRule.labels.release=kube-prometheus',
  );
  const rule = find(objects, 'PrometheusRule', 'cdn-image-cdn-stack');
  assert.equal(rule.apiVersion, 'monitoring.coreos.com/v1');
  assert.equal(rule.metadata.labels.release, 'kube-prometheus');
  const rules = rule.spec.groups.flatMap((/** @type {any} */ group) => group.rules);
  const native = fs.readFileSync(path.join(ROOT, 'monitoring/rules/alerts.yml'), 'utf8');
  const alerts = rules.filter((/** @type {any} */ entry) => entry.alert);
  assert.equal(alerts.length, [...native.matchAll(/- alert: /g)].length);
  for (const alert of alerts) assert.match(alert.annotations.runbook_url, /^docs\/runbooks\.md#/, alert.alert);
  assert.ok(
    alerts.some((/** @type {any} */ alert) => alert.annotations.summary.includes('{{ $value')),
    'Prometheus templates kept, not evaluated by helm',
  );
  assert.ok(
    rules.some((/** @type {any} */ entry) => entry.record),
    'the recording rules the alerts use',
  );
});

test('the ServiceMonitor sends the metrics password where the Node services ask for it, and only there', () => {
  const open = template('--set', 'monitoring.serviceMonitor.enabled=true').objects.filter(
    (object) => object.kind === 'ServiceMonitor',
  );
  assert.equal(open.length, 7);
  for (const monitor of open)
    if (!monitor.metadata.name.endsWith('-haproxy'))
      assert.equal(monitor.spec.endpoints[0].basicAuth, undefined, monitor.metadata.name);
  const { objects } = template(
    '--set',
    'monitoring.serviceMonitor.enabled=true',
    '--set',
    'secrets.values.METRICS_PASSWORD=s3cret',
  );
  const secret = find(objects, 'Secret', 'cdn-image-cdn-stack-secrets');
  assert.equal(Buffer.from(secret.data.METRICS_USER, 'base64').toString(), 'metrics');
  assert.equal(Buffer.from(secret.data.METRICS_PASSWORD, 'base64').toString(), 's3cret');
  for (const monitor of objects.filter((object) => object.kind === 'ServiceMonitor')) {
    const component = monitor.metadata.labels['app.kubernetes.io/component'];
    const auth = monitor.spec.endpoints[0].basicAuth;
    if (['origin', 'avatar-resolver', 'purge-service'].includes(component)) {
      assert.equal(auth.username.key, 'METRICS_USER', component);
      assert.equal(auth.password.key, 'METRICS_PASSWORD', component);
    } else if (component !== 'haproxy') assert.equal(auth, undefined, component);
  }
});
