// infra/docker/follow-address.sh, compose's follower of nginx's and varnish's next hops: run for real, with a
// `getent` of this test's own on PATH answering from a file, so names can move, vanish and come back.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { ROOT } from '../resolve.js';
import { waitFor } from '../../test/support/ports.js';

test('follow-address.sh runs its command when an address changes, never while a name does not resolve, and again after one failed', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'follow-address-'));
  const hosts = path.join(dir, 'hosts');
  const log = path.join(dir, 'reloads');
  // getent ahosts NAME: the lines of the hosts file naming it, as "ADDRESS STREAM NAME" (getent's shape)
  fs.writeFileSync(
    path.join(dir, 'getent'),
    `#!/bin/sh\nawk -v name="$2" '$1 == name { print $2 "  STREAM " name }' "${hosts}"\n`,
    { mode: 0o755 },
  );
  fs.writeFileSync(hosts, 'varnish 10.0.0.5\nhaproxy 10.0.0.6\n');
  // the command fails while a "fail" file exists
  const command = `[ ! -e ${dir}/fail ] && echo reloaded >> ${log}`;
  const follower = spawn(path.join(ROOT, 'infra/docker/follow-address.sh'), ['0.1', command, 'varnish', 'haproxy'], {
    env: { ...process.env, PATH: `${dir}:${process.env.PATH}` },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  t.after(() => follower.kill());
  let said = '';
  follower.stderr.on('data', (chunk) => (said += chunk));
  const reloads = () => (fs.existsSync(log) ? fs.readFileSync(log, 'utf8').split('\n').filter(Boolean).length : 0);
  const settle = () => new Promise((resolve) => setTimeout(resolve, 600));

  await settle();
  assert.equal(reloads(), 0, 'nothing at the first look, nor while nothing moves');

  fs.writeFileSync(hosts, 'varnish 10.0.0.7\nhaproxy 10.0.0.6\n');
  await waitFor(async () => reloads() === 1, 5000, 'a reload for the new address');
  assert.match(said, /varnish=10\.0\.0\.7 ;haproxy=10\.0\.0\.6 ; \(was varnish=10\.0\.0\.5 ;/);

  // haproxy gone (between a container's removal and its successor): the program would refuse its config
  fs.writeFileSync(hosts, 'varnish 10.0.0.7\n');
  await settle();
  assert.equal(reloads(), 1, 'no reload while a name does not resolve');
  fs.writeFileSync(hosts, 'varnish 10.0.0.7\nhaproxy 10.0.0.6\n');
  await settle();
  assert.equal(reloads(), 1, 'back where it was: nothing to do');

  // a failed reload is tried again at the next look, until it works
  fs.writeFileSync(path.join(dir, 'fail'), '');
  fs.writeFileSync(hosts, 'varnish 10.0.0.7\nhaproxy 10.0.0.8\n');
  await waitFor(async () => /failed; again at the next look/.test(said), 5000, 'the failure said');
  fs.rmSync(path.join(dir, 'fail'));
  await waitFor(async () => reloads() === 2, 5000, 'the reload tried again');
  await settle();
  assert.equal(reloads(), 2, 'once it worked, not again');
  fs.rmSync(dir, { recursive: true, force: true });
});
