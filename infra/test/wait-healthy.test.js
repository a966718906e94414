// infra/wait-healthy.js's varnish check: `up` is done only once varnish's own probes call its backends healthy,
// asked of a real varnishd whose backend starts down (its probes fail, as they did while a service started
// behind haproxy) and then comes up. And its last step: `up` is done only once a real supervisord calls every
// program RUNNING (past its startsecs), never while one is STARTING or one that answered has died since.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { waitFor } from '../../test/support/ports.js';
import { startProcess } from '../../test/support/processes.js';
import { notRunning, varnishBackendsHealthy } from '../wait-healthy.js';

/** A port nothing listens on now: one the system gave and took back. */
async function freePort() {
  const server = http.createServer().listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  const { port } = /** @type {import('node:net').AddressInfo} */ (server.address());
  await new Promise((resolve) => server.close(resolve));
  return port;
}

test("varnish's backends: not healthy while its probes fail, healthy once one passes", async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wait-healthy-'));
  fs.chmodSync(dir, 0o755);
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const port = await freePort();
  // the stack's probe (vcl/default.vcl.template), faster
  const vcl = path.join(dir, 'test.vcl');
  fs.writeFileSync(
    vcl,
    `vcl 4.1;
probe health { .url = "/healthz"; .interval = 0.2s; .timeout = 1s; .window = 3; .threshold = 1; .initial = 1; }
backend service { .host = "127.0.0.1"; .port = "${port}"; .probe = health; }
`,
  );
  const workdir = path.join(dir, 'varnish');
  const varnishd = spawn('varnishd', ['-F', '-n', workdir, '-a', '127.0.0.1:0', '-f', vcl, '-s', 'malloc,16m'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let said = '';
  varnishd.stdout.on('data', (chunk) => (said += chunk));
  varnishd.stderr.on('data', (chunk) => (said += chunk));
  t.after(() => varnishd.kill('SIGKILL'));
  const healthy = varnishBackendsHealthy(workdir);
  // its first probes fail: sick once 3 in a row did
  await waitFor(
    async () => {
      const { stdout } = await run('varnishadm', ['-n', workdir, 'backend.list']).catch(() => ({ stdout: '' }));
      return /\ssick\b/.test(stdout);
    },
    15_000,
    `varnish's backend sick (${said})`,
  );
  assert.equal(await healthy(), false, 'sick: not healthy');
  // the service comes up: healthy again after one good probe
  const service = http.createServer((request, response) => response.end('ok')).listen(port, '127.0.0.1');
  t.after(() => service.close());
  await waitFor(healthy, 15_000, "varnish's backend healthy");
});

test('supervisord: a program is up once RUNNING, past its startsecs; one that keeps dying never is', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wait-supervised-'));
  /** @type {ReturnType<typeof startProcess> | undefined} */
  let supervisord;
  // supervisord ended (its programs with it) before its directory goes: nothing of it is left in TMPDIR
  t.after(async () => {
    await supervisord?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const conf = path.join(dir, 'supervisord.conf');
  const program = (/** @type {string} */ name, /** @type {string} */ command, /** @type {number} */ startsecs) =>
    `[program:${name}]\ncommand=${command}\nautorestart=true\nstartsecs=${startsecs}\nstartretries=1\n`;
  fs.writeFileSync(
    conf,
    [
      `[unix_http_server]\nfile=${dir}/supervisor.sock\nchmod=0700\n`,
      `[supervisord]\nlogfile=${dir}/supervisord.log\npidfile=${dir}/supervisord.pid\nchilddir=${dir}\nchildlogdir=${dir}\n`,
      '[rpcinterface:supervisor]\nsupervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface\n',
      `[supervisorctl]\nserverurl=unix://${dir}/supervisor.sock\n`,
      program('steady', 'sleep 600', 3),
      // answers for half a second, then exits: what a health check could catch alive
      program('brief', "sh -c 'sleep 0.5; exit 1'", 1),
    ].join('\n'),
  );
  // no supervisord yet: nothing is running
  const before = await notRunning(conf);
  assert.equal(before.length, 1);
  assert.match(before[0], /^supervisord: .*supervisor\.sock/);
  supervisord = startProcess('supervisord', ['--nodaemon', '-c', conf]);
  await waitFor(async () => (await notRunning(conf)).includes('steady STARTING'), 10_000, 'steady STARTING');
  await waitFor(
    async () => !(await notRunning(conf)).some((state) => state.startsWith('steady ')),
    15_000,
    'steady RUNNING',
  );
  const left = await notRunning(conf);
  assert.equal(left.length, 1, left.join(', '));
  assert.match(left[0], /^brief (STARTING|BACKOFF|FATAL)$/);
});

/**
 * A program's output. @param {string} program @param {string[]} args
 * @returns {Promise<{ stdout: string }>}
 */
function run(program, args) {
  return new Promise((resolve, reject) => {
    const child = spawn(program, args, { stdio: ['ignore', 'pipe', 'ignore'] });
    let stdout = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve({ stdout }) : reject(new Error(`${program}: exit ${code}`))));
  });
}
