// infra/follow-nodes.js: nginx is reloaded when a varnish node's name gets a new address (a pod replaced), once
// at the first look, and never while a name does not resolve. The whole path (a varnish pod deleted, nginx
// following it) is the cluster stage's (infra/kube/stage.js).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { followNodes } from '../follow-nodes.js';
import { waitFor } from '../../test/support/ports.js';

const script = fileURLToPath(new URL('../follow-nodes.js', import.meta.url));

test('a reload at the first look, at each change of an address, none while a name does not resolve', async () => {
  /** @type {Array<string[] | Error>} what the DNS answers for varnish-1, look after look */
  const answers = [['10.0.0.5'], ['10.0.0.5'], new Error('ENOTFOUND'), ['10.0.0.9'], ['10.0.0.9']];
  let looks = 0;
  /** @type {Array<[unknown, unknown]>} */
  const reloads = [];
  const stop = followNodes({
    nodes: ['varnish-0.varnish:6081', 'varnish-1.varnish:6081'],
    everyMs: 10,
    lookup: async (host) => {
      if (host === 'varnish-0.varnish') return ['10.0.0.1'];
      const answer = answers[Math.min(looks++, answers.length - 1)];
      if (answer instanceof Error) throw answer;
      return answer;
    },
    reload: (from, to) => reloads.push([from, to]),
  });
  await waitFor(async () => looks >= answers.length + 2, 5000, 'the looks');
  stop();
  const first = { 'varnish-0.varnish:6081': ['10.0.0.1'], 'varnish-1.varnish:6081': ['10.0.0.5'] };
  const second = { 'varnish-0.varnish:6081': ['10.0.0.1'], 'varnish-1.varnish:6081': ['10.0.0.9'] };
  assert.deepEqual(reloads, [
    [null, first],
    [first, second],
  ]);
});

test('the program: nginx (its pid file) gets SIGHUP at the first look, with one line saying so', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'follow-nodes-'));
  // a stand-in for nginx's master: it says when it is told to reload
  const master = spawn(process.execPath, [
    '-e',
    "process.on('SIGHUP', () => console.log('reload')); setInterval(() => {}, 1000)",
  ]);
  let told = '';
  master.stdout.on('data', (chunk) => (told += chunk));
  const pidFile = path.join(dir, 'nginx.pid');
  fs.writeFileSync(pidFile, `${master.pid}\n`);
  await new Promise((resolve) => setTimeout(resolve, 300)); // its SIGHUP handler in place
  const follower = spawn(process.execPath, [script, '--pid-file', pidFile, '--every', '0.2', 'localhost:6081']);
  let said = '';
  follower.stdout.on('data', (chunk) => (said += chunk));
  try {
    await waitFor(async () => told.includes('reload'), 10_000, 'nginx told to reload');
    const line = JSON.parse(said.trim().split('\n')[0]);
    assert.equal(line.msg, 'varnish node addresses: nginx reloads');
    assert.equal(line.pid, master.pid);
    assert.ok(line.to['localhost:6081'].length >= 1, said);
    // the addresses stay: no reload more
    await new Promise((resolve) => setTimeout(resolve, 1000));
    assert.equal(told.match(/reload/g)?.length, 1);
  } finally {
    follower.kill();
    master.kill();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('the program refuses to start without its pid file, interval or nodes', async () => {
  const follower = spawn(process.execPath, [script, '--every', '2']);
  let said = '';
  follower.stderr.on('data', (chunk) => (said += chunk));
  const code = await new Promise((resolve) => follower.on('exit', resolve));
  assert.equal(code, 2);
  assert.match(said, /usage: follow-nodes\.js/);
});
