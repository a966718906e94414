// infra/wait-healthy.js's varnish check: `up` is done only once varnish's own probes call its backends healthy,
// asked of a real varnishd whose backend starts down (its probes fail, as they did while a service started
// behind haproxy) and then comes up.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { waitFor } from '../../test/support/ports.js';
import { varnishBackendsHealthy } from '../wait-healthy.js';

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
