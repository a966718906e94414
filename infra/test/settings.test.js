import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { loadConfig } from '../../lib/src/config.js';
import {
  CHART_SETTINGS,
  CONFIG_TYPES,
  VALUES_SCHEMA,
  renderChartSettings,
  renderConfigTypes,
  renderEnvExample,
  renderValuesSchema,
  withSettingsTable,
} from '../env-example.js';
import { substitute, templateValues } from '../render.js';
import { ROOT, resolveSettings } from '../resolve.js';
import { allSettings } from '../settings.js';

test(".env.example, the settings table (docs/settings.md), the chart's settings list and values.schema.json are generated from the declarations and current", async () => {
  assert.equal(fs.readFileSync(`${ROOT}/.env.example`, 'utf8'), await renderEnvExample(), 'run npm run env-example');
  assert.equal(fs.readFileSync(CHART_SETTINGS, 'utf8'), await renderChartSettings(), 'run npm run env-example');
  assert.equal(fs.readFileSync(CONFIG_TYPES, 'utf8'), await renderConfigTypes(), 'run npm run env-example');
  assert.equal(fs.readFileSync(VALUES_SCHEMA, 'utf8'), await renderValuesSchema(), 'run npm run env-example');
  const readme = fs.readFileSync(`${ROOT}/docs/settings.md`, 'utf8');
  assert.equal(readme, await withSettingsTable(readme), 'run npm run env-example');
});

test('a bad setting stops start-up with an error naming the variable', async () => {
  const settings = await allSettings();
  assert.throws(() => loadConfig(settings, { ORIGIN_PORT: 'eighty' }), /ORIGIN_PORT="eighty": expected a number/);
  assert.throws(
    () => loadConfig(settings, { AVATAR_SOURCE: 'ldap' }),
    /AVATAR_SOURCE="ldap": expected one of local, hive, http/,
  );
  assert.throws(() => loadConfig(settings, { UPLOAD_MAX_BYTES: 'lots' }), /UPLOAD_MAX_BYTES/);
  assert.equal(loadConfig(settings, { UPLOAD_MAX_BYTES: '2mb' }).UPLOAD_MAX_BYTES, 2 * 1024 * 1024);
});

test("settings that break a rule between them (lib/src/rules.js) stop the render and a service's start-up, naming both and why", async () => {
  const render = (/** @type {Record<string, string>} */ env) =>
    resolveSettings({ ENV_FILE: '/nonexistent', STACK_DIR: '/tmp/x', ...env });
  await assert.rejects(
    render({ REQUEST_TIMEOUT_S: '70' }),
    /REQUEST_TIMEOUT_S=70, HAPROXY_SERVER_TIMEOUT_S=60: the origin must answer a slow miss .* before haproxy gives up/,
  );
  await assert.rejects(
    render({ NGINX_TLS_CERT: '/etc/ssl/cert.pem' }),
    /NGINX_TLS_CERT=\/etc\/ssl\/cert.pem, NGINX_TLS_KEY=: a certificate needs its key/,
  );
  assert.equal((await render({ REQUEST_TIMEOUT_S: '70', HAPROXY_SERVER_TIMEOUT_S: '90' })).REQUEST_TIMEOUT_S, 70);
  // the purge service alone knows both of these: it refuses to start (exit 2) before it connects to anything
  const purge = spawnSync(process.execPath, [path.join(ROOT, 'purge-service/src/server.js')], {
    encoding: 'utf8',
    timeout: 20_000,
    env: { ...process.env, ENV_FILE: '/dev/null', WARM: 'true', HIVE_FOLLOW: 'false' },
  });
  assert.equal(purge.status, 2, purge.stderr);
  assert.match(purge.stderr, /WARM=true, HIVE_FOLLOW=false: the warmer is fed by the chain follower/);
});

test('the renderer derives shared values once and refuses unknown template variables', async () => {
  const config = await resolveSettings({
    ENV_FILE: '/nonexistent',
    STACK_DIR: '/tmp/x',
    NGINX_PORT: '9999',
    REDIS_PORT: '7777',
  });
  assert.equal(config.PUBLIC_URL, 'http://127.0.0.1:9999');
  assert.equal(config.REDIS_URL, 'redis://127.0.0.1:7777/0');
  assert.deepEqual(
    config.PURGE_VARNISH_NODES,
    ['unix:/tmp/x/run/purge/varnish.sock'],
    "this stack's varnish, on its purge socket",
  );
  const explicit = await resolveSettings({ ENV_FILE: '/nonexistent', PUBLIC_URL: 'https://images.example.com' });
  assert.equal(explicit.PUBLIC_URL, 'https://images.example.com');
  assert.throws(
    () => substitute('listen ${NGINX_PROT};', { NGINX_PORT: '1' }, 'nginx.conf'),
    /no value for \$\{NGINX_PROT\}/,
  );
});

test(
  "a run directory varnish's users cannot reach is refused when given, and never rendered into",
  { skip: process.getuid?.() !== 0 && 'as root only (then the daemons run as their own users)' },
  async () => {
    const { reachableByOthers } = await import('../resolve.js');
    const os = await import('node:os');
    const path = await import('node:path');
    const hidden = fs.mkdtempSync(path.join(os.tmpdir(), 'private-')); // 0700, as mktemp -d or /root
    try {
      assert.equal(reachableByOthers(hidden), false);
      assert.equal(reachableByOthers(os.tmpdir()), true);
      await assert.rejects(
        resolveSettings({ ENV_FILE: '/nonexistent', STACK_DIR: path.join(hidden, 'run') }),
        /STACK_DIR=.*cannot reach it/,
      );
      // the directory itself may be private: rendering makes it searchable
      const own = await resolveSettings({ ENV_FILE: '/nonexistent', STACK_DIR: hidden });
      assert.equal(own.STACK_DIR, hidden);
    } finally {
      fs.rmSync(hidden, { recursive: true, force: true });
    }
  },
);

test("Prometheus scrapes this stack's addresses, or exactly the targets PROMETHEUS_SCRAPE names for a job", async () => {
  const values = async (/** @type {Record<string, string>} */ env) =>
    /** @type {Record<string, string>} */ (
      templateValues(await resolveSettings({ ENV_FILE: '/nonexistent', STACK_DIR: '/tmp/x', ...env }))
    );
  const own = await values({ LISTEN_ADDRESS: '0.0.0.0' });
  assert.equal(own.SCRAPE_ORIGIN, "'127.0.0.1:9800'");
  const fleet = await values({ PROMETHEUS_SCRAPE: 'origin=10.0.0.1:9800,origin=10.0.0.2:9800,varnish=exporter:9131' });
  assert.equal(fleet.SCRAPE_ORIGIN, "'10.0.0.1:9800', '10.0.0.2:9800'");
  assert.equal(fleet.SCRAPE_VARNISH, "'exporter:9131'");
  assert.equal(fleet.SCRAPE_NGINX, "'127.0.0.1:9113'");
  await assert.rejects(values({ PROMETHEUS_SCRAPE: 'grafana=g:3000' }), /PROMETHEUS_SCRAPE: "grafana=g:3000"/);
  await assert.rejects(
    values({ ALLOWED_SIZES: '640,9000' }),
    /ALLOWED_SIZES: 9000 is not a whole number of pixels from 1 to MAX_DIMENSION/,
  );
});

test('a misspelt setting in .env stops the render with a message naming the nearest setting', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'misspelt-'));
  try {
    fs.writeFileSync(path.join(dir, '.env'), 'UPLOAD_TOKENS=a\nUPLOAD_TOKEN=b\nVARNISH_MISS_LIMT=5\nORIGN_PORT=8800\n');
    await assert.rejects(resolveSettings({ ENV_FILE: path.join(dir, '.env'), STACK_DIR: dir }), (err) => {
      assert.match(
        String(/** @type {Error} */ (err).message),
        /UPLOAD_TOKEN is not a setting \(did you mean UPLOAD_TOKENS\?\)/,
      );
      assert.match(
        String(/** @type {Error} */ (err).message),
        /VARNISH_MISS_LIMT is not a setting \(did you mean VARNISH_MISS_LIMIT\?\)/,
      );
      // a service's setting (the origin's port), not the nearest of the stack's own
      assert.match(
        String(/** @type {Error} */ (err).message),
        /ORIGN_PORT is not a setting \(did you mean ORIGIN_PORT\?\)/,
      );
      return true;
    });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test("the typecheck refuses a misspelt setting where a module names its service's config type", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'config-types-'));
  try {
    const file = path.join(dir, 'module.js');
    fs.writeFileSync(
      file,
      `/** @param {import('${ROOT}/lib/src/config-types.js').OriginConfig} config */\n` +
        'export const limits = (config) => [config.UPLOAD_MAX_BYTES, config.UPLOAD_MAX_BYTE];\n',
    );
    const tsc = spawnSync(
      process.execPath,
      [
        path.join(ROOT, 'node_modules/typescript/bin/tsc'),
        '--noEmit',
        '--allowJs',
        '--checkJs',
        '--strict',
        '--module',
        'NodeNext',
        '--moduleResolution',
        'NodeNext',
        '--skipLibCheck',
        '--types',
        'node',
        file,
      ],
      // tsc turns on node's compile cache, which would live in TMPDIR past the test
      { encoding: 'utf8', cwd: ROOT, env: { ...process.env, NODE_DISABLE_COMPILE_CACHE: '1' } },
    );
    assert.equal(tsc.status, 2, tsc.stdout);
    assert.match(
      tsc.stdout,
      /Property 'UPLOAD_MAX_BYTE' does not exist on type 'OriginConfig'\. Did you mean 'UPLOAD_MAX_BYTES'\?/,
    );
    assert.equal(tsc.stdout.trim().split('\n').length, 1, 'the right name passes');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('render.js refuses a flag it does not know, or a stray word, and renders nothing', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'render-flags-'));
  fs.chmodSync(dir, 0o755); // reachable by the stack's users, as a STACK_DIR must be
  try {
    const stackDir = path.join(dir, 'stack');
    /** @type {Array<[string[], RegExp]>} */
    const refused = [
      [['--check-promethus'], /^render: Unknown option '--check-promethus'/],
      [['dir-only'], /^render: Unexpected argument 'dir-only'/],
      [['--vcl-parts'], /^render: Option '--vcl-parts <value>' argument missing/],
    ];
    for (const [args, said] of refused) {
      const render = spawnSync(process.execPath, [path.join(ROOT, 'infra/render.js'), ...args], {
        encoding: 'utf8',
        env: { ...process.env, ENV_FILE: '/dev/null', STACK_DIR: stackDir },
      });
      assert.equal(render.status, 2, `${args}: ${render.stderr}`);
      assert.match(render.stderr, said);
      assert.equal(render.stdout, '');
      assert.ok(!fs.existsSync(stackDir), `${args}: nothing rendered`);
    }
    const known = spawnSync(process.execPath, [path.join(ROOT, 'infra/render.js'), '--dir-only'], {
      encoding: 'utf8',
      env: { ...process.env, ENV_FILE: '/dev/null', STACK_DIR: stackDir },
    });
    assert.equal(known.stdout, `${stackDir}\n`, known.stderr);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
