// A load generator in its own process, so that what it measures is not delayed by another generator's event
// loop: `open` sends requests at a fixed rate whatever the answers (the flood), `probe` sends one request
// at a time with a pause between them (a user on the fast path). Started by runChild(); prints one JSON line.
import { spawn } from 'node:child_process';
import { Pool } from 'undici';

/**
 * @typedef {{ mode: 'open', base: string, templates: string[], rate: number, seconds: number, first: number, span: number }} OpenSpec
 *   request i goes to templates[i % length] with {n} replaced by first + (i % span)
 * @typedef {{ mode: 'probe', base: string, paths: Record<string, string>, seconds: number, pauseMs: number }} ProbeSpec
 * @typedef {{ status: number, ms: number, reason?: string, retryAfter?: string }} Answer
 */

/** @param {Pool} pool @param {string} path @returns {Promise<Answer>} */
async function send(pool, path) {
  const sent = performance.now();
  const response = await pool.request({ method: 'GET', path });
  const text = response.statusCode >= 400 ? await response.body.text() : (await response.body.dump(), '');
  const ms = performance.now() - sent;
  let reason;
  try {
    reason = text ? (JSON.parse(text).error?.info?.reason ?? JSON.parse(text).error?.name) : undefined;
  } catch {
    reason = 'not json';
  }
  return { status: response.statusCode, ms, reason, retryAfter: /** @type {string | undefined} */ (response.headers['retry-after']) };
}

/** @param {OpenSpec} spec */
async function open(spec) {
  const pool = new Pool(spec.base, { connections: 512 });
  /** @type {Promise<Answer>[]} */
  const inFlight = [];
  const started = performance.now();
  while (performance.now() - started < spec.seconds * 1000) {
    const due = Math.floor(((performance.now() - started) / 1000) * spec.rate);
    for (let i = inFlight.length; i < due; i += 1) {
      inFlight.push(send(pool, spec.templates[i % spec.templates.length].replace('{n}', String(spec.first + (i % spec.span)))));
    }
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  const answers = await Promise.all(inFlight);
  await pool.close();
  return answers;
}

/** @param {ProbeSpec} spec */
async function probe(spec) {
  const pool = new Pool(spec.base, { connections: 1 });
  /** @type {Record<string, number[]>} */
  const latencies = Object.fromEntries(Object.keys(spec.paths).map((name) => [name, []]));
  const started = performance.now();
  while (performance.now() - started < spec.seconds * 1000) {
    for (const [name, path] of Object.entries(spec.paths)) {
      const answer = await send(pool, path);
      if (answer.status >= 400) throw new Error(`${name} answered ${answer.status}`);
      latencies[name].push(answer.ms);
    }
    await new Promise((resolve) => setTimeout(resolve, spec.pauseMs));
  }
  await pool.close();
  return latencies;
}

/**
 * Runs a generator in a child process and resolves with what it measured.
 * @template {OpenSpec | ProbeSpec} S
 * @param {S} spec
 * @returns {Promise<S extends OpenSpec ? Answer[] : Record<string, number[]>>}
 */
export function runChild(spec) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [new URL(import.meta.url).pathname, JSON.stringify(spec)], { stdio: ['ignore', 'pipe', 'inherit'] });
    let output = '';
    child.stdout.on('data', (chunk) => { output += chunk; });
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(output)) : reject(new Error(`load generator exited with ${code}`))));
  });
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const spec = /** @type {OpenSpec | ProbeSpec} */ (JSON.parse(process.argv[2]));
  const result = spec.mode === 'open' ? await open(spec) : await probe(spec);
  process.stdout.write(`${JSON.stringify(result)}\n`);
}
