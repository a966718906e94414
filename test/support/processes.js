import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort, waitFor } from './ports.js';

const root = path.resolve(import.meta.dirname, '../..');

// whether a process of this pid exists (the one reader of it: lib's, which counts another user's too)
export { alive } from '../../lib/src/process-tree.js';

/**
 * A child process whose output is kept for the failure message; stop() is SIGTERM, kill() SIGKILL.
 * @param {string} command @param {string[]} args @param {Record<string, string>} [env]
 */
export function startProcess(command, args, env = {}) {
  const child = spawn(command, args, { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const keep = (/** @type {Buffer} */ chunk) => {
    output = (output + chunk.toString()).slice(-20_000);
  };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  const exited = new Promise((resolve) => child.once('exit', resolve));
  return {
    child,
    exited,
    output: () => output,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 3000))]);
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
    async kill() {
      child.kill('SIGKILL');
      await exited;
    },
  };
}

/** A real redis-server on a free port, no persistence unless asked. @param {{ dir?: string, appendonly?: boolean }} [options] */
export async function startRedis(options = {}) {
  const port = await freePort();
  const dir = options.dir || fs.mkdtempSync(path.join(os.tmpdir(), 'redis-'));
  const args = [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--dir',
    dir,
    '--save',
    '',
    '--appendonly',
    options.appendonly ? 'yes' : 'no',
  ];
  if (options.appendonly) args.push('--appendfsync', 'always');
  const proc = startProcess('redis-server', args);
  const { Redis } = await import('ioredis');
  const client = new Redis(port, '127.0.0.1', { maxRetriesPerRequest: 1, retryStrategy: () => 50 });
  client.on('error', () => {});
  await waitFor(async () => (await client.ping()) === 'PONG', 10_000, 'redis');
  return {
    port,
    dir,
    url: `redis://127.0.0.1:${port}/0`,
    client,
    proc,
    async stop() {
      client.disconnect();
      await this.proc.stop();
      // a directory it made is its own to remove; one given stays the caller's
      if (!options.dir) fs.rmSync(dir, { recursive: true, force: true });
    },
    /** Restart on the same port and directory (what a crash then a supervisor restart looks like). */
    async restart() {
      await proc.kill();
      const again = startProcess('redis-server', args);
      this.proc = again;
      await waitFor(async () => (await client.ping().catch(() => null)) === 'PONG', 10_000, 'redis restart');
    },
  };
}

/**
 * Starts one of our Node services as its own process and waits for /healthz.
 * @param {string} script e.g. origin/bin/origin @param {Record<string, string>} env @param {number} port
 * @param {string[]} [through] a command it is started through (e.g. taskset -c 0)
 */
export async function startService(script, env, port, through = []) {
  const file = path.join(root, script);
  const [command, ...args] = [...through, file];
  const proc = startProcess(command, args, { LOG_LEVEL: 'warn', ...env });
  try {
    await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/healthz`)).ok, 15_000, `${script} health`);
  } catch (err) {
    await proc.stop();
    throw new Error(`${/** @type {Error} */ (err).message}\n${proc.output()}`);
  }
  return proc;
}

export { root };
