import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { TEMPLATES } from '../render.js';
import { ROOT } from '../resolve.js';

test("docker-compose.yml is valid (Debian's docker-compose config, no engine needed)", () => {
  const out = execFileSync('docker-compose', ['-f', path.join(ROOT, 'docker-compose.yml'), 'config'], {
    env: {
      ...process.env,
      GRAFANA_ADMIN_PASSWORD: 'validate-only',
      S3_ACCESS_KEY_ID: 'validate-only',
      S3_SECRET_ACCESS_KEY: 'validate-only',
      METRICS_PASSWORD: 'validate-only',
    },
    encoding: 'utf8',
  });
  for (const service of [
    'render',
    'nginx',
    'varnish',
    'haproxy',
    'redis',
    'origin',
    'avatar-resolver',
    'purge-service',
    'prometheus',
    'grafana',
    'mtail',
    'varnish-exporter',
    'nginx-exporter',
    'redis-exporter',
    'versitygw',
  ]) {
    assert.match(out, new RegExp(`^  ${service}:$`, 'm'), service);
  }
  const published = [...out.matchAll(/^\s+- (?:published: )?["']?(\d+):?/gm)];
  assert.equal((out.match(/^    ports:$/gm) || []).length, 1, 'only nginx publishes a port');
  assert.ok(published.length >= 1);
});

test('compose uses the same config templates as the native stack, rendered by the same script', () => {
  const compose = fs.readFileSync(path.join(ROOT, 'docker-compose.yml'), 'utf8');
  assert.match(compose, /command: \["node", "infra\/render\.js"\]/);
  for (const [, target] of TEMPLATES.filter(
    ([source]) => !source.includes('supervisord') && !source.includes('errors'),
  )) {
    if (target === 'redis.conf' || target === 'nginx.conf' || target === 'haproxy.cfg')
      assert.ok(compose.includes(`/stack/conf/${target}`), target);
  }
  const dockerfile = fs.readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8');
  assert.match(dockerfile, /npm ci --omit=dev/, 'the image installs with npm ci like the launcher');
  assert.match(dockerfile, /^USER 10001$/m, 'non-root');
  assert.match(fs.readFileSync(path.join(ROOT, 'infra/stack'), 'utf8'), /npm ci /);
  const configCopies = ['nginx.conf', 'haproxy.cfg', 'default.vcl'].filter((name) =>
    fs.existsSync(path.join(ROOT, 'infra/docker', name)),
  );
  assert.deepEqual(configCopies, [], 'no second copy of a config for compose');
});

test('the Grafana image compose pins is the version whose schema package checks the dashboards', async () => {
  const compose = fs.readFileSync(path.join(ROOT, 'docker-compose.yml'), 'utf8');
  const tag = /image: grafana\/grafana:(\S+)/.exec(compose)?.[1];
  const schema = JSON.parse(fs.readFileSync(path.join(ROOT, 'node_modules/@grafana/schema/package.json'), 'utf8'));
  assert.equal(tag, schema.version, "docker-compose.yml's Grafana and @grafana/schema (package.json) move together");
  const { defaultDashboard } = await import('@grafana/schema');
  for (const file of ['overview.json', 'origin.json', 'avatars.json', 'edge.json']) {
    const board = JSON.parse(fs.readFileSync(path.join(ROOT, 'dashboards', file), 'utf8'));
    assert.equal(board.schemaVersion, defaultDashboard.schemaVersion, `${file}: the schema version of Grafana ${tag}`);
  }
});

test("the app image holds every module of the render step (the Dockerfile's COPY lines)", () => {
  const dockerfile = fs.readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8');
  /** what the image's COPY lines bring from the checkout: files and whole directories */
  const copied = [...dockerfile.matchAll(/^COPY (?!--from)(.+) \S+$/gm)].flatMap((match) => match[1].split(/\s+/));
  const inImage = (/** @type {string} */ file) =>
    copied.some((source) => file === source || file.startsWith(`${source.replace(/\/$/, '')}/`));
  // the relative imports of infra/render.js, followed through infra/ (lib/ is copied whole)
  const seen = new Set();
  const next = ['infra/render.js'];
  for (let file = next.pop(); file; file = next.pop()) {
    if (seen.has(file)) continue;
    seen.add(file);
    const text = fs.readFileSync(path.join(ROOT, file), 'utf8');
    for (const [, spec] of text.matchAll(/(?:from|import\() *'(\.{1,2}\/[^']+)'/g)) {
      const target = path.relative(ROOT, path.resolve(ROOT, path.dirname(file), spec));
      if (target.startsWith('infra/') && target.endsWith('.js')) next.push(target);
    }
  }
  assert.ok(seen.size > 10, `followed the render step's modules (${seen.size})`);
  assert.deepEqual(
    [...seen].filter((file) => !inImage(file)),
    [],
    "modules of the render step the Dockerfile's COPY lines leave out (compose's render container fails)",
  );
});
