// lib/src/hold-socket.js: a service on a socket its parent holds is restarted, or dies and is started again,
// without one connection refused; the requests of the gap wait in the socket's backlog.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { waitFor } from '../../test/support/ports.js';
import { alive } from '../../test/support/processes.js';
import { servicePid } from '../src/hold-socket.js';

const holder = fileURLToPath(new URL('../src/hold-socket.js', import.meta.url));

// answers its pid; /slow after 400 ms, /slower after 3 s; it takes 300 ms (PROBE_LOAD_MS) to load, as a real
// service's code takes a while
const probe = `
  import fs from 'node:fs';
  import { runService, sharedSettings, commonSettings } from '@stack/lib';
  const DELAYS = { '/slow': 400, '/slower': 3000 };
  await new Promise((resolve) => setTimeout(resolve, Number(process.env.PROBE_LOAD_MS || 300)));
  // PROBE_BROKEN: while that file exists, the code does not load (a checkout with an error)
  if (process.env.PROBE_BROKEN && fs.existsSync(process.env.PROBE_BROKEN)) throw new Error('the code does not load');
  await runService({
    name: 'probe',
    settings: [...sharedSettings, ...commonSettings('probe', 0, 0)],
    build: async () => {
      // PROBE_LOCK: a file one process at a time holds, from its build to its exit (and not handed over)
      if (process.env.PROBE_LOCK) {
        fs.writeFileSync(process.env.PROBE_LOCK, String(process.pid), { flag: 'wx' });
        process.on('exit', () => fs.rmSync(process.env.PROBE_LOCK));
      }
      return { app: (req, res) => setTimeout(() => res.end(String(process.pid)), DELAYS[req.url] ?? 0) };
    },
  });
`;

/** GET a path over a Unix socket: its status and body, or the error's code (TIMEOUT after 10 s). @param {string} socket @param {string} url */
function get(socket, url) {
  return new Promise((resolve) => {
    const request = http.get({ socketPath: socket, path: url, agent: false, timeout: 10_000 }, (res) => {
      let body = '';
      res.on('data', (chunk) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode, body }));
    });
    request.on('error', (/** @type {any} */ err) => resolve({ status: 0, body: err.code }));
    // no answer in 10 s: a failure, not a test that waits for ever
    request.on('timeout', () => request.destroy(Object.assign(new Error('no answer'), { code: 'TIMEOUT' })));
  });
}

/**
 * Runs the probe under the holder (with its `options`); calls use(). @param {Record<string, string>} env
 * @param {(socket: string, holder: import('node:child_process').ChildProcess, output: () => string) => Promise<void>} use
 * @param {string[]} [options]
 */
async function withHeld(env, use, options = []) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'held-'));
  const socket = path.join(dir, 'probe.sock');
  const child = spawn(
    process.execPath,
    [holder, ...options, socket, process.execPath, '--input-type=module', '-e', probe],
    {
      cwd: path.dirname(holder),
      env: { ...process.env, LOG_LEVEL: 'info', PROBE_SOCKET: socket, SHUTDOWN_DRAIN_S: '5', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let output = '';
  child.stdout?.on('data', (chunk) => (output += chunk));
  child.stderr?.on('data', (chunk) => (output += chunk));
  try {
    await use(socket, child, () => output);
  } finally {
    child.kill('SIGKILL');
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** Asks every 5 ms until stop() resolves; every answer. @param {string} socket @param {Promise<unknown>} until */
async function askThrough(socket, until) {
  /** @type {Array<Promise<any>>} */
  const answers = [];
  let done = false;
  until.finally(() => (done = true));
  while (!done) {
    answers.push(get(socket, '/'));
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  return Promise.all(answers);
}

/** The pid answering on the socket, once it answers. @param {string} socket */
async function servingPid(socket) {
  /** @type {any} */
  let answer;
  await waitFor(async () => (answer = await get(socket, '/')).status === 200, 10_000, 'the probe to answer');
  return Number(answer.body);
}

test('a service killed is started again at once: every request of the gap waits for it, none is refused', async () => {
  await withHeld({}, async (socket, holderProcess, output) => {
    const first = await servingPid(socket);
    process.kill(first, 'SIGKILL');
    /** @type {number} */
    let second = first;
    const answers = await askThrough(
      socket,
      waitFor(async () => (second = Number((await get(socket, '/')).body)) !== first, 10_000, 'a new process'),
    );
    assert.ok(answers.length > 20, `${answers.length} requests across the gap`);
    assert.deepEqual(
      answers.filter((answer) => answer.status !== 200),
      [],
      'no request of the gap failed',
    );
    assert.ok(alive(second) && second !== holderProcess.pid);
    // (its log is flushed within a second)
    await waitFor(async () => /service exited; starting it again/.test(output()), 3000, 'the restart logged');
  });
});

test('SIGHUP: the next process takes over without its drain; the request in flight is answered by the old one', async () => {
  await withHeld({}, async (socket, holderProcess) => {
    const first = await servingPid(socket);
    const inFlight = get(socket, '/slow');
    await new Promise((resolve) => setTimeout(resolve, 100));
    const asked = Date.now();
    holderProcess.kill('SIGHUP');
    /** @type {number} */
    let second = first;
    const answers = await askThrough(
      socket,
      waitFor(async () => (second = Number((await get(socket, '/')).body)) !== first, 10_000, 'a new process'),
    );
    assert.ok(Date.now() - asked < 4000, `restarted in ${Date.now() - asked} ms: not after the 5 s drain`);
    assert.deepEqual(await inFlight, { status: 200, body: String(first) });
    assert.deepEqual(
      answers.filter((answer) => answer.status !== 200),
      [],
      'no request of the restart failed',
    );
    await waitFor(async () => !alive(first), 10_000, 'the old process gone');
    assert.ok(alive(second));
  });
});

test('SIGHUP: the next process serves at once while the old one still answers a long request', async () => {
  await withHeld({}, async (socket, holderProcess, output) => {
    const first = await servingPid(socket);
    let answered = false;
    const inFlight = get(socket, '/slower').finally(() => (answered = true));
    await new Promise((resolve) => setTimeout(resolve, 100));
    const asked = Date.now();
    holderProcess.kill('SIGHUP');
    const second = await waitFor(
      async () => Number((await get(socket, '/')).body) !== first,
      10_000,
      'the next process to answer',
    ).then(() => servingPid(socket));
    // the old one's request takes 3 s: the next process answers well before it (it used to start after)
    assert.ok(!answered && Date.now() - asked < 2500, `the next process answered after ${Date.now() - asked} ms`);
    assert.ok(alive(first), 'the old process still answering');
    assert.equal(servicePid(/** @type {number} */ (holderProcess.pid)), second, 'the service named is the new one');
    assert.deepEqual(await inFlight, { status: 200, body: String(first) });
    await waitFor(async () => !alive(first), 10_000, 'the old process gone');
    assert.ok(alive(second) && second !== first);
    await waitFor(async () => /the old process of a restart has exited/.test(output()), 3000, 'its exit logged');
  });
});

test('SIGTERM while the old process of a restart still answers: the holder waits for it, then exits 0', async () => {
  await withHeld({ SHUTDOWN_DRAIN_S: '0' }, async (socket, holderProcess) => {
    const first = await servingPid(socket);
    const inFlight = get(socket, '/slower');
    await new Promise((resolve) => setTimeout(resolve, 100));
    holderProcess.kill('SIGHUP');
    await waitFor(async () => Number((await get(socket, '/')).body) !== first, 10_000, 'the next process');
    const second = await servingPid(socket);
    const exited = once(holderProcess, 'exit');
    holderProcess.kill('SIGTERM');
    assert.deepEqual(await inFlight, { status: 200, body: String(first) }, 'the old request not cut');
    const [code] = await exited;
    assert.equal(code, 0);
    assert.ok(!alive(first) && !alive(second), 'both processes gone with the holder');
  });
});

test('SIGHUP: the next process loads while the old one still serves; a request meanwhile is answered by the old one at once', async () => {
  await withHeld({ PROBE_LOAD_MS: '3000' }, async (socket, holderProcess) => {
    const first = await servingPid(socket);
    holderProcess.kill('SIGHUP');
    await new Promise((resolve) => setTimeout(resolve, 500));
    const asked = Date.now();
    const answer = /** @type {any} */ (await get(socket, '/'));
    // before: the old one stopped accepting at the SIGHUP, and this request waited for the next one's load
    assert.deepEqual(answer, { status: 200, body: String(first) }, 'answered by the old one');
    assert.ok(Date.now() - asked < 1500, `answered after ${Date.now() - asked} ms`);
    await waitFor(async () => Number((await get(socket, '/')).body) !== first, 10_000, 'the next one serving');
    await waitFor(async () => !alive(first), 10_000, 'the old one gone');
  });
});

test('SIGHUP with code that does not load: the running one keeps serving, every request answered; the next SIGHUP works', async () => {
  const broken = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'probe-broken-')), 'broken');
  try {
    await withHeld({ PROBE_BROKEN: broken }, async (socket, holderProcess, output) => {
      const first = await servingPid(socket);
      fs.writeFileSync(broken, '');
      holderProcess.kill('SIGHUP');
      const failed = waitFor(async () => /exited before it took over/.test(output()), 10_000, 'the next one given up');
      const answers = await askThrough(socket, failed);
      assert.ok(answers.length > 10, `${answers.length} answers`);
      for (const answer of answers) assert.deepEqual(answer, { status: 200, body: String(first) });
      assert.match(output(), /the running one keeps serving/);
      assert.equal(holderProcess.exitCode, null, 'the holder still runs');
      fs.rmSync(broken);
      holderProcess.kill('SIGHUP');
      await waitFor(async () => Number((await get(socket, '/')).body) !== first, 10_000, 'the next one serving');
    });
  } finally {
    fs.rmSync(path.dirname(broken), { recursive: true, force: true });
  }
});

test('SIGHUP to a service that needs what the old one holds until it exits: the next starts again after it', async () => {
  const lock = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'probe-lock-')), 'lock');
  try {
    await withHeld({ PROBE_LOCK: lock }, async (socket, holderProcess, output) => {
      const first = await servingPid(socket);
      const inFlight = get(socket, '/slower');
      await new Promise((resolve) => setTimeout(resolve, 100));
      holderProcess.kill('SIGHUP');
      await waitFor(async () => /started again once that has exited/.test(output()), 30_000, 'the next one refused');
      const second = await servingPid(socket);
      assert.notEqual(second, first);
      assert.deepEqual(await inFlight, { status: 200, body: String(first) });
      assert.equal(holderProcess.exitCode, null, 'the holder still runs');
      assert.equal(fs.readFileSync(lock, 'utf8'), String(second));
    });
  } finally {
    fs.rmSync(path.dirname(lock), { recursive: true, force: true });
  }
});

test('SIGHUP to a service that does not stop (hung): killed after --stop-wait-s, and the next one serves', async () => {
  await withHeld(
    {},
    async (socket, holderProcess) => {
      const first = await servingPid(socket);
      process.kill(first, 'SIGSTOP');
      try {
        const asked = Date.now();
        holderProcess.kill('SIGHUP');
        const answer = /** @type {any} */ (await get(socket, '/'));
        assert.equal(answer.status, 200);
        assert.notEqual(Number(answer.body), first);
        assert.ok(Date.now() - asked >= 1900, `answered after ${Date.now() - asked} ms: not before the stop wait`);
        await waitFor(async () => !alive(first), 10_000, 'the hung process killed');
      } finally {
        if (alive(first)) process.kill(first, 'SIGKILL');
      }
    },
    ['--stop-wait-s', '2'],
  );
});

test('SIGTERM: the service stops (with its drain), then the holder, exit 0, and the socket is removed', async () => {
  await withHeld({ SHUTDOWN_DRAIN_S: '0' }, async (socket, holderProcess) => {
    const served = await servingPid(socket);
    const exited = once(holderProcess, 'exit');
    holderProcess.kill('SIGTERM');
    const [code] = await exited;
    assert.equal(code, 0);
    assert.ok(!alive(served), 'the service stopped with it');
    assert.ok(!fs.existsSync(socket), 'no socket left');
  });
});

test('the holder killed: its service stops by itself (nothing would start it again)', async () => {
  await withHeld({ SHUTDOWN_DRAIN_S: '0' }, async (socket, holderProcess) => {
    const served = await servingPid(socket);
    holderProcess.kill('SIGKILL');
    await waitFor(async () => !alive(served), 10_000, 'the orphaned service to stop');
  });
});

test('a service that exits before it listens (a bad setting) ends the holder with its code', async () => {
  await withHeld({ SHUTDOWN_DRAIN_S: 'soon' }, async (_socket, holderProcess, output) => {
    const [code] = await once(holderProcess, 'exit');
    assert.equal(code, 2);
    assert.match(output(), /SHUTDOWN_DRAIN_S/);
    assert.match(output(), /service exited before it listened/);
  });
});
