// What `./infra/stack reload` does from what changed (infra/reload.js planReload): each program takes its new
// files the gentlest way it allows; one whose command line changed is restarted; programs this stack does not
// run are left alone. The whole reload against a running stack: test/reload.test.js.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { changedFiles, planReload, programSections, snapshot } from '../reload.js';
import { PROGRAMS } from '../resolve.js';

const conf = (/** @type {Record<string, string>} */ programs) =>
  programSections(
    `[supervisord]\nlogfile=x\n\n${Object.entries(programs)
      .map(([name, command]) => `[program:${name}]\ncommand=${command}\nautorestart=true\n`)
      .join('\n')}`,
  );
// what a one-box stack runs
const running = PROGRAMS.filter((name) => !['redis-sentinel', 'versitygw'].includes(name));
const programs = {
  redis: 'redis-server redis.conf',
  varnish: 'varnishd -s malloc,256m',
  nginx: 'nginx -c nginx.conf',
  haproxy: 'haproxy -W -db -f haproxy.cfg',
};

/** @param {string[]} changed @param {Record<string, string>} [after] */
const plan = (changed, after = programs) =>
  planReload({ changed, sectionsBefore: conf(programs), sectionsAfter: conf(after), running });

test('each program takes its own files: nginx and prometheus SIGHUP, haproxy new workers, varnish a new VCL, a service a restart', () => {
  const { steps, unapplied } = plan([
    'conf/nginx.conf',
    'conf/haproxy.cfg',
    'conf/varnish/policy.vcl',
    'conf/prometheus/prometheus.yml',
    'secrets/origin.env',
    'env',
    'conf/supervisord.conf',
  ]);
  assert.deepEqual(
    steps.map(({ program, action }) => `${program} ${action}`),
    ['origin restart', 'haproxy haproxy', 'varnish vcl', 'nginx hup', 'prometheus hup'],
  );
  assert.deepEqual(unapplied, []);
});

test('a setting of the origin alone restarts the origin alone; nothing changed, nothing done', () => {
  assert.deepEqual(
    plan(['env', 'secrets/origin.env']).steps.map((step) => step.program),
    ['origin'],
  );
  assert.deepEqual(plan([]).steps, []);
});

test('a service on a held socket is restarted by its holder (SIGHUP), its socket named; one on TCP by supervisord', () => {
  const held = {
    ...programs,
    origin: '/app/lib/bin/hold-socket "/srv/my stack/run/origin/origin.sock" /app/infra/with-secrets origin.env origin',
    'avatar-resolver': '/app/infra/with-secrets avatar-resolver.env avatar-resolver',
  };
  const { steps } = planReload({
    changed: ['secrets/origin.env', 'secrets/avatar-resolver.env'],
    sectionsBefore: conf(held),
    sectionsAfter: conf(held),
    running,
  });
  assert.deepEqual(
    steps.map(({ program, action, socket }) => [program, action, socket]),
    [
      ['origin', 'handover', '/srv/my stack/run/origin/origin.sock'],
      ['avatar-resolver', 'restart', undefined],
    ],
  );
});

test("a program whose command line changed is restarted with it (varnish's storage: its cache starts empty), once", () => {
  const { steps } = plan(['conf/supervisord.conf', 'conf/varnish/sizes.vcl'], {
    ...programs,
    varnish: 'varnishd -s malloc,512m',
  });
  assert.equal(steps.length, 1);
  assert.equal(steps[0].program, 'varnish');
  assert.equal(steps[0].action, 'restart');
  assert.match(steps[0].why, /cache starts empty/);
});

test('files of a program this stack does not run are left alone; a file no program reads is named', () => {
  const { steps, unapplied } = planReload({
    changed: ['secrets/versitygw.env', 'conf/something-new.conf'],
    sectionsBefore: conf(programs),
    sectionsAfter: conf(programs),
    running,
  });
  assert.deepEqual(steps, []);
  assert.deepEqual(unapplied, ['conf/something-new.conf']);
});

test('snapshot and changedFiles: a file changed, added or removed under conf/, secrets/ or env', () => {
  const before = fs.mkdtempSync(path.join(os.tmpdir(), 'reload-'));
  const after = fs.mkdtempSync(path.join(os.tmpdir(), 'reload-'));
  for (const dir of [before, after]) {
    fs.mkdirSync(path.join(dir, 'conf', 'nginx'), { recursive: true });
    fs.writeFileSync(path.join(dir, 'env'), "A='1'\n");
    fs.writeFileSync(path.join(dir, 'conf', 'nginx', 'same.lua'), 'same');
    fs.mkdirSync(path.join(dir, 'logs'));
  }
  fs.writeFileSync(path.join(before, 'conf', 'nginx.conf'), 'old');
  fs.writeFileSync(path.join(after, 'conf', 'nginx.conf'), 'new');
  fs.writeFileSync(path.join(after, 'conf', 'added.conf'), 'x');
  fs.writeFileSync(path.join(before, 'conf', 'removed.conf'), 'x');
  fs.writeFileSync(path.join(after, 'logs', 'nginx.log'), 'not compared');
  assert.deepEqual(changedFiles(snapshot(before), snapshot(after)), [
    'conf/added.conf',
    'conf/nginx.conf',
    'conf/removed.conf',
  ]);
  fs.rmSync(before, { recursive: true });
  fs.rmSync(after, { recursive: true });
});
